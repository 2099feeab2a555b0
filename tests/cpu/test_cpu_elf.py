"""The ELF loader: real programs load; everything the machine cannot run is rejected with ElfError."""

import os
import random
import struct
import sys
from pathlib import Path

import pytest

from cpu.elf import ElfError, load_elf, load_elf_bytes
from cpu.programs import PROGRAMS_BY_NAME
from cpu.toolchain import compile_c
from netlist2tf.common.errors import Netlist2TFError


def make_elf(segments=((0, b"\x13\x00\x00\x00" * 2, 16),), entry=0, ei_class=1, ei_data=1, machine=243,
             etype=2, ptype=1):
    """A minimal ELF32 file: header, program headers, segment bytes. segments: (vaddr, data, memsz)."""
    ehsize, phentsize = 52, 32
    phoff = ehsize
    data_off = phoff + phentsize * len(segments)
    ident = b"\x7fELF" + bytes([ei_class, ei_data, 1]) + bytes(9)
    header = ident + struct.pack("<HHIIIIIHHHHHH", etype, machine, 1, entry, phoff, 0, 0, ehsize, phentsize,
                                 len(segments), 40, 0, 0)
    phdrs, body, off = b"", b"", data_off
    for vaddr, data, memsz in segments:
        phdrs += struct.pack("<IIIIIIII", ptype, off, vaddr, vaddr, len(data), memsz, 7, 4)
        body += data
        off += len(data)
    return header + phdrs + body


def test_real_program_loads():
    image = load_elf(compile_c(PROGRAMS_BY_NAME["hello"].path))
    assert image.entry == 0
    assert image.segments[0][0] == 0
    assert all(0 <= a and a + len(d) <= 65536 for a, d in image.segments)
    words = image.words()
    assert words[0] & 0x7F == 0x17          # auipc sp, ... : crt0's first instruction


def test_zero_fill_and_entry():
    image = load_elf_bytes(make_elf(((0x100, b"\x01\x02\x03", 8), (0x200, b"", 4)), entry=0x100))
    assert image.entry == 0x100
    assert image.segments == ((0x100, b"\x01\x02\x03" + bytes(5)), (0x200, bytes(4)))


def test_not_an_elf(tmp_path):
    rnd = random.Random(1)
    path = tmp_path / "random.bin"
    path.write_bytes(bytes(rnd.randrange(256) for _ in range(4096)))
    with pytest.raises(ElfError, match="not an ELF"):
        load_elf(path)
    with pytest.raises(ElfError, match="not an ELF"):
        load_elf_bytes(b"")
    with pytest.raises(ElfError, match="not an ELF"):
        load_elf_bytes(b"#!/bin/sh\necho hi\n")


def test_missing_file(tmp_path):
    with pytest.raises(ElfError, match="cannot read"):
        load_elf(tmp_path / "missing.elf")


def test_host_executable_rejected():
    host = Path("/bin/ls") if Path("/bin/ls").is_file() else Path(os.path.realpath(sys.executable))
    with pytest.raises(ElfError, match="64-bit|not RISC-V|32-bit") as info:
        load_elf(host)
    assert isinstance(info.value, Netlist2TFError)


@pytest.mark.parametrize("cut", [6, 20, 51, 60, 84, 90])
def test_truncated(cut):
    data = make_elf()
    with pytest.raises(ElfError, match="truncated|corrupt"):
        load_elf_bytes(data[:cut])


def test_truncated_real_elf(tmp_path):
    data = compile_c(PROGRAMS_BY_NAME["hello"].path).read_bytes()
    for cut in (40, 100, len(data) // 2):
        with pytest.raises(ElfError):
            load_elf_bytes(data[:cut])


def test_wrong_class_endianness_machine_type():
    with pytest.raises(ElfError, match="64-bit"):
        load_elf_bytes(make_elf(ei_class=2))
    with pytest.raises(ElfError, match="big-endian"):
        load_elf_bytes(make_elf(ei_data=2))
    with pytest.raises(ElfError, match="not RISC-V"):
        load_elf_bytes(make_elf(machine=3))      # EM_386
    with pytest.raises(ElfError, match="relocatable"):
        load_elf_bytes(make_elf(etype=1))
    with pytest.raises(ElfError, match="shared object"):
        load_elf_bytes(make_elf(etype=3))


def test_segment_outside_ram():
    with pytest.raises(ElfError, match="outside RAM"):
        load_elf_bytes(make_elf(((0xFFF0, b"\x00" * 8, 32),)))
    with pytest.raises(ElfError, match="outside RAM"):
        load_elf_bytes(make_elf(((0x1000_0000, b"\x00" * 4, 4),)))
    # a program that fits 64 KiB does not fit 1 KiB
    elf = compile_c(PROGRAMS_BY_NAME["hello"].path)
    with pytest.raises(ElfError, match="outside RAM"):
        load_elf(elf, ram_size=1024)
    with pytest.raises(ElfError, match="entry point"):
        load_elf_bytes(make_elf(entry=0x20000))


def test_no_loadable_segment():
    with pytest.raises(ElfError, match="no loadable"):
        load_elf_bytes(make_elf(ptype=4))        # PT_NOTE only
    with pytest.raises(ElfError, match="no loadable"):
        load_elf_bytes(make_elf(segments=()))


def test_overlapping_segments():
    with pytest.raises(ElfError, match="overlap"):
        load_elf_bytes(make_elf(((0, b"\x00" * 8, 8), (4, b"\x00" * 8, 8))))
