"""<math.h> and <setjmp.h> of the runtime (cpu/runtime/libm/, linked from an archive) on the unicorn
reference machine. The oracle is mpmath at 300 bits: the exact value of each call, from which the
error of the machine's result is measured in ulps of the exact value; functions C defines exactly
(floor, fmod, sqrt, fma, ...) must match the correctly rounded value bit for bit. Special values
(signed zeros, infinities, NaN, domain errors) are written out by hand from C's Annex F."""

import math
import random
import struct

import mpmath
import pytest

from cpu.elf import load_elf
from cpu.machine import Halt
from cpu.toolchain import compile_c, compiler_available
from cpu.unicorn_ref import run_unicorn

mp = mpmath.mp
mp.prec = 300
INF, NAN = math.inf, math.nan


def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def double(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def run_calls(tmp_path, calls, name="libm", max_steps=60_000_000, compiler=None, ram_size=1 << 18):
    """Run ``calls`` ([(function, args)], args doubles; int-returning and pointer-taking functions are
    wrapped below) in one program; returns the results as doubles, in order."""
    by_fn = {}
    for fn, args in calls:
        by_fn.setdefault((fn, len(args)), []).append(args)
    lines = ["#include <stdio.h>", "#include <stdint.h>", "#include <math.h>",
             "static double d(uint64_t b) { union { uint64_t i; double f; } u = {b}; return u.f; }",
             "static void out(double x) { union { double f; uint64_t i; } u = {x}; "
             "printf(\"%016llx\\n\", (unsigned long long)u.i); }",
             "static double w_frexp(double x) { int e; double m = frexp(x, &e); out((double)e); return m; }",
             "static double w_modf(double x) { double i; double f = modf(x, &i); out(i); return f; }",
             "static double w_ilogb(double x) { return (double)ilogb(x); }",
             "static double w_ldexp(double x, double n) { return ldexp(x, (int)n); }",
             "static double w_remquo(double x, double y) { int q; double r = remquo(x, y, &q); "
             "int a = q < 0 ? -q : q; out((double)(a & 7) * (q < 0 ? -1 : 1)); return r; }",
             "int main(void) {"]
    order = []
    for k, ((fn, arity), arglists) in enumerate(sorted(by_fn.items())):
        flat = ", ".join(f"0x{bits(a):016x}ULL" for args in arglists for a in args)
        lines.append(f"  static const uint64_t in{k}[] = {{{flat}}};")
        argv = ", ".join(f"d(in{k}[i * {arity} + {j}])" for j in range(arity))
        lines.append(f"  for (int i = 0; i < {len(arglists)}; i++) out({fn}({argv}));")
        order += [(fn, args) for args in arglists]
    lines += ["  return 0;", "}"]
    src = tmp_path / f"{name}.c"
    src.write_text("\n".join(lines) + "\n")
    elf = compile_c(src, cache_dir=tmp_path / "cache", compiler=compiler, ram_size=ram_size)
    result = run_unicorn(load_elf(elf, ram_size=ram_size), ram_size=ram_size, max_steps=max_steps, trace=False)
    assert result.halt.kind == Halt.EXIT and result.halt.exit_code == 0, result.halt.describe()
    words = [double(int(w, 16)) for w in result.console.decode().split()]
    values, pos = {}, 0
    for fn, args in order:
        extra = fn in ("w_frexp", "w_modf", "w_remquo")
        values.setdefault((fn, args), []).append(tuple(words[pos:pos + 1 + extra]) if extra else words[pos])
        pos += 1 + extra
    assert pos == len(words)
    return [values[(fn, args)].pop(0) for fn, args in calls]


def ulp_error(result: float, exact) -> float:
    """|result - exact| in ulps of the exact value (ulps of the subnormal spacing below 2^-1022)."""
    exact = mp.mpf(exact)
    if exact == 0:
        return 0.0 if result == 0 else math.inf
    if math.isinf(result) or math.isnan(result):
        return math.inf
    e = max(int(mpmath.floor(mpmath.log(abs(exact), 2))), -1022)
    err = abs(mp.mpf(result) - exact) / mpmath.ldexp(1, e - 52)
    return float(err) if err < 2 ** 60 else math.inf


def same(a: float, b: float) -> bool:
    """Equal as C would print them: both NaN, or the same bits (signed zeros differ)."""
    return (math.isnan(a) and math.isnan(b)) or bits(a) == bits(b)


def rounded(exact) -> float:
    """The correctly rounded double of an mpmath value (subnormals included)."""
    exact = mp.mpf(exact)
    if exact == 0:
        return 0.0
    e = max(int(mpmath.floor(mpmath.log(abs(exact), 2))), -1022)
    q = exact / mpmath.ldexp(1, e - 52)
    n = int(mpmath.nint(q))           # mpmath's nint: ties to even
    try:
        return math.ldexp(n, e - 52)
    except OverflowError:
        return math.copysign(INF, n)


def spread(rng, n, lo_exp=-1074, hi_exp=1023, signs=(1, -1)):
    """``n`` doubles with exponents spread over [lo_exp, hi_exp] and random mantissas."""
    out = []
    for _ in range(n):
        e = rng.randint(lo_exp, hi_exp)
        out.append(rng.choice(signs) * math.ldexp(1 + rng.random(), e) if e >= -1022
                   else rng.choice(signs) * math.ldexp(rng.randint(1, 2 ** 52), -1074))
    return out


# ---- exact and correctly rounded functions: bit for bit ----

def test_rounding_and_exponent_functions_are_exact(tmp_path):
    rng = random.Random(1)
    xs = (spread(rng, 150, -20, 60) + [rng.uniform(-8, 8) for _ in range(150)]
          + [k + 0.5 for k in range(-6, 6)] + [2.0 ** 52 + 1, -(2.0 ** 52) - 1, 2.0 ** 53, 4503599627370495.5,
                                                 0.49999999999999994, -0.49999999999999994, 1e-310, -1e-310,
                                                 5e-324, 0.0, -0.0, INF, -INF, 1e308, 2.5, -2.5, 3.5])
    fns = {
        "floor": math.floor, "ceil": math.ceil, "trunc": math.trunc,
        # half away from zero, computed exactly (floor(x + 0.5) in doubles is wrong at 0.49999999999999994)
        "round": lambda x: math.copysign(float(mpmath.floor(abs(mp.mpf(x)) + mp.mpf(0.5))), x),
        "rint": lambda x: float(round(x)),
    }
    calls = [(fn, (x,)) for fn in fns for x in xs]
    calls += [("w_frexp", (x,)) for x in xs] + [("w_modf", (x,)) for x in xs]
    calls += [("w_ilogb", (x,)) for x in xs if x != 0 and math.isfinite(x)]
    got = run_calls(tmp_path, calls)
    for (fn, (x,)), r in zip(calls, got):
        if fn in fns:
            want = x if not math.isfinite(x) else float(fns[fn](x))
            want = math.copysign(want, x) if want == 0 else want     # C keeps the sign of zero
            assert same(r, want), (fn, x, r, want)
        elif fn == "w_frexp":
            m, e = math.frexp(x) if math.isfinite(x) else (x, 0)
            assert same(r[1], m) and r[0] == e, (fn, x, r)
        elif fn == "w_modf":
            if math.isinf(x):
                i, f = x, math.copysign(0.0, x)
            else:
                i = float(math.trunc(x)) if abs(x) < 2 ** 53 else x
                i = math.copysign(i, x)
                f = math.copysign(x - i, x)
            assert same(r[0], i) and same(r[1], f), (fn, x, r)
        else:
            assert r == math.frexp(x)[1] - 1, (fn, x, r)


def _compiler(name):
    if not compiler_available(name):
        pytest.skip(f"{name} for RISC-V is not installed")
    return name


COMPILERS = pytest.mark.parametrize("compiler", ["zig", "gcc"])


@COMPILERS
def test_special_values_of_the_exact_functions(tmp_path, compiler):
    cases = [("floor", (-0.0,), -0.0), ("ceil", (-0.5,), -0.0), ("trunc", (-0.7,), -0.0),
             ("round", (-0.4,), -0.0), ("round", (0.5,), 1.0), ("round", (-2.5,), -3.0),
             ("rint", (2.5,), 2.0), ("rint", (-0.5,), -0.0), ("rint", (3.5,), 4.0),
             ("floor", (NAN,), NAN), ("w_ilogb", (0.0,), -2 ** 31), ("w_ilogb", (INF,), 2 ** 31 - 1),
             ("logb", (0.0,), -INF), ("logb", (-INF,), INF), ("logb", (0.375,), -2.0),
             ("logb", (5e-324,), -1074.0),
             ("fmod", (5.5, 0.0), NAN), ("fmod", (INF, 2.0), NAN), ("fmod", (-0.0, 3.0), -0.0),
             ("fmod", (7.0, INF), 7.0), ("fmod", (-6.0, 3.0), -0.0), ("remainder", (5.0, 2.0), 1.0),
             ("remainder", (7.0, 2.0), -1.0), ("remainder", (-3.0, 2.0), 1.0), ("remainder", (1.0, INF), 1.0),
             ("sqrt", (-0.0,), -0.0), ("sqrt", (-1.0,), NAN), ("sqrt", (INF,), INF), ("sqrt", (5e-324,), 2.2227587494850775e-162),
             ("fmin", (NAN, 1.0), 1.0), ("fmax", (2.0, NAN), 2.0), ("fmin", (-0.0, 0.0), -0.0),
             ("fmax", (-0.0, 0.0), 0.0), ("fdim", (1.0, 3.0), 0.0), ("fdim", (3.0, 1.0), 2.0),
             ("hypot", (INF, NAN), INF), ("hypot", (NAN, 1.0), NAN), ("hypot", (3.0, 4.0), 5.0),
             ("hypot", (1e308, 1e308), 1.4142135623730952e308), ("hypot", (3e-320, 4e-320), 5e-320),
             ("cbrt", (-27.0,), -3.0), ("cbrt", (-0.0,), -0.0), ("cbrt", (-INF,), -INF), ("cbrt", (0.001,), 0.1),
             ("copysign", (3.0, -0.0), -3.0), ("fabs", (-0.0,), 0.0), ("nextafter", (0.0, -1.0), -5e-324),
             ("nextafter", (1.0, 2.0), 1.0000000000000002), ("nextafter", (1.7976931348623157e308, INF), INF),
             ("w_ldexp", (1.0, 1024.0), INF), ("w_ldexp", (1.0, -1075.0), 0.0), ("w_ldexp", (1.5, -1074.0), 1e-323),
             ("w_ldexp", (5e-324, 2000.0), 2.0 ** 926), ("w_ldexp", (-3.0, -2.0), -0.75),
             ("fma", (2.0, 3.0, 1.0), 7.0), ("fma", (1.0, -1.0, 1.0), 0.0), ("fma", (INF, 0.0, 1.0), NAN),
             ("fma", (1e308, 10.0, -INF), -INF), ("fma", (-1e-200, 1e-200, 0.0), -0.0)]
    got = run_calls(tmp_path, [(fn, args) for fn, args, _ in cases], compiler=_compiler(compiler))
    for (fn, args, want), r in zip(cases, got):
        assert same(r, want), (fn, args, r, want)


def test_fmod_remainder_remquo_are_exact(tmp_path):
    rng = random.Random(2)
    pairs = [(x, y) for x, y in zip(spread(rng, 200, -1074, 1023), spread(rng, 200, -1074, 1023))]
    pairs += [(x, y) for x, y in zip(spread(rng, 200, -10, 40), spread(rng, 200, -10, 10))]
    pairs += [(rng.randint(-99, 99) * 0.5, rng.choice([0.5, 1.0, 1.5, 2.0, 3.0])) for _ in range(100)]
    calls = ([("fmod", p) for p in pairs] + [("remainder", p) for p in pairs]
             + [("w_remquo", p) for p in pairs])
    got = run_calls(tmp_path, calls)
    for (fn, (x, y)), r in zip(calls, got):
        if fn == "fmod":
            assert same(r, math.fmod(x, y)), (fn, x, y, r)
        elif fn == "remainder":
            assert same(r, math.remainder(x, y)), (fn, x, y, r)
        else:
            assert same(r[1], math.remainder(x, y)), (fn, x, y, r)
            # the quotient's sign and low three bits (C requires at least three)
            q = mpmath.nint(mp.mpf(x) / mp.mpf(y))
            q = int(q) if (mp.mpf(x) - q * mp.mpf(y)) == mp.mpf(math.remainder(x, y)) else None
            if q is not None:
                want = (abs(q) & 7) * (-1 if q < 0 else 1)
                assert r[0] == want or (want == 0 and r[0] == 0), (fn, x, y, r, q)


def test_sqrt_and_fma_are_correctly_rounded(tmp_path):
    rng = random.Random(3)
    xs = spread(rng, 400, -1074, 1023, signs=(1,)) + [float(k) for k in range(1, 40)] + [2.0, 0.5, 1e-300]
    # near-halfway squares: (m + 1/2)^2 for 53-bit m rounds to m or m + 1
    xs += [float(m * m) for m in (rng.randint(2 ** 26, 2 ** 27) for _ in range(40))]
    triples = list(zip(spread(rng, 300, -500, 500), spread(rng, 300, -500, 500), spread(rng, 300, -1000, 1000)))
    # cancellation: z close to -x*y
    for _ in range(200):
        x, y = rng.uniform(-4, 4), rng.uniform(-4, 4)
        triples.append((x, y, -(x * y) * (1 + rng.choice([0, 2 ** -52, -2 ** -52, 2 ** -30]))))
    triples += [(x, y, z) for x, y, z in zip(spread(rng, 60, -560, -500), spread(rng, 60, -560, -500),
                                             spread(rng, 60, -1074, -1000))]                 # subnormal results
    triples += [(1.5, 2 ** -1074, 0.0), (1 + 2 ** -52, 1 - 2 ** -53, -1.0), (2 ** 1000, 2 ** 100, -1.0)]
    calls = [("sqrt", (x,)) for x in xs] + [("fma", t) for t in triples]
    got = run_calls(tmp_path, calls)
    for (fn, args), r in zip(calls, got):
        if fn == "sqrt":
            want = math.sqrt(args[0])             # IEEE: correctly rounded on the host too
        else:
            x, y, z = map(mp.mpf, args)
            exact = x * y + z
            want = rounded(exact) if exact != 0 else 0.0      # exact cancellation: +0
        assert same(r, want), (fn, args, r, want)


def test_cbrt_and_hypot_within_one_ulp(tmp_path):
    rng = random.Random(4)
    xs = spread(rng, 400) + [float(k ** 3) for k in range(-20, 21)]
    pairs = list(zip(spread(rng, 300, -600, 600), spread(rng, 300, -600, 600)))
    pairs += [(rng.uniform(-10, 10), rng.uniform(-10, 10)) for _ in range(200)]
    pairs += list(zip(spread(rng, 50, -1074, -1000), spread(rng, 50, -1074, -1000)))
    pairs += list(zip(spread(rng, 50, 1000, 1023), spread(rng, 50, 1000, 1023)))
    calls = [("cbrt", (x,)) for x in xs] + [("hypot", p) for p in pairs]
    got = run_calls(tmp_path, calls)
    worst = {}
    for (fn, args), r in zip(calls, got):
        exact = mpmath.cbrt(args[0]) if fn == "cbrt" else mpmath.sqrt(mp.mpf(args[0]) ** 2 + mp.mpf(args[1]) ** 2)
        if fn == "cbrt" and args[0] < 0:
            exact = -mpmath.cbrt(-args[0])
        err = ulp_error(r, exact)
        worst[fn] = max(worst.get(fn, 0), err)
        assert err <= 1.0, (fn, args, r, err)
        if fn == "cbrt" and float(round(args[0] ** (1 / 3) if args[0] > 0 else 0)) ** 3 == args[0] != 0:
            assert r ** 3 == args[0], (fn, args, r)              # exact cubes give exact roots
    assert worst["cbrt"] < 1.0 and worst["hypot"] < 1.0


# ---- transcendental functions: within their ulp bounds of the exact value ----

def _near_pi_2_multiples(rng, n):
    """Doubles nearest to k * pi / 2 (the reduced argument is tiny: the hard cases of reduction)."""
    return [float(mp.mpf(k) * mp.pi / 2) for k in (rng.randint(1, 10 ** 6) for _ in range(n))]


def _accuracy_cases(rng):
    """(function, args, exact value as an mpmath number, bound in ulps)."""
    cases = []

    def add(fn, xs, exact, bound):
        for args in xs:
            args = args if isinstance(args, tuple) else (args,)
            cases.append((fn, args, exact(*map(mp.mpf, args)), bound))

    small = [rng.uniform(-1, 1) for _ in range(60)]
    add("exp", [rng.uniform(-745, 709.7) for _ in range(80)] + small + spread(rng, 20, -60, 3), mpmath.exp, 1)
    add("exp2", [rng.uniform(-1074, 1023.9) for _ in range(60)] + small, lambda x: mpmath.power(2, x), 1)
    add("expm1", [rng.uniform(-40, 709) for _ in range(50)] + small + spread(rng, 40, -80, -2), mpmath.expm1, 1)
    pos = spread(rng, 120, signs=(1,)) + [1 + rng.uniform(-0.1, 0.1) for _ in range(40)]
    add("log", pos, mpmath.log, 1)
    add("log2", pos[:80], lambda x: mpmath.log(x, 2), 1)
    add("log10", pos[:80], mpmath.log10, 1)
    add("log1p", spread(rng, 60, -60, 600, signs=(1,)) + [rng.uniform(-0.999, 1) for _ in range(60)], mpmath.log1p, 1)
    pw = [(rng.uniform(0, 4), rng.uniform(-40, 40)) for _ in range(80)]
    pw += [(math.ldexp(1 + rng.random(), rng.randint(-30, 30)), rng.uniform(-30, 30)) for _ in range(60)]
    pw += [(1 + rng.uniform(-1e-6, 1e-6), rng.uniform(-1e8, 1e8)) for _ in range(40)]       # large y
    pw += [(-rng.uniform(0.5, 3), float(rng.randint(-60, 60))) for _ in range(40)]           # integer y
    add("pow", pw, lambda x, y: mpmath.power(x, y), 1)
    hyp = [rng.uniform(-30, 30) for _ in range(50)] + spread(rng, 30, -40, 9)
    add("sinh", hyp, mpmath.sinh, 1)
    add("cosh", hyp, mpmath.cosh, 1)
    add("tanh", hyp, mpmath.tanh, 1)
    add("asinh", spread(rng, 60), mpmath.asinh, 1)
    add("acosh", [1 + abs(x) for x in spread(rng, 60, -50, 1000, signs=(1,))], mpmath.acosh, 1)
    add("atanh", [rng.uniform(-1, 1) for _ in range(40)] + spread(rng, 20, -60, -2), mpmath.atanh, 1)
    trig = ([rng.uniform(-10, 10) for _ in range(80)] + spread(rng, 60, -40, 1023)
            + _near_pi_2_multiples(rng, 40) + [6381956970095103 * 2.0 ** 797, 1e22, 1e300, math.pi])
    add("sin", trig, mpmath.sin, 1)
    add("cos", trig, mpmath.cos, 1)
    add("tan", trig[:120] + trig[-45:], mpmath.tan, 1)
    unit = [rng.uniform(-1, 1) for _ in range(60)] + [1 - 2.0 ** -rng.randint(2, 52) for _ in range(20)]
    add("asin", unit, mpmath.asin, 1)
    add("acos", unit + [-u for u in unit[-20:]], mpmath.acos, 1)
    add("atan", spread(rng, 100), mpmath.atan, 1)
    add("atan2", list(zip(spread(rng, 80, -300, 300), spread(rng, 80, -300, 300))), mpmath.atan2, 1)
    return cases


@pytest.mark.slow          # ~40 s of unicorn on this 2-core machine; the exact functions below stay in the default suite
def test_transcendental_functions_within_their_ulp_bounds(tmp_path):
    cases = _accuracy_cases(random.Random(5))
    got = run_calls(tmp_path, [(fn, args) for fn, args, _, _ in cases], max_steps=150_000_000)
    worst = {}
    for (fn, args, exact, bound), r in zip(cases, got):
        err = ulp_error(r, exact) if abs(exact) < mp.mpf(2) ** 1024 else (0.0 if r == math.copysign(INF, exact) else math.inf)
        worst[fn] = max(worst.get(fn, 0.0), err)
        assert err <= bound, f"{fn}{args} = {r!r}, exact {mpmath.nstr(exact, 20)}: {err:.3f} ulp > {bound}"
    print({fn: round(e, 3) for fn, e in sorted(worst.items())})


@COMPILERS
def test_exact_cases_of_the_transcendental_functions(tmp_path, compiler):
    cases = [("exp", (0.0,), 1.0), ("exp", (-INF,), 0.0), ("exp", (INF,), INF), ("exp", (710.0,), INF),
             ("exp", (-746.0,), 0.0), ("exp2", (10.0,), 1024.0), ("exp2", (-1074.0,), 5e-324),
             ("exp2", (1024.0,), INF), ("expm1", (-0.0,), -0.0), ("expm1", (-INF,), -1.0),
             ("log", (1.0,), 0.0), ("log", (0.0,), -INF), ("log", (-1.0,), NAN), ("log", (INF,), INF),
             ("log2", (2.0 ** -1074,), -1074.0), ("log2", (1024.0,), 10.0), ("log1p", (-1.0,), -INF),
             ("log1p", (-0.0,), -0.0), ("log1p", (-2.0,), NAN)]
    cases += [("log10", (10.0 ** k,), float(k)) for k in range(23)]
    cases += [("pow", (3.0, 5.0), 243.0), ("pow", (2.0, -3.0), 0.125), ("pow", (10.0, 15.0), 1e15),
              ("pow", (NAN, 0.0), 1.0), ("pow", (1.0, NAN), 1.0), ("pow", (-1.0, INF), 1.0),
              ("pow", (-2.0, 3.0), -8.0), ("pow", (-2.0, 0.5), NAN), ("pow", (-0.0, -3.0), -INF),
              ("pow", (0.0, -2.0), INF), ("pow", (-0.0, 3.0), -0.0), ("pow", (0.5, INF), 0.0),
              ("pow", (2.0, INF), INF), ("pow", (-INF, 3.0), -INF), ("pow", (-INF, -3.0), -0.0),
              ("pow", (2.0, 1024.0), INF), ("pow", (2.0, -1074.0), 5e-324), ("pow", (-8.0, 1.0 / 3), NAN),
              ("sinh", (-0.0,), -0.0), ("tanh", (INF,), 1.0), ("tanh", (-INF,), -1.0), ("cosh", (-INF,), INF),
              ("atanh", (1.0,), INF), ("atanh", (-1.0,), -INF), ("acosh", (0.5,), NAN), ("asinh", (-0.0,), -0.0),
              ("sin", (-0.0,), -0.0), ("sin", (INF,), NAN), ("cos", (NAN,), NAN), ("tan", (-0.0,), -0.0),
              ("sin", (math.pi,), 1.2246467991473532e-16), ("cos", (math.pi / 2,), 6.123233995736766e-17),
              ("atan", (1.0,), math.pi / 4), ("atan", (-INF,), -math.pi / 2), ("asin", (1.0,), math.pi / 2),
              ("acos", (-1.0,), math.pi), ("acos", (1.0,), 0.0), ("asin", (1.5,), NAN), ("asin", (-0.0,), -0.0),
              ("atan2", (0.0, -0.0), math.pi), ("atan2", (-0.0, -0.0), -math.pi), ("atan2", (-0.0, 0.0), -0.0),
              ("atan2", (0.0, -1.0), math.pi), ("atan2", (INF, INF), math.pi / 4),
              ("atan2", (-INF, -INF), -3 * math.pi / 4), ("atan2", (1.0, -INF), math.pi),
              ("atan2", (-1.0, INF), -0.0), ("atan2", (INF, 1.0), math.pi / 2)]
    got = run_calls(tmp_path, [(fn, args) for fn, args, _ in cases], compiler=_compiler(compiler))
    for (fn, args, want), r in zip(cases, got):
        assert same(r, want), (fn, args, r, want)


def test_float_functions_round_the_double_result(tmp_path):
    """sqrtf and the exact float functions are correctly rounded; the others are within 1 ulp of float."""
    rng = random.Random(6)
    to_f = lambda v: struct.unpack("f", struct.pack("f", v))[0]     # noqa: E731
    xs = [to_f(rng.uniform(0.01, 50)) for _ in range(60)]
    calls = [(fn, (x,)) for fn in ("sqrtf", "floorf", "expf", "logf", "sinf", "cbrtf") for x in xs]
    calls += [("powf", (x, to_f(rng.uniform(-3, 3)))) for x in xs] + [("fmodf", (x, 1.5)) for x in xs]
    lines = ["#include <stdio.h>", "#include <math.h>", "int main(void) {", "  volatile float r;"]
    for fn, args in calls:
        lines.append(f"  r = {fn}({', '.join(repr(a) + 'f' for a in args)}); "
                     "{ union { float f; unsigned u; } v = {r}; printf(\"%08x\\n\", v.u); }")
    lines += ["  return 0;", "}"]
    src = tmp_path / "floats.c"
    src.write_text("\n".join(lines) + "\n")
    result = run_unicorn(load_elf(compile_c(src, cache_dir=tmp_path / "cache")), max_steps=60_000_000, trace=False)
    assert result.halt.kind == Halt.EXIT
    got = [struct.unpack("<f", struct.pack("<I", int(w, 16)))[0] for w in result.console.decode().split()]
    exact = {"sqrtf": mpmath.sqrt, "floorf": mpmath.floor, "expf": mpmath.exp, "logf": mpmath.log,
             "sinf": mpmath.sin, "cbrtf": mpmath.cbrt, "powf": mpmath.power, "fmodf": lambda x, y: mpmath.fmod(x, y)}
    for (fn, args), r in zip(calls, got):
        v = exact[fn](*map(mp.mpf, args))
        nearest = to_f(float(v))          # float(v) then float32: both round to nearest, fine away from ties
        if fn in ("sqrtf", "floorf", "fmodf"):
            assert r == nearest, (fn, args, r, nearest)
        else:
            e = int(mpmath.floor(mpmath.log(abs(v), 2)))
            assert abs(mp.mpf(r) - v) <= mpmath.ldexp(1, e - 23), (fn, args, r, float(v))


# ---- setjmp/longjmp ----

def test_setjmp_longjmp(tmp_path):
    source = r'''
#include <setjmp.h>
#include <stdio.h>
static jmp_buf env;
static int depth;
static void dive(int n) {
    volatile int local[8];
    local[n % 8] = n;
    depth = n;
    if (n == 25) longjmp(env, n * 2 + local[n % 8] - n);
    dive(n + 1);
}
static void zero(void) { longjmp(env, 0); }
int main(void) {
    volatile int rounds = 0;
    int s0 = 17;                  /* a callee-saved value live across setjmp */
    int r = setjmp(env);
    rounds++;
    if (r == 0) dive(0);
    printf("r=%d depth=%d rounds=%d s0=%d\n", r, depth, rounds, s0);
    if (r == 50) {
        r = setjmp(env);
        if (r == 0) zero();
        printf("from longjmp(env, 0): %d\n", r);
    }
    return 0;
}
'''
    src = tmp_path / "jump.c"
    src.write_text(source)
    result = run_unicorn(load_elf(compile_c(src, cache_dir=tmp_path / "cache")), trace=False)
    assert result.halt.kind == Halt.EXIT and result.halt.exit_code == 0
    assert result.console.decode() == "r=50 depth=25 rounds=2 s0=17\nfrom longjmp(env, 0): 1\n"


# ---- on the CPU core itself ----

def test_math_program_runs_identically_on_the_netlist_core(tmp_path):
    """A program using <math.h> and <setjmp.h> on the core's netlist simulator: every retirement
    record equal to unicorn's, and the printed values equal to Python's (printf rounds to 9 digits)."""
    from cpu.netlist_engine import run_netlist
    source = r'''
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
static jmp_buf env;
static void fail(int code) { longjmp(env, code); }
int main(void) {
    volatile double x = 0.75, y = 2.5;
    printf("%.9g %.9g %.9g %.9g\n", sqrt(x), exp(x), log(y), pow(x, y));
    printf("%.9g %.9g %.9g %.9g\n", sin(y), cos(y), atan2(x, -y), floor(-y));
    printf("%.9g %.9g %.9gf\n", fmod(y, x), hypot(x, y), (double)sqrtf((float)y));
    int r = setjmp(env);
    if (!r) fail(7);
    printf("jumped %d\n", r);
    return (int)lround(y * 10);
}
'''
    src = tmp_path / "mathprog.c"
    src.write_text(source)
    image = load_elf(compile_c(src, cache_dir=tmp_path / "cache"))
    ref = run_unicorn(image)
    got = run_netlist(image)
    assert got.records == ref.records and got.halt == ref.halt and got.console == ref.console
    x, y = 0.75, 2.5
    want = ("%.9g %.9g %.9g %.9g\n" % (math.sqrt(x), math.exp(x), math.log(y), x ** y)
            + "%.9g %.9g %.9g %.9g\n" % (math.sin(y), math.cos(y), math.atan2(x, -y), math.floor(-y))
            + "%.9g %.9g %.9gf\n" % (math.fmod(y, x), math.hypot(x, y), struct.unpack("f", struct.pack("f", math.sqrt(2.5)))[0])
            + "jumped 7\n")
    assert got.console.decode() == want
    assert got.halt.kind == Halt.EXIT and got.halt.exit_code == 25


def test_the_library_adds_only_what_a_program_calls(tmp_path):
    """The archive's members are linked on demand: a program without <math.h> calls links none of
    it (so the program table's ELFs did not change when it was added), one calling sqrt gets sqrt
    from basic.c and nothing of trig.c or explog.c."""
    from elftools.elf.elffile import ELFFile

    def symbols(elf):
        with open(elf, "rb") as f:
            return {s.name for s in ELFFile(f).get_section_by_name(".symtab").iter_symbols()
                    if s["st_shndx"] != "SHN_UNDEF" and s.name}
    programs = {"plain": "int main(void) { puts(\"hi\"); return 0; }",
                "root": "int main(void) { volatile double x = 2; printf(\"%.3f\", sqrt(x)); return 0; }",
                "sine": "int main(void) { volatile double x = 2; printf(\"%.3f\", sin(x)); return 0; }"}
    syms = {}
    for name, body in programs.items():
        src = tmp_path / f"{name}.c"
        src.write_text("#include <math.h>\n#include <stdio.h>\n" + body + "\n")
        syms[name] = symbols(compile_c(src, cache_dir=tmp_path / "cache"))
    assert not {"sqrt", "sin", "exp", "setjmp"} & syms["plain"]
    assert "sqrt" in syms["root"] and not {"sin", "exp", "atan2"} & syms["root"]
    assert {"sin", "TWO_OVER_PI"} <= syms["sine"] and "exp" not in syms["sine"]     # ours, not compiler_rt's


def test_clang_without_soft_float_names_the_fix(tmp_path):
    from cpu.toolchain import CompileError
    src = tmp_path / "f.c"
    src.write_text("#include <math.h>\nint main(void) { volatile double x = 2; return (int)sin(x); }\n")
    with pytest.raises(CompileError, match="clang has no soft-float runtime for rv32.*zig .*or gcc"):
        compile_c(src, cache_dir=tmp_path / "cache", compiler=_compiler("clang"))


def test_libm_small_program_against_mpmath():
    """cpu/programs/libm_small.c (the <math.h> program run on the 64 KiB compiled model,
    docs/design/cpu-model.md 5) on unicorn with 64 KiB of RAM: each printed double's bits are the value
    mpmath computes at 300 bits, rounded to the nearest double."""
    from pathlib import Path

    img = load_elf(compile_c(Path(__file__).resolve().parents[2] / "cpu/programs/libm_small.c", ram_size=1 << 16),
                   ram_size=1 << 16)
    run = run_unicorn(img, ram_size=1 << 16)
    assert run.halt.exit_code == 0
    exact = {"sqrt(2)": mp.sqrt(2), "sin(1)": mp.sin(1), "exp(1)": mp.exp(1), "log(10)": mp.log(10),
             "atan(0.5)": mp.atan(mp.mpf(1) / 2), "pow(2,0.5)": mp.sqrt(2)}
    lines = run.console.decode().splitlines()
    assert [ln.split()[0] for ln in lines] == list(exact)
    for ln in lines:
        name, got = ln.split()
        assert int(got, 16) == bits(float(exact[name])), name
