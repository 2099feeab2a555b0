"""The fast executor (netlist2tf.run.fast) against stock transformers on the compiled CPU, one core.

    .venv/bin/python bench/fast_executor.py [--program cpu/programs/hi.c] [--dtypes float32 bfloat16]
                                            [--skip-stock] [--memory]

For each dtype, in the same run on the same program: plain generation by the fast executor, plain
generation by stock transformers (prefilled prompt, then one forward call per token), and speculative
decoding (the netlist simulator drafts, stock transformers checks every token in long forward calls);
tokens/s, instructions/s and the ratios against stock plain generation; each run's records are checked
equal. ``--memory`` also runs the fast executor alone on 10 K and 1 M trace positions (a loop that does
not halt, stopped by --max-steps) in fresh processes and prints their peak resident memory: the
executor keeps no attention cache, so it should not grow with the trace.
"""

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


PROFILE = {}


def run(image, dtype, how):
    """(result, seconds of generation): the model is loaded first (untimed); the seconds are the
    engine's own (generation or verification, not loading). For the fast executor, PROFILE gets the
    C kernel's seconds (inside ``generate``) and its work counters for this run."""
    from cpu.model_engine import load_model, run_model_batch, run_model_speculative

    executor = "fast" if how == "fast" else "stock"
    model = load_model(dtype=dtype, executor=executor, log=lambda m: None)[0]
    if how == "fast":
        kernel, spent = model.kernel, [0.0]
        inner = model.generate

        def timed(*a):
            t = time.perf_counter()
            out = inner(*a)
            spent[0] += time.perf_counter() - t
            return out
        model.generate = timed
        before = kernel.counters()
        try:
            (r,) = run_model_batch([image], dtype=dtype, executor=executor, log=lambda m: None)
        finally:
            del model.generate
        after = kernel.counters()
        PROFILE.clear()
        PROFILE.update({k: after[k] - before[k] for k in after}, kernel_seconds=spent[0])
        return r, r.seconds
    if how == "speculative":
        (r,) = run_model_speculative([image], dtype=dtype, log=lambda m: None)
    else:
        (r,) = run_model_batch([image], dtype=dtype, executor=executor, log=lambda m: None)
    return r, r.seconds


def memory_child(steps: int, fetch: str = "deltanet") -> None:
    """Run a non-halting loop for ``steps`` instructions on the fast executor; print the peak RSS.
    With ``fetch`` attention, the CPU whose fetch is a lookup over the prompt's words, and a loop that
    also stores a new value every iteration (every store offers a key: the executor's lookup state
    keeps one entry per distinct key, so it must not grow)."""
    from cpu import asm
    from cpu.machine import Image
    from cpu.model_engine import load_model, run_model_batch

    if fetch == "attention":
        loop = Image.from_words([asm.addi(5, 5, 1), asm.sw(5, 0, 0x300), asm.jal(0, -8)])
        folder = load_model(fetch=fetch, executor="fast", log=lambda m: None)[5]
    else:
        loop = Image.from_words([asm.addi(5, 5, 1), asm.jal(0, -4)])
        folder = None
    (r,) = run_model_batch([loop], max_steps=steps, trace=False, executor="fast", log=lambda m: None,
                           checkpoint=folder)
    dt = r.seconds
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{r.tokens} {dt:.1f} {peak:.0f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", default=str(ROOT / "cpu" / "programs" / "hi.c"))
    ap.add_argument("--dtypes", nargs="*", default=["float32", "bfloat16"],
                    help="the program's runs (none: only --memory, whose runs are fresh processes)")
    ap.add_argument("--skip-stock", action="store_true", help="only the fast executor")
    ap.add_argument("--memory", nargs="*", type=int, metavar="STEPS",
                    help="peak memory of a loop run for these instruction counts (default 650 and 65000: "
                         "~10 K and ~1 M trace positions)")
    ap.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--fetch", default="deltanet", choices=("deltanet", "attention"),
                    help="--memory on the CPU whose fetch is an attention lookup (cpu build --fetch), the loop "
                         "storing a new value every iteration")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.memory_child:
        memory_child(args.memory_child, args.fetch)
        return
    from cpu.cli import load_program
    from netlist2tf.common import drop_kernel_notes


    drop_kernel_notes()
    image = load_program(args.program, ram_size=16384)
    if args.dtypes:
        print(f"{Path(args.program).name} on the compiled CPU, one torch thread, {torch.__version__}; "
              f"figures from this machine")
        print(f"{'dtype':9s} {'how':22s} {'tokens':>8s} {'seconds':>8s} {'tokens/s':>9s} {'instr/s':>8s} "
              f"{'vs stock':>8s}")
    for name in args.dtypes:
        dtype = getattr(torch, name)
        rows = {}
        for how in ("fast",) + (() if args.skip_stock else ("stock plain", "speculative")):
            r, dt = run(image, dtype, how)
            rows[how] = (r, dt)
        p, n = PROFILE, max(PROFILE["positions"], 1)
        print(f"{name:9s} profile: {p['positions']:,d} positions (prompt included), C kernel "
              f"{1e6 * p['kernel_seconds'] / n:.0f} us/position ({p['kernel_seconds'] / rows['fast'][1]:.0%} of "
              f"the run; the rest: decoding frames, the host loop); per position {p['updates'] / n:,.0f} weights "
              f"applied to changed inputs ({p['head updates'] / n:,.0f} of them the LM head's tree nodes), "
              f"{p['resets']} products recomputed from scratch")
        ref = rows["fast"][0]
        for how, (r, dt) in rows.items():
            assert (r.console, r.halt, r.records) == (ref.console, ref.halt, ref.records), how
            base = rows.get("stock plain")
            ratio = f"{(r.tokens / dt) / (base[0].tokens / base[1]):7.1f}x" if base else ""
            print(f"{name:9s} {how:22s} {r.tokens:8,d} {dt:8.2f} {r.tokens / dt:9,.1f} "
                  f"{r.instructions / dt:8,.1f} {ratio:>8s}")
    if args.memory is not None:
        print(f"fast executor, a loop that does not halt (float32, --fetch {args.fetch}):")
        for steps in args.memory or (650, 65_000):     # ~10 K and ~1 M trace positions (15 per cycle)
            out = subprocess.run([sys.executable, __file__, "--memory-child", str(steps), "--fetch", args.fetch],
                                 capture_output=True, text=True, check=True).stdout.split()
            tokens, seconds, peak = int(out[0]), float(out[1]), float(out[2])
            print(f"  {tokens:>9,d} generated tokens in {seconds:7.1f} s ({tokens / seconds:,.0f} tokens/s), "
                  f"peak RSS {peak:,.0f} MB")


if __name__ == "__main__":
    main()
