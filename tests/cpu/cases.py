"""The one table of CPU cases (tests/cpu/test_cases.py runs every case on every engine).

A case is a program image for the machine's RAM, the independent expectation it carries besides
unicorn's records (the program table's output and exit code, a self-checking ISA program's exit code
0, a trap program's cause and pc, a hazard program's hand-checked exit code, a step limit), and a cost
tag: how long it runs, which decides where an engine runs it (its default suite or ``-m slow``), never
whether. New programs, traps, hazards or fuzz seeds go here, and every engine gets them.
"""

from dataclasses import dataclass, field
from typing import Callable

from cpu.fuzz import random_program
from cpu.isa_tests import EXPECTED_HALT, ISA_TESTS, TRAP_TESTS, hazard_programs, loop_forever_program, ram_needed
from cpu.machine import DEFAULT_RAM_SIZE, Halt
from cpu.programs import PROGRAMS

RAM = DEFAULT_RAM_SIZE                  # the machine's 64 KiB, as every engine (and the model) has it
COSTS = ("cheap", "short", "long")      # a few hundred cycles / a few thousand / tens of thousands and more
FUZZ_SEEDS = (1, 2) + tuple(range(1000, 1100))
HAZARD_EXITS = {0: 12, 1: 0x12347878 + 0x78, 2: 3, 3: 77}      # hand-checked, in hazard_programs' order


@dataclass(frozen=True)
class Case:
    name: str
    cost: str
    make: Callable = field(repr=False)          # () -> Image for RAM bytes of RAM
    expect: Callable = field(repr=False)        # (RunResult) -> None: asserts the independent expectation
    max_steps: int = 1_000_000

    def __str__(self):
        return self.name


def _program(p) -> Case:
    from cpu.elf import load_elf
    from cpu.toolchain import compile_c

    def expect(r):
        assert r.console == p.expected_output, f"{p.name}: console {r.console!r}"
        assert r.halt.kind == Halt.EXIT and r.halt.exit_code == p.expected_exit, f"{p.name}: {r.halt}"
    return Case(f"program:{p.name}", "long", lambda: load_elf(compile_c(p.path, ram_size=RAM), ram_size=RAM), expect)


def _isa(name: str) -> Case:
    def expect(r):                              # self-checking: a0 = the first failing case (0: all passed)
        assert r.halt.kind == EXPECTED_HALT[name], f"{name}: {r.halt}"
        assert r.halt.exit_code == 0, f"{name}: case {r.halt.exit_code} failed"
    return Case(f"isa:{name}", "short", ISA_TESTS[name], expect)


def _trap(name: str, cost: str) -> Case:
    def expect(r):
        case = TRAP_TESTS[name]()
        assert r.halt == Halt(Halt.TRAP, case.pc, 0, case.cause), f"{name}: {r.halt}"
        assert r.instructions == case.retired
    return Case(f"trap:{name}", cost, lambda: TRAP_TESTS[name]().image, expect)


def _hazard(i: int, name: str) -> Case:
    def expect(r):
        assert r.halt.kind == Halt.EXIT and r.halt.exit_code == HAZARD_EXITS[i], f"{name}: {r.halt}"
    return Case(f"hazard:{name}", "cheap", lambda: hazard_programs()[name], expect)


def _fuzz(seed: int) -> Case:
    def expect(r):
        assert r.halt.kind == Halt.EXIT, f"fuzz seed {seed}: the generator made a program that does not exit"
    return Case(f"fuzz:{seed}", "cheap" if seed == 1 else "short",
                lambda: random_program(seed, 12, RAM, compact=True), expect)


def _step_limit() -> Case:
    def expect(r):
        assert r.halt.kind == Halt.STEP_LIMIT and r.instructions == 100, r.halt
    return Case("step-limit:loop-forever", "cheap", loop_forever_program, expect, max_steps=100)


def assert_same_run(ref, got, what=""):
    """Console, halt and every retirement record of ``got`` equal the reference run ``ref``'s (unicorn);
    the first difference is named."""
    for i, (a, b) in enumerate(zip(ref.records, got.records)):
        assert a == b, f"{what}: record {i} differs\n  reference {a}\n  engine    {b}"
    assert len(got.records) == len(ref.records), f"{what}: {len(got.records)} records, reference {len(ref.records)}"
    assert got.console == ref.console, f"{what}: console output differs"
    assert got.halt == ref.halt, f"{what}: halt {got.halt} vs reference {ref.halt}"
    assert got.instructions == ref.instructions


def cases() -> list:
    first_trap = sorted(TRAP_TESTS)[0]
    return ([_program(p) for p in PROGRAMS]
            + [_isa(n) for n in sorted(ISA_TESTS) if ram_needed(ISA_TESTS[n]()) <= RAM]
            + [_trap(n, "cheap" if n == first_trap else "short") for n in sorted(TRAP_TESTS)]
            + [_hazard(i, n) for i, n in enumerate(hazard_programs())]
            + [_fuzz(s) for s in FUZZ_SEEDS]
            + [_step_limit()])


CASES = cases()
