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


def _wide_netlist(kind, w, signed, tmp_path):
    """A one-operator design: Verilog's / and % ($div, $mod), Amaranth's // and % ($divfloor,
    $modfloor), synthesized by the compiler's CPU flow (macro6)."""
    from netlist2tf.frontend import synthesize
    from netlist2tf.ir import parse_netlist
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
    """16- and 32-bit division and remainder (no macro at these widths: Yosys's logic, as the
    compiler schedules it) on random and edge operands, the scheduled bit functions evaluated
    against Python's integers. Division by zero has no Python value (Yosys leaves it undefined, and
    its synthesized logic gives some word): there the lowered logic must equal the simulator of the
    same netlist."""
    import random
    from netlist2tf.schedule import schedule
    from netlist2tf.sim import Simulator
    from netlist2tf.target import Target
    from netlist2tf.plan import standalone_layer_types
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
