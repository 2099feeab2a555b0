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

import numpy as np

from netlist2tf.common import UnsupportedDesignError
from netlist2tf.netlist import CONST0, CONST1, CONSTX, Cell
from netlist2tf.compile.divider import expand_div, expand_wide_div, fits
from netlist2tf.compile.logic import lone_cell_netlist
from netlist2tf.netlist import Problem
from netlist2tf.compile.builder import Builder, ThresholdFunction, add, lit_value, macc

SHIFT_CELLS = ("$shl", "$shr", "$sshl", "$sshr", "$shift", "$shiftx")
REDUCE_CELLS = ("$reduce_and", "$reduce_or", "$reduce_bool", "$logic_not", "$eq", "$ne")
MUL_CELLS = ("$mul", "$macc_v2")
DIV_CELLS = ("$div", "$mod", "$divfloor", "$modfloor")     # divider.py
MACRO_CELLS = ("$alu",) + SHIFT_CELLS + REDUCE_CELLS + MUL_CELLS + DIV_CELLS
MAX_SHIFT_AMOUNT_BITS = 8


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
    b = Builder(next_net, cell)
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
    add(b, AA, BB, ci, {i: outs["Y"][i] for i in range(W) if want("Y", i)},
         {i: outs["CO"][i] for i in range(W) if want("CO", i)})
    return b.functions, b.names, b.next_net


def shift_table(cell: Cell) -> list[list]:
    """``table[v][i]``: what output bit i of a shift cell is when the amount is v: ``("a", j)`` (bit j
    of A), or the constant 0/1. Found by simulating the cell (the one definition of its semantics) on
    A = 0 and A = 1 << j for every amount; a shift is a selection, so exactly one A bit (or none) can
    change an output bit, which is checked. Cells of the same shape (type, parameters, widths and
    constant A/B bits) have the same table: each shape is simulated once per process."""
    from netlist2tf.sim import Simulator

    ins, outs = dict(cell.inputs), dict(cell.outputs)
    A, B, Y = ins["A"], ins["B"], outs["Y"]
    aw, bw = len(A), len(B)
    # A fresh netlist over the cell's own (renumbered) ports.
    a = tuple(range(3, 3 + aw))
    b = tuple(range(3 + aw, 3 + aw + bw))
    y = tuple(range(3 + aw + bw, 3 + aw + bw + len(Y)))
    mapping = dict(zip(A + B + Y, a + b + y))
    ren = lambda sig: tuple(n if n in (CONST0, CONST1, CONSTX) else mapping[n] for n in sig)  # noqa: E731
    shape = (cell.type, cell.params, ren(A), ren(B), len(Y))
    if shape in _SHIFT_TABLES:
        return _SHIFT_TABLES[shape]
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
    _SHIFT_TABLES[shape] = table
    return table


_SHIFT_TABLES: dict = {}


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
    b = Builder(next_net, cell)
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
    b = Builder(next_net, cell)
    p = {k: int(v) for k, v in cell.params if k in ("A_SIGNED", "B_SIGNED")}
    if cell.type in ("$eq", "$ne"):
        signed = bool(p.get("A_SIGNED")) and bool(p.get("B_SIGNED"))
        w = max(len(ins["A"]), len(ins["B"]))
        A, B = _extended(ins["A"], w, signed), _extended(ins["B"], w, signed)
        mism = []                               # literals that are 1 where the bits differ
        for x, y in zip(A, B):
            cx, cy = lit_value(x, False), lit_value(y, False)
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
    (``tests/compile/test_multiplier.py``; ``bench/compile_figures.py --macros`` prints the rest). Only the
    columns up to the highest used output bit are built. Every count stays <= 256 (bfloat16-exact):
    a column higher than that is refused.

    ``absorb`` ({net: cubes}, ``disjoint_cubes``): operand bits computed by small plain cells (an
    operand masked by an enable, a 2:1 mux of operands) whose partial products are built from the
    cells' own inputs instead, one neuron per cube and pair (``[sum of the literals >= count]``,
    the cubes disjoint, so their sum is the product bit): the multiplier then starts a level
    earlier (the scheduler passes them on its collapse pass, for bits that are late)."""
    products, addends = cell.products_and_addends()
    Y = dict(cell.outputs)["Y"]
    b = Builder(next_net, cell)
    macc(b, products, addends, Y, [i for i, n in enumerate(Y) if n in used], absorb)
    return b.functions, b.names, b.next_net


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
        return (expand_div if fits(cell) else expand_wide_div)(cell, next_net, used)
    raise ValueError(f"no macro for {cell.type}")
