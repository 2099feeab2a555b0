"""Self-checking test programs, one per instruction of RV32IM + Zba.

Each generator in ``ISA_TESTS`` returns an ``Image`` (code at address 0, entry 0, plus a data segment
right after the code where the test needs preloaded data). The program runs many operand cases; each
case loads its operands with ``li``, executes the instruction under test, and compares the result with
the value computed in Python by ``expected()`` -- an independent reference model written here from the
RISC-V unprivileged spec. On a mismatch the program exits (ecall, a7 = 93) with a0 = the failing case
number (1, 2, ...); when every case passes it exits with a0 = 0. The one exception is ``ebreak``, whose
program halts by ``ebreak`` with a0 = 0 (``EXPECTED_HALT``).

Conventions inside the programs: x3 (gp) holds the current case number (``TESTNUM``), x31 (t6) is the
scratch register for expected values (``TMP``); the operands and results of the cases rotate through
every other register x1..x30, so the tests also exercise the whole register file. Code is straight
line (no loops): the number of instructions executed is about the static code size (< 3000). Data
accesses stay in the data area after the code; the image needs ``ram_needed(image)`` bytes of RAM
(at most about 24 KiB, so the default 64 KiB is plenty).

Edge cases, per group:

* register-register ALU (add sub sll slt sltu xor srl sra or and) and Zba (sh1add sh2add sh3add):
  every pair of 0, 1, -1, 2, -2, 7, INT_MIN, INT_MIN+1, INT_MAX, 0x7fff, 0x8000, 0xffff, 0x12345678,
  0xdeadbeef; register shifts of 0, 1, -1, INT_MIN, INT_MAX, 0x8000, 0x12345678, 0xdeadbeef,
  0x80000001 by 0, 1, 4, 15, 16, 31 and by amounts >= 32 or negative (32, 33, 63, -1, INT_MIN,
  0x12345678, -32) where only the low 5 bits count; rd == rs1, rd == rs2, rd == rs1 == rs2,
  rs1 == rs2 (rd different), x0 as rs1, x0 as rs2, x0 as rd (x0 must still read 0), sources unchanged.
* immediate ALU (addi slti sltiu xori ori andi): every pair of the operands 0, 1, -1, -2, INT_MIN,
  INT_MAX, 0x7ff, 0x800, -2048, 0xffff, 0x12345678 and the immediates 0, 1, -1, 2, 2047, -2048,
  0x555, -0x556, 0x7ff, 0x100 (sign-extended immediates; sltiu with -1 compares against
  0xffffffff); rd == rs1, x0 as rd (sources unchanged) and as rs1.
* immediate shifts (slli srli srai): shift amounts 0, 1, 2, 7, 15, 16, 30, 31 on the register-shift
  operands plus 0xffff and 7 (sign fill of srai from INT_MIN and -1), rd == rs1, x0 as rd/rs1.
* M (mul mulh mulhsu mulhu div divu rem remu): every pair of 0, 1, -1, 2, -2, 3, -7, INT_MIN,
  INT_MIN+1, INT_MAX, 0x7fff, 0x8000, 0xffff, 0x10000, 0x12345678, 0xdeadbeef: all sign combinations
  of the high products, x/0 (quotient all ones for div and divu, remainder = dividend), 0/0,
  INT_MIN / -1 = INT_MIN and INT_MIN % -1 = 0, rounding toward zero with negative operands; plus the
  aliasing / x0 cases of the register-register group.
* lui / auipc: immediates 0, 1, 0x7ffff, 0x80000 (high bit), 0xfffff (all ones), 0x12345, 0xabcde,
  0x00800, 0x80001; lui clears the low 12 bits of an all-ones rd; auipc results are checked against
  the instruction's own address (wrapping below 0 for 0xfffff); x0 as rd.
* jal: forward and backward, short and long offsets (+-8, +-0x804 setting imm[11], +0x1804/-0x1800
  setting imm[12..]), link register = pc + 4 for several rd, rd = x0 writes nothing; the skipped
  instruction would fail the test.
* jalr: positive/negative immediates, -2048 and 2047, bit 0 of the target cleared (from rs1 and from
  the immediate), rd == rs1 (the old rs1 is the base), rd = x0, backward targets, a base that wraps
  around 0.
* branches (beq bne blt bge bltu bgeu): every ordered pair of 0, 1, -1, 2, -2, INT_MIN, INT_MAX,
  0x80000001, each pair taken-or-not both forward and backward; rs1 == rs2 (same register), x0 as an
  operand, the longest offsets +4092 and -4096 (taken and not taken).
* loads (lb lh lw lbu lhu): every aligned offset of a 64-byte pattern (bytes 0x00 0x01 0x7f 0x80 0xff
  ..., halves 0x8000 0xffff 0x7fff ..., words 0x80000000 0xffffffff 0x7fffffff ...) so every byte
  lane and both sign-extension outcomes, immediates -2048 and 2047 (with an odd base register),
  negative offsets, rd == rs1 (the load overwrites its base), x0 as rd.
* stores (sb sh sw): every byte/half lane of several words with values whose high bits are set
  (only the low bits may be stored), then the word load checks the merged value and the same-width
  load reads the store back; immediates -2048 and 2047, negative offsets, x0 as the stored value,
  rs2 == rs1; finally every word of the store area is compared with the model (no stray writes).
* fence: fence iorw,iorw / rw,rw / r,r / w,w / fence.tso / pause / fence 0,0 behave as no-ops
  between stores and loads; registers unchanged.
* ecall: the exit call itself (a7 = 93, a0 = 0) must stop the program; falling through exits with 2.
* ebreak: halts the machine with a0 = 0; falling through exits with 1.

Also: ``loop_forever_program()`` (a taken branch to itself: only stops at a step limit),
``branch_to_self_program()`` (self-branches that are NOT taken, then exit 0), ``exit_code_program(n)``
and ``TRAP_TESTS`` (programs that must stop with a given trap cause at a given pc).
"""

from dataclasses import dataclass
from typing import Callable

from . import asm
from .machine import (CONSOLE_ADDR, DEFAULT_RAM_SIZE, TRAP_ECALL, TRAP_ILLEGAL_INSN,
                      TRAP_INSN_MISALIGNED, TRAP_LOAD_FAULT, TRAP_LOAD_MISALIGNED, TRAP_STORE_FAULT,
                      TRAP_STORE_MISALIGNED, Image)

M32 = 0xFFFF_FFFF
INT_MIN = 0x8000_0000
INT_MAX = 0x7FFF_FFFF

TESTNUM = asm.GP      # x3: the case number
TMP = asm.T6          # x31: the expected value of a check
REGS = [r for r in range(1, 31) if r != TESTNUM]   # operand / result registers


# --- the reference model -----------------------------------------------------------------------------

def _u(x: int) -> int:
    return x & M32


def _s(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x & 0x8000_0000 else x


def _sext(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def _div_trunc(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def expected(name: str, a: int, b: int = 0) -> int:
    """The spec's result of instruction ``name`` as an unsigned 32-bit int.

    * Register-register ops (incl. M and Zba): ``a`` = rs1 value, ``b`` = rs2 value.
    * Immediate ops: ``a`` = rs1 value, ``b`` = the immediate as a signed int (shamt for shifts).
    * Branches: 1 if taken else 0 (``a`` = rs1, ``b`` = rs2).
    * ``lui``: ``b`` = imm20 (``a`` ignored); ``auipc``: ``a`` = pc, ``b`` = imm20.
    * ``jal``: the target, ``a`` = pc, ``b`` = offset; ``jalr``: the target, ``a`` = rs1, ``b`` = imm.
      (The link value of both is pc + 4.)
    * Loads: ``a`` = the raw little-endian value of the bytes read (1, 2 or 4 of them): the value
      written to rd. Stores: ``a`` = rs2: the value written to memory (its low 1, 2 or 4 bytes).
    """
    au, bu, as_, bs = _u(a), _u(b), _s(a), _s(b)
    match name:
        case "add" | "addi":
            r = au + bu
        case "sub":
            r = au - bu
        case "sll" | "slli":
            r = au << (bu & 31)
        case "srl" | "srli":
            r = au >> (bu & 31)
        case "sra" | "srai":
            r = as_ >> (bu & 31)
        case "slt" | "slti":
            r = int(as_ < bs)
        case "sltu" | "sltiu":
            r = int(au < bu)
        case "xor" | "xori":
            r = au ^ bu
        case "or" | "ori":
            r = au | bu
        case "and" | "andi":
            r = au & bu
        case "mul":
            r = as_ * bs
        case "mulh":
            r = (as_ * bs) >> 32
        case "mulhsu":
            r = (as_ * bu) >> 32
        case "mulhu":
            r = (au * bu) >> 32
        case "div":
            if bu == 0:
                r = -1
            elif as_ == -(1 << 31) and bs == -1:
                r = as_
            else:
                r = _div_trunc(as_, bs)
        case "divu":
            r = M32 if bu == 0 else au // bu
        case "rem":
            if bu == 0:
                r = as_
            elif as_ == -(1 << 31) and bs == -1:
                r = 0
            else:
                r = as_ - bs * _div_trunc(as_, bs)
        case "remu":
            r = au if bu == 0 else au % bu
        case "sh1add":
            r = bu + (au << 1)
        case "sh2add":
            r = bu + (au << 2)
        case "sh3add":
            r = bu + (au << 3)
        case "beq":
            r = int(au == bu)
        case "bne":
            r = int(au != bu)
        case "blt":
            r = int(as_ < bs)
        case "bge":
            r = int(as_ >= bs)
        case "bltu":
            r = int(au < bu)
        case "bgeu":
            r = int(au >= bu)
        case "lui":
            r = (b & 0xFFFFF) << 12
        case "auipc":
            r = au + ((b & 0xFFFFF) << 12)
        case "jal":
            r = au + b
        case "jalr":
            r = (au + bu) & ~1
        case "lb":
            r = _sext(a, 8)
        case "lh":
            r = _sext(a, 16)
        case "lw" | "sw":
            r = a
        case "lbu" | "sb":
            r = a & 0xFF
        case "lhu" | "sh":
            r = a & 0xFFFF
        case _:
            raise ValueError(f"no reference model for {name!r}")
    return _u(r)


# --- a program builder with labels --------------------------------------------------------------------

class Program:
    """Straight-line code with labels, a failure exit and an optional data area after the code."""

    def __init__(self):
        self.words: list[int] = []
        self.labels: dict[str, int] = {}
        self.fixups: list[tuple] = []
        self.case = 0
        self.data = bytearray()          # placed at label "data" (after the code, 256-aligned)
        self._n = 0

    @property
    def pc(self) -> int:
        return 4 * len(self.words)

    def emit(self, *items):
        for item in items:
            if isinstance(item, list):
                self.words.extend(item)
            else:
                self.words.append(item)

    def new_label(self) -> str:
        self._n += 1
        return f".L{self._n}"

    def label(self, name: str | None = None) -> str:
        name = name or self.new_label()
        assert name not in self.labels, name
        self.labels[name] = self.pc
        return name

    def gap(self, nbytes: int):
        """Zero words (illegal instructions): landing here is a failure."""
        assert nbytes % 4 == 0
        self.words.extend([0] * (nbytes // 4))

    def jal(self, rd, label):
        self.fixups.append((len(self.words), "jal", label, rd))
        self.words.append(0)

    def branch(self, op: str, rs1, rs2, label):
        self.fixups.append((len(self.words), "branch", label, (op, rs1, rs2)))
        self.words.append(0)

    def la(self, rd, label, addend: int = 0):
        """rd = address of label + addend (always lui + addi, so code size is known in advance)."""
        self.fixups.append((len(self.words), "la", label, (rd, addend)))
        self.words += [0, 0]

    def li(self, rd, value):
        self.emit(asm.li(rd, value))

    def start_case(self) -> int:
        self.case += 1
        self.li(TESTNUM, self.case)
        return self.case

    def fail(self):
        self.jal(0, "fail")

    def check(self, reg, value):
        """If reg != value: exit with the case number."""
        self.li(TMP, _u(value))
        self.emit(asm.beq(reg, TMP, 8))
        self.fail()

    def finish(self) -> Image:
        self.li(asm.A0, 0)
        self.li(asm.A7, asm.EXIT_SYSCALL)
        self.emit(asm.ecall())
        self.label("fail")
        self.emit(asm.mv(asm.A0, TESTNUM))
        self.li(asm.A7, asm.EXIT_SYSCALL)
        self.emit(asm.ecall(), asm.ebreak())
        code_end = self.pc
        data_addr = (code_end + 0xFF) & ~0xFF
        self.labels["data"] = data_addr
        for index, kind, label, arg in self.fixups:
            target = self.labels[label]
            pc = 4 * index
            if kind == "jal":
                self.words[index] = asm.jal(arg, target - pc)
            elif kind == "branch":
                op, rs1, rs2 = arg
                self.words[index] = asm.BRANCH_OPS[op](rs1, rs2, target - pc)
            else:
                rd, addend = arg
                v = _u(target + addend)
                lo = ((v & 0xFFF) ^ 0x800) - 0x800
                self.words[index] = asm.lui(rd, ((v - lo) >> 12) & 0xFFFFF)
                self.words[index + 1] = asm.addi(rd, rd, lo)
        code = Image.from_words(self.words).segments
        segments = code + (((data_addr, bytes(self.data)),) if self.data else ())
        return Image(0, segments)


def ram_needed(image: Image) -> int:
    """The RAM size (bytes) the image needs: the end of its last segment."""
    return max(addr + len(data) for addr, data in image.segments)


def _regs(k: int, n: int = 3) -> list[int]:
    """n distinct operand registers for case k, rotating through REGS."""
    return [REGS[(n * k + i) % len(REGS)] for i in range(n)]


# --- operand sets -------------------------------------------------------------------------------------

ALU_VALUES = [0, 1, M32, 2, _u(-2), 7, INT_MIN, INT_MIN + 1, INT_MAX, 0x7FFF, 0x8000, 0xFFFF,
              0x1234_5678, 0xDEAD_BEEF]
SHIFT_AMOUNTS = [0, 1, 4, 15, 16, 31, 32, 33, 63, M32, INT_MIN, 0x1234_5678, _u(-32)]
SHIFT_VALUES = [0, 1, M32, INT_MIN, INT_MAX, 0x8000, 0x1234_5678, 0xDEAD_BEEF, 0x8000_0001]
IMM_VALUES = [0, 1, -1, 2, 2047, -2048, 0x555, -0x556, 0x7FF, 0x100]
IMM_OPERANDS = [0, 1, M32, _u(-2), INT_MIN, INT_MAX, 0x7FF, 0x800, _u(-2048), 0xFFFF, 0x1234_5678]
SHAMTS = [0, 1, 2, 7, 15, 16, 30, 31]
M_VALUES = [0, 1, M32, 2, _u(-2), 3, _u(-7), INT_MIN, INT_MIN + 1, INT_MAX, 0x7FFF, 0x8000, 0xFFFF,
            0x10000, 0x1234_5678, 0xDEAD_BEEF]
BRANCH_VALUES = [0, 1, M32, 2, _u(-2), INT_MIN, INT_MAX, 0x8000_0001]


# --- register-register and immediate ALU ops ----------------------------------------------------------

def _rr_program(name: str, avals, bvals) -> Image:
    op = asm.R_OPS[name]
    p = Program()
    k = 0
    for a in avals:
        for b in bvals:
            rd, r1, r2 = _regs(k)
            k += 1
            p.start_case()
            p.li(r1, a)
            p.li(r2, b)
            p.emit(op(rd, r1, r2))
            p.check(rd, expected(name, a, b))
    a, b = 0x8765_4321, 0x0000_0013
    a2 = INT_MIN + 5
    specials = [  # (what, registers r -> (rd, rs1, rs2)); r[0] holds va and r[1] vb
        ("rd==rs1", lambda r: (r[0], r[0], r[1])),
        ("rd==rs2", lambda r: (r[1], r[0], r[1])),
        ("rd==rs1==rs2", lambda r: (r[0], r[0], r[0])),
        ("rs1==rs2", lambda r: (r[2], r[0], r[0])),
        ("rs1=x0", lambda r: (r[2], 0, r[1])),
        ("rs2=x0", lambda r: (r[2], r[0], 0)),
    ]
    for va, vb in ((a, b), (a2, M32), (M32, 31)):
        for _, pick in specials:
            r = _regs(k)
            k += 1
            rd, rs1, rs2 = pick(r)
            p.start_case()
            p.li(r[0], va)
            p.li(r[1], vb)
            vals = {0: 0, r[0]: va, r[1]: vb}
            p.emit(op(rd, rs1, rs2))
            p.check(rd, expected(name, vals[rs1], vals[rs2]))
        # x0 as the destination: x0 must still read 0, the sources are unchanged
        r = _regs(k)
        k += 1
        p.start_case()
        p.li(r[0], va)
        p.li(r[1], vb)
        p.emit(op(0, r[0], r[1]))
        p.check(0, 0)
        p.emit(asm.add(r[2], 0, 0))
        p.check(r[2], 0)
        p.check(r[0], va)
        p.check(r[1], vb)
    return p.finish()


def _imm_program(name: str, avals, imms) -> Image:
    op = asm.I_OPS.get(name) or asm.SHIFT_IMM_OPS[name]
    p = Program()
    k = 0
    for a in avals:
        for imm in imms:
            rd, r1 = _regs(k, 2)
            k += 1
            p.start_case()
            p.li(r1, a)
            p.emit(op(rd, r1, imm))
            p.check(rd, expected(name, a, imm))
    for va, imm in ((0x8765_4321, imms[-1]), (M32, imms[1]), (INT_MIN, imms[-2])):
        r, s = _regs(k, 2)
        k += 1
        p.start_case()                     # rd == rs1
        p.li(r, va)
        p.emit(op(r, r, imm))
        p.check(r, expected(name, va, imm))
        p.start_case()                     # rs1 = x0
        p.emit(op(s, 0, imm))
        p.check(s, expected(name, 0, imm))
        p.start_case()                     # rd = x0
        p.li(r, va)
        p.emit(op(0, r, imm))
        p.check(0, 0)
        p.emit(asm.add(s, 0, 0))
        p.check(s, 0)
        p.check(r, va)
    return p.finish()


def _alu_rr(name):
    if name in ("sll", "srl", "sra"):
        return lambda: _rr_program(name, SHIFT_VALUES, SHIFT_AMOUNTS)
    vals = M_VALUES if name in ("mul", "mulh", "mulhsu", "mulhu", "div", "divu", "rem", "remu") \
        else ALU_VALUES
    return lambda: _rr_program(name, vals, vals)


def _alu_imm(name):
    if name in asm.SHIFT_IMM_OPS:
        return lambda: _imm_program(name, SHIFT_VALUES + [0xFFFF, 7], SHAMTS)
    return lambda: _imm_program(name, IMM_OPERANDS, IMM_VALUES)


# --- lui / auipc --------------------------------------------------------------------------------------

UPPER_IMMS = [0, 1, 0x7FFFF, 0x80000, 0xFFFFF, 0x12345, 0xABCDE, 0x00800, 0x80001]


def lui_program() -> Image:
    p = Program()
    for k, imm in enumerate(UPPER_IMMS):
        (rd,) = _regs(k, 1)
        p.start_case()
        p.li(rd, M32)                     # low 12 bits must be cleared
        p.emit(asm.lui(rd, imm))
        p.check(rd, expected("lui", 0, imm))
    p.start_case()
    p.emit(asm.lui(0, 0xFFFFF))
    p.check(0, 0)
    return p.finish()


def auipc_program() -> Image:
    p = Program()
    for k, imm in enumerate(UPPER_IMMS):
        (rd,) = _regs(k, 1)
        p.start_case()
        p.li(rd, 0x5A5A_5A5A)
        pc = p.pc
        p.emit(asm.auipc(rd, imm))
        p.check(rd, expected("auipc", pc, imm))
    p.start_case()
    p.emit(asm.nop() * 64)                # auipc at a later address
    pc = p.pc
    p.emit(asm.auipc(asm.A1, 0xFFFFF))
    p.check(asm.A1, expected("auipc", pc, 0xFFFFF))
    p.start_case()
    p.emit(asm.auipc(0, 0x12345))
    p.check(0, 0)
    return p.finish()


# --- jal / jalr ---------------------------------------------------------------------------------------

def jal_program() -> Image:
    p = Program()
    # forward over one instruction, several link registers
    for rd in (asm.RA, asm.T0, asm.A0, 30, asm.SP):
        p.start_case()
        land = p.new_label()
        pc = p.pc
        p.jal(rd, land)
        p.fail()
        p.label(land)
        p.check(rd, pc + 4)
    # backward
    for rd in (asm.RA, asm.S2):
        p.start_case()
        fwd, back, cont = p.new_label(), p.new_label(), p.new_label()
        p.jal(0, fwd)
        p.label(back)
        p.jal(0, cont)
        p.fail()
        p.label(fwd)
        pc = p.pc
        p.jal(rd, back)
        p.fail()
        p.label(cont)
        p.check(rd, pc + 4)
    # rd = x0
    p.start_case()
    land = p.new_label()
    p.jal(0, land)
    p.fail()
    p.label(land)
    p.check(0, 0)
    # long offsets: forward 0x804 / 0x1804, backward 0x804 / 0x1800 (gaps of illegal zero words)
    for dist in (0x804, 0x1804):
        p.start_case()
        pc = p.pc
        p.emit(asm.jal(asm.RA, dist))
        p.gap(dist - 4)
        p.check(asm.RA, pc + 4)
    for dist in (0x804, 0x1800):
        p.start_case()
        fwd, back, cont = p.new_label(), p.new_label(), p.new_label()
        p.jal(0, fwd)
        p.label(back)
        p.jal(0, cont)
        p.gap(dist - 4)
        p.label(fwd)
        pc = p.pc
        assert pc - p.labels[back] == dist
        p.jal(asm.A5, back)
        p.fail()
        p.label(cont)
        p.check(asm.A5, pc + 4)
    return p.finish()


def jalr_program() -> Image:
    p = Program()

    def case(rd, rs1, addend, imm, backward=False):
        """la rs1, L + addend; jalr rd, rs1, imm must land on L (= (L + addend + imm) & ~1)."""
        p.start_case()
        land, cont = p.new_label(), p.new_label()
        if backward:
            skip = p.new_label()
            p.jal(0, skip)
            p.label(land)
            p.jal(0, cont)
            p.label(skip)
        p.la(rs1, land, addend)
        pc = p.pc
        p.emit(asm.jalr(rd, rs1, imm))
        p.fail()
        if not backward:
            p.label(land)
        p.label(cont)
        if rd:
            p.check(rd, pc + 4)
        else:
            p.check(0, 0)

    case(asm.RA, asm.T0, 0, 0)
    case(asm.T1, asm.A0, -16, 16)
    case(asm.A2, asm.A3, 100, -100)
    case(asm.A4, asm.A5, 2048, -2048)
    case(asm.S2, asm.S3, -2047, 2047)
    case(asm.S4, asm.S5, -2046, 2047)      # target L + 1: bit 0 cleared
    case(asm.S6, asm.S7, 1, 0)             # bit 0 from rs1 cleared
    case(asm.S8, asm.S9, 0, 1)             # bit 0 from the immediate cleared
    case(asm.T2, asm.T2, 0, 0)             # rd == rs1: the old rs1 is the base
    case(asm.A6, asm.A6, 5, -4)            # rd == rs1 with bit 0 cleared
    case(0, asm.T3, 0, 0)                  # rd = x0
    case(asm.RA, asm.RA, 0, 0, backward=True)
    case(asm.T4, asm.T5, 2047, -2047, backward=True)
    # a base that wraps around 0: rs1 = L - 2047 (negative when L < 2047) + 2047
    p.start_case()
    land = p.new_label()
    p.la(asm.S11, land, -2047)
    pc = p.pc
    p.emit(asm.jalr(asm.S1, asm.S11, 2047))
    p.fail()
    p.label(land)
    p.check(asm.S1, pc + 4)
    return p.finish()


# --- branches -----------------------------------------------------------------------------------------

def _branch_program(name: str) -> Image:
    p = Program()
    k = 0

    def forward(rs1, rs2, taken, res):
        land = p.new_label()
        p.emit(asm.addi(res, 0, 1))
        p.branch(name, rs1, rs2, land)
        p.emit(asm.addi(res, 0, 0))
        p.label(land)
        p.check(res, taken)

    def backward(rs1, rs2, taken, res):
        br, tgt, done = p.new_label(), p.new_label(), p.new_label()
        p.emit(asm.addi(res, 0, 0))
        p.jal(0, br)
        p.label(tgt)
        p.emit(asm.addi(res, 0, 1))
        p.jal(0, done)
        p.label(br)
        p.branch(name, rs1, rs2, tgt)
        p.label(done)
        p.check(res, taken)

    for a in BRANCH_VALUES:
        for b in BRANCH_VALUES:
            for direction in (forward, backward):
                r1, r2, res = _regs(k)
                k += 1
                p.start_case()
                p.li(r1, a)
                p.li(r2, b)
                direction(r1, r2, expected(name, a, b), res)
                p.check(r1, a)
                p.check(r2, b)
    # same register, x0 operands
    for a in (0, 5, M32, INT_MIN):
        r1, _, res = _regs(k)
        k += 1
        for rs1, rs2, va, vb in ((r1, r1, a, a), (0, r1, 0, a), (r1, 0, a, 0), (0, 0, 0, 0)):
            for direction in (forward, backward):
                p.start_case()
                p.li(r1, a)
                direction(rs1, rs2, expected(name, va, vb), res)
    # the longest offsets, +4092 and -4096: one taken and one not-taken operand pair each
    pairs = [(a, b) for a in BRANCH_VALUES for b in BRANCH_VALUES]
    taken = next(ab for ab in pairs if expected(name, *ab))
    not_taken = next(ab for ab in pairs if not expected(name, *ab))
    for a, b in (taken, not_taken):
        r1, r2, res = _regs(k)
        k += 1
        p.start_case()
        p.li(r1, a)
        p.li(r2, b)
        p.emit(asm.addi(res, 0, 1))
        land = p.new_label()
        p.emit(asm.BRANCH_OPS[name](r1, r2, 4092))
        p.emit(asm.addi(res, 0, 0))
        p.jal(0, land)
        p.gap(4092 - 12)
        p.label(land)
        p.check(res, expected(name, a, b))

        p.start_case()
        tgt, done = p.new_label(), p.new_label()
        p.emit(asm.addi(res, 0, 0))
        p.jal(0, done + "br")
        p.label(tgt)
        p.emit(asm.addi(res, 0, 1))
        p.jal(0, done)
        p.gap(4096 - 8)
        p.label(done + "br")
        p.emit(asm.BRANCH_OPS[name](r1, r2, -4096))
        assert p.labels[tgt] == p.pc - 4 - 4096
        p.label(done)
        p.check(res, expected(name, a, b))
    return p.finish()


# --- loads and stores ---------------------------------------------------------------------------------

LOAD_DATA = bytes([
    0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0x81, 0x55,
    0x00, 0x80, 0xFF, 0xFF, 0xFF, 0x7F, 0x01, 0x00,
    0x00, 0x00, 0x00, 0x80, 0xFF, 0xFF, 0xFF, 0xFF,
    0xFF, 0xFF, 0xFF, 0x7F, 0x78, 0x56, 0x34, 0x12,
    0xEF, 0xBE, 0xAD, 0xDE, 0x01, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x80, 0x80, 0x80, 0x80,
    0x7F, 0x7F, 0x80, 0x00, 0x34, 0x12, 0x00, 0x80,
    0x01, 0x80, 0x00, 0x01, 0xAA, 0x55, 0xCC, 0x33,
])


def _load_program(name: str) -> Image:
    op, width = asm.LOAD_OPS[name], asm.LOAD_WIDTH[name]
    p = Program()
    p.data[:] = LOAD_DATA
    data_len = len(LOAD_DATA)

    def raw(off):
        return int.from_bytes(LOAD_DATA[off:off + width], "little")

    k = 0
    for off in range(0, data_len, width):           # every aligned offset from the start
        rd, base = _regs(k, 2)
        k += 1
        p.start_case()
        p.la(base, "data")
        p.emit(op(rd, base, off))
        p.check(rd, expected(name, raw(off)))
    for off in range(0, data_len, 4 * width):       # negative offsets from the end
        rd, base = _regs(k, 2)
        k += 1
        p.start_case()
        p.la(base, "data", data_len)
        p.emit(op(rd, base, off - data_len))
        p.check(rd, expected(name, raw(off)))
    for off, imm in ((0, -2048), (width, 2047), (data_len - width, 2047), (data_len - width, -2048)):
        rd, base = _regs(k, 2)
        k += 1
        p.start_case()
        p.la(base, "data", off - imm)                # base register odd for 2047
        p.emit(op(rd, base, imm))
        p.check(rd, expected(name, raw(off)))
    for off in (3 * width, 12 - width, 20):           # rd == rs1: the load overwrites its base
        off -= off % width
        (r,) = _regs(k, 1)
        k += 1
        p.start_case()
        p.la(r, "data", 4)
        p.emit(op(r, r, off - 4))
        p.check(r, expected(name, raw(off)))
    p.start_case()                                    # rd = x0
    p.la(asm.A0, "data")
    p.emit(op(0, asm.A0, 3 * width))
    p.check(0, 0)
    return p.finish()


def _store_program(name: str) -> Image:
    op, width = asm.STORE_OPS[name], asm.STORE_WIDTH[name]
    load_back = {"sb": ("lbu", asm.lbu), "sh": ("lhu", asm.lhu), "sw": ("lw", asm.lw)}[name]
    p = Program()
    size = 64
    mem = bytearray(LOAD_DATA[:size])
    p.data[:] = mem
    k = 0

    def case(off, value, base_addend, imm, rs2_zero=False):
        nonlocal k
        src, base, chk = _regs(k)
        k += 1
        p.start_case()
        p.la(base, "data", base_addend)
        if rs2_zero:
            src = 0
            value = 0
        else:
            p.li(src, value)
        p.emit(op(src, base, imm))
        assert base_addend + imm == off
        mem[off:off + width] = expected(name, value).to_bytes(width, "little")
        word = off & ~3
        p.emit(asm.lw(chk, base, word - base_addend))
        p.check(chk, int.from_bytes(mem[word:word + 4], "little"))
        lname, lop = load_back
        p.emit(lop(chk, base, imm))
        p.check(chk, expected(lname, int.from_bytes(mem[off:off + width], "little")))
        if src:
            p.check(src, value)                         # the store leaves rs2 unchanged

    values = [0x1234_5678, 0xFFFF_FFFF, 0x8000_0080, 0x0000_0000, 0xABCD_EF01, 0x7F7F_8080,
              0xCAFE_BABE, 0x0102_0304]
    i = 0
    for off in range(0, 32, width):                   # every lane of 8 words
        case(off, values[i % len(values)], 0, off)
        i += 1
    for off in range(32, 48, width):                  # negative offsets
        case(off, values[i % len(values)], 48, off - 48)
        i += 1
    case(48, 0x1122_3344, 48 + 2048, -2048)
    case(52, 0x5566_7788, 52 - 2047, 2047)           # an odd base register
    case(56, 0, 56, 0, rs2_zero=True)
    # rs2 == rs1: the stored value is the base address itself
    (src, base, chk) = _regs(k)
    k += 1
    p.start_case()
    p.la(base, "data", 60)
    p.emit(op(base, base, 0))
    p.emit(asm.lw(chk, base, 0))
    # the expected word depends on the data address: merge it at run time in registers instead:
    # compare the stored low bytes with the low bytes of the base register.
    mask = (1 << (8 * width)) - 1
    p.li(TMP, mask)
    p.emit(asm.and_(chk, chk, TMP), asm.and_(src, base, TMP))
    p.emit(asm.beq(chk, src, 8))
    p.fail()
    # the untouched upper bytes of word 60 (only when the store is narrower than a word)
    upper = int.from_bytes(mem[60:64], "little") & ~mask & M32
    p.emit(asm.lw(chk, base, 0))
    p.li(TMP, ~mask & M32)
    p.emit(asm.and_(chk, chk, TMP))
    p.check(chk, upper)
    mem[60:60 + width] = b"\x00" * width               # unknown at build time: not compared below
    # no stray writes: compare every word of the area (except the rs2 == rs1 word) with the model
    p.start_case()
    p.la(asm.A0, "data")
    for w in range(0, 60, 4):
        p.emit(asm.lw(asm.A1, asm.A0, w))
        p.check(asm.A1, int.from_bytes(mem[w:w + 4], "little"))
    return p.finish()


# --- fence / ecall / ebreak ---------------------------------------------------------------------------

FENCES = [asm.fence(), asm.fence(0b0011, 0b0011), asm.fence(0b0010, 0b0010),
          asm.fence(0b0001, 0b0001), 0x8330_000F,  # fence.tso
          asm.fence(0b0001, 0), asm.fence(0, 0)]   # pause (Zihintpause encoding), fence 0,0


def fence_program() -> Image:
    p = Program()
    p.data[:] = bytes(16)
    for k, f in enumerate(FENCES):
        a, b, base = _regs(k)
        p.start_case()
        p.li(a, 0x1357_9BDF + k)
        p.la(base, "data")
        p.emit(asm.sw(a, base, 4 * (k % 4)))
        p.emit(f)
        p.emit(asm.lw(b, base, 4 * (k % 4)))
        p.check(b, 0x1357_9BDF + k)
        p.check(a, 0x1357_9BDF + k)
    return p.finish()


def ecall_program() -> Image:
    """Exits through ecall (a7 = 93, a0 = 0); if ecall falls through, exits with 2 (or ebreak)."""
    return Image.from_words(asm.li(asm.A1, 0x1234) + asm.exit_sequence(0) + asm.exit_sequence(2)
                            + [asm.ebreak()])


def ebreak_program() -> Image:
    """Halts by ebreak with a0 = 0; falling through exits with code 1."""
    return Image.from_words(asm.li(asm.A0, 0) + asm.li(asm.A7, asm.EXIT_SYSCALL) + [asm.ebreak()]
                            + asm.exit_sequence(1))


# --- the table ----------------------------------------------------------------------------------------

RR_NAMES = ["add", "sub", "sll", "slt", "sltu", "xor", "srl", "sra", "or", "and",
            "mul", "mulh", "mulhsu", "mulhu", "div", "divu", "rem", "remu",
            "sh1add", "sh2add", "sh3add"]
IMM_NAMES = ["addi", "slti", "sltiu", "xori", "ori", "andi", "slli", "srli", "srai"]

ISA_TESTS: dict[str, Callable[[], Image]] = {
    "lui": lui_program,
    "auipc": auipc_program,
    "jal": jal_program,
    "jalr": jalr_program,
    **{name: (lambda n=name: _branch_program(n)) for name in asm.BRANCH_OPS},
    **{name: (lambda n=name: _load_program(n)) for name in asm.LOAD_OPS},
    **{name: (lambda n=name: _store_program(n)) for name in asm.STORE_OPS},
    **{name: _alu_imm(name) for name in IMM_NAMES},
    **{name: _alu_rr(name) for name in RR_NAMES},
    "fence": fence_program,
    "ecall": ecall_program,
    "ebreak": ebreak_program,
}

EXPECTED_HALT = {name: "exit" for name in ISA_TESTS} | {"ebreak": "ebreak"}
"""How each ISA test must stop (``Halt.EXIT`` or ``Halt.EBREAK`` kind strings), always with a0 = 0."""


# --- other programs -----------------------------------------------------------------------------------

def exit_code_program(code: int) -> Image:
    """Exits with the given code (a0 = code)."""
    return Image.from_words(asm.exit_sequence(code))


def loop_forever_program(kind: str = "beq") -> Image:
    """A taken branch to itself (``beq x0, x0, 0``, or ``jal x0, 0`` with kind="jal"): never halts;
    for tests of a step limit. Retires 2 setup instructions, then the self-branch forever (pc 8)."""
    self_jump = asm.beq(0, 0, 0) if kind == "beq" else asm.jal(0, 0)
    return Image.from_words(asm.li(asm.A0, 1) + asm.li(asm.T0, 7) + [self_jump]
                            + asm.exit_sequence(3))


def branch_to_self_program() -> Image:
    """Branches to themselves that are NOT taken (beq x0, x1, 0 with x1 != 0, bne x0, x0, 0,
    blt x1, x0, 0 with x1 > 0, bltu x1, x0, 0): they fall through; the program exits with 0."""
    return Image.from_words(asm.li(asm.RA, 5) + [
        asm.beq(0, asm.RA, 0), asm.bne(0, 0, 0), asm.blt(asm.RA, 0, 0), asm.bltu(asm.RA, 0, 0),
        asm.bge(0, asm.RA, 0), asm.bgeu(0, asm.RA, 0),
    ] + asm.exit_sequence(0))


@dataclass(frozen=True)
class TrapCase:
    """A program that must stop with trap ``cause`` at ``pc`` (the trapping instruction does not retire)."""
    image: Image
    cause: int
    pc: int
    retired: int          # instructions retired before the trap


def _trap(prefix: list[int], bad: list[int] | int, cause: int) -> TrapCase:
    bad = bad if isinstance(bad, list) else [bad]
    words = prefix + bad + asm.exit_sequence(0x7E)
    return TrapCase(Image.from_words(words), cause, 4 * len(prefix), len(prefix))


def _illegal(word: int) -> Callable[[], TrapCase]:
    return lambda: _trap(asm.li(asm.A0, 1), word, TRAP_ILLEGAL_INSN)


TRAP_TESTS: dict[str, Callable[[], TrapCase]] = {
    "illegal-zero-word": _illegal(0x0000_0000),
    "illegal-all-ones": _illegal(0xFFFF_FFFF),
    "illegal-custom-opcode": _illegal(0x0000_000B),
    "illegal-compressed": _illegal(0x0000_4501),                # c.li a0, 0 (no C extension)
    "illegal-op-funct7-0x10-f3-0": _illegal(asm.r_type(0x33, 0, 0x10, 1, 2, 3)),
    "illegal-op-funct7-0x10-f3-1": _illegal(asm.r_type(0x33, 1, 0x10, 1, 2, 3)),
    "illegal-op-funct7-0x10-f3-3": _illegal(asm.r_type(0x33, 3, 0x10, 1, 2, 3)),
    "illegal-op-funct7-0x10-f3-5": _illegal(asm.r_type(0x33, 5, 0x10, 1, 2, 3)),
    "illegal-op-funct7-0x10-f3-7": _illegal(asm.r_type(0x33, 7, 0x10, 1, 2, 3)),
    "illegal-op-funct7-0x20-f3-1": _illegal(asm.r_type(0x33, 1, 0x20, 1, 2, 3)),
    "illegal-op-funct7-0x20-f3-4": _illegal(asm.r_type(0x33, 4, 0x20, 1, 2, 3)),
    "illegal-op-funct7-0x04": _illegal(asm.r_type(0x33, 0, 0x04, 1, 2, 3)),
    "illegal-slli-funct7-0x20": _illegal(asm.r_type(0x13, 1, 0x20, 1, 2, 3)),
    "illegal-slli-shamt5": _illegal(asm.r_type(0x13, 1, 0x01, 1, 2, 3)),     # RV64 shamt
    "illegal-srli-funct7-0x10": _illegal(asm.r_type(0x13, 5, 0x10, 1, 2, 3)),
    "illegal-load-f3-3": _illegal(asm.i_type(0x03, 3, 1, 0, 0)),             # ld (RV64)
    "illegal-load-f3-6": _illegal(asm.i_type(0x03, 6, 1, 0, 0)),
    "illegal-store-f3-3": _illegal(asm.s_type(0x23, 3, 0, 1, 0)),            # sd (RV64)
    "illegal-branch-f3-2": _illegal(asm.b_type(0x63, 2, 0, 0, 8)),
    "illegal-branch-f3-3": _illegal(asm.b_type(0x63, 3, 0, 0, 8)),
    "illegal-jalr-f3-1": _illegal(asm.i_type(0x67, 1, 0, 1, 0)),
    "illegal-op-32": _illegal(asm.r_type(0x3B, 0, 0, 1, 2, 3)),              # addw (RV64)
    "ecall-other-syscall": lambda: _trap(asm.li(asm.A7, 64) + asm.li(asm.A0, 1), asm.ecall(),
                                         TRAP_ECALL),
    "load-misaligned-lw": lambda: _trap(asm.li(asm.A1, 0x802), asm.lw(asm.A0, asm.A1, 0),
                                        TRAP_LOAD_MISALIGNED),
    "load-misaligned-lh": lambda: _trap(asm.li(asm.A1, 0x801), asm.lh(asm.A0, asm.A1, 0),
                                        TRAP_LOAD_MISALIGNED),
    "load-misaligned-lhu": lambda: _trap(asm.li(asm.A1, 0x803), asm.lhu(asm.A0, asm.A1, 0),
                                         TRAP_LOAD_MISALIGNED),
    "store-misaligned-sw": lambda: _trap(asm.li(asm.A1, 0x801), asm.sw(asm.A0, asm.A1, 0),
                                         TRAP_STORE_MISALIGNED),
    "store-misaligned-sh": lambda: _trap(asm.li(asm.A1, 0x803), asm.sh(asm.A0, asm.A1, 0),
                                         TRAP_STORE_MISALIGNED),
    "load-fault-unmapped": lambda: _trap(asm.li(asm.A1, 0x2000_0000), asm.lw(asm.A0, asm.A1, 0),
                                         TRAP_LOAD_FAULT),
    "load-fault-past-ram": lambda: _trap(asm.li(asm.A1, DEFAULT_RAM_SIZE),
                                         asm.lbu(asm.A0, asm.A1, 0), TRAP_LOAD_FAULT),
    "load-fault-console": lambda: _trap(asm.li(asm.A1, CONSOLE_ADDR), asm.lb(asm.A0, asm.A1, 0),
                                        TRAP_LOAD_FAULT),
    "store-fault-unmapped": lambda: _trap(asm.li(asm.A1, 0x2000_0000), asm.sw(asm.A0, asm.A1, 0),
                                          TRAP_STORE_FAULT),
    "store-fault-past-ram": lambda: _trap(asm.li(asm.A1, DEFAULT_RAM_SIZE + 4),
                                          asm.sb(asm.A0, asm.A1, -4), TRAP_STORE_FAULT),
    "jal-misaligned-target": lambda: _trap(asm.li(asm.A0, 1), asm.jal(asm.RA, 6),
                                           TRAP_INSN_MISALIGNED),
    "jalr-misaligned-target": lambda: _trap(asm.li(asm.A1, 0x102), asm.jalr(asm.RA, asm.A1, 0),
                                            TRAP_INSN_MISALIGNED),
    "branch-misaligned-target": lambda: _trap(asm.li(asm.A0, 1), asm.beq(0, 0, 6),
                                              TRAP_INSN_MISALIGNED),
}
"""Programs that must trap. The misaligned-target jumps trap on the jump itself (RV32I without C:
the jump does not retire, ra is not written). A not-taken branch to a misaligned target does not
trap (see ``branch_to_self_program``-style use)."""


def hazard_programs() -> dict[str, Image]:
    """Hazards on purpose: each instruction of interest reads state in the cycle that changes it.
    Exit codes (hand-checked): 12, 0x12347878 + 0x78, 3 and 77."""
    A0, A7 = asm.A0, asm.A7
    done = asm.li(A7, 93) + [asm.ecall()]
    progs = {}
    # jalr x1, 0(x1): the target comes from the OLD x1, the link value is the new one
    progs["jalr_x1_x1"] = [asm.auipc(1, 0), asm.addi(1, 1, 16), asm.jalr(1, 1, 0), asm.ebreak(),
                           asm.add(A0, 1, 0)] + done
    # store then load the same word; a byte store merged into the word the next load reads
    progs["store_then_load"] = asm.li(5, 0x300) + asm.li(6, 0x12345678) + [
        asm.sw(6, 5, 0), asm.lw(7, 5, 0), asm.sb(7, 5, 1), asm.lw(8, 5, 0), asm.lbu(9, 5, 1),
        asm.add(A0, 8, 9)] + done
    # writes to x0 are dropped: results read back as 0
    progs["writes_to_x0"] = [asm.addi(0, 0, 5), asm.lui(0, 0x12345), asm.jal(0, 8), asm.ebreak(),
                             asm.add(A0, 0, 0), asm.addi(A0, A0, 3)] + done
    # a store into the word after the current instruction: the new word is what runs next
    progs["store_into_next_word"] = asm.li(6, asm.addi(A0, 0, 77)) + [
        asm.auipc(5, 0), asm.sw(6, 5, 8), asm.ebreak()] + done
    return {k: Image.from_words(v) for k, v in progs.items()}
