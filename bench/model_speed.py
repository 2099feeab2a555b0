"""Speed and size of the compiled CPU (cpu/model_engine.py) against unicorn and the netlist simulator,
all in the same run on this machine.

Prints:

1. the model's size: parameters, non-zeros, checkpoint bytes, layers, hidden size, vocabulary;
2. tokens per instruction on the program table, counted token by token in each program's trace:
   the one the compiled model generates (``--generated``: the fast executor generates every program
   and its trace must equal the netlist simulator's token for token) or, by default, the netlist
   simulator's token trace (``netlist2tf.run.verify.expected_tokens``: what the teacher-forced proofs
   check the model against, token for token). Every frame is attributed to the instruction that
   retires in it (an M instruction's busy frames to it; the halt's frames to the program), so the
   classes (ALU, load, store, taken and not-taken branch, jump, M, system) are exact too; then the
   dense parameters x the table's tokens per instruction: the weights the stock forward reads per
   instruction;
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
from cpu.model_engine import MODEL_RAM_SIZE, TraceDecoder, load_model, run_model_batch, run_model_speculative  # noqa: E402
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


CLASSES = ("ALU", "load", "store", "branch taken", "branch not taken", "jump", "M", "system")
M_KINDS = ("MUL", "MULH/MULHSU/MULHU", "DIV/DIVU/REM/REMU")     # the M class split by how the core runs it


def m_kind(insn: int) -> str:
    """MUL (one cycle), a high product (two), or a division/remainder (3-19: hdl/rv32/core.py)."""
    f3 = (insn >> 12) & 7
    return M_KINDS[0] if f3 == 0 else M_KINDS[1] if f3 < 4 else M_KINDS[2]


def instruction_class(r) -> str:
    """The class of a retirement record (cpu.machine.Retire)."""
    op = r.insn & 0x7F
    if is_m_instruction(r.insn):
        return "M"
    if op == 0x03:
        return "load"
    if op == 0x23:
        return "store"
    if op == 0x63:
        return "branch taken" if r.next_pc != (r.pc + 4) & 0xFFFFFFFF else "branch not taken"
    if op in (0x6F, 0x67):
        return "jump"
    if op in (0x73, 0x0F):
        return "system"
    return "ALU"


def trace_frames(protocol, netlist, inits, img, model=None):
    """(generated tokens per frame, rvfi_valid per frame) of ``img``'s whole run: the netlist
    simulator's token trace, or with ``model`` (the fast executor) the model's own generated trace,
    which must be equal token for token."""
    from netlist2tf.sim import TableStimulus
    from netlist2tf.run import expected_tokens

    cycles = run_netlist(img, ram_size=RAM, trace=False).cycles + 1
    stim = TableStimulus({"rst": np.zeros(cycles, dtype=np.uint64)})
    rows, generated, frames = expected_tokens(protocol, netlist, inits, cycles, 1, 0,
                                              [{"ram": img.words()}], stimulus=stim)
    rows, generated = rows[0], generated[0]
    if model is not None:
        from netlist2tf.run import run_model
        run = run_model(model, protocol, inits, [[{"rst": 0}] * cycles], cycles,
                        initial_memory=[{"ram": img.words()}])
        assert run.tokens[0] == rows[:len(run.tokens[0])] and len(run.tokens[0]) == len(rows), \
            "the model's generated trace differs from the netlist simulator's"
    from netlist2tf.run import Frame

    # which frames retire an instruction: the host's decoder says (the model emits no retire bit)
    decoder = TraceDecoder(netlist, inits, {"ram": img.words()}, max_steps=10 ** 12, trace=False)
    starts = [pos for _, pos in frames[0]] + [len(rows)]
    counts, valid = [], []
    n_in = len(protocol.inputs)
    for k in range(len(frames[0])):
        lo, hi = starts[k], starts[k + 1] - (n_in if k + 1 < len(frames[0]) else 0)
        toks = rows[lo:hi]
        counts.append(sum(generated[lo:hi]))
        outs, regs = protocol.decode_frame(k, toks)
        before = decoder.retired
        decoder.feed(Frame(outs, regs, protocol.decode_writes(toks)))
        valid.append(int(decoder.retired > before))
        if decoder.halt is not None:
            break                                  # through the halting frame, as a run counts them
    return counts, valid


def table(protocol, netlist, inits, st, generated: bool):
    model = None
    if generated:
        model = load_model(RAM, executor="fast")[0]
    print(f"\n== tokens per instruction on the program table (counted in each program's "
          f"{'generated trace (fast executor), equal to the netlist simulator' if generated else 'token trace (netlist simulator)'})")
    print(f"{'program':12s} {'instructions':>12s} {'cycles':>9s} {'tokens':>11s} {'tokens/instr':>12s} "
          f"{'unicorn i/s':>12s} {'netlist i/s':>12s}")
    total_tokens = total_instr = 0
    per_class = {c: [0, 0] for c in CLASSES + M_KINDS}          # class -> [instructions, tokens]
    halt_tokens = 0
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
        records = run_unicorn(img, ram_size=RAM).records
        counts, valid = trace_frames(protocol, netlist, inits, img, model)
        assert sum(valid) == len(records) == r.instructions
        i, pending = 0, 0
        for n, v in zip(counts, valid):
            pending += n
            if v:
                c = per_class[instruction_class(records[i])]
                c[0] += 1
                c[1] += pending
                if is_m_instruction(records[i].insn):
                    k = per_class[m_kind(records[i].insn)]
                    k[0] += 1
                    k[1] += pending
                i, pending = i + 1, 0
        halt_tokens += pending                     # the stopping cycle and the halt report
        tokens = sum(counts)
        total_tokens += tokens
        total_instr += r.instructions
        print(f"{prog.name:12s} {r.instructions:12,d} {r.cycles:9,d} {tokens:11,d} "
              f"{tokens / r.instructions:12.2f} {rate(u.instructions, tu):12,.0f} "
              f"{rate(r.instructions, tn):12,.0f}", flush=True)
    mean = total_tokens / total_instr
    print(f"{'table':12s} {total_instr:12,d} {'':9s} {total_tokens:11,d} {mean:12.2f}   (all tokens / all instructions)")
    print("per class (tokens of the frames each instruction retires in, its busy frames included):")
    for c in CLASSES:
        n, t = per_class[c]
        print(f"  {c:18s} {n:9,d} instructions {100 * n / total_instr:5.1f} %  {t / n if n else float('nan'):6.2f} tokens each")
        if c == "M":
            for k in M_KINDS:
                n, t = per_class[k]
                print(f"    {k:20s} {n:7,d} instructions          {t / n if n else float('nan'):6.2f} tokens each")
    print(f"  {'halting':18s} {halt_tokens:9,d} tokens (the stopping cycle and the halt report, all programs)")
    print(f"weights read per instruction: {st['parameters'] / 1e6:.1f} M dense parameters x {mean:.2f} tokens = "
          f"{st['parameters'] * mean / 1e9:.2f} G")


def rate(n, seconds):
    return n / seconds if seconds > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=8, help="batch size of the batched run (default 8)")
    ap.add_argument("--skip-table", action="store_true", help="skip the program-table section")
    ap.add_argument("--generated", action="store_true",
                    help="count tokens in the model's own generated traces (the fast executor generates "
                         "every table program, ~20 min; its trace must equal the netlist simulator's)")
    ap.add_argument("--skip-speed", action="store_true",
                    help="skip the speed section (the program table's token counts and the size only)")
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
    from netlist2tf.compile import dense_breakdown
    from netlist2tf.compile import Target
    shapes = Target(model.config.hidden_size, model.config.intermediate_size, tuple(model.config.layer_types),
                    model.config.linear_num_key_heads, model.config.linear_num_value_heads,
                    model.config.linear_key_head_dim, model.config.linear_value_head_dim,
                    model.config.num_attention_heads, model.config.num_key_value_heads, model.config.head_dim)
    parts = dense_breakdown(shapes, model.config.vocab_size)
    assert sum(parts.values()) == st["parameters"]
    print("dense parameters by part: " + ", ".join(f"{k} {v / 1e6:.1f} M" for k, v in parts.items()))
    print(f"{st['parameters']:,} parameters, {st['nonzero']:,} non-zero "
          f"({100 * st['nonzero'] / st['parameters']:.1f} %); {gen_off} to {gen} generated tokens per cycle "
          f"(the gated groups: {', '.join(f'{g.kind} {g.name} {len(g.chunks)}' for g in protocol.groups)})")

    if not args.skip_table:
        table(protocol, netlist, inits, st, args.generated)
    if args.skip_speed:
        return

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
    from netlist2tf.run import verify_teacher_forced
    # Teacher forcing (how the tests check long programs): the first cycles of hello.c, whose trace is
    # long enough for full forward windows; float32 and bfloat16, one thread as in the tests.
    prog = next(p for p in PROGRAMS if p.name == "hello")
    img = load_elf(compile_c(prog.path, ram_size=RAM), ram_size=RAM)
    cycles = args.tf_cycles
    stim = TableStimulus({"rst": np.zeros(cycles, dtype=np.uint64)})
    from netlist2tf.run import expected_tokens
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
