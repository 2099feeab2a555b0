"""Fuzzed random instruction streams in bulk: thousands of them on the netlist simulator's batch path,
and a few through each engine's single-instance path, against unicorn, one retirement record per
instruction. (The program table, the ISA programs, the traps, the hazards and the step limit are the
one case table's: tests/cpu/cases.py, run on every engine by tests/cpu/test_cases.py.)
"""

import pytest

from cases import assert_same_run

from cpu.fuzz import random_program
from cpu.machine import Halt
from cpu.netlist_engine import run_netlist, run_netlist_batch
from cpu.unicorn_ref import run_unicorn

ENGINES_UNDER_TEST = {"netlist": run_netlist}
FUZZ_RAM = 4096


@pytest.fixture(params=sorted(ENGINES_UNDER_TEST))
def engine(request):
    return ENGINES_UNDER_TEST[request.param]


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
