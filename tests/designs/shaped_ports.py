"""Designs whose ports have ``ShapeCastable`` shapes (``lib.enum`` enums, ``lib.data`` structs, unions
and arrays, nested and with signed members): the netlist sees each as one plain bit vector, Amaranth's
simulator as a view (``tests/frontend/test_shaped_ports.py``)."""

from amaranth import Elaboratable, Module, Signal, signed
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out


class Op(enum.Enum, shape=2):
    """Three members in two bits: the netlist's random inputs also drive the value 3, no member."""
    ADD = 0
    SUB = 1
    XOR = 2


class Dir(enum.Enum, shape=2):
    """A direction, DOWN being -1 in two bits. (Not ``shape=signed(2)`` with ``DOWN = -1``:
    Amaranth 0.5.10's RTLIL backend cannot convert a signal of an enum with a negative member,
    ``to_binary`` raises "-1 does not fit in 2 bits".)"""
    DOWN = 0b11
    STAY = 0
    UP = 1


class EnumPorts(wiring.Component):
    """Enum inputs and outputs: ``y`` is ``a op b`` (``a`` for the value 3), ``last_op`` the previous
    cycle's ``op``; ``trend`` compares ``a`` with ``b``, ``step`` is ``a`` moved by ``dir`` (its bits
    read as a signed number)."""
    op: In(Op)
    dir: In(Dir)
    a: In(8)
    b: In(8)
    y: Out(8)
    last_op: Out(Op)
    trend: Out(Dir)
    step: Out(8)

    def elaborate(self, platform):
        m = Module()
        with m.Switch(self.op):
            with m.Case(Op.ADD):
                m.d.comb += self.y.eq(self.a + self.b)
            with m.Case(Op.SUB):
                m.d.comb += self.y.eq(self.a - self.b)
            with m.Case(Op.XOR):
                m.d.comb += self.y.eq(self.a ^ self.b)
            with m.Default():
                m.d.comb += self.y.eq(self.a)
        m.d.sync += self.last_op.eq(self.op)
        with m.If(self.a < self.b):
            m.d.comb += self.trend.eq(Dir.DOWN)
        with m.Elif(self.a > self.b):
            m.d.comb += self.trend.eq(Dir.UP)
        with m.Else():
            m.d.comb += self.trend.eq(Dir.STAY)
        m.d.comb += self.step.eq(self.a + self.dir.as_value().as_signed())
        return m


class Flags(data.Union):
    raw: 3
    parts: data.StructLayout({"lo": 1, "hi": 2})


class Pixel(data.Struct):
    """A struct with a signed member and a nested union (13 bits: x 0-5, y 6-9, flags 10-12)."""
    x: signed(6)
    y: 4
    flags: Flags


class StructPorts(wiring.Component):
    """A struct in and out: ``q`` is the previous cycle's ``p`` moved by ``dx`` (signed), its ``y``
    xor'ed with the flags' high part and its flags incremented; ``wide_x`` is ``p.x * 2`` sign-extended,
    ``neg`` whether ``p.x`` is negative."""
    p: In(Pixel)
    dx: In(signed(3))
    q: Out(Pixel)
    wide_x: Out(signed(8))
    neg: Out(1)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += [self.q.x.eq(self.p.x + self.dx),
                     self.q.y.eq(self.p.y ^ self.p.flags.parts.hi),
                     self.q.flags.raw.eq(self.p.flags.raw + 1)]
        m.d.comb += [self.wide_x.eq(self.p.x * 2), self.neg.eq(self.p.x < 0)]
        return m


Pair = data.StructLayout({"a": 2, "b": signed(3)})


class ArrayPorts(wiring.Component):
    """An array of four signed 4-bit numbers in: ``picked`` is element ``sel``, ``total`` their sum,
    ``rev`` (registered) the array reversed and negated; ``pairs`` is an array of structs built from
    elements 0 and 1."""
    v: In(data.ArrayLayout(signed(4), 4))
    sel: In(2)
    picked: Out(signed(4))
    total: Out(signed(6))
    rev: Out(data.ArrayLayout(signed(4), 4))
    pairs: Out(data.ArrayLayout(Pair, 2))

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.picked.eq(self.v[self.sel]),
                     self.total.eq(self.v[0] + self.v[1] + self.v[2] + self.v[3])]
        m.d.sync += [self.rev[i].eq(-self.v[3 - i]) for i in range(4)]
        for i in range(2):
            m.d.comb += [self.pairs[i].a.eq(self.v[i][:2]), self.pairs[i].b.eq(self.v[i] >> 1)]
        return m


class PlainShaped(Elaboratable):
    """A plain Elaboratable (no signature) whose ``ports()`` lists views: a struct in, an enum out."""

    def __init__(self):
        self.p = Signal(Pixel)
        self.op = Signal(Op)
        self.y = Signal(8)
        self.last_op = Signal(Op)

    def elaborate(self, platform):
        m = Module()
        with m.If(self.op == Op.SUB):
            m.d.comb += self.y.eq(self.p.y - self.p.x)
        with m.Else():
            m.d.comb += self.y.eq(self.p.y + self.p.x)
        m.d.sync += self.last_op.eq(self.op)
        return m

    def ports(self):
        return [self.p, self.op, self.y, self.last_op]
