"""Seeded random RV32IM+Zba programs that always terminate and never trap.

``random_program(seed, length)`` builds, deterministically from ``seed``:

* a prologue that seeds x1..x31 with random values (about 30 % edge values: 0, 1, -1, INT_MIN,
  INT_MAX, small numbers, powers of two and their neighbours), then points ``BASE_REG`` (x27, s11) at
  the middle of a data area of ``DATA_SIZE`` random bytes at the top of RAM and ``CONSOLE_REG``
  (x26, s10) at the console. Random instructions never write these two registers (they may read
  them);
* ``length`` random instructions (a ``auipc``+``jalr`` pair counts as two): register-register ALU,
  M and Zba ops, immediate ALU ops and shifts, lui/auipc, loads and stores of every width (always
  aligned, always inside the data area, offsets -256..+255 from ``BASE_REG``), an occasional console
  byte store and fence, and FORWARD control flow only: conditional branches and ``jal`` to a later
  instruction of the stream (or the epilogue), and ``auipc t; jalr rd, t, off`` to a later
  instruction (sometimes with bit 0 of the offset set, which jalr clears). Destinations include x0;
  a random "hot" subset of registers is preferred so that results feed later instructions
  (back-to-back dependencies), and rd often equals a source;
* an epilogue that xors every register into a0 and exits (a7 = 93, ecall) with that as the code.

Since every jump goes forward, a program retires at most ``len(words)`` instructions.

``compact=True`` makes programs for slow engines (the compiled model spends a frame of tokens per
cycle): the prologue seeds only the hot registers, the data area is 64 bytes, M instructions (18
cycles each on the core) are rarer, and the epilogue xors only the hot registers into a0.
"""

import random

from . import asm
from .machine import CONSOLE_ADDR, DEFAULT_RAM_SIZE, Image

M32 = 0xFFFF_FFFF
BASE_REG = asm.S11      # x27: the data area's middle
CONSOLE_REG = asm.S10   # x26: the console address
DATA_SIZE = 512         # bytes; BASE_REG = start + 256, so offsets -256..255
EPILOGUE_WORDS = 32     # 30 xors into a0, li a7 93, ecall
WRITABLE = [r for r in range(32) if r not in (BASE_REG, CONSOLE_REG)]   # includes x0

EDGE_VALUES = sorted({0, 1, 2, 3, M32, M32 - 1, 0x8000_0000, 0x7FFF_FFFF, 0x8000_0001, 0x7FFF,
                      0x8000, 0xFFFF, 0x1_0000, 0xFF, 0x80, 0x7F, 0xFFFF_FF80, 0xFFFF_8000,
                      0xFFFF_F800, 0x7FF, 0x800}
                     | {1 << i for i in range(32)} | {(1 << i) - 1 for i in range(1, 32)}
                     | {-v & M32 for v in range(1, 17)} | set(range(17)))
EDGE_IMMS = [0, 1, -1, 2, -2, 2047, -2048, 0x7FF, 0x400, -0x400, 31, 32]
EDGE_UPPER = [0, 1, 0xFFFFF, 0x80000, 0x7FFFF, 0x00001, 0xFFFFE]

R_NAMES = ["add", "sub", "sll", "slt", "sltu", "xor", "srl", "sra", "or", "and"]
M_NAMES = ["mul", "mulh", "mulhsu", "mulhu", "div", "divu", "rem", "remu"]
ZBA_NAMES = ["sh1add", "sh2add", "sh3add"]

# relative weights of the instruction kinds
MIX = {
    "alu": 18, "m": 12, "zba": 6, "imm": 16, "shift_imm": 5, "upper": 5,
    "load": 11, "store": 9, "branch": 9, "jal": 3, "jalr": 3, "console": 1, "fence": 1,
}


def random_value(rng: random.Random) -> int:
    if rng.random() < 0.3:
        return rng.choice(EDGE_VALUES)
    return rng.getrandbits(32)


def random_imm(rng: random.Random) -> int:
    if rng.random() < 0.3:
        return rng.choice(EDGE_IMMS)
    return rng.randint(-2048, 2047)


def random_program(seed: int, length: int = 64, ram_size: int = DEFAULT_RAM_SIZE,
                   compact: bool = False) -> Image:
    """A random, terminating, trap-free program (see the module docstring); same seed, same image."""
    if length < 0:
        raise ValueError(f"length {length} must be >= 0")
    rng = random.Random(seed)
    data_size = 64 if compact else DATA_SIZE
    data_start = (ram_size - DATA_SIZE) & ~0xFF
    hot = rng.sample(WRITABLE[1:], 6)
    seeded = sorted(hot) if compact else [r for r in range(1, 32) if r not in (BASE_REG, CONSOLE_REG)]
    mix = dict(MIX, m=2) if compact else MIX

    def src() -> int:
        return rng.choice(hot) if rng.random() < 0.5 else rng.randrange(32)

    def dst() -> int:
        r = rng.random()
        if r < 0.05:
            return 0
        if r < 0.55:
            return rng.choice(hot)
        return rng.choice(WRITABLE)

    # --- prologue
    words: list[int] = []
    for r in seeded:
        words += asm.li(r, random_value(rng))
    words += asm.li(BASE_REG, data_start + DATA_SIZE // 2)
    words += asm.li(CONSOLE_REG, CONSOLE_ADDR)
    body_start = len(words)

    # --- body: words, with forward control flow fixed up once the layout is known
    body: list[int] = []
    landable: list[bool] = []
    fixups: list[tuple] = []       # (index in body, kind, args)
    kinds, weights = zip(*mix.items())

    def add(word, can_land=True):
        body.append(word)
        landable.append(can_land)

    while len(body) < length:
        kind = rng.choices(kinds, weights)[0]
        if kind == "jalr" and len(body) + 2 > length:
            kind = "alu"
        if kind in ("alu", "m", "zba"):
            name = rng.choice({"alu": R_NAMES, "m": M_NAMES, "zba": ZBA_NAMES}[kind])
            rd, rs1, rs2 = dst(), src(), src()
            alias = rng.random()
            if alias < 0.1 and rd:
                rs1 = rd
            elif alias < 0.15 and rd:
                rs2 = rd
            elif alias < 0.2:
                rs2 = rs1
            add(asm.R_OPS[name](rd, rs1, rs2))
        elif kind == "imm":
            name = rng.choice(list(asm.I_OPS))
            add(asm.I_OPS[name](dst(), src(), random_imm(rng)))
        elif kind == "shift_imm":
            name = rng.choice(list(asm.SHIFT_IMM_OPS))
            shamt = rng.choice([0, 1, 31]) if rng.random() < 0.3 else rng.randrange(32)
            add(asm.SHIFT_IMM_OPS[name](dst(), src(), shamt))
        elif kind == "upper":
            imm = rng.choice(EDGE_UPPER) if rng.random() < 0.3 else rng.getrandbits(20)
            add((asm.lui if rng.random() < 0.5 else asm.auipc)(dst(), imm))
        elif kind == "load":
            name = rng.choice(list(asm.LOAD_OPS))
            w = asm.LOAD_WIDTH[name]
            off = w * rng.randint(-(data_size // 2) // w, (data_size // 2 - w) // w)
            add(asm.LOAD_OPS[name](dst(), BASE_REG, off))
        elif kind == "store":
            name = rng.choice(list(asm.STORE_OPS))
            w = asm.STORE_WIDTH[name]
            off = w * rng.randint(-(data_size // 2) // w, (data_size // 2 - w) // w)
            add(asm.STORE_OPS[name](src(), BASE_REG, off))
        elif kind == "console":
            add(asm.sb(src(), CONSOLE_REG, 0))
        elif kind == "fence":
            add(asm.fence())
        elif kind == "branch":
            name = rng.choice(list(asm.BRANCH_OPS))
            rs1, rs2 = src(), src()
            if rng.random() < 0.1:
                rs2 = rs1
            fixups.append((len(body), "branch", (name, rs1, rs2)))
            add(0)
        elif kind == "jal":
            fixups.append((len(body), "jal", dst()))
            add(0)
        else:  # jalr: auipc t, 0; jalr rd, t, off   (landing on the jalr would use a stale t)
            t = rng.choice([r for r in WRITABLE if r])
            fixups.append((len(body), "jalr", (t, dst())))
            add(asm.auipc(t, 0))
            add(0, can_land=False)

    n = len(body)
    landable.append(True)          # the epilogue's first instruction

    def forward_target(i: int, max_words: int) -> int:
        """A landable word index in (i, min(i + max_words, n)], short distances favoured."""
        limit = min(n, i + max_words)
        span = limit - i
        t = i + (rng.randint(1, min(span, 8)) if rng.random() < 0.8 else rng.randint(1, span))
        if not landable[t]:        # a jalr word: its neighbours are landable
            t = t + 1 if t + 1 <= limit else t - 1
        return t

    for i, kind, args in fixups:
        if kind == "branch":
            name, rs1, rs2 = args
            t = forward_target(i, 1023)
            body[i] = asm.BRANCH_OPS[name](rs1, rs2, 4 * (t - i))
        elif kind == "jal":
            t = forward_target(i, (1 << 19) - 1)
            body[i] = asm.jal(args, 4 * (t - i))
        else:
            tmp, rd = args
            t = forward_target(i + 1, 510)       # after the jalr; offset from the auipc <= 2047
            body[i + 1] = asm.jalr(rd, tmp, 4 * (t - i) + (1 if rng.random() < 0.25 else 0))
    words += body

    # --- epilogue: a0 = xor of all (compact: the hot) registers; exit
    for r in (hot if compact else range(1, 32)):
        if r != asm.A0:
            words.append(asm.xor(asm.A0, asm.A0, r))
    words += asm.li(asm.A7, asm.EXIT_SYSCALL)
    words.append(asm.ecall())
    assert compact or len(words) - body_start - len(body) == EPILOGUE_WORDS

    if 4 * len(words) > data_start:
        raise ValueError(f"program of {len(words)} instructions does not fit below its data area at "
                         f"{data_start:#x} (ram_size {ram_size:#x})")
    data = rng.randbytes(data_size)
    code = Image.from_words(words).segments
    return Image(0, code + ((data_start + (DATA_SIZE - data_size) // 2, data),))


def program_words(image: Image) -> list[int]:
    """The code words of a random program (its first segment)."""
    addr, data = image.segments[0]
    return [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
