"""Every engine against the reference machine (unicorn), one retirement record per instruction.

The same tests run for every engine in ENGINES_UNDER_TEST (a fixture parametrised over them, so none
can be skipped by accident): the program table (console output and exit code also checked against the
table's independently computed expectations), one self-checking program per instruction, the trap
programs, a step-limited infinite loop, and fuzzed random instruction streams.
"""

import pytest

from cpu.elf import load_elf
from cpu.fuzz import random_program
from cpu.isa_tests import ISA_TESTS, TRAP_TESTS, loop_forever_program, ram_needed
from cpu.machine import Halt
from cpu.netlist_engine import run_netlist, run_netlist_batch
from cpu.programs import PROGRAMS
from cpu.toolchain import compile_c
from cpu.unicorn_ref import run_unicorn

ENGINES_UNDER_TEST = {"netlist": run_netlist}
FUZZ_RAM = 4096


@pytest.fixture(params=sorted(ENGINES_UNDER_TEST))
def engine(request):
    return ENGINES_UNDER_TEST[request.param]


def assert_same_run(ref, got, what=""):
    """Console, halt and every retirement record equal; the first difference is named."""
    for i, (a, b) in enumerate(zip(ref.records, got.records)):
        assert a == b, f"{what}: record {i} differs\n  reference {a}\n  engine    {b}"
    assert len(got.records) == len(ref.records), f"{what}: {len(got.records)} records, reference {len(ref.records)}"
    assert got.console == ref.console, f"{what}: console output differs"
    assert got.halt == ref.halt, f"{what}: halt {got.halt} vs reference {ref.halt}"
    assert got.instructions == ref.instructions


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program_table(engine, prog):
    image = load_elf(compile_c(prog.path))
    ref = run_unicorn(image)
    got = engine(image)
    assert_same_run(ref, got, prog.name)
    assert got.console == prog.expected_output
    assert got.halt.kind == Halt.EXIT and got.halt.exit_code == prog.expected_exit


@pytest.mark.parametrize("name", sorted(ISA_TESTS))
def test_instruction(engine, name):
    image = ISA_TESTS[name]()
    ram = max(4096, 1 << (ram_needed(image) - 1).bit_length())
    ref = run_unicorn(image, ram_size=ram)
    got = engine(image, ram_size=ram)
    assert_same_run(ref, got, name)
    # Self-checking: a0 holds the number of the first failing case (0 = all passed).
    assert got.halt.exit_code == 0, f"{name}: case {got.halt.exit_code} failed"


@pytest.mark.parametrize("name", sorted(TRAP_TESTS))
def test_trap(engine, name):
    case = TRAP_TESTS[name]()
    ref = run_unicorn(case.image)
    got = engine(case.image)
    assert_same_run(ref, got, name)
    assert got.halt == Halt(Halt.TRAP, case.pc, 0, case.cause)
    assert got.instructions == case.retired


def test_step_limit(engine):
    image = loop_forever_program()
    ref = run_unicorn(image, max_steps=500)
    got = engine(image, max_steps=500)
    assert_same_run(ref, got, "loop forever")
    assert got.halt.kind == Halt.STEP_LIMIT and got.instructions == 500


def test_fuzzed_programs_netlist(request):
    """>= 2,000 random programs (``--fuzz-programs N`` for more), run as batches of the netlist."""
    n = request.config.getoption("--fuzz-programs")
    chunk = 500
    for start in range(0, n, chunk):
        images = [random_program(seed, ram_size=FUZZ_RAM) for seed in range(start, min(n, start + chunk))]
        results = run_netlist_batch(images, ram_size=FUZZ_RAM)
        for seed, (image, got) in enumerate(zip(images, results), start=start):
            ref = run_unicorn(image, ram_size=FUZZ_RAM)
            assert ref.halt.kind == Halt.EXIT, f"seed {seed}: the generator made a program that does not exit"
            assert_same_run(ref, got, f"fuzz seed {seed}")


def test_fuzzed_programs_one_by_one(engine):
    """A few fuzzed programs through the engine's own single-instance path."""
    for seed in range(100_000, 100_010):
        image = random_program(seed, ram_size=FUZZ_RAM)
        assert_same_run(run_unicorn(image, ram_size=FUZZ_RAM), engine(image, ram_size=FUZZ_RAM), f"seed {seed}")
