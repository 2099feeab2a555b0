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

Wider dividends (the thermometer would need 2**n steps and inputs beyond 256) stay with Yosys's own
lowering to logic (``yosys._KEEP`` selects only the widths here, ``fits``).
"""

from .errors import UnsupportedDesignError
from .ir import CONST0, CONST1, CONSTX, Cell
from .validate import Problem
from .macros import DIV_CELLS, Step, ThresholdFunction, _Builder, macc  # noqa: F401 (DIV_CELLS re-exported)
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
    b = _Builder(next_net, cell)
    wanted = [i for i, n in enumerate(Y) if n in used]
    if not wanted:
        return b.functions, b.names, b.next_net
    if not fits(cell):
        raise UnsupportedDesignError([Problem(f"cell {cell.name} ({cell.type})", cell.src,
                                              f"a {cell.param('A_WIDTH')}-bit dividend; the divider macro takes "
                                              f"{MAX_DIVIDEND_BITS} bits ({MAX_DIVIDEND_BITS + 1} signed): "
                                              f"synthesize with the macro flow, which lowers wider ones to logic")])
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
