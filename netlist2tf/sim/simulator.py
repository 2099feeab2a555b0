"""The cycle-accurate netlist simulator: the golden model the compiled transformer is checked against.

The netlist is compiled once into a Python function (source generated here, then ``exec``'d) that
evaluates one clock cycle: read inputs and state, evaluate every combinational cell in dependency
order, produce the outputs, then apply the clock edge (registers, memory writes, synchronous memory
reads with their read-during-write transparency). Two code generators share all of the cell semantics
below and differ only in a handful of primitives:

* ``scalar``: one instance, Python ints (any width; fastest for a single instance);
* ``numpy``: B instances at once, one uint64 lane per instance (every signal must fit 64 bits).
  A batched run of a design with wider signals runs B scalar instances one after another instead.

Cycle semantics (what the Amaranth simulator and a waveform viewer show): in cycle k the inputs hold
their cycle-k values, outputs and named signals are sampled once everything settled, then the rising
edge moves the state to cycle k+1. Undefined values (``x`` constants, undriven bits, out-of-range
memory reads, division by zero in a bare Yosys cell) simulate as 0.

Semantics of each cell follow Yosys ``simlib.v`` / ``simcells.v`` (operands extended to the width of the
operation, signed only when both are signed, ...).
"""

import contextlib
import os
import sys
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from netlist2tf.netlist import nodes as N
from netlist2tf.common import StimulusError
from netlist2tf.netlist import find_drivers, netlist_graph
from netlist2tf.netlist import CONST0, CONST1, CONSTX, Cell, Netlist
from netlist2tf.netlist import check_netlist

U64 = np.uint64


@contextlib.contextmanager
def _any_int_digits():
    """Lift Python's limit on decimal integer strings (4,300 digits, a guard against untrusted
    input) inside the block: the simulator's generated code spells a wide signal's constants in
    decimal, and its source is ours."""
    was = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(was)


def _mask(w: int) -> int:
    return (1 << w) - 1


# ----------------------------------------------------------------------------------------------
# Scalar semantics of the cells too irregular to vectorise (used by both generators).
# ----------------------------------------------------------------------------------------------

def _signed(v: int, w: int) -> int:
    return v - (1 << w) if w and (v >> (w - 1)) & 1 else v


def _arith_generic(a: int, b: int, op: str, aw: int, bw: int, yw: int, sa: bool, sb: bool) -> int:
    """$div, $mod, $divfloor, $modfloor, $pow, $shift, $shiftx on plain ints (x -> 0)."""
    if op in ("$shift", "$shiftx"):
        w = max(aw, yw)
        av = (_signed(a, aw) & _mask(w)) if (sa and op == "$shift") else a
        bv = _signed(b, bw) if sb else b
        if bv >= 0:
            return (av >> bv) & _mask(yw) if bv < w + 64 else 0
        return (av << -bv) & _mask(yw) if -bv < yw + 1 else 0
    signed = sa and sb
    av = _signed(a, aw) if signed else a
    bv = _signed(b, bw) if signed else b
    if op == "$pow":
        if bv < 0:
            r = 1 if av == 1 else (1 if bv % 2 == 0 else -1) if av == -1 else 0
        else:
            r = pow(av, bv, 1 << yw)
        return r & _mask(yw)
    if bv == 0:
        return 0
    if op == "$div":
        q = abs(av) // abs(bv)
        r = q if (av < 0) == (bv < 0) else -q
    elif op == "$mod":
        q = abs(av) // abs(bv)
        q = q if (av < 0) == (bv < 0) else -q
        r = av - bv * q
    elif op == "$divfloor":
        r = av // bv
    else:  # $modfloor
        r = av % bv
    return r & _mask(yw)


def _lcu_generic(p: int, g: int, ci: int, w: int) -> int:
    co, c = 0, ci & 1
    for i in range(w):
        c = ((g >> i) & 1) | (((p >> i) & 1) & c)
        co |= c << i
    return co


def _sop_generic(a: int, table: tuple) -> int:
    return int(any((a & zeros) == 0 and (a & ones) == ones for zeros, ones in table))


# ----------------------------------------------------------------------------------------------
# The two code generators' primitives.
# ----------------------------------------------------------------------------------------------

class _ScalarPrims:
    batched = False

    def lit(self, v: int) -> str:
        return str(v)

    def b(self, cond: str) -> str:            # bool -> 0/1 value (Python bools are ints already)
        return f"({cond})"

    def mux(self, s: str, a: str, b: str) -> str:
        return f"({b} if {s} else {a})"

    def shl(self, a: str, b: str, yw: int) -> str:
        return f"((({a}) << ({b})) & {_mask(yw)} if ({b}) < {yw} else 0)"

    def shr(self, a: str, b: str) -> str:
        return f"(({a}) >> ({b}))"

    def parity(self, a: str) -> str:
        return f"(({a}).bit_count() & 1)"

    def generic(self, fn: str, args: list[str], consts: list[str]) -> str:
        return f"{fn}({', '.join(args + consts)})"

    def mem_read(self, mem: str, addr: str, size: int) -> str:
        return f"({mem}[{addr}] if {addr} < {size} else 0)"

    def mem_write(self, mem, addr, data, en, size, full_mask, whole_word) -> list[str]:
        if whole_word:
            return [f"if {en} and {addr} < {size}: {mem}[{addr}] = {data}"]
        return [f"if {en} and {addr} < {size}: {mem}[{addr}] = ({mem}[{addr}] & ~{en}) | ({data} & {en})"]


class _NumpyPrims:
    batched = True

    def __init__(self):
        self.consts: dict[int, str] = {}

    def lit(self, v: int) -> str:
        # Every value is a uint64 array of the batch's shape, constants included, so no operation
        # ever mixes in a NumPy scalar (whose overflow warns) or widens to int64/float64.
        if v not in self.consts:
            self.consts[v] = f"K{len(self.consts)}"
        return self.consts[v]

    def b(self, cond: str) -> str:
        return f"({cond}).astype(U64)"

    def mux(self, s: str, a: str, b: str) -> str:
        return f"WHERE({s}, {b}, {a})"

    def shl(self, a: str, b: str, yw: int) -> str:
        return f"WHERE(({b}) < {yw}, (({a}) << MIN({b}, 63)) & {_mask(yw)}, 0)"

    def shr(self, a: str, b: str) -> str:
        return f"WHERE(({b}) < 64, ({a}) >> MIN({b}, 63), 0)"

    def parity(self, a: str) -> str:
        return f"(BITCOUNT({a}) & 1).astype(U64)"

    def generic(self, fn: str, args: list[str], consts: list[str]) -> str:
        return f"VEC({fn}, ({', '.join(args)},), ({', '.join(consts)},))"

    def mem_read(self, mem: str, addr: str, size: int) -> str:
        return f"WHERE({addr} < {size}, {mem}[LANES, MIN({addr}, {size - 1})], 0)"

    def mem_write(self, mem, addr, data, en, size, full_mask, whole_word) -> list[str]:
        return [f"_sel = ({en} != 0) & ({addr} < {size})",
                "if _sel.any():",
                f"    _r = LANES[_sel]; _a = {addr}[_sel]; _e = {en}[_sel]",
                f"    {mem}[_r, _a] = ({mem}[_r, _a] & ~_e) | ({data}[_sel] & _e)"]


def _vec(fn, args, consts):
    """Apply a scalar cell function lane by lane (rare cells: division, $pow, $lcu, signed $shift)."""
    cols = [a.tolist() for a in args]
    return np.array([fn(*vals, *consts) for vals in zip(*cols)], dtype=U64)


def _numpy_namespace(batch: int, consts: dict[int, str]) -> dict:
    ns = {"U64": U64, "WHERE": np.where, "MIN": np.minimum, "BITCOUNT": np.bitwise_count,
          "VEC": _vec, "LANES": np.arange(batch)}
    for v, name in consts.items():
        ns[name] = np.full(batch, v, dtype=U64)
    return ns


#: Cell ports whose value is never built whole (read slice by slice), so their width does not count
#: against the 64-bit lanes of the numpy generator.
_SLICED_PORTS = {("$pmux", "B"), ("$bmux", "A"), ("$macc_v2", "A"), ("$macc_v2", "B"), ("$macc_v2", "C")}
_GENERIC_FUNCS = {"_arith": _arith_generic, "_lcu": _lcu_generic, "_sop": _sop_generic}


# ----------------------------------------------------------------------------------------------
# Code generation
# ----------------------------------------------------------------------------------------------

class _Codegen:
    """Builds the source of ``step(I, R, M)`` for one netlist and one set of primitives."""

    def __init__(self, netlist: Netlist, prims, clock_nets: frozenset):
        self.nl = netlist
        self.p = prims
        self.lines: list[str] = []
        self.word_of: dict[int, tuple[str, int]] = {}   # net -> (variable, bit offset)
        self.word_width: dict[str, int] = {}
        self.tmp = 0
        self.inputs = [p for p in netlist.inputs if not (set(p.bits) & clock_nets)]
        self.state_names: list[str] = []                # R[i] holds register/sync-read i
        self.state_init: list[int] = []

    # -- signals ---------------------------------------------------------------------------------
    def new_word(self, sig, var: str):
        self.word_width[var] = len(sig)
        for off, n in enumerate(sig):
            if n not in (CONST0, CONST1, CONSTX):
                self.word_of.setdefault(n, (var, off))

    def sig(self, sig) -> str:
        """Expression for the value of ``sig`` (LSB first), built from the words that drive it."""
        const, terms, i = 0, [], 0
        while i < len(sig):
            n = sig[i]
            if n not in self.word_of:
                const |= (1 if n == CONST1 else 0) << i
                i += 1
                continue
            var, off = self.word_of[n]
            j = i + 1
            while j < len(sig) and self.word_of.get(sig[j]) == (var, off + j - i):
                j += 1
            length, w = j - i, self.word_width[var]
            e = var
            if off:
                e = f"({e} >> {off})"
            if off + length < w:
                e = f"({e} & {_mask(length)})"
            if i:
                e = f"({e} << {i})"
            terms.append(e)
            i = j
        if not terms:
            return self.p.lit(const)
        if const:
            terms.append(str(const))
        return terms[0] if len(terms) == 1 else "(" + " | ".join(terms) + ")"

    def fresh(self) -> str:
        self.tmp += 1
        return f"t{self.tmp}"

    def let(self, expr: str) -> str:
        """Bind ``expr`` to a temporary (so a value used twice is computed once)."""
        if expr.isidentifier():
            return expr
        t = self.fresh()
        self.lines.append(f"    {t} = {expr}")
        return t

    def ext(self, e: str, w_from: int, w_to: int, signed: bool) -> str:
        """Extend (sign- or zero-) or truncate an expression of width w_from to w_to bits."""
        if w_to <= w_from:
            return e if w_to == w_from else f"({e} & {_mask(w_to)})"
        if not signed or w_from == 0:
            return e
        s = 1 << (w_from - 1)
        return f"(((({e}) ^ {s}) - {s}) & {_mask(w_to)})"

    # -- cells ---------------------------------------------------------------------------------
    def cell(self, c: Cell):
        ins = {k: self.sig(v) for k, v in c.inputs}
        width = {k: len(v) for k, v in c.inputs + c.outputs}
        out = {}
        t = c.type
        if t.startswith("$_"):
            out["Y"] = self.gate(t, ins)
        elif t in ("$alu", "$fa", "$lcu"):
            out = self.arith_multi(c, ins, width)
        else:
            out["Y"] = self.word(c, ins, width)
        for port, sig in c.outputs:
            var = f"c{len(self.word_width)}"
            self.lines.append(f"    {var} = {out[port]}")
            self.new_word(sig, var)

    def gate(self, t: str, i: dict) -> str:
        a, b = i.get("A"), i.get("B")
        simple = {
            "$_BUF_": lambda: a, "$_NOT_": lambda: f"(1 ^ {a})",
            "$_AND_": lambda: f"({a} & {b})", "$_NAND_": lambda: f"(1 ^ ({a} & {b}))",
            "$_OR_": lambda: f"({a} | {b})", "$_NOR_": lambda: f"(1 ^ ({a} | {b}))",
            "$_XOR_": lambda: f"({a} ^ {b})", "$_XNOR_": lambda: f"(1 ^ {a} ^ {b})",
            "$_ANDNOT_": lambda: f"({a} & (1 ^ {b}))", "$_ORNOT_": lambda: f"({a} | (1 ^ {b}))",
            "$_AOI3_": lambda: f"(1 ^ (({a} & {b}) | {i.get('C')}))",
            "$_OAI3_": lambda: f"(1 ^ (({a} | {b}) & {i.get('C')}))",
            "$_AOI4_": lambda: f"(1 ^ (({a} & {b}) | ({i.get('C')} & {i.get('D')})))",
            "$_OAI4_": lambda: f"(1 ^ (({a} | {b}) & ({i.get('C')} | {i.get('D')})))",
        }
        if t in simple:
            return simple[t]()
        if t in ("$_MUX_", "$_NMUX_"):
            s = self.let(i["S"])
            e = f"(({a} & (1 ^ {s})) | ({b} & {s}))"
            return e if t == "$_MUX_" else f"(1 ^ {e})"
        n_sel = {"$_MUX4_": 2, "$_MUX8_": 3, "$_MUX16_": 4}[t]
        data = " | ".join(f"({i[chr(65 + k)]} << {k})" for k in range(1 << n_sel))
        idx = " | ".join(f"({i['STUV'[k]]} << {k})" for k in range(n_sel))
        return f"((({data}) >> ({idx})) & 1)"

    def arith_multi(self, c: Cell, i: dict, width: dict) -> dict:
        t = c.type
        if t == "$fa":
            a, b, cc = (self.let(i[k]) for k in "ABC")
            return {"Y": f"({a} ^ {b} ^ {cc})", "X": f"(({a} & {b}) | ({a} & {cc}) | ({b} & {cc}))"}
        if t == "$lcu":
            w = int(c.param("WIDTH"))
            return {"CO": self.p.generic("_lcu", [i["P"], i["G"], i["CI"]], [str(w)])}
        yw = int(c.param("Y_WIDTH"))
        signed = bool(c.param("A_SIGNED")) and bool(c.param("B_SIGNED"))
        m = _mask(yw)
        a = self.let(self.ext(i["A"], width["A"], yw, signed))
        b0 = self.let(self.ext(i["B"], width["B"], yw, signed))
        bi = self.let(i["BI"])
        b = self.let(f"({b0} ^ ({bi} * {m}))")
        y = self.let(f"(({a} + {b} + {i['CI']}) & {m})")
        return {"Y": y, "X": f"({a} ^ {b})",
                "CO": f"((({a} & {b}) | (({a} ^ {b}) & ({y} ^ {a} ^ {b}))) & {m})"}

    def word(self, c: Cell, i: dict, width: dict) -> str:
        t, p = c.type, self.p
        P = lambda k, d=None: c.param(k, d)
        yw = len(c.port("Y"))
        m = _mask(yw)
        aw, bw = width.get("A", 0), width.get("B", 0)
        sa, sb = bool(P("A_SIGNED", 0)), bool(P("B_SIGNED", 0))
        both = sa and sb
        A, B = i.get("A"), i.get("B")

        if t in ("$not", "$pos", "$buf", "$neg"):
            a = self.ext(A, aw, yw, sa)
            return {"$not": f"(~{a} & {m})", "$neg": f"((~{a} + 1) & {m})"}.get(t, a)
        if t in ("$and", "$or", "$xor", "$xnor", "$bweqx"):
            a, b = self.ext(A, aw, yw, both), self.ext(B, bw, yw, both)
            if t == "$bweqx":
                a, b = A, B
            op = {"$and": "&", "$or": "|", "$xor": "^", "$xnor": "^", "$bweqx": "^"}[t]
            e = f"({a} {op} {b})"
            return f"(~{e} & {m})" if t in ("$xnor", "$bweqx") else e
        if t.startswith("$reduce_") or t == "$logic_not":
            a = self.let(A)
            r = {"$reduce_and": p.b(f"{a} == {_mask(aw)}"), "$reduce_or": p.b(f"{a} != 0"),
                 "$reduce_bool": p.b(f"{a} != 0"), "$logic_not": p.b(f"{a} == 0"),
                 "$reduce_xor": p.parity(a), "$reduce_xnor": f"(1 ^ {p.parity(a)})"}[t]
            return r
        if t in ("$logic_and", "$logic_or"):
            op = "&" if t == "$logic_and" else "|"
            return p.b(f"({A} != 0) {op} ({B} != 0)")
        if t in ("$shl", "$sshl", "$shr", "$sshr"):
            w = max(aw, yw)
            a = self.let(self.ext(A, aw, w, sa))
            b = self.let(B)
            if t in ("$shl", "$sshl"):
                return p.shl(a, b, yw)
            if t == "$sshr" and sa:
                s = 1 << (w - 1)
                bb = self.let(p.mux(f"{b} < {w - 1}", p.lit(w - 1), b))
                return f"(((({a} ^ {s}) >> {bb}) - ({p.lit(s)} >> {bb})) & {m})"
            return f"({p.shr(a, b)} & {m})"
        if t in ("$shift", "$shiftx"):
            if not sb:
                w = max(aw, yw)
                a = self.let(self.ext(A, aw, w, sa and t == "$shift"))
                return f"({p.shr(a, self.let(B))} & {m})"
            return p.generic("_arith", [A, B], [repr(t), str(aw), str(bw), str(yw), str(sa), str(sb)])
        if t in ("$lt", "$le", "$gt", "$ge", "$eq", "$ne", "$eqx", "$nex"):
            w = max(aw, bw)
            a, b = self.ext(A, aw, w, both), self.ext(B, bw, w, both)
            if both and t in ("$lt", "$le", "$gt", "$ge"):
                s = 1 << (w - 1)
                a, b = f"({a} ^ {s})", f"({b} ^ {s})"
            op = {"$lt": "<", "$le": "<=", "$gt": ">", "$ge": ">=", "$eq": "==", "$ne": "!=",
                  "$eqx": "==", "$nex": "!="}[t]
            return p.b(f"{a} {op} {b}")
        if t == "$macc_v2":
            # the sum of (negated) products and addends, each extended to Y_WIDTH (wrapping mod 2**64
            # in the NumPy lanes is exact below that width; wider values run on Python integers)
            products, addends = c.products_and_addends()
            e = p.lit(0)
            for a_sig, b_sig, signed, neg in products:
                a = self.ext(self.sig(a_sig), len(a_sig), yw, signed)
                b = self.ext(self.sig(b_sig), len(b_sig), yw, signed)
                e = f"({e} {'-' if neg else '+'} ({a} * {b}))"
            for c_sig, signed, neg in addends:
                e = f"({e} {'-' if neg else '+'} {self.ext(self.sig(c_sig), len(c_sig), yw, signed)})"
            return f"({e} & {m})"
        if t in ("$add", "$sub", "$mul"):
            a, b = self.ext(A, aw, yw, both), self.ext(B, bw, yw, both)
            op = {"$add": "+", "$sub": "-", "$mul": "*"}[t]
            return f"(({a} {op} {b}) & {m})"
        if t in ("$div", "$mod", "$divfloor", "$modfloor", "$pow"):
            return p.generic("_arith", [A, B], [repr(t), str(aw), str(bw), str(yw), str(sa), str(sb)])
        if t == "$mux":
            return p.mux(i["S"], A, B)
        if t == "$pmux":
            # B concatenates S_WIDTH cases; each is read from its own drivers so that no value
            # wider than the cell's output is ever built (numpy lanes hold 64 bits).
            w, bsig = int(P("WIDTH")), c.port("B")
            s = self.let(i["S"])
            e = A
            for k in reversed(range(int(P("S_WIDTH")))):
                e = p.mux(f"(({s} >> {k}) & 1)", e, self.sig(bsig[k * w:(k + 1) * w]))
            return e
        if t == "$bmux":
            w, asig, s = int(P("WIDTH")), c.port("A"), self.let(i["S"])
            e = self.sig(asig[:w])
            for k in range(1, len(asig) // w):
                e = p.mux(p.b(f"{s} == {k}"), e, self.sig(asig[k * w:(k + 1) * w]))
            return e
        if t == "$demux":
            w = int(P("WIDTH"))
            return f"(({A} << ({i['S']} * {w})) & {m})"
        if t == "$bwmux":
            s = self.let(i["S"])
            return f"((({A} & ~{s}) | ({B} & {s})) & {m})"
        if t == "$lut":
            lut = P("LUT")
            lut = int(lut, 2) if isinstance(lut, str) else lut
            return f"(({p.lit(lut)} >> {A}) & 1)"
        if t == "$sop":
            nin, depth = int(P("WIDTH")), int(P("DEPTH"))
            table = P("TABLE")
            tbits = format(table, f"0{2 * nin * depth}b") if isinstance(table, int) else table
            tbits = tbits[::-1]
            terms = []
            for d in range(depth):
                zeros = sum(1 << j for j in range(nin) if tbits[2 * nin * d + 2 * j] == "1")
                ones = sum(1 << j for j in range(nin) if tbits[2 * nin * d + 2 * j + 1] == "1")
                terms.append((zeros, ones))
            return p.generic("_sop", [A], [repr(tuple(terms))])
        if t == "$concat":
            return f"({A} | ({B} << {aw}))"
        if t == "$slice":
            return f"(({A} >> {int(P('OFFSET'))}) & {m})"
        raise AssertionError(f"validated cell type {t} has no simulator code")  # validate.py lists it

    # -- whole step function ---------------------------------------------------------------------
    def build(self, g: nx.DiGraph, signals, trace: bool) -> str:
        nl, p = self.nl, self.p
        L = self.lines
        for k, port in enumerate(self.inputs):
            var = f"i{k}"
            L.append(f"    {var} = I[{k}]")
            self.new_word(port.bits, var)
        regs_arst = []
        for r in nl.registers:
            k = len(self.state_names)
            self.state_names.append(f"reg:{r.name}")
            self.state_init.append(r.init)
            L.append(f"    s{k} = R[{k}]")
            self.new_word(r.q, f"s{k}")
            if r.arst is not None:
                regs_arst.append((k, r))
        sync_reads = []
        for mi, m in enumerate(nl.memories):
            L.append(f"    m{mi} = M[{mi}]")
            for pi, rp in enumerate(m.read_ports):
                if rp.clocked:
                    k = len(self.state_names)
                    self.state_names.append(f"memrd:{m.name}:{pi}")
                    self.state_init.append(rp.init_value)
                    L.append(f"    s{k} = R[{k}]")
                    self.new_word(rp.data, f"s{k}")
                    sync_reads.append((k, mi, m, rp))

        # Combinational part, in dependency order. An async-reset register's output depends on
        # its reset within the cycle, so it is ordered like a combinational node.
        order_g = g.subgraph(n for n, d in g.nodes(data=True) if d.get(N.COMBINATIONAL)).copy()
        drivers = find_drivers(nl)
        for k, r in regs_arst:
            node = f"reg:{r.name}"
            order_g.add_node(node)
            if r.arst in drivers.of and drivers.of[r.arst][0] in order_g:
                order_g.add_edge(drivers.of[r.arst][0], node)
            for succ in g.successors(node):
                if succ in order_g:
                    order_g.add_edge(node, succ)
        arst_by_node = {f"reg:{r.name}": (k, r) for k, r in regs_arst}
        for node in nx.lexicographical_topological_sort(order_g):
            kind = g.nodes[node][N.KIND]
            if node in arst_by_node:
                k, r = arst_by_node[node]
                act = self.active(r.arst, r.arst_high)
                L.append(f"    s{k} = {p.mux(act, f's{k}', p.lit(r.arst_value))}")
            elif kind == N.NODE_CELL:
                self.cell(g.nodes[node][N.OBJ])
            elif kind == N.NODE_MEMORY_READ:
                m, pi = g.nodes[node][N.OBJ]
                mi = nl.memories.index(m)
                rp = m.read_ports[pi]
                addr = self.let(self.addr(rp.addr, m))
                var = f"r{mi}_{pi}"
                L.append(f"    {var} = {p.mem_read(f'm{mi}', addr, m.size)}")
                self.new_word(rp.data, var)

        outs = [self.sig(port.bits) for port in nl.outputs]
        L.append(f"    O = ({''.join(o + ', ' for o in outs)})")
        if trace:
            sigs = [self.sig(s.bits) for s in signals]
            L.append(f"    S = ({''.join(s + ', ' for s in sigs)})")

        # Clock edge: compute every next value from this cycle's values, then commit.
        nexts = []
        for k, r in enumerate(nl.registers):
            q, d = f"s{k}", self.sig(r.d)
            e = d
            if r.enable is not None:
                en = self.active(r.enable, r.enable_high)
                e = p.mux(en, q, d)
            if r.srst is not None:
                sr = self.active(r.srst, r.srst_high)
                if r.ce_over_srst and r.enable is not None:
                    e = p.mux(self.active(r.enable, r.enable_high), q, p.mux(sr, d, p.lit(r.srst_value)))
                else:
                    e = p.mux(sr, e, p.lit(r.srst_value))
            if r.arst is not None:
                e = p.mux(self.active(r.arst, r.arst_high), e, p.lit(r.arst_value))
            L.append(f"    n{k} = {e}")
            nexts.append(k)
        writes = {mi: [] for mi in range(len(nl.memories))}
        for mi, m in enumerate(nl.memories):
            for wi, wp in enumerate(m.write_ports):
                a = self.let(self.addr(wp.addr, m))
                dat = self.let(self.sig(wp.data))
                en = self.let(self.sig(wp.enable))
                writes[mi].append((a, dat, en, len(set(wp.enable)) == 1))
        for k, mi, m, rp in sync_reads:
            a = self.let(self.addr(rp.addr, m))
            e = self.let(p.mem_read(f"m{mi}", a, m.size))
            for j in rp.transparent_for:
                wa, wd, we, _ = writes[mi][j]
                e = self.let(p.mux(f"({wa} == {a})", e, f"(({e} & ~{we}) | ({wd} & {we}))"))
            q = f"s{k}"
            en = self.sig((rp.enable,))
            nxt = p.mux(en, q, e) if rp.enable != CONST1 else e
            if rp.srst not in (CONST0, CONSTX):
                sr = self.sig((rp.srst,))
                if rp.ce_over_srst:
                    nxt = p.mux(en, q, p.mux(sr, e, p.lit(rp.srst_value)))
                else:
                    nxt = p.mux(sr, nxt, p.lit(rp.srst_value))
            L.append(f"    n{k} = {nxt}")
            nexts.append(k)
        for mi, m in enumerate(nl.memories):
            for a, dat, en, whole in writes[mi]:
                for line in p.mem_write(f"m{mi}", a, dat, en, m.size, _mask(m.width), whole):
                    L.append("    " + line)
        for k in nexts:
            L.append(f"    R[{k}] = n{k}")
        L.append("    return (O, S)" if trace else "    return O")
        return "def step(I, R, M):\n" + "\n".join(L) + "\n"

    def active(self, net: int, high: bool) -> str:
        e = self.sig((net,))
        return e if high else f"(1 ^ {e})"

    def addr(self, sig, m) -> str:
        e = self.sig(sig)
        if m.offset:
            # Out-of-range addresses wrap to huge values and read as 0 / are not written.
            return f"(({e} - {m.offset}) & {_mask(64)})" if self.p.batched else f"({e} - {m.offset}) % {1 << 64}"
        return e


# ----------------------------------------------------------------------------------------------
# Stimulus: where inputs come from each cycle
# ----------------------------------------------------------------------------------------------

class Stimulus:
    """Gives each cycle's input values: ``values(cycle, sim) -> {port name: value}``.

    A value is an int (all instances) or a sequence of B ints; ports not named keep their previous
    value (0 at the start).
    """

    def values(self, cycle: int, sim: "Simulator") -> dict:
        raise NotImplementedError


_RESET_NAMES = ("rst", "reset")


@dataclass
class RandomStimulus(Stimulus):
    """Seeded uniform random inputs. Ports named like a reset (``rst``, ``*_rst``, ``reset``) are
    asserted with probability ``reset_probability`` so that runs are not mostly in reset."""
    seed: int = 0
    reset_probability: float = 1 / 64
    rng: np.random.Generator = field(init=False, repr=False)

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)

    def values(self, cycle, sim):
        out = {}
        for port in sim.input_ports:
            if port.name.lower().endswith(_RESET_NAMES) and port.width == 1:
                out[port.name] = (self.rng.random(sim.batch) < self.reset_probability).astype(U64)
                continue
            v = np.zeros(sim.batch, dtype=object if port.width > 64 else U64)
            done = 0
            while done < port.width:
                chunk = min(32, port.width - done)
                part = self.rng.integers(0, 1 << chunk, size=sim.batch, dtype=np.uint64)
                v = v | (part.astype(v.dtype) << (done if v.dtype == object else U64(done)))
                done += chunk
            out[port.name] = v
        return out


class TableStimulus(Stimulus):
    """Inputs from arrays: ``table[name]`` has shape (cycles,) or (cycles, batch), e.g. the
    ``inputs`` of an earlier ``Trace`` (replaying a run). Past the last row inputs hold."""

    def __init__(self, table: dict):
        self.table = {name: np.asarray(v) for name, v in table.items()}

    def values(self, cycle, sim):
        return {name: v[cycle] for name, v in self.table.items() if cycle < len(v)}


class CallbackStimulus(Stimulus):
    """Inputs from a Python function ``fn(cycle, previous_outputs) -> {port: value}``."""

    def __init__(self, fn):
        self.fn = fn

    def values(self, cycle, sim):
        return self.fn(cycle, sim.last_outputs) or {}


class FileStimulus(Stimulus):
    """Inputs from a JSON-lines file: line k is an object giving cycle k's changed inputs,
    ``{"port": value}`` or ``{"port": [v0, v1, ...]}`` per instance. After the last line inputs
    hold their values. Blank lines and lines starting with ``#`` are skipped.

    The file is read as the run goes (a line at a time, each at most ``inputs.MAX_LINE_BYTES``), so a
    stimulus of any length, or a pipe, costs no memory; a regular file of up to ``CHECK_FIRST`` bytes
    is also read through once at the start, so that a bad line is reported before any cycle runs."""

    CHECK_FIRST = 64 << 20

    def __init__(self, path):
        self.path = str(path)
        self._open()
        if os.path.isfile(path) and os.path.getsize(path) <= self.CHECK_FIRST:
            for _ in self._rows:
                pass
            self._open()

    def _open(self):
        try:
            f = open(self.path, "rb")
        except OSError as exc:
            raise StimulusError(f"cannot read stimulus file {self.path}: {exc.strerror or exc}; give a UTF-8 "
                                f"JSON-lines file") from None
        self._rows, self._next, self._row = self._parse(f), 0, None

    def _parse(self, f):
        import json

        from netlist2tf.common import Netlist2TFError
        from netlist2tf.common import lines
        with f:
            try:
                for lineno, line in lines(f, f"stimulus file {self.path}"):
                    if not line.strip() or line.lstrip().startswith("#"):
                        continue
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise StimulusError(f"{self.path}:{lineno}: not JSON ({exc.msg}); each line must be an "
                                            f'object like {{"a": 3, "b": [1, 2]}}') from None
                    if not isinstance(row, dict):
                        raise StimulusError(f"{self.path}:{lineno}: each line must be a JSON object of port values")
                    yield lineno, row
            except Netlist2TFError as exc:
                raise StimulusError(str(exc)) from None

    def values(self, cycle, sim):
        if cycle < self._next - 1:                  # asked again from an earlier cycle: read again
            self._open()
        while self._next <= cycle:
            self._row = next(self._rows, None)
            self._next += 1
        if self._row is None:
            return {}
        lineno, row = self._row
        try:
            sim.check_inputs(row)
        except StimulusError as exc:
            raise StimulusError(f"{self.path}:{lineno}: {exc}")
        return row


# ----------------------------------------------------------------------------------------------
# The simulator
# ----------------------------------------------------------------------------------------------

@dataclass
class Trace:
    """Per-cycle values of a run: ``inputs[name]``/``outputs[name]``/``signals[name]`` are arrays of
    shape (cycles, batch) (dtype uint64, or object for signals wider than 64 bits)."""
    cycles: int
    batch: int
    inputs: dict
    outputs: dict
    signals: dict


class Simulator:
    """Cycle-accurate simulation of a validated netlist, ``batch`` independent instances at once.

    ``step(inputs)`` runs one cycle and returns the outputs sampled in it; ``run(cycles, stimulus)``
    runs many and returns a ``Trace`` (optionally writing a VCD). Raises UnsupportedDesignError
    (from the validator) for netlists it cannot simulate, StimulusError for bad inputs.
    """

    def __init__(self, netlist: Netlist, batch: int = 1):
        if batch < 1:
            raise StimulusError(f"batch must be at least 1 (got {batch})")
        self.netlist = check_netlist(netlist)
        self.batch = batch
        clocks = {r.clock for r in netlist.registers}
        for m in netlist.memories:
            clocks |= {p.clock for p in m.write_ports} | {p.clock for p in m.read_ports if p.clocked}
        self.clock_nets = frozenset(clocks)
        self.clock_ports = tuple(p for p in netlist.inputs if set(p.bits) & self.clock_nets)
        widest = max([len(s) for c in netlist.cells for port, s in c.inputs + c.outputs
                      if (c.type, port) not in _SLICED_PORTS]
                     + [len(x) for c in netlist.cells if c.type == "$macc_v2"      # its operands one by one
                        for a, b, _, _ in c.products_and_addends()[0] for x in (a, b)]
                     + [len(x) for c in netlist.cells if c.type == "$macc_v2" for x, _, _ in c.products_and_addends()[1]]
                     + [r.width for r in netlist.registers] + [m.width for m in netlist.memories]
                     + [p.width for p in netlist.ports] + [1])
        self.mode = "scalar" if batch == 1 else ("numpy" if widest <= 64 else "lanes")
        g = netlist_graph(netlist)
        self.signals = tuple(s for s in netlist.signals if not (set(s.bits) & self.clock_nets))
        prims = _NumpyPrims() if self.mode == "numpy" else _ScalarPrims()
        self._fns = {}
        for trace in (False, True):
            with _any_int_digits():      # a signal of 14,000+ bits has a mask of 4,300+ decimal digits
                cg = _Codegen(netlist, prims, self.clock_nets)
                src = cg.build(g, self.signals, trace)
                ns = dict(_GENERIC_FUNCS)
                if self.mode == "numpy":
                    ns.update(_numpy_namespace(batch, prims.consts))
                exec(compile(src, f"<netlist2tf step {netlist.top}{' traced' if trace else ''}>", "exec"), ns)
            self._fns[trace] = ns["step"]
        self.source = src
        self.input_ports = tuple(cg.inputs)
        self.output_ports = netlist.outputs
        self._state_init = cg.state_init
        self.state_names = tuple(cg.state_names)
        self.reset()

    @staticmethod
    def state_bytes(netlist: Netlist, batch: int) -> int:
        """About the memory a Simulator of ``batch`` instances holds (registers, memories and one
        cycle's intermediate values per instance), before it is made: ``sim --batch`` is refused
        where this is more than the machine has."""
        words = len(netlist.registers) + sum(m.size for m in netlist.memories)
        values = words + len(netlist.cells) + len(netlist.ports)
        wide = any(r.width > 64 for r in netlist.registers) or any(m.width > 64 for m in netlist.memories) \
            or any(p.width > 64 for p in netlist.ports)
        return values * batch * (48 if wide and batch > 1 else 8)

    def trace_bytes(self, cycles: int, signals: bool = False) -> int:
        """About the memory ``run(cycles)`` holds in its Trace (inputs and outputs, and every named
        signal with ``signals``): the recorded values while it runs and their stacked arrays."""
        widths = [p.width for p in self.input_ports + tuple(self.output_ports)]
        if signals:
            widths += [len(s.bits) for s in self.signals]
        per_cycle = 0
        for w in widths:
            stacked = 8 if w <= 64 else 36 + w // 8
            running = 100 + 8 * self.batch if self.mode != "scalar" else 36 + w // 8
            per_cycle += running + stacked * self.batch
        return cycles * per_cycle

    # -- state ---------------------------------------------------------------------------------
    def reset(self):
        """Back to the initial state (register init values, memory init contents), cycle 0."""
        nl, B = self.netlist, self.batch
        self.cycle = 0
        self.last_outputs = None
        zero = [0] * len(self.input_ports)
        if self.mode == "scalar":
            self._lanes = [(list(self._state_init), [list(m.init) for m in nl.memories])]
            self._inputs = zero
        elif self.mode == "numpy":
            R = [np.full(B, v, dtype=U64) for v in self._state_init]
            M = [np.tile(np.array(m.init, dtype=U64), (B, 1)) for m in nl.memories]
            self._lanes = [(R, M)]
            self._inputs = [np.zeros(B, dtype=U64) for _ in self.input_ports]
        else:
            self._lanes = [(list(self._state_init), [list(m.init) for m in nl.memories]) for _ in range(B)]
            self._inputs = [[0] * B for _ in self.input_ports]

    def load_memory(self, name: str, contents, instance: int | None = None):
        """Overwrite memory ``name``'s contents: ``contents`` is {word index: value} (other words
        become 0) or a sequence from index 0. ``instance`` picks one batch instance (default all).
        Raises StimulusError for an unknown memory, an index outside it or a value too wide."""
        mems = {m.name: k for k, m in enumerate(self.netlist.memories)}
        if name not in mems:
            raise StimulusError(f"no memory named {name!r}; the design's memories are: "
                                f"{', '.join(mems) or '(none)'}")
        k = mems[name]
        mem = self.netlist.memories[k]
        items = contents.items() if isinstance(contents, dict) else enumerate(contents)
        full = [0] * mem.size
        for i, v in items:
            if not 0 <= i < mem.size:
                raise StimulusError(f"memory {name!r} has {mem.size} words; index {i} is outside it")
            if not 0 <= v < (1 << mem.width):
                raise StimulusError(f"memory {name!r} holds {mem.width}-bit words; {v:#x} does not fit")
            full[i] = v
        lanes = range(self.batch) if instance is None else [instance]
        if self.mode == "numpy":
            M = self._lanes[0][1]
            for lane in lanes:
                M[k][lane, :] = np.array(full, dtype=U64)
        elif self.mode == "scalar":
            self._lanes[0][1][k][:] = full
        else:
            for lane in lanes:
                self._lanes[lane][1][k][:] = full

    def set_state(self, values: dict, instance: int | None = None):
        """Overwrite register (``reg:NAME``) or synchronous-read (``memrd:MEM:I``) state, as named by
        ``state_names``; ``instance`` picks one batch instance (default all)."""
        index = {name: k for k, name in enumerate(self.state_names)}
        for name, v in values.items():
            if name not in index:
                raise StimulusError(f"no state named {name!r}; the design's state: {', '.join(self.state_names)}")
            k = index[name]
            if self.mode == "numpy":
                R = self._lanes[0][0]
                if instance is None:
                    R[k] = np.full(self.batch, v, dtype=U64)
                else:
                    R[k] = R[k].copy()
                    R[k][instance] = v
            else:
                for lane in (range(len(self._lanes)) if instance is None else [instance]):
                    self._lanes[lane][0][k] = int(v)

    def lane_state(self) -> tuple[list, list]:
        """Every instance's whole state at once, to copy states between simulators: (one array of
        ``batch`` values per ``state_names`` entry, one array of shape (``batch``, words) per memory);
        uint64, or object (Python ints) for a design wider than 64 bits. Copies."""
        R, M = self._lanes[0]
        if self.mode == "numpy":
            return ([np.broadcast_to(np.asarray(r, dtype=U64), (self.batch,)).copy() for r in R],
                    [m.copy() for m in M])
        if self.mode == "scalar":
            wide = np.uint64 if all(v < (1 << 64) for v in R) else object
            return ([np.array([v], dtype=wide) for v in R],
                    [np.array([list(m)], dtype=object if max(m, default=0) >> 64 else np.uint64) for m in M])
        return ([np.array([lane[0][k] for lane in self._lanes], dtype=object) for k in range(len(R))],
                [np.array([lane[1][j] for lane in self._lanes], dtype=object).reshape(self.batch, -1)
                 for j in range(len(M))])

    def set_lane_state(self, states: list, memories: list):
        """Overwrite every instance's state and memories, given as ``lane_state`` returns them (one
        row per instance of this simulator's batch)."""
        if len(states) != len(self.state_names) or len(memories) != len(self.netlist.memories):
            raise StimulusError(f"set_lane_state: {len(states)} states and {len(memories)} memories for a design "
                                f"with {len(self.state_names)} and {len(self.netlist.memories)}")
        if any(len(s) != self.batch for s in states) or any(len(m) != self.batch for m in memories):
            raise StimulusError(f"set_lane_state: give one row per instance ({self.batch})")
        if self.mode == "numpy":
            self._lanes = [([np.asarray(s, dtype=U64).copy() for s in states],
                            [np.asarray(m, dtype=U64).copy() for m in memories])]
        else:
            self._lanes = [([int(s[b]) for s in states], [[int(x) for x in m[b]] for m in memories])
                           for b in range(self.batch)]

    def check_inputs(self, values: dict):
        """Raise StimulusError if ``values`` names an unknown port or a value that does not fit."""
        known = {p.name: p for p in self.input_ports}
        for name, v in values.items():
            if name not in known:
                if any(p.name == name for p in self.clock_ports):
                    raise StimulusError(f"{name!r} is the clock; the simulator drives it (one cycle per step)")
                raise StimulusError(f"unknown input {name!r}; the design's inputs are: "
                                    f"{', '.join(p.name for p in self.input_ports) or '(none)'}")
            vals = np.asarray(v, dtype=object).reshape(-1)
            if len(vals) not in (1, self.batch):
                raise StimulusError(f"input {name!r}: {len(vals)} values for a batch of {self.batch}")
            w = known[name].width
            for x in vals:
                # 0 .. 2^w - 1, or a negative number in w-bit two's complement (-2^(w-1) .. -1)
                if not isinstance(x, (int, np.integer)) or isinstance(x, bool) or not -(1 << (w - 1)) <= int(x) < (1 << w):
                    raise StimulusError(f"input {name!r}: value {x!r} does not fit in {w} bits (give 0 .. "
                                        f"{(1 << w) - 1}, or -{1 << (w - 1)} .. -1 in two's complement)")

    def _set_inputs(self, values: dict):
        if not values:
            return
        self.check_inputs(values)
        for k, port in enumerate(self.input_ports):
            if port.name not in values:
                continue
            v = values[port.name]
            m = _mask(port.width)
            if self.mode == "scalar":
                vals = np.asarray(v, dtype=object).reshape(-1)
                self._inputs[k] = int(vals[0]) & m
            elif self.mode == "numpy":
                arr = np.asarray(v, dtype=object).reshape(-1)
                arr = [int(x) & m for x in arr]
                self._inputs[k] = np.array(arr * (self.batch if len(arr) == 1 else 1), dtype=U64)
            else:
                arr = [int(x) & m for x in np.asarray(v, dtype=object).reshape(-1)]
                self._inputs[k] = arr * (self.batch if len(arr) == 1 else 1)

    def _eval(self, trace: bool):
        fn = self._fns[trace]
        if self.mode == "lanes":
            res = [fn([col[b] for col in self._inputs], R, M) for b, (R, M) in enumerate(self._lanes)]
            if trace:
                outs = [np.array([r[0][i] for r in res], dtype=object) for i in range(len(self.output_ports))]
                sigs = [np.array([r[1][i] for r in res], dtype=object) for i in range(len(self.signals))]
                return outs, sigs
            return [np.array([r[i] for r in res], dtype=object) for i in range(len(self.output_ports))]
        R, M = self._lanes[0]
        return fn(self._inputs, R, M)

    def step(self, inputs: dict | None = None) -> dict:
        """Run one cycle with ``inputs`` (changed values only); return {output name: value}.

        Values are ints for batch 1, arrays of length B otherwise.
        """
        self._set_inputs(inputs or {})
        outs = self._eval(False)
        self.cycle += 1
        self.last_outputs = self._format(outs, self.output_ports)
        return self.last_outputs

    def step_values(self) -> tuple:
        """Run one cycle with the inputs as they stand; return the outputs as a tuple in
        ``output_ports`` order (ints for batch 1, arrays otherwise). The fast path of ``step``."""
        outs = self._eval(False)
        self.cycle += 1
        return outs

    def _format(self, vals, ports):
        if self.mode == "scalar":
            return {p.name: int(v) for p, v in zip(ports, vals)}
        return {p.name: np.broadcast_to(v, (self.batch,)).copy() for p, v in zip(ports, vals)}

    def state(self) -> dict:
        """Current register and synchronous-read values, keyed ``reg:NAME``/``memrd:MEM:I`` (ints for
        batch 1, arrays of length B otherwise), and memory contents keyed ``mem:NAME`` (lane 0 for
        batches)."""
        R, M = self._lanes[0]
        if self.mode == "lanes":          # B scalar instances: every instance's value (object array)
            out = {name: np.array([int(lane[0][k]) for lane in self._lanes], dtype=object)
                   for k, name in enumerate(self.state_names)}
        else:
            out = {name: (int(R[k]) if self.mode != "numpy" else R[k].copy())
                   for k, name in enumerate(self.state_names)}
        for m, contents in zip(self.netlist.memories, M):
            out[f"mem:{m.name}"] = list(contents) if self.mode != "numpy" else contents.copy()
        return out

    def run(self, cycles: int, stimulus: Stimulus | None = None, vcd=None, vcd_instance: int = 0,
            record_signals: bool = False, progress=None) -> Trace:
        """Run ``cycles`` cycles; inputs from ``stimulus`` (default: hold current inputs).

        ``vcd`` (a path) writes a waveform of every named signal of instance ``vcd_instance``.
        Returns a Trace of inputs and outputs (and named signals if ``record_signals`` or ``vcd``).
        """
        want_sigs = record_signals or vcd is not None
        if vcd is not None and not 0 <= vcd_instance < self.batch:
            raise StimulusError(f"vcd_instance {vcd_instance} is outside the batch of {self.batch}")
        in_rec = {p.name: [] for p in self.input_ports}
        out_rec = {p.name: [] for p in self.output_ports}
        sig_rec = {s.name: [] for s in self.signals} if want_sigs else {}
        for k in range(cycles):
            if stimulus is not None:
                self._set_inputs(stimulus.values(self.cycle, self))
            for p, v in zip(self.input_ports, self._inputs):
                in_rec[p.name].append(v)
            if want_sigs:
                outs, sigs = self._eval(True)
                for s, v in zip(self.signals, sigs):
                    sig_rec[s.name].append(v)
            else:
                outs = self._eval(False)
            self.cycle += 1
            self.last_outputs = self._format(outs, self.output_ports)
            for p, v in zip(self.output_ports, outs):
                out_rec[p.name].append(v)
            if progress is not None:
                progress(k + 1)
        widths = {p.name: p.width for p in self.input_ports + self.output_ports}
        widths.update({s.name: len(s.bits) for s in self.signals})
        trace = Trace(cycles, self.batch, self._stack(in_rec, widths), self._stack(out_rec, widths),
                      self._stack(sig_rec, widths))
        if vcd is not None:
            from netlist2tf.sim.waveform import write_vcd
            write_vcd(vcd, self, trace, vcd_instance)
        return trace

    def _stack(self, rec: dict, widths: dict) -> dict:
        out = {}
        for name, vals in rec.items():
            dtype = object if widths[name] > 64 else U64
            if self.mode == "scalar":
                arr = np.array([int(v) for v in vals], dtype=dtype).reshape(len(vals), 1)
            elif not vals:
                arr = np.zeros((0, self.batch), dtype=dtype)
            else:
                arr = np.stack([np.broadcast_to(np.asarray(v, dtype=dtype), (self.batch,)) for v in vals])
            out[name] = arr
        return out
