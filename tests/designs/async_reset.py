"""An asynchronous reset: the design builds its own sync domain with async_reset=True."""

from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
class AsyncReset(wiring.Component):
    clk: In(1)
    rst: In(1)
    a: In(4)
    x: Out(4)
    def elaborate(self, platform):
        m = Module()
        m.domains.sync = cd = ClockDomain(async_reset=True)
        m.d.comb += [cd.clk.eq(self.clk), cd.rst.eq(self.rst)]
        c = Signal(4, init=9)
        m.d.sync += c.eq(c + self.a)
        m.d.comb += self.x.eq(c)
        return m
