"""The promise behind the model's gated register group (``cpu.model_engine.GATED``): the compiled CPU
emits the M unit's registers (m_hi, m_lo, m_op, m_count: 13 of its 19 register tokens) only in
frames after which ``m_busy`` is 1, so in a cycle that starts with ``m_busy`` = 0 the model holds
stale values for them. That is exact only if those values do not matter in such a cycle (an M
instruction's start cycle loads them; nothing else reads them). Checked here on the core's full
netlist: the netlist simulator overwrites the group with random bits at the start of every cycle
with ``m_busy`` = 0, and every record, console byte and halt still equals unicorn's."""

import numpy as np
import pytest

from netlist2tf.assemble import resolve_gated
from netlist2tf.frontend import synthesize
from netlist2tf.ir import parse_netlist
from netlist2tf.sim import Simulator

from cpu.fuzz import random_program
from cpu.isa_tests import ISA_TESTS, hazard_programs
from cpu.machine import Halt, Retire
from cpu.model_engine import FLOW, GATED, MODEL_RAM_SIZE
from cpu.netlist_engine import RETIRE_FIELDS, core_design, halt_from_port
from cpu.unicorn_ref import run_unicorn

RAM = MODEL_RAM_SIZE


@pytest.fixture(scope="module")
def core(build_dir):
    return parse_netlist(synthesize(core_design(RAM), FLOW, build_dir).json_text)


class Scrambler:
    """Overwrites the gated group's registers with random bits when the gate register is 0."""

    def __init__(self, nl, seed: int | None):
        gate_q = {s.name: s.bits for s in nl.signals}[GATED[0]][0]
        _, group = resolve_gated(nl, *GATED)
        self.group = [f"reg:{r.name}" for r in nl.registers if set(r.q) <= set(group)]
        self.busy = next(f"reg:{r.name}" for r in nl.registers if r.q == (gate_q,))
        assert len(self.group) == len(group) == 101      # 1-bit register slices: m_hi, m_lo, m_op, count
        self.rng = np.random.default_rng(seed) if seed is not None else None
        self.count = 0

    def __call__(self, sim):
        """Before a cycle: scramble the group if that cycle starts idle (and a seed was given)."""
        if self.rng is not None and sim.state()[self.busy] == 0:
            sim.set_state({n: int(b) for n, b in zip(self.group, self.rng.integers(0, 2, len(self.group)))})
            self.count += 1


def run_scrambled(nl, image, seed: int, limit: int = 200_000):
    """The netlist simulator's run with the gated group randomized whenever the gate register is 0."""
    scramble = Scrambler(nl, seed)
    sim = Simulator(nl)
    sim.load_memory("ram", image.words())
    records, console = [], bytearray()
    for _ in range(limit):
        scramble(sim)
        out = sim.step({"rst": 0})
        if out["rvfi_valid"]:
            records.append(Retire(**{f: int(out["rvfi_" + f]) for f in RETIRE_FIELDS}))
        if out["console_valid"]:
            console.append(int(out["console_data"]))
        if out["halt"]:
            return records, bytes(console), halt_from_port(lambda n: int(out[n])), scramble.count
    return records, bytes(console), Halt(Halt.STEP_LIMIT, 0), scramble.count


def _check(nl, images):
    for seed, img in enumerate(images):
        ref = run_unicorn(img, ram_size=RAM)
        records, console, halt, scrambled = run_scrambled(nl, img, seed)
        assert scrambled > 0
        assert (console, halt) == (ref.console, ref.halt)
        assert records == ref.records


def test_hazards_and_m_instructions(core):
    names = ["mul", "mulh", "mulhsu", "mulhu", "div", "divu", "rem", "remu"]
    _check(core, list(hazard_programs().values()) + [ISA_TESTS[n]() for n in names])


def test_fuzzed(core):
    _check(core, [random_program(seed, 40, RAM) for seed in range(16)])


def test_hello(core):
    from cpu.elf import load_elf
    from cpu.programs import PROGRAMS_BY_NAME
    from cpu.toolchain import compile_c

    _check(core, [load_elf(compile_c(PROGRAMS_BY_NAME["hello"].path, ram_size=RAM), ram_size=RAM)])


def emitted_values(nl, proto, image, seed: int | None, limit: int = 100_000):
    """Per cycle, every value the compiled model emits (its output ports, the write port's enable,
    address and data, the ungated registers' next values and, when the gate is 1, the group's), from
    the compiled netlist; with ``seed``, the group is overwritten with random bits at the start of
    every cycle whose gate register is 0 (what the model holds then: stale values)."""
    import dataclasses

    from netlist2tf.ir import Port

    (wp,) = [w for m in nl.memories for w in m.write_ports]
    probe = Port("__write", "output", tuple(wp.enable[:1]) + tuple(wp.addr) + tuple(wp.data), False)
    gate = Port("__gate", "output", (proto.gate,), False)
    sim = Simulator(dataclasses.replace(nl, ports=nl.ports + (probe, gate)))
    sim.load_memory("ram", image.words())
    scramble = Scrambler(nl, seed)
    group = {n for j in proto.gated for n in proto.registers[j].bits}
    assert {f"reg:{r.name}" for r in nl.registers if set(r.q) <= group} == set(scramble.group)
    trace = []
    for _ in range(limit):
        scramble(sim)
        out = sim.step({"rst": 0})
        state = sim.state()
        regs = {n: v for n, v in state.items() if n.startswith("reg:") and (out["__gate"] or n not in scramble.group)}
        trace.append((dict(out), regs))
        if out["halt"]:
            break
    return trace


@pytest.mark.parametrize("which", ["m-instructions", "fuzzed", "hello"])
def test_every_emitted_token_ignores_the_stale_group(which, build_dir):
    """Stricter than the records: every token the model emits (a disabled write's data too) is the
    same with the M state scrambled in idle cycles. (An M instruction's start cycle once put the stale
    product on the write port's data: harmless, as the write is disabled, but not the simulator's
    token.)"""
    from netlist2tf.protocol import TraceProtocol

    from cpu.model_engine import compiled_netlist

    nl = compiled_netlist(RAM, build_dir)
    proto = TraceProtocol.from_netlist(nl, {r.clock for r in nl.registers}, 8, resolve_gated(nl, *GATED))
    if which == "m-instructions":
        images = [ISA_TESTS[n]() for n in ("mul", "mulhu", "div", "rem")]
    elif which == "fuzzed":
        images = [random_program(seed, 40, RAM) for seed in range(8)]
    else:
        from cpu.elf import load_elf
        from cpu.programs import PROGRAMS_BY_NAME
        from cpu.toolchain import compile_c
        images = [load_elf(compile_c(PROGRAMS_BY_NAME["hello"].path, ram_size=RAM), ram_size=RAM)]
    for seed, img in enumerate(images):
        clean, scrambled = emitted_values(nl, proto, img, None), emitted_values(nl, proto, img, seed)
        assert len(clean) == len(scrambled)
        for k, (a, b) in enumerate(zip(clean, scrambled)):
            assert a == b, f"cycle {k}"


def test_gated_group_proved_for_every_state(core, prover_matches_simulator):
    """The promise proved rather than sampled (netlist2tf.formal, z3): for every state and memory
    content with m_busy = 0 and any rst, the outputs (the whole retirement port), the other
    registers' next values, the RAM write port and, when m_busy's next value is 1, the group's next
    values do not depend on the group. Then by induction over the cycles no run can tell the model's
    stale group values from the true ones. The prover reads the core as the simulator runs it
    (random states, every RAM word random), and a group with the pc in it is refuted."""
    from netlist2tf.formal import prove_gated

    assert prove_gated(core, GATED[0], GATED[1]) is None
    cex = prove_gated(core, GATED[0], list(GATED[1]) + ["rvfi_pc"], {"rst": 0})
    assert cex is not None and "output rvfi_pc" in cex.what
    prover_matches_simulator(core, 5, 7, {"rst": 0}, dense=True)
