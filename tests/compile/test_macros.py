"""The $alu macro (netlist2tf/compile/macros.py) against the netlist simulator's $alu, without any model:
the threshold circuit is evaluated on integers, every output bit must be 0/1 and equal the simulator's
for every input tried (exhaustive for narrow cells; random plus carry-chain patterns for wide ones).
The model-level checks are in tests/compile/test_lower.py and tests/run/test_compile_e2e.py."""

import itertools
import random
from pathlib import Path

import pytest

from netlist2tf.frontend.synth import synthesize
from netlist2tf.gadgets.ffn_threshold import BF16_LIMIT
from netlist2tf.netlist.ir import CONST0, CONST1, Cell, Net, Netlist, Port, parse_netlist
from netlist2tf.compile.macros import expand_alu
from netlist2tf.compile.schedule import schedule, verify
from netlist2tf.sim.simulator import Simulator
from netlist2tf.compile.target import Target

DESIGNS = Path(__file__).parent.parent / "designs"


def _alu(aw, bw, yw, a_signed, b_signed, bi, ci):
    """A one-cell netlist; ``bi``/``ci`` are 0, 1 or 'sig' (an input)."""
    n = 3
    nets = {}
    for name, w in (("a", aw), ("b", bw)):
        nets[name] = tuple(range(n, n + w))
        n += w
    for name, v in (("bi", bi), ("ci", ci)):
        if v == "sig":
            nets[name] = (n,)
            n += 1
        else:
            nets[name] = (CONST1 if v else CONST0,)
    for name in ("x", "y", "co"):
        nets[name] = tuple(range(n, n + yw))
        n += yw
    cell = Cell("alu", "$alu", (("A_SIGNED", a_signed), ("B_SIGNED", b_signed), ("A_WIDTH", aw),
                                ("B_WIDTH", bw), ("Y_WIDTH", yw)),
                (("A", nets["a"]), ("B", nets["b"]), ("BI", nets["bi"]), ("CI", nets["ci"])),
                (("X", nets["x"]), ("Y", nets["y"]), ("CO", nets["co"])), "")
    ports = [Port(k, "input", nets[k], False) for k in ("a", "b", "bi", "ci")
             if nets[k] and nets[k][0] > 2]
    ports += [Port(k, "output", nets[k], False) for k in ("x", "y", "co")]
    return Netlist("t", tuple(Net(i, f"n{i}", None) for i in range(n)), tuple(ports), (cell,), (), (), ()), cell, nets, n


def _check(aw, bw, yw, a_signed, b_signed, bi, ci, patterns):
    nl, cell, nets, n = _alu(aw, bw, yw, a_signed, b_signed, bi, ci)
    fns, names, _ = expand_alu(cell, n, set(nets["x"] + nets["y"] + nets["co"]))
    for f in fns:
        for s in f.steps:
            lo = 1 - s.theta + sum(w for *_, w in s.terms if w < 0)
            hi = 1 - s.theta + sum(w for *_, w in s.terms if w > 0)
            if hi >= 1 and lo < 1:              # otherwise no neuron, or one constant neuron
                assert hi <= BF16_LIMIT, (names.get(f.out), lo, hi)
    sim = Simulator(nl)
    inputs = [p.name for p in nl.inputs]
    for values in patterns:
        vals = dict(zip(("a", "b", "bi", "ci"), values))
        vals = {k: v for k, v in vals.items() if k in inputs}
        out = sim.step(vals)
        bits = {CONST0: 0, CONST1: 1, 2: 0}
        for k, v in vals.items():
            for i, net in enumerate(nets[k]):
                bits[net] = (v >> i) & 1
        for f in fns:
            v = f.value(bits)
            assert v in (0, 1), f"{names.get(f.out, f.out)} evaluates to {v} on {vals}"
            bits[f.out] = v
        for port in ("x", "y", "co"):
            got = sum(bits[net] << i for i, net in enumerate(nets[port]))
            assert got == out[port], f"{port} {got:#x} != {out[port]:#x} for {vals}"
    return sum(f.cost for f in fns)


@pytest.mark.parametrize("aw, bw, yw, a_signed, b_signed", [
    (3, 3, 3, 0, 0), (4, 3, 5, 1, 1), (2, 4, 6, 1, 0), (0, 4, 4, 0, 0), (5, 4, 5, 1, 1)])
@pytest.mark.parametrize("bi, ci", [(0, 0), (1, 1), (0, 1), ("sig", "sig")])
def test_narrow_alu_exhaustive(aw, bw, yw, a_signed, b_signed, bi, ci):
    space = itertools.product(range(1 << aw), range(1 << bw), range(2 if bi == "sig" else 1),
                              range(2 if ci == "sig" else 1))
    _check(aw, bw, yw, a_signed, b_signed, bi, ci, space)


def _wide_patterns(aw, bw, count, seed):
    rng = random.Random(seed)
    ones = lambda w: (1 << w) - 1                   # noqa: E731
    fixed = [(ones(aw), 1, 0, 0), (ones(aw), 0, 1, 1), (ones(aw), 1, 1, 1), (0, 0, 1, 1), (0, 1, 1, 1),
             (1 << (aw - 1) if aw else 0, ones(bw), 0, 1), (ones(aw) ^ 1, 1, 0, 1)]
    for _ in range(count):
        a, b = rng.getrandbits(aw) if aw else 0, rng.getrandbits(bw)
        if rng.random() < 0.5:                      # long propagate chains: b close to ~a
            b = (~a ^ (1 << rng.randrange(max(bw, 1)))) & ones(bw)
        fixed.append((a, b, rng.getrandbits(1), rng.getrandbits(1)))
    return fixed


@pytest.mark.parametrize("aw, bw, yw, a_signed, b_signed", [
    (32, 32, 32, 0, 0), (32, 32, 33, 1, 1), (12, 32, 32, 1, 1), (0, 32, 32, 0, 0), (7, 7, 7, 0, 0),
    (14, 14, 15, 0, 0), (64, 64, 64, 0, 0), (20, 31, 40, 1, 0), (130, 100, 130, 1, 1)])
@pytest.mark.parametrize("bi, ci", [(0, 0), (1, 1), ("sig", "sig")])
def test_wide_alu_random_and_carry_chains(aw, bw, yw, a_signed, b_signed, bi, ci):
    _check(aw, bw, yw, a_signed, b_signed, bi, ci, _wide_patterns(aw, bw, 400, f"{aw} {bw} {yw} {bi}"))


@pytest.mark.parametrize("width, layers", [(5, 1), (7, 1), (14, 2), (32, 3), (56, 3)])
def test_adder_depth(width, layers, build_dir):
    """An adder of up to 7 bits is one FFN layer, up to 14 bits two, then three (until 8 blocks);
    4-LUTs need more levels for wide adders."""
    design = f"{DESIGNS}/arith.py:Adder(width={width})"
    macro = schedule(parse_netlist(synthesize(design, "macro", build_dir).json_text), Target.standalone(layers=12))
    assert macro.depth == layers
    if width >= 14:
        lut = schedule(parse_netlist(synthesize(design, "lut", build_dir).json_text), Target.standalone(layers=40))
        assert lut.depth > macro.depth + 1


def test_schedule_of_macros_verifies(build_dir):
    nl = parse_netlist(synthesize(f"{DESIGNS}/arith.py:Arith", "macro", build_dir).json_text)
    assert sum(c.type == "$alu" for c in nl.cells) >= 6
    s = schedule(nl, Target.standalone(layers=12))
    assert verify(nl, s) == []
    assert any("@" in unit for unit in s.cell_layer)          # macro units, one per layer they span
    assert "(macro)" in s.dump(nl)


def _evaluate(fns, inputs: dict, out_nets) -> int:
    """Run macro functions on integers: ``inputs`` maps a tuple of nets (LSB first) to its value;
    every function must give 0 or 1; returns the value of ``out_nets``."""
    bits = {CONST0: 0, CONST1: 1, 2: 0}
    for nets, value in inputs.items():
        bits.update({n: (value >> i) & 1 for i, n in enumerate(nets)})
    for f in fns:
        v = f.value(bits)
        assert v in (0, 1)
        bits[f.out] = v
    return sum(bits[n] << i for i, n in enumerate(out_nets))


def _shift_cell(kind, aw, bw, yw, a_signed=0, b_signed=0):
    a = tuple(range(3, 3 + aw))
    b = tuple(range(3 + aw, 3 + aw + bw))
    y = tuple(range(3 + aw + bw, 3 + aw + bw + yw))
    cell = Cell("sh", kind, (("A_SIGNED", a_signed), ("B_SIGNED", b_signed), ("A_WIDTH", aw),
                             ("B_WIDTH", bw), ("Y_WIDTH", yw)), (("A", a), ("B", b)), (("Y", y),), "")
    nl = Netlist("t", tuple(Net(i, f"n{i}", None) for i in range(3 + aw + bw + yw)),
                 (Port("a", "input", a, False), Port("b", "input", b, False), Port("y", "output", y, False)),
                 (cell,), (), (), ())
    return nl, cell, a, b, y


@pytest.mark.parametrize("kind, aw, bw, yw, a_signed, b_signed", [
    ("$shl", 8, 3, 15, 0, 0), ("$shr", 8, 3, 8, 0, 0), ("$sshr", 8, 3, 8, 1, 0), ("$sshl", 6, 2, 9, 1, 0),
    ("$shift", 8, 4, 4, 0, 1), ("$shiftx", 8, 3, 3, 0, 0), ("$shift", 8, 3, 8, 1, 0),
    ("$shl", 32, 5, 32, 0, 0), ("$sshr", 32, 5, 32, 1, 0)])
def test_shift_macro_matches_simulator(kind, aw, bw, yw, a_signed, b_signed):
    """Every amount, with random and edge operands: the two-layer shift circuit equals the cell (a
    selection per amount, one neuron each, or a range test of two for a run of amounts selecting one
    bit: an arithmetic shift's fill)."""
    from netlist2tf.compile.macros import expand_shift
    nl, cell, a, b, y = _shift_cell(kind, aw, bw, yw, a_signed, b_signed)
    fns, names, _ = expand_shift(cell, len(nl.nets), set(y))
    assert max(s.neuron_count() for f in fns for s in f.steps) <= 2
    sim = Simulator(nl)
    rng = random.Random(kind + str(aw))
    for amount in range(1 << bw):
        for av in [0, (1 << aw) - 1, 1 << (aw - 1), 1] + [rng.getrandbits(aw) for _ in range(6)]:
            out = sim.step({"a": av, "b": amount})["y"]
            assert _evaluate(fns, {a: av, b: amount}, y) == out, (amount, av)


def test_arithmetic_shift_fill_is_a_range():
    """A 33-bit arithmetic right shift by 5 bits (the core's srl/sra): its fill is one range test per
    output bit, not one neuron per amount: 1,024 neurons as pure selections (hand count: 32 bits x 32
    amounts, none constant), fewer than 640 now."""
    from netlist2tf.compile.macros import expand_shift
    nl, cell, a, b, y = _shift_cell("$sshr", 33, 5, 32, 1, 0)
    fns, names, _ = expand_shift(cell, len(nl.nets), set(y))
    assert sum(f.cost for f in fns) < 640
    sim = Simulator(nl)
    rng = random.Random(33)
    for amount in range(32):
        for av in [0, (1 << 33) - 1, 1 << 32, 1 << 31] + [rng.getrandbits(33) for _ in range(8)]:
            assert _evaluate(fns, {a: av, b: amount}, y) == sim.step({"a": av, "b": amount})["y"], (amount, av)


def test_shift_depth(build_dir):
    """Variable shifts are 2 layers (decode, select) where 4-LUTs need more."""
    nl = parse_netlist(synthesize(f"{DESIGNS}/arith.py:Arith", "macro", build_dir).json_text)
    kinds = {c.type for c in nl.cells}
    assert {"$shl", "$shr", "$sshr", "$shift"} <= kinds
    from netlist2tf.compile.macros import expand

    used = {n for c in nl.cells for _, sig in c.inputs for n in sig} | {n for p in nl.outputs for n in p.bits}
    for cell in nl.cells:
        if cell.type in ("$shl", "$shr", "$sshr"):            # from its inputs: 2 levels
            fns, _, _ = expand(cell, len(nl.nets), used)
            level = {}
            for f in fns:
                level[f.out] = 1 + max((level.get(n, 0) for n in f.support), default=0)
            assert max(level.values()) == 2, cell.name
    assert schedule(nl, Target.standalone(layers=12)).depth <= 12


def _reduce_cell(kind, aw, bw, yw, a_signed=0, b_signed=0, b_const=None):
    """A one-cell netlist of a reduction (only A) or an (in)equality; ``b_const``: B as constants."""
    a = tuple(range(3, 3 + aw))
    n = 3 + aw
    if kind in ("$eq", "$ne"):
        if b_const is None:
            b = tuple(range(n, n + bw))
            n += bw
        else:
            b = tuple(CONST1 if (b_const >> i) & 1 else CONST0 for i in range(bw))
        ins = (("A", a), ("B", b))
    else:
        b, ins = (), (("A", a),)
    y = tuple(range(n, n + yw))
    params = (("A_SIGNED", a_signed), ("B_SIGNED", b_signed), ("A_WIDTH", aw), ("B_WIDTH", bw), ("Y_WIDTH", yw))
    cell = Cell("r", kind, params, ins, (("Y", y),), "")
    ports = [Port("a", "input", a, False)] + ([Port("b", "input", b, False)] if b and b[0] > 2 else [])
    nl = Netlist("t", tuple(Net(i, f"n{i}", None) for i in range(n + yw)),
                 tuple(ports) + (Port("y", "output", y, False),), (cell,), (), (), ())
    return nl, cell, a, b, y


@pytest.mark.parametrize("kind, aw, bw, yw, a_signed, b_signed, b_const", [
    ("$reduce_and", 7, 0, 1, 0, 0, None), ("$reduce_or", 7, 0, 2, 0, 0, None),
    ("$reduce_bool", 6, 0, 1, 0, 0, None), ("$logic_not", 7, 0, 3, 0, 0, None),
    ("$eq", 6, 6, 1, 0, 0, None), ("$ne", 5, 7, 2, 0, 0, None), ("$eq", 6, 4, 1, 1, 1, None),
    ("$eq", 8, 8, 1, 0, 0, 0x5A), ("$ne", 8, 3, 1, 0, 0, 0b101), ("$eq", 7, 5, 1, 1, 1, 0b10011)])
def test_reduce_macro_matches_simulator(kind, aw, bw, yw, a_signed, b_signed, b_const):
    """Reductions and (in)equalities: exhaustive over the signal inputs, against the simulator's
    cell; one layer where B is constant, two (XOR, then one threshold) where both are signals."""
    from netlist2tf.compile.macros import expand_reduce
    nl, cell, a, b, y = _reduce_cell(kind, aw, bw, yw, a_signed, b_signed, b_const)
    fns, names, _ = expand_reduce(cell, len(nl.nets), set(y))
    sim = Simulator(nl)
    signal_b = bool(b) and b[0] > 2
    for av in range(1 << aw):
        for bv in range(1 << bw) if signal_b else [None]:
            vals = {"a": av} if bv is None else {"a": av, "b": bv}
            out = sim.step(vals)["y"]
            inputs = {a: av} if bv is None else {a: av, b: bv}
            assert _evaluate(fns, inputs, y) == out, (av, bv)
    internal = [f for f in fns if f.out not in y]
    both = max(aw, bw) if a_signed and b_signed else min(aw, bw)   # bit positions with two signals
    assert len(internal) == (both if signal_b else 0)


def test_wide_compare_is_one_layer(build_dir):
    """The CPU's `mem_addr == CONSOLE_ADDR`-style compares: a 32-bit equality with a constant is one
    threshold (4-LUTs: 3 levels)."""
    from netlist2tf.compile.macros import expand_reduce
    nl, cell, a, b, y = _reduce_cell("$eq", 32, 32, 1, b_const=0x1000_0000)
    fns, _, _ = expand_reduce(cell, len(nl.nets), set(y))
    assert len(fns) == 1 and fns[0].cost == 1
    sim = Simulator(nl)
    for av in (0x1000_0000, 0x1000_0001, 0x9000_0000, 0, 0xFFFF_FFFF):
        bits = {n: (av >> i) & 1 for i, n in enumerate(a)}
        assert fns[0].value(bits) == sim.step({"a": av})["y"]
