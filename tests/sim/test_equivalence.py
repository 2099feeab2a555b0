"""The netlist simulator against Amaranth's own simulator on every example design.

Oracle: ``amaranth.sim`` runs the Amaranth design itself (not the netlist), fed the same seeded
random inputs; every output is compared in every cycle, for the word-level and the gate-level
netlist, for one instance (scalar engine) and for a batch (numpy engine, one lane per instance).
"""

import numpy as np
import pytest

from hdl.examples import EXAMPLES
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.frontend.reference import run_amaranth
from netlist2tf.sim.simulator import RandomStimulus, Simulator, TableStimulus

CYCLES = 2_000           # random cycles per lane (Amaranth's simulator takes most of the time)
LANES = 3


@pytest.fixture(scope="module")
def reference_runs():
    """design -> (input table (cycles, lanes), Amaranth outputs per lane); computed once."""
    cache = {}

    def get(design, netlist):
        if design not in cache:
            # Random inputs drawn once per design, independent of the netlist flavour.
            probe = Simulator(netlist, batch=LANES)
            inputs = probe.run(CYCLES, RandomStimulus(seed=2024)).inputs
            outs = [run_amaranth(design, {n: v[:, lane] for n, v in inputs.items()}, CYCLES,
                                 [p.name for p in netlist.outputs]) for lane in range(LANES)]
            cache[design] = (inputs, outs)
        return cache[design]
    return get


# the ALU's gate-level netlist (the largest: ~3 minutes here) is a slow case; its word-level one runs
@pytest.mark.parametrize("design,flow", [
    pytest.param(d, f, marks=[pytest.mark.slow] if (d.endswith(":ALU") and f == "gate") else [])
    for d in EXAMPLES for f in ("word", "gate")])
def test_matches_amaranth_every_cycle(design, flow, build_dir, reference_runs):
    netlist = parse_netlist(synthesize(design, flow, build_dir).json_text)
    inputs, ref = reference_runs(design, netlist)
    assert netlist.outputs, "an example without outputs proves nothing"

    single = Simulator(netlist, batch=1).run(CYCLES, TableStimulus({n: v[:, 0] for n, v in inputs.items()}))
    batched = Simulator(netlist, batch=LANES)
    assert batched.mode == "numpy"
    multi = batched.run(CYCLES, TableStimulus(inputs))
    for port in netlist.outputs:
        expected = ref[0][port.name].astype(np.uint64)
        got = single.outputs[port.name][:, 0]
        bad = np.nonzero(got != expected)[0]
        assert not len(bad), f"{port.name} differs first in cycle {bad[0]}: {got[bad[0]]} vs {expected[bad[0]]}"
        for lane in range(LANES):
            expected = ref[lane][port.name].astype(np.uint64)
            got = multi.outputs[port.name][:, lane]
            bad = np.nonzero(got != expected)[0]
            assert not len(bad), (f"batched lane {lane} {port.name} differs first in cycle {bad[0]}: "
                                  f"{got[bad[0]]} vs {expected[bad[0]]}")


def test_random_inputs_exercise_every_output(build_dir, reference_runs):
    """Guard against a vacuous comparison: outputs must actually change under the random inputs."""
    for design in EXAMPLES:
        netlist = parse_netlist(synthesize(design, "word", build_dir).json_text)
        _, ref = reference_runs(design, netlist)
        constant = [p.name for p in netlist.outputs if len(np.unique(ref[0][p.name])) < 2]
        assert not constant, f"{design}: outputs never change: {constant}"


WIDE_DESIGN = """
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Wide(wiring.Component):
    x: In(8)
    y: Out(72)

    def elaborate(self, platform):
        m = Module()
        acc = Signal(72)
        m.d.sync += acc.eq(acc * 3 + self.x)
        m.d.comb += self.y.eq(acc)
        return m
"""


def test_batched_wide_design_keeps_every_instance_state(tmp_path, build_dir):
    """A design with a signal over 64 bits runs batched as B scalar instances ("lanes"): each
    instance's state (``Simulator.state``, which ``verify.expected_tokens`` reads per row) and
    outputs are its own, equal to a batch-1 simulator's fed the same inputs."""
    (tmp_path / "wide_design.py").write_text(WIDE_DESIGN)
    nl = parse_netlist(synthesize(f"{tmp_path / 'wide_design.py'}:Wide", "word", build_dir).json_text)
    batch = Simulator(nl, batch=3)
    assert batch.mode == "lanes"
    alone = [Simulator(nl) for _ in range(3)]
    rng = np.random.default_rng(3)
    for _ in range(40):
        xs = rng.integers(0, 256, 3)
        out = batch.step({"x": np.array(xs, dtype=np.uint64)})
        state = batch.state()
        for row, sim in enumerate(alone):
            o = sim.step({"x": int(xs[row])})
            assert int(out["y"][row]) == o["y"]
            for name, v in sim.state().items():
                if name.startswith("reg:"):
                    assert int(np.asarray(state[name], dtype=object).reshape(-1)[row]) == v, name
