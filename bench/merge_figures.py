"""Figures of the merge (docs/design/merge.md): a compiled checkpoint in front of a random Qwen3.5 base.

For each base size: the merged shapes, the time the merge took, and how far the merged model's text
logits are from the base's exact (float64) ones against how far the base's own are, in float32 and
bfloat16 (the oracle is the base model run by transformers in float64), whether greedy text generation
picks the same tokens, how far below the best base token the best trace token stays on text, and the
speed of the merged trace (teacher-forced tokens/s) against the compiled model alone in the same run.
Prints a table; asserts nothing.

``--geometries qwen3.5-0.8b,...``: instead, per published Qwen3.5 geometry (netlist2tf/geometries/),
a random multimodal base of its shapes (``--geometry-layers`` layers, a 2,048-token vocabulary, one
vision block), the design compiled onto those shapes and merged: base and merged parameters, the
overhead, the merged hidden size, and the text KL divergence KL(base float64 || merged) against the
base's own noise floor: KL(base float64 || base float32), and the base at batch 1 against batch 4, over
``--text-rows`` x 64 random tokens (4 by default; over 256 positions the float32 ratio is noisy: 4B's
moved from 1.00 to 1.14 with the merged width alone, 9B's from 1.18 to 0.68, so the documented table
uses 16). The 9B row peaks at ~24 GB; each
geometry's folders are deleted after its row and the temporary folder at the end.

    .venv/bin/python bench/merge_figures.py [--design hdl.examples.fifo:FIFO] [--bases 256,1024]
    .venv/bin/python bench/merge_figures.py --geometries qwen3.5-0.8b,qwen3.5-2b,qwen3.5-4b,qwen3.5-9b --text-rows 16

``--compiled FOLDER`` (with one geometry): merge that compiled checkpoint instead of compiling the
design, e.g. the CPU built onto the geometry (``cpu build qwen3.5-4b --layers 14 --out FOLDER``);
its trace speed is the checkpoint's run from its own initial state (the CPU's: an empty RAM, so the
all-zero instruction's trap), teacher-forced against the netlist simulator: tokens/s depend on the
model's size, not on the program.

    .venv/bin/python bench/merge_figures.py --geometries qwen3.5-4b --compiled build/cpu-4b-16k
"""

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from netlist2tf.driver import compile_netlist
from netlist2tf.checkpoint import emit_checkpoint
from netlist2tf.frontend import synthesize
from netlist2tf.netlist import parse_netlist
from netlist2tf.merge import make_base
from netlist2tf.merge import merged_layout, merge_checkpoints
from netlist2tf.run import open_checkpoint
from netlist2tf.compile import CompileSettings
from netlist2tf.run import verify_teacher_forced


def logits(folder, ids, dtype):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()
    with torch.no_grad():
        return model(input_ids=ids).logits.double()


def trace_speed(model, protocol, netlist, inits, meta, cycles):
    t0 = time.perf_counter()
    div, n = verify_teacher_forced(model, protocol, netlist, inits, cycles, 1, 0, meta["initial_memory"])
    assert div is None, str(div)
    return n / (time.perf_counter() - t0)


def log_probs(folder, ids, dtype, batch=None):
    """log-softmax over the whole vocabulary of the text model of ``folder`` on ``ids``, in float64;
    ``batch``: run the rows that many at a time."""
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()
    step = batch or ids.shape[0]
    with torch.no_grad():
        out = [model(input_ids=ids[i:i + step]).logits.double() for i in range(0, ids.shape[0], step)]
    return torch.log_softmax(torch.cat(out), dim=-1)


def kl(p_log, q_log) -> float:
    """Mean over positions of KL(p || q), both log-probabilities; q may have more tokens (the trace
    tokens), whose probability p gives 0."""
    q = q_log[..., :p_log.shape[-1]]
    return float((p_log.exp() * (p_log - q)).sum(-1).mean())


def parameters(folder) -> int:
    from netlist2tf.checkpoint import WeightFiles
    w = WeightFiles(folder)
    return sum(int(torch.tensor(w.shape(k)).prod()) for k in w.keys())


def geometry_rows(args, root, result):
    from netlist2tf.compile import CompileSettings
    from netlist2tf.driver import compile_netlist
    from netlist2tf.merge import make_geometry_base
    from netlist2tf.compile import Target

    vocab = 2048
    if args.compiled and "," in args.geometries:
        raise SystemExit("--compiled FOLDER is compiled for one geometry: give one with --geometries")
    what = (f"{args.compiled} ({len(compiled_types(args.compiled))} layers)" if args.compiled
            else f"{args.design} compiled onto each geometry ({args.layers} layers)")
    print(f"{what} in front of a random base of "
          f"{args.geometry_layers} layers, vocabulary {vocab}, one vision block; text: {args.text_rows} x 64 random tokens, "
          f"KL per position (nats), oracle the base in float64")
    print("overhead floor: the compiled layers at the base's own shapes plus the trace tokens' embedding and "
          "LM-head rows, over the base; 'separate hidden': what the side-by-side layout would need")
    print("| geometry | base parameters | merged parameters | overhead | overhead floor | layout | base hidden | "
          "merged hidden | hidden + | separate hidden | "
          "KL fp32 floor | KL batch floor | KL fp32 merged | merged / floor | KL bf16 floor | KL bf16 merged | trace tokens/s |")
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in args.geometries.split(","):
        base = make_geometry_base(root / name, name, layers=args.geometry_layers, vocab_size=vocab, vision_depth=1,
                                  shard_bytes=1 << 30)
        target = Target.from_config_json(base, layers=args.layers)
        if args.compiled:
            folder = Path(args.compiled)
        else:
            compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=args.layers, target=target), prove=False)
            folder = emit_checkpoint(compiled, result.json_text, root / f"{name}-compiled")
        info = merge_checkpoints(folder, base, root / f"{name}-merged", layout=args.layout)
        merged = root / f"{name}-merged"
        ids = torch.randint(0, vocab - 6, (args.text_rows, 64), generator=torch.Generator().manual_seed(1))
        exact = log_probs(base, ids, torch.float64)
        floor = kl(exact, log_probs(base, ids, torch.float32))
        batch_floor = kl(log_probs(base, ids, torch.float32, batch=1), log_probs(base, ids, torch.float32))
        ours = kl(exact, log_probs(merged, ids, torch.float32))
        bf_floor = kl(exact, log_probs(base, ids, torch.bfloat16))
        bf_ours = kl(exact, log_probs(merged, ids, torch.bfloat16))
        nb, nm = parameters(base), parameters(merged)
        lower = floor_parameters(base, compiled_types(folder), info["trace_vocab_size"])
        speed = trace_speed(*open_checkpoint(merged)[:5], args.cycles)
        Db, D = target.hidden_size, info["hidden_size"]
        separate = D if info["layout"] == "separate" else merged_layout(
            info["channels"]["bits"], Db, info["channels"]["signed"])[0].hidden_size
        print(f"| {name} | {nb:,} | {nm:,} | {100 * (nm - nb) / nb:+.1f} % | {100 * lower / nb:+.1f} % | "
              f"{info['layout']} | {Db:,} | {D:,} | {100 * (D - Db) / Db:+.2f} % | {separate:,} | {floor:.2e} | "
              f"{batch_floor:.2e} | {ours:.2e} | {ours / floor:.2f} | {bf_floor:.2e} | {bf_ours:.2e} | {speed:,.0f} |",
              flush=True)
        for done in (root / name, root / f"{name}-compiled", merged):   # a 9B row writes ~20 GB
            shutil.rmtree(done, ignore_errors=True)


def compiled_types(folder) -> list:
    return json.loads((Path(folder) / "config.json").read_text())["layer_types"]


def floor_parameters(base, types, trace_vocab: int) -> int:
    """The parameters the compiled layers cannot do without at the base's shapes: one base layer of
    each compiled layer's type, plus the trace tokens' embedding and LM-head rows."""
    from netlist2tf.checkpoint import WeightFiles
    files = WeightFiles(base)
    per_type = {}
    cfg = json.loads((Path(base) / "config.json").read_text())
    text = cfg.get("text_config", cfg)
    for i, kind in enumerate(text["layer_types"]):
        if kind in per_type:
            continue
        per_type[kind] = sum(files.get(k).numel() for k in files.keys()
                             if f"layers.{i}." in k and not k.startswith(("mtp.", "model.visual.")))
    return sum(per_type[t] for t in types) + 2 * trace_vocab * text["hidden_size"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", default="hdl.examples.fifo:FIFO")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--bases", default="256,1024", help="hidden sizes of the random bases")
    ap.add_argument("--cycles", type=int, default=200, help="teacher-forced cycles timed")
    ap.add_argument("--geometries", help="published geometries to measure on instead (comma-separated)")
    ap.add_argument("--geometry-layers", type=int, default=4, help="layers of the geometry-shaped bases")
    ap.add_argument("--text-rows", type=int, default=4, help="rows of 64 random text tokens the KL is measured on")
    ap.add_argument("--layout", default="auto", choices=("auto", "shared", "separate"), help="the merge's --layout")
    ap.add_argument("--compiled", help="with --geometries NAME: merge this compiled checkpoint (built for "
                                       "that geometry) instead of compiling --design")
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="merge-bench-") as tmp:   # removed however the run ends
        run(args, Path(tmp))


def run(args, root):
    result = None if args.compiled else synthesize(args.design, "macro", "build")
    if args.geometries:
        return geometry_rows(args, root, result)
    compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=args.layers))
    folder = emit_checkpoint(compiled, result.json_text, root / "compiled")
    like = AutoModelForCausalLM.from_pretrained(folder).config.to_dict()
    alone = trace_speed(*open_checkpoint(folder)[:5], args.cycles)
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
        speed = trace_speed(*open_checkpoint(merged)[:5], args.cycles)
        print(f"| {hidden} | 4 | {info['hidden_size']} | {seconds:.1f} | {info['residual_scale']:g} | "
              f"{info['text_flag']:.4f} | {row[0]:.2e} | {row[1]:.2e} | {row[2]:.3f} | {row[3]:.3f} | "
              f"{bool(torch.equal(*gens))} | {margin:,.0f} | {speed:,.0f} ({speed / alone:.2f}x) |")


if __name__ == "__main__":
    main()
