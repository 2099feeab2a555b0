"""Speed and size of the compiled CPU (cpu/model_engine.py) against unicorn and the netlist simulator,
all in the same run on this machine.

Prints:

1. the model's size: parameters, non-zeros, checkpoint bytes, layers, hidden size, vocabulary;
2. tokens per instruction on the program table. The model generates exactly the netlist simulator's
   frames (the tests prove the traces equal): 15 generated tokens per cycle, 28 in the 17 cycles of
   an M instruction after which the M unit is busy (its gated registers are emitted), so this is
   computed from the netlist engine's cycle counts and unicorn's count of M instructions, without
   hours of generation; per instruction class too;
3. tokens/s and instructions/s of the model running a short program: plain generation with batch 1
   and batch 8 (float32) and batch 1 bfloat16 (one thread), and speculative decoding (the default of
   ``cpu run --engine model``: the netlist simulator drafts, the model verifies every token in long
   forward calls, all cores) in float32 and bfloat16, next to unicorn and the netlist simulator on the
   same program (their instructions/s, and the ratios; on a program this short their start-up
   dominates: the table of section 2 has their steady-state instructions/s on the real programs);
4. teacher-forced checking (how the tests check long programs) in float32 and bfloat16 on the first
   ``--tf-cycles`` cycles of hello.c: generated tokens checked per second, and positions (prompt and
   trace) per second of the forward calls alone.

    .venv/bin/python bench/model_speed.py [--rows 8] [--skip-table]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpu import asm  # noqa: E402
from cpu.elf import load_elf  # noqa: E402
from cpu.machine import Image, is_m_instruction  # noqa: E402
from cpu.model_engine import (M_CYCLES, MODEL_RAM_SIZE, load_model, run_model_batch,  # noqa: E402
                               run_model_speculative)
from cpu.netlist_engine import run_netlist  # noqa: E402
from cpu.programs import PROGRAMS, table_images  # noqa: E402
from cpu.toolchain import compile_c  # noqa: E402
from cpu.unicorn_ref import run_unicorn  # noqa: E402

RAM = MODEL_RAM_SIZE


def sample_program() -> Image:
    """A short loop: 3 iterations of load / add / store / branch, then exit (about 25 instructions)."""
    w = asm.li(5, 0x400) + asm.li(6, 3) + [asm.addi(10, 0, 0)]
    loop = len(w)
    w += [asm.lw(7, 5, 0), asm.add(10, 10, 6), asm.sw(10, 5, 0), asm.addi(6, 6, -1)]
    w += [asm.bne(6, 0, 4 * (loop - len(w)))]
    w += asm.li(17, 93) + [asm.ecall()]
    return Image.from_words(w)


def rate(n, seconds):
    return n / seconds if seconds > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=8, help="batch size of the batched run (default 8)")
    ap.add_argument("--skip-table", action="store_true", help="skip the program-table section")
    ap.add_argument("--tf-cycles", type=int, default=400,
                    help="cycles of hello.c checked teacher-forced (default 400)")
    args = ap.parse_args()

    model, protocol, netlist, inits, meta, folder = load_model(RAM)
    st = meta["stats"]
    size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    gen = st["generated_tokens_per_cycle"]
    gen_off = st.get("generated_tokens_per_cycle_gate_off", gen)
    print("== model size")
    print(f"checkpoint {folder} ({size / 1e9:.2f} GB float32 on disk)")
    print(f"{st['layers']} layers ({', '.join(t[:3] for t in st['layer_types'])}), hidden {st['hidden_size']}, "
          f"intermediate {st['intermediate_size']}, vocabulary {st['vocab_size']}")
    print(f"{st['parameters']:,} parameters, {st['nonzero']:,} non-zero "
          f"({100 * st['nonzero'] / st['parameters']:.1f} %); {gen_off} generated tokens per cycle, {gen} "
          f"while the M unit is busy")

    if not args.skip_table:
        print(f"\n== tokens per instruction on the program table (netlist cycles x {gen_off} + "
              f"{gen - gen_off} x {M_CYCLES - 1} per M instruction)")
        print(f"{'program':12s} {'instructions':>12s} {'cycles':>9s} {'tokens':>11s} {'tokens/instr':>12s} "
              f"{'unicorn i/s':>12s} {'netlist i/s':>12s}")
        for prog, img in table_images(RAM):
            if img is None:
                print(f"{prog.name:12s} does not fit the model's {RAM // 1024} KiB of RAM")
                continue
            t0 = time.perf_counter()
            r = run_netlist(img, ram_size=RAM, trace=False)
            tn = time.perf_counter() - t0
            t0 = time.perf_counter()
            u = run_unicorn(img, ram_size=RAM, trace=False)
            tu = time.perf_counter() - t0
            n_m = sum(is_m_instruction(rec.insn) for rec in run_unicorn(img, ram_size=RAM).records)
            tokens = gen_off * r.cycles + (gen - gen_off) * (M_CYCLES - 1) * n_m
            print(f"{prog.name:12s} {r.instructions:12,d} {r.cycles:9,d} {tokens:11,d} "
                  f"{tokens / r.instructions:12.1f} {rate(u.instructions, tu):12,.0f} "
                  f"{rate(r.instructions, tn):12,.0f}")
        print(f"per class: every instruction but M one cycle = {gen_off} tokens; MUL*/DIV*/REM* "
              f"{M_CYCLES} cycles = {gen * (M_CYCLES - 1) + gen_off} tokens; +1 cycle for the halt report")

    print("\n== speed on a short program (same program on every engine)")
    img = sample_program()
    run_netlist(img, ram_size=RAM)                  # warm: synthesis and the simulator's set-up are cached
    t0 = time.perf_counter()
    u = run_unicorn(img, ram_size=RAM)
    tu = time.perf_counter() - t0
    t0 = time.perf_counter()
    n = run_netlist(img, ram_size=RAM)
    tn = time.perf_counter() - t0
    print(f"program: {u.instructions} instructions, {n.cycles} cycles, exit {u.halt.exit_code}")
    print(f"unicorn          {rate(u.instructions, tu):14,.0f} instructions/s")
    print(f"netlist sim      {rate(n.instructions, tn):14,.0f} instructions/s")
    rows = []
    for label, batch, dtype, run in (("model B=1 fp32", 1, torch.float32, run_model_batch),
                                     (f"model B={args.rows} fp32", args.rows, torch.float32, run_model_batch),
                                     ("model B=1 bf16", 1, torch.bfloat16, run_model_batch),
                                     ("speculative fp32", 1, torch.float32, run_model_speculative),
                                     ("speculative bf16", 1, torch.bfloat16, run_model_speculative)):
        t0 = time.perf_counter()
        res = run([img] * batch, RAM, dtype=dtype)
        dt = time.perf_counter() - t0
        assert all(r.records == u.records and r.halt == u.halt for r in res), "model differs from unicorn"
        assert run is run_model_batch or all(r.decoding == "speculative" for r in res)
        toks = sum(r.tokens for r in res)
        instr = sum(r.instructions for r in res)
        rows.append((label, rate(toks, dt), rate(instr, dt)))
        print(f"{label:16s} {rate(instr, dt):14,.3f} instructions/s {rate(toks, dt):10,.1f} tokens/s "
              f"({dt:.0f} s; unicorn/model {rate(u.instructions, tu) / rate(instr, dt):,.0f}x, "
              f"netlist/model {rate(n.instructions, tn) / rate(instr, dt):,.0f}x)")
    from netlist2tf.sim import TableStimulus
    from netlist2tf.verify import verify_teacher_forced
    # Teacher forcing (how the tests check long programs): the first cycles of hello.c, whose trace is
    # long enough for full forward windows; float32 and bfloat16, one thread as in the tests.
    prog = next(p for p in PROGRAMS if p.name == "hello")
    img = load_elf(compile_c(prog.path, ram_size=RAM), ram_size=RAM)
    cycles = args.tf_cycles
    stim = TableStimulus({"rst": np.zeros(cycles, dtype=np.uint64)})
    from netlist2tf.verify import expected_tokens
    t0 = time.perf_counter()
    rows, _, _ = expected_tokens(protocol, netlist, inits, cycles, 1, 0, [{"ram": img.words()}], stimulus=stim)
    t_sim = time.perf_counter() - t0                # the netlist trace, part of every check below
    positions = len(rows[0]) - 1                     # the forward runs over the prompt too
    print(f"(teacher forcing: the netlist trace of {cycles} cycles takes {t_sim:.1f} s of each check; "
          f"the forward runs over {positions:,} positions: the prompt and the trace)")
    for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        model.to(dtype)
        t0 = time.perf_counter()
        div, checked = verify_teacher_forced(model, protocol, netlist, inits, cycles, 1, 0,
                                             [{"ram": img.words()}], stimulus=stim)
        dt = time.perf_counter() - t0
        model.to(torch.float32)
        assert div is None, str(div)
        print(f"{'teacher-forced ' + name:16s} {rate(cycles, dt):14,.3f} cycles/s       {rate(checked, dt):10,.1f} "
              f"tokens/s checked, {rate(positions, dt - t_sim):,.1f} positions/s forward (hello.c, first "
              f"{cycles} cycles, {checked:,} generated tokens; batch 1, one thread)")

if __name__ == "__main__":
    main()
