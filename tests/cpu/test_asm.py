"""The RV32IM+Zba encoder (cpu/asm.py): pinned encodings and semantics on unicorn.

The pinned words were produced by an independent assembler (LLVM 14's llvm-mc, -triple=riscv32
-mattr=+m,+zba -show-encoding) and several were checked by hand against the spec's bit layouts
(addi/lui/jal/beq/sw/mul/sh1add/srai/sb/bge/jal -4). If llvm-mc is installed, one test also
re-assembles every pinned line with it.
"""

import shutil
import subprocess

import pytest
from unicorn import UC_ARCH_RISCV, UC_HOOK_INTR, UC_MODE_RISCV32, Uc
from unicorn.riscv_const import UC_RISCV_REG_PC, UC_RISCV_REG_X0

from cpu import asm

PINNED = [
    ("lui t0, 0x12345", lambda: asm.lui('t0', 0x12345), 0x123452b7),
    ("lui a0, 0xfffff", lambda: asm.lui('a0', 0xfffff), 0xfffff537),
    ("auipc ra, 0x80000", lambda: asm.auipc('ra', 0x80000), 0x80000097),
    ("auipc s11, 0", lambda: asm.auipc('s11', 0), 0x00000d97),
    ("jal ra, 8", lambda: asm.jal('ra', 8), 0x008000ef),
    ("jal zero, -4", lambda: asm.jal('zero', -4), 0xffdff06f),
    ("jal t1, 1048574", lambda: asm.jal('t1', 1048574), 0x7ffff36f),
    ("jal a0, -1048576", lambda: asm.jal('a0', -1048576), 0x8000056f),
    ("jal zero, 2048", lambda: asm.jal('zero', 2048), 0x0010006f),
    ("jalr ra, 0(t0)", lambda: asm.jalr('ra', 't0', 0), 0x000280e7),
    ("jalr zero, -2048(a0)", lambda: asm.jalr('zero', 'a0', -2048), 0x80050067),
    ("jalr t6, 2047(sp)", lambda: asm.jalr('t6', 'sp', 2047), 0x7ff10fe7),
    ("beq ra, sp, -4", lambda: asm.beq('ra', 'sp', -4), 0xfe208ee3),
    ("bne a0, a1, 16", lambda: asm.bne('a0', 'a1', 16), 0x00b51863),
    ("blt t0, t1, -4096", lambda: asm.blt('t0', 't1', -4096), 0x8062c063),
    ("bge s0, s1, 4094", lambda: asm.bge('s0', 's1', 4094), 0x7e945fe3),
    ("bltu zero, t6, 2048", lambda: asm.bltu('zero', 't6', 2048), 0x01f060e3),
    ("bgeu a5, zero, -2", lambda: asm.bgeu('a5', 'zero', -2), 0xfe07ffe3),
    ("lb a0, -1(sp)", lambda: asm.lb('a0', 'sp', -1), 0xfff10503),
    ("lh t0, 2047(a1)", lambda: asm.lh('t0', 'a1', 2047), 0x7ff59283),
    ("lw ra, -2048(s0)", lambda: asm.lw('ra', 's0', -2048), 0x80042083),
    ("lbu t6, 0(zero)", lambda: asm.lbu('t6', 'zero', 0), 0x00004f83),
    ("lhu s2, 6(s3)", lambda: asm.lhu('s2', 's3', 6), 0x0069d903),
    ("sb a0, -1(sp)", lambda: asm.sb('a0', 'sp', -1), 0xfea10fa3),
    ("sh t0, 2047(a1)", lambda: asm.sh('t0', 'a1', 2047), 0x7e559fa3),
    ("sw sp, 8(ra)", lambda: asm.sw('sp', 'ra', 8), 0x0020a423),
    ("sw zero, -2048(t6)", lambda: asm.sw('zero', 't6', -2048), 0x800fa023),
    ("addi ra, zero, 5", lambda: asm.addi('ra', 'zero', 5), 0x00500093),
    ("addi sp, sp, -2048", lambda: asm.addi('sp', 'sp', -2048), 0x80010113),
    ("slti a0, a1, 2047", lambda: asm.slti('a0', 'a1', 2047), 0x7ff5a513),
    ("sltiu t0, t1, -1", lambda: asm.sltiu('t0', 't1', -1), 0xfff33293),
    ("xori a2, a3, -1", lambda: asm.xori('a2', 'a3', -1), 0xfff6c613),
    ("ori a4, a5, 0x555", lambda: asm.ori('a4', 'a5', 0x555), 0x5557e713),
    ("andi s4, s5, 0xff", lambda: asm.andi('s4', 's5', 0xff), 0x0ffafa13),
    ("slli a0, a0, 31", lambda: asm.slli('a0', 'a0', 31), 0x01f51513),
    ("srli t0, t1, 1", lambda: asm.srli('t0', 't1', 1), 0x00135293),
    ("srai s6, s7, 31", lambda: asm.srai('s6', 's7', 31), 0x41fbdb13),
    ("srai t2, t3, 0", lambda: asm.srai('t2', 't3', 0), 0x400e5393),
    ("add gp, ra, sp", lambda: asm.add('gp', 'ra', 'sp'), 0x002081b3),
    ("sub t4, t5, t6", lambda: asm.sub('t4', 't5', 't6'), 0x41ff0eb3),
    ("sll a0, a1, a2", lambda: asm.sll('a0', 'a1', 'a2'), 0x00c59533),
    ("slt a3, a4, a5", lambda: asm.slt('a3', 'a4', 'a5'), 0x00f726b3),
    ("sltu a6, a7, s2", lambda: asm.sltu('a6', 'a7', 's2'), 0x0128b833),
    ("xor s3, s4, s5", lambda: asm.xor('s3', 's4', 's5'), 0x015a49b3),
    ("srl s6, s7, s8", lambda: asm.srl('s6', 's7', 's8'), 0x018bdb33),
    ("sra s9, s10, s11", lambda: asm.sra('s9', 's10', 's11'), 0x41bd5cb3),
    ("or t3, t4, t5", lambda: asm.or_('t3', 't4', 't5'), 0x01eeee33),
    ("and ra, sp, gp", lambda: asm.and_('ra', 'sp', 'gp'), 0x003170b3),
    ("mul gp, ra, sp", lambda: asm.mul('gp', 'ra', 'sp'), 0x022081b3),
    ("mulh a0, a1, a2", lambda: asm.mulh('a0', 'a1', 'a2'), 0x02c59533),
    ("mulhsu t0, t1, t2", lambda: asm.mulhsu('t0', 't1', 't2'), 0x027322b3),
    ("mulhu s0, s1, a0", lambda: asm.mulhu('s0', 's1', 'a0'), 0x02a4b433),
    ("div a0, a1, zero", lambda: asm.div('a0', 'a1', 'zero'), 0x0205c533),
    ("divu t6, t5, t4", lambda: asm.divu('t6', 't5', 't4'), 0x03df5fb3),
    ("rem s2, s3, s4", lambda: asm.rem('s2', 's3', 's4'), 0x0349e933),
    ("remu ra, ra, ra", lambda: asm.remu('ra', 'ra', 'ra'), 0x0210f0b3),
    ("sh1add gp, ra, sp", lambda: asm.sh1add('gp', 'ra', 'sp'), 0x2020a1b3),
    ("sh2add a0, a1, a2", lambda: asm.sh2add('a0', 'a1', 'a2'), 0x20c5c533),
    ("sh3add t6, zero, t6", lambda: asm.sh3add('t6', 'zero', 't6'), 0x21f06fb3),
    ("fence", lambda: asm.fence(), 0x0ff0000f),
    ("fence rw, rw", lambda: asm.fence(0b0011, 0b0011), 0x0330000f),
    ("ecall", lambda: asm.ecall(), 0x00000073),
    ("ebreak", lambda: asm.ebreak(), 0x00100073),
]


@pytest.mark.parametrize("text,encode,word", PINNED, ids=[p[0] for p in PINNED])
def test_pinned_encoding(text, encode, word):
    assert encode() == word, f"{text}: got {encode():#010x}, want {word:#010x}"


def test_pinned_covers_every_instruction():
    mnemonics = {text.split()[0] for text, _, _ in PINNED}
    every = (set(asm.R_OPS) | set(asm.I_OPS) | set(asm.SHIFT_IMM_OPS) | set(asm.BRANCH_OPS)
             | set(asm.LOAD_OPS) | set(asm.STORE_OPS)
             | {"lui", "auipc", "jal", "jalr", "fence", "ecall", "ebreak"})
    assert len(every) == 51
    assert every <= mnemonics, every - mnemonics


@pytest.mark.skipif(shutil.which("llvm-mc") is None, reason="llvm-mc not installed")
def test_pinned_against_llvm_mc():
    text = "\n".join(p[0] for p in PINNED) + "\n"
    out = subprocess.run(["llvm-mc", "-triple=riscv32", "-mattr=+m,+zba", "-show-encoding"],
                         input=text, capture_output=True, text=True, check=True).stdout
    got = []
    for line in out.splitlines():
        if "encoding: [" in line:
            b = [int(x, 16) for x in line.split("encoding: [")[1].rstrip("]").split(",")]
            got.append(int.from_bytes(bytes(b), "little"))
    assert got == [p[2] for p in PINNED]


def test_register_names():
    assert asm.REG["zero"] == 0 and asm.REG["ra"] == 1 and asm.REG["sp"] == 2
    assert asm.REG["t0"] == 5 and asm.REG["s0"] == asm.REG["fp"] == 8 and asm.REG["a0"] == 10
    assert asm.REG["a7"] == 17 and asm.REG["s2"] == 18 and asm.REG["s11"] == 27
    assert asm.REG["t3"] == 28 and asm.REG["t6"] == 31
    assert (asm.A0, asm.A7, asm.SP, asm.RA, asm.T0, asm.S11, asm.T6) == (10, 17, 2, 1, 5, 27, 31)
    assert asm.addi("a0", "zero", 1) == asm.addi(10, 0, 1) == asm.addi("x10", "x0", 1)


def test_pseudo_instructions():
    assert asm.nop() == [0x00000013]
    assert asm.mv(asm.A0, asm.A1) == [asm.addi(10, 11, 0)]
    assert asm.j(-8) == [asm.jal(0, -8)]
    assert asm.li(asm.A0, 5) == [asm.addi(10, 0, 5)]
    assert asm.li(asm.A0, -2048) == [asm.addi(10, 0, -2048)]
    assert asm.li(asm.A0, 0xFFFFFFFF) == [asm.addi(10, 0, -1)]
    assert asm.li(asm.A0, 0x12345000) == [asm.lui(10, 0x12345)]
    assert asm.li(asm.A0, 0x800) == [asm.lui(10, 1), asm.addi(10, 10, -2048)]
    assert asm.li(asm.A0, 0x12345FFF) == [asm.lui(10, 0x12346), asm.addi(10, 10, -1)]
    assert asm.li(asm.A0, 0x7FFFFFFF) == [asm.lui(10, 0x80000), asm.addi(10, 10, -1)]
    assert asm.exit_sequence(0) == asm.li(10, 0) + asm.li(17, 93) + [0x73]
    assert asm.exit_sequence("a0") == asm.li(17, 93) + [0x73]
    assert asm.exit_sequence("t0") == asm.mv(10, 5) + asm.li(17, 93) + [0x73]
    assert asm.exit_sequence("a7") == asm.mv(10, 17) + asm.li(17, 93) + [0x73]


@pytest.mark.parametrize("call,fragment", [
    (lambda: asm.addi(1, 0, 2048), "out of range"),
    (lambda: asm.addi(1, 0, -2049), "out of range"),
    (lambda: asm.sw(1, 2, 4096), "out of range"),
    (lambda: asm.lw(32, 0, 0), "x0..x31"),
    (lambda: asm.add(1, -1, 2), "x0..x31"),
    (lambda: asm.add(1, 2, "q9"), "unknown register"),
    (lambda: asm.beq(1, 2, 3), "odd"),
    (lambda: asm.beq(1, 2, 4096), "out of range"),
    (lambda: asm.beq(1, 2, -4098), "out of range"),
    (lambda: asm.jal(1, 1), "odd"),
    (lambda: asm.jal(1, 1 << 20), "out of range"),
    (lambda: asm.slli(1, 2, 32), "shift amount"),
    (lambda: asm.srai(1, 2, -1), "shift amount"),
    (lambda: asm.lui(1, 1 << 20), "20-bit"),
    (lambda: asm.auipc(1, -(1 << 19) - 1), "20-bit"),
    (lambda: asm.li(1, 1 << 32), "32 bits"),
    (lambda: asm.fence(16, 0), "fence"),
])
def test_range_errors(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()


def test_signed_and_unsigned_upper_immediates_agree():
    assert asm.lui(1, -1) == asm.lui(1, 0xFFFFF)
    assert asm.auipc(1, -(1 << 19)) == asm.auipc(1, 0x80000)


# --- semantics on unicorn (an independent oracle) -----------------------------------------------------

def run_snippet(words, ram=0x10000):
    """Run straight-line code at 0 until its ecall; return x0..x31 and the RAM."""
    uc = Uc(UC_ARCH_RISCV, UC_MODE_RISCV32)
    uc.mem_map(0, ram)
    code = b"".join(w.to_bytes(4, "little") for w in words + [asm.ecall()])
    uc.mem_write(0, code)
    stops = []
    uc.hook_add(UC_HOOK_INTR, lambda u, intno, _: (stops.append(intno), u.emu_stop()))
    uc.emu_start(0, ram, count=len(words) + 1)
    assert stops == [8], f"stopped by {stops} at pc {uc.reg_read(UC_RISCV_REG_PC):#x}"
    return [uc.reg_read(UC_RISCV_REG_X0 + i) for i in range(32)], uc.mem_read(0, ram)


LI_VALUES = [0, 1, -1, 2047, -2048, 2048, -2049, 0x800, 0xFFF, 0x1000, 0x7FFFF800, 0x7FFFF7FF,
             0x7FFFFFFF, 0x80000000, 0x80000800, 0xFFFFF800, 0xFFFFF7FF, 0x12345678, 0xDEADBEEF,
             0xFFFFFFFF, 0x0001F800]


def test_li_on_unicorn():
    words = []
    for i, v in enumerate(LI_VALUES):
        words += asm.li(5 + i, v)
    regs, _ = run_snippet(words)
    for i, v in enumerate(LI_VALUES):
        assert regs[5 + i] == v & 0xFFFFFFFF, f"li {v:#x}"
        assert len(asm.li(1, v)) == (1 if -2048 <= ((v + 2**31) % 2**32) - 2**31 <= 2047 else
                                      1 if v & 0xFFF == 0 else 2)


def test_alu_semantics_on_unicorn():
    m = 0xFFFFFFFF
    words = asm.li(1, 0x80000000) + asm.li(2, 7) + asm.li(3, -3) + [
        asm.srai(4, 1, 31),          # 0xffffffff
        asm.srli(5, 1, 31),          # 1
        asm.sra(6, 1, 2),            # shift by 7
        asm.sll(7, 2, 3),            # shift by -3 & 31 = 29
        asm.mulh(8, 1, 3),           # INT_MIN * -3 >> 32
        asm.mulhu(9, 1, 3),
        asm.div(10, 3, 0),           # -3 / 0 = -1
        asm.rem(11, 3, 0),           # -3 % 0 = -3
        asm.divu(12, 2, 0),
        asm.div(13, 1, 4),           # INT_MIN / -1
        asm.addi(14, 0, 53),         # (unicorn 2.1.4 has no Zba: sh*add traps as illegal there)
        asm.sltiu(15, 2, -1),        # 7 < 0xffffffff
        asm.slti(16, 3, -2),         # -3 < -2
        asm.sub(17, 0, 2),
        asm.add(0, 2, 2),            # x0 stays 0
        asm.xori(18, 2, -1),
        asm.mulhsu(19, 3, 1),        # -3 * 2^31 (unsigned) >> 32
    ]
    regs, _ = run_snippet(words)
    assert regs[4] == m and regs[5] == 1 and regs[6] == 0xFF000000
    assert regs[7] == (7 << 29) & m
    assert regs[8] == 1              # (-2^31 * -3) >> 32
    assert regs[9] == (0x80000000 * 0xFFFFFFFD) >> 32
    assert regs[10] == m and regs[11] == (-3) & m and regs[12] == m and regs[13] == 0x80000000
    assert regs[14] == 53 and regs[15] == 1 and regs[16] == 1 and regs[17] == (-7) & m
    assert regs[0] == 0 and regs[18] == (~7) & m
    assert regs[19] == ((-3 * 0x80000000) >> 32) & m


def test_memory_and_control_on_unicorn():
    words = asm.li(1, 0x1000) + asm.li(2, 0x11223344) + asm.li(3, 0x80) + [
        asm.sw(2, 1, 0),             # [0x1000] = 0x11223344
        asm.sb(3, 1, 1),             # byte 1 = 0x80
        asm.sh(3, 1, 2),             # half 1 = 0x0080
        asm.lw(4, 1, 0),             # 0x00808044
        asm.lb(5, 1, 1),             # sign-extended 0x80
        asm.lhu(6, 1, 2),
        asm.lh(7, 1, 0),             # 0x8044 -> 0xffff8044
        asm.lbu(8, 1, 1),
        asm.jal(9, 8),               # skip one instruction, link = pc + 4
        asm.addi(10, 0, 1),          # skipped
        asm.auipc(11, 0),
        asm.addi(11, 11, 16),        # -> the instruction after the jalr
        asm.jalr(11, 11, 1),         # rd == rs1, bit 0 cleared
        asm.addi(12, 0, 1),          # skipped
        asm.bltu(0, 3, 8),           # taken
        asm.addi(13, 0, 1),          # skipped
        asm.bge(0, 3, 8),            # not taken
        asm.addi(14, 0, 1),
        asm.lui(15, 0xFFFFF),
        asm.sw(2, 1, -4),
        asm.lw(16, 1, -4),
        asm.fence(),
    ]
    regs, _ = run_snippet(words)
    assert regs[4] == 0x00808044 and regs[5] == 0xFFFFFF80 and regs[6] == 0x0080
    assert regs[7] == 0xFFFF8044 and regs[8] == 0x80
    jal_pc = 4 * (len(asm.li(1, 0x1000) + asm.li(2, 0x11223344) + asm.li(3, 0x80)) + 8)
    assert regs[9] == jal_pc + 4 and regs[10] == 0
    assert regs[11] == jal_pc + 20 and regs[12] == 0
    assert regs[13] == 0 and regs[14] == 1 and regs[15] == 0xFFFFF000 and regs[16] == 0x11223344
