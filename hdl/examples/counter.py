"""Loadable up-counter with a wrap indicator."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


__all__ = ["Counter"]


class Counter(wiring.Component):
    """Loadable, enable-gated up-counter of ``width`` bits.

    On each rising edge of ``sync`` clock:

    * if ``load`` is high, ``count`` is set to ``load_value`` (load has priority over ``en``);
    * otherwise, if ``en`` is high, ``count`` increments by one, wrapping from ``2**width - 1``
      to ``0``;
    * otherwise ``count`` holds.

    Synchronous reset (``rst``) clears ``count`` to 0. ``width`` must be in 1..63 (the
    incrementer is ``width + 1`` bits wide).

    Ports
    -----
    en : In(1)
        Count enable.
    load : In(1)
        Synchronous load (takes priority over ``en``).
    load_value : In(width)
        Value loaded into ``count`` when ``load`` is high.
    count : Out(width)
        Current counter value (a register).
    wrap : Out(1)
        Combinational; high in the cycle where ``count`` is at its maximum value and ``en`` is
        high and ``load`` is low, i.e. the counter will wrap to 0 at the next clock edge.
    """

    def __init__(self, width=8):
        if not 1 <= width <= 63:
            # count + 1 is width + 1 bits wide; keep every word <= 64 bits.
            raise ValueError("width must be in 1..63")
        self.width = width
        super().__init__({
            "en":         In(1),
            "load":       In(1),
            "load_value": In(width),
            "count":      Out(width),
            "wrap":       Out(1),
        })

    def elaborate(self, platform):
        m = Module()

        at_max = self.count == (1 << self.width) - 1
        m.d.comb += self.wrap.eq(at_max & self.en & ~self.load)

        with m.If(self.load):
            m.d.sync += self.count.eq(self.load_value)
        with m.Elif(self.en):
            m.d.sync += self.count.eq(self.count + 1)

        return m
