"""The multiplier macro (``macros.expand_mul``: ``$mul`` and ``$macc_v2``) against Python's integer
arithmetic, without any model: the threshold circuit is evaluated on integers (NumPy, all inputs at
once), every output bit must be 0/1 and equal the product (or sum of products and addends) that
Python computes from the operands' values; exhaustive at 4 and 8 bits, random and corner operands at
16 and 32. Also: the simulator's and the prover's ``$macc_v2`` against Python, what Yosys's macro
flow keeps, the depth the docs promise, and the bfloat16 range of every neuron.
The model-level check (a multiplier compiled and run by transformers) is tests/run/test_compile_e2e.py."""

import itertools
import random

import numpy as np
import pytest

from netlist2tf.frontend.synth import synthesize
from netlist2tf.gadgets.ffn_threshold import BF16_LIMIT
from netlist2tf.netlist.ir import CONST0, CONST1, Cell, Net, Netlist, Port, parse_netlist
from netlist2tf.compile.macros import expand_mul
from netlist2tf.compile.schedule import schedule, unit_cost
from netlist2tf.sim.simulator import Simulator
from netlist2tf.compile.target import Target


def _value(v: int, w: int, signed: bool) -> int:
    return v - (1 << w) if signed and w and v >> (w - 1) & 1 else v


class _Macc:
    """A one-cell netlist: ``products`` [(aw, bw, signed, negated)], ``addends`` [(cw, signed,
    negated)] as a ``$macc_v2`` (or, for one product and no addends, ``as_mul``, a ``$mul``)."""

    def __init__(self, products, addends, yw, as_mul=False):
        n = 3
        self.ports = []

        def port(name, w):
            nonlocal n
            sig = tuple(range(n, n + w))
            n += w
            self.ports.append((name, sig))
            return sig

        A, B, C = [], [], []
        self.products, self.addends, self.yw = products, addends, yw
        for k, (aw, bw, _, _) in enumerate(products):
            A += port(f"a{k}", aw)
            B += port(f"b{k}", bw)
        for k, (cw, _, _) in enumerate(addends):
            C += port(f"c{k}", cw)
        self.Y = port("y", yw)
        if as_mul:
            (aw, bw, signed, _), = products
            params = (("A_SIGNED", int(signed)), ("A_WIDTH", aw), ("B_SIGNED", int(signed)), ("B_WIDTH", bw),
                      ("Y_WIDTH", yw))
            cell = Cell("m", "$mul", params, (("A", tuple(A)), ("B", tuple(B))), (("Y", self.Y),), "")
        else:
            bits = lambda xs: sum(int(x) << i for i, x in enumerate(xs))          # noqa: E731
            widths = lambda ws: sum(w << (16 * i) for i, w in enumerate(ws))     # noqa: E731
            params = (("ADDEND_NEGATED", bits(a[2] for a in addends)), ("A_SIGNED", bits(p[2] for p in products)),
                      ("A_WIDTHS", widths(p[0] for p in products)), ("B_SIGNED", bits(p[2] for p in products)),
                      ("B_WIDTHS", widths(p[1] for p in products)), ("C_SIGNED", bits(a[1] for a in addends)),
                      ("C_WIDTHS", widths(a[0] for a in addends)), ("NADDENDS", len(addends)),
                      ("NPRODUCTS", len(products)), ("PRODUCT_NEGATED", bits(p[3] for p in products)),
                      ("Y_WIDTH", yw))
            cell = Cell("m", "$macc_v2", params, (("A", tuple(A)), ("B", tuple(B)), ("C", tuple(C))),
                        (("Y", self.Y),), "")
        self.cell, self.n = cell, n
        self.fns, self.names, _ = expand_mul(cell, n, set(self.Y))

    def expected(self, values: dict) -> list[int]:
        """Python's integers: the operands' values (signed where the cell says), summed, mod 2**yw."""
        count = len(next(iter(values.values())))
        out = []
        for i in range(count):
            total = 0
            for k, (aw, bw, signed, neg) in enumerate(self.products):
                p = _value(values[f"a{k}"][i], aw, signed) * _value(values[f"b{k}"][i], bw, signed)
                total += -p if neg else p
            for k, (cw, signed, neg) in enumerate(self.addends):
                c = _value(values[f"c{k}"][i], cw, signed)
                total += -c if neg else c
            out.append(total % (1 << self.yw))
        return out

    def evaluate(self, values: dict) -> list[int]:
        """The threshold circuit on every input at once; asserts each bit is 0 or 1."""
        count = len(next(iter(values.values())))
        bits = {CONST0: np.zeros(count, np.int64), CONST1: np.ones(count, np.int64), 2: np.zeros(count, np.int64)}
        for name, sig in self.ports[:-1]:
            v = np.array(values[name], dtype=object)
            for i, net in enumerate(sig):
                bits[net] = np.array([(x >> i) & 1 for x in v], dtype=np.int64)
        for f in self.fns:
            y = np.zeros(count, np.int64)
            for s in f.steps:
                total = sum(w * ((1 - bits[n]) if inv else bits[n]) for n, inv, w in s.terms)
                y += s.sign * (np.asarray(total) >= s.theta)
            assert set(np.unique(y)) <= {0, 1}, f"{self.names.get(f.out, f.out)} is not a bit"
            bits[f.out] = y
        return [sum(int(bits[n][i]) << k for k, n in enumerate(self.Y)) for i in range(count)]

    def check(self, values: dict):
        assert self.evaluate(values) == self.expected(values)

    def depth(self) -> int:
        level = {}
        for f in self.fns:
            level[f.out] = 1 + max((level.get(n, 0) for n in f.support), default=0)
        return max(level.get(n, 0) for n in self.Y)


def _exhaustive(m: _Macc) -> dict:
    names = [name for name, _ in m.ports[:-1]]
    widths = [len(sig) for _, sig in m.ports[:-1]]
    rows = list(itertools.product(*(range(1 << w) for w in widths)))
    return {name: [r[k] for r in rows] for k, name in enumerate(names)}


def _random(m: _Macc, count: int, seed) -> dict:
    rng = random.Random(seed)
    out = {name: [] for name, _ in m.ports[:-1]}
    corners = lambda w: [0, 1, (1 << w) - 1, 1 << (w - 1), (1 << (w - 1)) - 1] if w else [0]   # noqa: E731
    for i in range(count):
        for name, sig in m.ports[:-1]:
            w = len(sig)
            c = corners(w)
            out[name].append(c[(i + len(name)) % len(c)] if i < 25 else rng.getrandbits(w) if w else 0)
    return out


@pytest.mark.parametrize("aw, bw, yw", [(4, 4, 8), (4, 4, 4), (4, 4, 6), (3, 4, 9), (4, 1, 5), (1, 4, 4), (4, 4, 12)])
@pytest.mark.parametrize("signed", [False, True])
def test_mul_exhaustive_4_bits(aw, bw, yw, signed):
    m = _Macc([(aw, bw, signed, False)], [], yw, as_mul=True)
    m.check(_exhaustive(m))


@pytest.mark.parametrize("yw", [16, 8, 12])
@pytest.mark.parametrize("signed", [False, True])
def test_mul_exhaustive_8_bits(yw, signed):
    m = _Macc([(8, 8, signed, False)], [], yw, as_mul=True)
    m.check(_exhaustive(m))


@pytest.mark.parametrize("aw, bw, yw", [(16, 16, 32), (16, 16, 16), (32, 32, 32), (32, 32, 64), (32, 16, 48),
                                        (20, 12, 40), (33, 33, 64)])
@pytest.mark.parametrize("signed", [False, True])
def test_mul_random_16_and_32_bits(aw, bw, yw, signed):
    m = _Macc([(aw, bw, signed, False)], [], yw, as_mul=True)
    m.check(_random(m, 300, f"{aw} {bw} {yw} {signed}"))


@pytest.mark.parametrize("products, addends, yw", [
    ([(4, 4, False, False)], [(4, False, False)], 8),               # a * b + c
    ([(4, 3, True, True)], [(5, True, False)], 8),                  # c - a * b, signed
    ([(3, 3, False, False), (3, 2, False, True)], [(4, False, True)], 7),   # a0*b0 - a1*b1 - c
    ([], [(4, False, False), (4, True, False), (3, False, True)], 6),      # a three-operand sum
])
def test_macc_exhaustive(products, addends, yw):
    m = _Macc(products, addends, yw)
    m.check(_exhaustive(m))


def test_macc_random_32_bits():
    """The CPU's multiplication step: hi + op * lo[0:16] (48 bits); and a signed 3-term sum."""
    m = _Macc([(32, 16, False, False)], [(32, False, False)], 48)
    m.check(_random(m, 400, "step"))
    m = _Macc([(16, 16, True, False), (16, 8, True, True)], [(32, True, False)], 32)
    m.check(_random(m, 400, "three"))


def test_macc_random_signed_cpu_step():
    """The CPU's signed multiplication step (hdl/rv32/core.py): a 33-bit signed rs1 times a 17-bit
    signed half of rs2 plus a 33-bit signed partial sum, 49 bits; and the same negated."""
    for neg in (False, True):
        m = _Macc([(33, 17, True, neg)], [(33, True, False)], 49)
        m.check(_random(m, 400, f"cpu {neg}"))


def test_simulator_macc_against_python():
    """The netlist simulator's $macc_v2 (scalar and NumPy lanes) computes what Python does."""
    m = _Macc([(8, 6, True, False), (5, 5, False, True)], [(9, True, True)], 14)
    nets = Netlist("t", tuple(Net(i, f"n{i}", None) for i in range(m.n)),
                   tuple(Port(name, "output" if name == "y" else "input", sig, False) for name, sig in m.ports),
                   (m.cell,), (), (), ())
    values = _random(m, 64, "sim")
    expected = m.expected(values)
    for batch in (1, 64):
        sim = Simulator(nets, batch=batch)
        for start in range(0, 64, batch):
            ins = {k: np.array(v[start:start + batch], dtype=object) for k, v in values.items()}
            got = sim.step(ins)["y"]
            assert [int(x) for x in np.atleast_1d(got)] == expected[start:start + batch]


def test_prover_macc_against_python():
    """netlist2tf.netlist.formal's $macc_v2 terms, evaluated on concrete operands, give Python's value."""
    pytest.importorskip("z3")
    from netlist2tf.netlist.formal import evaluate

    m = _Macc([(6, 5, True, True)], [(7, False, False)], 10)
    nl = Netlist("t", tuple(Net(i, f"n{i}", None) for i in range(m.n)),
                 tuple(Port(name, "output" if name == "y" else "input", sig, False) for name, sig in m.ports),
                 (m.cell,), (), (), ())
    values = _random(m, 20, "z3")
    for i, want in enumerate(m.expected(values)):
        outputs, _, _ = evaluate(nl, {}, {k: v[i] for k, v in values.items()}, {})
        assert outputs["y"] == want


def test_depth_and_bfloat16_range():
    """32 x 32 -> 32 is 6 levels (partial products, two counter levels, the 3-level adder); the
    CPU's signed 33 x 17 multiply-add too (Baugh-Wooley: 33 * 17 partial products, no sign
    extension); every ReLU's largest pre-activation is bfloat16-exact."""
    for products, addends, yw, depth in [([(32, 32, False, False)], [], 32, 6),
                                         ([(32, 16, False, False)], [(32, False, False)], 48, 6),
                                         ([(33, 17, True, False)], [(33, True, False)], 49, 6),
                                         ([(8, 8, False, False)], [], 16, 5), ([(4, 4, False, False)], [], 8, 3)]:
        m = _Macc(products, addends, yw)
        assert m.depth() == depth, (products, m.depth())
        for f in m.fns:
            for terms, bias, _ in f.relus():
                assert bias + sum(w for *_, w in terms if w > 0) <= BF16_LIMIT


def test_counter_neurons_are_shared():
    """A counter's bits read the same ReLUs: the 32 x 32 -> 32 multiplier costs 1,421 neurons
    with them shared, 2,467 with each bit's own merged, 3,142 with a pair of ReLUs per step."""
    m = _Macc([(32, 32, False, False)], [], 32)
    assert unit_cost(m.fns) == 1421
    assert sum(f.cost for f in m.fns) == 2467
    assert sum(s.neuron_count() for f in m.fns for s in f.steps) == 3142


def test_signed_products_are_not_sign_extended():
    """A signed product costs about what the unsigned one of its widths does (Baugh-Wooley), not
    the W x W triangle of its sign-extended operands: the CPU's 33 x 17 + 33 -> 49 step takes
    1,732 neurons (1,609 for the unsigned 32 x 16 + 32; 2,630 when sign-extended)."""
    signed = _Macc([(33, 17, True, False)], [(33, True, False)], 49)
    assert unit_cost(signed.fns) == 1732
    assert unit_cost(_Macc([(32, 16, False, False)], [(32, False, False)], 48).fns) == 1609


def test_wide_columns_are_refused():
    from netlist2tf.common.errors import UnsupportedDesignError

    with pytest.raises(UnsupportedDesignError, match="at most 256"):
        _Macc([(260, 260, False, False)], [], 300, as_mul=True)


def test_macro_flow_keeps_multipliers(tmp_path, build_dir):
    """Yosys's macro flow leaves ``a * b`` a ``$mul`` and ``a * b + c`` a ``$macc_v2``; the schedule
    puts the 16 x 16 product 6 levels deep (abc's LUT mapping: more than 10)."""
    (tmp_path / "mul.py").write_text(
        "from amaranth.hdl import Module\nfrom amaranth.lib import wiring\nfrom amaranth.lib.wiring import In, Out\n"
        "class Mul(wiring.Component):\n"
        "    a: In(16)\n    b: In(16)\n    c: In(32)\n    p: Out(32)\n    q: Out(32)\n"
        "    def elaborate(self, platform):\n"
        "        m = Module()\n"
        "        m.d.comb += [self.p.eq(self.a * self.b), self.q.eq(self.a.as_signed() * self.b.as_signed() + self.c)]\n"
        "        return m\n")
    import sys
    sys.path.insert(0, str(tmp_path))
    try:
        result = synthesize("mul:Mul", "macro", build_dir)
    finally:
        sys.path.remove(str(tmp_path))
    nl = parse_netlist(result.json_text)
    kinds = sorted(c.type for c in nl.cells if c.type in ("$mul", "$macc_v2"))
    assert kinds, [c.type for c in nl.cells]
    s = schedule(nl, Target.standalone(layers=12))
    assert s.depth == 6


def test_disjoint_cubes():
    """A small operand cell as disjoint cubes (macros.disjoint_cubes), checked on every pattern."""
    from netlist2tf.compile.logic import BitFunction
    from netlist2tf.compile.macros import disjoint_cubes

    def table(fn, k):
        return sum(fn(*((p >> i) & 1 for i in range(k))) << p for p in range(1 << k))

    cases = [(lambda a, b: a & (1 - b), 2, 1), (lambda s, u, v: u if s else v, 3, 2),
             (lambda a, b: a ^ b, 2, 2), (lambda a, b, c: a | b | c, 3, None), (lambda a, b, c: a ^ b ^ c, 3, None)]
    for fn, k, n in cases:
        f = BitFunction(99, tuple(range(10, 10 + k)), table(fn, k))
        cubes = disjoint_cubes(f)
        assert (None if cubes is None else len(cubes)) == n
        if cubes is None:
            continue
        for p in range(1 << k):
            val = {10 + i: (p >> i) & 1 for i in range(k)}
            hits = sum(all(val[x] != inv for x, inv in c) for c in cubes)
            assert hits == fn(*(val[10 + i] for i in range(k)))        # disjoint: never 2


def test_absorbed_operands_against_python():
    """Operand bits that are a mux or a masked bit (the CPU's shared multiply-add: b_lo & ~pend,
    pend ? a_hs : a_lo) built into the partial products from the mux's own inputs: the threshold
    circuit never reads the operand bits themselves and equals Python's sum on random inputs."""
    m = _Macc([(17, 12, True, False), (10, 12, False, False)], [(14, True, False)], 30)
    A0, B0 = m.cell.port("A")[:17], m.cell.port("B")[:12]
    n = m.n
    sel = n
    u = list(range(n + 1, n + 18))
    v = list(range(n + 18, n + 35))
    e = list(range(n + 35, n + 47))
    absorb = {A0[i]: [((sel, False), (u[i], False)), ((sel, True), (v[i], False))] for i in range(17)}
    absorb.update({B0[j]: [((e[j], False), (sel, True))] for j in range(12)})
    fns, _, _ = expand_mul(m.cell, n + 47, set(m.Y), absorb)
    rng = random.Random(5)
    for _ in range(300):
        s, uu, vv, ee = rng.getrandbits(1), rng.getrandbits(17), rng.getrandbits(17), rng.getrandbits(12)
        rest = {name: rng.getrandbits(len(sig)) for name, sig in m.ports[:-1] if name not in ("a0", "b0")}
        bits = {CONST0: 0, CONST1: 1, sel: s}
        bits.update({u[i]: uu >> i & 1 for i in range(17)})
        bits.update({v[i]: vv >> i & 1 for i in range(17)})
        bits.update({e[j]: ee >> j & 1 for j in range(12)})
        for name, sig in m.ports[:-1]:
            if name in rest:
                bits.update({x: rest[name] >> i & 1 for i, x in enumerate(sig)})
        for f in fns:
            val = sum(st.sign * (sum(w * ((1 - bits[x]) if inv else bits[x]) for x, inv, w in st.terms) >= st.theta)
                      for st in f.steps)
            assert val in (0, 1)
            bits[f.out] = val
        got = sum(bits[x] << i for i, x in enumerate(m.Y))
        a0 = uu if s else vv
        b0 = 0 if s else ee
        want = m.expected({"a0": [a0], "b0": [b0], **{k: [x] for k, x in rest.items()}})[0]
        assert got == want


FUSE_DESIGN = """
from amaranth.hdl import Cat, Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Fuse(wiring.Component):
    a: In(32)
    b: In(32)
    c: In(8)
    d: In(8)
    y: Out(50)      # the CPU's shape: a signed 33 x 16 product plus a 16 x 17 one shifted by 16
    z: Out(40)      # unsigned, shifted products: fused
    t: Out(24)      # an inner product truncated to 6 bits before the shift: not fused

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        m.d.comb += [
            self.y.eq((Cat(a, a[31]).as_signed() * Cat(b[0:16], Const(0, 1)).as_signed()
                       + Cat(Const(0, 16), a[0:16], Const(0, 1)).as_signed() * Cat(b[16:32], b[31]).as_signed())[:50]),
            self.z.eq(a[0:20] * b[0:12] + a[20:32] * Cat(Const(0, 16), b[12:24])),
            self.t.eq(a[0:12] * b[0:12] + Cat(Const(0, 4), (self.c * self.d)[0:6])),
        ]
        return m
"""


def test_shifted_products_fuse_into_one_cell(tmp_path, build_dir):
    """maccfuse: Yosys's wreduce turns ``x * (y << 16)`` into a product of its own added shifted;
    the compile flows fuse it back into the reader's multiply-add (one threshold multiplier, 6 levels
    instead of 12), unless the inner sum's truncation matters. The netlist simulator's outputs on
    random operands equal Python's."""
    (tmp_path / "fuse_design.py").write_text(FUSE_DESIGN)
    nl = parse_netlist(synthesize(f"{tmp_path / 'fuse_design.py'}:Fuse", "macro", build_dir).json_text)
    outs = {p.name: p.bits for p in nl.outputs}
    readers = {}
    for c in nl.cells:
        if c.type in ("$mul", "$macc_v2"):
            for n in c.port("Y"):
                readers.setdefault(n, c.name)
    per_output = {name: {readers[n] for n in bits if n in readers} for name, bits in outs.items()}
    assert len(per_output["y"]) == 1 and len(per_output["z"]) == 1      # one fused cell each
    fused = {c.name: c for c in nl.cells}
    assert len(fused[next(iter(per_output["y"]))].products_and_addends()[0]) == 2
    assert sum(1 for c in nl.cells if c.type in ("$mul", "$macc_v2")) == 4   # y, z, and t's two
    rng = random.Random(11)
    sim = Simulator(nl)
    for _ in range(200):
        a, b, c, d = rng.getrandbits(32), rng.getrandbits(32), rng.getrandbits(8), rng.getrandbits(8)
        out = sim.step({"a": a, "b": b, "c": c, "d": d})
        sa = a - (1 << 32) if a >> 31 else a
        b_hs = (b >> 16) - (1 << 16) if b >> 31 else b >> 16
        assert int(out["y"]) == (sa * (b & 0xFFFF) + (a & 0xFFFF) * b_hs * 65536) % (1 << 50)
        assert int(out["z"]) == ((a & 0xFFFFF) * (b & 0xFFF) + (a >> 20) * (((b >> 12) & 0xFFF) << 16)) % (1 << 40)
        assert int(out["t"]) == ((a & 0xFFF) * (b & 0xFFF) + (((c * d) & 63) << 4)) % (1 << 24)
    from netlist2tf.netlist.graph import keep_outputs

    assert schedule(keep_outputs(nl, ["y"]), Target.standalone(layers=12)).depth == 6   # one multiplier's depth
    assert schedule(keep_outputs(nl, ["z"]), Target.standalone(layers=12)).depth == 6
    assert schedule(keep_outputs(nl, ["t"]), Target.standalone(layers=12)).depth > 6    # two chained
