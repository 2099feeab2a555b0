"""Designs that exercise less common simulator paths against Amaranth's simulator."""

from amaranth import Cat, Module, Mux, ResetSignal, Signal, signed
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


class TwoMemories(wiring.Component):
    """Two memories written in the same cycle (two write ports in one frame): ``big`` is 256 x 12
    with initial contents (more words than one DeltaNet bank: 4 banks of 64; an 8-bit address whose
    write token spans two chunks) read at an input address; ``wide`` is 16 x 40 (five data chunks),
    written at a counter with a word made of the big memory's read data and the inputs, and read one
    address behind the counter (what the previous cycle wrote)."""
    wa: In(8)
    wd: In(12)
    we: In(1)
    ra: In(8)
    out_big: Out(12)
    out_wide: Out(40)

    def elaborate(self, platform):
        m = Module()
        m.submodules.big = big = Memory(shape=12, depth=256, init=[(i * 37 + 5) & 0xFFF for i in range(256)])
        m.submodules.wide = wide = Memory(shape=40, depth=16, init=[])
        wb, rb = big.write_port(), big.read_port(domain="comb")
        ww, rw = wide.write_port(), wide.read_port(domain="comb")
        count = Signal(4)
        m.d.sync += count.eq(count + 1)
        m.d.comb += [wb.addr.eq(self.wa), wb.data.eq(self.wd), wb.en.eq(self.we), rb.addr.eq(self.ra),
                     ww.addr.eq(count), ww.data.eq(Cat(rb.data, self.wd, self.wa, self.ra)), ww.en.eq(1),
                     rw.addr.eq(count - 1),
                     self.out_big.eq(rb.data), self.out_wide.eq(rw.data)]
        return m


class SerialMultiplier(wiring.Component):
    """An 8x8 shift-add multiplier: ``start`` loads ``a`` and ``b``, 8 steps later ``p`` holds the
    product and ``busy`` falls. Its working registers (``acc``, ``mcand``, ``mult``, ``count``) only
    matter while it is busy: a start loads them, nothing else reads them (the gated register group
    of the compiler's tests)."""
    start: In(1)
    a: In(8)
    b: In(8)
    busy: Out(1)
    p: Out(16)

    def elaborate(self, platform):
        m = Module()
        busy = Signal()
        acc, mcand, mult = Signal(16, name="acc"), Signal(16, name="mcand"), Signal(8, name="mult")
        count, result = Signal(3, name="count"), Signal(16, name="result")
        total = acc + (mcand & mult[0].replicate(16))
        with m.If(busy):
            m.d.sync += [acc.eq(total), mcand.eq(mcand << 1), mult.eq(mult >> 1), count.eq(count + 1)]
            with m.If(count == 7):
                m.d.sync += [busy.eq(0), result.eq(total)]
        with m.Elif(self.start):
            m.d.sync += [busy.eq(1), acc.eq(0), mcand.eq(self.a), mult.eq(self.b), count.eq(0)]
        m.d.comb += [self.busy.eq(busy), self.p.eq(result)]
        return m


class GatedMachine(wiring.Component):
    """Every kind of gated group in one design (the compiler's tests): a serial multiplier whose
    working registers matter only while it is busy; an error code latched by the first ``start``
    that arrives while busy, which matters only once ``err`` is set; the product ``p``, an output the
    host reads only in the cycle ``done`` is 1; a 16-word memory written only on ``store``."""
    start: In(1)
    store: In(1)
    a: In(8)
    b: In(8)
    busy: Out(1)
    done: Out(1)
    p: Out(16)
    rd: Out(8)
    err: Out(1)
    code_o: Out(4)

    def elaborate(self, platform):
        m = Module()
        busy, done, err = Signal(), Signal(), Signal()
        acc, mcand, mult = Signal(16, name="acc"), Signal(16, name="mcand"), Signal(8, name="mult")
        count, result, code = Signal(3, name="count"), Signal(16, name="result"), Signal(4, name="code")
        total = acc + (mcand & mult[0].replicate(16))
        m.d.sync += done.eq(0)
        with m.If(busy):
            m.d.sync += [acc.eq(total), mcand.eq(mcand << 1), mult.eq(mult >> 1), count.eq(count + 1)]
            with m.If(count == 7):
                m.d.sync += [busy.eq(0), result.eq(total), done.eq(1)]
            with m.If(self.start & ~err):
                m.d.sync += [err.eq(1), code.eq(self.a[0:4])]
        with m.Elif(self.start):
            m.d.sync += [busy.eq(1), acc.eq(0), mcand.eq(self.a), mult.eq(self.b), count.eq(0)]
        m.submodules.mem = mem = Memory(shape=8, depth=16, init=[3 * i + 1 for i in range(16)])
        wp, rp = mem.write_port(), mem.read_port(domain="comb")
        m.d.comb += [wp.en.eq(self.store), wp.addr.eq(self.a[0:4]), wp.data.eq(self.b), rp.addr.eq(self.b[0:4])]
        m.d.comb += [self.busy.eq(busy), self.done.eq(done), self.p.eq(result), self.rd.eq(rp.data),
                     self.err.eq(err), self.code_o.eq(Mux(err, code, 0))]
        return m


class HeldMachine(wiring.Component):
    """A register that changes rarely but is read every cycle (a held group's case, the compiler's
    tests): ``k`` is loaded from ``a`` when ``load`` is 1 and added into ``acc`` every cycle. A held
    group needs what the design gives: ``k_new`` (1 after a cycle that loaded ``k``) and the gate
    ``k_emit`` = ``load`` | ``k_new``. ``k`` and ``k_new`` ignore the reset, which would change ``k``
    without ``load``."""
    load: In(1)
    a: In(8)
    acc_o: Out(12)
    k_emit: Out(1)

    def elaborate(self, platform):
        m = Module()
        k = Signal(8, name="k", reset_less=True)
        k_new = Signal(name="k_new", reset_less=True)
        acc = Signal(12, name="acc", attrs={"keep": 1})     # named in the netlist (it drives acc_o)
        m.d.sync += [acc.eq(acc + k), k_new.eq(self.load)]
        with m.If(self.load):
            m.d.sync += k.eq(self.a)
        m.d.comb += [self.acc_o.eq(acc), self.k_emit.eq(self.load | k_new)]
        return m


class TailMachine(wiring.Component):
    """A register that changes rarely but is read every cycle and that the reset restores (a tail
    group's case, the compiler's tests): ``k`` (12 bits: two chunks, the last three tokens but one
    of the frame) is loaded from ``a`` when ``load`` is 1 and added into ``acc`` every cycle. The
    gate ``k_emit`` = ``load`` | reset is 1 in every cycle that may change it; ``k_load`` (``load``
    alone) misses the reset, which z3 must find."""
    load: In(1)
    a: In(12)
    acc_o: Out(14)
    k_emit: Out(1)
    k_load: Out(1)

    def elaborate(self, platform):
        m = Module()
        k = Signal(12, name="k", init=0x5A3)
        acc = Signal(14, name="acc", attrs={"keep": 1})
        m.d.sync += acc.eq(acc + k)
        with m.If(self.load):
            m.d.sync += k.eq(self.a)
        m.d.comb += [self.acc_o.eq(acc), self.k_emit.eq(self.load | ResetSignal()), self.k_load.eq(self.load)]
        return m


class FoldedMachine(wiring.Component):
    """A 32-bit memory written with words of every size (the folded writes' case, the compiler's
    tests): on ``store`` the word ``v`` cut to ``size + 1`` bytes (and 0 when ``zero``) goes to
    ``wa``; ``rd`` reads word ``ra`` and ``acc`` sums what was read, so every write shows."""
    store: In(1)
    zero: In(1)
    size: In(2)
    wa: In(3)
    ra: In(3)
    v: In(32)
    rd: Out(32)
    acc: Out(32)

    def elaborate(self, platform):
        m = Module()
        acc = Signal(32, name="acc")
        m.submodules.mem = mem = Memory(shape=32, depth=8, init=[0x01020304, 0, 5, 0x100, 0, 0, 0xFFFFFFFF, 7])
        wp, rp = mem.write_port(), mem.read_port(domain="comb")
        cut = Mux(self.size == 0, self.v[:8], Mux(self.size == 1, self.v[:16], Mux(self.size == 2, self.v[:24], self.v)))
        m.d.comb += [wp.en.eq(self.store), wp.addr.eq(self.wa), wp.data.eq(Mux(self.zero, 0, cut)),
                     rp.addr.eq(self.ra), self.rd.eq(rp.data), self.acc.eq(acc)]
        m.d.sync += acc.eq(acc + rp.data)
        return m


class BigRam(wiring.Component):
    """A 2,048 x 16 RAM with initial contents read at two addresses in every cycle: ``ra`` (an input)
    and a counter (a register). On a Qwen3.5-shaped target (d_k = 128: 127 rows per key head, two
    value heads per key head) each read port needs 2,048 / 254 -> 9 key heads of interleaved banks,
    more than one layer of a small target holds: the compiler spreads the reads over several
    DeltaNet layers (plan.spread_reads). ``acc`` folds both reads into a checksum: a register that
    nothing needs before the reads' data, so a small target's layer 0 need not hold it
    (plan.late_registers)."""
    wa: In(11)
    wd: In(16)
    we: In(1)
    ra: In(11)
    out_a: Out(16)
    out_c: Out(16)
    acc: Out(16)

    def elaborate(self, platform):
        m = Module()
        m.submodules.ram = ram = Memory(shape=16, depth=2048, init=[(i * 2654435761 >> 7) & 0xFFFF for i in range(2048)])
        wp, r1, r2 = ram.write_port(), ram.read_port(domain="comb"), ram.read_port(domain="comb")
        count, acc = Signal(11), Signal(16)
        m.d.sync += [count.eq(count + 301),          # visits every bank within a few cycles
                     acc.eq(acc.rotate_left(1) ^ r1.data ^ r2.data)]
        m.d.comb += [wp.addr.eq(self.wa), wp.data.eq(self.wd), wp.en.eq(self.we), r1.addr.eq(self.ra),
                     r2.addr.eq(count), self.out_a.eq(r1.data), self.out_c.eq(r2.data),
                     self.acc.eq(acc)]
        return m


class Relay(wiring.Component):
    """Two gated groups that hold together but not apart (the driver's group-at-a-time proof and its
    joint fallback): ``b`` copies ``a`` every cycle and ``y`` shows ``b`` only while ``g2`` is 1,
    ``g2`` follows ``g1``. Alone, ``a`` gated by ``g1`` fails (``b``'s next value, outside the
    group, reads it); together with ``b`` gated by ``g2`` it holds (``b``'s next matters only when
    ``g2``'s next, that is ``g1``, is 1)."""
    go: In(1)
    x: In(8)
    y: Out(8)

    def elaborate(self, platform):
        m = Module()
        g1, g2 = Signal(name="g1"), Signal(name="g2")
        a, b = Signal(8, name="a"), Signal(8, name="b")
        m.d.sync += [g1.eq(self.go), g2.eq(g1), a.eq(self.x), b.eq(a)]
        m.d.comb += self.y.eq(Mux(g2, b, 0))
        return m


class Hidden(wiring.Component):
    """A register that seems not to matter while ``g`` is 0, on random inputs: ``y`` shows ``r`` while
    ``g`` is 1, and also while ``g`` is 0 when the 32-bit ``key`` holds one value that random inputs
    never draw. The compiler's own search proposes ``r`` gated by ``g``; z3 must refute it."""
    go: In(1)
    key: In(32)
    x: In(8)
    y: Out(8)

    def elaborate(self, platform):
        m = Module()
        g, r = Signal(name="g"), Signal(8, name="r")
        m.d.sync += [g.eq(self.go), r.eq(self.x)]
        m.d.comb += self.y.eq(Mux(g | (self.key == 0xC0FFEE42), r, 0))
        return m
