"""Adders, comparisons and shifts of many widths, for the compiler's macros (tests/compile/test_macros.py)."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Arith(wiring.Component):
    a: In(32)
    b: In(32)
    c: In(16)
    total: Out(33)
    diff: Out(32)
    flags: Out(5)
    acc: Out(64)
    small: Out(5)
    shl: Out(63)
    shr: Out(32)
    sra: Out(32)
    bsel: Out(8)

    def elaborate(self, platform):
        m = Module()
        acc = Signal(64)
        small = Signal(5)
        m.d.sync += acc.eq(acc + Cat(self.a, self.b))          # 64 bits: two lookahead groups
        m.d.sync += small.eq(small - self.c[:5])               # 5 bits: one layer
        m.d.comb += [
            self.total.eq(self.a + self.b),
            self.diff.eq(self.a - self.b),
            self.flags.eq(Cat(self.a < self.b, self.a.as_signed() < self.b.as_signed(),
                              self.c >= self.a[:16], self.a[:12] == self.b[:12],
                              self.c.as_signed() > -5)),
            self.acc.eq(acc),
            self.small.eq(small),
            self.shl.eq(self.a << self.c[:5]),                  # $shl
            self.shr.eq(self.a >> self.b[:5]),                  # $shr
            self.sra.eq(self.a.as_signed() >> self.c[8:13]),    # $sshr
            self.bsel.eq(self.b.bit_select(self.c[:6], 8)),     # $shift, out of range reads 0
        ]
        return m


class Adder(wiring.Component):
    """One combinational adder of ``width`` bits (depth tests)."""

    def __init__(self, width=32):
        self.width = width
        super().__init__({"a": In(width), "b": In(width), "y": Out(width + 1)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.y.eq(self.a + self.b)
        return m
