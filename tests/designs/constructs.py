"""Constructs beyond the examples (issue 22): read-only memories (lookup tables), read
asynchronously and synchronously, written fresh as a user would."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


def _table(depth: int, width: int, seed: int) -> list[int]:
    """A fixed pseudo-random table (a 32-bit LCG, no dependence on Python's hash or random)."""
    out, x = [], seed
    for _ in range(depth):
        x = (1103515245 * x + 12345) & 0xFFFFFFFF
        out.append((x >> 7) & ((1 << width) - 1))
    return out


class Rom16x8(wiring.Component):
    """A 16 x 8 lookup table read combinationally, its word registered and xored with the input
    (so the ROM's output feeds logic and a register as well as an output port)."""
    addr: In(4)
    x: In(8)
    data: Out(8)
    acc: Out(8)

    def elaborate(self, platform):
        m = Module()
        m.submodules.rom = rom = Memory(shape=8, depth=16, init=_table(16, 8, 1))
        rd = rom.read_port(domain="comb")
        m.d.comb += [rd.addr.eq(self.addr), self.data.eq(rd.data)]
        m.d.sync += self.acc.eq(rd.data ^ self.x)
        return m


class Rom1024x16(wiring.Component):
    """A 1,024 x 16 table with an asynchronous read port and a synchronous one (with an enable)
    at a registered address: a sine-like table of a signal-processing design."""
    addr: In(10)
    raddr: In(10)
    en: In(1)
    rd_async: Out(16)
    rd_sync: Out(16)

    def elaborate(self, platform):
        m = Module()
        m.submodules.rom = rom = Memory(shape=16, depth=1024, init=_table(1024, 16, 7))
        ra = rom.read_port(domain="comb")
        rs = rom.read_port()
        prev = Signal(10)
        m.d.sync += prev.eq(self.raddr)
        m.d.comb += [ra.addr.eq(self.addr), self.rd_async.eq(ra.data),
                     rs.addr.eq(prev), rs.en.eq(self.en), self.rd_sync.eq(rs.data)]
        return m


class CaseRom(wiring.Component):
    """A large `m.Switch` of constants (Yosys's proc_rom turns it into a ROM): a 64-entry
    7-segment-like decoder."""
    sel: In(6)
    seg: Out(12)

    def elaborate(self, platform):
        m = Module()
        table = _table(64, 12, 3)
        with m.Switch(self.sel):
            for i, v in enumerate(table):
                with m.Case(i):
                    m.d.comb += self.seg.eq(v)
        return m


class ThreeWritePorts(wiring.Component):
    """A 4 x 8 memory written by three ports in the same cycle (2-bit addresses, so they collide
    often; the middle port with nibble enables), read combinationally at two addresses and
    synchronously (not transparent) at a third. On a collision the later port wins."""
    wa0: In(2)
    wd0: In(8)
    we0: In(1)
    wa1: In(2)
    wd1: In(8)
    we1: In(2)
    wa2: In(2)
    wd2: In(8)
    we2: In(1)
    ra: In(2)
    rb: In(2)
    rs: In(2)
    ra_data: Out(8)
    rb_data: Out(8)
    rs_data: Out(8)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=8, depth=4, init=[0x5A, 0x0F, 0xF0, 0x81])
        w0, w1, w2 = mem.write_port(), mem.write_port(granularity=4), mem.write_port()
        r0, r1, r2 = mem.read_port(domain="comb"), mem.read_port(domain="comb"), mem.read_port()
        m.d.comb += [w0.addr.eq(self.wa0), w0.data.eq(self.wd0), w0.en.eq(self.we0),
                     w1.addr.eq(self.wa1), w1.data.eq(self.wd1), w1.en.eq(self.we1),
                     w2.addr.eq(self.wa2), w2.data.eq(self.wd2), w2.en.eq(self.we2),
                     r0.addr.eq(self.ra), r1.addr.eq(self.rb), r2.addr.eq(self.rs),
                     self.ra_data.eq(r0.data), self.rb_data.eq(r1.data), self.rs_data.eq(r2.data)]
        return m


class ByteEnableRam(wiring.Component):
    """A 16 x 16 RAM with one write port and byte enables (a CPU's data memory), read
    combinationally and synchronously with transparency: each write keeps the bytes it does not
    enable."""
    addr: In(4)
    wdata: In(16)
    wen: In(2)
    raddr: In(4)
    rdata: Out(16)
    sdata: Out(16)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=16, depth=16, init=[0x0101 * i for i in range(16)])
        wp = mem.write_port(granularity=8)
        ra, rs = mem.read_port(domain="comb"), mem.read_port(transparent_for=(wp,))
        m.d.comb += [wp.addr.eq(self.addr), wp.data.eq(self.wdata), wp.en.eq(self.wen),
                     ra.addr.eq(self.raddr), rs.addr.eq(self.raddr),
                     self.rdata.eq(ra.data), self.sdata.eq(rs.data)]
        return m


class FiveWritePorts(wiring.Component):
    """More write ports than the compiler splits (``multiport.MAX_WRITE_PORTS``): refused clearly."""
    wa: In(10)
    we: In(5)
    wd: In(4)
    ra: In(2)
    q: Out(4)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=4, depth=4, init=[])
        ports = [mem.write_port() for _ in range(5)]
        rd = mem.read_port(domain="comb")
        for i, wp in enumerate(ports):
            m.d.comb += [wp.addr.eq(self.wa[2 * i:2 * i + 2]), wp.data.eq(self.wd ^ i), wp.en.eq(self.we[i])]
        m.d.comb += [rd.addr.eq(self.ra), self.q.eq(rd.data)]
        return m
