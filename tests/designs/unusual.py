"""Designs that exercise less common simulator paths against Amaranth's simulator."""

from amaranth import Cat, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


class Wide(wiring.Component):
    """Signals wider than 64 bits: a 100-bit accumulator of 96-bit products (numpy lanes cannot
    hold them, so batches run instance by instance)."""
    a: In(48)
    b: In(48)
    s: In(signed(40))
    acc: Out(100)
    prod: Out(96)
    mixed: Out(signed(90))

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.prod.eq(self.a * self.b), self.mixed.eq(self.s * Cat(self.a, self.b[:8]))]
        m.d.sync += self.acc.eq(self.acc + self.prod + (self.acc >> 37))
        return m


class TwoWritePorts(wiring.Component):
    """A memory with two write ports (the later one has priority on a collision) and per-byte write
    enables, read asynchronously and synchronously (transparent for both write ports)."""
    wa0: In(3)
    wd0: In(16)
    we0: In(2)
    wa1: In(3)
    wd1: In(16)
    we1: In(2)
    ra: In(3)
    rd_async: Out(16)
    rd_sync: Out(16)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=16, depth=8, init=[0x1111 * i for i in range(8)])
        w0 = mem.write_port(granularity=8)
        w1 = mem.write_port(granularity=8)
        r0 = mem.read_port(domain="comb")
        r1 = mem.read_port(transparent_for=(w0, w1))
        m.d.comb += [w0.addr.eq(self.wa0), w0.data.eq(self.wd0), w0.en.eq(self.we0),
                     w1.addr.eq(self.wa1), w1.data.eq(self.wd1), w1.en.eq(self.we1),
                     r0.addr.eq(self.ra), r1.addr.eq(self.ra),
                     self.rd_async.eq(r0.data), self.rd_sync.eq(r1.data)]
        return m
