"""Every program of the table compiles and, on the unicorn reference machine, prints the expected
output and exits with the expected code."""

import zlib

import pytest

from cpu.elf import load_elf
from cpu.machine import Halt
from cpu.programs import PROGRAMS, PROGRAMS_BY_NAME, rv_muldiv
from cpu.toolchain import compile_c
from cpu.unicorn_ref import K_ZBA, decode, run_unicorn

MAX_INSTRUCTIONS = 200_000


def _run(prog, trace=False, **compile_kw):
    image = load_elf(compile_c(prog.path, **compile_kw))
    return run_unicorn(image, max_steps=2 * MAX_INSTRUCTIONS, trace=trace)


def _check(prog, result):
    assert result.console.decode(errors="replace") == prog.expected_output.decode()
    assert result.halt == Halt(Halt.EXIT, result.halt.pc, exit_code=prog.expected_exit)
    assert result.instructions <= MAX_INSTRUCTIONS


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program_on_unicorn(prog):
    _check(prog, _run(prog))


def test_table_is_sane():
    assert len(PROGRAMS) >= 11 and len(PROGRAMS_BY_NAME) == len(PROGRAMS)
    assert all(p.path.is_file() for p in PROGRAMS)
    assert sum(p.expected_exit != 0 for p in PROGRAMS) >= 2      # some exit non-zero on purpose
    crc = PROGRAMS_BY_NAME["crc32"]
    assert b"414fa339" in crc.expected_output                     # the well-known CRC of the fox
    assert crc.expected_exit == zlib.crc32(bytes((i * 7 + (i >> 3)) & 0xFF for i in range(1024))) & 0xFF
    assert b"primes below 2000: 303," in PROGRAMS_BY_NAME["sieve"].expected_output
    assert b"A(2,3) = 9 " in PROGRAMS_BY_NAME["recursion"].expected_output
    assert b"A(3,3) = 61 " in PROGRAMS_BY_NAME["recursion"].expected_output
    # the RISC-V spec's division corner cases
    assert rv_muldiv(5, 0)["div"] == 0xFFFF_FFFF and rv_muldiv(5, 0)["rem"] == 5
    assert rv_muldiv(5, 0)["divu"] == 0xFFFF_FFFF and rv_muldiv(5, 0)["remu"] == 5
    assert rv_muldiv(-(1 << 31), -1)["div"] == 0x8000_0000 and rv_muldiv(-(1 << 31), -1)["rem"] == 0
    assert rv_muldiv(-7, 3)["div"] == 0xFFFF_FFFE and rv_muldiv(-7, 3)["rem"] == 0xFFFF_FFFF
    assert rv_muldiv(-1, -1)["mulhu"] == 0xFFFF_FFFE and rv_muldiv(-1, -1)["mulh"] == 0
    assert rv_muldiv(-1, -1)["mulhsu"] == 0xFFFF_FFFF


def test_trace_records_chain():
    prog = PROGRAMS_BY_NAME["quicksort"]
    result = _run(prog, trace=True)
    _check(prog, result)
    records = result.records
    assert len(records) == result.instructions
    assert all(a.next_pc == b.pc for a, b in zip(records, records[1:]))
    assert records[-1].next_pc == result.halt.pc
    assert records[0].pc == 0
    assert all(r.mem_addr % 4 == 0 for r in records)
    assert all(not (r.mem_rmask and r.mem_wmask) for r in records)
    assert all(r.rd or not r.rd_wdata for r in records)


def test_zba_is_used_and_emulated():
    # unicorn lacks Zba: the reference machine executes sh1add/sh2add/sh3add itself
    prog = PROGRAMS_BY_NAME["matmul"]
    result = _run(prog, trace=True)
    _check(prog, result)
    assert sum(decode(r.insn)[0] == K_ZBA for r in result.records) > 100


def test_without_zba():
    prog = PROGRAMS_BY_NAME["muldiv"]
    result = _run(prog, trace=True, zba=False)
    _check(prog, result)
    assert not any(decode(r.insn)[0] == K_ZBA for r in result.records)


def test_longlong_with_runtime_int64_helpers():
    # cpu/runtime/int64.c instead of zig's compiler_rt (what clang builds use)
    prog = PROGRAMS_BY_NAME["longlong"]
    _check(prog, _run(prog, int64_helpers=True))


def test_small_ram():
    prog = PROGRAMS_BY_NAME["strings"]
    elf = compile_c(prog.path, ram_size=8192)
    image = load_elf(elf, ram_size=8192)
    result = run_unicorn(image, ram_size=8192, trace=True)
    _check(prog, result)
    assert result.records[0].rd_wdata == 8192     # sp = top of the 8 KiB RAM


def test_table_images_name_what_does_not_fit():
    """At 16 KiB (the compiled model's RAM) every table program but libc links; libc is None."""
    from cpu.programs import PROGRAMS, table_images

    got = {prog.name: img for prog, img in table_images(16384)}
    assert list(got) == [p.name for p in PROGRAMS]
    assert [name for name, img in got.items() if img is None] == ["libc"]
    assert got["hi"].entry == 0 and got["hi"].words()
