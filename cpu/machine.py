"""The machine interface of the RV32IM+Zba CPU, shared by every engine (unicorn, netlist, model).

Memory map (byte addresses):

* RAM at ``RAM_BASE`` = 0, ``ram_size`` bytes (default 64 KiB): code, data and stack. The stack pointer
  starts at the top of RAM (the C runtime sets it).
* Console at ``CONSOLE_ADDR``: a store of any width there outputs its low byte (``sb`` is the normal
  way). It is write-only; a load from it is an access fault.
* Anything else is unmapped: a load or store there is an access fault.

Halting:

* ``ecall`` with a7 = 93 (``EXIT_SYSCALL``): the program exits with code a0 (``Halt.EXIT``).
* ``ebreak``: the machine halts (``Halt.EBREAK``); the exit code reported is a0.
* Any other ``ecall`` and every trap stop the machine with a trap cause (the RISC-V ``mcause`` code),
  never silently continuing: illegal instruction, misaligned instruction fetch/load/store, load/store
  access fault, instruction access fault (a jump out of RAM). The halting instruction (the exit
  ``ecall``, ``ebreak``, or the trapping instruction) does not retire: no retirement record, no
  register or memory write.

Retirement records (after riscv-formal's RVFI): one per retired instruction, see ``Retire``.
"""

from dataclasses import dataclass, field

RAM_BASE = 0x0000_0000
DEFAULT_RAM_SIZE = 64 * 1024
CONSOLE_ADDR = 0x1000_0000
EXIT_SYSCALL = 93

# RISC-V mcause codes of the traps this machine can take.
TRAP_INSN_MISALIGNED = 0
TRAP_INSN_FAULT = 1
TRAP_ILLEGAL_INSN = 2
TRAP_BREAKPOINT = 3
TRAP_LOAD_MISALIGNED = 4
TRAP_LOAD_FAULT = 5
TRAP_STORE_MISALIGNED = 6
TRAP_STORE_FAULT = 7
TRAP_ECALL = 11

TRAP_NAMES = {
    TRAP_INSN_MISALIGNED: "instruction address misaligned",
    TRAP_INSN_FAULT: "instruction access fault",
    TRAP_ILLEGAL_INSN: "illegal instruction",
    TRAP_BREAKPOINT: "breakpoint (ebreak)",
    TRAP_LOAD_MISALIGNED: "load address misaligned",
    TRAP_LOAD_FAULT: "load access fault",
    TRAP_STORE_MISALIGNED: "store address misaligned",
    TRAP_STORE_FAULT: "store access fault",
    TRAP_ECALL: "environment call (unsupported syscall)",
}


def is_m_instruction(insn: int) -> bool:
    """MUL*/DIV*/REM*: opcode OP with funct7 0000001 (the M extension)."""
    return insn & 0x7F == 0x33 and insn >> 25 == 1


@dataclass(frozen=True, slots=True)
class Retire:
    """One retired instruction.

    ``rd``/``rd_wdata`` are 0 when the instruction writes no register or writes x0. Memory fields
    describe the one data access, if any: ``mem_addr`` is the word-aligned address (addr & ~3),
    ``mem_rmask``/``mem_wmask`` the bytes of that word read/written (bit i = byte i), ``mem_rdata``
    the whole word read (0 if no read), ``mem_wdata`` the written bytes in their lanes of the word
    (bytes outside ``mem_wmask`` are 0). ``next_pc`` is the address of the next instruction.
    """
    pc: int
    insn: int
    next_pc: int
    rd: int = 0
    rd_wdata: int = 0
    mem_addr: int = 0
    mem_rmask: int = 0
    mem_rdata: int = 0
    mem_wmask: int = 0
    mem_wdata: int = 0

    def __str__(self):
        s = f"pc={self.pc:08x} insn={self.insn:08x} -> {self.next_pc:08x}"
        if self.rd:
            s += f" x{self.rd}={self.rd_wdata:08x}"
        if self.mem_rmask:
            s += f" load[{self.mem_addr:08x}/{self.mem_rmask:04b}]={self.mem_rdata:08x}"
        if self.mem_wmask:
            s += f" store[{self.mem_addr:08x}/{self.mem_wmask:04b}]={self.mem_wdata:08x}"
        return s


@dataclass(frozen=True, slots=True)
class Halt:
    """Why the machine stopped. ``kind`` is EXIT, EBREAK, TRAP, STEP_LIMIT or TIME_LIMIT (a run given a
    wall-clock limit, ``time_limit``, that was still running when it passed: stopped before the
    instruction at ``pc``), or STOP_AT (the reference machine asked to stop before the instruction at
    ``pc``: a snapshot, cpu/micropython.py)."""
    EXIT = "exit"
    EBREAK = "ebreak"
    TRAP = "trap"
    STEP_LIMIT = "step-limit"
    TIME_LIMIT = "time-limit"
    STOP_AT = "stop-at"

    kind: str
    pc: int
    exit_code: int = 0           # a0 as an unsigned 32-bit value (the exit status is its low byte)
    cause: int | None = None     # mcause for TRAP

    def describe(self) -> str:
        if self.kind == Halt.EXIT:
            return f"exit code {self.exit_code}"
        if self.kind == Halt.EBREAK:
            return f"ebreak at pc {self.pc:#010x} (a0 = {self.exit_code})"
        if self.kind == Halt.TRAP:
            return f"trap: {TRAP_NAMES.get(self.cause, f'cause {self.cause}')} at pc {self.pc:#010x}"
        if self.kind == Halt.TIME_LIMIT:
            return f"stopped at the time limit at pc {self.pc:#010x}"
        if self.kind == Halt.STOP_AT:
            return f"stopped as asked before pc {self.pc:#010x}"
        return f"stopped after the step limit at pc {self.pc:#010x}"


@dataclass
class RunResult:
    """What one engine's run of one program produced."""
    console: bytes
    halt: Halt
    records: list = field(default_factory=list)   # list[Retire]
    instructions: int = 0
    cycles: int = 0
    seconds: float = 0.0
    ram: bytes | None = None                       # the RAM at the end (unicorn's keep_ram)


@dataclass(frozen=True, slots=True)
class Image:
    """A program's memory image: where execution starts and the bytes to place in RAM.
    ``input_addr``: the program's input area (the ELF symbol ``__input_start`` of cpu/runtime/link.ld:
    a length word, then the bytes; ``with_input``), None for a program linked without the runtime."""
    entry: int
    segments: tuple   # tuple[(address, bytes)], each inside RAM, not overlapping
    input_addr: int | None = None

    def words(self) -> dict[int, int]:
        """{word index (address // 4): little-endian 32-bit word} for every non-zero word."""
        out: dict[int, int] = {}
        for addr, data in self.segments:
            for i, byte in enumerate(data):
                if byte:
                    a = addr + i
                    out[a >> 2] = out.get(a >> 2, 0) | (byte << (8 * (a & 3)))
        return dict(sorted(out.items()))

    @staticmethod
    def from_words(words, entry: int = 0, base: int = 0) -> "Image":
        """An image of consecutive little-endian words at ``base`` (e.g. generated code)."""
        data = b"".join(int(w & 0xFFFF_FFFF).to_bytes(4, "little") for w in words)
        return Image(entry, ((base, data),))


MIN_STACK_SIZE = 0x400      # cpu/runtime/link.ld's __min_stack_size: what the input leaves to the stack


class InputTooLong(ValueError):
    """Input that does not fit in RAM beside the program (with_input)."""


def input_room(image: Image, ram_size: int) -> int:
    """The most input bytes ``image`` has room for in ``ram_size`` bytes of RAM: after its input area's
    length word, before ``MIN_STACK_SIZE`` bytes of stack (0 for a program without an input area)."""
    if image.input_addr is None:
        return 0
    return max(0, ram_size - MIN_STACK_SIZE - image.input_addr - 4)


def with_input(image: Image, data: bytes, ram_size: int) -> Image:
    """``image`` with ``data`` as the program's input: its length (a little-endian word) at
    ``image.input_addr`` and its bytes after it, as the host places them in RAM before the first
    cycle (the same for every engine: the input is part of the memory image, so the compiled model
    reads it from its prompt). The runtime's stdin reads them (cpu/runtime/libc.c). Raises ValueError
    for a program without an input area and InputTooLong where the input leaves less than
    ``MIN_STACK_SIZE`` bytes of stack."""
    if image.input_addr is None:
        raise ValueError("the program has no input area (no __input_start symbol): only programs linked "
                         "with cpu/runtime (C files compiled by `cpu run`) read input")
    data = bytes(data)
    end = image.input_addr + 4 + len(data)
    if end + MIN_STACK_SIZE > ram_size:
        raise InputTooLong(f"the input is {len(data):,} bytes; the program leaves room for {input_room(image, ram_size):,} "
                           f"in {ram_size:,} bytes of RAM (after its code and data at {image.input_addr:#x}, "
                           f"before {MIN_STACK_SIZE:,} bytes of stack)")
    for addr, body in image.segments:
        if addr < end and image.input_addr < addr + len(body) and any(body[max(image.input_addr - addr, 0):end - addr]):
            raise ValueError(f"the program's input area at {image.input_addr:#x} overlaps its data")
    if not data:
        return image
    segment = (image.input_addr, len(data).to_bytes(4, "little") + data)
    rest = []
    for addr, body in image.segments:         # zeros of .bss that reach into the area give way to it
        if addr + len(body) > image.input_addr and addr < end:
            if addr < image.input_addr:
                rest.append((addr, body[:image.input_addr - addr]))
            if addr + len(body) > end:
                rest.append((end, body[end - addr:]))
        else:
            rest.append((addr, body))
    return Image(image.entry, tuple(sorted(rest + [segment])), image.input_addr)
