"""A few RV32 instruction encoders for hand-built test programs (independent of cpu/asm.py)."""


def r_type(f7, rs2, rs1, f3, rd, op=0x33):
    return (f7 << 25) | (rs2 << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | op


def i_type(imm, rs1, f3, rd, op=0x13):
    return ((imm & 0xFFF) << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | op


def s_type(imm, rs2, rs1, f3):
    imm &= 0xFFF
    return ((imm >> 5) << 25) | (rs2 << 20) | (rs1 << 15) | (f3 << 12) | ((imm & 31) << 7) | 0x23


def b_type(imm, rs2, rs1, f3):
    imm &= 0x1FFF
    return (((imm >> 12) & 1) << 31) | (((imm >> 5) & 0x3F) << 25) | (rs2 << 20) | (rs1 << 15) | (f3 << 12) \
        | (((imm >> 1) & 0xF) << 8) | (((imm >> 11) & 1) << 7) | 0x63


def j_type(imm, rd):
    imm &= 0x1FFFFF
    return (((imm >> 20) & 1) << 31) | (((imm >> 1) & 0x3FF) << 21) | (((imm >> 11) & 1) << 20) \
        | (((imm >> 12) & 0xFF) << 12) | (rd << 7) | 0x6F


def addi(rd, rs1, imm): return i_type(imm, rs1, 0, rd)
def lui(rd, imm20): return ((imm20 & 0xFFFFF) << 12) | (rd << 7) | 0x37
def add(rd, rs1, rs2): return r_type(0, rs2, rs1, 0, rd)
def lb(rd, rs1, imm): return i_type(imm, rs1, 0, rd, 0x03)
def lh(rd, rs1, imm): return i_type(imm, rs1, 1, rd, 0x03)
def lw(rd, rs1, imm): return i_type(imm, rs1, 2, rd, 0x03)
def lbu(rd, rs1, imm): return i_type(imm, rs1, 4, rd, 0x03)
def lhu(rd, rs1, imm): return i_type(imm, rs1, 5, rd, 0x03)
def sb(rs2, rs1, imm): return s_type(imm, rs2, rs1, 0)
def sh(rs2, rs1, imm): return s_type(imm, rs2, rs1, 1)
def sw(rs2, rs1, imm): return s_type(imm, rs2, rs1, 2)
def beq(rs1, rs2, imm): return b_type(imm, rs2, rs1, 0)
def bne(rs1, rs2, imm): return b_type(imm, rs2, rs1, 1)
def jal(rd, imm): return j_type(imm, rd)
def jalr(rd, rs1, imm): return i_type(imm, rs1, 0, rd, 0x67)
def sh1add(rd, rs1, rs2): return r_type(0x10, rs2, rs1, 2, rd)
def sh2add(rd, rs1, rs2): return r_type(0x10, rs2, rs1, 4, rd)
def sh3add(rd, rs1, rs2): return r_type(0x10, rs2, rs1, 6, rd)


ECALL = 0x00000073
EBREAK = 0x00100073
NOP = 0x00000013


def li(rd, value):
    """lui + addi for any 32-bit value."""
    value &= 0xFFFFFFFF
    lo = value & 0xFFF
    if lo >= 0x800:
        lo -= 0x1000
    hi = ((value - lo) >> 12) & 0xFFFFF
    return ([lui(rd, hi)] if hi else []) + ([addi(rd, rd if hi else 0, lo)] if lo or not hi else [])
