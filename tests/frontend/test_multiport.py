"""Issue 22 item 2: memories with several write ports and per-bit write enables
(netlist2tf/frontend/multiport.py). Each design is first simulated against Amaranth's simulator, on the
word-level netlist (the memory as written) and on the compiler's (the memory rewritten into XOR
banks / whole-word writes), with the collisions of the random stimulus counted; then compiled and
checked against the netlist simulator with stock transformers, teacher-forced, batch 4."""

from pathlib import Path

import numpy as np
import pytest
import torch

from netlist2tf.compile.plan import CompileSettings
from netlist2tf.driver import compile_netlist
from netlist2tf.checkpoint.emit import emit_checkpoint, load_checkpoint
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.frontend.multiport import split_write_ports
from netlist2tf.frontend.reference import run_amaranth
from netlist2tf.sim.simulator import RandomStimulus, Simulator
from netlist2tf.run.verify import verify_teacher_forced

DESIGNS = Path(__file__).parent.parent / "designs"
# design -> (source file, write ports, the (address, enable) inputs of each port)
CASES = {
    "TwoWritePorts": ("unusual.py", 2, [("wa0", "we0"), ("wa1", "we1")]),
    "ThreeWritePorts": ("constructs.py", 3, [("wa0", "we0"), ("wa1", "we1"), ("wa2", "we2")]),
    "ByteEnableRam": ("constructs.py", 1, [("addr", "wen")]),
}


def _design(name):
    return f"{DESIGNS}/{CASES[name][0]}:{name}"


def _collisions(inputs, ports) -> int:
    """Cycles (all rows) in which two ports write the same address."""
    hits = np.zeros_like(np.asarray(inputs[ports[0][0]], dtype=np.int64), dtype=bool)
    for i, (ai, ei) in enumerate(ports):
        for aj, ej in ports[i + 1:]:
            hits |= ((np.asarray(inputs[ai]) == np.asarray(inputs[aj])) & (np.asarray(inputs[ei]) > 0)
                     & (np.asarray(inputs[ej]) > 0))
    return int(hits.sum())


@pytest.mark.parametrize("name", list(CASES))
def test_rewrite_simulates_like_amaranth(name, build_dir):
    _, nports, ports = CASES[name]
    word = parse_netlist(synthesize(_design(name), "word", build_dir).json_text)
    (mem,) = word.memories
    assert len(mem.write_ports) == nports
    assert any(len(set(wp.enable)) > 1 for wp in mem.write_ports)   # per-bit enables in every case
    macro = parse_netlist(synthesize(_design(name), "macro", build_dir).json_text)
    # the compiler's netlist: one whole-word write port per memory; P banks for P ports
    assert all(len(m.write_ports) == 1 and len(set(m.write_ports[0].enable)) == 1 for m in macro.memories)
    assert sorted(m.name for m in macro.memories) == (
        ["mem"] if nports == 1 else [f"mem$bank{q}" for q in range(nports)])
    for nl in (word, macro):
        trace = Simulator(nl, batch=2).run(1000, RandomStimulus(seed=3))
        if nports > 1:
            assert _collisions(trace.inputs, ports) > 100
        for lane in range(2):
            ref = run_amaranth(_design(name), {n: v[:, lane] for n, v in trace.inputs.items()}, 1000,
                               [p.name for p in nl.outputs])
            for p in nl.outputs:
                assert [int(x) for x in trace.outputs[p.name][:, lane]] == [int(x) for x in ref[p.name]], \
                    (nl.memories[0].name, lane, p.name)


def test_netlists_without_such_memories_are_untouched(build_dir):
    """The pass changes nothing (byte for byte) where every memory has one whole-word write port,
    so the CPU's and the examples' netlists are what Yosys wrote."""
    for design in ("hdl.examples.fifo:FIFO", "hdl.examples.regfile:RegisterFile"):
        text = synthesize(design, "word", build_dir).json_text
        assert split_write_ports(text) is text


def _stimulus_collisions(netlist, ports, cycles, batch, seed):
    """The collisions of the stimulus ``verify_teacher_forced`` draws (the same seeded RandomStimulus
    on a simulator of the same batch)."""
    sim, stim = Simulator(netlist, batch=batch), RandomStimulus(seed)
    seen = {a: [] for p in ports for a in p}
    for k in range(cycles):
        vals = stim.values(k, sim)
        sim.step(vals)
        for n in seen:
            seen[n].append(np.broadcast_to(np.asarray(vals[n]), (batch,)).copy())
    return _collisions({n: np.array(v) for n, v in seen.items()}, ports)


# the default suite: three banks with collisions, and a per-bit port; the two-port RAM and 1,000
# cycles of each in both dtypes under -m slow
FAST = [("ThreeWritePorts", torch.float32, 300), ("ByteEnableRam", torch.bfloat16, 200)]
FULL = [(name, dtype, 1000) for name in CASES for dtype in (torch.float32, torch.bfloat16)]


@pytest.mark.parametrize("name, dtype, cycles", FAST + [pytest.param(*c, marks=pytest.mark.slow) for c in FULL],
                         ids=[f"{n}-{str(d)[6:]}-{c}" for n, d, c in FAST + FULL])
def test_models_teacher_forced(name, dtype, cycles, build_dir, tmp_path):
    _, nports, ports = CASES[name]
    result = synthesize(_design(name), "macro", build_dir)
    nl = parse_netlist(result.json_text)
    folder = emit_checkpoint(compile_netlist(nl, CompileSettings(), prove=False), result.json_text, tmp_path / name)
    model, protocol, netlist, inits, meta = load_checkpoint(folder, dtype)
    if nports > 1:
        assert _stimulus_collisions(netlist, ports, cycles, 4, 0) > cycles // 10
    div, checked = verify_teacher_forced(model, protocol, netlist, inits, cycles, 4, 0,
                                         meta["initial_memory"], window=512)
    assert div is None, str(div)
    assert checked == cycles * 4 * len(protocol.generated)
