"""Hand-written synchronous first-word-fall-through FIFO on a Memory."""

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


__all__ = ["FIFO"]


class FIFO(wiring.Component):
    """Synchronous first-word-fall-through FIFO of ``depth`` words of ``width`` bits.

    Storage is an :class:`amaranth.lib.memory.Memory` (``init=[]``) with one write port and
    one synchronous read port in the ``sync`` domain. ``depth`` must be a power of two.

    Read and write pointers are ``log2(depth) + 1``-bit registers (the extra bit tells full from
    empty). The read port's address is the *next* read pointer, so ``r_data`` always shows the
    word at the head of the FIFO with no extra latency. When a word is written into an empty
    FIFO, the read port reads the very address being written in that cycle; the read port is
    therefore ``transparent_for`` the write port, so that the newly written word is what
    appears on ``r_data`` in the next cycle (with ``r_rdy`` high). A non-transparent port would
    show the stale memory content there.

    Ports
    -----
    w_data : In(width)
        Word to write.
    w_en : In(1)
        Write request; the word is accepted when ``w_en & w_rdy``.
    r_en : In(1)
        Read acknowledge; the head word is consumed when ``r_en & r_rdy``.
    r_data : Out(width)
        Head word (valid when ``r_rdy``).
    r_rdy : Out(1)
        FIFO not empty, i.e. ``r_data`` is valid.
    w_rdy : Out(1)
        FIFO not full.
    level : Out(log2(depth) + 1)
        Number of words stored.

    Synchronous reset empties the FIFO (memory contents are not reset).
    """

    def __init__(self, width=8, depth=16):
        if not 1 <= width <= 64:
            raise ValueError("width must be in 1..64")
        if depth < 2 or depth & (depth - 1):
            raise ValueError("depth must be a power of two, at least 2")
        self.width = width
        self.depth = depth
        self.addr_width = (depth - 1).bit_length()
        super().__init__({
            "w_data": In(width),
            "w_en":   In(1),
            "r_en":   In(1),
            "r_data": Out(width),
            "r_rdy":  Out(1),
            "w_rdy":  Out(1),
            "level":  Out(self.addr_width + 1),
        })

    def elaborate(self, platform):
        m = Module()

        m.submodules.storage = storage = Memory(
            shape=unsigned(self.width), depth=self.depth, init=[])
        w_port = storage.write_port()
        r_port = storage.read_port(domain="sync", transparent_for=(w_port,))

        ptr_shape = unsigned(self.addr_width + 1)
        w_ptr = Signal(ptr_shape)
        r_ptr = Signal(ptr_shape)
        r_ptr_next = Signal(ptr_shape)

        level = (w_ptr - r_ptr)[:self.addr_width + 1]
        m.d.comb += [
            self.level.eq(level),
            self.r_rdy.eq(level != 0),
            self.w_rdy.eq(level != self.depth),
        ]

        do_write = self.w_en & self.w_rdy
        do_read = self.r_en & self.r_rdy

        m.d.comb += [
            w_port.addr.eq(w_ptr[:self.addr_width]),
            w_port.data.eq(self.w_data),
            w_port.en.eq(do_write),
        ]
        with m.If(do_write):
            m.d.sync += w_ptr.eq(w_ptr + 1)

        m.d.comb += r_ptr_next.eq(r_ptr + do_read)
        m.d.sync += r_ptr.eq(r_ptr_next)
        m.d.comb += [
            r_port.addr.eq(r_ptr_next[:self.addr_width]),
            self.r_data.eq(r_port.data),
        ]

        return m
