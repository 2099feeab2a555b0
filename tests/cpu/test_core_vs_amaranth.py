"""The CPU netlist (Yosys + our simulator) against Amaranth's simulator of the same Core: every
output of the core (retirement port, console, halt) compared in every cycle."""

import numpy as np
import pytest

from cpu import asm
from cpu.machine import Image
from cpu.netlist_engine import core_design, core_netlist
from hdl.rv32 import Core
from netlist2tf.frontend.reference import run_amaranth
from netlist2tf.sim.simulator import Simulator

RAM = 4096
A0, A1, A2, A3, T0, T1, SP = 10, 11, 12, 13, 5, 6, 2


def _program():
    """Sum of i*i//3 for i in 20..1 (loop with mul, div, rem), byte/half/word stores and loads,
    a console write, a jump through jalr, then exit with the low byte of the sum."""
    w = []
    w += asm.li(A0, 0) + asm.li(A1, 20) + asm.li(A3, 3) + asm.li(SP, 0x800)
    loop = len(w)
    w += [asm.mul(T0, A1, A1), asm.div(T1, T0, A3), asm.rem(A2, T0, A3), asm.add(A0, A0, T1),
          asm.sub(A0, A0, A2), asm.sh2add(A0, A2, A0), asm.sw(A0, SP, 0), asm.sb(A1, SP, 5),
          asm.sh(A2, SP, 10), asm.lw(T0, SP, 4), asm.lh(T1, SP, 10), asm.lbu(A2, SP, 5),
          asm.add(A0, A0, T0), asm.addi(A1, A1, -1)]
    w += [asm.bne(A1, 0, (loop - len(w)) * 4)]
    w += asm.li(T0, 0x10000000) + [asm.sb(A0, T0, 0)]
    w += [asm.auipc(T1, 0), asm.jalr(1, T1, 12), asm.ebreak()]   # skips the ebreak
    w += [asm.andi(A0, A0, 255)] + asm.li(17, 93) + [asm.ecall()]
    return w


@pytest.mark.parametrize("program", ["loop", "trap"])
def test_core_netlist_matches_amaranth_every_cycle(program, build_dir):
    words = _program() if program == "loop" else asm.li(A0, 7) + [asm.lw(A1, A0, 0)]  # misaligned
    netlist = core_netlist(ram_size=RAM, build_dir=build_dir)
    sim = Simulator(netlist)
    sim.load_memory("ram", Image.from_words(words).words())
    cycles = 3000 if program == "loop" else 20    # M instructions take M_CYCLES (18) cycles
    trace = sim.run(cycles)
    outputs = [p.name for p in netlist.outputs]
    ref = run_amaranth(core_design(RAM), {"rst": np.zeros(cycles, dtype=np.uint64)}, cycles, outputs,
                       dut=Core(ram_size=RAM, init=words))
    for name in outputs:
        got = trace.outputs[name][:, 0]
        bad = np.nonzero(got != ref[name])[0]
        assert not len(bad), f"{name} differs first in cycle {bad[0]}: {got[bad[0]]:#x} vs {ref[name][bad[0]]:#x}"
    halt_cycles = np.nonzero(trace.outputs["halt"][:, 0])[0]
    assert len(halt_cycles) == 1, "the program must halt exactly once within the run"
    if program == "loop":
        assert trace.outputs["rvfi_valid"][:, 0].sum() > 250          # it really ran the loop
        assert trace.outputs["halt_kind"][halt_cycles[0], 0] == 0     # exit
    else:
        assert trace.outputs["halt_kind"][halt_cycles[0], 0] == 2     # trap
        assert trace.outputs["halt_cause"][halt_cycles[0], 0] == 4    # load address misaligned


def test_compiled_c_program_matches_amaranth(build_dir):
    """hello.c (printf, 64-bit printing) on the default 64 KiB core: every output, every cycle."""
    from cpu.elf import load_elf
    from cpu.programs import PROGRAMS_BY_NAME
    from cpu.toolchain import compile_c

    prog = PROGRAMS_BY_NAME["hello"]
    words = load_elf(compile_c(prog.path)).words()
    netlist = core_netlist(build_dir=build_dir)
    sim = Simulator(netlist)
    sim.load_memory("ram", words)
    cycles = 9000          # hello retires 4,318 instructions in 6,547 cycles (M: 18 cycles each)
    trace = sim.run(cycles)
    outputs = [p.name for p in netlist.outputs]
    init = [words.get(i, 0) for i in range(max(words) + 1)]
    ref = run_amaranth(core_design(), {"rst": np.zeros(cycles, dtype=np.uint64)}, cycles, outputs,
                       dut=Core(init=init))
    for name in outputs:
        bad = np.nonzero(trace.outputs[name][:, 0] != ref[name])[0]
        assert not len(bad), f"{name} differs first in cycle {bad[0]}"
    console = bytes(int(b) for b, v in zip(trace.outputs["console_data"][:, 0],
                                            trace.outputs["console_valid"][:, 0]) if v)
    assert console == prog.expected_output
