"""Load a RISC-V ELF executable into a machine ``Image`` (see cpu/machine.py).

Only what the machine can run is accepted: a 32-bit little-endian RISC-V executable (ET_EXEC) whose
loadable segments all lie inside RAM. Everything else raises ``ElfError`` with a message that says
what is wrong with the file.
"""

import io
import struct
from pathlib import Path

from elftools.common.exceptions import ELFError as _PyElfError
from elftools.common.exceptions import ELFParseError as _PyElfParseError
from elftools.elf.elffile import ELFFile

from netlist2tf.common import Netlist2TFError

from .machine import DEFAULT_RAM_SIZE, RAM_BASE, Image

EM_RISCV = 243


class ElfError(Netlist2TFError):
    """A file that is not a RISC-V executable this machine can load."""


def load_elf(path, ram_size: int = DEFAULT_RAM_SIZE) -> Image:
    """The ``Image`` of the ELF executable at ``path``: its PT_LOAD segments (file bytes, then zeros
    up to the segment's memory size) and its entry point."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ElfError(f"{path}: cannot read the file: {e.strerror or e}") from None
    return load_elf_bytes(data, ram_size=ram_size, name=str(path))


def load_elf_bytes(data: bytes, ram_size: int = DEFAULT_RAM_SIZE, name: str = "<bytes>") -> Image:
    """``load_elf`` for an ELF file's contents already in memory."""
    if len(data) < 4 or data[:4] != b"\x7fELF":
        raise ElfError(f"{name}: not an ELF file (no \\x7fELF magic at the start)")
    if len(data) < 16:
        raise ElfError(f"{name}: truncated ELF file ({len(data)} bytes, shorter than the ELF identification)")
    ei_class, ei_data = data[4], data[5]
    if ei_class != 1:
        what = "a 64-bit" if ei_class == 2 else f"an ELF class {ei_class}"
        raise ElfError(f"{name}: {what} ELF file; the machine runs 32-bit RISC-V (ELFCLASS32) executables only")
    if ei_data != 1:
        what = "a big-endian" if ei_data == 2 else f"an ELF data encoding {ei_data}"
        raise ElfError(f"{name}: {what} ELF file; the machine is little-endian (ELFDATA2LSB)")
    try:
        return _load(ELFFile(io.BytesIO(data)), len(data), ram_size, name)
    except ElfError:
        raise
    except (_PyElfError, _PyElfParseError, struct.error, ValueError, KeyError, IndexError, EOFError) as e:
        raise ElfError(f"{name}: truncated or corrupt ELF file ({type(e).__name__}: {e})") from None


def _load(elf: ELFFile, file_size: int, ram_size: int, name: str) -> Image:
    header = elf.header
    machine = header["e_machine"]
    if machine not in ("EM_RISCV", EM_RISCV):
        raise ElfError(f"{name}: an ELF file for machine {machine}, not RISC-V (EM_RISCV = {EM_RISCV})")
    etype = header["e_type"]
    if etype != "ET_EXEC":
        what = {"ET_REL": "a relocatable object file (.o), not linked", "ET_DYN": "a shared object / PIE",
                "ET_CORE": "a core dump"}.get(etype, f"of type {etype}")
        raise ElfError(f"{name}: {what}; the machine needs a linked executable (ET_EXEC)")
    for what, offset, count, size in (("program header", header["e_phoff"], header["e_phnum"], header["e_phentsize"]),
                                      ("section header", header["e_shoff"], header["e_shnum"], header["e_shentsize"])):
        if offset and offset + count * size > file_size:
            raise ElfError(f"{name}: truncated ELF file: the {what} table ends at byte {offset + count * size}, "
                           f"the file has {file_size}")
    ram_end = RAM_BASE + ram_size
    segments = []
    for seg in elf.iter_segments():
        if seg["p_type"] != "PT_LOAD" or seg["p_memsz"] == 0:
            continue
        addr, filesz, memsz, offset = seg["p_vaddr"], seg["p_filesz"], seg["p_memsz"], seg["p_offset"]
        if filesz > memsz:
            raise ElfError(f"{name}: corrupt PT_LOAD segment at {addr:#x}: file size {filesz} > memory size {memsz}")
        if offset + filesz > file_size:
            raise ElfError(f"{name}: truncated ELF file: the segment at {addr:#x} needs file bytes "
                           f"{offset:#x}..{offset + filesz:#x}, the file has {file_size}")
        if addr < RAM_BASE or addr + memsz > ram_end:
            raise ElfError(f"{name}: segment {addr:#010x}..{addr + memsz:#010x} lies outside RAM "
                           f"({RAM_BASE:#010x}..{ram_end:#010x}, {ram_size} bytes); link for this RAM size "
                           f"or run with a larger one")
        body = seg.data()
        if len(body) != filesz:
            raise ElfError(f"{name}: truncated ELF file: segment at {addr:#x} has {len(body)} of {filesz} bytes")
        segments.append((addr, bytes(body) + bytes(memsz - filesz)))
    if not segments:
        raise ElfError(f"{name}: no loadable (PT_LOAD) segment: nothing to put in RAM")
    segments.sort()
    for (a0, d0), (a1, _) in zip(segments, segments[1:]):
        if a0 + len(d0) > a1:
            raise ElfError(f"{name}: PT_LOAD segments overlap at {a1:#x}")
    entry = header["e_entry"]
    if not RAM_BASE <= entry < ram_end:
        raise ElfError(f"{name}: entry point {entry:#x} lies outside RAM ({RAM_BASE:#x}..{ram_end:#x})")
    return Image(entry, tuple(segments), _input_addr(elf, ram_end))


def _input_addr(elf: ELFFile, ram_end: int) -> int | None:
    """The address of the symbol ``__input_start`` (cpu/runtime/link.ld: the program's input area), None
    when the file has no symbol table or no such symbol, or it is not a word inside RAM."""
    symtab = elf.get_section_by_name(".symtab")
    if symtab is None or not hasattr(symtab, "get_symbol_by_name"):
        return None
    found = symtab.get_symbol_by_name("__input_start") or []
    addrs = {s["st_value"] for s in found}
    if len(addrs) != 1:
        return None
    (addr,) = addrs
    return addr if RAM_BASE <= addr and addr + 4 <= ram_end and addr % 4 == 0 else None
