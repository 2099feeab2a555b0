"""Compile a C program for the RV32IM+Zba machine into a freestanding ELF, with the runtime in
cpu/runtime/ (crt0.S, runtime.c, libc.c, link.ld) and the small libc's standard headers in
cpu/runtime/include/ (on the include path: the freestanding targets have no <stdio.h>, <stdlib.h>,
<string.h>, <ctype.h>, <assert.h>, <math.h>, <setjmp.h>; <stdint.h>, <stddef.h>, <stdbool.h>,
<limits.h>, <stdarg.h> come with the compiler). <math.h> and <setjmp.h> are implemented in
cpu/runtime/libm/, compiled with the program's flags into an archive (``runtime_library``) from which
the linker takes only what a program calls.

Three compilers are supported; all produce the same kind of ELF (RAM at 0, _start at 0):

* ``zig`` (default): PyPI ``ziglang``, run as ``python -m ziglang cc``; 64-bit arithmetic helpers
  (``__divdi3`` ...) come from zig's compiler_rt (``-rtlib=compiler-rt``; ``-nostdlib`` alone drops it).
* ``gcc``: Debian ``gcc-riscv64-unknown-elf`` (``riscv64-unknown-elf-gcc``), helpers from its rv32im libgcc.
* ``clang``: Debian ``clang`` + ``lld``; it has no rv32 compiler-rt, so the runtime's own
  ``int64.c`` provides the helpers.

The compiler is chosen by argument, else by the ``NETLIST2TF_CC`` environment variable, else zig.
Compiled ELFs are cached under build/cpu/, keyed by a hash of everything that goes into them (source
bytes and path -- __FILE__ --, every file under runtime/, command-line flags, compiler version), so an
unchanged program is not recompiled. The same inputs give the same ELF bytes.
"""

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from netlist2tf.common import Netlist2TFError
from netlist2tf.common import build_dir

from .machine import CONSOLE_ADDR, DEFAULT_RAM_SIZE

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
INCLUDE_DIR = RUNTIME_DIR / "include"
# Every file of the runtime (paths relative to RUNTIME_DIR). The cache key hashes every file under
# RUNTIME_DIR (``runtime_files()``), so a file added there is covered even before it is listed here;
# a test checks that this list and the directory agree.
RUNTIME_FILES = ("crt0.S", "runtime.c", "runtime.h", "link.ld", "int64.c", "libc.c", "printf_float.c",
                 "include/assert.h", "include/ctype.h", "include/errno.h", "include/inttypes.h",
                 "include/math.h", "include/setjmp.h", "include/stdio.h", "include/stdlib.h",
                 "include/string.h", "include/strings.h") + tuple(f"libm/{name}" for name in (
                     "basic.c", "explog.c", "float.c", "internal.h", "setjmp.S", "trig.c"))
# The runtime library archive (``runtime_library``): <math.h> and <setjmp.h>. A program links only the
# members it calls (an archive, unlike the runtime sources above, adds nothing to programs that do
# not use it: their ELF bytes stay the same).
LIBRARY_SOURCES = ("libm/basic.c", "libm/explog.c", "libm/trig.c", "libm/float.c", "libm/setjmp.S")
PROJECT_ROOT = Path(__file__).resolve().parent.parent
COMPILERS = ("zig", "gcc", "clang")
CC_ENV = "NETLIST2TF_CC"
# Bump when the way commands are built changes in a way the hashed flags do not show.
_CACHE_FORMAT = 1
_TIMEOUT_S = 600


class CompileError(Netlist2TFError):
    """The C compiler rejected the program (the message carries its output), or it is missing."""


class CompilerNotFoundError(CompileError):
    """The selected compiler is not installed; the message says which package provides it."""


def resolve_compiler(compiler: str | None = None) -> str:
    """The compiler to use: the argument, else $NETLIST2TF_CC, else zig."""
    name = compiler or os.environ.get(CC_ENV) or "zig"
    name = name.strip().lower()
    if name not in COMPILERS:
        raise CompileError(f"unknown compiler {name!r} (from {'the argument' if compiler else '$' + CC_ENV}); "
                           f"choose one of {', '.join(COMPILERS)}")
    return name


def compiler_available(compiler: str) -> bool:
    """Whether ``compiler`` ('zig', 'gcc' or 'clang') is installed."""
    try:
        _check_installed(compiler)
        return True
    except CompilerNotFoundError:
        return False


def _check_installed(compiler: str) -> None:
    if compiler == "zig":
        if importlib.util.find_spec("ziglang") is None:
            raise CompilerNotFoundError(
                "the zig C compiler is not installed in this Python environment: "
                "pip install ziglang (the pinned version is in pyproject.toml)")
    elif compiler == "gcc":
        if shutil.which("riscv64-unknown-elf-gcc") is None:
            raise CompilerNotFoundError(
                "riscv64-unknown-elf-gcc not found: install the Debian/Ubuntu package gcc-riscv64-unknown-elf "
                "(apt-get install gcc-riscv64-unknown-elf)")
    elif compiler == "clang":
        missing = [tool for tool in ("clang", "ld.lld") if shutil.which(tool) is None]
        if missing:
            raise CompilerNotFoundError(
                f"{' and '.join(missing)} not found: install the Debian/Ubuntu packages clang and lld "
                "(apt-get install clang lld)")


@functools.lru_cache(maxsize=None)
def compiler_version(compiler: str) -> str:
    """A string that identifies the compiler's version (part of the cache key)."""
    _check_installed(compiler)
    if compiler == "zig":
        return "zig " + importlib.metadata.version("ziglang")
    exe = "riscv64-unknown-elf-gcc" if compiler == "gcc" else "clang"
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    except OSError as e:
        raise CompilerNotFoundError(f"cannot run {exe}: {e}") from None
    version = out.strip().splitlines()[0] if out.strip() else "unknown"
    if compiler == "clang":
        lld = subprocess.run(["ld.lld", "--version"], capture_output=True, text=True, timeout=60).stdout
        version += " / " + (lld.strip().splitlines()[0] if lld.strip() else "unknown")
    return version


# A program "uses floating point" (and gets printf's %f %e %g, runtime/printf_float.c) when its source
# says float or double, or has a printf conversion of a double (%f, %.2lf, %10.3e, %g ...).
_FLOAT_USE = re.compile(rb"\b(?:float|double)\b|%[-+ #0]*(?:[0-9]+|\*)?(?:\.(?:[0-9]+|\*)?)?[lL]?[eEfFgG]")


def uses_floating_point(source: bytes) -> bool:
    """Whether the C source ``source`` seems to use floating point (see _FLOAT_USE): then compile_c
    links printf's double formatting, printf_float.c (3-4 KB of code, so not into every program)."""
    return _FLOAT_USE.search(source) is not None


def runtime_files() -> list[str]:
    """The files under RUNTIME_DIR (relative paths, sorted; hidden files and caches skipped): what the
    cache key hashes besides the program."""
    return sorted(p.relative_to(RUNTIME_DIR).as_posix() for p in RUNTIME_DIR.rglob("*")
                  if p.is_file() and not any(part.startswith(".") or part == "__pycache__"
                                              for part in p.relative_to(RUNTIME_DIR).parts))


def _check_ram_size(ram_size: int) -> None:
    if not isinstance(ram_size, int) or ram_size < 4096 or ram_size % 4 or ram_size > CONSOLE_ADDR:
        raise ValueError(f"ram_size must be a multiple of 4 between 4096 and {CONSOLE_ADDR:#x}, not {ram_size!r}")


def linker_script(ram_size: int, cache_dir=None) -> Path:
    """The linker script for ``ram_size`` bytes of RAM: runtime/link.ld with ``__ram_size`` set.
    (zig's linker driver rejects ``--defsym``, so the size goes into a generated script.)"""
    _check_ram_size(ram_size)
    cache_dir = Path(cache_dir) if cache_dir is not None else build_dir() / "cpu"
    text = (f"/* generated by cpu/toolchain.py: runtime/link.ld for {ram_size} bytes of RAM */\n"
            f"__ram_size = {ram_size:#x};\n" + (RUNTIME_DIR / "link.ld").read_text())
    path = cache_dir / f"link-{hashlib.sha256(text.encode()).hexdigest()[:16]}.ld"
    if not path.is_file() or path.read_text() != text:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".link-", suffix=".ld.tmp", dir=cache_dir)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def compile_command(compiler: str, ram_size: int = DEFAULT_RAM_SIZE, opt: str = "-O2", extra_flags=(),
                    zba: bool = True, int64_helpers: bool | None = None,
                    ld_script: str = "LINK.ld", printf_float: bool = False) -> tuple[list[str], list[str], list[str]]:
    """(compiler driver argv, flags, runtime sources) for ``compiler``; the program's source, ``-o OUT``
    and the trailing libraries are added by ``compile_c``. ``ld_script`` is the linker script's path
    (a placeholder by default, as in the cache key). ``printf_float``: link printf_float.c."""
    if int64_helpers is None:
        int64_helpers = compiler == "clang"
    common = [
        opt, "-ffreestanding", "-nostdlib",
        "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-fno-stack-protector",
        "-ffunction-sections", "-fdata-sections", "-g0",
        "-I", str(RUNTIME_DIR), "-I", str(INCLUDE_DIR),
        # zig cc defines NDEBUG when optimizing, which would turn assert() off: keep it on unless the
        # program (or extra_flags) defines NDEBUG
        "-UNDEBUG",
        "-T", str(ld_script),
        "-Wl,--gc-sections", "-Wl,--build-id=none",
    ]
    if compiler == "zig":
        driver = [sys.executable, "-m", "ziglang", "cc"]
        arch = ["-target", "riscv32-freestanding-none", "-mcpu=generic_rv32+m" + ("+zba" if zba else ""),
                "-fno-sanitize=all", "-fno-PIC"]
    elif compiler == "gcc":
        driver = ["riscv64-unknown-elf-gcc"]
        arch = ["-march=rv32im" + ("_zba" if zba else ""), "-mabi=ilp32", "-static", "-fno-pic"]
    elif compiler == "clang":
        driver = ["clang"]
        arch = ["--target=riscv32", "-march=rv32im" + ("_zba" if zba else ""), "-mabi=ilp32", "-fuse-ld=lld",
                "-static", "-fno-pic"]
    else:
        raise CompileError(f"unknown compiler {compiler!r}; choose one of {', '.join(COMPILERS)}")
    sources = (["crt0.S", "runtime.c", "libc.c"] + (["printf_float.c"] if printf_float else [])
               + (["int64.c"] if int64_helpers else []))
    return driver, arch + common + list(extra_flags), sources


@functools.lru_cache(maxsize=None)
def _gcc_libgcc() -> str:
    """GCC's libgcc.a for rv32im/ilp32. With _zba in -march the driver matches none of its multilibs
    and -lgcc would find the default (rv64) libgcc, which the linker rejects."""
    try:
        out = subprocess.run(["riscv64-unknown-elf-gcc", "-march=rv32im", "-mabi=ilp32", "-print-libgcc-file-name"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
    except OSError:
        out = ""
    return out if out and os.path.isfile(out) else "-lgcc"


def runtime_library(compiler: str, driver: list, flags: list, cache_dir: Path) -> Path:
    """The runtime library archive (LIBRARY_SOURCES: libm and setjmp) compiled with ``flags`` (the
    program's compile flags; link-only ones are dropped), cached under ``cache_dir`` by a hash of the
    flags, the compiler's version and the runtime files. Built with zig's ``ar`` (llvm-ar,
    deterministic: the same inputs give the same bytes) whatever the compiler."""
    cflags, skip = [], False
    for flag in flags:
        if skip or flag == "-T":
            skip = not skip
            continue
        if not flag.startswith("-Wl,"):
            cflags.append(flag)
    key = hashlib.sha256()
    for part in (f"library {_CACHE_FORMAT}", compiler_version(compiler), compiler, repr(cflags)):
        key.update(part.encode() + b"\0")
    for name in runtime_files():
        key.update(name.encode() + b"\0" + (RUNTIME_DIR / name).read_bytes() + b"\0")
    path = Path(cache_dir) / f"libm-{compiler}-{key.hexdigest()[:20]}.a"
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".libm-", dir=path.parent) as tmp:
        objects = []
        for source in LIBRARY_SOURCES:
            obj = Path(tmp) / (Path(source).stem + ".o")
            argv = driver + cflags + ["-c", str(RUNTIME_DIR / source), "-o", str(obj)]
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S,
                                      stdin=subprocess.DEVNULL)
            except OSError as e:
                raise CompilerNotFoundError(f"cannot run the {compiler} compiler ({argv[0]}): {e}") from None
            if proc.returncode != 0:
                raise CompileError(f"{compiler} failed to compile the runtime library's {source} (a bug of "
                                   f"the runtime, or flags it does not take):\n{(proc.stderr + proc.stdout).strip()}")
            objects.append(str(obj))
        archive = Path(tmp) / "libm.a"
        proc = subprocess.run([sys.executable, "-m", "ziglang", "ar", "rcsD", str(archive)] + objects,
                              capture_output=True, text=True, timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise CompileError(f"zig ar failed to build the runtime library:\n{(proc.stderr + proc.stdout).strip()}")
        os.replace(archive, path)
    return path


def _libs(compiler: str, int64_helpers: bool) -> list[str]:
    if int64_helpers:
        return []
    if compiler == "gcc":
        return [_gcc_libgcc()]
    return {"zig": ["-rtlib=compiler-rt"], "clang": []}[compiler]


def compile_c(source_path, out_elf=None, ram_size: int = DEFAULT_RAM_SIZE, compiler: str | None = None,
              opt: str = "-O2", extra_flags=(), zba: bool = True, int64_helpers: bool | None = None,
              cache_dir=None, use_cache: bool = True, printf_float: bool | None = None) -> Path:
    """Compile the C program ``source_path`` (one .c file with ``int main(void)``, including
    "runtime.h" and/or the standard headers of runtime/include/: <stdio.h>, <stdlib.h>, <string.h>,
    <ctype.h>, <assert.h>, <math.h>, <setjmp.h> ...) with the runtime into an ELF for the machine;
    returns the ELF's path.

    ``out_elf``: where to put the ELF (default: the cache file itself). ``ram_size``: the RAM the
    program is linked for (the stack starts at its top). ``zba``: let the compiler use Zba.
    ``int64_helpers``: link cpu/runtime/int64.c for 64-bit division etc. instead of the compiler's
    own runtime library (default: only for clang, which has none for rv32). ``printf_float``: link
    printf's formatting of doubles (%f %e %g); default: when the source uses floating point
    (``uses_floating_point``); without it those conversions print as they are.
    Raises ``CompileError`` with the compiler's messages when it fails."""
    source_path = Path(source_path)
    _check_ram_size(ram_size)
    compiler = resolve_compiler(compiler)
    if int64_helpers is None:
        int64_helpers = compiler == "clang"
    try:
        source = source_path.read_bytes()
    except OSError as e:
        raise CompileError(f"{source_path}: cannot read the C source: {e.strerror or e}") from None
    _check_installed(compiler)        # every time: compiler_version is cached per process
    version = compiler_version(compiler)
    if printf_float is None:
        printf_float = uses_floating_point(source)
    driver, flags, runtime_sources = compile_command(compiler, ram_size, opt, extra_flags, zba, int64_helpers,
                                                     printf_float=printf_float)
    libs = _libs(compiler, int64_helpers)

    key = hashlib.sha256()
    for part in (f"format {_CACHE_FORMAT}", version, compiler, f"ram {ram_size}", repr(flags),
                 repr(runtime_sources), repr(libs)):
        key.update(part.encode() + b"\0")
    for name in runtime_files():
        key.update(name.encode() + b"\0" + (RUNTIME_DIR / name).read_bytes() + b"\0")
    # the path as given: __FILE__ (assert's message) is this path
    key.update(str(source_path).encode() + b"\0")
    key.update(source)
    digest = key.hexdigest()[:20]

    cache_dir = Path(cache_dir) if cache_dir is not None else build_dir() / "cpu"
    cached = cache_dir / f"{source_path.stem}-{compiler}-{digest}.elf"
    if not (use_cache and cached.is_file()):
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{source_path.stem}-", suffix=".elf.tmp", dir=cache_dir)
        os.close(fd)
        try:
            ld = linker_script(ram_size, cache_dir)
            flags = compile_command(compiler, ram_size, opt, extra_flags, zba, int64_helpers, ld_script=str(ld),
                                    printf_float=printf_float)[1]
            library = runtime_library(compiler, driver, flags, cache_dir)
            argv = (driver + flags + ["-o", tmp] + [str(RUNTIME_DIR / s) for s in runtime_sources]
                    + [str(source_path), str(library)] + libs)
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S,
                                      stdin=subprocess.DEVNULL)
            except OSError as e:
                raise CompilerNotFoundError(f"cannot run the {compiler} compiler ({argv[0]}): {e}") from None
            except subprocess.TimeoutExpired:
                raise CompileError(f"{compiler} took longer than {_TIMEOUT_S} s compiling {source_path}") from None
            if proc.returncode != 0 or not os.path.getsize(tmp):
                output = (proc.stderr + proc.stdout).strip()
                hint = ""
                if "does not fit in RAM" in output:          # the linker script's ASSERT
                    hint = (f"\n{source_path} needs more than the {ram_size:,} bytes of RAM it was linked for: "
                            f"pass a larger --ram-size (cpu run --engine model defaults to the compiled "
                            f"model's RAM; a larger RAM compiles a larger checkpoint)")
                elif compiler == "clang" and re.search(r"undefined symbol: __(?:add|sub|mul|div|fix|float|extend|"
                                                       r"trunc|eq|ne|lt|le|gt|ge|unord)[a-z]*[sd]f", output):
                    hint = (f"\n{source_path} uses floating point, and clang has no soft-float runtime for rv32 "
                            f"(no compiler-rt builtins): compile it with zig (the default) or gcc")
                raise CompileError(f"{compiler} failed to compile {source_path} (exit status {proc.returncode}):\n"
                                   f"{output}{hint}")
            os.replace(tmp, cached)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    if out_elf is None:
        return cached
    out_elf = Path(out_elf)
    if out_elf.resolve() != cached.resolve():
        out_elf.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cached, out_elf)
    return out_elf
