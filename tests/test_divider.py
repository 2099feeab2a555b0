"""The division and remainder macro (divider.py) against Python's integer arithmetic (not the
simulator): every operand pair at 4 bits (and at 8 bits, slow) for $div, $mod, $divfloor, $modfloor,
unsigned, signed and mixed (which Yosys treats as unsigned); every output bit 0/1, every positive
pre-activation <= 256 and every weight a bfloat16 value."""

import pytest

from netlist2tf.divider import bf16_weight, expand_div
from netlist2tf.ir import Cell


def _python(kind, a, b):
    if b == 0:
        return 0                       # the simulator's x (Yosys leaves it undefined)
    if kind in ("$div", "$mod"):
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return q if kind == "$div" else a - b * q
    return a // b if kind == "$divfloor" else a % b


def _check(kind, aw, bw, yw, sa, sb):
    A = tuple(range(3, 3 + aw))
    B = tuple(range(3 + aw, 3 + aw + bw))
    Y = tuple(range(3 + aw + bw, 3 + aw + bw + yw))
    cell = Cell("c", kind, (("A_SIGNED", sa), ("B_SIGNED", sb), ("A_WIDTH", aw), ("B_WIDTH", bw),
                            ("Y_WIDTH", yw)), (("A", A), ("B", B)), (("Y", Y),), "")
    fns, _, _ = expand_div(cell, 1000, set(Y))
    for f in fns:
        for terms, bias, _ in f.relus():
            assert bias + sum(w for _, _, w in terms if w > 0) <= 256
            assert all(bf16_weight(w) for _, _, w in terms) and bf16_weight(bias)
    signed = sa and sb

    def val(x, w):
        return x - (1 << w) if signed and x >> (w - 1) & 1 else x
    for x in range(1 << aw):
        for y in range(1 << bw):
            bits = {n: (x >> i) & 1 for i, n in enumerate(A)} | {n: (y >> i) & 1 for i, n in enumerate(B)}
            for f in fns:
                bits[f.out] = f.value(bits)
                assert bits[f.out] in (0, 1)
            got = sum(bits[n] << i for i, n in enumerate(Y))
            assert got == _python(kind, val(x, aw), val(y, bw)) % (1 << yw), (kind, sa, sb, x, y)


KINDS = ["$div", "$mod", "$divfloor", "$modfloor"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sa, sb", [(0, 0), (1, 1), (1, 0)])
def test_four_bits_exhaustive(kind, sa, sb):
    _check(kind, 4, 4, 5, sa, sb)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sa, sb", [(0, 0), (1, 1)])
def test_eight_bits_exhaustive(kind, sa, sb):
    _check(kind, 8, 8, 9, sa, sb)
