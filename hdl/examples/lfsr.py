"""Fibonacci linear-feedback shift register."""

from functools import reduce
from operator import xor

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


__all__ = ["LFSR"]


class LFSR(wiring.Component):
    """Fibonacci LFSR of ``width`` bits with feedback polynomial given by ``taps``.

    ``taps`` lists the exponents of the feedback polynomial (the default ``(16, 14, 13, 11)`` is
    x^16 + x^14 + x^13 + x^11 + 1, maximal length). Tap ``t`` reads state bit ``width - t``;
    on each enabled step::

        fb    = XOR(state[width - t] for t in taps)
        state = (state >> 1) | (fb << (width - 1))

    (the classic ``lfsr >> 1 | bit << 15`` software formulation). The register resets to
    ``init`` (default ``0xACE1``, masked to ``width`` bits; must be non-zero).

    Ports
    -----
    en : In(1)
        Step enable.
    seed_load : In(1)
        Synchronous load of ``seed`` (priority over ``en``). A zero seed (the lock-up state) is
        replaced by ``init``.
    seed : In(width)
        Seed value.
    state : Out(width)
        Current register contents (reset value ``init``).
    bit : Out(1)
        Output bit, ``state[0]`` (the bit shifted out at the next step).
    """

    def __init__(self, width=16, taps=(16, 14, 13, 11), init=0xACE1):
        taps = tuple(taps)
        if not 2 <= width <= 64:
            raise ValueError("width must be in 2..64")
        if not taps or any(not 1 <= t <= width for t in taps) or width not in taps:
            raise ValueError("taps must be in 1..width and include width")
        init &= (1 << width) - 1
        if init == 0:
            raise ValueError("init must be non-zero (modulo 2**width)")
        self.width = width
        self.taps = taps
        self.init = init
        super().__init__({
            "en":        In(1),
            "seed_load": In(1),
            "seed":      In(width),
            "state":     Out(width, init=init),
            "bit":       Out(1),
        })

    def elaborate(self, platform):
        m = Module()

        feedback = reduce(xor, [self.state[self.width - t] for t in self.taps])
        m.d.comb += self.bit.eq(self.state[0])

        with m.If(self.seed_load):
            with m.If(self.seed == 0):
                m.d.sync += self.state.eq(self.init)
            with m.Else():
                m.d.sync += self.state.eq(self.seed)
        with m.Elif(self.en):
            m.d.sync += self.state.eq(Cat(self.state[1:], feedback))

        return m
