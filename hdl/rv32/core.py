"""An RV32IM + Zba core designed to be compiled into a transformer.

One instruction per clock cycle, except division/remainder (33 cycles: one to start, 32 one-bit
restoring steps, the last of which retires). The register file and the RAM are Amaranth ``Memory``
objects with asynchronous (combinational) read ports, so they stay memories in the netlist (later
DeltaNet heads) and every read sees the state at the start of the cycle. Reset is synchronous.

The machine interface (memory map, console, exit/ebreak, trap causes, retirement record) is defined
in ``cpu/machine.py``; this core implements it:

* ``rvfi_*`` outputs describe the instruction retiring in this cycle (``rvfi_valid``), in the fields
  of ``cpu.machine.Retire``;
* ``console_valid``/``console_data``: a byte written to the console in this cycle;
* ``halt`` pulses in the cycle the machine stops, with ``halt_kind`` (0 exit, 1 ebreak, 2 trap),
  ``halt_cause`` (mcause, for traps) and ``halt_code`` (a0); ``halted`` stays high afterwards and
  nothing changes any more.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
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
        })

    def elaborate(self, platform):
        m = Module()
        words = self.ram_size // 4
        abits = (words - 1).bit_length()

        m.submodules.ram = ram = Memory(shape=32, depth=words, init=self.init)
        m.submodules.regs = regs = Memory(shape=32, depth=32, init=[])
        fetch = ram.read_port(domain="comb")
        load = ram.read_port(domain="comb")
        store = ram.write_port(granularity=8)
        rs1_port = regs.read_port(domain="comb")
        rs2_port = regs.read_port(domain="comb")
        rd_port = regs.write_port()

        pc = Signal(32, init=self.reset_pc)
        halted = Signal()
        m.d.comb += self.halted.eq(halted)

        # ---- fetch and decode ------------------------------------------------------------------
        fetch_fault = pc[2 + abits:] != 0                 # outside RAM (pc is always 4-aligned)
        m.d.comb += fetch.addr.eq(pc[2:2 + abits])
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
        # ecall reads a7 and a0 through the two register read ports.
        m.d.comb += [rs1_port.addr.eq(Mux(is_system, 17, rs1)), rs2_port.addr.eq(Mux(is_system, 10, rs2))]
        a, b = rs1_port.data, rs2_port.data

        # ---- ALU ---------------------------------------------------------------------------------
        pc4 = (pc + 4)[:32]
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
                m.d.comb += alu.eq(Mux(funct7[5], a.as_signed() >> shamt, a >> shamt)[:32])
            with m.Case(6):
                m.d.comb += alu.eq(a | op_b)
            with m.Case(7):
                m.d.comb += alu.eq(a & op_b)

        # Legal funct7 for OP / OP-IMM shifts.
        base_op_ok = (funct7 == 0) | ((funct7 == 0b0100000) & ((funct3 == 0) | (funct3 == 5)))
        imm_ok = ((funct3 != 1) & (funct3 != 5)) | (funct7 == 0) | ((funct3 == 5) & (funct7 == 0b0100000))

        # M extension: one 32x32 -> 64 unsigned multiplier; signed high words by correction
        # (keeps every signal within 64 bits).
        is_m = is_op & (funct7 == 0b0000001)
        mul_res = Signal(32)
        if self.mul:
            prod = Signal(64)
            m.d.comb += prod.eq(a * b)
            hi = prod[32:64]
            corr_a = Mux(a[31], b, 0)   # a negative: subtract b * 2^32
            corr_b = Mux(b[31], a, 0)
            with m.Switch(funct3[0:2]):
                with m.Case(0):
                    m.d.comb += mul_res.eq(prod[0:32])
                with m.Case(1):
                    m.d.comb += mul_res.eq((hi - corr_a - corr_b)[:32])
                with m.Case(2):
                    m.d.comb += mul_res.eq((hi - corr_a)[:32])
                with m.Case(3):
                    m.d.comb += mul_res.eq(hi)
        is_mul = is_m & ~funct3[2] & (1 if self.mul else 0)
        is_div = is_m & funct3[2] & (1 if self.div else 0)

        # Zba: shNadd rd = rs2 + (rs1 << N), funct7 0010000, funct3 2/4/6.
        is_zba = is_op & (funct7 == 0b0010000) & ((funct3 == 2) | (funct3 == 4) | (funct3 == 6)) \
            & (1 if self.zba else 0)
        zba_res = Signal(32)
        with m.Switch(funct3):
            with m.Case(2):
                m.d.comb += zba_res.eq((b + (a << 1))[:32])
            with m.Case(4):
                m.d.comb += zba_res.eq((b + (a << 2))[:32])
            with m.Case(6):
                m.d.comb += zba_res.eq((b + (a << 3))[:32])

        # ---- division (iterative) ----------------------------------------------------------------
        div_busy = Signal()
        div_count = Signal(5)
        div_rem = Signal(32)
        div_quot = Signal(32)
        div_done = Signal()
        div_res = Signal(32)
        if self.div:
            signed = ~funct3[0]
            is_rem = funct3[1]
            a_neg, b_neg = signed & a[31], signed & b[31]
            a_mag = Mux(a_neg, -a, a)[:32]
            b_mag = Mux(b_neg, -b, b)[:32]
            shifted = Cat(div_quot[31], div_rem)          # 33 bits: rem << 1 | next dividend bit
            fits = shifted >= b_mag
            next_rem = Mux(fits, shifted - b_mag, shifted)[:32]
            next_quot = Cat(fits, div_quot[0:31])
            m.d.comb += div_done.eq(div_busy & (div_count == 31))
            q = Mux(a_neg ^ b_neg, -next_quot, next_quot)[:32]
            r = Mux(a_neg, -next_rem, next_rem)[:32]
            by_zero = b == 0
            m.d.comb += div_res.eq(Mux(is_rem, Mux(by_zero, a, r), Mux(by_zero, 0xFFFF_FFFF, q)))

        # ---- branches, jumps -------------------------------------------------------------------
        taken = Signal()
        with m.Switch(funct3):
            with m.Case(0):
                m.d.comb += taken.eq(a == b)
            with m.Case(1):
                m.d.comb += taken.eq(a != b)
            with m.Case(4):
                m.d.comb += taken.eq(a.as_signed() < b.as_signed())
            with m.Case(5):
                m.d.comb += taken.eq(a.as_signed() >= b.as_signed())
            with m.Case(6):
                m.d.comb += taken.eq(a < b)
            with m.Case(7):
                m.d.comb += taken.eq(a >= b)
        branch_target = (pc + imm_b)[:32]
        jal_target = (pc + imm_j)[:32]
        jalr_target = Cat(Const(0, 1), (a + imm_i)[1:32])

        # ---- loads and stores ------------------------------------------------------------------
        mem_addr = Mux(opcode == OP_STORE, a + imm_s, a + imm_i)[:32]
        lane = mem_addr[0:2]
        size_mask = Mux(funct3[0:2] == 0, 0b0001, Mux(funct3[0:2] == 1, 0b0011, 0b1111))
        misaligned = Mux(funct3[0:2] == 0, 0, Mux(funct3[0:2] == 1, mem_addr[0], mem_addr[0:2] != 0))
        in_ram = mem_addr[2 + abits:] == 0
        is_console = mem_addr == CONSOLE_ADDR
        m.d.comb += load.addr.eq(mem_addr[2:2 + abits])
        load_word = load.data
        shifted_load = (load_word >> (lane * 8))[:32]
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
        store_lanes = (b << (lane * 8))[:32]
        lane_bits = Cat(*(byte_mask[i].replicate(8) for i in range(4)))

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
                m.d.comb += legal.eq(base_op_ok | is_mul | is_div | is_zba)
            with m.Case(OP_MISC_MEM):
                m.d.comb += legal.eq(funct3 == 0)
            with m.Case(OP_SYSTEM):
                m.d.comb += legal.eq((insn == 0x0000_0073) | (insn == 0x0010_0073))

        is_load, is_store = opcode == OP_LOAD, opcode == OP_STORE
        is_jal, is_jalr, is_branch = opcode == OP_JAL, opcode == OP_JALR, opcode == OP_BRANCH
        next_pc = Signal(32)
        with m.If(is_jal):
            m.d.comb += next_pc.eq(jal_target)
        with m.Elif(is_jalr):
            m.d.comb += next_pc.eq(jalr_target)
        with m.Elif(is_branch & taken):
            m.d.comb += next_pc.eq(branch_target)
        with m.Else():
            m.d.comb += next_pc.eq(pc4)

        trap = Signal()
        cause = Signal(4)
        with m.If(fetch_fault):
            m.d.comb += [trap.eq(1), cause.eq(1)]
        with m.Elif(insn[0:2] != 0b11):
            m.d.comb += [trap.eq(1), cause.eq(2)]
        with m.Elif(~legal):
            m.d.comb += [trap.eq(1), cause.eq(2)]
        with m.Elif((is_jal | is_jalr | (is_branch & taken)) & next_pc[1]):
            m.d.comb += [trap.eq(1), cause.eq(0)]
        with m.Elif(is_load & misaligned):
            m.d.comb += [trap.eq(1), cause.eq(4)]
        with m.Elif(is_load & ~in_ram):
            m.d.comb += [trap.eq(1), cause.eq(5)]
        with m.Elif(is_store & misaligned):
            m.d.comb += [trap.eq(1), cause.eq(6)]
        with m.Elif(is_store & ~in_ram & ~is_console):
            m.d.comb += [trap.eq(1), cause.eq(7)]
        with m.Elif((insn == 0x0000_0073) & (a != EXIT_SYSCALL)):
            m.d.comb += [trap.eq(1), cause.eq(11)]

        is_exit = insn == 0x0000_0073          # a7 == 93 here, else it trapped above
        is_ebreak = insn == 0x0010_0073
        halting = ~halted & (trap | is_exit | is_ebreak)
        m.d.comb += [
            self.halt.eq(halting),
            self.halt_kind.eq(Mux(trap, HALT_TRAP, Mux(is_ebreak, HALT_EBREAK, HALT_EXIT))),
            self.halt_cause.eq(Mux(trap, cause, 0)),
            self.halt_code.eq(b),               # a0 (read port 2 reads x10 on SYSTEM)
        ]
        with m.If(halting):
            m.d.sync += halted.eq(1)

        # ---- result, retirement, state updates -------------------------------------------------
        div_wait = is_div & ~div_done
        retire = ~halted & ~halting & ~div_wait
        writes_rd = ~(is_branch | is_store | (opcode == OP_MISC_MEM) | is_system)
        rd_value = Signal(32)
        with m.Switch(opcode):
            with m.Case(OP_LUI):
                m.d.comb += rd_value.eq(imm_u)
            with m.Case(OP_AUIPC):
                m.d.comb += rd_value.eq((pc + imm_u)[:32])
            with m.Case(OP_JAL, OP_JALR):
                m.d.comb += rd_value.eq(pc4)
            with m.Case(OP_LOAD):
                m.d.comb += rd_value.eq(load_val)
            with m.Case(OP_OP):
                m.d.comb += rd_value.eq(Mux(is_mul, mul_res, Mux(is_div, div_res, Mux(is_zba, zba_res, alu))))
            with m.Default():
                m.d.comb += rd_value.eq(alu)
        rd_written = retire & writes_rd & (rd != 0)

        m.d.comb += [
            rd_port.addr.eq(rd), rd_port.data.eq(rd_value), rd_port.en.eq(rd_written),
            store.addr.eq(mem_addr[2:2 + abits]), store.data.eq(store_lanes),
            store.en.eq(Mux(retire & is_store & in_ram, byte_mask, 0)),
            self.console_valid.eq(retire & is_store & is_console),
            self.console_data.eq(b[0:8]),
        ]
        with m.If(retire):
            m.d.sync += pc.eq(next_pc)

        if self.div:
            with m.If(~halted & ~halting & is_div):
                with m.If(~div_busy):
                    m.d.sync += [div_busy.eq(1), div_count.eq(0), div_rem.eq(0), div_quot.eq(a_mag)]
                with m.Elif(div_done):
                    m.d.sync += div_busy.eq(0)
                with m.Else():
                    m.d.sync += [div_count.eq(div_count + 1), div_rem.eq(next_rem), div_quot.eq(next_quot)]

        # ---- retirement port ---------------------------------------------------------------------
        m.d.comb += [
            self.rvfi_valid.eq(retire),
            self.rvfi_pc.eq(pc), self.rvfi_insn.eq(insn), self.rvfi_next_pc.eq(next_pc),
            self.rvfi_rd.eq(Mux(writes_rd, rd, 0)),
            self.rvfi_rd_wdata.eq(Mux(writes_rd & (rd != 0), rd_value, 0)),
            self.rvfi_mem_addr.eq(Mux(is_load | is_store, Cat(Const(0, 2), mem_addr[2:32]), 0)),
            self.rvfi_mem_rmask.eq(Mux(is_load, byte_mask, 0)),
            self.rvfi_mem_rdata.eq(Mux(is_load, load_word, 0)),
            self.rvfi_mem_wmask.eq(Mux(is_store, byte_mask, 0)),
            self.rvfi_mem_wdata.eq(Mux(is_store, store_lanes & lane_bits, 0)),
        ]
        return m
