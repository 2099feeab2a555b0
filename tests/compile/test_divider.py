"""The division and remainder macros (divider.py) against Python's integer arithmetic (not the
simulator): the one-layer thermometer macro on every operand pair at 4 bits (and at 8 bits, slow) for
$div, $mod, $divfloor, $modfloor, unsigned, signed and mixed (which Yosys treats as unsigned); the
long division on every pair at 4 bits and random and edge pairs at 8, 16 and 32 bits; every output
bit 0/1, every positive pre-activation <= 256 and every weight a bfloat16 value."""

import pytest

from netlist2tf.compile.divider import bf16_weight, expand_div, expand_wide_div
from netlist2tf.netlist.ir import Cell


def _python(kind, a, b):
    if b == 0:
        return 0                       # the simulator's x (Yosys leaves it undefined)
    if kind in ("$div", "$mod"):
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return q if kind == "$div" else a - b * q
    return a // b if kind == "$divfloor" else a % b


def _check(kind, aw, bw, yw, sa, sb, pairs=None, expand=expand_div):
    A = tuple(range(3, 3 + aw))
    B = tuple(range(3 + aw, 3 + aw + bw))
    Y = tuple(range(3 + aw + bw, 3 + aw + bw + yw))
    cell = Cell("c", kind, (("A_SIGNED", sa), ("B_SIGNED", sb), ("A_WIDTH", aw), ("B_WIDTH", bw),
                            ("Y_WIDTH", yw)), (("A", A), ("B", B)), (("Y", Y),), "")
    fns, _, _ = expand(cell, 1000, set(Y))
    for f in fns:
        for terms, bias, _ in f.relus():
            assert bias + sum(w for _, _, w in terms if w > 0) <= 256
            assert all(bf16_weight(w) for _, _, w in terms) and bf16_weight(bias)
    signed = sa and sb

    def val(x, w):
        return x - (1 << w) if signed and x >> (w - 1) & 1 else x
    for x, y in pairs or [(x, y) for x in range(1 << aw) for y in range(1 << bw)]:
        bits = {n: (x >> i) & 1 for i, n in enumerate(A)} | {n: (y >> i) & 1 for i, n in enumerate(B)}
        bits |= {0: 0, 1: 1, 2: 0}                 # the constant nets
        for f in fns:
            bits[f.out] = f.value(bits)
            assert bits[f.out] in (0, 1)
        got = sum(bits[n] << i for i, n in enumerate(Y))
        assert got == _python(kind, val(x, aw), val(y, bw)) % (1 << yw), (kind, sa, sb, x, y)
    return fns, Y


def _depth(fns, Y) -> int:
    level = {}
    for f in fns:
        level[f.out] = 1 + max((level.get(n, 0) for n in f.support), default=0)
    return max(level.get(n, 0) for n in Y)


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


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sa, sb", [(0, 0), (1, 1), (1, 0)])
def test_long_division_four_bits_exhaustive(kind, sa, sb):
    """The long division itself (the one-layer macro takes these widths in the compiler) on every
    pair: a digit, the signs, the zero divisor."""
    _check(kind, 4, 4, 5, sa, sb, expand=expand_wide_div)


@pytest.mark.parametrize("w", [8, 16, pytest.param(32, marks=pytest.mark.slow)])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("signed", [False, True])
def test_long_division_random_operands(kind, signed, w):
    """Random and edge operands (0, 1, 2, the extremes, a divisor shorter than the dividend) at 8, 16
    and 32 bits; the depth at most 4 levels per 4 quotient bits after the divisor's multiples (4),
    and the sign handling's 4 to 14 more."""
    import random
    rng = random.Random(f"{kind}{signed}{w}")
    edges = [0, 1, 2, 3, (1 << w) - 1, 1 << (w - 1), (1 << (w - 1)) - 1, (1 << (w - 1)) + 1]
    pairs = [(a, b) for a in edges for b in edges] + \
        [(rng.getrandbits(w), rng.getrandbits(rng.randrange(1, w + 1))) for _ in range(120 if w < 32 else 60)]
    fns, Y = _check(kind, w, w, w, int(signed), int(signed), pairs, expand=expand_wide_div)
    depth, most = _depth(fns, Y), 4 + 4 * (w // 4)        # 8 bits: 8, 16: 20, 32: 36 unsigned
    assert depth <= (most + 14 if signed else most), depth


def _wide_netlist(kind, w, signed, tmp_path):
    """A one-operator design: Verilog's / and % ($div, $mod), Amaranth's // and % ($divfloor,
    $modfloor), synthesized by the compiler's CPU flow (macro6)."""
    from netlist2tf.frontend.synth import synthesize
    from netlist2tf.netlist.ir import parse_netlist
    if kind in ("$divfloor", "$modfloor"):
        shape = f"{'signed' if signed else 'unsigned'}({w})"
        src = tmp_path / "d.py"
        src.write_text("from amaranth import Module, signed, unsigned\nfrom amaranth.lib import wiring\n"
                       "from amaranth.lib.wiring import In, Out\n\n\nclass D(wiring.Component):\n"
                       f"    a: In({shape})\n    b: In({shape})\n    y: Out({w})\n\n"
                       "    def elaborate(self, platform):\n        m = Module()\n"
                       f"        m.d.comb += self.y.eq(self.a {'//' if kind == '$divfloor' else '%'} self.b)\n"
                       "        return m\n")
        design = f"{src}:D"
    else:
        sign = "signed " if signed else ""
        src = tmp_path / "d.v"
        src.write_text(f"module d(input {sign}[{w - 1}:0] a, input {sign}[{w - 1}:0] b, output [{w - 1}:0] y);\n"
                       f"  assign y = a {'/' if kind == '$div' else '%'} b;\nendmodule\n")
        design = str(src)
    return parse_netlist(synthesize(design, "macro6", tmp_path / "build").json_text)


def _lowered_values(sched, netlist, inputs: dict) -> dict:
    """Every scheduled unit's bit functions (what the FFN neurons compute) evaluated layer by layer
    on the input ports' values: {net: bit}."""
    bits = {0: 0, 1: 1, 2: 0}
    for port in netlist.inputs:
        bits.update({n: (inputs[port.name] >> i) & 1 for i, n in enumerate(port.bits)})
    for unit in sorted(sched.cell_layer, key=lambda u: sched.cell_layer[u]):
        for f in sched.functions[unit]:
            if hasattr(f, "value"):
                bits[f.out] = f.value(bits)
            else:
                bits[f.out] = (f.table >> sum(bits[n] << i for i, n in enumerate(f.support))) & 1
    return bits


WIDE = [(k, s, 16) for k in KINDS for s in (False, True) if s or k in ("$div", "$mod")] + \
    [pytest.param(k, s, 32, marks=pytest.mark.slow) for k in KINDS for s in (False, True) if s or k in ("$div", "$mod")]


@pytest.mark.parametrize("kind, signed, w", WIDE)
def test_wide_dividers_against_python(kind, signed, w, tmp_path):
    """16- and 32-bit division and remainder through the compile flow (the macro flow keeps the cell,
    the compiler builds the long division and schedules it) on random and edge operands, the
    scheduled bit functions evaluated against Python's integers; a zero divisor gives 0, as the
    simulator of the same netlist says."""
    import random
    from netlist2tf.compile.schedule import schedule
    from netlist2tf.sim.simulator import Simulator
    from netlist2tf.compile.target import Target
    from netlist2tf.compile.plan import standalone_layer_types
    nl = _wide_netlist(kind, w, signed, tmp_path)
    sched = schedule(nl, Target(1 << 30, 1 << 30, standalone_layer_types(1024), 1, 1, 64, 64, 1, 1, 16, name="probe"))
    (y,) = nl.outputs
    rng = random.Random(f"{kind}{signed}{w}")
    edges = [0, 1, 2, (1 << w) - 1, 1 << (w - 1), (1 << (w - 1)) - 1, (1 << (w - 1)) + 1]
    pairs = [(a, b) for a in edges for b in edges] + [(rng.getrandbits(w), rng.getrandbits(rng.randrange(1, w + 1)))
                                                      for _ in range(300)]
    sim = Simulator(nl)

    def val(x):
        return x - (1 << w) if signed and x >> (w - 1) & 1 else x
    for a, b in pairs:
        bits = _lowered_values(sched, nl, {"a": a, "b": b})
        got = sum(bits[n] << i for i, n in enumerate(y.bits))
        if b == 0:
            assert got == int(sim.step({"a": a, "b": b})["y"]), (a, b)
        else:
            assert got == _python(kind, val(a), val(b)) % (1 << w), (kind, signed, a, b)


@pytest.mark.parametrize("kind", KINDS)
def test_long_division_by_constants(kind):
    """A constant divisor (negative too: its magnitude folds at build time) and a constant
    dividend, 12 bits signed, against Python on every value of the other operand."""
    from netlist2tf.netlist.ir import CONST0, CONST1

    for const in (-7, 5, -2048, 1):
        for which in ("B", "A"):
            w = 12
            sig = lambda base: tuple(range(base, base + w))                       # noqa: E731
            bits = tuple(CONST1 if (const % (1 << w)) >> i & 1 else CONST0 for i in range(w))
            A, B = (sig(3), bits) if which == "B" else (bits, sig(3))
            Y = tuple(range(3 + w, 3 + 2 * w))
            cell = Cell("c", kind, (("A_SIGNED", 1), ("B_SIGNED", 1), ("A_WIDTH", w), ("B_WIDTH", w), ("Y_WIDTH", w)),
                        (("A", A), ("B", B)), (("Y", Y),), "")
            fns, _, _ = expand_wide_div(cell, 1000, set(Y))
            for x in list(range(0, 1 << w, 61)) + [(1 << w) - 1, 1 << (w - 1)]:
                v = x - (1 << w) if x >> (w - 1) else x
                vals = {0: 0, 1: 1, 2: 0} | {n: (x >> i) & 1 for i, n in enumerate(sig(3))}
                for f in fns:
                    vals[f.out] = f.value(vals)
                got = sum(vals[n] << i for i, n in enumerate(Y))
                a, bb = (v, const) if which == "B" else (const, v)
                assert got == _python(kind, a, bb) % (1 << w), (kind, const, which, x)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("signed", [False, True])
def test_long_division_eight_bits_exhaustive(kind, signed):
    """The long division on all 65,536 pairs of 8-bit operands (the circuit evaluated on NumPy
    arrays, every output bit 0/1) against Python's integers."""
    import numpy as np

    w = 8
    A, B, Y = tuple(range(3, 3 + w)), tuple(range(3 + w, 3 + 2 * w)), tuple(range(3 + 2 * w, 3 + 3 * w))
    cell = Cell("c", kind, (("A_SIGNED", int(signed)), ("B_SIGNED", int(signed)), ("A_WIDTH", w), ("B_WIDTH", w),
                            ("Y_WIDTH", w)), (("A", A), ("B", B)), (("Y", Y),), "")
    fns, _, _ = expand_wide_div(cell, 1000, set(Y))
    xs, ys = np.meshgrid(np.arange(1 << w), np.arange(1 << w), indexing="ij")
    xs, ys = xs.ravel(), ys.ravel()
    bits = {0: np.zeros_like(xs), 1: np.ones_like(xs), 2: np.zeros_like(xs)}
    bits |= {n: (xs >> i) & 1 for i, n in enumerate(A)} | {n: (ys >> i) & 1 for i, n in enumerate(B)}
    for f in fns:
        v = np.zeros_like(xs)
        for st in f.steps:
            total = sum(wt * ((1 - bits[n]) if inv else bits[n]) for n, inv, wt in st.terms)
            v += st.sign * (np.asarray(total) >= st.theta)
        assert set(np.unique(v)) <= {0, 1}
        bits[f.out] = v
    got = sum(bits[n] << i for i, n in enumerate(Y))

    def val(x):
        return x - (1 << w) if signed and x >> (w - 1) else x
    want = [_python(kind, val(int(x)), val(int(y))) % (1 << w) for x, y in zip(xs, ys)]
    assert got.tolist() == want
