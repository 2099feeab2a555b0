"""llama.cpp against the fast executor (and stock transformers) on one checkpoint, in the same run.

    .venv/bin/python bench/serve_engines.py CHECKPOINT [--cycles 40] [--batch 1] [--skip-stock]

For each executor, on the same seeded random inputs: ``verify_model`` (the executor generates every
frame, each token compared with the netlist simulator), timed without loading (the llama.cpp GGUF
export is made once and cached before the timed run). Prints tokens/s, whether the run equals the
simulator, and the ratio against the fast executor. The checkpoint must have square DeltaNet heads
(a compile onto a published geometry, e.g. ``netlist2tf compile DESIGN --target qwen3.5-0.8b`` or
``cpu build qwen3.5-4b``). Threads: llama.cpp uses every core it is given; the fast executor one; stock
transformers one (plain generation).
"""

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--cycles", type=int, default=40)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--skip-stock", action="store_true")
    args = ap.parse_args()

    from netlist2tf.run import open_checkpoint, verify_model
    from netlist2tf.serve import cached_gguf

    cached_gguf(args.checkpoint)                     # the export, once, outside the timed runs
    executors = ["fast", "llama.cpp"] + ([] if args.skip_stock else ["stock"])
    print(f"checkpoint {args.checkpoint}; {args.cycles} cycles x {args.batch} rows; {os.cpu_count()} cores "
          f"(affinity {len(os.sched_getaffinity(0))}); load {os.getloadavg()[0]:.2f}")
    rates = {}
    for ex in executors:
        opened = open_checkpoint(args.checkpoint, executor=ex, log=lambda m: print(f"  {m}"))
        t0 = time.perf_counter()
        div, run = verify_model(opened.model, opened.protocol, opened.netlist, opened.initial_registers, args.cycles,
                                args.batch, 0, initial_memory=opened.meta["initial_memory"])
        dt = time.perf_counter() - t0
        tokens = args.cycles * args.batch * opened.protocol.tokens_per_cycle
        rates[ex] = tokens / dt
        print(f"{opened.executor:>10}: {tokens:,} tokens in {dt:.2f} s = {rates[ex]:,.1f} tokens/s; "
              f"{'equal to the simulator' if div is None else f'DIVERGES: {div}'}")
    for ex in executors[1:]:
        print(f"{ex} / fast: {rates[ex] / rates['fast']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
