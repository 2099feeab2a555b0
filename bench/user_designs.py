"""Day-one user designs: the compile-speed and token-economy benchmark set.

Small designs of the kind a new user writes first (a UART, a CRC, a GCD unit, a toy CPU, a
byte-lane RAM, a wide accumulator, a register array, a wide ALU-ish datapath), each an
:class:`amaranth.lib.wiring.Component` with ``In``/``Out`` ports and ``sync`` logic. A Verilog
PWM generator lives beside this file in ``bench/pwm.v``.

    netlist2tf synth bench/user_designs.py:UartTx
    netlist2tf sim bench/user_designs.py:Crc32 --cycles 40 --stimulus crc.jsonl --outputs out.jsonl
"""

from amaranth.hdl import Array, C, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


__all__ = ["UartTx", "Crc32", "Gcd", "AccumulatorCpu", "ByteLaneRam", "Acc96", "RegArray", "Wide1k"]


class UartTx(wiring.Component):
    """8N1 UART transmitter: one start bit (0), eight data bits LSB first, one stop bit (1).

    Each bit lasts ``divisor`` clock cycles (default 16). When idle (``busy`` low), a cycle with
    ``start`` high latches ``data``; the start bit appears on ``tx`` in the next cycle and
    ``busy`` stays high for the ``10 * divisor`` cycles of the frame. ``start`` is ignored while
    busy. ``tx`` idles high (also after reset).

    Ports
    -----
    data : In(8)
    start : In(1)
    tx : Out(1)
        Serial line (registered).
    busy : Out(1)
        A frame is being sent.
    """

    def __init__(self, divisor=16):
        if divisor < 1:
            raise ValueError("divisor must be at least 1")
        self.divisor = divisor
        super().__init__({
            "data":  In(8),
            "start": In(1),
            "tx":    Out(1),
            "busy":  Out(1),
        })

    def elaborate(self, platform):
        m = Module()

        shreg = Signal(10, init=0x3FF)           # bit 0 is on the line; idles all ones
        bits_left = Signal(range(11))
        baud = Signal(range(self.divisor))

        m.d.comb += [
            self.tx.eq(shreg[0]),
            self.busy.eq(bits_left != 0),
        ]

        with m.If(bits_left == 0):
            with m.If(self.start):
                m.d.sync += [
                    shreg.eq(Cat(C(0, 1), self.data, C(1, 1))),
                    bits_left.eq(10),
                    baud.eq(self.divisor - 1),
                ]
        with m.Elif(baud == 0):
            m.d.sync += [
                shreg.eq(Cat(shreg[1:], C(1, 1))),
                bits_left.eq(bits_left - 1),
                baud.eq(self.divisor - 1),
            ]
        with m.Else():
            m.d.sync += baud.eq(baud - 1)

        return m


class Crc32(wiring.Component):
    """CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320) over one byte per cycle.

    The register starts at (and ``clear`` sets it back to) 0xFFFFFFFF; each cycle with ``valid``
    high (and ``clear`` low) folds ``data`` in, LSB first. ``crc`` is the register XOR
    0xFFFFFFFF, i.e. after bytes ``b0..bn`` it equals ``zlib.crc32(bytes([b0, ..., bn]))``.

    Ports
    -----
    data : In(8)
    valid : In(1)
    clear : In(1)
        Restart (takes priority over ``valid``).
    crc : Out(32)
        CRC of the bytes folded in since reset or the last ``clear``.
    """

    POLY = 0xEDB88320

    def __init__(self):
        super().__init__({
            "data":  In(8),
            "valid": In(1),
            "clear": In(1),
            "crc":   Out(32),
        })

    def elaborate(self, platform):
        m = Module()

        state = Signal(32, init=0xFFFFFFFF)
        m.d.comb += self.crc.eq(state ^ 0xFFFFFFFF)

        # One named signal per bit step: ``nxt[0].replicate(32)`` on an unnamed expression copies
        # the whole expression 32 times, and eight chained steps would blow up as 32**8.
        nxt = Signal(32, name="fold0")
        m.d.comb += nxt.eq(state ^ self.data)
        for i in range(8):
            step = Signal(32, name=f"fold{i + 1}")
            m.d.comb += step.eq((nxt >> 1) ^ (nxt[0].replicate(32) & self.POLY))
            nxt = step

        with m.If(self.clear):
            m.d.sync += state.eq(0xFFFFFFFF)
        with m.Elif(self.valid):
            m.d.sync += state.eq(nxt[:32])

        return m


class Gcd(wiring.Component):
    """16-bit greatest common divisor by repeated subtraction (Euclid's original algorithm).

    A cycle with ``start`` high latches ``a`` and ``b`` and clears ``done``; then each cycle
    subtracts the smaller operand from the larger one until they are equal (or one is zero).
    ``result`` is then the GCD and ``done`` goes high until the next ``start``. ``gcd(x, 0)``
    is ``x`` and ``gcd(0, 0)`` is 0. Latency is data dependent: up to ``max(a, b)`` cycles.

    Ports
    -----
    a, b : In(16)
    start : In(1)
    result : Out(16)
    done : Out(1)
    """

    def __init__(self):
        super().__init__({
            "a":      In(16),
            "b":      In(16),
            "start":  In(1),
            "result": Out(16),
            "done":   Out(1),
        })

    def elaborate(self, platform):
        m = Module()

        x = Signal(16)
        y = Signal(16)
        busy = Signal()

        with m.If(self.start):
            m.d.sync += [
                x.eq(self.a),
                y.eq(self.b),
                busy.eq(1),
                self.done.eq(0),
            ]
        with m.Elif(busy):
            with m.If((x == y) | (x == 0) | (y == 0)):
                m.d.sync += [
                    self.result.eq(x | y),
                    self.done.eq(1),
                    busy.eq(0),
                ]
            with m.Elif(x > y):
                m.d.sync += x.eq(x - y)
            with m.Else():
                m.d.sync += y.eq(y - x)

        return m


# The accumulator CPU's instruction set: 12-bit words, opcode in bits 11..8, operand in 7..0
# (an immediate, a RAM address in its low 4 bits, or a jump target in its low 5 bits).
OP_HALT, OP_LDI, OP_LD, OP_ST, OP_ADD, OP_SUB, OP_ADDI, OP_JZ, OP_JNZ, OP_JMP = range(10)


def _asm(op, arg=0):
    return (op << 8) | (arg & 0xFF)


# Sum 5 + 4 + 3 + 2 + 1 into RAM[1] with a counted loop, then acc = sum + 0x20 = 0x2F; halt.
ACC_CPU_PROGRAM = [
    _asm(OP_LDI, 5),    # 0
    _asm(OP_ST, 0),     # 1   n = 5
    _asm(OP_LDI, 0),    # 2
    _asm(OP_ST, 1),     # 3   sum = 0
    _asm(OP_LDI, 1),    # 4
    _asm(OP_ST, 2),     # 5   one = 1
    _asm(OP_LD, 0),     # 6   loop: acc = n
    _asm(OP_JZ, 15),    # 7   if n == 0: exit
    _asm(OP_LD, 1),     # 8
    _asm(OP_ADD, 0),    # 9
    _asm(OP_ST, 1),     # 10  sum += n
    _asm(OP_LD, 0),     # 11
    _asm(OP_SUB, 2),    # 12
    _asm(OP_ST, 0),     # 13  n -= 1
    _asm(OP_JNZ, 6),    # 14  acc = n != 0: loop (else fall through)
    _asm(OP_LD, 1),     # 15  exit: acc = sum
    _asm(OP_ADDI, 0x20),  # 16
    _asm(OP_HALT),      # 17
]


class AccumulatorCpu(wiring.Component):
    """Tiny accumulator CPU: 8-bit ``acc``, 5-bit ``pc``, 32 x 12-bit ROM, 16 x 8-bit RAM.

    The ROM is a read-only :class:`Memory` (no write port, a synchronous read port) holding
    ``ACC_CPU_PROGRAM``; the RAM is a :class:`Memory` with one write port and one asynchronous
    read port. Each instruction takes two cycles while ``run`` is high (fetch: the ROM reads
    ``rom[pc]``; execute). Opcodes (bits 11..8; operand ``k`` in bits 7..0): 0 HALT, 1 LDI
    ``acc = k``, 2 LD ``acc = ram[k]``, 3 ST ``ram[k] = acc``, 4 ADD ``acc += ram[k]``, 5 SUB
    ``acc -= ram[k]``, 6 ADDI ``acc += k``, 7 JZ, 8 JNZ, 9 JMP (target ``k[4:0]``); 10..15 act
    as no-ops. Unused ROM words are 0 (HALT). The built-in program sums 5..1 in a loop and
    halts with ``acc == 0x2F`` and ``pc == 17`` after 54 instructions (108 cycles of ``run``).

    Ports
    -----
    run : In(1)
        Clock enable: the CPU stands still while low.
    acc : Out(8)
    pc : Out(5)
    halted : Out(1)
        High once a HALT executed (until reset).
    """

    def __init__(self, program=ACC_CPU_PROGRAM):
        if len(program) > 32:
            raise ValueError("the ROM holds 32 words")
        self.program = [w & 0xFFF for w in program]
        super().__init__({
            "run":    In(1),
            "acc":    Out(8),
            "pc":     Out(5),
            "halted": Out(1),
        })

    def elaborate(self, platform):
        m = Module()

        m.submodules.rom = rom = Memory(shape=unsigned(12), depth=32, init=self.program)
        m.submodules.ram = ram = Memory(shape=unsigned(8), depth=16, init=[])
        fetch = rom.read_port(domain="sync")
        ram_w = ram.write_port()
        ram_r = ram.read_port(domain="comb")

        execute = Signal()                       # 0: fetch, 1: execute
        instr = fetch.data
        op = instr[8:12]
        arg = instr[:8]

        m.d.comb += [
            fetch.addr.eq(self.pc),
            ram_r.addr.eq(arg[:4]),
            ram_w.addr.eq(arg[:4]),
            ram_w.data.eq(self.acc),
        ]

        with m.If(self.run & ~self.halted):
            m.d.sync += execute.eq(~execute)
            with m.If(execute):
                m.d.sync += self.pc.eq(self.pc + 1)
                with m.Switch(op):
                    with m.Case(OP_HALT):
                        m.d.sync += [self.halted.eq(1), self.pc.eq(self.pc)]
                    with m.Case(OP_LDI):
                        m.d.sync += self.acc.eq(arg)
                    with m.Case(OP_LD):
                        m.d.sync += self.acc.eq(ram_r.data)
                    with m.Case(OP_ST):
                        m.d.comb += ram_w.en.eq(1)
                    with m.Case(OP_ADD):
                        m.d.sync += self.acc.eq(self.acc + ram_r.data)
                    with m.Case(OP_SUB):
                        m.d.sync += self.acc.eq(self.acc - ram_r.data)
                    with m.Case(OP_ADDI):
                        m.d.sync += self.acc.eq(self.acc + arg)
                    with m.Case(OP_JZ):
                        with m.If(self.acc == 0):
                            m.d.sync += self.pc.eq(arg[:5])
                    with m.Case(OP_JNZ):
                        with m.If(self.acc != 0):
                            m.d.sync += self.pc.eq(arg[:5])
                    with m.Case(OP_JMP):
                        m.d.sync += self.pc.eq(arg[:5])

        return m


class ByteLaneRam(wiring.Component):
    """16-word x 32-bit RAM with a byte-lane write enable.

    A :class:`Memory` with a ``granularity=8`` write port: bit ``i`` of ``we`` writes byte ``i``
    (bits ``8i..8i+7``) of ``wdata`` into ``mem[addr]`` at the clock edge. ``rdata`` is
    ``mem[addr]`` sampled at the clock edge (synchronous, not transparent: on a write to the
    read address it shows the old word). The contents start at zero and are not reset.

    Ports
    -----
    addr : In(4)
    wdata : In(32)
    we : In(4)
    rdata : Out(32)
    """

    def __init__(self):
        super().__init__({
            "addr":  In(4),
            "wdata": In(32),
            "we":    In(4),
            "rdata": Out(32),
        })

    def elaborate(self, platform):
        m = Module()

        m.submodules.mem = mem = Memory(shape=unsigned(32), depth=16, init=[])
        w_port = mem.write_port(granularity=8)
        r_port = mem.read_port(domain="sync")

        m.d.comb += [
            w_port.addr.eq(self.addr),
            w_port.data.eq(self.wdata),
            w_port.en.eq(self.we),
            r_port.addr.eq(self.addr),
            self.rdata.eq(r_port.data),
        ]

        return m


class Acc96(wiring.Component):
    """96-bit accumulator: ``total += value`` each cycle with ``add`` high, wrapping mod 2**96.

    ``clear`` (priority over ``add``) and reset set ``total`` to 0.

    Ports
    -----
    value : In(32)
    add : In(1)
    clear : In(1)
    total : Out(96)
        The register.
    """

    def __init__(self):
        super().__init__({
            "value": In(32),
            "add":   In(1),
            "clear": In(1),
            "total": Out(96),
        })

    def elaborate(self, platform):
        m = Module()

        with m.If(self.clear):
            m.d.sync += self.total.eq(0)
        with m.Elif(self.add):
            m.d.sync += self.total.eq(self.total + self.value)

        return m


class RegArray(wiring.Component):
    """Eight 16-bit registers in an Amaranth ``Array``, one write port, two read ports.

    ``regs[waddr] <= wdata`` at the clock edge when ``we``. ``a = regs[raddr_a]`` and
    ``b = regs[raddr_b]`` are combinational (a write shows after its clock edge);
    ``sum <= a + b`` is registered. Reset clears the registers and ``sum``.

    Ports
    -----
    waddr : In(3)
    wdata : In(16)
    we : In(1)
    raddr_a, raddr_b : In(3)
    a, b : Out(16)
    sum : Out(17)
    """

    def __init__(self):
        super().__init__({
            "waddr":   In(3),
            "wdata":   In(16),
            "we":      In(1),
            "raddr_a": In(3),
            "raddr_b": In(3),
            "a":       Out(16),
            "b":       Out(16),
            "sum":     Out(17),
        })

    def elaborate(self, platform):
        m = Module()

        regs = Array(Signal(16, name=f"r{i}") for i in range(8))

        with m.If(self.we):
            m.d.sync += regs[self.waddr].eq(self.wdata)

        m.d.comb += [
            self.a.eq(regs[self.raddr_a]),
            self.b.eq(regs[self.raddr_b]),
        ]
        m.d.sync += self.sum.eq(self.a + self.b)

        return m


class Wide1k(wiring.Component):
    """32-bit two-register datapath: a registered 26-function ALU over ``x`` and ``y``.

    Sized for the benchmark set's one design of 800-1,000 cells in the compiler's (macro) flow.
    Two 32-bit registers ``x`` and ``y`` load from ``din`` (``ld_x``, ``ld_y``). Each cycle
    ``result`` registers one of these functions of ``x`` and ``y`` picked by ``op`` (``s`` is
    ``y[0:5]``; all results are taken mod 2**32): 0 ``x + y``, 1 ``x - y``, 2 ``x ^ y``,
    3 ``x & y``, 4 ``x | y``, 5 ``~(x ^ y)``, 6 ``x << s``, 7 ``x >> s`` (logical), 8 ``x >> s``
    (arithmetic), 9 ``x`` rotated left by ``s``, 10 ``x < y`` unsigned (0/1), 11 ``x < y``
    signed (0/1), 12 ``min(x, y)`` unsigned, 13 ``max(x, y)`` unsigned, 14 ``x`` byte-reversed,
    15 the number of one bits in ``x``, 16 ``x`` rotated right by ``s``, 17 ``|x - y|``
    unsigned, 18 ``(x + y) >> 1`` (33-bit sum), 19 ``x + y`` saturating at 0xFFFFFFFF,
    20 ``x[0:8]`` sign-extended, 21 ``x[0:16]`` sign-extended, 22 leading zeros of ``x``,
    23 ``x + (y << 2)``, 24 trailing zeros of ``x`` (both 32 for ``x == 0``), 25 parity of
    ``x``; 26..31 give 0.
    ``zero`` is registered with ``result`` (high when the new result is 0). With ``acc_mode``
    high (and ``ld_x`` low) the result is also written back into ``x`` (an accumulator).
    Reset clears every register.

    Ports
    -----
    din : In(32)
    ld_x, ld_y : In(1)
    op : In(5)
    acc_mode : In(1)
    result : Out(32)
    zero : Out(1)
    """

    def __init__(self):
        super().__init__({
            "din":      In(32),
            "ld_x":     In(1),
            "ld_y":     In(1),
            "op":       In(5),
            "acc_mode": In(1),
            "result":   Out(32),
            "zero":     Out(1),
        })

    def elaborate(self, platform):
        m = Module()

        x = Signal(32)
        y = Signal(32)
        shamt = y[:5]
        res = Signal(32)
        ltu = Signal()
        m.d.comb += ltu.eq(x < y)
        clz = Signal(6)                          # leading zeros of x: 32 when x == 0
        m.d.comb += clz.eq(32)
        for i in range(32):                      # the last assignment (highest one bit) wins
            with m.If(x[i]):
                m.d.comb += clz.eq(31 - i)
        ctz = Signal(6)                          # trailing zeros of x: 32 when x == 0
        m.d.comb += ctz.eq(32)
        for i in reversed(range(32)):            # the last assignment (lowest one bit) wins
            with m.If(x[i]):
                m.d.comb += ctz.eq(i)

        with m.Switch(self.op):
            with m.Case(0):
                m.d.comb += res.eq(x + y)
            with m.Case(1):
                m.d.comb += res.eq(x - y)
            with m.Case(2):
                m.d.comb += res.eq(x ^ y)
            with m.Case(3):
                m.d.comb += res.eq(x & y)
            with m.Case(4):
                m.d.comb += res.eq(x | y)
            with m.Case(5):
                m.d.comb += res.eq(~(x ^ y))
            with m.Case(6):
                m.d.comb += res.eq(x << shamt)
            with m.Case(7):
                m.d.comb += res.eq(x >> shamt)
            with m.Case(8):
                m.d.comb += res.eq(x.as_signed() >> shamt)
            with m.Case(9):
                m.d.comb += res.eq((Cat(x, x) << shamt)[32:64])
            with m.Case(10):
                m.d.comb += res.eq(ltu)
            with m.Case(11):
                m.d.comb += res.eq(x.as_signed() < y.as_signed())
            with m.Case(12):
                m.d.comb += res.eq(Mux(ltu, x, y))
            with m.Case(13):
                m.d.comb += res.eq(Mux(ltu, y, x))
            with m.Case(14):
                m.d.comb += res.eq(Cat(x[24:32], x[16:24], x[8:16], x[0:8]))
            with m.Case(15):
                m.d.comb += res.eq(sum(x[i] for i in range(32)))
            with m.Case(16):
                m.d.comb += res.eq((Cat(x, x) >> shamt)[:32])
            with m.Case(17):
                m.d.comb += res.eq(Mux(ltu, y - x, x - y))
            with m.Case(18):
                m.d.comb += res.eq((x + y) >> 1)
            with m.Case(19):
                m.d.comb += res.eq(Mux((x + y)[32], 0xFFFFFFFF, x + y))
            with m.Case(20):
                m.d.comb += res.eq(x[:8].as_signed())
            with m.Case(21):
                m.d.comb += res.eq(x[:16].as_signed())
            with m.Case(22):
                m.d.comb += res.eq(clz)
            with m.Case(23):
                m.d.comb += res.eq(x + (y << 2))
            with m.Case(24):
                m.d.comb += res.eq(ctz)
            with m.Case(25):
                m.d.comb += res.eq(x.xor())

        m.d.sync += [
            self.result.eq(res),
            self.zero.eq(res == 0),
        ]

        with m.If(self.ld_x):
            m.d.sync += x.eq(self.din)
        with m.Elif(self.acc_mode):
            m.d.sync += x.eq(res)
        with m.If(self.ld_y):
            m.d.sync += y.eq(self.din)

        return m
