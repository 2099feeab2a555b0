"""Figures of the merge (docs/MERGE.md): a compiled checkpoint in front of a random Qwen3.5 base.

For each base size: the merged shapes, the time the merge took, and how far the merged model's text
logits are from the base's exact (float64) ones against how far the base's own are, in float32 and
bfloat16 (the oracle is the base model run by transformers in float64), whether greedy text generation
picks the same tokens, how far below the best base token the best trace token stays on text, and the
speed of the merged trace (teacher-forced tokens/s) against the compiled model alone in the same run.
Prints a table; asserts nothing.

    .venv/bin/python bench/merge_figures.py [--design hdl.examples.fifo:FIFO] [--bases 256,1024]
"""

import argparse
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from netlist2tf.driver import compile_netlist
from netlist2tf.emit import emit_checkpoint, load_checkpoint
from netlist2tf.frontend import synthesize
from netlist2tf.ir import parse_netlist
from netlist2tf.merge import load_merged, make_base, merge_checkpoints
from netlist2tf.plan import CompileSettings
from netlist2tf.verify import verify_teacher_forced


def logits(folder, ids, dtype):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()
    with torch.no_grad():
        return model(input_ids=ids).logits.double()


def trace_speed(model, protocol, netlist, inits, meta, cycles):
    t0 = time.perf_counter()
    div, n = verify_teacher_forced(model, protocol, netlist, inits, cycles, 1, 0, meta["initial_memory"])
    assert div is None, str(div)
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", default="hdl.examples.fifo:FIFO")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--bases", default="256,1024", help="hidden sizes of the random bases")
    ap.add_argument("--cycles", type=int, default=200, help="teacher-forced cycles timed")
    args = ap.parse_args()
    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp(prefix="merge-bench-"))
    result = synthesize(args.design, "macro", "build")
    compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=args.layers))
    folder = emit_checkpoint(compiled, result.json_text, root / "compiled")
    like = AutoModelForCausalLM.from_pretrained(folder).config.to_dict()
    alone = trace_speed(*load_checkpoint(folder), args.cycles)
    print(f"{args.design}: {args.layers} layers, hidden {compiled.stats['hidden_size']}, trace alone "
          f"{alone:,.0f} tokens/s (teacher-forced, float32, 1 thread)")
    print("| base hidden | base layers | merged hidden | merge s | s | f | fp32 own | fp32 merged | "
          "bf16 own | bf16 merged | same greedy text | trace margin on text | trace tokens/s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    for hidden in (int(h) for h in args.bases.split(",")):
        base = make_base(root / f"base{hidden}", like, hidden_size=hidden, layers=4,
                         intermediate_size=2 * hidden, vocab_size=2048, seed=hidden)
        t0 = time.perf_counter()
        info = merge_checkpoints(folder, base, root / f"merged{hidden}")
        seconds = time.perf_counter() - t0
        merged = root / f"merged{hidden}"
        ids = torch.randint(0, 2048, (4, 64), generator=torch.Generator().manual_seed(hidden))
        exact = logits(base, ids, torch.float64)
        row = []
        for dtype in (torch.float32, torch.bfloat16):
            own = (logits(base, ids, dtype) - exact).abs().max().item()
            m = logits(merged, ids, dtype)
            row += [own, (m[..., :2048] - exact).abs().max().item()]
        margin = (m[..., :2048].max(-1).values - m[..., 2048:].max(-1).values).min().item()
        gens = [AutoModelForCausalLM.from_pretrained(f).eval().generate(ids[:, :8], max_new_tokens=16,
                                                                        do_sample=False) for f in (base, merged)]
        speed = trace_speed(*load_merged(merged)[:5], args.cycles)
        print(f"| {hidden} | 4 | {info['hidden_size']} | {seconds:.1f} | {info['residual_scale']:g} | "
              f"{info['text_flag']:.4f} | {row[0]:.2e} | {row[1]:.2e} | {row[2]:.3f} | {row[3]:.3f} | "
              f"{bool(torch.equal(*gens))} | {margin:,.0f} | {speed:,.0f} ({speed / alone:.2f}x) |")


if __name__ == "__main__":
    main()
