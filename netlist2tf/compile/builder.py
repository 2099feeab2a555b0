"""The threshold-circuit builder the word-level macros share (``macros``, ``divider``, ``rom``).

A produced bit is a ``ThresholdFunction``: a sum of ``Step``s ``sign * [sum(w * literal) >= theta]``
over bits of the residual (two ReLU neurons a step at most: ``ffn_threshold.threshold_gate``). A
``Builder`` numbers the internal nets of one cell's circuit and folds constant literals into the
thresholds; ``add`` is the carry-lookahead adder and ``macc`` the multiply-add column compressor
that the macros are built from (their construction: ``macros``' docstring). Every positive
pre-activation stays <= 256, the range that is exact in bfloat16.
"""

from dataclasses import dataclass, field

from netlist2tf.common import UnsupportedDesignError
from netlist2tf.gadgets import Neuron
from netlist2tf.netlist import CONST0, CONST1, CONSTX, Cell
from netlist2tf.netlist import Problem

GROUP = 8          # blocks per lookahead group (2**8: the bfloat16-exact range)


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
    support: tuple[int, ...] = field(init=False, repr=False, compare=False)    # the nets it reads, sorted
    _relus: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        # made once: the scheduler asks for them on every pass
        object.__setattr__(self, "support", tuple(sorted({n for s in self.steps for n, _, _ in s.terms})))
        object.__setattr__(self, "_relus", tuple(self._merged_relus()))

    def relus(self) -> list[tuple[tuple, int, int]]:
        """``_merged_relus``, made once."""
        return list(self._relus)

    def _merged_relus(self) -> list[tuple[tuple, int, int]]:
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
        chans = {n: layout.pair(pairs[n]) for n in self.support}
        return [Neuron(tuple((chans[n][1 if inv else 0], w) for n, inv, w in terms), bias,
                       ((plus, w), (minus, -w)))
                for terms, bias, w in self.relus()]

    def value(self, bits: dict) -> int:
        v = 0
        for s in self.steps:
            total = sum(w * ((1 - bits[n]) if inv else bits[n]) for n, inv, w in s.terms)
            v += s.sign * (total >= s.theta)
        return v


class Builder:
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


def lit_value(n: int, inv: bool):
    """A literal's constant value, or None when it is a signal."""
    if n in (CONST0, CONST1, CONSTX):
        bit = 1 if n == CONST1 else 0
        return 1 - bit if inv else bit
    return None


def add(b: Builder, AA, BB, ci, sums: dict, carries: dict) -> None:
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
        v = lit_value(*lit)
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


def _block_carries(b: Builder, blocks, AA, BB, ci) -> list[tuple[int, bool]]:
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
            v = lit_value(*lit)
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


def _counter_bits(b: Builder, lits_by_weight: list[tuple[tuple, int]], lo: int, W: int, name: str,
                  out: list[list]) -> None:
    """One counter: V = sum weight * literal over ``lits_by_weight`` ((net, inv), weight); its bits
    go to columns lo, lo + 1, ... (below W) of ``out``, each bit j as the alternating sum of
    ``[V >= t * 2**j]`` (one level; every bit's steps are ReLUs of V itself, which
    ``ffn_threshold.merge_neurons`` makes one set for the whole counter)."""
    terms = [(n, inv, w) for (n, inv), w in lits_by_weight]
    vmax = sum(w * (1 if lit_value(n, inv) is None else lit_value(n, inv)) for n, inv, w in terms)
    for j in range(vmax.bit_length()):
        if lo + j >= W:
            break
        unit = 1 << j
        steps = [b.step(terms, t * unit, 1 if t % 2 else -1) for t in range(1, vmax // unit + 1)]
        net = b.new_net(f"{name}.bit{j}")
        b.emit(net, steps)
        out[lo + j].append((net, False))


def _reduce_level(b: Builder, cols: list[list], level: int) -> list[list]:
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


def macc(b: Builder, products, addends, Y, wanted: list[int], absorb: dict | None = None) -> None:
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
                vx, vz = lit_value(x, False), lit_value(z, False)
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
    add(b, rows[0], rows[1], CONST0, {i: Y[i] for i in wanted}, {})
