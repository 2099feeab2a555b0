"""The reference machine: unicorn (QEMU) runs the program, this module enforces the machine's rules.

Unicorn's RISC-V CPU is more permissive than the machine of cpu/machine.py (it executes compressed,
atomic and CSR instructions, misaligned loads and stores, 2-byte-aligned jumps) and lacks Zba. So
every instruction is decoded here *before* unicorn executes it (a UC_HOOK_CODE hook): anything that
would trap on the machine stops the run with the right ``Halt`` and is never executed; ``ecall`` and
``ebreak`` halt here too; Zba's sh1add/sh2add/sh3add are executed here (result written, pc advanced).
The hook also builds the retirement records: the previous instruction's record is completed
(``rd_wdata``, ``next_pc``) when the next instruction's hook runs.

Trap rules (the checks happen in this order):

* fetch: pc not 4-aligned -> instruction address misaligned (0); pc outside RAM -> instruction
  access fault (1; machine.py names no code for this, 1 is RISC-V's);
* illegal instruction (2): anything outside RV32I + M + Zba (sh1add/sh2add/sh3add); FENCE (any
  fields) is a no-op, FENCE.I and every SYSTEM encoding except exact ecall/ebreak are illegal;
* jal/jalr to a target that is not 4-aligned, and a *taken* branch to one -> 0;
* loads/stores: address not aligned to the access size -> 4/6, checked before the access fault;
  a load outside RAM (including the console) -> 5, a store outside RAM other than to CONSOLE_ADDR -> 7;
* ecall with a7 = 93 -> exit with code a0; other ecall -> 11; ebreak -> halt with code a0.

Exit codes are a0 as an unsigned 32-bit value. ``max_steps``: at most that many instructions retire;
the run stops with ``Halt.STEP_LIMIT`` (at the pc of the instruction that would have been number
max_steps + 1) unless that instruction halts the machine anyway (ecall, ebreak, a trap), which is
reported as such. ``time_limit``: seconds of wall-clock time, checked every ``TIME_CHECK_STEPS``
instructions; past it the run stops with ``Halt.TIME_LIMIT`` before the next instruction.
"""

import time

from unicorn import (UC_ARCH_RISCV, UC_HOOK_BLOCK, UC_HOOK_CODE, UC_MODE_RISCV32, UC_PROT_ALL, UC_PROT_WRITE, Uc,
                     UcError)
from unicorn.riscv_const import UC_RISCV_REG_PC, UC_RISCV_REG_X0

from .machine import (CONSOLE_ADDR, DEFAULT_RAM_SIZE, EXIT_SYSCALL, RAM_BASE, TRAP_ECALL, TRAP_ILLEGAL_INSN,
                      TRAP_INSN_MISALIGNED, TRAP_LOAD_FAULT, TRAP_LOAD_MISALIGNED, TRAP_STORE_FAULT,
                      TRAP_STORE_MISALIGNED, Halt, Image, Retire, RunResult)

TRAP_INSN_FAULT = 1   # instruction access fault (RISC-V mcause 1): fetch outside RAM

M32 = 0xFFFF_FFFF
ECALL = 0x0000_0073
EBREAK = 0x0010_0073

# Instruction kinds (first field of a decoded instruction).
K_PLAIN = 0      # writes rd (or nothing) and cannot trap: ALU ops, lui, auipc, jal/branch to aligned target, fence
K_LOAD = 1
K_STORE = 2
K_BRANCH_MIS = 3  # conditional branch whose target is not 4-aligned: traps when taken
K_JAL_MIS = 4     # jal to a target that is not 4-aligned: always traps
K_JALR = 5
K_ZBA = 6         # sh1add / sh2add / sh3add, executed here (unicorn lacks Zba)
K_ECALL = 7
K_EBREAK = 8
K_ILLEGAL = 9

_OP_IMM_SHIFT_OK = {1: (0x00,), 5: (0x00, 0x20)}
_OP_F7_F3 = {0x00: range(8), 0x20: (0, 5), 0x01: range(8), 0x10: (2, 4, 6)}


def _sext(value: int, bits: int) -> int:
    sign = 1 << (bits - 1)
    return (value & (sign - 1)) - (value & sign)


def decode(insn: int, pc: int = 0) -> tuple:
    """(kind, rd, rs1, rs2, imm, funct3) of one instruction word, for the checks above. ``rd`` is 0
    for instructions that write no register. For K_LOAD/K_STORE, ``imm`` is the offset and funct3 the
    RISC-V width code; for branches ``imm`` is the target address (which depends on ``pc``)."""
    insn &= M32
    opcode = insn & 0x7F
    rd = (insn >> 7) & 31
    f3 = (insn >> 12) & 7
    rs1 = (insn >> 15) & 31
    rs2 = (insn >> 20) & 31
    f7 = insn >> 25
    illegal = (K_ILLEGAL, 0, 0, 0, 0, 0)
    if opcode in (0x37, 0x17):                                  # lui, auipc
        return (K_PLAIN, rd, 0, 0, 0, 0)
    if opcode == 0x6F:                                          # jal
        imm = (((insn >> 31) & 1) << 20) | (((insn >> 12) & 0xFF) << 12) | (((insn >> 20) & 1) << 11) \
            | (((insn >> 21) & 0x3FF) << 1)
        target = (pc + _sext(imm, 21)) & M32
        return (K_JAL_MIS if target & 3 else K_PLAIN, rd, 0, 0, target, 0)
    if opcode == 0x67:                                          # jalr
        if f3:
            return illegal
        return (K_JALR, rd, rs1, 0, _sext(insn >> 20, 12), 0)
    if opcode == 0x63:                                          # branches
        if f3 in (2, 3):
            return illegal
        imm = (((insn >> 31) & 1) << 12) | (((insn >> 7) & 1) << 11) | (((insn >> 25) & 0x3F) << 5) \
            | (((insn >> 8) & 0xF) << 1)
        target = (pc + _sext(imm, 13)) & M32
        return (K_BRANCH_MIS if target & 3 else K_PLAIN, 0, rs1, rs2, target, f3)
    if opcode == 0x03:                                          # loads
        if f3 not in (0, 1, 2, 4, 5):
            return illegal
        return (K_LOAD, rd, rs1, 0, _sext(insn >> 20, 12), f3)
    if opcode == 0x23:                                          # stores
        if f3 > 2:
            return illegal
        return (K_STORE, 0, rs1, rs2, _sext(((insn >> 25) << 5) | ((insn >> 7) & 31), 12), f3)
    if opcode == 0x13:                                          # OP-IMM
        if f3 in _OP_IMM_SHIFT_OK and f7 not in _OP_IMM_SHIFT_OK[f3]:
            return illegal
        return (K_PLAIN, rd, 0, 0, 0, 0)
    if opcode == 0x33:                                          # OP (+ M, + Zba)
        if f3 not in _OP_F7_F3.get(f7, ()):
            return illegal
        if f7 == 0x10:
            return (K_ZBA, rd, rs1, rs2, f3 >> 1, f3)
        return (K_PLAIN, rd, 0, 0, 0, 0)
    if opcode == 0x0F:                                          # FENCE (FENCE.I is not implemented)
        return (K_PLAIN, 0, 0, 0, 0, 0) if f3 == 0 else illegal
    if insn == ECALL:
        return (K_ECALL, 0, 0, 0, 0, 0)
    if insn == EBREAK:
        return (K_EBREAK, 0, 0, 0, 0, 0)
    return illegal


def is_legal(insn: int) -> bool:
    """Whether ``insn`` is an instruction of the machine (RV32IM + Zba, FENCE as no-op, ecall, ebreak)."""
    return decode(insn)[0] != K_ILLEGAL


def _branch_taken(f3: int, a: int, b: int) -> bool:
    if f3 == 0:
        return a == b
    if f3 == 1:
        return a != b
    if f3 in (4, 5):
        a, b = _sext(a, 32), _sext(b, 32)
    return a < b if f3 in (4, 6) else a >= b


_SIZE = (1, 2, 4, None, 1, 2)


TIME_CHECK_STEPS = 4096     # instructions between two looks at the clock (~10 ms here)


def run_unicorn(image: Image, ram_size: int = DEFAULT_RAM_SIZE, max_steps: int = 1_000_000,
                trace: bool = True, time_limit: float | None = None, stop_at: int | None = None,
                keep_ram: bool = False) -> RunResult:
    """Run ``image`` on the reference machine until it halts or ``max_steps`` instructions retired
    (or ``time_limit`` seconds passed: ``Halt.TIME_LIMIT``). ``trace``: collect a ``Retire`` per
    retired instruction (``records``); without it the records list stays empty and the run is faster.
    ``stop_at``: stop before executing the instruction at that address (``Halt.STOP_AT``).
    ``keep_ram``: return the RAM's bytes at the end in the result's ``ram``."""
    if ram_size <= 0 or ram_size % 4 or RAM_BASE + ram_size > CONSOLE_ADDR:
        raise ValueError(f"ram_size must be a positive multiple of 4 below {CONSOLE_ADDR:#x}, not {ram_size}")
    for addr, data in image.segments:
        if addr < RAM_BASE or addr + len(data) > RAM_BASE + ram_size:
            raise ValueError(f"image segment {addr:#x}..{addr + len(data):#x} lies outside RAM ({ram_size} bytes)")

    uc = Uc(UC_ARCH_RISCV, UC_MODE_RISCV32)
    uc.mem_map(RAM_BASE, (ram_size + 0xFFF) & ~0xFFF, UC_PROT_ALL)
    uc.mem_map(CONSOLE_ADDR, 0x1000, UC_PROT_WRITE)
    for addr, data in image.segments:
        uc.mem_write(addr, bytes(data))
    uc.reg_write(UC_RISCV_REG_PC, image.entry)

    ram_end = RAM_BASE + ram_size
    reg_read = uc.reg_read
    mem_read = uc.mem_read
    X = [UC_RISCV_REG_X0 + i for i in range(32)]
    decoded: dict = {}          # pc -> (insn, decoded tuple); stores to a cached word drop it
    raw = []                    # record tuples, turned into Retire objects at the end
    console = bytearray()
    pend = None                 # the previous instruction's record, waiting for rd_wdata and next_pc
    steps = 0
    halt = None
    # Self-modifying code: unicorn does not notice a store into an already translated block. Words
    # inside translated blocks are marked here (block hook); after a store to one, the next hook drops
    # unicorn's translations of that word and restarts at the same pc, so the new code is translated.
    code_words = bytearray((ram_size + 3) // 4)
    blocks_seen = set()
    smc_word = None
    deadline = None             # time_limit after the start (set there)
    check_at = 0 if time_limit is not None else 1 << 62     # the step count of the next look at the clock

    def block_hook(uc_, addr, size, _user):
        if (addr, size) not in blocks_seen and RAM_BASE <= addr < ram_end:
            blocks_seen.add((addr, size))
            lo, hi = (addr - RAM_BASE) >> 2, min((addr - RAM_BASE + size + 3) >> 2, len(code_words))
            code_words[lo:hi] = b"\1" * (hi - lo)

    def stop(h):
        nonlocal halt
        halt = h
        uc.emu_stop()

    def hook(uc_, pc, size, _user):
        nonlocal pend, steps, smc_word, check_at
        if pend is not None:
            rd = pend[3]
            if trace:
                raw.append((pend[0], pend[1], pc, rd, reg_read(X[rd]) if rd else 0) + pend[4:])
            pend = None
            if smc_word is not None:
                uc.ctl_remove_cache(smc_word, smc_word + 4)
                smc_word = None
                uc.reg_write(UC_RISCV_REG_PC, pc)     # leave the stale block; this hook runs again at pc
                return
        if pc == stop_at:
            return stop(Halt(Halt.STOP_AT, pc))
        if steps >= check_at:       # before the instruction's effects: it does not run
            check_at = steps + TIME_CHECK_STEPS
            if time.perf_counter() >= deadline:
                return stop(Halt(Halt.TIME_LIMIT, pc))
        entry = decoded.get(pc)
        if entry is None:
            if pc & 3:
                return stop(Halt(Halt.TRAP, pc, cause=TRAP_INSN_MISALIGNED))
            if not RAM_BASE <= pc <= ram_end - 4:
                return stop(Halt(Halt.TRAP, pc, cause=TRAP_INSN_FAULT))
            insn = int.from_bytes(mem_read(pc, 4), "little")
            entry = decoded[pc] = (insn, decode(insn, pc))
        insn, (kind, rd, rs1, rs2, imm, f3) = entry
        if kind == K_PLAIN:
            pend = (pc, insn, 0, rd, 0, 0, 0, 0, 0)
        elif kind == K_LOAD:
            addr = (reg_read(X[rs1]) + imm) & M32
            n = _SIZE[f3]
            if addr & (n - 1):
                return stop(Halt(Halt.TRAP, pc, cause=TRAP_LOAD_MISALIGNED))
            if not RAM_BASE <= addr <= ram_end - n:
                return stop(Halt(Halt.TRAP, pc, cause=TRAP_LOAD_FAULT))
            if trace:
                word = addr & ~3
                pend = (pc, insn, 0, rd, word, ((1 << n) - 1) << (addr & 3),
                        int.from_bytes(mem_read(word, 4), "little"), 0, 0)
            else:
                pend = (pc, insn, 0, 0)
        elif kind == K_STORE:
            addr = (reg_read(X[rs1]) + imm) & M32
            n = _SIZE[f3]
            if addr & (n - 1):
                return stop(Halt(Halt.TRAP, pc, cause=TRAP_STORE_MISALIGNED))
            if addr != CONSOLE_ADDR and not RAM_BASE <= addr <= ram_end - n:
                return stop(Halt(Halt.TRAP, pc, cause=TRAP_STORE_FAULT))
            if steps >= max_steps:
                return stop(Halt(Halt.STEP_LIMIT, pc))
            value = reg_read(X[rs2])
            if addr == CONSOLE_ADDR:
                console.append(value & 0xFF)
            word = addr & ~3
            if addr != CONSOLE_ADDR:
                decoded.pop(word, None)
                if code_words[(word - RAM_BASE) >> 2]:
                    smc_word = word
            if trace:
                shift = 8 * (addr & 3)
                pend = (pc, insn, 0, 0, word, 0, 0, ((1 << n) - 1) << (addr & 3),
                        (value & ((1 << (8 * n)) - 1)) << shift)
            else:
                pend = (pc, insn, 0, 0)
        elif kind == K_JALR:
            if (reg_read(X[rs1]) + imm) & 2:
                return stop(Halt(Halt.TRAP, pc, cause=TRAP_INSN_MISALIGNED))
            pend = (pc, insn, 0, rd, 0, 0, 0, 0, 0)
        elif kind == K_BRANCH_MIS:
            if _branch_taken(f3, reg_read(X[rs1]), reg_read(X[rs2])):
                return stop(Halt(Halt.TRAP, pc, cause=TRAP_INSN_MISALIGNED))
            pend = (pc, insn, 0, 0, 0, 0, 0, 0, 0)
        elif kind == K_ZBA:
            if steps >= max_steps:
                return stop(Halt(Halt.STEP_LIMIT, pc))
            if rd:
                uc.reg_write(X[rd], ((reg_read(X[rs1]) << imm) + reg_read(X[rs2])) & M32)
            uc.reg_write(UC_RISCV_REG_PC, pc + 4)
            pend = (pc, insn, 0, rd, 0, 0, 0, 0, 0)
        elif kind == K_ECALL:
            if reg_read(X[17]) == EXIT_SYSCALL:
                return stop(Halt(Halt.EXIT, pc, exit_code=reg_read(X[10])))
            return stop(Halt(Halt.TRAP, pc, cause=TRAP_ECALL))
        elif kind == K_EBREAK:
            return stop(Halt(Halt.EBREAK, pc, exit_code=reg_read(X[10])))
        elif kind == K_JAL_MIS:
            return stop(Halt(Halt.TRAP, pc, cause=TRAP_INSN_MISALIGNED))
        else:
            return stop(Halt(Halt.TRAP, pc, cause=TRAP_ILLEGAL_INSN))
        if steps >= max_steps:      # this instruction would be number max_steps + 1 to retire
            return stop(Halt(Halt.STEP_LIMIT, pc))
        steps += 1

    uc.hook_add(UC_HOOK_BLOCK, block_hook)
    uc.hook_add(UC_HOOK_CODE, hook)
    error = None
    t0 = time.perf_counter()
    if time_limit is not None:
        deadline = t0 + time_limit
    try:
        uc.emu_start(image.entry, 0xFFFF_FFFF)   # never reaches the `until` address: it is not aligned
    except UcError as e:
        error = e
    seconds = time.perf_counter() - t0

    if halt is None:
        # Unicorn stopped without our hook deciding to: the only expected way is a fetch from
        # unmapped memory after a jump out of RAM (the hook never sees that address).
        pc = reg_read(UC_RISCV_REG_PC)
        if pend is not None and trace:
            rd = pend[3]
            raw.append((pend[0], pend[1], pc, rd, reg_read(X[rd]) if rd else 0) + pend[4:])
        if pc & 3:
            halt = Halt(Halt.TRAP, pc, cause=TRAP_INSN_MISALIGNED)
        elif not RAM_BASE <= pc <= ram_end - 4:
            halt = Halt(Halt.TRAP, pc, cause=TRAP_INSN_FAULT)
        else:
            raise RuntimeError(f"unicorn stopped unexpectedly at pc {pc:#010x} after {steps} instructions: "
                               f"{error or 'no error'}")
    records = [Retire(*r) for r in raw] if trace else []
    return RunResult(console=bytes(console), halt=halt, records=records, instructions=steps, cycles=steps,
                     seconds=seconds, ram=bytes(mem_read(RAM_BASE, ram_size)) if keep_ram else None)
