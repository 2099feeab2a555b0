"""Formal checks of a netlist's clock cycle with the z3 SMT solver (bit-vectors and arrays).

``prove_gated(netlist, gate, group)`` proves what a gated register group (``assemble(gated=...)``,
``compile --gated``) relies on: in a cycle that starts with the gate register at 0, the group's
values do not matter. The compiled model emits the group's tokens only in frames after which the
gate is 1, so in a cycle that starts with the gate at 0 it holds stale group values; the trace stays
the simulator's exactly when, for every state and memory content with the gate at 0,

* every output port,
* the next value of every register outside the group,
* every bit of every memory write port (address, data, enable: the model emits them as tokens),
* and, when the gate's next value is 1 (the group is emitted after this cycle), the group's next
  values

are the same whatever the group holds. The check builds the cycle twice (two copies that share the
inputs, the memory contents and every register but the group's) and asks z3 for a state where any
of these differ: none (unsat) is a proof for every state, reachable or not, by induction over the
cycles; otherwise the returned counterexample names what differs, with both copies' values.

Semantics mirror ``sim.py`` (x reads as 0; an out-of-range memory read gives 0); cell types outside
``SUPPORTED`` raise Netlist2TFError naming the cell.
"""

import itertools
from dataclasses import dataclass

from netlist2tf.common import Netlist2TFError
from netlist2tf.netlist.ir import CONST0, CONST1, CONSTX, Netlist

SUPPORTED = frozenset({"$lut", "$alu", "$eq", "$ne", "$lt", "$le", "$gt", "$ge", "$logic_not",
                       "$logic_and", "$logic_or", "$reduce_and", "$reduce_or", "$reduce_bool",
                       "$reduce_xor", "$reduce_xnor", "$not", "$and", "$or", "$xor", "$xnor", "$mux",
                       "$pmux", "$shl", "$sshl", "$shr", "$sshr", "$shift", "$shiftx", "$add", "$sub",
                       "$mul", "$macc_v2", "$neg", "$pos", "$buf", "$div", "$mod", "$divfloor", "$modfloor"})


@dataclass(frozen=True)
class Counterexample:
    """A state where the group matters: ``what`` names what differs between the two copies;
    ``values`` maps the group's signals, then each differing thing, to the two copies' values;
    ``states``: the two copies' whole states as the simulator takes them, each ({"reg:NAME": value}
    for every register, {input port: value}, {memory: {word index: value}} for the words the cycle
    reads), so that a search can run its own tests on the state z3 found."""
    what: tuple[str, ...]
    values: dict
    states: tuple = ()

    def __str__(self):
        shown = "; ".join(f"{k} = {a:#x} / {b:#x}" for k, (a, b) in self.values.items())
        return f"{', '.join(self.what)} differ(s) with the group's values ({shown})"


class _Cycle:
    """One copy of the netlist's combinational cycle over z3 terms: ``value(net)`` is a 1-bit term."""

    def __init__(self, z3, nl: Netlist, drivers: dict, q_terms: dict, inputs: dict, memories: dict):
        self.z3, self.nl, self.drivers = z3, nl, drivers
        self.q_terms, self.inputs, self.memories = q_terms, inputs, memories
        self.cache: dict = {}

    # -- helpers ---------------------------------------------------------------------------------
    def bit(self, net: int):
        z3 = self.z3
        if net in (CONST0, CONSTX):
            return z3.BitVecVal(0, 1)
        if net == CONST1:
            return z3.BitVecVal(1, 1)
        if net in self.q_terms:
            return self.q_terms[net]
        if net in self.inputs:
            return self.inputs[net]
        if net not in self.cache:
            self._drive(net)
        return self.cache[net]

    def word(self, sig):
        bits = [self.bit(n) for n in sig]
        if not bits:
            return None
        return bits[0] if len(bits) == 1 else self.z3.Concat(*reversed(bits))

    def ext(self, e, w_from: int, w_to: int, signed: bool):
        z3 = self.z3
        if w_from == 0:
            return z3.BitVecVal(0, w_to)
        if w_to <= w_from:
            return e if w_to == w_from else z3.Extract(w_to - 1, 0, e)
        return z3.SignExt(w_to - w_from, e) if signed else z3.ZeroExt(w_to - w_from, e)

    def b(self, cond, width: int):
        z3 = self.z3
        return z3.If(cond, z3.BitVecVal(1, width), z3.BitVecVal(0, width))

    def _store(self, sig, e, width: int):
        for i, n in enumerate(sig):
            if n not in (CONST0, CONST1, CONSTX):
                self.cache[n] = self.z3.Extract(i, i, e) if i < width else self.z3.BitVecVal(0, 1)

    # -- drivers ---------------------------------------------------------------------------------
    def _drive(self, net: int):
        kind, obj = self.drivers.get(net, (None, None))
        if kind == "cell":
            self._cell(obj)
        elif kind == "read":
            m, rp = obj
            z3 = self.z3
            aw = len(rp.addr)
            # the word index (address - offset) and whether it is in range, without wrapping
            e = z3.ZeroExt(1, self.word(rp.addr))
            idx = e - z3.BitVecVal(m.offset, aw + 1)
            in_range = z3.And(z3.UGE(e, z3.BitVecVal(m.offset, aw + 1)),
                              z3.ULT(idx, z3.BitVecVal(m.size, aw + 1)))
            sel = self.ext(idx, aw + 1, m.abits, False)
            data = z3.If(in_range, z3.Select(self.memories[m.name], sel), z3.BitVecVal(0, m.width))
            self._store(rp.data, data, m.width)
        else:
            raise Netlist2TFError(f"net {self.nl.nets[net]} has no driver the prover knows (an undriven "
                                  f"net, or a register output not in the state)")
        if net not in self.cache:
            raise Netlist2TFError(f"net {self.nl.nets[net]}: its driver did not set it")

    def _cell(self, c):
        z3 = self.z3
        t = c.type
        if t not in SUPPORTED:
            raise Netlist2TFError(f"cell {c.name} ({t}): the prover (netlist2tf.netlist.formal) does not model this "
                                  f"cell type; it models {', '.join(sorted(SUPPORTED))}")
        ins = {k: v for k, v in c.inputs}
        w = {k: len(v) for k, v in c.inputs + c.outputs}
        if t == "$macc_v2":
            yw = w["Y"]
            operand = lambda sig, signed: self.ext(self.word(sig), len(sig), yw, signed)   # noqa: E731
            products, addends = c.products_and_addends()
            total = z3.BitVecVal(0, yw)
            for a_sig, b_sig, signed, neg in products:
                p = operand(a_sig, signed) * operand(b_sig, signed)
                total = total - p if neg else total + p
            for c_sig, signed, neg in addends:
                total = total - operand(c_sig, signed) if neg else total + operand(c_sig, signed)
            self._store(dict(c.outputs)["Y"], total, yw)
            return
        A = self.word(ins["A"]) if "A" in ins else None
        B = self.word(ins["B"]) if "B" in ins else None
        aw, bw = w.get("A", 0), w.get("B", 0)
        sa, sb = bool(c.param("A_SIGNED", 0)), bool(c.param("B_SIGNED", 0))
        both = sa and sb
        if t == "$alu":
            yw = int(c.param("Y_WIDTH"))
            signed = bool(c.param("A_SIGNED")) and bool(c.param("B_SIGNED"))
            a = self.ext(A, aw, yw, signed)
            b0 = self.ext(B, bw, yw, signed)
            bi, ci = self.word(ins["BI"]), self.word(ins["CI"])
            b = b0 ^ z3.If(bi == 1, z3.BitVecVal((1 << yw) - 1, yw), z3.BitVecVal(0, yw))
            y = a + b + z3.ZeroExt(yw - 1, ci) if yw > 1 else a + b + ci
            outs = {"Y": y, "X": a ^ b, "CO": (a & b) | ((a ^ b) & (y ^ a ^ b))}
            for port, sig in c.outputs:
                self._store(sig, outs[port], yw)
            return
        (port, ysig), = c.outputs
        yw = len(ysig)
        if t == "$lut":
            k = aw
            lut = c.param("LUT")
            lut = int(lut, 2) if isinstance(lut, str) else int(lut)
            table = z3.BitVecVal(lut, 1 << k)
            idx = self.ext(A, k, 1 << k, False) if (1 << k) > k else A
            y = z3.Extract(0, 0, z3.LShR(table, idx))
            self._store(ysig, y, 1)
            return
        if t in ("$eq", "$ne", "$lt", "$le", "$gt", "$ge"):
            wd = max(aw, bw)
            a, b = self.ext(A, aw, wd, both), self.ext(B, bw, wd, both)
            if both:
                ops = {"$lt": lambda: a < b, "$le": lambda: a <= b, "$gt": lambda: a > b,
                       "$ge": lambda: a >= b}
            else:
                ops = {"$lt": lambda: z3.ULT(a, b), "$le": lambda: z3.ULE(a, b),
                       "$gt": lambda: z3.UGT(a, b), "$ge": lambda: z3.UGE(a, b)}
            ops.update({"$eq": lambda: a == b, "$ne": lambda: a != b})
            self._store(ysig, self.b(ops[t](), yw), yw)
            return
        if t.startswith("$reduce_") or t == "$logic_not":
            if t in ("$reduce_xor", "$reduce_xnor"):
                r = z3.Extract(0, 0, A)
                for i in range(1, aw):
                    r = r ^ z3.Extract(i, i, A)
                r = self.ext(r if t == "$reduce_xor" else ~r, 1, yw, False)
            else:
                cond = {"$reduce_and": lambda: A == z3.BitVecVal((1 << aw) - 1, aw),
                        "$reduce_or": lambda: A != 0, "$reduce_bool": lambda: A != 0,
                        "$logic_not": lambda: A == 0}[t]()
                r = self.b(cond, yw)
            self._store(ysig, r, yw)
            return
        if t in ("$logic_and", "$logic_or"):
            cond = z3.And(A != 0, B != 0) if t == "$logic_and" else z3.Or(A != 0, B != 0)
            self._store(ysig, self.b(cond, yw), yw)
            return
        if t in ("$not", "$neg", "$pos", "$buf"):
            a = self.ext(A, aw, yw, sa)
            self._store(ysig, {"$not": ~a, "$neg": -a}.get(t, a), yw)
            return
        if t in ("$div", "$mod", "$divfloor", "$modfloor"):
            # on values one bit wider than every operand (no overflow), 0 for a zero divisor
            wd = max(aw, bw, yw) + 1
            a, b = self.ext(A, aw, wd, both), self.ext(B, bw, wd, both)
            if both:
                q, r = a / b, z3.SRem(a, b)          # truncating (bvsdiv, bvsrem)
                if t == "$divfloor":
                    q = z3.If(z3.And(r != 0, (a < 0) != (b < 0)), q - 1, q)
                e = {"$div": q, "$divfloor": q, "$mod": r, "$modfloor": a % b}[t]           # % is bvsmod
            else:
                e = z3.UDiv(a, b) if t in ("$div", "$divfloor") else z3.URem(a, b)
            e = z3.If(b == 0, z3.BitVecVal(0, wd), e)
            self._store(ysig, self.ext(e, wd, yw, False), yw)
            return
        if t in ("$and", "$or", "$xor", "$xnor", "$add", "$sub", "$mul"):
            a, b = self.ext(A, aw, yw, both), self.ext(B, bw, yw, both)
            r = {"$and": lambda: a & b, "$or": lambda: a | b, "$xor": lambda: a ^ b,
                 "$xnor": lambda: ~(a ^ b), "$add": lambda: a + b, "$sub": lambda: a - b,
                 "$mul": lambda: a * b}[t]()
            self._store(ysig, r, yw)
            return
        if t == "$mux":
            s = self.word(ins["S"])
            self._store(ysig, z3.If(s == 1, B, A), yw)
            return
        if t == "$pmux":
            width, n = int(c.param("WIDTH")), int(c.param("S_WIDTH"))
            s = self.word(ins["S"])
            e = A
            for k in reversed(range(n)):
                e = z3.If(z3.Extract(k, k, s) == 1, self.word(ins["B"][k * width:(k + 1) * width]), e)
            self._store(ysig, e, yw)
            return
        if t in ("$shift", "$shiftx"):
            # right by B (left by -B when B is signed and negative); A sign-extended to max(A, Y)
            # bits for a signed $shift, then read as unsigned
            w0 = max(aw, yw)
            wd = max(w0, bw) + 1
            a = self.ext(self.ext(A, aw, w0, sa and t == "$shift"), w0, wd, False)
            b = self.ext(B, bw, wd, sb)
            r = z3.LShR(a, b)
            if sb:
                r = z3.If(b < 0, a << -b, r)
            self._store(ysig, self.ext(r, wd, yw, False), yw)
            return
        # shifts (amounts unsigned): A extended to max(A, Y) bits as the simulator does, then shifted
        # at a width that also holds the amount; z3 gives 0 (left, logical right) or the sign
        # (arithmetic right) for amounts >= the width, as the simulator does
        w0 = max(aw, yw)
        wd = max(w0, bw)
        a0 = self.ext(A, aw, w0, sa)
        b = self.ext(B, bw, wd, False)
        if t in ("$shl", "$sshl"):
            r = self.ext(a0, w0, wd, False) << b
        elif t == "$sshr" and sa:
            r = self.ext(a0, w0, wd, True) >> b
        else:
            r = z3.LShR(self.ext(a0, w0, wd, False), b)
        self._store(ysig, self.ext(r, wd, yw, False), yw)

    # -- the clock edge ----------------------------------------------------------------------------
    def next_value(self, r):
        """The register's next value (a ``r.width``-bit term), as ``sim.py`` computes it."""
        z3 = self.z3
        q, d = self.word(r.q), self.word(r.d)

        def active(net, high):
            v = self.bit(net)
            return v == (1 if high else 0)
        e = d
        if r.enable is not None:
            e = z3.If(active(r.enable, r.enable_high), d, q)
        if r.srst is not None:
            sr = active(r.srst, r.srst_high)
            value = z3.BitVecVal(r.srst_value, r.width)
            if r.ce_over_srst and r.enable is not None:
                e = z3.If(active(r.enable, r.enable_high), z3.If(sr, value, d), q)
            else:
                e = z3.If(sr, value, e)
        if r.arst is not None:
            e = z3.If(active(r.arst, r.arst_high), z3.BitVecVal(r.arst_value, r.width), e)
        return e


class _Z3:
    """The z3 module with every term made in one fresh ``z3.Context``: a proof's answer (which
    counterexample z3 picks, too) then depends on the query alone, not on what the process proved
    before in z3's global context, so a compile that acts on counterexamples
    (``netlist2tf.driver.find_economy``) is deterministic."""

    def __init__(self):
        import z3
        self._z3, self.ctx = z3, z3.Context()

    def __getattr__(self, name):
        return getattr(self._z3, name)

    def BitVec(self, name, width):
        return self._z3.BitVec(name, width, ctx=self.ctx)

    def BitVecVal(self, value, width):
        return self._z3.BitVecVal(value, width, ctx=self.ctx)

    def BitVecSort(self, width):
        return self._z3.BitVecSort(width, ctx=self.ctx)

    def Solver(self):
        return self._z3.Solver(ctx=self.ctx)

    def If(self, c, a, b):
        return self._z3.If(c, a, b, ctx=self.ctx)

    def And(self, *args):
        return self._z3.And(*args, self.ctx)

    def Or(self, *args):
        return self._z3.Or(*args, self.ctx)


def _fresh_z3() -> _Z3:
    return _Z3()


def _free(z3, nl: Netlist, inputs: dict | None):
    """(input terms per net, one z3 array per memory): every input free but those ``inputs`` fixes."""
    fixed = inputs or {}
    unknown = set(fixed) - {p.name for p in nl.inputs}
    if unknown:
        raise Netlist2TFError(f"no input port(s) {', '.join(sorted(unknown))} in {nl.top}")
    terms = {n: (z3.BitVecVal((fixed[p.name] >> i) & 1, 1) if p.name in fixed else z3.BitVec(f"in:{p.name}[{i}]", 1))
             for p in nl.inputs for i, n in enumerate(p.bits)}
    memories = {m.name: z3.Array(f"mem:{m.name}", z3.BitVecSort(m.abits), z3.BitVecSort(m.width))
                for m in nl.memories}
    return terms, memories


def _solve(z3, formula, timeout_s: float, what: str):
    """z3's model of ``formula``, or None when it is unsatisfiable (the property holds)."""
    solver = z3.Solver()
    solver.set("timeout", int(timeout_s * 1000))
    solver.add(formula)
    verdict = solver.check()
    if verdict == z3.unsat:
        return None
    if verdict != z3.sat:
        raise Netlist2TFError(f"z3 could not decide the {what} property ({solver.reason_unknown()}); "
                              f"raise timeout_s (was {timeout_s} s)")
    return solver.model()


def _drivers(nl: Netlist) -> dict:
    out = {}
    for c in nl.cells:
        for _, sig in c.outputs:
            for n in sig:
                out[n] = ("cell", c)
    for m in nl.memories:
        for rp in m.read_ports:
            if rp.clocked:
                raise Netlist2TFError(f"memory {m.name} has a synchronous read port; the prover models "
                                      f"asynchronous reads only (synthesize with memory_nordff)")
            for n in rp.data:
                out[n] = ("read", (m, rp))
    return out


def prove_gated(nl: Netlist, gate: str, group, inputs: dict | None = None, timeout_s: float = 600.0):
    """``prove_groups`` for one register group gated by ``gate`` (a 1-bit register)."""
    return prove_groups(nl, [(gate, tuple(group))], inputs=inputs, timeout_s=timeout_s)


def prove_groups(nl: Netlist, groups, out_groups=(), gated_writes=(), inputs: dict | None = None,
                 timeout_s: float = 600.0):
    """Prove that every register group of ``groups`` ((GATE, (REGISTER, ...)) by signal name) does
    not matter in a cycle that starts with its 1-bit gate register at 0 (module docstring), for a
    model that also skips the output groups ``out_groups`` ((GATE OUTPUT, (OUTPUT, ...))) while their
    gate output is 0 and the write group of each memory in ``gated_writes`` while its port does not
    write: an output in such a group is claimed only while its gate is 1, a gated port's address
    and data only while it writes. Every group's registers are free in both copies while their gate
    is 0 (all combinations at once). ``inputs``: {input port: value} held fixed (e.g. {"rst": 0});
    other inputs are free. Returns None when proved, else a Counterexample. Raises Netlist2TFError
    for unknown signals, unsupported cells, or when z3 gives up."""
    z3 = _fresh_z3()

    sigs = {s.name: s.bits for s in nl.signals}
    reg_of_q = {n: r for r in nl.registers for n in r.q}
    drivers = _drivers(nl)
    group_nets, gate_of = {}, []                 # net -> group index; per group its gate's q net
    for gi, (gate, group) in enumerate(groups):
        for name in (gate, *group):
            if name not in sigs:
                raise Netlist2TFError(f"no signal named {name} in {nl.top}")
        gate_bits = sigs[gate]
        if len(gate_bits) != 1 or gate_bits[0] not in reg_of_q:
            raise Netlist2TFError(f"{gate} must be a 1-bit register (the gate)")
        # a signal's register bits (a dead slice that the kept-outputs netlist dropped is undriven)
        nets = {n for name in group for n in sigs[name] if n not in (CONST0, CONST1, CONSTX)}
        if any(n not in reg_of_q and n in drivers for n in nets) or not nets & set(reg_of_q):
            raise Netlist2TFError(f"the group {', '.join(group)} must be registers")
        nets &= set(reg_of_q)
        if gate_bits[0] in nets:
            raise Netlist2TFError(f"the gate {gate} cannot be in its own group")
        if nets & set(group_nets):
            raise Netlist2TFError(f"the group {', '.join(group)} shares a register with another group")
        group_nets.update({n: gi for n in nets})
        gate_of.append(gate_bits[0])
    for gi, q in enumerate(gate_of):
        if q in group_nets:
            raise Netlist2TFError(f"the gate {groups[gi][0]} cannot be in a gated group")
    for r in nl.registers:
        if r.arst is not None and r.arst not in (CONST0, CONSTX):
            raise Netlist2TFError(f"register {r.name} has an asynchronous reset; the prover models "
                                  f"synchronous registers only")
    group_regs = {}
    for r in nl.registers:
        owners = {group_nets[n] for n in r.q if n in group_nets}
        if owners and (len(owners) > 1 or not all(n in group_nets for n in r.q)):
            raise Netlist2TFError("a register is partly in a group; name whole registers")
        if owners:
            group_regs[r.name] = owners.pop()
    outs = {p.name: p for p in nl.outputs}
    out_gate = {}                                 # output name -> its group's gate output
    for gate, members in out_groups:
        if gate not in outs or len(outs[gate].bits) != 1:
            raise Netlist2TFError(f"{gate} must be a 1-bit output (the gate of an output group)")
        for name in members:
            if name not in outs:
                raise Netlist2TFError(f"no output named {name} in {nl.top}")
            out_gate[name] = gate
    if any(g in out_gate for g in out_gate.values()):
        raise Netlist2TFError("the gate of an output group must be an output outside every group")
    unknown_mems = set(gated_writes) - {m.name for m in nl.memories}
    if unknown_mems:
        raise Netlist2TFError(f"no memory {', '.join(sorted(unknown_mems))} in {nl.top}")

    input_terms, memories = _free(z3, nl, inputs)

    def var(tag, n):
        return z3.BitVec(f"q{tag}:{reg_of_q[n].name}[{reg_of_q[n].q.index(n)}]", 1)
    # One query per combination of the gates at the cycle's start (all on: nothing can differ): a
    # group whose gate is 0 is free in both copies, one whose gate is 1 shared, and each gate fixed,
    # which lets z3 simplify (far faster than one query with the gates free).
    for on in itertools.product((False, True), repeat=len(groups)):
        if all(on):
            continue
        shared = {n: var("", n) for n in reg_of_q if n not in group_nets or on[group_nets[n]]}
        shared.update({q: z3.BitVecVal(int(value), 1) for q, value in zip(gate_of, on)})
        copies = []
        for tag in ("a", "b"):
            q = dict(shared)
            q.update({n: var(tag, n) for n, g in group_nets.items() if not on[g]})
            copies.append(_Cycle(z3, nl, drivers, q, input_terms, memories))
        ca, cb = copies
        claims = _claims(z3, nl, ca, cb, groups, group_regs, gate_of, reg_of_q, outs, out_gate, gated_writes)
        model = _solve(z3, z3.Or(*[na != nb if cond is None else z3.And(cond, na != nb) for _, cond, na, nb in claims]),
                       timeout_s, "gated-group")
        if model is not None:
            return _counterexample(z3, model, ca, cb, sigs, groups, claims)
    return None


def prove_held(nl: Netlist, gate: str, dirty: str, group, inputs: dict | None = None,
               timeout_s: float = 600.0):
    """Prove what a held group (``compile --held GATE:DIRTY:REGISTER,...``) relies on. The model
    emits the group's registers only in the frames whose 1-bit output ``gate`` is 1; a skipped frame
    leaves the double-buffer row the next frame reads as it was written two frames before, so the
    trace is exact when ``gate`` = 0 implies that the group's values are those of two cycles ago. With
    ``dirty`` a 1-bit register, that follows (by induction over the cycles) from three properties of
    one cycle, each proved for every state, memory content and input (``inputs`` held fixed):

    * ``gate`` = 0 implies every register of the group keeps its value;
    * ``gate`` = 0 implies ``dirty`` = 0 (the last cycle kept them: the next property, one cycle back);
    * ``dirty``'s next value 0 implies every register of the group keeps its value.

    With ``dirty`` "" (a tail group, kept in one row that only the frame's last token writes) the
    first property is the whole promise: a skipped frame leaves the row as the last emission wrote it.

    Returns None when proved, else a Counterexample (``what``: the property that fails; ``values``:
    the state's group, gate and dirty values, both entries the state's and the next cycle's)."""
    z3 = _fresh_z3()

    sigs = {s.name: s.bits for s in nl.signals}
    outs = {p.name: p for p in nl.outputs}
    reg_of_q = {n: r for r in nl.registers for n in r.q}
    if gate not in outs or len(outs[gate].bits) != 1:
        raise Netlist2TFError(f"{gate} must be a 1-bit output (the gate of a held group)")
    if dirty and (dirty not in sigs or len(sigs[dirty]) != 1 or sigs[dirty][0] not in reg_of_q):
        raise Netlist2TFError(f"{dirty} must be a 1-bit register (the dirty bit of a held group)")
    for name in group:
        if name not in sigs:
            raise Netlist2TFError(f"no signal named {name} in {nl.top}")
    nets = [n for name in group for n in sigs[name] if n in reg_of_q]
    if not nets:
        raise Netlist2TFError(f"the group {', '.join(group)} must be registers")
    input_terms, memories = _free(z3, nl, inputs)
    q = {n: z3.BitVec(f"q:{reg_of_q[n].name}[{reg_of_q[n].q.index(n)}]", 1) for n in reg_of_q}
    cyc = _Cycle(z3, nl, _drivers(nl), q, input_terms, memories)

    def nxt(n):
        r = reg_of_q[n]
        i = r.q.index(n)
        return z3.Extract(i, i, cyc.next_value(r))
    changed = z3.Or(*[nxt(n) != q[n] for n in nets])
    g = cyc.bit(outs[gate].bits[0])
    props = [(f"the group changes in a cycle where {gate} is 0", z3.And(g == 0, changed))]
    if dirty:
        d = q[sigs[dirty][0]]
        props += [(f"{dirty} is 1 in a cycle where {gate} is 0", z3.And(g == 0, d == 1)),
                  (f"the group changes in a cycle after which {dirty} is 0", z3.And(nxt(sigs[dirty][0]) == 0, changed))]
    for what, bad in props:
        model = _solve(z3, bad, timeout_s, "held-group")
        if model is None:
            continue

        def val(term):
            return model.eval(term, model_completion=True).as_long()

        def bits(name):
            return [n for n in sigs[name] if n in q]
        values = {name: (val(cyc.word(bits(name))), sum(val(nxt(n)) << i for i, n in enumerate(bits(name))))
                  for name in (*group, *([dirty] if dirty else []))}
        values[gate] = (val(g),)
        return HeldCounterexample(what, values)
    return None


@dataclass(frozen=True)
class HeldCounterexample:
    """A state that breaks a held group's promise: ``what`` the property; ``values`` the group's
    registers and the dirty bit as (this cycle, next cycle), the gate as (this cycle,)."""
    what: str
    values: dict

    def __str__(self):
        shown = "; ".join(f"{k} = {v[0]:#x}" + (f" -> {v[1]:#x}" if len(v) > 1 else "") for k, v in self.values.items())
        return f"{self.what} ({shown})"


def _claims(z3, nl, ca, cb, groups, group_regs, gate_of, reg_of_q, outs, out_gate, gated_writes) -> list:
    """(name, condition or None, term in copy a, term in copy b) for everything the model emits."""
    claims = []
    for p in nl.outputs:
        if p.bits:
            cond = ca.bit(outs[out_gate[p.name]].bits[0]) == 1 if p.name in out_gate else None
            claims.append((f"output {p.name}", cond, ca.word(p.bits), cb.word(p.bits)))
    for m in nl.memories:
        for i, wp in enumerate(m.write_ports):
            en = ca.bit(wp.enable[0]) == 1 if m.name in gated_writes else None
            for field, sig in (("address", wp.addr), ("data", wp.data), ("enable", wp.enable)):
                claims.append((f"memory {m.name} write port {i} {field}", None if field == "enable" else en,
                               ca.word(sig), cb.word(sig)))
    gate_next = [z3.Extract(reg_of_q[q].q.index(q), reg_of_q[q].q.index(q), ca.next_value(reg_of_q[q])) == 1
                 for q in gate_of]                # outside every group: equal in both (claimed)
    by_signal: dict = {}               # Yosys slices registers into bits: claim per signal instead
    for r in nl.registers:
        by_signal.setdefault(nl.nets[r.q[0]].base if r.width == 1 else r.name, []).append(r)
    for label, regs in by_signal.items():
        regs.sort(key=lambda r: nl.nets[r.q[0]].bit or 0)
        na = z3.Concat(*[ca.next_value(r) for r in reversed(regs)]) if len(regs) > 1 else ca.next_value(regs[0])
        nb = z3.Concat(*[cb.next_value(r) for r in reversed(regs)]) if len(regs) > 1 else cb.next_value(regs[0])
        if regs[0].name in group_regs:
            gi = group_regs[regs[0].name]
            claims.append((f"register {label} (next, with {groups[gi][0]} next 1)", gate_next[gi], na, nb))
        else:
            claims.append((f"register {label} (next)", None, na, nb))
    return claims


def _counterexample(z3, model, ca, cb, sigs, groups, claims) -> Counterexample:
    """What differs in z3's model, with both copies' values."""

    def val(term):
        return model.eval(term, model_completion=True).as_long()
    def regs(copy, name):          # a group signal's register bits (dead slices left out)
        return copy.word([n for n in sigs[name] if n in copy.q_terms])
    values = {name: (val(regs(ca, name)), val(regs(cb, name))) for _, group in groups for name in group}
    what = []
    for name, cond, na, nb in claims:
        if cond is not None and not z3.is_true(model.eval(cond, model_completion=True)):
            continue
        a, b = val(na), val(nb)
        if a != b:
            what.append(name)
            values[name] = (a, b)
    return Counterexample(tuple(what), values, tuple(_state(z3, model, c) for c in (ca, cb)))


def _state(z3, model, copy) -> tuple[dict, dict, dict]:
    """One copy's state in z3's model: (registers, inputs, the memory words its read ports read)."""
    def val(term):
        return model.eval(term, model_completion=True).as_long()
    nl = copy.nl
    regs = {f"reg:{r.name}": sum(val(copy.q_terms[n]) << i for i, n in enumerate(r.q)) for r in nl.registers}
    ins = {p.name: sum(val(copy.inputs[n]) << i for i, n in enumerate(p.bits) if n in copy.inputs) for p in nl.inputs}
    mems = {}
    for m in nl.memories:
        words = mems.setdefault(m.name, {})
        for rp in m.read_ports:
            index = val(copy.word(rp.addr)) - m.offset
            if 0 <= index < m.size:
                words[index] = val(z3.Select(copy.memories[m.name], z3.BitVecVal(index, m.abits)))
    return regs, ins, mems


def evaluate(nl: Netlist, registers: dict, inputs: dict, memories: dict) -> tuple[dict, dict, dict]:
    """One cycle computed from the prover's own terms with concrete values (to check that the
    prover reads the netlist as ``sim.py`` runs it): ``registers`` {"reg:NAME": value} (missing: 0),
    ``inputs`` {port: value}, ``memories`` {name: {address: word}}. Returns (outputs {port: value},
    next registers {"reg:NAME": value}, writes {memory: [(address, data, enable)] per write port})."""
    z3 = _fresh_z3()

    q = {}
    for r in nl.registers:
        v = registers.get(f"reg:{r.name}", 0)
        for i, n in enumerate(r.q):
            q[n] = z3.BitVecVal((v >> i) & 1, 1)
    ins = {n: z3.BitVecVal((inputs.get(p.name, 0) >> i) & 1, 1) for p in nl.inputs for i, n in enumerate(p.bits)}
    mems = {}
    for m in nl.memories:
        arr = z3.K(z3.BitVecSort(m.abits), z3.BitVecVal(0, m.width))
        for a, w in sorted(memories.get(m.name, {}).items()):
            arr = z3.Store(arr, z3.BitVecVal(a, m.abits), z3.BitVecVal(w, m.width))
        mems[m.name] = arr
    c = _Cycle(z3, nl, _drivers(nl), q, ins, mems)

    def val(term):
        return z3.simplify(term).as_long() if term is not None else 0
    outputs = {p.name: val(c.word(p.bits)) for p in nl.outputs}
    nexts = {f"reg:{r.name}": val(c.next_value(r)) for r in nl.registers}
    writes = {m.name: [(val(c.word(wp.addr)), val(c.word(wp.data)), val(c.word(wp.enable)))
                       for wp in m.write_ports] for m in nl.memories}
    return outputs, nexts, writes
