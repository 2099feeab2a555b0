"""An RV32IM + Zba core designed to be compiled into a transformer.

One instruction per clock cycle, except the M extension's high products and divisions: MUL
retires in one cycle (``Y = a * b_lo + (a_lo * b_hi) << 16``, one multiply-add cell the compiler
builds as a threshold multiplier, ``netlist2tf.compile.macros.expand_mul``: MUL is ``Y[0:32]``); MULH,
MULHSU and MULHU take 2 (the first keeps ``Y >> 32``, 18 bits, in ``m_x``; the second adds
``a_hi * b_hi`` to it, both cycles reading the operands from the registers, which the instruction
does not change before it retires); a division or remainder 3 to ``M_CYCLES`` = 19: a start that
loads the magnitudes, an alignment that skips the leading quotient steps whose bits are 0 (all of
them for a divisor of 0), at most 16 two-bit restoring steps, and a finish. The RAM
(``ram``: ``ram_size/4`` words) and the 32 registers (``regs``: word i is x``i``, x0 never written)
are Amaranth ``Memory``s with asynchronous (combinational) read ports and one write port each, so
they stay memories in the netlist (DeltaNet heads in the compiled model) and every read sees the
state at the start of the cycle. Reset is synchronous.

Shaped for the compiler (docs/design/cpu-model.md): the clock cycle is shallow (the compiled model has one
level of threshold logic per layer), so no division step ends in a retirement, and the one
multiply-add cell (6 levels after the register reads) feeds the write-back through a last mux of its
own (``sel_lo``/``sel_hi``, kept signals); the RAM has one whole-word write port (a sub-word store merges its bytes into the word
the load port reads at the same address) and the registers their own (no instruction writes both,
so the compiled model emits at most one write group a cycle, and a register's address is one
token); the pc registers hold bits 2-31 (pc is always 4-aligned), the RAM word apart from the bits
above it (only a fetch fault's halt report reads those); the write-back value is an AND-OR over one-hot selects
computed from the instruction, already 0 when nothing is written (it is also ``rvfi_rd_wdata``).

The machine interface (memory map, console, exit/ebreak, trap causes, retirement record) is defined
in ``cpu/machine.py``; this core implements it:

* ``rvfi_*`` outputs describe the instruction retiring in this cycle (``rvfi_valid``), in the fields
  of ``cpu.machine.Retire``;
* ``console_valid``/``console_data``: a byte written to the console in this cycle;
* ``halt`` pulses in the cycle the machine stops, with ``halt_kind`` (0 exit, 1 ebreak, 2 trap),
  ``halt_cause`` (mcause, for traps) and ``halt_code`` (a0); ``halted`` stays high afterwards and
  nothing changes any more;
* ``pc_mid_emit`` is 1
  in the cycles that may change ``pc_mid``, the pc's RAM-word bits above its low 4 (a jump, a taken
  branch, a sequential step out of the last word of a 16-word block, a reset): the gate of the
  model's tail group, which emits those bits only then.
"""

from amaranth.hdl import Cat, Const, Module, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

CONSOLE_ADDR = 0x1000_0000
EXIT_SYSCALL = 93

HALT_EXIT, HALT_EBREAK, HALT_TRAP = 0, 1, 2

# opcodes
OP_LUI, OP_AUIPC, OP_JAL, OP_JALR = 0b0110111, 0b0010111, 0b1101111, 0b1100111
OP_BRANCH, OP_LOAD, OP_STORE = 0b1100011, 0b0000011, 0b0100011
OP_IMM, OP_OP, OP_MISC_MEM, OP_SYSTEM = 0b0010011, 0b0110011, 0b0001111, 0b1110011


M_BITS = 2                       # quotient bits per division step (the step's depth: 4 levels a bit)
M_STEPS = 32 // M_BITS           # division steps
M_CYCLES = M_STEPS + 3           # a division: start, alignment, the steps, finish (the longest M instruction)
M_ALIGN = M_STEPS + 1            # m_count in the alignment cycle (after the start)
PC_LOW_BITS = 4                  # the pc's RAM-word bits in pc_lo, emitted every cycle (the rest, pc_mid, on a change)


def m_retires(funct3: int, m_busy: int, m_count: int, m_pend: int) -> bool:
    """Whether an M instruction with this funct3 retires in a cycle that starts with the M unit's
    state ``m_busy``, ``m_count`` and ``m_pend`` (the host's trace decoder reads them off the trace):
    MUL always, MULH/MULHSU/MULHU in their second cycle, a division after its last step."""
    if funct3 & 4:
        return bool(m_busy) and m_count == M_STEPS
    return funct3 == 0 or bool(m_pend)


class Core(wiring.Component):
    """RV32I (+ M, + Zba) core with ``ram_size`` bytes of RAM at address 0.

    Parameters: ``ram_size`` (bytes, a power of two >= 64), ``mul`` and ``div`` (the M extension's
    multiplications and divisions), ``zba`` (sh1add/sh2add/sh3add), ``init`` (initial RAM contents as
    32-bit words from address 0, for Amaranth simulation; the netlist engines load programs into
    the memory instead), ``reset_pc``.
    """

    def __init__(self, ram_size=64 * 1024, mul=True, div=True, zba=True, init=(), reset_pc=0):
        if ram_size < 64 or ram_size & (ram_size - 1):
            raise ValueError(f"ram_size must be a power of two >= 64, not {ram_size}")
        if ram_size > CONSOLE_ADDR:
            raise ValueError("RAM would overlap the console address 0x10000000")
        if reset_pc % 4:
            raise ValueError(f"reset_pc must be 4-aligned, not {reset_pc:#x}")
        self.ram_size, self.mul, self.div, self.zba = ram_size, mul, div, zba
        self.init, self.reset_pc = list(init), reset_pc
        super().__init__({
            "rvfi_valid": Out(1), "rvfi_pc": Out(32), "rvfi_insn": Out(32), "rvfi_next_pc": Out(32),
            "rvfi_rd": Out(5), "rvfi_rd_wdata": Out(32),
            "rvfi_mem_addr": Out(32), "rvfi_mem_rmask": Out(4), "rvfi_mem_rdata": Out(32),
            "rvfi_mem_wmask": Out(4), "rvfi_mem_wdata": Out(32),
            "console_valid": Out(1), "console_data": Out(8),
            "halt": Out(1), "halt_kind": Out(2), "halt_cause": Out(4), "halt_code": Out(32),
            "halted": Out(1),
            "pc_mid_emit": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        words = self.ram_size // 4
        abits = (words - 1).bit_length()

        # The RAM (words 0..words-1) and the 32 registers, each a memory with its own write port:
        # an instruction writes a register or a RAM word, never both, so the compiled model emits
        # at most one of the two write groups a cycle, and a register write's address (5 bits and
        # the enable) is one token instead of the RAM's two.
        if len(self.init) > words:
            raise ValueError(f"init holds {len(self.init)} words, the RAM {words}")
        m.submodules.ram = ram = Memory(shape=32, depth=words, init=self.init)
        m.submodules.regs = regs = Memory(shape=32, depth=32, init=[])
        fetch = ram.read_port(domain="comb")
        load = ram.read_port(domain="comb")
        write = ram.write_port()
        reg_write = regs.write_port()
        rs1_port = regs.read_port(domain="comb")
        rs2_port = regs.read_port(domain="comb")
        a7_port = regs.read_port(domain="comb")       # ecall: the syscall number and the exit code,
        a0_port = regs.read_port(domain="comb")       # at constant addresses (no mux before the reads)

        def reg_addr(r):              # register r's word (r: 5 bits or a number)
            return Const(r, 5) if isinstance(r, int) else r

        # The pc (always 4-aligned: its bits 0-1 are 0) in three registers: the RAM word (bits 2..)
        # as ``pc_lo`` (its low 4 bits) and ``pc_mid`` (the rest), and ``pc_hi``, the bits above the
        # RAM, with ``pc_oob`` = "pc_hi != 0". Out of RAM the fetch faults and nothing retires, so
        # every computation uses ``pc_ram`` (pc_hi taken as 0) and only the halt report reads pc_hi:
        # the compiled model emits it only in the frames after which pc_oob is 1 (a gated group,
        # cpu/model_engine.GATED; z3 proves the promise). pc_mid changes only on a transfer or a step
        # out of a 16-word block: the model emits it only then (a tail group, gated by pc_mid_emit).
        hi_bits = 30 - abits
        lo_bits = min(PC_LOW_BITS, abits - 1)
        word0 = (self.reset_pc >> 2) % words
        pc_lo = Signal(lo_bits, init=word0 & ((1 << lo_bits) - 1), attrs={"keep": 1})   # named in the netlist
        pc_mid = Signal(abits - lo_bits, init=word0 >> lo_bits, attrs={"keep": 1})
        pc_hi = Signal(hi_bits, init=self.reset_pc >> (2 + abits), attrs={"keep": 1})
        pc_oob = Signal(init=int(self.reset_pc >> (2 + abits) != 0))
        pc = Cat(Const(0, 2), pc_lo, pc_mid, Mux(pc_oob, pc_hi, 0))   # the architectural pc (rvfi_pc)
        pc_ram = Cat(Const(0, 2), pc_lo, pc_mid, Const(0, hi_bits))
        halted = Signal()
        m.d.comb += self.halted.eq(halted)

        # ---- fetch and decode ------------------------------------------------------------------
        fetch_fault = pc_oob                              # outside RAM
        m.d.comb += fetch.addr.eq(Cat(pc_lo, pc_mid))
        insn = Signal(32)
        m.d.comb += insn.eq(fetch.data)
        opcode, rd, funct3 = insn[0:7], insn[7:12], insn[12:15]
        rs1, rs2, funct7 = insn[15:20], insn[20:25], insn[25:32]
        imm_i = insn[20:32].as_signed()
        imm_s = Cat(insn[7:12], insn[25:32]).as_signed()
        imm_b = Cat(Const(0, 1), insn[8:12], insn[25:31], insn[7], insn[31]).as_signed()
        imm_u = Cat(Const(0, 12), insn[12:32])
        imm_j = Cat(Const(0, 1), insn[21:31], insn[20], insn[12:20], insn[31]).as_signed()

        is_system = opcode == OP_SYSTEM
        m.d.comb += [rs1_port.addr.eq(reg_addr(rs1)), rs2_port.addr.eq(reg_addr(rs2)),
                     a7_port.addr.eq(reg_addr(17)), a0_port.addr.eq(reg_addr(10))]
        a, b = rs1_port.data, rs2_port.data

        # ---- ALU ---------------------------------------------------------------------------------
        pc4 = (pc_ram + 4)[:32]
        is_op, is_imm = opcode == OP_OP, opcode == OP_IMM
        op_b = Mux(is_op, b, imm_i)[:32]           # Mux sign-extends the 12-bit immediate
        shamt = op_b[0:5]
        sub = is_op & (funct7 == 0b0100000) & (funct3 == 0)
        alu = Signal(32)
        with m.Switch(funct3):
            with m.Case(0):
                m.d.comb += alu.eq(Mux(sub, a - b, a + op_b)[:32])
            with m.Case(1):
                m.d.comb += alu.eq((a << shamt)[:32])
            with m.Case(2):
                m.d.comb += alu.eq(a.as_signed() < op_b.as_signed())
            with m.Case(3):
                m.d.comb += alu.eq(a < op_b)
            with m.Case(4):
                m.d.comb += alu.eq(a ^ op_b)
            with m.Case(5):
                # one 33-bit arithmetic shift for srl/sra: the extra top bit is the fill
                m.d.comb += alu.eq((Cat(a, funct7[5] & a[31]).as_signed() >> shamt)[:32])
            with m.Case(6):
                m.d.comb += alu.eq(a | op_b)
            with m.Case(7):
                m.d.comb += alu.eq(a & op_b)

        # Legal funct7 for OP / OP-IMM shifts.
        base_op_ok = (funct7 == 0) | ((funct7 == 0b0100000) & ((funct3 == 0) | (funct3 == 5)))
        imm_ok = ((funct3 != 1) & (funct3 != 5)) | (funct7 == 0) | ((funct3 == 5) & (funct7 == 0b0100000))

        # ---- M extension ------------------------------------------------------------------------
        # Multiplication, signed throughout (no magnitudes): a as a 33-bit signed value a_s (its top
        # bit a_signed & a[31]), b = b_hs * 2**16 + b_lo with b_hs = b's signed upper half (17 bits)
        # and b_lo unsigned; a_hs, a_lo likewise. Y = a_s * b_lo + a_lo * b_hs * 2**16 (one
        # multiply-add cell, 50 bits signed) is the whole product but a_hs * b_hs * 2**32, so MUL =
        # Y[0:32] (in one cycle), and the high word a_hs * b_hs + (Y >> 32): a MULH's first cycle keeps
        # Y >> 32 (18 bits signed) in ``m_x`` and raises ``m_pend``; its second adds a_hs * b_hs.
        is_m = is_op & (funct7 == 0b0000001)
        is_mul_lo = is_m & (funct3 == 0) & (1 if self.mul else 0)
        is_mulh = is_m & ~funct3[2] & (funct3[0:2] != 0) & (1 if self.mul else 0)
        is_div = is_m & funct3[2] & (1 if self.div else 0)
        # Signedness from funct3 alone (only used for M instructions): MULH both, MULHSU a only,
        # MUL/MULHU neither (MUL's low word is the same); DIV/REM both, DIVU/REMU neither.
        a_signed = Mux(funct3[2], ~funct3[0], (funct3[0:2] == 1) | (funct3[0:2] == 2))
        b_signed = Mux(funct3[2], ~funct3[0], funct3[0:2] == 1)
        a_neg, b_neg = a_signed & a[31], b_signed & b[31]
        m_pend = Signal(attrs={"keep": 1})                    # a MULH's second cycle (named in the netlist)
        m_x = Signal(18)
        prod_lo = Signal(32, attrs={"keep": 1})               # MUL's result (kept: the write-back's last mux)
        prod_hi = Signal(32, attrs={"keep": 1})               # MULH*'s
        y = Signal(50)
        # one multiply-add cell for both cycles: the first product only in the first, the second's
        # multiplicand a_lo then a_hs, the addend m_x only in the second
        a2 = Mux(m_pend, Cat(a[16:32], a_neg), Cat(a[0:16], Const(0, 1)))
        m.d.comb += [
            y.eq((Cat(a, a_neg).as_signed() * Cat(b[0:16] & ~m_pend.replicate(16), Const(0, 1)).as_signed()
                  + Cat(Const(0, 16), a2).as_signed() * Cat(b[16:32], b_neg).as_signed()
                  + Cat(Const(0, 16), m_x & m_pend.replicate(18)).as_signed())[:50]),
            prod_lo.eq(y[0:32]),
            prod_hi.eq(y[16:48]),
        ]
        # Division: start (busy <- 1, count <- M_ALIGN, hi <- 0, lo <- |a|, op <- |b|, the signs),
        # alignment (count <- J, the number of leading two-bit steps whose quotient bits are all 0:
        # the largest J with |a| >> (32 - 2J) < |b|, 16 for |b| = 0; hi/lo as after those steps), the
        # steps (count J..15), finish (count == M_STEPS: the result from the registers retires).
        m_busy = Signal()
        m_count = Signal(range(M_ALIGN + 1))
        m_hi = Signal(32)
        m_lo = Signal(32)
        m_op = Signal(32)
        m_sa, m_sb = (Signal(name=n, attrs={"keep": 1}) for n in ("m_sa", "m_sb"))   # named in the netlist
        m_done = Signal()
        m_res = Signal(32)
        m.d.comb += m_done.eq(m_busy & (m_count == M_STEPS))
        a_mag = Mux(a_neg, -a, a)[:32]
        b_mag = Mux(b_neg, -b, b)[:32]
        rem, quo = m_hi, m_lo
        for _ in range(M_BITS):                               # restoring division, a bit at a time
            shifted = Cat(quo[31], rem)                       # 33 bits: rem << 1 | next dividend bit
            fits = shifted >= m_op
            rem, quo = Mux(fits, shifted - m_op, shifted)[:32], Cat(fits, quo[0:31])
        div_step = (rem, quo)
        # the alignment: skip[j] = "the first j steps' quotient bits are 0" (skip[0] = 1; decreasing
        # in j), a thermometer code whose last 1 selects the shifted dividend
        by_zero_op = m_op == 0
        skip = [Const(1, 1)] + [(m_lo[32 - 2 * j:] < m_op) | by_zero_op for j in range(1, M_STEPS + 1)]
        align_hi, align_lo, align_count = Const(0, 32), Const(0, 32), Const(0, len(m_count))
        for j in range(M_STEPS + 1):
            sel = skip[j] & (~skip[j + 1] if j < M_STEPS else 1)
            align_hi = align_hi | Mux(sel, m_lo[32 - 2 * j:] if j else 0, 0)
            align_lo = align_lo | Mux(sel, (m_lo << 2 * j)[:32], 0)
            align_count = align_count | Mux(sel, j, 0)
        quot = Mux(m_sa ^ m_sb, -m_lo, m_lo)[:32]
        rem = Mux(m_sa, -m_hi, m_hi)[:32]
        by_zero = b == 0
        m.d.comb += m_res.eq(Mux(funct3[1], Mux(by_zero, a, rem), Mux(by_zero, 0xFFFF_FFFF, quot)))

        # Zba: shNadd rd = rs2 + (rs1 << N), funct7 0010000, funct3 2/4/6.
        is_zba = is_op & (funct7 == 0b0010000) & ((funct3 == 2) | (funct3 == 4) | (funct3 == 6)) \
            & (1 if self.zba else 0)
        zba_res = (b + (a << Mux(funct3 == 2, 1, Mux(funct3 == 4, 2, 3))))[:32]

        # ---- branches, jumps -------------------------------------------------------------------
        # one comparison of each kind, then a 6-input select (funct3[0] inverts): shallow
        eq, lt, ltu = a == b, a.as_signed() < b.as_signed(), a < b
        taken = Mux(funct3[2], Mux(funct3[1], ltu, lt), eq) ^ funct3[0]
        branch_target = (pc_ram + imm_b)[:32]
        jal_target = (pc_ram + imm_j)[:32]
        jalr_target = Cat(Const(0, 1), (a + imm_i)[1:32])

        # ---- loads and stores ------------------------------------------------------------------
        # stores are the only loads/stores with insn[5] set: a one-bit immediate select
        mem_addr = (a + Mux(insn[5], imm_s, imm_i))[:32]
        lane = mem_addr[0:2]
        size_mask = Mux(funct3[0:2] == 0, 0b0001, Mux(funct3[0:2] == 1, 0b0011, 0b1111))
        misaligned = Mux(funct3[0:2] == 0, 0, Mux(funct3[0:2] == 1, mem_addr[0], mem_addr[0:2] != 0))
        in_ram = mem_addr[2 + abits:] == 0
        is_console = mem_addr == CONSOLE_ADDR
        m.d.comb += load.addr.eq(mem_addr[2:2 + abits])
        load_word = load.data
        # byte-lane selects written out (constant shifts: no shifter for Yosys to share)
        shifted_load = Mux(lane[1], Mux(lane[0], load_word >> 24, load_word >> 16),
                           Mux(lane[0], load_word >> 8, load_word))[:32]
        load_val = Signal(32)
        with m.Switch(funct3):
            with m.Case(0):
                m.d.comb += load_val.eq(shifted_load[0:8].as_signed())
            with m.Case(1):
                m.d.comb += load_val.eq(shifted_load[0:16].as_signed())
            with m.Case(2):
                m.d.comb += load_val.eq(shifted_load)
            with m.Case(4):
                m.d.comb += load_val.eq(shifted_load[0:8])
            with m.Case(5):
                m.d.comb += load_val.eq(shifted_load[0:16])
        byte_mask = (size_mask << lane)[:4]
        store_lanes = Mux(lane[1], Mux(lane[0], b << 24, b << 16), Mux(lane[0], b << 8, b))[:32]
        lane_bits = Cat(*(byte_mask[i].replicate(8) for i in range(4)))
        # whole-word write: the stored bytes merged into the word the load port reads (same address)
        store_word = (store_lanes & lane_bits) | (load_word & ~lane_bits)

        # ---- legality and traps ----------------------------------------------------------------
        legal = Signal()
        with m.Switch(opcode):
            with m.Case(OP_LUI, OP_AUIPC, OP_JAL):
                m.d.comb += legal.eq(1)
            with m.Case(OP_JALR):
                m.d.comb += legal.eq(funct3 == 0)
            with m.Case(OP_BRANCH):
                m.d.comb += legal.eq((funct3 != 2) & (funct3 != 3))
            with m.Case(OP_LOAD):
                m.d.comb += legal.eq((funct3 != 3) & (funct3 != 6) & (funct3 != 7))
            with m.Case(OP_STORE):
                m.d.comb += legal.eq(funct3 < 3)
            with m.Case(OP_IMM):
                m.d.comb += legal.eq(imm_ok)
            with m.Case(OP_OP):
                m.d.comb += legal.eq(base_op_ok | is_mul_lo | is_mulh | is_div | is_zba)
            with m.Case(OP_MISC_MEM):
                m.d.comb += legal.eq(funct3 == 0)
            with m.Case(OP_SYSTEM):
                m.d.comb += legal.eq((insn == 0x0000_0073) | (insn == 0x0010_0073))

        is_load, is_store = opcode == OP_LOAD, opcode == OP_STORE
        is_jal, is_jalr, is_branch = opcode == OP_JAL, opcode == OP_JALR, opcode == OP_BRANCH
        # next pc as an AND-OR over one-hot selects (shallow); bit 1 of each target for the
        # misaligned-jump check straight from the operands (pc is always 4-aligned here, so a
        # target's bit 1 is the immediate's, or a 2-bit sum for jalr)
        next_pc = Signal(32)
        seq = ~(is_jal | is_jalr | (is_branch & taken))
        m.d.comb += next_pc.eq(Mux(is_jal, jal_target, 0) | Mux(is_jalr, jalr_target, 0)
                               | Mux(is_branch & taken, branch_target, 0) | Mux(seq, pc4, 0))
        jalr_bit1 = a[1] ^ imm_i[1] ^ (a[0] & imm_i[0])
        target_misaligned = (is_jal & imm_j[1]) | (is_jalr & jalr_bit1) | (is_branch & taken & imm_b[1])

        # Trap conditions, highest priority first; ``trap`` is their OR (flat: shallow), the cause
        # a priority choice among them.
        conditions = [
            (fetch_fault, 1),
            ((insn[0:2] != 0b11) | ~legal, 2),
            (target_misaligned, 0),
            (is_load & misaligned, 4),
            (is_load & ~in_ram, 5),
            (is_store & misaligned, 6),
            (is_store & ~in_ram & ~is_console, 7),
            ((insn == 0x0000_0073) & (a7_port.data != EXIT_SYSCALL), 11),
        ]
        # Halting is reported one cycle late, from registers: the cycle that stops only latches which
        # conditions held (and retires nothing); the next one pulses ``halt`` with the kind and the
        # priority-encoded cause. Deciding the kind and cause in the stopping cycle itself would put
        # a priority chain after the deepest conditions.
        is_exit = insn == 0x0000_0073          # a7 == 93 here, else it trapped above
        is_ebreak = insn == 0x0010_0073
        why_now = Cat(*(c for c, _ in conditions), is_exit, is_ebreak)
        why = Signal(len(conditions) + 2)
        reported = Signal()
        with m.If(~halted):
            m.d.sync += why.eq(why_now)
        m.d.sync += [halted.eq(Cat(why_now, halted).any()), reported.eq(halted)]
        trap = why[:len(conditions)].any()
        cause = Signal(4)
        for i, (_, code) in reversed(list(enumerate(conditions))):
            with m.If(why[i]):
                m.d.comb += cause.eq(code)
        m_wait = (is_mulh & ~m_pend) | (is_div & ~m_done)
        stop = Cat(why_now, halted, m_wait).any()
        go = ~stop                                       # this instruction retires
        m.d.comb += [
            self.halt.eq(halted & ~reported),
            self.halt_kind.eq(Mux(trap, HALT_TRAP, Mux(why[-1], HALT_EBREAK, HALT_EXIT))),
            self.halt_cause.eq(Mux(trap, cause, 0)),
            self.halt_code.eq(a0_port.data),
        ]

        # ---- result, retirement, state updates -------------------------------------------------
        retire = go
        writes_rd = ~(is_branch | is_store | (opcode == OP_MISC_MEM) | is_system)
        rd_written = go & writes_rd & (rd != 0)
        # Write-back: an AND-OR over one-hot selects decoded from the instruction alone (0 for x0
        # and for instructions without a destination), so the whole mux is two shallow levels.
        is_alu = (is_op & ~is_m & ~is_zba) | is_imm
        sources = [
            (opcode == OP_LUI, imm_u),
            (opcode == OP_AUIPC, (pc_ram + imm_u)[:32]),
            (is_jal | is_jalr, pc4),
            (is_load, load_val),
            (is_div & m_done, m_res),                # only when it retires: M state is stale before
            (is_zba, zba_res),
            (is_alu, alu),
        ]
        rd_value = Signal(32)
        m.d.comb += rd_value.eq(0)
        terms = [Mux(sel & writes_rd & (rd != 0), val, 0) for sel, val in sources]
        acc = terms[0]
        for t in terms[1:]:
            acc = acc | t
        # the products come last (the multiplier's outputs are the deepest): one mux level after them
        rest = Signal(32, attrs={"keep": 1})
        m.d.comb += rest.eq(acc)
        sel_lo, sel_hi = Signal(attrs={"keep": 1}), Signal(attrs={"keep": 1})
        m.d.comb += [sel_lo.eq(is_mul_lo & (rd != 0)), sel_hi.eq(is_mulh & m_pend & (rd != 0))]
        m.d.comb += rd_value.eq(Mux(sel_lo, prod_lo, 0) | Mux(sel_hi, prod_hi, 0) | rest)

        m.d.comb += [
            write.addr.eq(mem_addr[2:2 + abits]), write.data.eq(store_word),
            write.en.eq(go & is_store & in_ram),
            reg_write.addr.eq(rd), reg_write.data.eq(rd_value), reg_write.en.eq(rd_written),
            self.console_valid.eq(go & is_store & is_console),
            self.console_data.eq(b[0:8]),
        ]
        # the M state does not wait for the stop conditions (deep): after a stop nothing is
        # observable, and ``halted`` freezes the machine from the next cycle on
        m.d.sync += [pc_lo.eq(Mux(stop, pc_lo, next_pc[2:2 + lo_bits])),
                     pc_mid.eq(Mux(stop, pc_mid, next_pc[2 + lo_bits:2 + abits])),
                     pc_hi.eq(Mux(stop, pc_hi, next_pc[2 + abits:])),
                     pc_oob.eq(Mux(stop, pc_oob, next_pc[2 + abits:] != 0))]

        # pc_mid can change only when the pc does not step by 4 within a 16-word block (or a reset
        # restores it): the tail group's gate (z3 proves "0 implies unchanged", driver.prove_gating)
        m.d.comb += self.pc_mid_emit.eq(ResetSignal() | (~stop & (~seq | (pc_lo == (1 << lo_bits) - 1))))

        # the M state does not wait for the stop conditions either (a MULH's or a division's own wait
        # aside: it stops the pc)
        m.d.sync += m_pend.eq(~halted & is_mulh & ~m_pend)
        with m.If(~halted & is_mulh & ~m_pend):
            m.d.sync += m_x.eq(y[32:50])
        with m.If(~halted & is_div):
            with m.If(~m_busy):
                m.d.sync += [m_busy.eq(1), m_count.eq(M_ALIGN), m_sa.eq(a_neg), m_sb.eq(b_neg),
                             m_hi.eq(0), m_lo.eq(a_mag), m_op.eq(b_mag)]
            with m.Elif(m_done):
                m.d.sync += m_busy.eq(0)
            with m.Elif(m_count == M_ALIGN):
                m.d.sync += [m_count.eq(align_count), m_hi.eq(align_hi), m_lo.eq(align_lo)]
            with m.Else():
                m.d.sync += [m_count.eq(m_count + 1), m_hi.eq(div_step[0]), m_lo.eq(div_step[1])]

        # ---- retirement port ---------------------------------------------------------------------
        m.d.comb += [
            self.rvfi_valid.eq(retire),
            self.rvfi_pc.eq(pc), self.rvfi_insn.eq(insn), self.rvfi_next_pc.eq(next_pc),
            self.rvfi_rd.eq(Mux(writes_rd, rd, 0)),
            self.rvfi_rd_wdata.eq(rd_value),
            self.rvfi_mem_addr.eq(Mux(is_load | is_store, Cat(Const(0, 2), mem_addr[2:32]), 0)),
            self.rvfi_mem_rmask.eq(Mux(is_load, byte_mask, 0)),
            self.rvfi_mem_rdata.eq(Mux(is_load, load_word, 0)),
            self.rvfi_mem_wmask.eq(Mux(is_store, byte_mask, 0)),
            self.rvfi_mem_wdata.eq(Mux(is_store, store_lanes & lane_bits, 0)),
        ]
        return m
