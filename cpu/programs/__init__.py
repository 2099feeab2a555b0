"""The test programs for the RV32IM+Zba machine: one C file each, with the console output and exit code
they must produce.

The expected outputs are written by hand or computed here in Python, independently of the programs
(zlib for CRC-32, sorted() for the sort, Python integers for the arithmetic) -- never by running a
program. Every engine (unicorn, netlist, model) must reproduce them exactly.
"""

import re
import zlib
from dataclasses import dataclass
from pathlib import Path

PROGRAM_DIR = Path(__file__).resolve().parent
M32 = 0xFFFF_FFFF
M64 = 0xFFFF_FFFF_FFFF_FFFF


@dataclass(frozen=True)
class Program:
    name: str
    path: Path
    expected_output: bytes
    expected_exit: int
    description: str = ""


def _s32(x):
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def _s64(x):
    x &= M64
    return x - (1 << 64) if x >> 63 else x


def _cdiv(a, b):
    """C (and RISC-V) division: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _crem(a, b):
    return a - _cdiv(a, b) * b


# ---- hello ----

def _hello():
    return ("Hello, RISC-V!\n"
            "-42 7 3000000000 beef BEEF str c %\n"
            "[1234abcd] [   42] [42   ] [-0042] [123456789] [4000000000] [ ab] [ab ]\n"
            "-1234567890123456789 18446744073709551615 123456789abcdef\n")


# ---- fibonacci ----

def _fibonacci():
    out = []
    a, b = 0, 1
    for i in range(47):
        out.append(f"F({i}) = {a}\n")
        a, b = b, (a + b) & M32
    x, y = 0, 1
    for _ in range(90):
        x, y = y, x + y
    out.append(f"F(90) = {x} = 0x{x >> 32:08x}{x & M32:08x}\n")

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)
    out.append(f"fib_rec(15) = {fib(15)}\n")
    return "".join(out)


# ---- sieve ----

def _primes_below(n):
    return [p for p in range(2, n) if all(p % d for d in range(2, int(p ** 0.5) + 1))]


def _sieve():
    primes = _primes_below(2000)
    out = "first primes:" + "".join(f" {p}" for p in primes[:20]) + "\n"
    out += f"primes below 2000: {len(primes)}, sum {sum(primes)}, largest {primes[-1]}\n"
    return out, len(primes) & 0xFF


# ---- quicksort ----

def _quicksort():
    seed, values = 12345, []
    for _ in range(300):
        seed = (seed * 1103515245 + 12345) & M32
        values.append(((seed >> 16) & 0x7FFF) - 16384)
    v = sorted(values)
    checksum = 0
    for x in v:
        checksum = (checksum * 31 + x) & M32
    return ("sorted: yes\n"
            f"min {v[0]} max {v[-1]} median {v[150]}\n"
            "first:" + "".join(f" {x}" for x in v[:8]) + "\n"
            f"checksum {checksum:08x}\n")


# ---- crc32 ----

def _crc32():
    table1 = 0x77073096      # the well-known first entries of the CRC-32 table
    table255 = 0x2D02EF8D
    text = b"The quick brown fox jumps over the lazy dog"
    buf = bytes((i * 7 + (i >> 3)) & 0xFF for i in range(1024))
    c = zlib.crc32(buf)
    out = (f"table[1] = {table1:08x}, table[255] = {table255:08x}\n"
           f"crc32(\"{text.decode()}\") = {zlib.crc32(text):08x} (bitwise {zlib.crc32(text):08x})\n"
           f"crc32(\"\") = {zlib.crc32(b''):08x}\n"
           f"crc32(buf[1024]) = {c:08x}\n")
    return out, c & 0xFF


# ---- matmul ----

def _matmul():
    n = 10
    a = [[(i * 7 + j * 3) % 11 - 5 for j in range(n)] for i in range(n)]
    b = [[(i * 5 + j * 9 + 2) % 13 - 6 for j in range(n)] for i in range(n)]

    def mul(x, y):
        return [[sum(x[i][k] * y[k][j] for k in range(n)) for j in range(n)] for i in range(n)]
    c = mul(a, b)
    out, checksum = [], 0
    for i in range(n):
        for j in range(n):
            checksum = (checksum * 17 + c[i][j]) & M32
        out.append(f"row {i}: sum {sum(c[i])}, first {c[i][0]}, last {c[i][n - 1]}\n")
    out.append(f"trace {sum(c[i][i] for i in range(n))} checksum {checksum:08x}\n")
    t = [list(r) for r in zip(*a)]
    s = mul(a, t)
    out.append(f"A*At symmetric: yes, diagonal[0..2] = {s[0][0]} {s[1][1]} {s[2][2]}\n")
    return "".join(out)


# ---- strings ----

def _base36(v, base):
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    s = ""
    while True:
        s = digits[v % base] + s
        v //= base
        if not v:
            return s


def _strings():
    words = ["apple", "banana", "cherry", "apple pie", "", "Zebra"]
    out = [f"strlen(\"{w}\") = {len(w)}\n" for w in words]
    out.append("strcmp: 0 -1 1 -1 -1\n")
    s = "Hello, strings!"
    out.append(f"strcpy: {s} ({len(s)})\n")
    out.append(f"reverse: {s[::-1]}\n")
    out.append(f"upper: {s[::-1].upper()}\n")
    out.append("memset: **********\n")
    other = bytearray(b"0123456789abcdef\0")
    out.append(f"memcpy: {other[:16].decode()}\n")
    other[4:12] = other[0:8]
    out.append(f"memmove up: {other[:16].decode()}\n")
    other[0:8] = other[6:14]
    out.append(f"memmove down: {other[:16].decode()}\n")
    out.append("memcmp: -1 0 1\n")
    hay = "the cat sat on the mat"
    out.append(f"find: {hay.find('sat')} {hay.find('mat')} {'the cat'.find('dog')}\n")
    out.append(f"utoa: 1234567 {bin(255)[2:]} {_base36(0xDEADBEEF, 36)}\n")
    src = [chr(ord('A') + i % 26) for i in range(40)]
    dst = ["."] * 40
    dst[1:31] = src[3:33]
    dst[33:38] = ["#"] * 5
    out.append(f"unaligned: {''.join(dst[:39])}\n")
    return "".join(out)


# ---- recursion ----

def _recursion():
    calls = 0

    def ack(m, n):
        nonlocal calls
        calls += 1
        if m == 0:
            return n + 1
        if n == 0:
            return ack(m - 1, 1)
        return ack(m - 1, ack(m, n - 1))
    a23 = ack(2, 3)
    c23, calls = calls, 0
    a33 = ack(3, 3)
    c33 = calls
    moves = hsum = 0

    def hanoi(n, frm, to, via):
        nonlocal moves, hsum
        if n == 0:
            return
        hanoi(n - 1, frm, via, to)
        moves += 1
        hsum = (hsum + (frm * 3 + to) * moves) & M32
        hanoi(n - 1, via, to, frm)
    hanoi(10, 1, 3, 2)

    def gcd(a, b):
        return a if b == 0 else gcd(b, a % b)
    return (f"A(2,3) = {a23} ({c23} calls)\n"
            f"A(3,3) = {a33} ({c33} calls)\n"
            f"hanoi(10): {moves} moves, weighted sum {hsum}\n"
            f"is_even(100) = 1, is_odd(77) = 1, is_even(33) = 0\n"
            f"gcd(1071, 462) = {gcd(1071, 462)}, gcd(832040, 514229) = {gcd(832040, 514229)}\n")


# ---- longlong ----

def _halves(v):
    v &= M64
    return f"{v >> 32:08x}_{v & M32:08x}"


def _longlong():
    A = [123456789012345, -987654321098765, 0x7FFFFFFFFFFFFFFF, -1, 0x0123456789ABCDEF, 1000000007, -5,
         4294967296]
    B = [1000, 12345, -3, 7, 0xFEDCBA9876, -65536, 2, 4294967295]
    out = []
    for a, b in zip(A, B):
        ua, ub = a & M64, b & M64
        out.append(f"a={_halves(a)} b={_halves(b)}\n")
        out.append(f"  mul {_halves(a * b)} div {_halves(_cdiv(a, b))} rem {_halves(_crem(a, b))}\n")
        out.append(f"  udiv {_halves(ua // ub)} urem {_halves(ua % ub)}\n")
        out.append(f"  dec {a} / {b} = {_cdiv(a, b)}\n")
    x = -0x123456789ABCDEF
    for s in (0, 1, 31, 32, 33, 63):
        out.append(f"shift {s}: shl {_halves(x << s)} sar {_halves(x >> s)} shr {_halves((x & M64) >> s)}\n")
    return "".join(out)


# ---- muldiv ----

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
_MULDIV_VALUES = [
    (7, 3), (-7, 3), (7, -3), (-7, -3), (INT_MIN, -1), (INT_MIN, 1), (INT_MAX, -1), (5, 0), (-5, 0),
    (0, 0), (INT_MIN, 0), (INT_MIN, INT_MIN), (INT_MAX, INT_MAX), (-1, -1), (0x12345678, _s32(0x9ABCDEF0)),
    (0x10000, 0x10000), (-1, INT_MIN),
]


def rv_muldiv(a: int, b: int) -> dict:
    """The RISC-V M extension's results (unsigned 32-bit) for signed 32-bit operands, per the spec."""
    a, b = _s32(a), _s32(b)
    ua, ub = a & M32, b & M32
    if b == 0:
        div, rem = -1, a
    elif a == INT_MIN and b == -1:
        div, rem = INT_MIN, 0
    else:
        div, rem = _cdiv(a, b), _crem(a, b)
    return {
        "mul": (a * b) & M32,
        "mulh": ((a * b) >> 32) & M32,
        "mulhsu": ((a * ub) >> 32) & M32,
        "mulhu": ((ua * ub) >> 32) & M32,
        "div": div & M32,
        "divu": (ua // ub if ub else M32) & M32,
        "rem": rem & M32,
        "remu": (ua % ub if ub else ua) & M32,
    }


def _muldiv():
    out = []
    for a, b in _MULDIV_VALUES:
        r = rv_muldiv(a, b)
        out.append(f"{a & M32:08x} {b & M32:08x}: " + " ".join(f"{k} {v:08x}" for k, v in r.items()) + "\n")
    out.append("mismatches with C: 0\n")
    for i in range(4):
        a, b = _MULDIV_VALUES[i * 4 + 2][0] & M32, _MULDIV_VALUES[i * 4 + 3][1] & M32
        out.append(f"zba {a:08x} {b:08x}: sh1add {((a << 1) + b) & M32:08x} sh2add {((a << 2) + b) & M32:08x} "
                   f"sh3add {((a << 3) + b) & M32:08x}\n")
    return "".join(out)


# ---- tokenizer ----

_TOKENIZER_INPUT = ("x1 = 42 + foo_bar*(7-y) ; if (a<=b) z != 10 @ end==3 >= 99\n"
                    "while(n>0) n = n - 1; 12ab # !x <> 5")


def _tokenizer():
    pattern = re.compile(r"\s*(?:(?P<ID>[A-Za-z_][A-Za-z0-9_]*)|(?P<NUM>[0-9]+)|(?P<OP>[=<>!]=?|[-+*/();,])"
                         r"|(?P<BAD>\S))")
    out, counts, total = [], {"ID": 0, "NUM": 0, "OP": 0, "BAD": 0}, 0
    for i, m in enumerate(pattern.finditer(_TOKENIZER_INPUT), 1):
        kind = m.lastgroup
        text = m.group(kind)
        counts[kind] += 1
        if kind == "NUM":
            total += int(text)
        out.append(f"{kind}({text})" + (" " if i % 8 else "\n"))
    n = sum(counts.values())
    out.append(f"\ntokens {n}: ids {counts['ID']} numbers {counts['NUM']} operators {counts['OP']} "
               f"bad {counts['BAD']}; sum of numbers {total}\n")
    return "".join(out)


# ---- libc ----

def _lcg_rand(seed, n):
    """The C standard's sample rand(): next = next * 1103515245 + 12345; (next / 65536) % 32768."""
    out = []
    for _ in range(n):
        seed = (seed * 1103515245 + 12345) & M32
        out.append((seed >> 16) % 32768)
    return out


def _wrap(v, bits, signed):
    """v converted to a C integer type of `bits` bits (as printf's h and hh modifiers do)."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


_CTYPE_SAMPLE = " \n\x7f" "09fAGz!@[`~"


def _ctype_counts():
    import string
    classes = [
        lambda c: c in string.digits, lambda c: c in string.ascii_letters,
        lambda c: c in string.ascii_letters + string.digits, lambda c: c in " \t\n\v\f\r",
        lambda c: c in string.ascii_uppercase, lambda c: c in string.ascii_lowercase,
        lambda c: c in string.hexdigits, lambda c: 32 <= ord(c) < 127, lambda c: c in string.punctuation,
        lambda c: ord(c) < 32 or ord(c) == 127, lambda c: 33 <= ord(c) < 127,
    ]
    # EOF (-1) belongs to no class; the sample's characters are all ASCII
    return [sum(bool(f(c)) for c in _CTYPE_SAMPLE) for f in classes]


def _libc():
    out = []
    line1 = "printf: %d %i %u %o %x %X %c %s %%\n" % (-42, 7, 3000000000, 8, 0xbeef, 0xbeef, "c", "str")
    out.append(line1)
    # C's %#o adds a leading 0 (Python: 0o); C's %#x and %#o of 0 are plain "0" (Python: 0x0, 0o0);
    # %p is 0x and lower-case hex, 0x0 for NULL
    out.append(f"returned {len(line1)}; alt: 0{8:o} {'%#x' % 255} {'%#X' % 255} 0 0 0x{0x1234:x} 0x0\n")
    out.append("flags: [%-6d] [%06d] [%+d] [% d] [%+d] [%-+5d] [% 05d] [%-06x]\n" % (42, -42, 5, 5, -5, 3, 7, 0xab))
    # %.0d of 0 prints no digits in C (Python prints 0)
    out.append("prec: [%.5d] [%8.3d] [%-8.3x] [] [%.3s] [%-6.2s] [%10.4s] [%.*s]\n"
               % (42, -7, 0xF, "abcdef", "xyz", "hello", 2, "pqrs"))
    out.append("star: [%*d] [%-*d] [%*d]\n" % (5, 1, 5, 2, -5, 3))
    out.append("length: %d %d %d %d %d %d %d %d %d\n" % (
        _wrap(70000, 16, True), _wrap(70000, 16, False), _wrap(200, 8, True), _wrap(300, 8, False),
        -123456789, 4000000000, 12345, -9, -1234567))
    out.append("64: %d %d %x %X %o %020d\n" % (-(1 << 63), M64, 0x123456789ABCDEF, 0xFEDCBA987,
                                              0o1234567012345670, -123456))
    out.append("limits: %d %d %d %d %d %d\n" % (INT_MIN, INT_MAX, M32, INT_MAX, 1 << 40, M32))
    out.append("double: %f %.2f %e %g %-10.3g|\n" % (3.14159, 2.675, 12345.678, 1234567.0, 2.0 / 3))
    out.append("count|5\n")
    full = "%s-%d" % ("abcdef", 12345)
    sp = "%08.3f|%x|%c" % (-3.14159, 48879, "Z")
    out.append(f'snprintf: {len(full)} "{full[:7]}" {len(str(-1234567890123))} 3 "" {len(sp)} "{sp}"\n')

    a = "hello" + ", world" + "!!!"[:2]
    out.append(f"strcat: {a} ({len(a)})\n")
    out.append("strncpy: abc 0 0 x\n")
    out.append(f"strncmp: {int('apple'[:2] == 'apricot'[:2])} {int('apple'[:3] < 'apricot'[:3])} 0 "
               f"{int('b' > 'a')}\n")
    s = "the quick brown fox"
    out.append(f"strchr: {s[s.index('q'):]} | {s[s.rindex('o'):]} | {int('z' not in s)}\n")
    out.append(f"strstr: {s[s.index('brown'):]} | {int('cat' not in s)} | {s}\n")
    out.append(f"memchr: {s.index('k')} {int('k' not in s[:5])}\n")
    spn = len("123abc") - len("123abc".lstrip("0123456789"))
    cspn = min(i for i, c in enumerate("hello, world") if c in ",;")
    out.append(f"spn: {spn} {cspn} {s[min(s.index(c) for c in 'kx' if c in s):]}\n")
    tokens = [tok for tok in re.split("[ ,;]", "  alpha,beta;;gamma , delta ") if tok]
    out.append("strtok:" + "".join(f" [{tok}]" for tok in tokens) + "\n")
    out.append("strdup: duplicate 0\n")
    out.append("ctype: " + " ".join(map(str, _ctype_counts())) + "\n")
    word = "Mixed Case 123!"
    out.append(f"upper: {word.upper()} lower: {word.lower()} 1 1\n")

    out.append(f"atoi: {int('-42')} {int('+17')} {int('2147483647')} {int('-9000000000')}\n")
    # (value, characters used) of strtol on the program's inputs, by Python's int()
    parsed = [(int("1F", 16), 4), (int("755", 8), 4), (int("101", 2), 5), (int("-99"), 5), (int("z", 36), 1),
              (int("12abc", 16), 5), (0, 1), (0, 0)]
    out.append("strtol:" + "".join(f" {v}/{n}" for v, n in parsed) + "\n")
    out.append(f"overflow: {INT_MIN} 1 11 {M32} 1 {-1 & M32} {M64} {int('-7fffffffffffffff', 16)}\n")
    out.append(f"abs: 5 70000 5000000000 div {_cdiv(-17, 5)} {_crem(-17, 5)}\n")
    r = _lcg_rand(1, 3) + _lcg_rand(2024, 2) + _lcg_rand(1, 1)
    out.append("rand: " + " ".join(map(str, r)) + " 32767\n")
    out.append(f"heap: {sum(i * i for i in range(10))} 0 aligned 1 1 reused 1 exhausted 1 again 1 huge 1\n")

    seed, values = 7, []
    for _ in range(16):
        seed = (seed * 1103515245 + 12345) & M32
        values.append((seed >> 16) % 1000 - 500)
    v = sorted(values)
    out.append(f"qsort: {v[0]} {v[3]} {v[7]} {v[8]} {v[12]} {v[15]} | bsearch 1 1\n")
    names = ["pear", "apple", "fig", "banana", "cherry", "date", "kiwi", "grape", "lemon", "mango"]
    out.append("names: " + " ".join(sorted(names)) + "\n")
    items = sorted((((i * 7) % 5), chr(ord("a") + i)) for i in range(12))   # stable: ties by original order
    out.append("stable:" + "".join(f" {k}{tag}" for k, tag in items) + "\n")
    err = " fprintf %s %d" % ("to stderr", 99)
    out.append(f"fputs to stdout, +-{err} ({len(err)}) getchar -1 EOF -1\n")
    out.append("done\n")
    return "".join(out)


def _program(name, output, exit_code=0, description=""):
    if isinstance(output, tuple):
        output, exit_code = output
    return Program(name, PROGRAM_DIR / f"{name}.c", output.encode(), exit_code, description)


PROGRAMS = (
    _program("hi", "hi!\n", 1 + 2 + 3 + 4, description="the compiled model's sample: console bytes, a digit sum"),
    _program("hello", _hello(), description="puts and printf conversions"),
    _program("fibonacci", _fibonacci(), description="32- and 64-bit Fibonacci, recursive fib"),
    _program("sieve", _sieve(), description="sieve of Eratosthenes; exit code = prime count & 0xff"),
    _program("quicksort", _quicksort(), description="recursive quicksort of 300 LCG values"),
    _program("crc32", _crc32(), description="table and bitwise CRC-32; exit code = CRC & 0xff"),
    _program("matmul", _matmul(), description="10x10 integer matrix products"),
    _program("strings", _strings(), description="runtime string/memory functions and own ones"),
    _program("recursion", _recursion(), description="Ackermann, Hanoi, mutual recursion, gcd"),
    _program("longlong", _longlong(), description="64-bit mul/div/rem/shifts (compiler runtime helpers)"),
    _program("muldiv", _muldiv(), description="M-extension edge cases via inline asm, Zba"),
    _program("tokenizer", _tokenizer(), description="table-driven DFA tokenizer"),
    _program("libc", _libc(), description="the small libc: stdio/stdlib/string/ctype/assert headers, printf"),
)

PROGRAMS_BY_NAME = {p.name: p for p in PROGRAMS}


def table_images(ram_size: int):
    """(program, its machine image linked for ``ram_size``) for the table, in order; the image is None
    for a program that does not fit that RAM (the linker says so)."""
    from ..elf import load_elf
    from ..toolchain import CompileError, compile_c

    for prog in PROGRAMS:
        try:
            yield prog, load_elf(compile_c(prog.path, ram_size=ram_size), ram_size=ram_size)
        except CompileError as exc:
            if "does not fit in RAM" not in str(exc):
                raise
            yield prog, None
