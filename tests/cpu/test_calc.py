"""The calc firmware (cpu/firmware/calc.c) and program input (cpu run --input): every answer equals
Python's integer arithmetic, the oracle; unicorn, the netlist simulator and the compiled model agree."""

import functools
import random

import pytest

from cpu import cli
from cpu.machine import Image, with_input
from cpu.tools import CALC, run_tool, tool_image
from cpu.unicorn_ref import run_unicorn

from cpu.model_engine import MODEL_RAM_SIZE

RAM = MODEL_RAM_SIZE  # the compiled model's RAM: the firmware must fit it
SMALL = 16384         # a small RAM, where calc's limits on input and operands are reached


def _num(rng, digits):
    return rng.randrange(10 ** (digits - 1), 10 ** digits) if digits > 1 else rng.randrange(10)


def expression(rng, depth=0, max_digits=60):
    """(text, value): a random expression and its value by Python's own operators (// % ** for / % ^),
    None where Python raises (division by zero)."""
    if depth >= 3 or rng.random() < 0.3:
        v = _num(rng, rng.randint(1, max_digits))
        return str(v), v
    op = rng.choice("+-*/%^" if depth < 2 else "+-*/%")
    (a, x), (b, y) = expression(rng, depth + 1, max_digits), expression(rng, depth + 1, max_digits)
    if op == "^":
        e = rng.randint(0, 12)
        b, y = str(e), e
        x = x if x is None or abs(x) < 10 ** 40 else None
        if x is None:
            return a, None
    neg = rng.random() < 0.25
    if x is None or y is None:
        value = None
    elif op in "/%" and y == 0:
        value = None
    else:
        value = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y, "/": lambda: x // y,
                 "%": lambda: x % y, "^": lambda: x ** y}[op]()
    text = f"({a} {op} {b})" if op != "^" else f"({a})^{b}"
    if neg:
        text, value = f"-{text}", None if value is None else -value
    return text, value


def _cases(n, seed, max_digits=60):
    rng, out = random.Random(seed), []
    while len(out) < n:
        text, value = expression(rng, max_digits=max_digits)
        if value is not None and len(str(value)) <= 1200:
            out.append((text, value))
    return out


def test_calc_equals_python_on_random_expressions():
    """300 random expressions of integers up to 60 digits, nested, signed, with every operator."""
    for text, value in _cases(300, 1):
        run = run_tool(CALC, text, "unicorn", ram_size=RAM)
        assert run.ok and run.output == str(value), (text, run.output)


@pytest.mark.parametrize("text, want", [
    ("-7/2", -4), ("7/-2", -4), ("-7/-2", 3), ("7/2", 3), ("-7%2", 1), ("7%-2", -1), ("-7%-2", -1),
    ("-2^2", -4), ("(-2)^3", -8), ("2^3^2", 512), ("0^0", 1), ("(-1)^12345", -1), ("--3", 3), ("+-+4", -4),
    ("007 + 0", 7), ("-0", 0), (" ( 1 + 2 ) *\t3 \n", 9), ("10^40 / 10^20 % 7", 10 ** 20 % 7),
    ("123456789012345678901234567890 * 987654321098765432109876543210",
     123456789012345678901234567890 * 987654321098765432109876543210),
])
def test_calc_semantics_are_pythons(text, want):
    run = run_tool(CALC, text, "unicorn", ram_size=RAM)
    assert (run.ok, run.output) == (True, str(want))


@pytest.mark.parametrize("text, error", [
    ("1/0", "error: division by zero"), ("5 % (3 - 3)", "error: division by zero"),
    ("2^-1", "error: negative exponent"), ("", "error: empty expression"), ("  \n", "error: empty expression"),
    ("1 +", "error: expected a number or '(' at the end"), ("(1", "error: expected ')' at the end"),
    ("1)", "error: unexpected character at position 2 (')')"), ("abc", "error: expected a number or '(' at position 1 ('a')"),
    ("2 ** 3", "error: expected a number or '(' at position 4 ('*')"), ("1.5", "error: unexpected character at position 2 ('.')"),
    ("2^4000", "error: result too large (more than 1200 digits)"), ("9" * 1201, "error: number too long"),
    ("(" * 2000 + "1" + ")" * 2000, "error: expression nested too deeply"),
])
def test_calc_errors(text, error):
    run = run_tool(CALC, text, "unicorn", ram_size=RAM)
    assert not run.ok and run.output.startswith(error), run.output
    assert run.halt.kind == "exit" and run.halt.exit_code == 1


def test_calc_limits():
    """1,200-digit results are exact; an input too long for RAM and a run past the step budget are
    errors of the call, not of the host."""
    big = 10 ** 1199 + 12345
    run = run_tool(CALC, f"{big} * 1 + 0", "unicorn", ram_size=SMALL)
    assert run.ok and run.output == str(big)
    run = run_tool(CALC, "1+" * 8000 + "1", "unicorn", ram_size=SMALL)
    assert not run.ok and run.output.startswith("error: the expression is too long for the machine")
    run = run_tool(CALC, "3^3000 % 7", "unicorn", ram_size=SMALL, max_steps=10_000)
    assert not run.ok and "did not finish within 10,000 instructions" in run.output


def _max_dividends():
    """Dividends of exactly MAX_DIGITS (1,200) digits: all nines, a power of ten and a random one."""
    rng = random.Random(12)
    return [10 ** 1200 - 1, 10 ** 1199, rng.randrange(10 ** 1199, 10 ** 1200)]


def test_division_of_the_longest_dividend():
    """`/` and `%` of a 1,197-1,200 digit dividend are exact: the limit is on the results, not on the
    division's scaled dividend (a limb longer than 1,200 digits where the scaling carries, which used to
    answer "result too large"). Small and large divisors of both signs, on 16 KiB."""
    run = run_tool(CALC, "10^1199 % 7", "unicorn", ram_size=SMALL)
    assert (run.ok, run.output) == (True, "5")
    run = run_tool(CALC, "10^1199 / 7", "unicorn", ram_size=SMALL)
    assert (run.ok, run.output) == (True, str(10 ** 1199 // 7))
    rng = random.Random(13)
    nines, ten, a = _max_dividends()
    pairs = [(nines, 1), (nines, 7), (nines, -_num(rng, 600)), (ten, -7), (ten, 9999), (ten, _num(rng, 900)),
             (a, 10 ** 4 + 1), (a, _num(rng, 40)), (-a, 7), (-a, -_num(rng, 40)), (10 ** 1196 + 3, 7)]
    for a, b in pairs:
        for op, want in (("/", a // b), ("%", a % b)):
            run = run_tool(CALC, f"{a} {op} ({b})", "unicorn", ram_size=SMALL)
            assert (run.ok, run.output) == (True, str(want)), (len(str(a)), op, b, run.output[:80])


def test_division_of_two_longest_operands():
    """A 1,200-digit dividend over a 1,200-digit divisor: exact with 64 KiB of RAM (unicorn's and the
    netlist's default); with 16 KiB the input, the operands and the division's buffers do
    not fit, and the answer says so (not "result too large")."""
    rng = random.Random(14)
    a, b = _max_dividends()[2], rng.randrange(10 ** 1199, 10 ** 1200)
    for text, want in ((f"{a} / {b}", a // b), (f"-{a} % {b}", -a % b), (f"{b} % -{a}", b % -a)):
        run = run_tool(CALC, text, "unicorn", ram_size=65536)
        assert (run.ok, run.output) == (True, str(want))
    run = run_tool(CALC, f"{a} % {b}", "unicorn", ram_size=SMALL)
    assert not run.ok and run.output.startswith("error: out of memory"), run.output


@pytest.mark.parametrize("text", [
    "10^1200 / 7", "10^1200 % 7", "-(10^1200) % 7", "10^600 * 10^600 % 7", "2^3987 / 2",
    "(" + "9" * 1200 + " + 1) / 10", "9" * 1200 + " * 10 / 10",
])
def test_too_large_results_in_a_division_are_refused(text):
    """A division of a value over 1,200 digits is still an error (10^1200 has 1,201 digits), with the
    same message."""
    run = run_tool(CALC, text, "unicorn", ram_size=RAM)
    assert (run.ok, run.output) == (False, "error: result too large (more than 1200 digits)")
    assert run.halt.kind == "exit" and run.halt.exit_code == 1


def test_forty_digit_product_cost():
    """The cost the tool's documentation quotes: instructions per product of two n-digit numbers."""
    rng = random.Random(3)
    costs = {}
    for digits in (10, 20, 40):
        a, b = _num(rng, digits), _num(rng, digits)
        run = run_tool(CALC, f"{a}*{b}", "unicorn", ram_size=RAM)
        assert run.output == str(a * b)
        costs[digits] = run.instructions
    assert costs[10] < costs[20] < costs[40] < 4000, costs


@pytest.mark.parametrize("n", [12, pytest.param(50, marks=pytest.mark.slow)])   # 50: ~45 s here
def test_calc_on_the_netlist_equals_unicorn(n):
    """``n`` expressions: the netlist simulator of the core gives unicorn's retirement records."""
    image = tool_image(CALC, RAM)
    for text, value in _cases(n, 2, max_digits=25):
        img = with_input(image, text.encode(), RAM)
        ref = run_unicorn(img, ram_size=RAM, max_steps=200_000, trace=True)
        ours = cli.ENGINES["netlist"](img, RAM, 200_000, True)
        assert ref.console == ours.console == f"{value}\n".encode()
        assert ours.records == ref.records and ours.halt == ref.halt


@functools.cache
def _long_run():
    """(image, unicorn's traced run) of 3^2000/3^1000."""
    img = with_input(tool_image(CALC, RAM), b"3^2000/3^1000", RAM)
    return img, run_unicorn(img, ram_size=RAM, max_steps=2_000_000, trace=True)


@pytest.mark.parametrize("engine", ["unicorn", "netlist",
                                    pytest.param("model-fast", marks=pytest.mark.xdist_group("cpu-model")),
                                    # stock transformers stopped while it feeds the prompt: ~50 s, slow
                                    pytest.param("model-stock", marks=[pytest.mark.xdist_group("cpu-model"),
                                                                       pytest.mark.slow])])
def test_time_limit_stops_the_engine(engine):
    """A run given a wall-clock limit (what a chat's tool call gets) stops in the middle: 3^2000/3^1000
    runs 1,007,988 instructions; stopped after 1 s, every engine has retired a prefix of unicorn's
    records and stops before the next instruction with a TIME_LIMIT halt. Stock transformers are
    stopped while they feed the prompt (15,700 tokens, ~230 s on one core here; in pieces, with a look at
    the clock between them): no instruction has run."""
    from cpu.machine import Halt
    from cpu.model_engine import run_model_batch
    from cpu.netlist_engine import run_netlist
    img, ref = _long_run()
    assert ref.console == f"{3 ** 1000}\n".encode() and ref.instructions == 1_007_988
    if engine == "unicorn":
        ours = run_unicorn(img, ram_size=RAM, max_steps=2_000_000, trace=True, time_limit=1.0)
    elif engine == "netlist":
        ours = run_netlist(img, ram_size=RAM, max_steps=2_000_000, trace=True, time_limit=1.0)
    else:
        (ours,) = run_model_batch([img], RAM, 2_000_000, True, executor=engine[6:], time_limit=1.0)
    n = ours.instructions
    assert ours.halt == Halt(Halt.TIME_LIMIT, ref.records[n].pc) and ours.records == ref.records[:n]
    assert (n == 0) if engine == "model-stock" else (0 < n < ref.instructions)
    # stopped at the first look at the clock after 1 s: a frame, or one 256-token piece of the stock
    # prompt (seconds; more on a loaded machine), far short of the whole run (minutes on every engine)
    assert 1.0 <= ours.seconds < 60 and ours.console == b""


def _echo(tmp_path):
    src = tmp_path / "echo.c"
    src.write_text("""#include <stdio.h>
#include <stdlib.h>
int main(void) {
    char line[8], *p = malloc(24);
    int c = getchar(), n = 0;
    if (c != EOF && ungetc(c, stdin) != c) return 100;
    while (fgets(line, sizeof line, stdin)) { for (char *q = line; *q; q++) { putchar(*q >= 'a' && *q <= 'z' ? *q - 32 : *q); n++; } }
    if (!feof(stdin) || getchar() != EOF) return 101;
    if (p < input_data() + input_size()) return 102;  /* the heap starts after the input */
    printf("|%d", n);
    return (int)(input_size() & 0x7f);
}
""")
    return src


@pytest.mark.parametrize("engine", ["unicorn", "netlist"])
def test_run_with_input(tmp_path, capsysbinary, engine, monkeypatch):
    src = _echo(tmp_path)
    data = b"hello, world\nsecond line, longer than the buffer\n\x01\xffend"
    (tmp_path / "in.bin").write_bytes(data)
    assert cli.main(["run", str(src), "--engine", engine, "--input", str(tmp_path / "in.bin")]) == len(data) & 0x7F
    want = bytes(b - 32 if 97 <= b <= 122 else b for b in data) + f"|{len(data)}".encode()
    assert capsysbinary.readouterr().out == want
    assert cli.main(["run", str(src), "--engine", engine]) == 0           # no input: length 0
    assert capsysbinary.readouterr().out == b"|0"

    class Stdin:
        buffer = __import__("io").BytesIO(b"from stdin")
    monkeypatch.setattr("sys.stdin", Stdin)
    assert cli.main(["run", str(src), "--engine", engine, "--input", "-"]) == 10
    assert capsysbinary.readouterr().out == b"FROM STDIN|10"


def test_bad_input(tmp_path, capsys):
    src = _echo(tmp_path)
    assert cli.main(["run", str(src), "--input", str(tmp_path / "missing")]) == 2
    assert "--input" in capsys.readouterr().err
    (tmp_path / "big").write_bytes(b"x" * 70_000)
    assert cli.main(["run", str(src), "--input", str(tmp_path / "big")]) == 2
    err = capsys.readouterr().err
    assert "is longer than" in err and "the room the program's RAM has" in err and "--ram-size" in err and "Traceback" not in err
    with pytest.raises(ValueError, match="no input area"):
        with_input(Image.from_words([0x00100073]), b"x", RAM)


def _on_model(n, seed, digits):
    """n expressions on the compiled CPU (fast exact executor): console, halt and every retirement
    record equal unicorn's."""
    from cpu.model_engine import run_model_batch
    image = tool_image(CALC, RAM)
    for text, value in _cases(n, seed, max_digits=digits):
        img = with_input(image, text.encode(), RAM)
        ref = run_unicorn(img, ram_size=RAM, trace=True)
        (ours,) = run_model_batch([img], RAM, 200_000, True, executor="fast")
        assert ours.console == ref.console == f"{value}\n".encode()
        assert ours.records == ref.records and ours.halt == ref.halt


@pytest.mark.slow          # ~75 s; the default suite runs calc on the model in the merged CPU's chat (test_chat.py)
@pytest.mark.xdist_group("cpu-model")       # the tests that need the CPU checkpoint run on one worker
def test_model_runs_calc_like_unicorn():
    """Three calls on the compiled CPU."""
    _on_model(3, 4, 12)


@pytest.mark.slow
def test_model_runs_fifty_calc_expressions_like_unicorn():
    """50 expressions up to 25 digits (8.4 minutes on this 2-core machine)."""
    _on_model(50, 2, 25)
