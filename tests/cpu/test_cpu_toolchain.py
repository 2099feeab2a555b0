"""The C toolchain: caching, deterministic output, compile errors, compiler selection, 64-bit helpers."""

import os
import shutil

import pytest

from cpu import toolchain
from cpu.elf import load_elf
from cpu.machine import Halt
from cpu.programs import PROGRAMS_BY_NAME
from cpu.toolchain import CompileError, CompilerNotFoundError, compile_c, compiler_available
from cpu.unicorn_ref import run_unicorn
from netlist2tf.common.errors import Netlist2TFError

HELLO = PROGRAMS_BY_NAME["hello"]


def test_cache_hit_runs_no_compiler_and_same_file(monkeypatch):
    first = compile_c(HELLO.path)
    mtime = first.stat().st_mtime_ns
    calls = []
    real_run = toolchain.subprocess.run

    def spy(argv, *a, **k):
        calls.append(list(argv))
        return real_run(argv, *a, **k)
    monkeypatch.setattr(toolchain.subprocess, "run", spy)
    again = compile_c(HELLO.path)
    assert not [c for c in calls if str(HELLO.path) in " ".join(map(str, c))]     # no compile, no link
    assert again == first and again.stat().st_mtime_ns == mtime
    assert first.parent == toolchain.build_dir() / "cpu"          # one cache, whatever the cwd


def test_out_elf_copy_and_key_changes(tmp_path):
    out = compile_c(HELLO.path, out_elf=tmp_path / "x" / "hello.elf")
    assert out == tmp_path / "x" / "hello.elf" and out.read_bytes() == compile_c(HELLO.path).read_bytes()
    # a different flag or RAM size is a different cache entry
    assert compile_c(HELLO.path, opt="-Os") != compile_c(HELLO.path)
    assert compile_c(HELLO.path, ram_size=32768) != compile_c(HELLO.path)


def test_deterministic_output(tmp_path):
    a = compile_c(HELLO.path, cache_dir=tmp_path / "a", use_cache=False).read_bytes()
    b = compile_c(HELLO.path, cache_dir=tmp_path / "b", use_cache=False).read_bytes()
    assert a == b


def test_source_change_recompiles(tmp_path):
    src = tmp_path / "prog.c"
    src.write_text('#include "runtime.h"\nint main(void) { puts("one"); return 1; }\n')
    first = compile_c(src, cache_dir=tmp_path / "cache")
    src.write_text('#include "runtime.h"\nint main(void) { puts("two"); return 2; }\n')
    second = compile_c(src, cache_dir=tmp_path / "cache")
    assert first != second
    result = run_unicorn(load_elf(second))
    assert result.console == b"two\n" and result.halt.exit_code == 2


def test_syntax_error_message_has_compiler_output(tmp_path):
    src = tmp_path / "broken.c"
    src.write_text('#include "runtime.h"\nint main(void) { int x = ; return undeclared_thing; }\n')
    with pytest.raises(CompileError) as info:
        compile_c(src, cache_dir=tmp_path)
    msg = str(info.value)
    assert isinstance(info.value, Netlist2TFError)
    assert "broken.c" in msg and "error" in msg and "undeclared_thing" in msg
    assert not list(tmp_path.glob("*.elf")) and not list(tmp_path.glob(".*.tmp"))


def test_link_error_and_too_big_for_ram(tmp_path):
    src = tmp_path / "nolink.c"
    src.write_text('#include "runtime.h"\nint missing(void);\nint main(void) { return missing(); }\n')
    with pytest.raises(CompileError, match="missing"):
        compile_c(src, cache_dir=tmp_path)
    big = tmp_path / "big.c"
    big.write_text('#include "runtime.h"\nstatic char buf[100000];\n'
                   'int main(void) { buf[5] = 1; return buf[(unsigned)main & 7]; }\n')
    with pytest.raises(CompileError, match="does not fit in RAM") as e:
        compile_c(big, cache_dir=tmp_path)
    assert "pass a larger --ram-size" in str(e.value)          # the fix is named


def test_missing_source(tmp_path):
    with pytest.raises(CompileError, match="cannot read"):
        compile_c(tmp_path / "nope.c")


def test_missing_compilers_name_the_package(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(CompilerNotFoundError, match="gcc-riscv64-unknown-elf"):
        compile_c(HELLO.path, compiler="gcc")
    with pytest.raises(CompilerNotFoundError, match="lld"):
        compile_c(HELLO.path, compiler="clang")
    monkeypatch.setenv("NETLIST2TF_CC", "gcc")
    with pytest.raises(CompilerNotFoundError, match="apt-get install gcc-riscv64-unknown-elf"):
        compile_c(HELLO.path)
    assert not compiler_available("gcc") and compiler_available("zig")


def test_unknown_compiler(monkeypatch):
    with pytest.raises(CompileError, match="unknown compiler"):
        compile_c(HELLO.path, compiler="tcc")
    monkeypatch.setenv("NETLIST2TF_CC", "msvc")
    with pytest.raises(CompileError, match="NETLIST2TF_CC"):
        compile_c(HELLO.path)


def test_env_selects_zig(monkeypatch):
    monkeypatch.setenv("NETLIST2TF_CC", "zig")
    assert compile_c(HELLO.path) == compile_c(HELLO.path, compiler="zig")


def test_64bit_division_links(tmp_path):
    src = tmp_path / "div64.c"
    src.write_text('#include "runtime.h"\n'
                   'int main(void) {\n'
                   '  volatile long long a = -9000000000123LL, b = 7;\n'
                   '  volatile unsigned long long c = 18000000000000000000ULL, d = 3000000007ULL;\n'
                   '  long long q = a / b, r = a % b; unsigned long long uq = c / d, ur = c % d;\n'
                   '  printf("%lld %lld %llu %llu\\n", q, r, uq, ur);\n'
                   '  return 0;\n}\n')
    expected = f"{-(9000000000123 // 7)} {-(9000000000123 % 7)} {18000000000000000000 // 3000000007} " \
               f"{18000000000000000000 % 3000000007}\n".encode()
    for helpers in (False, True):
        result = run_unicorn(load_elf(compile_c(src, cache_dir=tmp_path, int64_helpers=helpers)))
        assert result.console == expected and result.halt.kind == Halt.EXIT


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_other_compilers_if_installed(compiler, tmp_path):
    if not compiler_available(compiler):
        pytest.skip(f"{compiler} for RISC-V is not installed")
    for name in ("hello", "longlong", "muldiv"):
        prog = PROGRAMS_BY_NAME[name]
        result = run_unicorn(load_elf(compile_c(prog.path, compiler=compiler, cache_dir=tmp_path)))
        assert result.console == prog.expected_output
        assert result.halt.exit_code == prog.expected_exit


def test_runtime_files_exist():
    for name in toolchain.RUNTIME_FILES:
        assert (toolchain.RUNTIME_DIR / name).is_file(), name
    assert os.path.basename(toolchain.linker_script(16384)).startswith("link-")
