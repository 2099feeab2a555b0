"""Two clock domains: sync (implicit) and fast (clocked from an input port). Rejected."""

from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
class TwoClocks(wiring.Component):
    a: In(4)
    fast_clk: In(1)
    x: Out(4)
    y: Out(4)
    def elaborate(self, platform):
        m = Module()
        m.domains.fast = cd = ClockDomain(reset_less=True)
        m.d.comb += cd.clk.eq(self.fast_clk)
        m.d.sync += self.x.eq(self.a)
        m.d.fast += self.y.eq(self.a + 1)
        return m
