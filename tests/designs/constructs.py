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
