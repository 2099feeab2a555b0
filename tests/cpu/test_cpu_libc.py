"""The small libc (cpu/runtime/libc.c, the printf of runtime.c and printf_float.c, the standard headers
of cpu/runtime/include/) on the unicorn reference machine. Expected values come from Python (its %
operator, sorted(), int(), a model of strtol) or are written out by hand where C and Python differ."""

import re
import shutil

import pytest
from elftools.elf.elffile import ELFFile

from cpu import toolchain
from cpu.elf import load_elf
from cpu.machine import DEFAULT_RAM_SIZE, Halt
from cpu.programs import PROGRAMS_BY_NAME
from cpu.toolchain import compile_c, uses_floating_point
from cpu.unicorn_ref import run_unicorn

M32 = (1 << 32) - 1
M64 = (1 << 64) - 1


def run_c(tmp_path, source, name="prog", ram_size=DEFAULT_RAM_SIZE, max_steps=5_000_000, **kw):
    """Compile the C source (in tmp_path/name.c) and run it on unicorn: (result, source path)."""
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    elf = compile_c(src, cache_dir=tmp_path / "cache", ram_size=ram_size, **kw)
    return run_unicorn(load_elf(elf, ram_size=ram_size), ram_size=ram_size, max_steps=max_steps, trace=False), src


def lines_of(result):
    assert result.halt.kind == Halt.EXIT, result.halt.describe()
    return result.console.decode().splitlines()


# ---- the program of the table ----

def test_libc_program_on_unicorn():
    prog = PROGRAMS_BY_NAME["libc"]
    result = run_unicorn(load_elf(compile_c(prog.path)), trace=False)
    assert result.console.decode() == prog.expected_output.decode()
    assert result.halt == Halt(Halt.EXIT, result.halt.pc, exit_code=prog.expected_exit)
    assert result.instructions < 65_000     # ~60k: it also runs on the netlist simulator


def test_standard_headers_compile_and_work(tmp_path):
    source = r'''
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <iso646.h>
#include <limits.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdnoreturn.h>
#include <string.h>
#include <strings.h>
#include "runtime.h"

struct pair { char c; int v; };
static_assert(sizeof(int32_t) == 4, "ILP32");

static int say(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r;
}

static noreturn void leave(int code) { exit(code); }

int main(void)
{
    char buf[64];
    bool yes = true and not false;
    say(buf, sizeof buf, "%d %zu %d %" PRIu64 " %" PRId32 " %d", yes, offsetof(struct pair, v),
        (int)alignof(long long), UINT64_MAX, INT32_MIN, strcasecmp("HeLLo", "hello"));
    puts(buf);
    printf("%d %d %s %d\n", EXIT_SUCCESS, EXIT_FAILURE, NULL == (void *)0 ? "null" : "?", RAND_MAX);
    errno = 0;
    strtol("99999999999", NULL, 10);
    printf("%d %d %d\n", errno == ERANGE, isalpha('q') != 0, (int)SIZE_MAX == -1);
    fprintf(stderr, "to stderr %s\n", "too");
    leave(EXIT_FAILURE);
}
'''
    result, _ = run_c(tmp_path, source)
    assert result.console == (b"1 4 8 18446744073709551615 -2147483648 0\n0 1 null 32767\n1 1 1\n"
                              b"to stderr too\n")
    assert result.halt == Halt(Halt.EXIT, result.halt.pc, exit_code=1)


def test_runtime_h_programs_may_define_libc_names(tmp_path):
    # libc.c's functions are weak: a program (that includes only runtime.h) may define its own
    source = r'''
#include "runtime.h"
int isdigit(int c) { return c == 'x'; }
int rand(void) { return 7; }
static int abs(int x) { return x + 1000; }
char *strchr(const char *s, int c) { (void)c; return (char *)s + 1; }
int main(void)
{
    printf("%d %d %d %s\n", isdigit('x'), rand(), abs(-5), strchr("abc", 'c'));
    return 0;
}
'''
    result, _ = run_c(tmp_path, source)
    assert result.console == b"1 7 995 bc\n"


# ---- printf ----

def _python_expected(fmt, value):
    """What C's printf prints for fmt (one conversion, with C's length modifiers) and value, by Python's
    % operator: the value converted as the modifier says, the modifier dropped."""
    m = re.fullmatch(r"%([-+ #0]*)(\d*|\*)(\.\d*)?(hh|h|ll|l|j|z|t)?([diouxXcs])", fmt)
    flags, width, prec, length, conv = m.groups()
    bits = {"hh": 8, "h": 16, "ll": 64, "j": 64}.get(length, 32)
    if conv in "di":
        value = value & ((1 << bits) - 1)
        if value >> (bits - 1):
            value -= 1 << bits
    elif conv in "ouxX":
        value &= (1 << bits) - 1
        flags = flags.replace("+", "").replace(" ", "")    # C ignores them for unsigned conversions
    elif conv == "c":
        value &= 0xFF                                       # the int converted to unsigned char
    return "%" + flags + width + (prec or "") + conv, value


PRINTF_CASES = [
    # (format, C type of the argument, value)
    ("%d", "int", 0), ("%d", "int", -1), ("%d", "int", -(1 << 31)), ("%i", "int", (1 << 31) - 1),
    ("%5d", "int", 42), ("%-5d|", "int", 42), ("%05d", "int", -42), ("%+d", "int", 0), ("% d", "int", 17),
    ("%+5d", "int", -3), ("%-+6d|", "int", 9), ("% -6d|", "int", 9), ("%+05d", "int", 12), ("% 06d", "int", -12),
    ("%.3d", "int", 7), ("%.3d", "int", -7), ("%6.3d", "int", 42), ("%-6.3d|", "int", -42), ("%.1d", "int", 0),
    ("%.10d", "int", 123456), ("%1d", "int", 12345), ("%u", "unsigned", 0), ("%u", "unsigned", M32),
    ("%10u", "unsigned", 3000000000), ("%-12u|", "unsigned", 1), ("%012u", "unsigned", 77), ("%.4u", "unsigned", 5),
    ("%o", "unsigned", 0), ("%o", "unsigned", 8), ("%o", "unsigned", M32), ("%6o", "unsigned", 0o755),
    ("%-6o|", "unsigned", 0o17), ("%06o", "unsigned", 0o17), ("%.4o", "unsigned", 0o7),
    ("%x", "unsigned", 0), ("%x", "unsigned", 0xDEADBEEF), ("%X", "unsigned", 0xDEADBEEF), ("%8x", "unsigned", 0xAB),
    ("%-8x|", "unsigned", 0xAB), ("%08X", "unsigned", 0xAB), ("%.6x", "unsigned", 0xAB), ("%#x", "unsigned", 0xAB),
    ("%#X", "unsigned", 0xAB), ("%#10x", "unsigned", 0xAB), ("%#-10x|", "unsigned", 0xAB),
    ("%#010x", "unsigned", 0xAB), ("%#.6x", "unsigned", 0xAB), ("%+u", "unsigned", 5), ("% x", "unsigned", 255),
    ("%hd", "int", 70000), ("%hd", "int", -1), ("%hd", "int", 32768), ("%hu", "int", -1), ("%hx", "int", 0x12345),
    ("%hhd", "int", 255), ("%hhd", "int", 128), ("%hhu", "int", 300), ("%hhx", "int", -1), ("%hho", "int", 511),
    ("%ld", "long", -(1 << 31)), ("%lu", "unsigned long", M32), ("%lx", "unsigned long", 0x1234ABCD),
    ("%li", "long", 123), ("%zu", "size_t", 4000000000), ("%zd", "int", -5), ("%td", "ptrdiff_t", -100),
    ("%lld", "long long", 0), ("%lld", "long long", -(1 << 63)), ("%lld", "long long", (1 << 63) - 1),
    ("%lli", "long long", -1234567890123), ("%llu", "unsigned long long", M64), ("%llu", "unsigned long long", 1 << 32),
    ("%llx", "unsigned long long", M64), ("%llX", "unsigned long long", 0x123456789ABCDEF),
    ("%llo", "unsigned long long", M64), ("%25lld", "long long", -(1 << 62)), ("%-25llu|", "unsigned long long", 99),
    ("%025lld", "long long", -5), ("%+lld", "long long", 5000000000), ("%.20llu", "unsigned long long", 12345),
    ("%#llx", "unsigned long long", 1 << 40), ("%jd", "intmax_t", -(1 << 40)), ("%jx", "uintmax_t", M64),
    ("%c", "int", 65), ("%3c", "int", 122), ("%-3c|", "int", 48), ("%c", "int", 0x141),
    ("%s", "str", ""), ("%s", "str", "hello"), ("%8s", "str", "abc"), ("%-8s|", "str", "abc"),
    ("%.2s", "str", "abcdef"), ("%.0s", "str", "abc"), ("%.10s", "str", "abc"), ("%6.2s", "str", "abcdef"),
    ("%-6.4s|", "str", "abcdef"), ("%1s", "str", "toolong"),
]


def _c_arg(ctype, value):
    if ctype == "str":
        return '"' + value + '"'
    suffix = "LL" if "long long" in ctype or "max" in ctype else ""
    return f"({ctype})({value}{suffix})" if value >= 0 else f"({ctype})(-{-value - 1}{suffix} - 1)"


def test_printf_conversions_match_python(tmp_path):
    body = "".join(f'    printf("[{fmt}]\\n", {_c_arg(ctype, value)});\n' for fmt, ctype, value in PRINTF_CASES)
    source = ("#include <stdio.h>\n#include <stdint.h>\n#include <stddef.h>\nint main(void)\n{\n" + body
              + "    return 0;\n}\n")
    got = lines_of(run_c(tmp_path, source)[0])
    assert len(got) == len(PRINTF_CASES)
    for (fmt, ctype, value), line in zip(PRINTF_CASES, got):
        pyfmt, pyvalue = _python_expected(fmt.rstrip("|"), value)
        expected = "[" + (pyfmt % pyvalue) + ("|" if fmt.endswith("|") else "") + "]"
        assert line == expected, f"printf({fmt!r}, {value!r})"


def test_printf_where_c_differs_from_python(tmp_path):
    # (call arguments, what C prints) -- by hand: Python's % does these differently
    cases = [
        ('"[%.0d]", 0', "[]"), ('"[%+.0d]", 0', "[+]"), ('"[%5.0d]", 0', "[     ]"), ('"[%.0x]", 0', "[]"),
        ('"[%#o]", 8', "[010]"), ('"[%#o]", 0', "[0]"), ('"[%#.0o]", 0', "[0]"), ('"[%#.3o]", 8', "[010]"),
        ('"[%#x]", 0', "[0]"), ('"[%#X]", 0', "[0]"),
        ('"[%08.3d]", 42', "[     042]"), ('"[%-08d]", 42', "[42      ]"), ('"[%05s]", "ab"', "[   ab]"),
        ('"[%p]", (void *)0x1234', "[0x1234]"), ('"[%p]", (void *)0', "[0x0]"),
        ('"[%10p]", (void *)0xab', "[      0xab]"),
        ('"[%-8p]", (void *)0xab', "[0xab    ]"), ('"[%*d]", -4, 7', "[7   ]"), ('"[%.*d]", -1, 7', "[7]"),
        ('"[%.*s]", 3, "abcdef"', "[abc]"), ('"[%s]", (char *)0', "[(null)]"), ('"[%%]"', "[%]"),
        ('"[%5%]"', "[%]"), ('"[%y]"', "[%y]"), ('"[%f]", 1.5', "[%f]"),   # no printf_float: as is
    ]
    body = "".join(f"    printf({args});\n    putchar('\\n');\n" for args, _ in cases)
    source = ("#include <stdio.h>\nint main(void)\n{\n    int n1 = 0, n2 = 0;\n" + body +
              '    int r = printf("ab%ncd%5d%n|", &n1, 7, &n2);\n'
              '    printf(" %d %d %d\\n", r, n1, n2);\n    return 0;\n}\n')
    got = lines_of(run_c(tmp_path, source, printf_float=False)[0])
    assert got[:-1] == [want for _, want in cases]
    assert got[-1] == "abcd    7| 10 2 9"


FLOAT_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, 0.125, 0.375, 3.14159, 2.675, 1 / 3, 2 / 3, 0.1, 1e-5, 123456.789,
                1e15, 1e22, 1e300, 5e-324, 1.7976931348623157e308, 9.995, 99999.5, 0.00009999, 4503599627370497.0,
                -123.456, 6.02214076e23, 1.602176634e-19]
FLOAT_FORMATS = ["%f", "%.0f", "%.1f", "%.3f", "%e", "%.0e", "%.2e", "%E", "%g", "%.1g", "%.10g", "%.17g", "%G",
                 "%#g", "%#.0f", "%+.2f", "% .3e", "%12.4f", "%-12.4e|", "%012.3f", "%+010.2e"]


def test_printf_doubles_match_python(tmp_path):
    cases = [(f, v) for v in FLOAT_VALUES for f in FLOAT_FORMATS]
    # in groups: one printf per value keeps the program small
    body = ""
    for v in FLOAT_VALUES:
        fmts = " ".join(f"[{f}]" for f in FLOAT_FORMATS)
        args = ", ".join([repr(v)] * len(FLOAT_FORMATS))
        body += f'    printf("{fmts}\\n", {args});\n'
    source = ("#include <stdio.h>\nint main(void)\n{\n" + body +
              '    printf("[%f] [%e] [%-6.1f] [%05.1f] [%g]\\n", 1.0 / 0.0, -1.0 / 0.0, 1.0 / 0.0, 0.0 / 0.0, '
              '-(0.0 / 0.0) * 0.0);\n    return 0;\n}\n')
    assert uses_floating_point(source.encode())
    got = lines_of(run_c(tmp_path, source, ram_size=1 << 17, max_steps=50_000_000)[0])
    for v, line in zip(FLOAT_VALUES, got):
        expected = " ".join("[" + (f.rstrip("|") % v) + ("|" if f.endswith("|") else "") + "]"
                            for f in FLOAT_FORMATS)
        assert line == expected, repr(v)
    # inf and nan: never zero-padded (C); Python would pad inf with zeros
    assert got[-1] in ("[inf] [-inf] [inf   ] [  nan] [nan]", "[inf] [-inf] [inf   ] [ -nan] [nan]",
                       "[inf] [-inf] [inf   ] [  nan] [-nan]", "[inf] [-inf] [inf   ] [ -nan] [-nan]")
    assert len(cases) == len(FLOAT_VALUES) * len(FLOAT_FORMATS)


def test_printf_float_is_linked_only_when_used(tmp_path):
    assert uses_floating_point(b"double x;") and uses_floating_point(b'printf("%.2f", y)')
    assert uses_floating_point(b'"%-10.3Lf"') and uses_floating_point(b"float")
    assert not uses_floating_point(b'int floating; printf("%d %s %5x %% %lu")')
    hello = PROGRAMS_BY_NAME["hello"]

    def symbols(elf):   # the defined ones
        with open(elf, "rb") as f:
            return {s.name for s in ELFFile(f).get_section_by_name(".symtab").iter_symbols()
                    if s["st_shndx"] != "SHN_UNDEF"}
    assert "__rt_format_double" not in symbols(compile_c(hello.path))
    assert "__rt_format_double" in symbols(compile_c(hello.path, printf_float=True))
    assert "__rt_format_double" in symbols(compile_c(PROGRAMS_BY_NAME["libc"].path))


def test_printf_return_value_and_n(tmp_path):
    source = r'''
#include <stdio.h>
int main(void)
{
    int a = printf("%s|%5d|%-3c|%x\n", "hello", 42, 'z', 255);
    int b = printf("%lld %%\n", -1234567890123LL);
    int c = printf("");
    printf("%d %d %d\n", a, b, c);
    return 0;
}
'''
    got = lines_of(run_c(tmp_path, source)[0])
    first = "%s|%5d|%-3c|%x\n" % ("hello", 42, "z", 255)
    second = "%d %%\n" % -1234567890123
    assert got == [first[:-1], second[:-1], f"{len(first)} {len(second)} 0"]


def test_snprintf_truncation_and_return_value(tmp_path):
    source = r'''
#include <stdio.h>
#include <stdarg.h>
#include <string.h>
static int wrap(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r;
}
int main(void)
{
    char buf[20];
    for (int size = 0; size <= 12; size++) {
        memset(buf, '#', sizeof buf);
        int r = snprintf(buf, size, "%s=%d", "key", 12345);
        int untouched = 0;
        for (int i = size; i < 20; i++)
            untouched += buf[i] == '#';
        printf("%d %d %d [%s]\n", size, r, untouched, size ? buf : "-");
    }
    printf("%d\n", snprintf(NULL, 0, "%d-%s", -77, "xyz"));
    memset(buf, '#', sizeof buf);
    int r = wrap(buf, 6, "%05d%c", 42, '!');
    printf("%d [%s] %c\n", r, buf, buf[6]);
    r = sprintf(buf, "%-4s|%4s|", "ab", "cd");
    printf("%d [%s] %d\n", r, buf, (int)strlen(buf));
    return 0;
}
'''
    got = lines_of(run_c(tmp_path, source)[0])
    full = "key=12345"
    for size in range(13):
        stored = full[:max(size - 1, 0)]
        assert got[size] == f"{size} {len(full)} {20 - size} [{stored if size else '-'}]"
    assert got[13] == str(len("-77-xyz"))
    assert got[14] == "6 [00042] #"
    assert got[15] == "10 [ab  |  cd|] 10"


# ---- assert ----

def test_assert_failure_message_and_exit_code(tmp_path):
    source = """#include <assert.h>
#include <stdio.h>
int main(void)
{
    int x = 1;
    printf("before\\n");
    assert(x == 1);
    assert(x + 1 == 3 && "x is one");
    printf("after\\n");
    return 0;
}
"""
    result, src = run_c(tmp_path, source, name="asserting")
    assert result.halt == Halt(Halt.EXIT, result.halt.pc, exit_code=134)
    assert result.console.decode() == f'before\nassertion failed: x + 1 == 3 && "x is one" ({src}:8)\n'


def test_assert_ndebug_and_abort(tmp_path):
    source = """#define NDEBUG
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
static int off(void) { assert(0); return 5; }   /* NDEBUG: nothing */
#undef NDEBUG
#include <assert.h>
int main(void)
{
    printf("%d\\n", off());
    assert(off() == 6);
    return 0;
}
"""
    result, src = run_c(tmp_path, source, name="ndebug")
    assert result.console.decode() == f"5\nassertion failed: off() == 6 ({src}:11)\n"
    assert result.halt.exit_code == 134
    result, _ = run_c(tmp_path, '#include <stdlib.h>\n#include <stdio.h>\n'
                                'int main(void) { puts("x"); abort(); }\n', name="aborting")
    assert result.console == b"x\n" and result.halt == Halt(Halt.EXIT, result.halt.pc, exit_code=134)


# ---- malloc ----

MALLOC_SOURCE = r'''
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
extern char __heap_start[], __heap_end[];
static char *blocks[200];
int main(void)
{
    int n = 0;
    while (n < 200 && (blocks[n] = malloc(1000)) != NULL) {
        memset(blocks[n], n, 1000);
        n++;
    }
    int intact = 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 1000; j += 97)
            intact &= blocks[i][j] == (char)i;
    printf("%d %d %u %u %u %u\n", n, intact, (unsigned)(uintptr_t)blocks[0], (unsigned)(uintptr_t)blocks[n - 1],
           (unsigned)(uintptr_t)__heap_start, (unsigned)(uintptr_t)__heap_end);
    printf("%d %d %d\n", malloc(1000) == NULL, calloc(0x10000, 0x10001) == NULL, malloc(0xfffffff0u) == NULL);
    /* free every other block, then all: the free list merges them back into one heap */
    for (int i = 0; i < n; i += 2)
        free(blocks[i]);
    char *again = malloc(500);
    printf("%d\n", again == blocks[0]);
    free(again);
    for (int i = 1; i < n; i += 2)
        free(blocks[i]);
    char *all = malloc((size_t)(__heap_end - __heap_start) - 8);
    printf("%d %d\n", all == blocks[0], malloc(1) == NULL);
    free(all);
    /* realloc keeps the contents when it moves the block */
    char *a = malloc(16), *b = malloc(16);
    strcpy(a, "realloc me");
    char *a2 = realloc(a, 3000);
    printf("%d %s %d %d\n", a2 != a, a2, realloc(NULL, 8) != NULL, realloc(b, 0) == NULL);
    int *z = calloc(100, sizeof(int));
    int sum = 0;
    for (int i = 0; i < 100; i++)
        sum += z[i];
    printf("%d %d\n", sum, ((uintptr_t)z & 7) == 0);
    return 0;
}
'''


@pytest.mark.parametrize("ram_size", [DEFAULT_RAM_SIZE, 16384])
def test_malloc_until_exhausted(tmp_path, ram_size):
    got = lines_of(run_c(tmp_path, MALLOC_SOURCE, ram_size=ram_size)[0])
    n, intact, first, last, heap_start, heap_end = map(int, got[0].split())
    reserve = max(0x400, ram_size // 8)                 # link.ld: the stack's share below the top
    assert heap_end == ram_size - reserve and heap_start % 8 == 0
    block = 1008                                        # 1000 bytes + the 8-byte header, 8-byte multiple
    assert n == (heap_end - heap_start) // block > 0 and intact == 1
    assert first == heap_start + 8 and last == heap_start + 8 + (n - 1) * block
    assert last + 1000 <= heap_end
    assert got[1:] == ["1 1 1", "1", "1 1", "1 realloc me 1 1", "0 1"]


def test_malloc_with_no_heap_left(tmp_path):
    # a program whose .bss fills the RAM up to the stack's share: malloc returns NULL at once
    source = r'''
#include <stdio.h>
#include <stdlib.h>
static volatile char big[56 * 1024];   /* past where the heap would end (56 KiB of 64) */
int main(void)
{
    big[0] = 1;
    printf("%d %d\n", malloc(16) == NULL, calloc(1, 1) == NULL);
    return big[0];
}
'''
    result, _ = run_c(tmp_path, source)
    assert result.console == b"1 1\n" and result.halt.exit_code == 1


# ---- the rest of stdlib and string ----

def _strto(s, base, bits, signed):
    """A model of C's strtol family: (value as printed, characters used, ERANGE?)."""
    i, n = 0, len(s)
    while i < n and s[i] in " \t\n\v\f\r":
        i += 1
    neg = False
    if i < n and s[i] in "+-":
        neg = s[i] == "-"
        i += 1

    def digit(c):
        return int(c, 36) if c.isascii() and c.isalnum() else 99
    if base in (0, 16) and s[i:i + 2].lower() == "0x" and i + 2 < n and digit(s[i + 2]) < 16:
        i, base = i + 2, 16
    elif base in (0, 2) and s[i:i + 2].lower() == "0b" and i + 2 < n and digit(s[i + 2]) < 2:
        i, base = i + 2, 2
    elif base == 0:
        base = 8 if s[i:i + 1] == "0" else 10
    start, acc = i, 0
    while i < n and digit(s[i]) < base:
        acc = acc * base + digit(s[i])
        i += 1
    used = i if i > start else 0
    if signed:
        limit = (1 << (bits - 1)) if neg else (1 << (bits - 1)) - 1
        if acc > limit:
            return (-limit if neg else limit), used, True
        return (-acc if neg else acc), used, False
    if acc > (1 << bits) - 1:
        return (1 << bits) - 1, used, True
    return (-acc if neg else acc) & ((1 << bits) - 1), used, False


STRTO_INPUTS = [
    ("0", 10), ("123", 10), ("-123", 10), ("+7", 10), ("  42", 0), ("\t\n-0x1A", 0), ("0x", 16), ("0X1f", 16),
    ("0x1f", 0), ("0b101", 0), ("0b101", 2), ("0b2", 0), ("0755", 0), ("08", 0), ("0755", 10), ("z", 36),
    ("Zz", 36), ("12abc", 16), ("12abc", 10), ("777", 8), ("101012", 2), ("2147483647", 10), ("2147483648", 10),
    ("-2147483648", 10), ("-2147483649", 10), ("4294967295", 10), ("4294967296", 10), ("-4294967295", 10),
    ("9223372036854775807", 10), ("9223372036854775808", 10), ("-9223372036854775808", 10),
    ("-9223372036854775809", 0), ("18446744073709551615", 10), ("18446744073709551616", 10),
    ("0xffffffffffffffff", 0), ("99999999999999999999999", 10), ("", 10), ("   ", 10), ("-", 10), ("+x", 16),
    ("junk", 0), ("  -0", 0),
]


def test_strtol_family_against_a_model(tmp_path):
    calls = [("strtol", "long", "%ld", 32, True), ("strtoul", "unsigned long", "%lu", 32, False),
             ("strtoll", "long long", "%lld", 64, True), ("strtoull", "unsigned long long", "%llu", 64, False)]
    body = "    const char *in;\n    char *end;\n"
    for s, base in STRTO_INPUTS:
        lit = s.replace("\t", "\\t").replace("\n", "\\n")
        body += f'    in = "{lit}";\n'
        for fn, ctype, fmt, _, _ in calls:
            body += (f'    {{\n        errno = 0;\n        {ctype} v = {fn}(in, &end, {base});\n'
                     f'        printf("{fmt} %d %d ", v, (int)(end - in), errno == ERANGE);\n    }}\n')
        body += '    putchar(\'\\n\');\n'
    source = ("#include <stdio.h>\n#include <stdlib.h>\n#include <errno.h>\nint main(void)\n{\n" + body
              + "    return 0;\n}\n")
    got = lines_of(run_c(tmp_path, source)[0])
    for (s, base), line in zip(STRTO_INPUTS, got):
        expected = ""
        for _, _, _, bits, signed in calls:
            value, used, erange = _strto(s, base, bits, signed)
            expected += f"{value} {used} {int(erange)} "
        assert line == expected, (s, base)
    assert len(got) == len(STRTO_INPUTS)


def test_atoi_abs_div_rand(tmp_path):
    source = r'''
#include <stdio.h>
#include <stdlib.h>
int main(void)
{
    printf("%d %d %d %ld %lld\n", atoi("  -17x"), atoi("abc"), atoi("+0042"), atol("-2147483648"),
           atoll("123456789012"));
    div_t d = div(17, -5);
    ldiv_t l = ldiv(-17L, 5L);
    lldiv_t ll = lldiv(-5000000000LL, 3LL);
    printf("%d %ld %lld %d %d %ld %ld %lld %lld\n", abs(-2147483647), labs(-5L), llabs(-5000000000LL), d.quot, d.rem,
           l.quot, l.rem, ll.quot, ll.rem);
    for (int i = 0; i < 8; i++)
        printf("%d ", rand());
    srand(12345);
    for (int i = 0; i < 8; i++)
        printf("%d ", rand());
    srand(1);
    printf("%d\n", rand());
    return 0;
}
'''
    got = lines_of(run_c(tmp_path, source)[0])
    assert got[0] == "-17 0 42 -2147483648 123456789012"
    assert got[1] == f"2147483647 5 5000000000 -3 2 -3 -2 {-(5000000000 // 3)} {-(5000000000 % 3)}"

    def lcg(seed, n):
        out = []
        for _ in range(n):
            seed = (seed * 1103515245 + 12345) & M32
            out.append((seed // 65536) % 32768)
        return out
    assert got[2].split() == [str(v) for v in lcg(1, 8) + lcg(12345, 8) + lcg(1, 1)]


def test_qsort_bsearch(tmp_path):
    source = r'''
#include <stdio.h>
#include <stdlib.h>
struct rec { unsigned char key, id, pad; };   /* 3 bytes: copied byte by byte */
static int by_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}
static int by_key(const void *a, const void *b) { return ((const struct rec *)a)->key - ((const struct rec *)b)->key; }
static int v[300];
static struct rec r[200];
static void *hog[64];
int main(void)
{
    unsigned s = 99;
    for (int i = 0; i < 300; i++) {
        s = s * 1103515245u + 12345u;
        v[i] = (int)(s >> 8) % 2000 - 1000;
    }
    qsort(v, 300, sizeof v[0], by_int);            /* the merge buffer comes from malloc */
    int ok = 1;
    for (int i = 1; i < 300; i++)
        ok &= v[i - 1] <= v[i];
    int found = 0;
    for (int i = 0; i < 300; i++)
        found += bsearch(&v[i], v, 300, sizeof v[0], by_int) != NULL;
    int absent = 1000;
    printf("%d %d %d %d %d %d\n", ok, found, bsearch(&absent, v, 300, sizeof v[0], by_int) == NULL, v[0], v[150],
           v[299]);
    for (int i = 0; i < 200; i++) {
        r[i].key = (unsigned char)((i * 37) % 7);
        r[i].id = (unsigned char)i;
    }
    int n = 0;                                      /* no heap left: qsort falls back to insertion sort */
    while (n < 64 && (hog[n] = malloc(1024)) != NULL)
        n++;
    while (malloc(64) != NULL)
        ;
    qsort(r, 200, sizeof r[0], by_key);
    for (int i = 0; i < 200; i++)
        printf("%d.%d ", r[i].key, r[i].id);
    qsort(v, 0, sizeof v[0], by_int);
    qsort(v, 1, sizeof v[0], by_int);
    printf("\n%d\n", bsearch(&absent, v, 0, sizeof v[0], by_int) == NULL);
    return 0;
}
'''
    got = lines_of(run_c(tmp_path, source)[0])
    s, values = 99, []
    for _ in range(300):
        s = (s * 1103515245 + 12345) & M32
        x = s >> 8
        values.append(x % 2000 - 1000)       # x < 2^24: C's % of a non-negative int
    values.sort()
    assert got[0] == f"1 300 1 {values[0]} {values[150]} {values[299]}"
    recs = sorted((((i * 37) % 7), i) for i in range(200))          # stable: ties keep the input order
    assert got[1].split() == [f"{k}.{i}" for k, i in recs]
    assert got[2] == "1"


def test_string_functions(tmp_path):
    source = r'''
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>
int main(void)
{
    char buf[32];
    printf("%d %d %d %d\n", strncmp("abc", "abd", 2), strncmp("abc", "abd", 3) < 0, strncmp("", "", 5),
           strncmp("a\xff", "a\x01", 2) > 0);
    memset(buf, '*', sizeof buf);
    strncpy(buf, "hello", 3);
    printf("%.5s|", buf);
    strncpy(buf, "hi", 5);
    printf("%s %d %d %d %c\n", buf, buf[2], buf[3], buf[4], buf[5]);
    strcpy(buf, "ab");
    strcat(buf, "cd");
    strncat(buf, "efgh", 2);
    strncat(buf, "", 3);
    printf("%s %s %s\n", buf, strchr(buf, '\0') == buf + 6 ? "end" : "?", strrchr("abcabc", 'b'));
    const char *s = "mississippi";
    printf("%s %s %s %d %d\n", strchr(s, 's'), strrchr(s, 's'), strstr(s, "ssip"), strstr(s, "ssix") == NULL,
           strrchr(s, 'z') == NULL);
    printf("%d %d %d %d\n", (int)strspn(s, "mis"), (int)strcspn(s, "p"), (int)strspn(s, ""), (int)strcspn(s, ""));
    printf("%s %d %d\n", strpbrk(s, "xp"), strpbrk(s, "xyz") == NULL, (int)((char *)memchr(s, 'p', 11) - s));
    char text[] = ";;a;bb;;ccc;";
    char *save, *t = strtok_r(text, ";", &save);
    while (t) {
        printf("<%s>", t);
        t = strtok_r(NULL, ";", &save);
    }
    char *d = strndup("abcdef", 3);
    printf(" %s %d %d %d\n", d, (int)strnlen("abc", 10), (int)strnlen("abc", 2), strcasecmp("ABC", "abd") < 0);
    free(d);
    return 0;
}
'''
    got = lines_of(run_c(tmp_path, source)[0])
    s = "mississippi"
    spn = len(s) - len(s.lstrip("mis"))
    cspn = s.index("p")
    tokens = "".join(f"<{tok}>" for tok in ";;a;bb;;ccc;".split(";") if tok)
    assert got == ["0 1 0 1", "hel**|hi 0 0 0 *", "abcdef end " + "abcabc"["abcabc".rindex("b"):],
                   f"{s[s.index('s'):]} {s[s.rindex('s'):]} {s[s.index('ssip'):]} 1 1",
                   f"{spn} {cspn} 0 {len(s)}", f"{s[s.index('p'):]} 1 {s.index('p')}", f"{tokens} abc 3 2 1"]


def test_ctype_against_python(tmp_path):
    import string
    names = ["isalnum", "isalpha", "isblank", "iscntrl", "isdigit", "isgraph", "islower", "isprint", "ispunct",
             "isspace", "isupper", "isxdigit"]
    body = "".join(f'    for (int c = -1; c < 256; c++) putchar({n}(c) ? \'1\' : \'0\');\n    putchar(\'\\n\');\n'
                   for n in names)
    body += "    for (int c = -1; c < 256; c++) printf(\"%d,%d \", toupper(c), tolower(c));\n"
    source = "#include <stdio.h>\n#include <ctype.h>\nint main(void)\n{\n" + body + "    return 0;\n}\n"
    got = lines_of(run_c(tmp_path, source)[0])
    tests = {
        "isalnum": lambda c: c in string.ascii_letters + string.digits, "isalpha": lambda c: c in string.ascii_letters,
        "isblank": lambda c: c in " \t", "iscntrl": lambda c: ord(c) < 32 or ord(c) == 127,
        "isdigit": lambda c: c in string.digits, "isgraph": lambda c: 33 <= ord(c) <= 126,
        "islower": lambda c: c in string.ascii_lowercase, "isprint": lambda c: 32 <= ord(c) <= 126,
        "ispunct": lambda c: c in string.punctuation, "isspace": lambda c: c in " \t\n\v\f\r",
        "isupper": lambda c: c in string.ascii_uppercase, "isxdigit": lambda c: c in string.hexdigits,
    }
    for name, line in zip(names, got):
        expected = "0" + "".join("1" if tests[name](chr(c)) else "0" for c in range(256))   # EOF first
        assert line == expected, name
    pairs = got[len(names)].split()
    expected = ["-1,-1"] + [f"{ord(chr(c).upper()) if c < 128 else c},{ord(chr(c).lower()) if c < 128 else c}"
                            for c in range(256)]
    assert pairs == expected


def test_stdio_streams(tmp_path):
    source = r'''
#include <stdio.h>
#include <errno.h>
int main(void)
{
    char line[8] = "unset";
    int a = fputs("one ", stdout), b = fputc('2', stderr), c = putc(' ', stdout);
    int d = fprintf(stderr, "%s-%d", "three", 3);
    size_t e = fwrite("four!", 1, 4, stdout);
    printf("\n%d %d %d %d %u %d %d\n", a >= 0, b, c, d, (unsigned)e, fflush(stdout), fputc('x', stdin));
    printf("%d %d %d %d %d %u\n", getchar(), getc(stdin), fgetc(stdin), fgets(line, 8, stdin) == NULL, EOF,
           (unsigned)fread(line, 1, 8, stdin));
    errno = ERANGE;
    perror("oops");
    return 0;
}
'''
    got = lines_of(run_c(tmp_path, source)[0])
    assert got == ["one 2 three-3four", "1 50 32 7 4 0 -1", "-1 -1 -1 1 -1 0", "oops: Numerical result out of range"]


# ---- the toolchain side ----

def test_runtime_files_cover_the_runtime_directory():
    assert sorted(toolchain.RUNTIME_FILES) == toolchain.runtime_files()
    flags = toolchain.compile_command("zig")[1]
    assert str(toolchain.INCLUDE_DIR) in flags and flags[flags.index(str(toolchain.INCLUDE_DIR)) - 1] == "-I"
    for compiler in ("gcc", "clang"):
        assert str(toolchain.INCLUDE_DIR) in toolchain.compile_command(compiler)[1]
    assert "libc.c" in toolchain.compile_command("zig")[2]
    assert "printf_float.c" in toolchain.compile_command("zig", printf_float=True)[2]


def test_cache_key_covers_runtime_headers(tmp_path, monkeypatch):
    runtime = tmp_path / "runtime"
    shutil.copytree(toolchain.RUNTIME_DIR, runtime)
    monkeypatch.setattr(toolchain, "RUNTIME_DIR", runtime)
    monkeypatch.setattr(toolchain, "INCLUDE_DIR", runtime / "include")
    src = tmp_path / "uses_stdio.c"
    src.write_text('#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n')
    first = compile_c(src, cache_dir=tmp_path / "cache")
    assert compile_c(src, cache_dir=tmp_path / "cache") == first
    header = runtime / "include" / "stdio.h"
    header.write_text(header.read_text() + "/* changed */\n")
    second = compile_c(src, cache_dir=tmp_path / "cache")
    assert second != first
    (runtime / "include" / "new.h").write_text("/* a new file is covered too */\n")
    assert compile_c(src, cache_dir=tmp_path / "cache") not in (first, second)
