"""Less common simulator paths against Amaranth's simulator: signals wider than 64 bits (scalar
engine, and batches run lane by lane), and a memory with two prioritised write ports, byte enables
and a synchronous read transparent for both."""

from pathlib import Path

import numpy as np
import pytest

from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.frontend.reference import run_amaranth
from netlist2tf.sim.simulator import RandomStimulus, Simulator, TableStimulus

DESIGNS = Path(__file__).parent.parent / "designs"
CYCLES = 2000


@pytest.mark.parametrize("design, flow, mode", [
    ("Wide", "word", "lanes"), ("TwoWritePorts", "word", "numpy"), ("TwoWritePorts", "gate", "numpy")])
def test_against_amaranth(design, flow, mode, build_dir):
    name = f"{DESIGNS}/unusual.py:{design}"
    nl = parse_netlist(synthesize(name, flow, build_dir).json_text)
    batch = Simulator(nl, batch=3)
    assert batch.mode == mode
    trace = batch.run(CYCLES, RandomStimulus(seed=11))
    single = Simulator(nl).run(CYCLES, TableStimulus({n: v[:, 1] for n, v in trace.inputs.items()}))
    for lane in range(3):
        ref = run_amaranth(name, {n: v[:, lane] for n, v in trace.inputs.items()}, CYCLES,
                           [p.name for p in nl.outputs])
        for port in nl.outputs:
            got = [int(x) for x in trace.outputs[port.name][:, lane]]
            assert got == [int(x) for x in ref[port.name]], f"lane {lane} {port.name}"
            if lane == 1:
                assert [int(x) for x in single.outputs[port.name][:, 0]] == got
    if design == "Wide":
        assert max(int(x) for x in trace.outputs["acc"][:, 0]) >= 1 << 64   # really wide values
    else:
        (mem,) = nl.memories
        # Yosys marks no priority between Amaranth's write ports (a collision is undefined to it); the
        # simulator applies them in port order, as Amaranth's simulator does, which the comparison
        # above checked on the collisions counted here.
        assert len(mem.write_ports) == 2 and mem.read_ports[1].transparent_for == (0, 1)
        collisions = np.sum((trace.inputs["wa0"] == trace.inputs["wa1"]) & (trace.inputs["we0"] > 0)
                            & (trace.inputs["we1"] > 0))
        assert collisions > 50        # the priority rule was exercised


@pytest.mark.parametrize("design, flow, mode", [("Wide", "word", "lanes"), ("TwoMemories", "macro", "numpy")])
def test_lane_state_moves_whole_states_between_simulators(design, flow, mode, build_dir):
    """lane_state / set_lane_state (the token economy's perturbation test): a run split in two,
    its lanes' states copied into a simulator of another batch in another order, goes on exactly as
    the unbroken run (the oracle: the same simulator run straight through, lane by lane)."""
    nl = parse_netlist(synthesize(f"{DESIGNS}/unusual.py:{design}", flow, build_dir).json_text)
    whole = Simulator(nl, batch=3)
    assert whole.mode == mode
    trace = whole.run(40, RandomStimulus(seed=5))
    first = Simulator(nl, batch=3)
    first.run(20, TableStimulus({n: v[:20] for n, v in trace.inputs.items()}))
    states, mems = first.lane_state()
    order = [2, 0, 1, 1]
    second = Simulator(nl, batch=4)
    second.set_lane_state([s[order] for s in states], [m[order] for m in mems])
    rest = second.run(20, TableStimulus({n: v[20:, order] for n, v in trace.inputs.items()}))
    for name, v in trace.outputs.items():
        assert [[int(x) for x in row] for row in rest.outputs[name]] == \
            [[int(x) for x in row[order]] for row in v[20:]], name
    with pytest.raises(Exception, match="one row per instance"):
        second.set_lane_state([s[:2] for s in states], [m[:2] for m in mems])
