"""Shared fixtures: one synthesis cache per test session (per xdist worker); the cross-check of the
prover (netlist2tf.netlist.formal) against the simulator."""

import dataclasses

import numpy as np
import pytest

from netlist2tf.netlist.formal import evaluate
from netlist2tf.netlist.ir import Port
from netlist2tf.sim.simulator import Simulator


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("build")


def _extra_ports(nl):
    """The netlist with its memory write ports' fields as extra outputs (the simulator shows them)."""
    extra = tuple(Port(f"__w{k}_{i}_{f}", "output", sig, False)
                  for k, m in enumerate(nl.memories) for i, wp in enumerate(m.write_ports)
                  for f, sig in (("addr", wp.addr), ("data", wp.data), ("en", wp.enable)))
    return dataclasses.replace(nl, ports=nl.ports + extra)


def _edgy(rng, width: int) -> int:
    """A random value, half of the time an edge case: 0, 1, all ones, the sign bit, the largest
    positive (division by zero, overflow, sign handling)."""
    if rng.random() < 0.5:
        return int(rng.choice([0, 1, (1 << width) - 1, 1 << (width - 1), (1 << (width - 1)) - 1])) & ((1 << width) - 1)
    return int(rng.integers(0, 1 << width))


def _prover_matches_simulator(nl, trials: int, seed: int, fixed=None, dense: bool = False):
    """The prover's terms, evaluated on random states, inputs and memory words (64 per memory, or
    every word with ``dense``), equal the simulator's outputs, next state and memory writes."""
    rng = np.random.default_rng(seed)
    nl = _extra_ports(nl)
    for _ in range(trials):
        sim = Simulator(nl)
        regs = {f"reg:{r.name}": int(rng.integers(0, 1 << r.width)) for r in nl.registers}
        ins = {p.name: _edgy(rng, p.width) for p in sim.input_ports}
        ins.update(fixed or {})
        mems = {m.name: {int(a): int(rng.integers(0, 1 << min(m.width, 62)))
                         for a in (range(m.size) if dense else rng.integers(0, m.size, 64))}
                for m in nl.memories}
        for name, words in mems.items():
            sim.load_memory(name, words)
        sim.set_state(regs)
        out = sim.step(ins)
        outs, nexts, writes = evaluate(nl, regs, ins, mems)
        assert {k: int(v) for k, v in out.items()} == outs
        assert {k: int(v) for k, v in sim.state().items() if k in nexts} == nexts
        for k, m in enumerate(nl.memories):
            for i, (a, d, e) in enumerate(writes[m.name]):
                assert (outs[f"__w{k}_{i}_addr"], outs[f"__w{k}_{i}_data"], outs[f"__w{k}_{i}_en"]) == (a, d, e)


@pytest.fixture(scope="session")
def prover_matches_simulator():
    """``f(netlist, trials, seed, fixed_inputs=None, dense=False)``: asserts that the prover's terms
    equal the simulator on random states."""
    return _prover_matches_simulator
