"""Division and remainder (``$div``, ``$mod``, ``$divfloor``, ``$modfloor``) as shallow threshold circuits.

Semantics are the simulator's (Yosys's simlib with ``x`` as 0): the operands are signed only when both
are (``A_SIGNED`` and ``B_SIGNED``), ``$div``/``$mod`` truncate towards zero (the remainder has the
dividend's sign), ``$divfloor``/``$modfloor`` round towards minus infinity (the remainder has the
divisor's sign), a division by zero gives 0 (Yosys leaves it undefined; Amaranth's ``//`` and ``%``
put their own ``b == 0`` mux around the cell), and the result is taken modulo ``2**Y_WIDTH``.

**The quotient in one FFN layer** (a thermometer code). For a divisor of known sign, "the quotient is
at least t" is one linear inequality in the operands' bits:

* ``B > 0``: ``floor(A/B) >= t  <=>  A - t*B >= 0``; truncated, for t <= 0: ``A - (t-1)*B >= 1``;
* ``B < 0``: ``floor(A/B) >= t  <=>  t*B - A >= 0``; truncated, for t <= 0: ``(t-1)*B - A >= 1``;

so ``th_t = [Q >= t]`` is one threshold step per sign case (gated by the divisor's sign bit with a
large weight), for every t in the quotient's range (``Qmin``, ``Qmax``], and each bit of
``Q = Qmin + sum_t th_t`` is a signed sum of the same steps (``bit_i(Q) = bit_i(Qmin) + sum_u
(bit_i(Qmin+u) - bit_i(Qmin+u-1)) * th_(Qmin+u)``): the down-projection writes every quotient bit
from the shared neurons. Each inequality is used the way round whose largest value is bounded by the
dividend (``[L >= 0] = 1 - [-L - 1 >= 0]`` when ``L``'s multiple of B could be large), so every
positive pre-activation stays <= 256 (bfloat16-exact) for dividends of 8 bits, or 9 bits signed. At
``B = 0`` the steps give a value that depends only on the dividend's sign; three more steps
(``[B == 0 and A >= c]``) subtract it, so the quotient is 0 there.

**The remainder** ``A - Q*B`` (modulo ``2**Y_WIDTH``: the quotient's low bits suffice) is the
multiplier macro's sum of a negated product and an addend (``macros.macc``) on the quotient's nets:
the quotient's layer, then the partial products, counters and the final adder.

**Wider dividends** (the thermometer would need 2**n steps and inputs beyond 256, ``fits``): long
division in base 16 (``expand_wide_div``, ``_long_division``), operands up to ``MAX_WIDE_BITS``: the
divisor's multiples t * B once (t = 1..15, the multiplier macro on a constant factor: 4 levels), then
per four quotient bits, from the top, the partial remainder R shifted in with the next digit of A,
fifteen lookahead subtractors ``R' - t * B`` in parallel (3 levels: their borrows are the
thermometer ``[R' >= t * B]``, monotone in t), and one level that sums the digit's bits from the
thermometer and selects the new remainder (``[th_t AND NOT th_(t+1) AND bit of R' - t * B]``, one
neuron each, one-hot): 4 levels a digit. Signed operands go through their magnitudes (conditional
negation: an XOR level and an adder) and the result's sign fix (the same); floored ones adjust the
quotient by ``[R == 0]`` and the remainder by ``|B|``. Unsigned 16 bits: 20 levels, 7,692 neurons;
32 bits: 36 levels, 29,832 (Yosys's logic: 53 and 206 levels); signed 26-30 and 44-49
(``bench/compile_figures.py --macros``). Wider than 64 bits stays Yosys's logic (``yosys._KEEP``).
"""

from netlist2tf.common import UnsupportedDesignError
from netlist2tf.netlist import CONST0, CONST1, CONSTX, Cell
from netlist2tf.netlist import Problem
from netlist2tf.compile.builder import Builder, Step, ThresholdFunction, add, lit_value, macc

MAX_DIVIDEND_BITS = 8            # unsigned; 9 when both operands are signed


def _signed(cell: Cell) -> bool:
    """Signed arithmetic: only when both operands are (Yosys's rule)."""
    return bool(cell.param("A_SIGNED", 0)) and bool(cell.param("B_SIGNED", 0))


def fits(cell: Cell) -> bool:
    """Whether the macro takes ``cell`` (the selection yosys.MACRO_FLOW keeps word-level)."""
    return int(cell.param("A_WIDTH")) <= MAX_DIVIDEND_BITS + _signed(cell)


def _value_terms(sig, signed: bool) -> tuple[dict, int]:
    """The integer an operand's bits stand for, as ({(net, False): weight}, constant): the top bit
    weighs ``-2**(w-1)`` when signed; constant bits fold into the constant (``x`` as 0)."""
    coeffs, const = {}, 0
    for i, n in enumerate(sig):
        w = -(1 << i) if signed and i == len(sig) - 1 else 1 << i
        if n == CONST1:
            const += w
        elif n not in (CONST0, CONSTX):
            coeffs[(n, False)] = coeffs.get((n, False), 0) + w
    return coeffs, const


def _negative_terms(sig) -> tuple[dict, int]:
    """A signed operand whose sign bit is 1, as ({(net, True): weight}, constant): ``B = -1 -
    sum(2**j * (1 - b_j))`` over the bits below the sign, on the pairs' other channels, so its
    weights are all <= 0 (what bounds a threshold's positive side for a negative divisor)."""
    coeffs, const = {}, -1
    for j, n in enumerate(sig[:-1]):
        if n in (CONST0, CONSTX):
            const -= 1 << j
        elif n != CONST1:
            coeffs[(n, True)] = coeffs.get((n, True), 0) - (1 << j)
    return coeffs, const


def _range(coeffs: dict, const: int) -> tuple[int, int]:
    return (const + sum(w for w in coeffs.values() if w < 0), const + sum(w for w in coeffs.values() if w > 0))


def _step(parts, const: int, sign: int = 1) -> Step:
    """``sign * [sum(k * form) + const >= 0]`` for ``parts`` = [(k, {(net, inverted): weight})]:
    a literal is a bit or its pair's other channel (``1 - bit``); weights on one channel merge."""
    total: dict = {}
    for k, form in parts:
        for lit, w in form.items():
            total[lit] = total.get(lit, 0) + k * w
    return Step(tuple((n, inv, w) for (n, inv), w in sorted(total.items()) if w), -const, sign)


def bf16_weight(w: int) -> bool:
    """Whether the integer ``w`` is a bfloat16 value (8 significant bits; the FFN scales weights
    by 128, a power of two, so the scaled weight is one too)."""
    w = abs(w)
    while w and not w & 1:
        w >>= 1
    return w < 256


def _bit(x: int, i: int) -> int:
    return (x >> i) & 1


def quotient_steps(cell: Cell) -> tuple[list[tuple[int, list[Step], int]], int, int]:
    """``([(u, the steps of th_(Qmin+u), its delta)...], Qmin, Qmax)``: ``th_t = [Q >= t]`` for
    every divisor but 0, where it is ``[A >= delta]``."""
    signed = _signed(cell)
    floor = cell.type in ("$divfloor", "$modfloor")
    A, B = cell.port("A"), cell.port("B")
    (ca, ka), (cb, kb) = _value_terms(A, signed), _value_terms(B, signed)
    amin, amax = _range(ca, ka)
    bmin, bmax = _range(cb, kb)
    # the quotient is monotone in A, and in B on each side of 0: its range is at the corners
    divisors = ([1, bmax] if bmax >= 1 else []) + ([-1, bmin] if bmin <= -1 else [])
    cands = [a // d if floor else (abs(a) // abs(d)) * (1 if (a < 0) == (d < 0) else -1)
             for a in (amin, amax) for d in divisors]
    qmin, qmax = (min(cands), max(cands)) if cands else (0, 0)
    top = B[-1] if signed else None
    sign_var = top is not None and top not in (CONST0, CONST1, CONSTX)
    # cases: (sigma, the divisor's bits in that case, the case's own step, the gate's literal); the
    # divisor's sign bit decides which inequality holds (a constant sign bit leaves one case), and
    # a power-of-two weight on it (or on its pair's other channel) kills the other case's step
    cases = []
    if not signed or top == CONST0 or sign_var:
        pos = _value_terms(B[:-1] if sign_var else B, signed and not sign_var)
        cases.append((1, pos, ({(top, False): -1}, 0) if sign_var else ({}, 0), (top, False)))
    if sign_var or (signed and top == CONST1):
        cases.append((-1, _negative_terms(B), ({(top, False): 1}, -1) if sign_var else ({}, 0), (top, True)))

    def gated(lin, lconst, gate, sign=1):
        step = _step(lin, lconst, sign)
        if not sign_var:
            return step
        hi = -step.theta + sum(w for _, _, w in step.terms if w > 0)
        return _step(lin + [(1, {gate: -(1 << max(hi, 0).bit_length())})], lconst, sign)

    thermo = []                        # (u, the steps of th_(Qmin+u), delta)
    for t in range(qmin + 1, qmax + 1):
        u, delta = (t, 0) if floor or t >= 1 else (t - 1, 1)
        steps = []
        for sigma, (cb_, kb_), (case, cconst), gate in cases:
            # L = sigma * (A - u*B) - delta, in the case's half of the divisors
            if u >= 0:
                steps.append(gated([(sigma, ca), (-sigma * u, cb_)], sigma * (ka - u * kb_) - delta, gate))
            else:                              # [case and L >= 0] = [case] - [case and -L - 1 >= 0]
                steps.append(_step([(1, case)], cconst))
                steps.append(gated([(-sigma, ca), (sigma * u, cb_)], -sigma * (ka - u * kb_) + delta - 1, gate, -1))
        thermo.append((t - qmin, steps, delta))
    return thermo, qmin, qmax


def _zero_fix(cell: Cell, const: int, d0: int, d1: int) -> list[Step]:
    """Steps that cancel, at ``B = 0``, an output bit's sum ``const + d0 * [A >= 0] + d1 * [A >= 1]``
    (what its thermometer steps add up to there: every ``th_t`` is then ``[A >= delta_t]``, the
    positive case's inequality, which is not a thermometer code, so the sum is not a quotient's bit)."""
    signed = _signed(cell)
    ca, ka = _value_terms(cell.port("A"), signed)
    cb, kb = _value_terms(cell.port("B"), signed)
    if kb:
        return []                              # a constant 1 bit: the divisor is never 0
    amin, amax = _range(ca, ka)
    far = {lit: -(1 << (abs(amin) + abs(amax) + 2).bit_length()) for lit in cb}   # a divisor bit set: below 0
    steps = [_step([(1, {lit: -1 for lit in cb})], 0, -const)] if const else []      # [B == 0]
    steps += [_step([(1, ca), (1, far)], ka - c, -d) for c, d in ((0, d0), (1, d1)) if d]
    return steps


def expand_div(cell: Cell, next_net: int, used: set) -> tuple[list[ThresholdFunction], dict, int]:
    """The threshold circuit of a division or remainder cell for its output bits in ``used``
    (see the module docstring). Returns (functions in dependency order, {internal net: name},
    the next free net)."""
    Y = cell.port("Y")
    b = Builder(next_net, cell)
    wanted = [i for i, n in enumerate(Y) if n in used]
    if not wanted:
        return b.functions, b.names, b.next_net
    if not fits(cell):
        raise UnsupportedDesignError([Problem(f"cell {cell.name} ({cell.type})", cell.src,
                                              f"a {cell.param('A_WIDTH')}-bit dividend; the divider macro takes "
                                              f"{MAX_DIVIDEND_BITS} bits ({MAX_DIVIDEND_BITS + 1} signed): "
                                              f"wider ones up to 64 bits are long divisions (expand_wide_div), which "
                                              f"macros.expand chooses by width")])
    thermo, qmin, qmax = quotient_steps(cell)

    def quotient_bit(i: int, out: int) -> int:
        steps = [Step((), 0, 1)] if _bit(qmin, i) else []
        at_zero = [_bit(qmin, i), 0, 0]           # the sum at B = 0: const, [A >= 0], [A >= 1]
        for u, th, delta in thermo:
            d = _bit(qmin + u, i) - _bit(qmin + u - 1, i)
            steps += [Step(s.terms, s.theta, s.sign * d) for s in th] if d else []
            at_zero[1 + delta] += d
        steps += _zero_fix(cell, *at_zero)
        return b.emit(out, steps)

    bad = sorted({w for _, th, _ in thermo for st in th for _, _, w in st.terms + ((None, None, st.theta),)
                  if not bf16_weight(w)})
    if bad:
        raise UnsupportedDesignError([Problem(f"cell {cell.name} ({cell.type})", cell.src,
                                              f"the divider's weights {bad[:3]} are not bfloat16 values (its "
                                              f"operands share bits, or the divisor has constant bits); "
                                              f"divide copies of the operands")])
    if cell.type in ("$div", "$divfloor"):
        for i in wanted:
            quotient_bit(i, Y[i])
        return b.functions, b.names, b.next_net
    signed = _signed(cell)
    qbits = max(1, max(abs(qmin), abs(qmax)).bit_length() + signed)
    Q = [quotient_bit(i, b.new_net(f"q[{i}]")) for i in range(min(qbits, len(Y)))]
    A, B = list(cell.port("A")), cell.port("B")
    cb, kb = _value_terms(B, signed)
    if cb and not kb:
        # the remainder is 0 at B = 0, not A: the addend's bits are A's while some divisor bit is
        # set, [(k + 1) * a + sum(b) >= k + 2] for k divisor bits (in the quotient's layer)
        k = len(cb)
        A = [n if n in (CONST0, CONSTX) else
             b.emit(b.new_net(f"a_nz[{i}]"), [_step([(k + 1, {(n, False): 1} if n != CONST1 else {}), (1, {m: 1 for m in cb})],
                                                    (k + 1 if n == CONST1 else 0) - (k + 2))])
             for i, n in enumerate(A)]
    macc(b, [(tuple(Q), B, signed, True)], [(tuple(A), signed, False)], Y, wanted)
    return b.functions, b.names, b.next_net


# ---- wider dividends: long division, four quotient bits a stage ----------------------------------

RADIX_BITS = 4                   # quotient bits per stage of the long division
MAX_WIDE_BITS = 64               # operand widths the long division takes


def _literals(sig) -> list:
    """A signal as adder literals ((net, inverted)); ``x`` bits as 0."""
    return [(CONST0 if n == CONSTX else n, False) for n in sig]


def _xor_with(b: Builder, lits, s, name: str) -> list:
    """Each literal XOR the bit ``s`` (one level; constants fold to ``s`` or its complement)."""
    out = []
    for i, (n, inv) in enumerate(lits):
        v = lit_value(n, inv)
        if v is not None:
            out.append((s, v == 1))
            continue
        x = b.new_net(f"{name}[{i}]")
        t = [(n, inv, 1), (s, False, 1)]
        b.emit(x, [b.step(t, 1, 1), b.step(t, 2, -1)])
        out.append((x, False))
    return out


def _cond_negate(b: Builder, lits, s, width: int, name: str, ci=None) -> list:
    """``(x XOR s) + ci`` over ``width`` bits, ``x`` the unsigned value of ``lits`` (zero-extended),
    ``ci`` the literal ``s`` by default: ``-x`` where ``s`` is 1, ``x`` where it is 0 (4 levels)."""
    lits = (list(lits) + [(CONST0, False)] * width)[:width]
    flipped = _xor_with(b, lits, s, f"{name}.x")
    out = [b.new_net(f"{name}[{i}]") for i in range(width)]
    add(b, flipped, [(CONST0, False)] * width, ci if ci is not None else s, dict(enumerate(out)), {})
    return [(n, False) for n in out]


def _long_division(b: Builder, A: list, B: list, nz) -> tuple[list, list]:
    """Unsigned ``A // B`` and ``A % B`` (literal lists, LSB first) by long division in base 16,
    the digits from the top: the partial remainder R (< B) shifted in with the next digit of A is
    R', every multiple t * B (t = 1..15, made once) is subtracted from it in parallel, the borrows are
    the thermometer ``[R' >= t * B]`` (monotone in t), the digit is its count and the new remainder
    the difference the thermometer's last 1 selects (a one-hot AND-OR: one level). A stage is
    4 levels (the lookahead subtractors, then the select). ``nz`` (a literal, ``B != 0``) masks the
    results: both 0 for a zero divisor. Returns (quotient literals, remainder literals)."""
    n, m = len(A), len(B)
    W = m + RADIX_BITS                               # R' < 16 * B
    radix = 1 << RADIX_BITS
    multiples = {1: list(B) + [(CONST0, False)] * RADIX_BITS}
    for t in range(2, radix):
        bits = [(CONST1 if (t >> k) & 1 else CONST0) for k in range(RADIX_BITS)]
        Y = [b.new_net(f"mul{t}[{i}]") for i in range(W)]
        B_nets = [n_ if not inv else None for n_, inv in B]
        assert None not in B_nets
        macc(b, [(tuple(B_nets), tuple(bits), False, False)], [], Y, list(range(W)))
        multiples[t] = [(y, False) for y in Y]
    stages = -(-n // RADIX_BITS)
    A = list(A) + [(CONST0, False)] * (stages * RADIX_BITS - n)
    R = [(CONST0, False)] * m
    digits = []
    for s in range(stages):
        lo = (stages - 1 - s) * RADIX_BITS
        Rp = A[lo:lo + RADIX_BITS] + R                # R' = R * 16 + the next digit
        last = s == stages - 1
        th, diffs = [], []
        for t in range(1, radix):
            D = [b.new_net(f"s{s}.d{t}[{i}]") for i in range(m)]
            c = b.new_net(f"s{s}.th{t}")
            add(b, Rp, [(x, not inv) for x, inv in multiples[t]], CONST1, dict(enumerate(D)), {W - 1: c})
            th.append(c)
            diffs.append(D)
        # the digit: sum of th_t (a thermometer), bit j of it from the same steps; 0 at B = 0
        dig = []
        for j in range(RADIX_BITS):
            steps = [b.step([(th[t - 1], False, 1), (*nz, 1)], 2, _bit(t, j) - _bit(t - 1, j))
                     for t in range(1, radix) if _bit(t, j) != _bit(t - 1, j)]
            dig.append((b.emit(b.new_net(f"s{s}.q[{j}]"), steps), False))
        digits = dig + digits                          # LSB first: later stages are lower digits
        # the new remainder: R' where th_1 = 0, else the difference of the last t with th_t = 1
        mask = [(*nz, 1)] if last else []
        newR = []
        for i in range(m):
            steps = [b.step([(th[0], True, 1), (*Rp[i], 1)] + mask, 2 + len(mask))]
            for t in range(1, radix):
                lits = [(th[t - 1], False, 1), (diffs[t - 1][i], False, 1)] + mask
                if t < radix - 1:
                    lits.append((th[t], True, 1))
                steps.append(b.step(lits, len(lits)))
            newR.append((b.emit(b.new_net(f"s{s}.r[{i}]"), steps), False))
        R = newR
    return digits[:n], R


def wide_fits(cell: Cell) -> bool:
    """Whether the long division takes ``cell`` (operands up to ``MAX_WIDE_BITS`` bits)."""
    return max(int(cell.param("A_WIDTH")), int(cell.param("B_WIDTH"))) <= MAX_WIDE_BITS


def expand_wide_div(cell: Cell, next_net: int, used: set) -> tuple[list[ThresholdFunction], dict, int]:
    """A division or remainder with a dividend wider than the one-layer macro takes (``fits``):
    on the operands' magnitudes (signed: conditional negation, 4 levels), ``_long_division``
    (4 levels per 4 quotient bits, after 4 for the divisor's multiples), then the signs: ``$div``
    negates the quotient when the operands' signs differ, ``$mod`` the remainder when the dividend
    is negative; ``$divfloor`` adds ``[R == 0]`` to the flipped quotient instead of 1 (``-Q - 1``
    when the rounding went down), ``$modfloor`` subtracts ``|B|`` from a non-zero remainder first
    where the signs differ. Results modulo ``2**Y_WIDTH``; a zero divisor gives 0."""
    Y = cell.port("Y")
    b = Builder(next_net, cell)
    wanted = [i for i, n in enumerate(Y) if n in used]
    if not wanted:
        return b.functions, b.names, b.next_net
    if not wide_fits(cell):
        raise UnsupportedDesignError([Problem(f"cell {cell.name} ({cell.type})", cell.src,
                                              f"a division of {max(int(cell.param('A_WIDTH')), int(cell.param('B_WIDTH')))} "
                                              f"bits; the divider macro takes {MAX_WIDE_BITS}: split it into "
                                              f"narrower divisions")])
    signed = _signed(cell)
    A, B = _literals(cell.port("A")), _literals(cell.port("B"))
    yw = len(Y)
    b_real = [lit for lit in B if lit_value(*lit) is None]
    one = [lit for lit in B if lit_value(*lit) == 1]
    if one:
        nz = (CONST1, False)
    elif not b_real:
        nz = (CONST0, False)
    else:
        nz = (b.emit(b.new_net("nz"), [b.step([(x, inv, 1) for x, inv in b_real], 1)]), False)
    if signed:                                  # magnitudes (a constant sign bit folds: 0 keeps it)
        ua = A if lit_value(*A[-1]) == 0 else _cond_negate(b, A, A[-1][0], len(A), "abs_a")
        ub = B if lit_value(*B[-1]) == 0 else _cond_negate(b, B, B[-1][0], len(B), "abs_b")
    else:
        ua, ub = A, B
    Q, R = _long_division(b, ua, ub, nz)
    want_q = cell.type in ("$div", "$divfloor")
    if not signed:
        res = Q if want_q else R
        res = (list(res) + [(CONST0, False)] * yw)[:yw]
    else:
        a_s = A[-1][0]
        q_neg = b.emit(b.new_net("q_neg"), [b.step([(A[-1][0], False, 1), (B[-1][0], False, 1)], 1, 1),
                                             b.step([(A[-1][0], False, 1), (B[-1][0], False, 1)], 2, -1)])
        if cell.type == "$div":
            res = _cond_negate(b, Q, q_neg, yw, "q")
        elif cell.type == "$mod":
            res = _cond_negate(b, R, a_s, yw, "r")
        elif cell.type == "$divfloor":
            # -Q - 1 + [R == 0] where the signs differ: (Q XOR q_neg) + (q_neg AND R == 0)
            ci = b.emit(b.new_net("ci"), [b.step([(q_neg, False, len(R) + 1)] + [(x, inv, -1) for x, inv in R],
                                                  len(R) + 1)])
            res = _cond_negate(b, Q, q_neg, yw, "q", ci=ci)
        else:
            # the remainder takes the divisor's sign: where the signs differ and R != 0, R - |B|
            # (then negated with the dividend's sign), else R
            k = len(R)
            fix = b.emit(b.new_net("fix"), [b.step([(q_neg, False, k)] + [(x, inv, 1) for x, inv in R], k + 1)])
            w = max(len(R), len(ub)) + 1
            masked = []
            for i, (x, inv) in enumerate(list(ub) + [(CONST0, False)] * (w - len(ub))):
                if lit_value(x, inv) is not None:    # ~(bit AND fix): 1 for a 0 bit, not fix for a 1
                    masked.append((CONST1, False) if lit_value(x, inv) == 0 else (fix, True))
                    continue
                mnet = b.new_net(f"mb[{i}]")
                b.emit(mnet, [b.step([(x, inv, 1), (fix, False, 1)], 2)])
                masked.append((mnet, True))           # ~(|B| AND fix): subtracting it with ci = fix
            T = [b.new_net(f"t[{i}]") for i in range(w)]
            Rw = (list(R) + [(CONST0, False)] * w)[:w]
            add(b, Rw, masked, CONST1, dict(enumerate(T)), {})
            Tl = [(t, False) for t in T]
            # T is R - fix * |B| in w bits (two's complement): sign-extend it to the result's width
            Tl = (Tl + [Tl[-1]] * yw)[:max(yw, w)]
            res = _cond_negate(b, Tl, a_s, yw, "r")
    # the outputs: a result bit this macro computed and nothing else reads is written to Y's net
    # itself (no copy, no extra level); constants and bits used twice are copied
    read = {x for f in b.functions for st in f.steps for x, _, _ in st.terms}
    pos = {f.out: k for k, f in enumerate(b.functions)}
    renamed: dict = {}
    for i in wanted:
        n, inv = res[i]
        v = lit_value(n, inv)
        if v is None and not inv and n in pos and n not in read and n not in renamed:
            b.functions[pos[n]] = ThresholdFunction(Y[i], b.functions[pos[n]].steps)
            renamed[n] = Y[i]
            continue
        n = renamed.get(n, n)
        b.emit(Y[i], [b.step([], 0, 1)] if v == 1 else [] if v == 0 else [b.step([(n, inv, 1)], 1)])
    return b.functions, b.names, b.next_net
