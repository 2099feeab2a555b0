"""The scheduler: levels of small designs checked by hand, the verifier catching a broken schedule,
truth tables of cells against hand-written ones, and the too-deep / too-wide errors."""

import dataclasses
import re
import textwrap

import pytest

from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.compile.logic import cell_bit_functions
from netlist2tf.compile.schedule import ScheduleError, neuron_cost, schedule, shared_schedules, verify
from netlist2tf.compile.target import Target

CHAIN = """
module top(input clk, input a, input b, input c, input d, output y, output z);
  // y = ((a & b) ^ c) | d : three gates in a chain; z is registered a ^ b
  wire ab = a & b;
  wire abc = ab ^ c;
  assign y = abc | d;
  reg r = 0;
  always @(posedge clk) r <= a ^ b;
  assign z = r;
endmodule
"""


def _netlist(tmp_path, text, flow, build_dir):
    path = tmp_path / "chain.v"
    path.write_text(textwrap.dedent(text))
    return parse_netlist(synthesize(str(path), flow, build_dir).json_text)


def test_gate_chain_levels(tmp_path, build_dir):
    # abc maps it to:
    #   a ─┐
    #   b ─$_NAND_─ n7 ─$_XNOR_─ n9 ─$_OR_─ y      levels: a..d 0, n7 1, n9 2, y 3
    #            c ───────┘       d ───┘          (z comes from a register, whose D is a ^ b)
    nl = _netlist(tmp_path, CHAIN, "gate", build_dir)
    s = schedule(nl, Target.standalone(layers=11))
    names = {str(nl.nets[f.out]): f for fs in s.functions.values() for f in fs}
    assert s.level[names["y"].out] == 3 and s.depth == 3
    # The register's XOR is ready in layer 0 but only the register reads it (by the last layer):
    # balancing moves it to the least loaded layer of that slack, the first empty one (3).
    assert sorted(s.cell_layer.values()) == [0, 1, 2, 3]
    # NAND: 1 + 1 false minterm = 2; XOR: 2 true; XNOR: 2 true; OR: 1 + 1 false = 2
    assert s.neurons[:4] == (2, 2, 2, 2)
    assert verify(nl, s) == []
    broken = dataclasses.replace(s, cell_layer={k: 0 for k in s.cell_layer})
    assert any("reads net" in v for v in verify(nl, broken))


PARITY = """
module top(input [11:0] a, output y);
  assign y = ^a;
endmodule
"""


def test_collapse_lut_chain(tmp_path, build_dir):
    """Too deep for 2 layers as mapped (3 gate levels), the chain collapses into one 4-input
    function of y computed in layer 0; the gates only y read are dropped."""
    nl = _netlist(tmp_path, CHAIN, "gate", build_dir)
    s = schedule(nl, Target.standalone(layers=2))
    assert s.depth == 1 and verify(nl, s) == []
    (fy,) = [f for fs in s.functions.values() for f in fs if str(nl.nets[f.out]) == "y"]
    names = [str(nl.nets[n]) for n in fy.support]
    assert sorted(names) == ["a", "b", "c", "d"]
    for p in range(16):
        v = {name: (p >> i) & 1 for i, name in enumerate(names)}
        assert (fy.table >> p) & 1 == ((v["a"] & v["b"]) ^ v["c"]) | v["d"]      # by hand
    # y's function and the register's XOR: the NAND and XNOR of the chain are gone
    assert len(s.cell_layer) == 2


def test_compose_matches_direct_evaluation():
    import random

    from netlist2tf.compile.logic import BitFunction
    from netlist2tf.compile.schedule import compose

    rng = random.Random(5)
    for _ in range(200):
        fs = rng.sample(range(10, 20), rng.randint(1, 4))
        net = rng.choice(fs)
        gs = rng.sample([n for n in range(15, 25) if n != net], rng.randint(1, 4))   # no loop
        f = BitFunction(1, tuple(fs), rng.getrandbits(1 << len(fs)))
        g = BitFunction(net, tuple(gs), rng.getrandbits(1 << len(gs)))
        h = compose(f, net, g, 8)
        nets = sorted(set(fs) | set(gs))
        for p in range(1 << len(nets)):
            val = {n: (p >> i) & 1 for i, n in enumerate(nets)}
            val[net] = (g.table >> sum(val[n] << i for i, n in enumerate(gs))) & 1
            want = (f.table >> sum(val[n] << i for i, n in enumerate(fs))) & 1
            got = (h.table >> sum(val[n] << i for i, n in enumerate(h.support))) & 1
            assert got == want
        assert net not in h.support


def test_too_deep_names_the_path(tmp_path, build_dir):
    """A 12-input parity: 4 gate levels, 2 after collapsing (an 8-input XOR would cost 128
    neurons, over the collapse's cap), still too deep for 2 layers."""
    nl = _netlist(tmp_path, PARITY, "gate", build_dir)
    with pytest.raises(ScheduleError) as info:
        schedule(nl, Target.standalone(layers=2))
    msg = str(info.value)
    assert "the logic is 2 levels deep but 2 layers allow 1" in msg
    assert re.search(r"level 0: in:a -> a\[\d+\]", msg) and re.search(r"level 2: output", msg)
    assert "use --layers 3" in msg
    assert schedule(nl, Target.standalone(layers=3)).depth == 2


def test_too_wide(build_dir):
    nl = parse_netlist(synthesize("hdl.examples.lfsr:LFSR", "lut", build_dir).json_text)
    with pytest.raises(ScheduleError, match=r"layer 0 needs \d+ FFN neurons, the target has 10 "
                                            r"\(intermediate_size\)"):
        schedule(nl, Target.standalone(layers=11, intermediate_size=10))


def test_a_shared_schedule_is_checked_against_each_target(build_dir):
    """Inside ``shared_schedules`` (the planner's probe, then the target) the second call with the
    same layers and pins gives the first's levels (the same object's units, no levelising) but its
    widths are checked against its own target: too narrow is still refused; a copy of the netlist
    is scheduled afresh."""
    nl = parse_netlist(synthesize("hdl.examples.lfsr:LFSR", "lut", build_dir).json_text)
    wide = Target.standalone(layers=11)
    with shared_schedules():
        first = schedule(nl, wide)
        again = schedule(nl, dataclasses.replace(wide, intermediate_size=max(first.neurons)))
        assert again.cell_layer is first.cell_layer and again.target.intermediate_size == max(first.neurons)
        with pytest.raises(ScheduleError, match=r"\(intermediate_size\)"):
            schedule(nl, dataclasses.replace(wide, intermediate_size=max(first.neurons) - 1))
        other = schedule(dataclasses.replace(nl), wide)
        assert other.cell_layer is not first.cell_layer and other.cell_layer == first.cell_layer
    assert schedule(nl, wide).cell_layer is not first.cell_layer        # the memo ends with the block


@pytest.mark.parametrize("design, depth", [
    ("hdl.examples.counter:Counter", 3), ("hdl.examples.lfsr:LFSR", 4), ("hdl.examples.fifo:FIFO", 6),
    ("hdl.examples.regfile:RegisterFile", 1), ("hdl.examples.multiplier:PipelinedMultiplier", 8)])
def test_examples_fit_eleven_layers(design, depth, build_dir):
    nl = parse_netlist(synthesize(design, "lut", build_dir).json_text)
    s = schedule(nl, Target.standalone())
    assert s.depth == depth and verify(nl, s) == []
    assert s.dump(nl).startswith(f"schedule: {depth} levels on 11 layers")


def test_truth_tables(tmp_path, build_dir):
    nl = _netlist(tmp_path, CHAIN, "gate", build_dir)
    by_type = {c.type: c for c in nl.cells}
    (f,) = cell_bit_functions(by_type["$_NAND_"])
    assert f.table == 0b0111 and len(f.support) == 2 and neuron_cost(f) == 2
    (f,) = cell_bit_functions(by_type["$_OR_"])
    assert f.table == 0b1110 and neuron_cost(f) == 2      # 3 true minterms vs 1 + 1 false
    (f,) = cell_bit_functions(by_type["$_XOR_"])
    assert f.table == 0b0110 and neuron_cost(f) == 2


def test_shannon_split_matches_direct_evaluation():
    """schedule._shannon: a late bit f(x, E) whose deep input x = g(L) cannot be composed (too many
    inputs) becomes g(L) ? f1(E) : f0(E), the halves new bits of the early inputs; on every pattern
    of L and E it equals f evaluated directly, and it is a level earlier."""
    import random

    from netlist2tf.compile.logic import BitFunction
    from netlist2tf.compile.schedule import _shannon

    rng = random.Random(4)
    split = 0
    for trial in range(60):
        L = list(range(100, 100 + rng.randint(1, 4)))          # g's inputs: late (level 9)
        E = list(range(200, 200 + rng.randint(0, 5)))          # f's other inputs: early (level 7)
        g = BitFunction(50, tuple(L), rng.getrandbits(1 << len(L)))
        fsup = E[:]
        fsup.insert(rng.randint(0, len(E)), 50)
        f = BitFunction(60, tuple(fsup), rng.getrandbits(1 << len(fsup)))
        levels = {**{n: 9 for n in L}, **{n: 7 for n in E}, 50: 10}
        got = _shannon(f, lambda n: levels.get(n, 0), {50: g}, 8, 10, 1000)
        if got is None:                      # only when the result would not be a level earlier
            continue
        new, halves, _ = got
        split += 1
        assert new.out == 60 and all(set(h.support) <= set(E) for h in halves)
        for p in range(1 << (len(L) + len(E))):
            val = {n: (p >> i) & 1 for i, n in enumerate(L + E)}

            def ev(fn):
                return (fn.table >> sum(val[n] << i for i, n in enumerate(fn.support))) & 1

            val[50] = ev(g)
            want = ev(f)
            for h in halves:
                val[h.out] = ev(h)
            assert ev(new) == want, trial
    assert split >= 40
