"""The CPU built onto a published geometry, run by llama.cpp and by stock transformers, against unicorn.

    .venv/bin/python bench/cpu_in_llama.py CHECKPOINT --ram-size 16384 [--plain hi] [--skip-stock]

CHECKPOINT: a folder from ``cpu build TARGET --ram-size N [--fetch attention]`` (square DeltaNet heads,
as every published Qwen3.5 has). In the same run, on hi.c and the hazard programs of cpu.isa_tests
(the one that runs code it wrote is left out on a fetch-by-attention build, which refuses it): teacher
forcing (every generated position of the netlist simulator's trace checked as the model's greedy
choice, then decoded) by llama.cpp (the folder's float32 GGUF export, cached) and by stock transformers
in bfloat16; then the ``--plain`` programs generated token by token by llama.cpp. Each result's console,
halt and retirement records are compared with unicorn's; seconds exclude the export.
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cpu.elf import load_elf  # noqa: E402
from cpu.isa_tests import hazard_programs  # noqa: E402
from cpu.model_engine import check_model_batch, checkpoint_ram_size, run_model_batch  # noqa: E402
from cpu.programs import PROGRAMS_BY_NAME  # noqa: E402
from cpu.toolchain import compile_c  # noqa: E402
from cpu.unicorn_ref import run_unicorn  # noqa: E402


def same(results, refs) -> str:
    bad = [i for i, (r, f) in enumerate(zip(results, refs))
           if (r.console, r.halt, r.records) != (f.console, f.halt, f.records)]
    return "equal to unicorn" if not bad else f"differs (rows {bad})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--ram-size", type=int, default=None, help="the build's RAM (default: read from the folder)")
    ap.add_argument("--plain", default="hi", help="comma-separated table programs llama.cpp generates plainly")
    ap.add_argument("--skip-stock", action="store_true")
    args = ap.parse_args()

    import torch

    from netlist2tf.serve import cached_gguf

    ram = args.ram_size or checkpoint_ram_size(args.checkpoint)
    t0 = time.perf_counter()
    path = cached_gguf(args.checkpoint, log=print)
    print(f"GGUF export {path} ({path.stat().st_size / 1e9:.2f} GB): {time.perf_counter() - t0:.0f} s (cached after)")
    images = [load_elf(compile_c(PROGRAMS_BY_NAME["hi"].path, ram_size=ram), ram_size=ram)]
    hazards = hazard_programs()
    hazards.pop("store_into_next_word")
    images += list(hazards.values())
    refs = [run_unicorn(img, ram_size=ram) for img in images]
    print("\n| check | result | seconds |\n| --- | --- | ---: |")
    runs = [("llama.cpp", None)] + ([] if args.skip_stock else [("stock", torch.bfloat16)])
    for executor, dtype in runs:
        t0 = time.perf_counter()
        res = check_model_batch(images, ram, dtype=dtype, checkpoint=args.checkpoint, executor=executor,
                                log=lambda m: None)
        tokens = sum(r.tokens for r in res)
        print(f"| hi.c + {len(hazards)} hazard programs, {executor}{', bfloat16' if dtype else ', float32'}, "
              f"teacher-forced ({tokens:,} generated tokens checked) | {same(res, refs)} | "
              f"{time.perf_counter() - t0:.0f} |", flush=True)
    for name in [n for n in args.plain.split(",") if n]:
        img = load_elf(compile_c(PROGRAMS_BY_NAME[name].path, ram_size=ram), ram_size=ram)
        ref = run_unicorn(img, ram_size=ram)
        t0 = time.perf_counter()
        res = run_model_batch([img], ram, checkpoint=args.checkpoint, executor="llama.cpp", log=lambda m: None)
        s = time.perf_counter() - t0
        print(f"| {name}.c ({ref.instructions:,} instructions), llama.cpp, generated | {same(res, [ref])}, "
              f"{res[0].tokens:,} tokens, {res[0].tokens / s:.1f} tokens/s | {s:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
