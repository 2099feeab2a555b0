"""Register file with one write port, one asynchronous and one synchronous read port."""

from amaranth.hdl import Module, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


__all__ = ["RegisterFile"]


class RegisterFile(wiring.Component):
    """Register file of ``depth`` registers of ``width`` bits on a :class:`Memory`.

    The memory is initialised to ``init`` (default ``[i*3 + 1 for i in range(depth)]``,
    masked to ``width`` bits). Register 0 is an ordinary register.

    * Write port (``sync``): ``mem[w_addr] <= w_data`` at the clock edge when ``w_en``.
    * Read port 1 (``domain="comb"``, asynchronous): ``r1_data = mem[r1_addr]`` combinationally;
      a write becomes visible right after the clock edge that performs it.
    * Read port 2 (``domain="sync"``, not transparent): ``r2_data`` is ``mem[r2_addr]`` as sampled
      at the clock edge, i.e. one cycle of latency; on a read-during-write of the same address it
      returns the *old* contents.

    Reset does not affect the memory contents (nor ``r2_data``).

    Ports
    -----
    w_addr : In(log2(depth))
    w_data : In(width)
    w_en : In(1)
    r1_addr : In(log2(depth))
    r1_data : Out(width)
    r2_addr : In(log2(depth))
    r2_data : Out(width)
    """

    def __init__(self, width=16, depth=8, init=None):
        if not 1 <= width <= 64 or depth < 2:
            raise ValueError("width must be in 1..64 and depth >= 2")
        if init is None:
            init = [i * 3 + 1 for i in range(depth)]
        init = [v & ((1 << width) - 1) for v in init]
        if len(init) > depth:
            raise ValueError("init has more entries than depth")
        self.width = width
        self.depth = depth
        self.init = init
        addr_width = (depth - 1).bit_length()
        super().__init__({
            "w_addr":  In(addr_width),
            "w_data":  In(width),
            "w_en":    In(1),
            "r1_addr": In(addr_width),
            "r1_data": Out(width),
            "r2_addr": In(addr_width),
            "r2_data": Out(width),
        })

    def elaborate(self, platform):
        m = Module()

        m.submodules.regs = regs = Memory(
            shape=unsigned(self.width), depth=self.depth, init=self.init)
        w_port = regs.write_port()
        r1_port = regs.read_port(domain="comb")
        r2_port = regs.read_port(domain="sync")  # transparent_for=() -> not transparent

        m.d.comb += [
            w_port.addr.eq(self.w_addr),
            w_port.data.eq(self.w_data),
            w_port.en.eq(self.w_en),
            r1_port.addr.eq(self.r1_addr),
            self.r1_data.eq(r1_port.data),
            r2_port.addr.eq(self.r2_addr),
            self.r2_data.eq(r2_port.data),
        ]

        return m
