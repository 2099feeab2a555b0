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


def run_scrambled(nl, image, seed: int, limit: int = 200_000):
    """The netlist simulator's run with the gated group randomized whenever the gate register is 0."""
    gate_q = {s.name: s.bits for s in nl.signals}[GATED[0]][0]
    _, group = resolve_gated(nl, *GATED)
    group_regs = [f"reg:{r.name}" for r in nl.registers if set(r.q) <= set(group)]
    busy = next(f"reg:{r.name}" for r in nl.registers if r.q == (gate_q,))
    assert len(group_regs) == len(group) == 101          # 1-bit register slices: m_hi, m_lo, m_op, count
    sim = Simulator(nl)
    sim.load_memory("ram", image.words())
    rng = np.random.default_rng(seed)
    records, console, scrambled = [], bytearray(), 0
    for _ in range(limit):
        if sim.state()[busy] == 0:
            sim.set_state({n: int(b) for n, b in zip(group_regs, rng.integers(0, 2, len(group_regs)))})
            scrambled += 1
        out = sim.step({"rst": 0})
        if out["rvfi_valid"]:
            records.append(Retire(**{f: int(out["rvfi_" + f]) for f in RETIRE_FIELDS}))
        if out["console_valid"]:
            console.append(int(out["console_data"]))
        if out["halt"]:
            return records, bytes(console), halt_from_port(lambda n: int(out[n])), scrambled
    return records, bytes(console), Halt(Halt.STEP_LIMIT, 0), scrambled


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
