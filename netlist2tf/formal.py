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

from dataclasses import dataclass

from .errors import Netlist2TFError
from .ir import CONST0, CONST1, CONSTX, Netlist

SUPPORTED = frozenset({"$lut", "$alu", "$eq", "$ne", "$lt", "$le", "$gt", "$ge", "$logic_not",
                       "$logic_and", "$logic_or", "$reduce_and", "$reduce_or", "$reduce_bool",
                       "$reduce_xor", "$reduce_xnor", "$not", "$and", "$or", "$xor", "$xnor", "$mux",
                       "$pmux", "$shl", "$sshl", "$shr", "$sshr", "$shift", "$shiftx", "$add", "$sub",
                       "$mul", "$neg", "$pos", "$buf", "$div", "$mod", "$divfloor", "$modfloor"})


@dataclass(frozen=True)
class Counterexample:
    """A state where the group matters: ``what`` names what differs between the two copies;
    ``values`` maps the group's signals, then each differing thing, to the two copies' values."""
    what: tuple[str, ...]
    values: dict

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
            raise Netlist2TFError(f"cell {c.name} ({t}): the prover (netlist2tf.formal) does not model this "
                                  f"cell type; it models {', '.join(sorted(SUPPORTED))}")
        ins = {k: v for k, v in c.inputs}
        w = {k: len(v) for k, v in c.inputs + c.outputs}
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
    """Prove that ``group`` (register signal names) does not matter in a cycle that starts with the
    1-bit register ``gate`` at 0 (module docstring). ``inputs``: {input port: value} held fixed
    (e.g. {"rst": 0}); other inputs are free. Returns None when proved, else a Counterexample.
    Raises Netlist2TFError for unknown signals, unsupported cells, or when z3 gives up."""
    import z3

    sigs = {s.name: s.bits for s in nl.signals}
    for name in (gate, *group):
        if name not in sigs:
            raise Netlist2TFError(f"no signal named {name} in {nl.top}")
    reg_of_q = {n: r for r in nl.registers for n in r.q}
    gate_bits = sigs[gate]
    if len(gate_bits) != 1 or gate_bits[0] not in reg_of_q:
        raise Netlist2TFError(f"{gate} must be a 1-bit register (the gate)")
    group_nets = {n for name in group for n in sigs[name] if n not in (CONST0, CONST1, CONSTX)}
    if gate_bits[0] in group_nets:
        raise Netlist2TFError(f"the gate {gate} cannot be in its own group")
    if not group_nets <= set(reg_of_q):
        raise Netlist2TFError(f"the group {', '.join(group)} must be registers")
    for r in nl.registers:
        if r.arst is not None and r.arst not in (CONST0, CONSTX):
            raise Netlist2TFError(f"register {r.name} has an asynchronous reset; the prover models "
                                  f"synchronous registers only")
    group_regs = [r for r in nl.registers if set(r.q) & group_nets]
    if any(not set(r.q) <= group_nets for r in group_regs):
        raise Netlist2TFError("a register is partly in the group; name whole registers")

    fixed = inputs or {}
    unknown = set(fixed) - {p.name for p in nl.inputs}
    if unknown:
        raise Netlist2TFError(f"no input port(s) {', '.join(sorted(unknown))} in {nl.top}")
    input_terms = {}
    for p in nl.inputs:
        for i, n in enumerate(p.bits):
            input_terms[n] = (z3.BitVecVal((fixed[p.name] >> i) & 1, 1) if p.name in fixed
                              else z3.BitVec(f"in:{p.name}[{i}]", 1))
    memories = {m.name: z3.Array(f"mem:{m.name}", z3.BitVecSort(m.abits), z3.BitVecSort(m.width))
                for m in nl.memories}
    shared = {n: z3.BitVec(f"q:{reg_of_q[n].name}[{reg_of_q[n].q.index(n)}]", 1)
              for n in reg_of_q if n not in group_nets}
    copies, drivers = [], _drivers(nl)
    for tag in ("a", "b"):
        q = dict(shared)
        q.update({n: z3.BitVec(f"q{tag}:{reg_of_q[n].name}[{reg_of_q[n].q.index(n)}]", 1) for n in group_nets})
        copies.append(_Cycle(z3, nl, drivers, q, input_terms, memories))
    ca, cb = copies

    claims = []                                   # (name, term in copy a, term in copy b)
    for p in nl.outputs:
        if p.bits:
            claims.append((f"output {p.name}", ca.word(p.bits), cb.word(p.bits)))
    for m in nl.memories:
        for i, wp in enumerate(m.write_ports):
            for field, sig in (("address", wp.addr), ("data", wp.data), ("enable", wp.enable)):
                claims.append((f"memory {m.name} write port {i} {field}", ca.word(sig), cb.word(sig)))
    gate_reg = reg_of_q[gate_bits[0]]
    gate_next = ca.next_value(gate_reg)          # outside the group, so equal in both (claimed below)
    grouped = []
    by_signal: dict = {}               # Yosys slices registers into bits: claim per signal instead
    for r in nl.registers:
        by_signal.setdefault(nl.nets[r.q[0]].base if r.width == 1 else r.name, []).append(r)
    for label, regs in by_signal.items():
        regs.sort(key=lambda r: nl.nets[r.q[0]].bit or 0)
        na = z3.Concat(*[ca.next_value(r) for r in reversed(regs)]) if len(regs) > 1 else ca.next_value(regs[0])
        nb = z3.Concat(*[cb.next_value(r) for r in reversed(regs)]) if len(regs) > 1 else cb.next_value(regs[0])
        if regs[0] in group_regs:
            grouped.append((f"register {label} (next, with {gate} next 1)", na, nb))
        else:
            claims.append((f"register {label} (next)", na, nb))

    solver = z3.Solver()
    solver.set("timeout", int(timeout_s * 1000))
    solver.add(ca.bit(gate_bits[0]) == 0)
    gate_on = z3.Extract(gate_reg.q.index(gate_bits[0]), gate_reg.q.index(gate_bits[0]), gate_next) == 1
    differs = [na != nb for _, na, nb in claims] + [z3.And(gate_on, na != nb) for _, na, nb in grouped]
    solver.add(z3.Or(*differs))
    verdict = solver.check()
    if verdict == z3.unsat:
        return None
    if verdict != z3.sat:
        raise Netlist2TFError(f"z3 could not decide the gated-group property ({solver.reason_unknown()}); "
                              f"raise timeout_s (was {timeout_s} s)")
    model = solver.model()

    def val(term):
        return model.eval(term, model_completion=True).as_long()
    on = z3.is_true(model.eval(gate_on, model_completion=True))
    values = {name: (val(ca.word(sigs[name])), val(cb.word(sigs[name]))) for name in group}
    what = []
    for name, na, nb in claims + (grouped if on else []):
        a, b = val(na), val(nb)
        if a != b:
            what.append(name)
            values[name] = (a, b)
    return Counterexample(tuple(what), values)


def evaluate(nl: Netlist, registers: dict, inputs: dict, memories: dict) -> tuple[dict, dict, dict]:
    """One cycle computed from the prover's own terms with concrete values (to check that the
    prover reads the netlist as ``sim.py`` runs it): ``registers`` {"reg:NAME": value} (missing: 0),
    ``inputs`` {port: value}, ``memories`` {name: {address: word}}. Returns (outputs {port: value},
    next registers {"reg:NAME": value}, writes {memory: [(address, data, enable)] per write port})."""
    import z3

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
