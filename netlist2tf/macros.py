"""Word-level macros: arithmetic cells as shallow threshold circuits instead of deep LUT trees.

An FFN layer computes, for each output bit, a sum of *steps* ``sign * [sum(w * literal) >= theta]``
over bits of the residual (``ffn_threshold.threshold_gate``: two ReLU neurons per step). A 4-input
LUT is one level of that machine; a linear form over many bits is one level too. So a 32-bit adder,
which abc maps to ~10 levels of LUTs, is 3 FFN layers here (a carry-lookahead over 7-bit blocks;
an adder of up to 7 bits is one layer, up to 14 bits two):

1. per block m of the sum ``d_m = A_m + B_m (+ CI in block 0)``: generate ``y_m = [d_m >= 2**w]``
   and generate-or-propagate ``x_m = [d_m >= 2**w - 1]`` (w = the block's width);
2. the carry into block k: ``[sum_{m<k} 2**m (x_m + y_m) >= 2**k]`` (the carry chain of the two
   binary numbers x and y, whose digit sums 2/1/0 are generate/propagate/kill); beyond 8 blocks a
   second level of the same construction over groups of 8 blocks; the carry into block 1 is block
   0's generate itself;
3. bit j of block k: with ``S = sum_{t<=j} 2**t (a_t + b_t) + c_k``, ``Y_j = [S >= 2**j] - [S >=
   2*2**j] + [S >= 3*2**j]`` and the carry out of the bit ``CO_j = [S >= 2**(j+1)]``.

Every positive pre-activation stays <= 256, the range that is exact in bfloat16 (negative ones may
round but stay negative: ``ffn_threshold``), and the steps of one bit are exact integer sums. Comparisons are ``$alu`` cells too (Yosys's ``alumacc`` turns ``<``,
``>=``, ``-`` into them); the ``macro`` synthesis flow keeps ``$alu`` cells and maps the rest to LUTs.

``expand`` returns the circuit as data (``ThresholdFunction`` per produced bit, internal nets
numbered from a counter the caller owns); ``evaluate`` runs it on integers, which is how the tests
check it against the netlist simulator's ``$alu`` without any model.
"""

import itertools
from dataclasses import dataclass

import numpy as np

from .errors import UnsupportedDesignError
from .gadgets.ffn_threshold import Neuron
from .ir import CONST0, CONST1, CONSTX, Cell
from .logic import lone_cell_netlist
from .validate import Problem

GROUP = 8          # blocks per lookahead group (2**8: the bfloat16-exact range)
SHIFT_CELLS = ("$shl", "$shr", "$sshl", "$sshr", "$shift", "$shiftx")
REDUCE_CELLS = ("$reduce_and", "$reduce_or", "$reduce_bool", "$logic_not", "$eq", "$ne")
MUL_CELLS = ("$mul", "$macc_v2")
DIV_CELLS = ("$div", "$mod", "$divfloor", "$modfloor")     # divider.py
MACRO_CELLS = ("$alu",) + SHIFT_CELLS + REDUCE_CELLS + MUL_CELLS + DIV_CELLS
MAX_SHIFT_AMOUNT_BITS = 8


@dataclass(frozen=True, slots=True)
class Step:
    """``sign * [sum(w * lit) >= theta]`` with lit = net, or 1 - net when ``inverted``."""
    terms: tuple[tuple[int, bool, int], ...]      # (net, inverted, weight)
    theta: int
    sign: int

    def neuron_count(self) -> int:
        lo = 1 - self.theta + sum(w for _, _, w in self.terms if w < 0)
        hi = 1 - self.theta + sum(w for _, _, w in self.terms if w > 0)
        return 0 if hi <= 0 else 1 if (lo >= 1 or hi == 1) else 2


@dataclass(frozen=True, slots=True)
class ThresholdFunction:
    """``out`` = sum of ``steps`` (the construction guarantees a 0/1 result for every input)."""
    out: int
    steps: tuple[Step, ...]

    @property
    def support(self) -> tuple[int, ...]:
        return tuple(sorted({n for s in self.steps for n, _, _ in s.terms}))

    def relus(self) -> list[tuple[tuple, int, int]]:
        """The ReLUs computing ``out`` as ``(terms, bias, weight)``: ``out = sum weight *
        relu(sum(terms) + bias)``. Each step is ``relu(m) - relu(m - 1)`` (m = sum - theta + 1; one
        ReLU when m <= 1, a constant when m >= 1 always: ``ffn_threshold.threshold_gate``), and the
        steps' ReLUs that coincide are one neuron with the weights summed: a counter's steps
        ``[V >= t]`` for consecutive t share all but one ReLU each (an n-input parity costs n + 1
        neurons instead of 2n). Exact: the same integer sum, down-projection weights of 2 instead of
        two weights of 1."""
        merged: dict = {}
        for s in self.steps:
            lo = 1 - s.theta + sum(w for _, _, w in s.terms if w < 0)
            hi = 1 - s.theta + sum(w for _, _, w in s.terms if w > 0)
            if hi <= 0:
                continue
            if lo >= 1:
                parts = [(((), 1), s.sign)]
            elif hi == 1:
                parts = [((s.terms, 1 - s.theta), s.sign)]
            else:
                parts = [((s.terms, 1 - s.theta), s.sign), ((s.terms, -s.theta), -s.sign)]
            for key, w in parts:
                merged[key] = merged.get(key, 0) + w
        return [(terms, bias, w) for (terms, bias), w in merged.items() if w]

    @property
    def cost(self) -> int:
        return len(self.relus())

    def neurons(self, layout, pairs: dict) -> list[Neuron]:
        plus, minus = layout.pair(pairs[self.out])
        return [Neuron(tuple((layout.pair(pairs[n])[1 if inv else 0], w) for n, inv, w in terms), bias,
                       ((plus, w), (minus, -w)))
                for terms, bias, w in self.relus()]

    def value(self, bits: dict) -> int:
        v = 0
        for s in self.steps:
            total = sum(w * ((1 - bits[n]) if inv else bits[n]) for n, inv, w in s.terms)
            v += s.sign * (total >= s.theta)
        return v


class _Builder:
    """Collects functions; folds constant literals into thresholds."""

    def __init__(self, next_net: int, cell: Cell):
        self.next_net = next_net
        self.cell = cell
        self.functions: list[ThresholdFunction] = []
        self.names: dict[int, str] = {}

    def new_net(self, name: str) -> int:
        n = self.next_net
        self.next_net += 1
        self.names[n] = f"{self.cell.name}.{name}"
        return n

    @staticmethod
    def step(terms, theta: int, sign: int = 1) -> Step:
        kept = []
        for n, inv, w in terms:
            if w == 0:
                continue
            if n in (CONST0, CONST1, CONSTX):
                bit = 1 if n == CONST1 else 0           # x is 0, as in the simulator
                theta -= w * (1 - bit if inv else bit)
            else:
                kept.append((n, inv, w))
        # Merge repeated literals (sign extension repeats the top bit).
        merged: dict = {}
        for n, inv, w in kept:
            merged[(n, inv)] = merged.get((n, inv), 0) + w
        return Step(tuple((n, inv, w) for (n, inv), w in sorted(merged.items()) if w), theta, sign)

    def emit(self, out: int, steps) -> int:
        self.functions.append(ThresholdFunction(out, tuple(steps)))
        return out


def _lit_value(n: int, inv: bool):
    """A literal's constant value, or None when it is a signal."""
    if n in (CONST0, CONST1, CONSTX):
        bit = 1 if n == CONST1 else 0
        return 1 - bit if inv else bit
    return None


def expand_alu(cell: Cell, next_net: int, used: set) -> tuple[list[ThresholdFunction], dict, int]:
    """The threshold circuit of a ``$alu`` cell for the output bits in ``used``.

    Returns (functions in dependency order, {internal net: name}, next free net number)."""
    p = {k: int(v) for k, v in cell.params if k in ("A_SIGNED", "B_SIGNED", "A_WIDTH", "B_WIDTH", "Y_WIDTH")}
    W = p["Y_WIDTH"]
    ins = dict(cell.inputs)
    outs = dict(cell.outputs)

    def extend(sig, signed):
        sig = list(sig[:W])
        fill = sig[-1] if (signed and sig) else CONST0
        return sig + [fill] * (W - len(sig))

    signed = bool(p["A_SIGNED"] and p["B_SIGNED"])     # Yosys: signed only when both operands are
    A = extend(ins["A"], signed)
    B = extend(ins["B"], signed)
    (bi,), (ci,) = ins["BI"], ins["CI"]
    b = _Builder(next_net, cell)
    # The second operand's literals: B, ~B, or B ^ BI through an XOR layer when BI is a signal.
    if bi in (CONST0, CONST1, CONSTX):
        BB = [(n, bi == CONST1) for n in B]
    else:
        BB = []
        for i, n in enumerate(B):
            if n in (CONST0, CONST1, CONSTX):
                BB.append((bi, n == CONST1))            # const ^ BI
                continue
            x = b.new_net(f"bb[{i}]")
            b.emit(x, [b.step([(n, False, 1), (bi, False, 1)], 1, 1),
                       b.step([(n, False, 1), (bi, False, 1)], 2, -1)])
            BB.append((x, False))
    AA = [(n, False) for n in A]

    want = lambda port, i: port in outs and outs[port][i] in used           # noqa: E731
    # X = AA ^ BB
    for i in range(W):
        if want("X", i):
            t = [(*AA[i], 1), (*BB[i], 1)]
            b.emit(outs["X"][i], [b.step(t, 1, 1), b.step(t, 2, -1)])
    _add(b, AA, BB, ci, {i: outs["Y"][i] for i in range(W) if want("Y", i)},
         {i: outs["CO"][i] for i in range(W) if want("CO", i)})
    return b.functions, b.names, b.next_net


def _add(b: _Builder, AA, BB, ci, sums: dict, carries: dict) -> None:
    """The sum bits ``sums`` ({bit: output net}) and carry-out bits ``carries`` of AA + BB + ci
    (literal lists, LSB first): the carry-lookahead of the module docstring, 3 levels at most for
    up to 8 blocks."""
    need = sorted(set(sums) | set(carries))
    if not need:
        return
    blocks = _blocks(AA, BB, ci)
    block_of = {i: k for k, blk in enumerate(blocks) for i in blk}
    carry = _block_carries(b, blocks[:block_of[need[-1]] + 1], AA, BB, ci)
    for i in need:
        k = block_of[i]
        lo = blocks[k][0]
        terms = [t for m in range(lo, i + 1) for t in ((*AA[m], 1 << (m - lo)), (*BB[m], 1 << (m - lo)))]
        terms.append((*carry[k], 1))
        unit = 1 << (i - lo)
        if i in sums:
            b.emit(sums[i], [b.step(terms, unit, 1), b.step(terms, 2 * unit, -1), b.step(terms, 3 * unit, 1)])
        if i in carries:
            b.emit(carries[i], [b.step(terms, 2 * unit, 1)])


def _blocks(AA, BB, ci) -> list[list[int]]:
    """Bit positions split into lookahead blocks: as long as a block's largest sum (with its carry
    in) is at most 2**8 (every step's positive pre-activation then stays <= 256), so bits that are
    constant (zero extension, an increment's constant operand) cost no extra block."""
    def most(lit):
        v = _lit_value(*lit)
        return 1 if v is None else v

    blocks, cur = [], []
    for i in range(len(AA)):
        cand = cur + [i]
        carry_in = most((ci, False)) if not blocks else 1
        top = carry_in + sum((most(AA[t]) + most(BB[t])) << (t - cand[0]) for t in cand)
        if top > 256 and cur:
            blocks.append(cur)
            cur = [i]
        else:
            cur = cand
    return blocks + [cur]


def _block_carries(b: _Builder, blocks, AA, BB, ci) -> list[tuple[int, bool]]:
    """Literals of the carry into each block (block 0: CI itself)."""
    carry = [(ci, False)]
    if len(blocks) == 1:
        return carry
    # Level 1: generate / generate-or-propagate of each block but the last (block 0 includes CI).
    xy = []
    for k, blk in enumerate(blocks[:-1]):
        lo, w = blk[0], len(blk)
        terms = [t for m in blk for t in ((*AA[m], 1 << (m - lo)), (*BB[m], 1 << (m - lo)))]
        if k == 0:
            terms.append((ci, False, 1))
        y = b.new_net(f"gen[{k}]")
        b.emit(y, [b.step(terms, 1 << w)])
        if k == 0:
            x = y                                  # CI is inside: block 0 only generates
        else:
            x = b.new_net(f"prop[{k}]")
            b.emit(x, [b.step(terms, (1 << w) - 1)])
        xy.append((x, y))
    # Level 2: within each group of GROUP blocks, the carry from the group's own blocks; across
    # groups (more than GROUP blocks), one more level over group generate/propagate.
    n = len(blocks)
    group_in: dict[int, tuple[int, bool]] = {0: (CONST0, False)}
    groups = [list(range(s, min(s + GROUP, n))) for s in range(0, n, GROUP)]
    if len(groups) > 1:
        gxy = []
        for g, members in enumerate(groups[:-1]):
            terms = [t for m in members for t in ((xy[m][0], False, 1 << (m - members[0])),
                                                  (xy[m][1], False, 1 << (m - members[0])))]
            gy = b.new_net(f"group_gen[{g}]")
            b.emit(gy, [b.step(terms, 1 << len(members))])
            gx = b.new_net(f"group_prop[{g}]")
            b.emit(gx, [b.step(terms, (1 << len(members)) - 1)])
            gxy.append((gx, gy))
        if len(gxy) > GROUP:
            raise UnsupportedDesignError([Problem(f"cell {b.cell.name} ($alu)", b.cell.src,
                                                  f"adders of more than {GROUP * GROUP} lookahead blocks "
                                                  f"(about 450 bits) are not supported as macros")])
        for g in range(1, len(groups)):
            terms = [t for h in range(g) for t in ((gxy[h][0], False, 1 << h), (gxy[h][1], False, 1 << h))]
            c = b.new_net(f"group_carry[{g}]")
            b.emit(c, [b.step(terms, 1 << g)])
            group_in[g] = (c, False)
    for k in range(1, n):
        g, first = k // GROUP, (k // GROUP) * GROUP
        if k == first:
            carry.append(group_in[g])
            continue
        if k == 1:                                   # block 0 holds CI: its generate is the carry
            carry.append((xy[0][1], False))
            continue
        terms = [t for m in range(first, k) for t in ((xy[m][0], False, 1 << (m - first)),
                                                      (xy[m][1], False, 1 << (m - first)))]
        terms.append((*group_in[g], 1))               # the group's carry in enters at the bottom
        c = b.new_net(f"carry[{k}]")
        b.emit(c, [b.step(terms, 1 << (k - first))])
        carry.append((c, False))
    return carry


def shift_table(cell: Cell) -> list[list]:
    """``table[v][i]``: what output bit i of a shift cell is when the amount is v: ``("a", j)`` (bit j
    of A), or the constant 0/1. Found by simulating the cell (the one definition of its semantics) on
    A = 0 and A = 1 << j for every amount; a shift is a selection, so exactly one A bit (or none) can
    change an output bit, which is checked."""
    from .sim import Simulator

    ins, outs = dict(cell.inputs), dict(cell.outputs)
    A, B, Y = ins["A"], ins["B"], outs["Y"]
    aw, bw = len(A), len(B)
    # A fresh netlist over the cell's own (renumbered) ports.
    a = tuple(range(3, 3 + aw))
    b = tuple(range(3 + aw, 3 + aw + bw))
    y = tuple(range(3 + aw + bw, 3 + aw + bw + len(Y)))
    mapping = dict(zip(A + B + Y, a + b + y))
    ren = lambda sig: tuple(n if n in (CONST0, CONST1, CONSTX) else mapping[n] for n in sig)  # noqa: E731
    solo = Cell(cell.name, cell.type, cell.params, (("A", ren(A)), ("B", ren(B))), (("Y", ren(Y)),), "")
    nl = lone_cell_netlist(solo, [("a", a), ("b", b)], [("y", y)])
    amounts = 1 << bw
    lanes = amounts * (aw + 1)
    sim = Simulator(nl, batch=max(2, lanes))
    av = [0 if j == aw else 1 << j for v in range(amounts) for j in range(aw + 1)]
    bv = [v for v in range(amounts) for j in range(aw + 1)]
    pad = max(2, lanes) - lanes
    out = sim.step({"a": np.array(av + [0] * pad, dtype=object), "b": np.array(bv + [0] * pad, dtype=object)})["y"]
    table = []
    for v in range(amounts):
        row = []
        base = int(out[v * (aw + 1) + aw])
        for i in range(len(Y)):
            b0 = (base >> i) & 1
            flips = [j for j in range(aw) if ((int(out[v * (aw + 1) + j]) >> i) & 1) != b0]
            if len(flips) > 1 or (flips and b0):
                raise AssertionError(f"{cell.type} {cell.name}: output bit {i} at amount {v} is not a selection")
            row.append(("a", flips[0]) if flips else b0)
        table.append(row)
    return table


RUN_MIN = 5       # a run of this many consecutive amounts with one selection becomes a range test


def expand_shift(cell: Cell, next_net: int, used: set):
    """A shift by a variable amount in two layers: a one-hot decoder of the amount (one neuron per
    value), then every output bit as the OR over amounts of [amount == v] AND (its selected A bit):
    one neuron per (bit, amount) pair whose selection is not constant 0. Where RUN_MIN or more
    consecutive amounts select the same bit (an arithmetic shift's fill: up to the whole width), the
    run is one range test on the amount's bits instead, ``[v >= lo] - [v >= hi + 1]`` each ANDed
    with the bit (the bit weighted 2**len(B) over the amount's value, a threshold step of two
    neurons; exact: the amount's value and the weight stay below 2**(len(B) + 1) <= 512, and every
    positive pre-activation <= 2**len(B)), so a 33-bit arithmetic right shift by 5 bits costs ~600
    neurons instead of 1,024, in the same two layers."""
    ins, outs = dict(cell.inputs), dict(cell.outputs)
    A, B, Y = ins["A"], ins["B"], outs["Y"]
    if len(B) > MAX_SHIFT_AMOUNT_BITS:
        raise UnsupportedDesignError([Problem(f"cell {cell.name} ({cell.type})", cell.src,
                                              f"a {len(B)}-bit shift amount; macros take at most "
                                              f"{MAX_SHIFT_AMOUNT_BITS}")])
    table = shift_table(cell)
    amounts = 1 << len(B)
    b = _Builder(next_net, cell)
    possible = [v for v in range(amounts)
                if b.step([(n, not (v >> k) & 1, 1) for k, n in enumerate(B)], len(B)).neuron_count()]
    # per output bit: the amounts decoded one by one and the runs tested as ranges
    plans = {}
    for i, out in enumerate(Y):
        if out not in used:
            continue
        singles, runs, v = [], [], 0
        while v < amounts:
            sel = table[v][i]
            end = v
            while end + 1 < amounts and table[end + 1][i] == sel:
                end += 1
            if sel != 0:
                if end - v + 1 >= RUN_MIN:
                    runs.append((sel, v, end))
                else:
                    singles += [(sel, u) for u in range(v, end + 1)]
            v = end + 1
        plans[i] = (singles, runs)
    needed = {u for singles, _ in plans.values() for _, u in singles}
    decode = {}
    for v in possible:
        if v not in needed:
            continue
        d = b.new_net(f"amount=={v}")
        b.emit(d, [b.step([(n, not (v >> k) & 1, 1) for k, n in enumerate(B)], len(B))])
        decode[v] = d
    value = [(n, False, 1 << k) for k, n in enumerate(B)]
    for i, (singles, runs) in plans.items():
        steps = []
        for sel, v in singles:
            if v not in decode:
                continue                               # a constant amount bit rules v out
            if sel == 1:
                steps.append(b.step([(decode[v], False, 1)], 1))
            else:
                steps.append(b.step([(decode[v], False, 1), (A[sel[1]], False, 1)], 2))
        for sel, lo, hi in runs:
            lit = [] if sel == 1 else [(A[sel[1]], False, amounts)]
            w = 0 if sel == 1 else amounts
            steps.append(b.step(value + lit, lo + w))
            if hi + 1 < amounts:
                steps.append(b.step(value + lit, hi + 1 + w, -1))
        b.emit(Y[i], steps)
    return b.functions, b.names, b.next_net


def _extended(sig, width: int, signed: bool) -> list:
    """``sig`` extended to ``width`` bits as Yosys does (sign bit or 0)."""
    sig = list(sig)
    fill = sig[-1] if signed and sig else CONST0
    return sig + [fill] * (width - len(sig))


def expand_reduce(cell: Cell, next_net: int, used: set):
    """Wide reductions and (in)equalities as single thresholds instead of LUT trees.

    ``$reduce_and`` = [sum a >= n]; ``$reduce_or``/``$reduce_bool`` = [sum a >= 1]; ``$logic_not`` =
    [sum (1 - a) >= n]. ``$eq``/``$ne``: the per-bit mismatch is a literal where one side is
    constant (one layer in all) and an XOR (``[a + b >= 1] - [a + b >= 2]``) where both are signals
    (two layers); then [no mismatch] or [some mismatch]. Every positive pre-activation is <= the
    width (<= 256 keeps bfloat16 exact; wider cells are refused). Output bits above 0 are 0."""
    ins, outs = dict(cell.inputs), dict(cell.outputs)
    Y = outs["Y"]
    b = _Builder(next_net, cell)
    p = {k: int(v) for k, v in cell.params if k in ("A_SIGNED", "B_SIGNED")}
    if cell.type in ("$eq", "$ne"):
        signed = bool(p.get("A_SIGNED")) and bool(p.get("B_SIGNED"))
        w = max(len(ins["A"]), len(ins["B"]))
        A, B = _extended(ins["A"], w, signed), _extended(ins["B"], w, signed)
        mism = []                               # literals that are 1 where the bits differ
        for x, y in zip(A, B):
            cx, cy = _lit_value(x, False), _lit_value(y, False)
            if cx is not None and cy is not None:
                mism.append((CONST1 if cx != cy else CONST0, False))
            elif cx is not None or cy is not None:
                sig, c = (y, cx) if cx is not None else (x, cy)
                mism.append((sig, c == 1))
            else:
                d = b.new_net(f"xor{len(mism)}")
                b.emit(d, [b.step([(x, False, 1), (y, False, 1)], 1),
                           b.step([(x, False, 1), (y, False, 1)], 2, -1)])
                mism.append((d, False))
        lits = mism
        any_set = cell.type == "$ne"
    else:
        lits = [(n, False) for n in ins["A"]]
        if cell.type == "$logic_not":
            lits, any_set = [(n, True) for n in ins["A"]], False
        else:
            any_set = cell.type != "$reduce_and"
    if len(lits) > 256:
        raise UnsupportedDesignError([Problem(f"cell {cell.name} ({cell.type})", cell.src,
                                              f"{len(lits)} inputs; the reduction macro takes at most 256")])
    for i, out in enumerate(Y):
        if out not in used:
            continue
        if i:
            b.emit(out, [])
        elif any_set:
            b.emit(out, [b.step([(n, inv, 1) for n, inv in lits], 1)])
        elif cell.type == "$eq":
            b.emit(out, [b.step([(n, not inv, 1) for n, inv in lits], len(lits))])
        else:
            b.emit(out, [b.step([(n, inv, 1) for n, inv in lits], len(lits))])
    return b.functions, b.names, b.next_net


MAX_COLUMN = 256          # a column count (or a slice's value) must stay bfloat16-exact
MAX_SLICE_VALUE = 64      # a multi-column counter only where its value is small (its cost grows with it)


def _normalize(cols: list[list]) -> list[list]:
    """Columns of literals (weight 2**c each) with every net at most once per column: x twice is x
    once a column up, x and not-x together are the constant 1, and constant 1s carry upwards; what
    carries past the top is dropped (the sum is taken modulo 2**len(cols))."""
    W = len(cols)
    cols = [list(c) for c in cols]
    for c in range(W):
        counts: dict = {}
        for lit in cols[c]:
            v = _lit_value(*lit)
            if v == 0:
                continue
            key = (CONST1, False) if v == 1 else lit
            counts[key] = counts.get(key, 0) + 1
        for n, inv in list(counts):
            if n != CONST1 and not inv and (n, True) in counts:      # x + (1 - x) = 1
                both = min(counts[(n, False)], counts[(n, True)])
                counts[(n, False)] -= both
                counts[(n, True)] -= both
                counts[(CONST1, False)] = counts.get((CONST1, False), 0) + both
        cols[c] = []
        for lit, k in counts.items():
            if k & 1:
                cols[c].append(lit)
            if k >> 1 and c + 1 < W:
                cols[c + 1] += [lit] * (k >> 1)
    return cols


def _counter_bits(b: _Builder, lits_by_weight: list[tuple[tuple, int]], lo: int, W: int, name: str,
                  out: list[list]) -> None:
    """One counter: V = sum weight * literal over ``lits_by_weight`` ((net, inv), weight); its bits
    go to columns lo, lo + 1, ... (below W) of ``out``, each bit j as the alternating sum of
    ``[V >= t * 2**j]`` (one level; every bit's steps are ReLUs of V itself, which
    ``ffn_threshold.merge_neurons`` makes one set for the whole counter)."""
    terms = [(n, inv, w) for (n, inv), w in lits_by_weight]
    vmax = sum(w * (1 if _lit_value(n, inv) is None else _lit_value(n, inv)) for n, inv, w in terms)
    for j in range(vmax.bit_length()):
        if lo + j >= W:
            break
        unit = 1 << j
        steps = [b.step(terms, t * unit, 1 if t % 2 else -1) for t in range(1, vmax // unit + 1)]
        net = b.new_net(f"{name}.bit{j}")
        b.emit(net, steps)
        out[lo + j].append((net, False))


def _reduce_level(b: _Builder, cols: list[list], level: int) -> list[list]:
    """One level of threshold counters: the columns of height >= 3 (or all of them, in slices of k
    columns, when that already leaves every column at most 2 high and the slices' values stay
    small) replaced by their counts' bits."""
    W = len(cols)
    heights = [len(c) for c in cols]

    def plan(k):
        slices, new = [], [0] * W
        c = 0
        while c < W:
            if k == 1 and heights[c] <= 2:
                new[c] += heights[c]
                c += 1
                continue
            members = list(range(c, min(c + k, W)))
            value = sum(heights[m] << (m - c) for m in members)
            slices.append((c, members, value))
            for j in range(value.bit_length()):
                if c + j < W:
                    new[c + j] += 1
            c += len(members)
        return slices, max(new, default=0)

    chosen = None
    for k in (2, 3, 4):
        slices, top = plan(k)
        if top <= 2 and all(v <= MAX_SLICE_VALUE for _, _, v in slices):
            chosen = slices
            break
    if chosen is None:
        chosen, _ = plan(1)
    out = [[] for _ in range(W)]
    sliced = {m for _, members, _ in chosen for m in members}
    for c in range(W):
        if c not in sliced:
            out[c] += cols[c]
    for c, members, _ in chosen:
        lits = [(lit, 1 << (m - c)) for m in members for lit in cols[m]]
        _counter_bits(b, lits, c, W, f"l{level}c{c}", out)
    return _normalize(out)


def disjoint_cubes(f, max_cubes: int = 2):
    """A plain bit function (``logic.BitFunction``) of at most 3 inputs as at most ``max_cubes``
    disjoint cubes (each a tuple of (net, inverted) literals, true on exactly f's true minterms
    together, at most one at a time), or None: an AND of literals is one cube, a 2:1 mux two. The
    multiplier macro computes a partial product of such an operand bit as one neuron per cube
    (``absorb``), a level earlier than the bit itself."""
    k = len(f.support)
    if k > 3 or not f.table:
        return None
    ones = {p for p in range(1 << k) if f.table >> p & 1}
    cubes = []                                          # (care mask, value) over the support
    for care in range(1, 1 << k):
        for val in range(1 << k):
            if val & ~care:
                continue
            covered = {p for p in range(1 << k) if p & care == val}
            if covered <= ones:
                cubes.append((care, val, frozenset(covered)))
    best = None
    for n in range(1, max_cubes + 1):
        for combo in itertools.combinations(cubes, n):
            sets = [c[2] for c in combo]
            if sum(len(x) for x in sets) == len(ones) and frozenset().union(*sets) == ones:
                best = combo
                break
        if best:
            break
    if best is None:
        return None
    return [tuple((f.support[i], not (val >> i & 1)) for i in range(k) if care >> i & 1) for care, val, _ in best]


def expand_mul(cell: Cell, next_net: int, used: set, absorb: dict | None = None):
    """``$mul`` and ``$macc_v2`` (sums of products and addends) as a threshold multiplier:

    1. partial products: bit i of A AND bit j of B, ``[a + b >= 2]``, one neuron each (none where a
       factor bit is constant or both are the same net), in column i + j; a negated product or
       addend enters as its inverted bits plus a constant (``-x = ~x + 1``), constants as 1 bits;
       signed operands are not extended (Baugh-Wooley: a sign bit weighs ``-2**(m-1)``, so a term
       with one sign bit enters negated; an m x n signed product has m * n partial products);
    2. levels of counters: a column of height h >= 3 becomes the bits of its count (``[V >= t * 2**j]``
       summed with alternating signs: one level; h + 1 neurons for all its bits once
       ``lower.lower_logic`` merges the equal ones), which land in the columns above it; a level
       that can leave every column at most 2 high with small multi-column counters uses those
       instead (it saves a level);
    3. the two remaining rows added by the carry-lookahead adder of ``$alu`` (3 levels).

    A 32 x 32 -> 32 multiplier is 6 levels, a 32 x 16 product plus a 32-bit addend too
    (``tests/test_multiplier.py``; ``bench/compile_figures.py --macros`` prints the rest). Only the
    columns up to the highest used output bit are built. Every count stays <= 256 (bfloat16-exact):
    a column higher than that is refused.

    ``absorb`` ({net: cubes}, ``disjoint_cubes``): operand bits computed by small plain cells (an
    operand masked by an enable, a 2:1 mux of operands) whose partial products are built from the
    cells' own inputs instead, one neuron per cube and pair (``[sum of the literals >= count]``,
    the cubes disjoint, so their sum is the product bit): the multiplier then starts a level
    earlier (the scheduler passes them on its collapse pass, for bits that are late)."""
    products, addends = cell.products_and_addends()
    Y = dict(cell.outputs)["Y"]
    b = _Builder(next_net, cell)
    macc(b, products, addends, Y, [i for i, n in enumerate(Y) if n in used], absorb)
    return b.functions, b.names, b.next_net


def macc(b: _Builder, products, addends, Y, wanted: list[int], absorb: dict | None = None) -> None:
    """The threshold circuit of ``expand_mul`` into ``b``: ``Y``'s bits ``wanted`` (indices) of the
    sum of ``products`` and ``addends`` (as ``Cell.products_and_addends`` gives them), modulo
    ``2**len(Y)``. Other macros use it on their own internal nets (the divider's remainder)."""
    cell = b.cell
    if not wanted:
        return
    W = max(wanted) + 1
    cols: list[list] = [[] for _ in range(W)]
    const = 0
    pp: dict = {}
    for a_sig, b_sig, signed, neg in products:
        # signed: Baugh-Wooley instead of sign extension (the sign bit weighs -2**(m-1), so a
        # product of exactly one sign bit enters negated: its inverted literal and a constant),
        # m x n partial products instead of a W x W triangle
        A, B = list(a_sig)[:W], list(b_sig)[:W]
        sa, sb = (len(a_sig) - 1, len(b_sig) - 1) if signed else (-1, -1)
        for i, x in enumerate(A):
            for j, z in enumerate(B[:W - i]):
                vx, vz = _lit_value(x, False), _lit_value(z, False)
                if vx == 0 or vz == 0:
                    continue
                if vx == 1 or vz == 1 or x == z:
                    lit = (CONST1, False) if vx == vz == 1 else (z if vx == 1 else x, False)
                else:
                    key = (min(x, z), max(x, z))
                    if key not in pp:
                        pp[key] = b.new_net(f"pp[{x},{z}]")
                        cx = (absorb or {}).get(x, [((x, False),)])
                        cz = (absorb or {}).get(z, [((z, False),)])
                        b.emit(pp[key], [b.step([(n, inv, 1) for n, inv in u + v], len(u) + len(v))
                                         for u in cx for v in cz])
                    lit = (pp[key], False)
                if neg ^ (i == sa) ^ (j == sb):
                    lit, const = (lit[0], not lit[1]), const - (1 << (i + j))
                cols[i + j].append(lit)
    for c_sig, signed, neg in addends:
        top = len(c_sig) - 1 if signed else -1          # a signed addend's sign bit weighs -2**top
        for i, x in enumerate(list(c_sig)[:W]):
            if neg ^ (i == top):
                cols[i].append((x, True))
                const -= 1 << i
            else:
                cols[i].append((x, False))
    for i in range(W):
        if (const % (1 << W)) >> i & 1:
            cols[i].append((CONST1, False))
    cols = _normalize(cols)
    if max(len(c) for c in cols) > MAX_COLUMN:
        raise UnsupportedDesignError([Problem(f"cell {cell.name} ({cell.type})", cell.src,
                                              f"a column of {max(len(c) for c in cols)} partial products; the "
                                              f"multiplier macro takes at most {MAX_COLUMN}")])
    level = 0
    while max(len(c) for c in cols) > 2:
        level += 1
        cols = _reduce_level(b, cols, level)
    rows = [[c[k] if k < len(c) else (CONST0, False) for c in cols] for k in (0, 1)]
    _add(b, rows[0], rows[1], CONST0, {i: Y[i] for i in wanted}, {})


def expand(cell: Cell, next_net: int, used: set, absorb: dict | None = None):
    """Dispatch on the cell type (one of ``MACRO_CELLS``); ``absorb``: ``expand_mul``'s."""
    if cell.type in MUL_CELLS:
        return expand_mul(cell, next_net, used, absorb)
    if cell.type in REDUCE_CELLS:
        return expand_reduce(cell, next_net, used)
    if cell.type == "$alu":
        return expand_alu(cell, next_net, used)
    if cell.type in SHIFT_CELLS:
        return expand_shift(cell, next_net, used)
    if cell.type in DIV_CELLS:
        from .divider import expand_div, expand_wide_div, fits
        return (expand_div if fits(cell) else expand_wide_div)(cell, next_net, used)
    raise ValueError(f"no macro for {cell.type}")
