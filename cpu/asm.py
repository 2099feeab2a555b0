"""A small RV32IM+Zba instruction encoder: one function per instruction, each returning the 32-bit
instruction word as an ``int``; pseudo-instructions return lists of words.

Registers are numbers 0..31 (``x0``..``x31``); ``REG`` maps the ABI names to numbers::

    zero=0 ra=1 sp=2 gp=3 tp=4 t0=5 t1=6 t2=7 s0/fp=8 s1=9 a0..a7=10..17
    s2..s11=18..27 t3..t6=28..31

The module also exports those names as constants (``A0``, ``A7``, ``SP``, ``RA``, ``T0`` ...).

Operand conventions follow the assembler's operand order::

    add(rd, rs1, rs2)          addi(rd, rs1, imm)       slli(rd, rs1, shamt)
    lw(rd, rs1, imm)  (= lw rd, imm(rs1))              sw(rs2, rs1, imm)  (= sw rs2, imm(rs1))
    beq(rs1, rs2, offset)      jal(rd, offset)          jalr(rd, rs1, imm)
    lui(rd, imm20)             auipc(rd, imm20)

Offsets of branches and ``jal`` are byte offsets relative to the instruction's own address.

Range checks (``ValueError``): registers 0..31; I/S-type immediates -2048..2047; shift amounts 0..31;
branch offsets even, -4096..4094; ``jal`` offsets even, -1048576..1048574; U-type immediates are
20-bit fields, given either unsigned (0..0xFFFFF) or signed (-0x80000..0x7FFFF).

Encodings (RISC-V unprivileged spec, chapter "RV32I Base Integer Instruction Set", the M chapter and
the Zba part of the B chapter)::

    R  funct7[31:25] rs2[24:20] rs1[19:15] funct3[14:12] rd[11:7] opcode[6:0]
    I  imm[11:0][31:20]                 rs1 funct3 rd opcode
    S  imm[11:5][31:25] rs2 rs1 funct3 imm[4:0][11:7] opcode
    B  imm[12][31] imm[10:5][30:25] rs2 rs1 funct3 imm[4:1][11:8] imm[11][7] opcode
    U  imm[31:12][31:12] rd opcode
    J  imm[20][31] imm[10:1][30:21] imm[11][20] imm[19:12][19:12] rd opcode
"""

# --- registers --------------------------------------------------------------------------------------

REG: dict[str, int] = {f"x{i}": i for i in range(32)}
REG.update({
    "zero": 0, "ra": 1, "sp": 2, "gp": 3, "tp": 4, "t0": 5, "t1": 6, "t2": 7, "s0": 8, "fp": 8,
    "s1": 9,
    **{f"a{i}": 10 + i for i in range(8)},
    **{f"s{i}": 16 + i for i in range(2, 12)},
    **{f"t{i}": 25 + i for i in range(3, 7)},
})

ZERO, RA, SP, GP, TP = 0, 1, 2, 3, 4
T0, T1, T2 = 5, 6, 7
S0 = FP = 8
S1 = 9
A0, A1, A2, A3, A4, A5, A6, A7 = range(10, 18)
S2, S3, S4, S5, S6, S7, S8, S9, S10, S11 = range(18, 28)
T3, T4, T5, T6 = range(28, 32)

# --- opcodes ----------------------------------------------------------------------------------------

OP_LUI = 0x37
OP_AUIPC = 0x17
OP_JAL = 0x6F
OP_JALR = 0x67
OP_BRANCH = 0x63
OP_LOAD = 0x03
OP_STORE = 0x23
OP_IMM = 0x13
OP_REG = 0x33
OP_MISC_MEM = 0x0F
OP_SYSTEM = 0x73

EXIT_SYSCALL = 93


# --- field checks -----------------------------------------------------------------------------------

def _reg(r, what="register") -> int:
    if isinstance(r, str):
        if r not in REG:
            raise ValueError(f"unknown register name {r!r}")
        return REG[r]
    if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r <= 31:
        raise ValueError(f"{what} {r!r} out of range: registers are x0..x31 (0..31)")
    return r


def _signed(value, bits: int, what: str) -> int:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{what} {value!r} out of range {lo}..{hi}")
    return value & ((1 << bits) - 1)


def _imm12(imm) -> int:
    return _signed(imm, 12, "12-bit immediate")


def _shamt(shamt) -> int:
    if not isinstance(shamt, int) or isinstance(shamt, bool) or not 0 <= shamt <= 31:
        raise ValueError(f"shift amount {shamt!r} out of range 0..31")
    return shamt


def _imm20(imm) -> int:
    if not isinstance(imm, int) or isinstance(imm, bool) or not -(1 << 19) <= imm <= (1 << 20) - 1:
        raise ValueError(f"20-bit upper immediate {imm!r} out of range "
                         f"(0..0xfffff, or signed -0x80000..0x7ffff)")
    return imm & 0xFFFFF


def _offset(off, bits: int, what: str) -> int:
    if not isinstance(off, int) or isinstance(off, bool):
        raise ValueError(f"{what} offset {off!r} is not an integer")
    if off & 1:
        raise ValueError(f"{what} offset {off} is odd: offsets must be multiples of 2")
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 2
    if not lo <= off <= hi:
        raise ValueError(f"{what} offset {off} out of range {lo}..{hi}")
    return off & ((1 << bits) - 1)


# --- formats ----------------------------------------------------------------------------------------

def r_type(opcode, funct3, funct7, rd, rs1, rs2) -> int:
    return ((funct7 << 25) | (_reg(rs2, "rs2") << 20) | (_reg(rs1, "rs1") << 15) | (funct3 << 12)
            | (_reg(rd, "rd") << 7) | opcode)


def i_type(opcode, funct3, rd, rs1, imm) -> int:
    return (_imm12(imm) << 20) | (_reg(rs1, "rs1") << 15) | (funct3 << 12) | (_reg(rd, "rd") << 7) | opcode


def s_type(opcode, funct3, rs1, rs2, imm) -> int:
    i = _imm12(imm)
    return (((i >> 5) << 25) | (_reg(rs2, "rs2") << 20) | (_reg(rs1, "rs1") << 15) | (funct3 << 12)
            | ((i & 0x1F) << 7) | opcode)


def b_type(opcode, funct3, rs1, rs2, offset) -> int:
    i = _offset(offset, 13, "branch")
    return ((((i >> 12) & 1) << 31) | (((i >> 5) & 0x3F) << 25) | (_reg(rs2, "rs2") << 20)
            | (_reg(rs1, "rs1") << 15) | (funct3 << 12) | (((i >> 1) & 0xF) << 8)
            | (((i >> 11) & 1) << 7) | opcode)


def u_type(opcode, rd, imm20) -> int:
    return (_imm20(imm20) << 12) | (_reg(rd, "rd") << 7) | opcode


def j_type(opcode, rd, offset) -> int:
    i = _offset(offset, 21, "jal")
    return ((((i >> 20) & 1) << 31) | (((i >> 1) & 0x3FF) << 21) | (((i >> 11) & 1) << 20)
            | (((i >> 12) & 0xFF) << 12) | (_reg(rd, "rd") << 7) | opcode)


# --- RV32I ------------------------------------------------------------------------------------------

def lui(rd, imm20): return u_type(OP_LUI, rd, imm20)
def auipc(rd, imm20): return u_type(OP_AUIPC, rd, imm20)
def jal(rd, offset): return j_type(OP_JAL, rd, offset)
def jalr(rd, rs1, imm=0): return i_type(OP_JALR, 0, rd, rs1, imm)

def beq(rs1, rs2, offset): return b_type(OP_BRANCH, 0, rs1, rs2, offset)
def bne(rs1, rs2, offset): return b_type(OP_BRANCH, 1, rs1, rs2, offset)
def blt(rs1, rs2, offset): return b_type(OP_BRANCH, 4, rs1, rs2, offset)
def bge(rs1, rs2, offset): return b_type(OP_BRANCH, 5, rs1, rs2, offset)
def bltu(rs1, rs2, offset): return b_type(OP_BRANCH, 6, rs1, rs2, offset)
def bgeu(rs1, rs2, offset): return b_type(OP_BRANCH, 7, rs1, rs2, offset)

def lb(rd, rs1, imm=0): return i_type(OP_LOAD, 0, rd, rs1, imm)
def lh(rd, rs1, imm=0): return i_type(OP_LOAD, 1, rd, rs1, imm)
def lw(rd, rs1, imm=0): return i_type(OP_LOAD, 2, rd, rs1, imm)
def lbu(rd, rs1, imm=0): return i_type(OP_LOAD, 4, rd, rs1, imm)
def lhu(rd, rs1, imm=0): return i_type(OP_LOAD, 5, rd, rs1, imm)

def sb(rs2, rs1, imm=0): return s_type(OP_STORE, 0, rs1, rs2, imm)
def sh(rs2, rs1, imm=0): return s_type(OP_STORE, 1, rs1, rs2, imm)
def sw(rs2, rs1, imm=0): return s_type(OP_STORE, 2, rs1, rs2, imm)

def addi(rd, rs1, imm): return i_type(OP_IMM, 0, rd, rs1, imm)
def slti(rd, rs1, imm): return i_type(OP_IMM, 2, rd, rs1, imm)
def sltiu(rd, rs1, imm): return i_type(OP_IMM, 3, rd, rs1, imm)
def xori(rd, rs1, imm): return i_type(OP_IMM, 4, rd, rs1, imm)
def ori(rd, rs1, imm): return i_type(OP_IMM, 6, rd, rs1, imm)
def andi(rd, rs1, imm): return i_type(OP_IMM, 7, rd, rs1, imm)
def slli(rd, rs1, shamt): return r_type(OP_IMM, 1, 0x00, rd, rs1, _shamt(shamt))
def srli(rd, rs1, shamt): return r_type(OP_IMM, 5, 0x00, rd, rs1, _shamt(shamt))
def srai(rd, rs1, shamt): return r_type(OP_IMM, 5, 0x20, rd, rs1, _shamt(shamt))

def add(rd, rs1, rs2): return r_type(OP_REG, 0, 0x00, rd, rs1, rs2)
def sub(rd, rs1, rs2): return r_type(OP_REG, 0, 0x20, rd, rs1, rs2)
def sll(rd, rs1, rs2): return r_type(OP_REG, 1, 0x00, rd, rs1, rs2)
def slt(rd, rs1, rs2): return r_type(OP_REG, 2, 0x00, rd, rs1, rs2)
def sltu(rd, rs1, rs2): return r_type(OP_REG, 3, 0x00, rd, rs1, rs2)
def xor(rd, rs1, rs2): return r_type(OP_REG, 4, 0x00, rd, rs1, rs2)
def srl(rd, rs1, rs2): return r_type(OP_REG, 5, 0x00, rd, rs1, rs2)
def sra(rd, rs1, rs2): return r_type(OP_REG, 5, 0x20, rd, rs1, rs2)
def or_(rd, rs1, rs2): return r_type(OP_REG, 6, 0x00, rd, rs1, rs2)
def and_(rd, rs1, rs2): return r_type(OP_REG, 7, 0x00, rd, rs1, rs2)


def fence(pred: int = 0xF, succ: int = 0xF) -> int:
    """``fence pred, succ`` (each a 4-bit IORW set; the default is ``fence iorw, iorw`` = 0x0ff0000f)."""
    if not (0 <= pred <= 15 and 0 <= succ <= 15):
        raise ValueError(f"fence pred/succ {pred!r}/{succ!r} out of range 0..15")
    return (pred << 24) | (succ << 20) | OP_MISC_MEM


def ecall() -> int: return 0x0000_0073
def ebreak() -> int: return 0x0010_0073


# --- M ----------------------------------------------------------------------------------------------

def mul(rd, rs1, rs2): return r_type(OP_REG, 0, 0x01, rd, rs1, rs2)
def mulh(rd, rs1, rs2): return r_type(OP_REG, 1, 0x01, rd, rs1, rs2)
def mulhsu(rd, rs1, rs2): return r_type(OP_REG, 2, 0x01, rd, rs1, rs2)
def mulhu(rd, rs1, rs2): return r_type(OP_REG, 3, 0x01, rd, rs1, rs2)
def div(rd, rs1, rs2): return r_type(OP_REG, 4, 0x01, rd, rs1, rs2)
def divu(rd, rs1, rs2): return r_type(OP_REG, 5, 0x01, rd, rs1, rs2)
def rem(rd, rs1, rs2): return r_type(OP_REG, 6, 0x01, rd, rs1, rs2)
def remu(rd, rs1, rs2): return r_type(OP_REG, 7, 0x01, rd, rs1, rs2)


# --- Zba --------------------------------------------------------------------------------------------

def sh1add(rd, rs1, rs2): return r_type(OP_REG, 2, 0x10, rd, rs1, rs2)
def sh2add(rd, rs1, rs2): return r_type(OP_REG, 4, 0x10, rd, rs1, rs2)
def sh3add(rd, rs1, rs2): return r_type(OP_REG, 6, 0x10, rd, rs1, rs2)


# --- tables -----------------------------------------------------------------------------------------

R_OPS = {  # name -> encoder(rd, rs1, rs2): every register-register op of RV32IM + Zba
    "add": add, "sub": sub, "sll": sll, "slt": slt, "sltu": sltu, "xor": xor, "srl": srl,
    "sra": sra, "or": or_, "and": and_,
    "mul": mul, "mulh": mulh, "mulhsu": mulhsu, "mulhu": mulhu,
    "div": div, "divu": divu, "rem": rem, "remu": remu,
    "sh1add": sh1add, "sh2add": sh2add, "sh3add": sh3add,
}
I_OPS = {  # name -> encoder(rd, rs1, imm12)
    "addi": addi, "slti": slti, "sltiu": sltiu, "xori": xori, "ori": ori, "andi": andi,
}
SHIFT_IMM_OPS = {"slli": slli, "srli": srli, "srai": srai}  # name -> encoder(rd, rs1, shamt)
BRANCH_OPS = {"beq": beq, "bne": bne, "blt": blt, "bge": bge, "bltu": bltu, "bgeu": bgeu}
LOAD_OPS = {"lb": lb, "lh": lh, "lw": lw, "lbu": lbu, "lhu": lhu}   # encoder(rd, rs1, imm)
STORE_OPS = {"sb": sb, "sh": sh, "sw": sw}                          # encoder(rs2, rs1, imm)
LOAD_WIDTH = {"lb": 1, "lh": 2, "lw": 4, "lbu": 1, "lhu": 2}
STORE_WIDTH = {"sb": 1, "sh": 2, "sw": 4}


# --- pseudo-instructions ----------------------------------------------------------------------------

def li(rd, value: int) -> list[int]:
    """Load a 32-bit constant (signed or unsigned form): one ``addi`` when it fits 12 signed bits,
    else ``lui`` (+ ``addi`` when the low 12 bits are not 0). ``addi`` sign-extends its immediate, so
    the upper part is rounded: hi = (value + 0x800) >> 12."""
    if not isinstance(value, int) or isinstance(value, bool) or not -(1 << 31) <= value < (1 << 32):
        raise ValueError(f"li value {value!r} does not fit 32 bits")
    v = value & 0xFFFF_FFFF
    sv = v - (1 << 32) if v & 0x8000_0000 else v
    if -2048 <= sv <= 2047:
        return [addi(rd, 0, sv)]
    lo = ((v & 0xFFF) ^ 0x800) - 0x800          # sign-extended low 12 bits
    hi = ((v - lo) >> 12) & 0xFFFFF
    out = [lui(rd, hi)]
    if lo:
        out.append(addi(rd, rd, lo))
    return out


def nop() -> list[int]:
    """``addi x0, x0, 0``."""
    return [addi(0, 0, 0)]


def mv(rd, rs) -> list[int]:
    """``addi rd, rs, 0``."""
    return [addi(rd, rs, 0)]


def j(offset) -> list[int]:
    """``jal x0, offset``."""
    return [jal(0, offset)]


def exit_sequence(code) -> list[int]:
    """Exit the program: a7 = 93; a0 = code; ecall.

    ``code`` is either a register name (``"a0"``, ``"x5"``) whose value becomes the exit code, or an
    int constant. A register given as a plain int is ambiguous, so pass registers as names."""
    out: list[int] = []
    if isinstance(code, str):
        r = _reg(code)
        if r != A0:
            out += mv(A0, r)
    else:
        out += li(A0, code)
    out += li(A7, EXIT_SYSCALL)
    out.append(ecall())
    return out
