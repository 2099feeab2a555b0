"""The compiled CPU on a published Qwen3.5 geometry's full width, merged in front of a random base of
that geometry (issue 19; docs/design/merge.md, Limits): the full-size measurement the tests do on a narrower
shape (tests/cpu/test_cpu_on_geometry.py).

Steps, each skipped when its folder is already there (``--dir``):

1. ``cpu build GEOMETRY --layers N --ram-size R``: the CPU compiled onto the geometry's per-layer shapes
   (wall time and peak memory of that process are printed when it runs here);
2. a random multimodal base of the geometry (``merge.make_geometry_base``: ``--base-layers`` layers, a
   2,048-token vocabulary, one vision block) and ``netlist2tf merge`` of the two (``--dtype``);
3. hi.c and the four hazard programs teacher-forced by stock transformers on the merged model, after 0
   and after 50 text tokens (greedy over the whole merged vocabulary), every record against unicorn;
4. ``--programs`` of the table generated on the merged model by the fast executor (netlist2tf.run.fast: its
   equality with the stock forward is tests/run/test_fast.py's, layer by layer, and it checks at every
   position that the base layers add exactly zero), every record against unicorn.

Prints the sizes (compiled, base and merged parameters; hidden sizes; the merged residual's channels)
and one row per check with its time. Asserts nothing but prints "differs" where a record differs.

    .venv/bin/python bench/cpu_on_geometry.py --geometry qwen3.5-4b --layers 14
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cpu.elf import load_elf  # noqa: E402
from cpu.isa_tests import hazard_programs  # noqa: E402
from cpu.model_engine import check_model_batch, run_model_batch  # noqa: E402
from cpu.programs import PROGRAMS_BY_NAME  # noqa: E402
from cpu.toolchain import compile_c  # noqa: E402
from cpu.unicorn_ref import run_unicorn  # noqa: E402
from netlist2tf.merge import make_geometry_base, merge_checkpoints  # noqa: E402
from netlist2tf.checkpoint import WeightFiles  # noqa: E402
from netlist2tf.common import Netlist2TFError  # noqa: E402


def parameters(folder) -> int:
    files = WeightFiles(folder)
    return sum(files.get(k).numel() for k in files.keys())


def same(results, refs) -> str:
    bad = [i for i, (r, f) in enumerate(zip(results, refs))
           if (r.console, r.halt, r.records) != (f.console, f.halt, f.records)]
    return "equal to unicorn" if not bad else f"differs (rows {bad})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--geometry", default="qwen3.5-4b")
    ap.add_argument("--layers", type=int, default=14, help="compiled layers (`cpu fit --layers N` says how many)")
    ap.add_argument("--ram-size", type=int, default=16384)
    ap.add_argument("--base-layers", type=int, default=4)
    ap.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"), help="the merged weights'")
    ap.add_argument("--programs", default="hello,fibonacci,sieve",
                    help="table programs for the fast executor ('' for none: it holds a float32 copy of the merged model)")
    ap.add_argument("--dir", default=None, help="where the folders go (default build/geometry-GEOMETRY-LAYERS)")
    ap.add_argument("--fetch", default="deltanet", choices=("deltanet", "attention"),
                    help="cpu build --fetch: attention fetches from the prompt's words (a program that runs code "
                         "it wrote, the hazard store_into_next_word, is refused: printed as such)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ram = args.ram_size
    top = Path(args.dir or ROOT / "build" / f"geometry-{args.geometry}-{args.layers}"
               f"{'-fetch-attention' if args.fetch == 'attention' else ''}")
    top.mkdir(parents=True, exist_ok=True)
    cpu, base, merged = top / "cpu", top / "base", top / "merged"
    dtype = getattr(torch, args.dtype)

    if not (cpu / "compile.json").is_file():
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cpu.cli", "build", args.geometry, "--layers", str(args.layers),
                        "--ram-size", str(ram), "--out", str(cpu), "--fetch", args.fetch], check=True, cwd=ROOT)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6
        print(f"cpu build {args.geometry} --layers {args.layers}: {time.perf_counter() - t0:.0f} s, "
              f"peak {peak:.1f} GB", flush=True)
    if not base.is_dir():
        make_geometry_base(base, args.geometry, layers=args.base_layers, vocab_size=2048, vision_depth=1)
    if not (merged / "merge.json").is_file():
        t0 = time.perf_counter()
        merge_checkpoints(cpu, base, merged, dtype=dtype)
        print(f"merge: {time.perf_counter() - t0:.0f} s", flush=True)
    info = json.loads((merged / "merge.json").read_text())
    ch = info["channels"]
    nc, nb, nm = parameters(cpu), parameters(base), parameters(merged)
    Db, D = info["base"]["hidden_size"], info["hidden_size"]
    print(f"| {args.geometry} | compiled {args.layers} layers, {ram // 1024} KiB | base {args.base_layers} layers |")
    print("| compiled parameters | base parameters | merged parameters | base hidden | merged hidden | hidden + "
          "| shared / reserved channels | layout |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    print(f"| {nc:,} | {nb:,} | {nm:,} | {Db:,} | {D:,} | {100 * (D - Db) / Db:+.2f} % | "
          f"{ch.get('shared', [0, 0])[1]:,} / {ch['reserved'][1] - ch['reserved'][0] if 'reserved' in ch else '-'} | "
          f"{info['layout']}, {'signed' if ch['signed'] else 'pairs'} |", flush=True)
    if ch.get("group_code"):
        c0, c1 = ch["group_code"]["channels"]
        print(f"reserved: one, {ch['reserved'][1] - ch['reserved'][0] - 1 - (c1 - c0)} bits read on text positions, "
              f"a {c1 - c0}-bit code of the {len(ch['group_code']['flags'])} one-hot flags the LM head reads; "
              f"final norm: one = {info['final_norm']['one']:g}, scale {info['final_norm']['scale']:g}", flush=True)

    images = [load_elf(compile_c(PROGRAMS_BY_NAME["hi"].path, ram_size=ram), ram_size=ram)]
    hazards = hazard_programs()
    smc = hazards.pop("store_into_next_word") if args.fetch == "attention" else None
    images += list(hazards.values())
    refs = [run_unicorn(img, ram_size=ram) for img in images]
    print("\n| check | result | seconds |\n| --- | --- | ---: |")
    if smc is not None:
        try:
            check_model_batch([smc], ram, dtype=torch.bfloat16, checkpoint=merged)
            print("| store_into_next_word (runs code it wrote) | ran: the fetch lookup should refuse it | |")
        except Netlist2TFError as exc:
            print(f"| store_into_next_word (runs code it wrote) | refused: {str(exc)[:90]}... | |", flush=True)
    for prefix in (0, 50):
        t0 = time.perf_counter()
        res = check_model_batch(images, ram, dtype=torch.bfloat16, checkpoint=merged, text_prefix=prefix)
        print(f"| hi.c + {len(hazards)} hazard programs, stock, teacher-forced bfloat16, after {prefix} text tokens | "
              f"{same(res, refs)} | {time.perf_counter() - t0:.0f} |", flush=True)
    for name in [n for n in args.programs.split(",") if n]:
        img = load_elf(compile_c(PROGRAMS_BY_NAME[name].path, ram_size=ram), ram_size=ram)
        ref = run_unicorn(img, ram_size=ram)
        t0 = time.perf_counter()
        res = run_model_batch([img], ram, checkpoint=merged, executor="fast")
        s = time.perf_counter() - t0
        print(f"| {name}.c ({ref.instructions:,} instructions), fast executor, generated | {same(res, [ref])}, "
              f"{res[0].tokens:,} tokens | {s:.0f} |", flush=True)


if __name__ == "__main__":
    main()
