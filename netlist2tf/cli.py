"""The ``netlist2tf`` command line: one subcommand per pipeline stage, each a thin driver.

    netlist2tf synth DESIGN [--flow word|gate|lut|macro] [-o FILE] [--dump]
    netlist2tf sim DESIGN --cycles N [--vcd FILE] [--batch B] [--seed S] [--stimulus FILE]
                          [--outputs FILE] [--compare-amaranth]
    netlist2tf compile DESIGN [--layers 11] [--target CONFIG.json [--check-fit]] [--dtype ...] [--out DIR]
    netlist2tf verify CHECKPOINT [--cycles N] [--batch B] [--dtype ...] [--token-by-token | --teacher-forced]
    netlist2tf report DESIGN [--layers 11] [--out DIR] [--compare OLD_REPORT.json]
    netlist2tf merge CHECKPOINT [--base QWEN3.5-FOLDER] [--out DIR] [--dtype ...]

DESIGN is ``module.path:Class``, ``path/to/file.py:Class``, an ``.il``/``.v`` file, or (for ``sim``)
a Yosys ``.json`` netlist. Errors in the user's input print one message and exit with status 2; a
simulation that disagrees with Amaranth's exits with status 1.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from netlist2tf.common import Netlist2TFError


def _netlist_for(args):
    """Synthesize (or load) the DESIGN argument; returns (netlist, synth result or None)."""
    from netlist2tf.frontend import synthesize
    from netlist2tf.netlist import load_netlist, parse_netlist

    if args.design.endswith(".json"):
        if args.flow != "word" or args.no_cache:
            raise Netlist2TFError(f"{args.design} is a netlist already: --flow and --no-cache choose how a "
                                  f"design is synthesized; drop them")
        return load_netlist(args.design), None
    result = synthesize(args.design, flow=args.flow, build_dir=args.build_dir,
                        use_cache=not args.no_cache)
    return parse_netlist(result.json_text, str(result.json_path)), result


def cmd_synth(args) -> int:
    from netlist2tf.netlist import find_problems

    from netlist2tf.common import check_output_file, write_file

    if args.output is not None:
        check_output_file(args.output, "-o", "netlist", args.force)
    netlist, result = _netlist_for(args)
    if args.output is not None:
        write_file(args.output, result.json_text if result else Path(args.design).read_bytes(), "-o")
    if args.dump:
        sys.stdout.write(netlist.dump())
    counts = {}
    for c in netlist.cells:
        counts[c.type] = counts.get(c.type, 0) + 1
    where = result.json_path if result else args.design
    cached = " (cached)" if result and result.cache_hit else ""
    print(f"{args.design}: {args.flow}-level netlist {where}{cached}", file=sys.stderr)
    print(f"  {len(netlist.ports)} ports, {len(netlist.cells)} cells, "
          f"{sum(r.width for r in netlist.registers)} flip-flops in {len(netlist.registers)} registers, "
          f"{len(netlist.memories)} memories "
          f"({', '.join(f'{m.name} {m.size}x{m.width}' for m in netlist.memories) or 'none'})",
          file=sys.stderr)
    if counts:
        print("  cells: " + ", ".join(f"{t} x{n}" for t, n in sorted(counts.items())), file=sys.stderr)
    problems = find_problems(netlist)
    if problems:
        from netlist2tf.common import UnsupportedDesignError
        raise UnsupportedDesignError(problems)
    return 0


# what one piece of a long simulation may hold in memory (its inputs, outputs and VCD signals)
SIM_PIECE_BYTES = 64 << 20


def cmd_sim(args) -> int:
    from contextlib import ExitStack

    import numpy as np

    from netlist2tf.common import Progress, available_memory, gigabytes
    from netlist2tf.common import check_output_file, destination, file_writer
    from netlist2tf.sim import FileStimulus, RandomStimulus, Simulator, Trace
    from netlist2tf.sim import VCDStream

    if args.vcd is not None:
        check_output_file(args.vcd, "--vcd", "vcd", args.force)
    if args.outputs is not None:
        check_output_file(args.outputs, "--outputs", "jsonl", args.force)
    if args.vcd is not None and args.outputs is not None:
        vcd_goes = destination(args.vcd, "--vcd")
        if vcd_goes[0] == "file" and vcd_goes == destination(args.outputs, "--outputs"):   # a device may take both
            raise Netlist2TFError(f"--vcd {args.vcd} and --outputs {args.outputs} are the same file; give two paths")
    if args.vcd_instance >= args.batch:
        raise Netlist2TFError(f"--vcd-instance {args.vcd_instance}: the batch has instances 0..{args.batch - 1}")
    netlist, result = _netlist_for(args)
    avail = available_memory()
    need = Simulator.state_bytes(netlist, args.batch)
    if avail is not None and need > 0.8 * avail:
        per = max(1, need // args.batch)
        raise Netlist2TFError(f"--batch {args.batch:,}: that many instances of {args.design} need about {gigabytes(need)} "
                              f"of memory, more than the {gigabytes(avail)} available; give a smaller --batch "
                              f"(about {max(1, int(0.8 * avail) // per):,} at most)")
    sim = Simulator(netlist, batch=args.batch)
    stimulus = FileStimulus(args.stimulus) if args.stimulus else RandomStimulus(args.seed)
    # The run goes in pieces of at most SIM_PIECE_BYTES, each written out (outputs, waveform) as it
    # ends: memory stays flat whatever --cycles is. Only Amaranth's check needs every cycle's inputs
    # and outputs at once, so only it is bounded by the memory available.
    if args.compare_amaranth:
        if result is None:
            raise Netlist2TFError("--compare-amaranth needs an Amaranth design, not a .json netlist")
        need = sim.trace_bytes(args.cycles)
        if avail is not None and need > 0.8 * avail:
            per = max(1, sim.trace_bytes(1))
            raise Netlist2TFError(f"--compare-amaranth keeps every cycle's inputs and outputs: {args.cycles:,} cycles x "
                                  f"{args.batch} instance(s) need about {gigabytes(need)}, more than the "
                                  f"{gigabytes(avail)} available; give fewer --cycles (about "
                                  f"{int(0.8 * avail) // per:,} at most) or drop --compare-amaranth")
    piece = max(1, min(args.cycles, SIM_PIECE_BYTES // max(1, sim.trace_bytes(1, signals=args.vcd is not None))))
    if args.outputs is not None:
        _outputs_file_is_ours(args, [p.name for p in sim.output_ports])
    bar = Progress(args.cycles, "cycle", "sim", min_seconds=2.0)
    kept, last = [], None
    t0 = time.perf_counter()
    with ExitStack() as stack:
        vcd = out = None
        if args.vcd is not None:
            vcd = VCDStream(stack.enter_context(file_writer(args.vcd, option="--vcd")), sim, args.vcd_instance)
        if args.outputs is not None:
            out = stack.enter_context(file_writer(args.outputs, option="--outputs"))
        for start in range(0, args.cycles, piece):
            trace = sim.run(min(piece, args.cycles - start), stimulus, record_signals=vcd is not None,
                            progress=lambda k: bar.update(1))
            if vcd is not None:
                vcd.add(trace)
            if out is not None:
                for k in range(trace.cycles):
                    out.write(json.dumps({n: [int(x) for x in v[k]] if trace.batch > 1 else int(v[k, 0])
                                          for n, v in trace.outputs.items()}) + "\n")
            if args.compare_amaranth:
                kept.append((trace.inputs, trace.outputs))
            last = {n: int(v[-1, 0]) for n, v in trace.outputs.items()}
        if vcd is not None:
            vcd.close()
    dt = time.perf_counter() - t0
    bar.close()
    print(f"{args.design}: {args.cycles} cycles x {args.batch} instance(s) in {dt:.3f} s "
          f"({args.cycles * args.batch / max(dt, 1e-9):,.0f} cycles/s, {sim.mode} engine)",
          file=sys.stderr)
    if last is not None:
        print(f"  outputs in the last cycle{' (instance 0)' if args.batch > 1 else ''}: "
              f"{', '.join(f'{n}={v:#x}' for n, v in last.items())}")
    if args.vcd is not None:
        print(f"  waveform: {args.vcd}", file=sys.stderr)
    if args.compare_amaranth:
        def joined(part):
            return {n: np.concatenate([k[part][n] for k in kept]) if kept else np.zeros((0, args.batch))
                    for n in (kept[0][part] if kept else ())}
        trace = Trace(args.cycles, args.batch, joined(0), joined(1), {})
        del kept
        from netlist2tf.frontend import run_amaranth
        for lane in range(trace.batch):
            ref = run_amaranth(args.design, {n: v[:, lane] for n, v in trace.inputs.items()},
                               trace.cycles, list(trace.outputs),
                               clock=sim.clock_ports[0].name if sim.clock_ports else "clk")
            for k in range(trace.cycles):
                for n, v in trace.outputs.items():
                    if int(v[k, lane]) != int(ref[n][k]):
                        inputs = {i: int(x[k, lane]) for i, x in trace.inputs.items()}
                        print(f"MISMATCH instance {lane} cycle {k} output {n}: netlist "
                              f"{int(v[k, lane]):#x}, Amaranth {int(ref[n][k]):#x} (inputs {inputs})")
                        return 1
        print(f"  Amaranth's simulator agrees on every output in every cycle "
              f"({trace.cycles} cycles x {trace.batch} instance(s))", file=sys.stderr)
    return 0


def _outputs_file_is_ours(args, names):
    """An existing --outputs file is replaced only if it holds this design's outputs (a JSON-lines
    file of other ports, such as the stimulus, is the user's), or with --force."""
    from netlist2tf.common import OutputError, destination, first_line

    how, path = destination(args.outputs, "--outputs")
    if args.force or how != "file" or not path.is_file() or not path.stat().st_size:
        return
    try:
        keys = set(json.loads(first_line(path)))
    except (ValueError, TypeError):
        keys = None
    if keys != set(names):
        raise OutputError(f"--outputs {args.outputs}: the file there is not this design's outputs (its first line has "
                          f"{sorted(keys) if keys else 'no ports'}); it is left as it is: choose another path, "
                          f"or add --force to replace it")


def _dtype(name):
    import torch
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


def _compile_inputs(args):
    """(synthesis result, netlist, target or None) for compile/report."""
    from netlist2tf.frontend import synthesize
    from netlist2tf.netlist import parse_netlist
    from netlist2tf.compile import Target

    if args.design.endswith(".json"):
        raise Netlist2TFError(f"{args.design} is a netlist JSON; compile and report synthesize the design "
                              f"themselves with the compiler's Yosys flow (--flow): give the design "
                              f"(module.path:Class, path/to/file.py:Class, or the .v/.il file)")
    target = Target.from_config_json(args.target, layers=args.layers) if args.target else None
    result = synthesize(args.design, flow=args.flow, build_dir=args.build_dir, use_cache=not args.no_cache)
    netlist = parse_netlist(result.json_text, str(result.json_path))
    return result, netlist, target


def _gated(args) -> tuple:
    """The --gated options as ((gate, (member, ...)), ...)."""
    groups = []
    for text in args.gated or ():
        gate, _, regs = text.partition(":")
        names = tuple(n.strip() for n in regs.split(",") if n.strip())
        if not gate.strip() or not names:
            raise Netlist2TFError(f"--gated {text!r}: write GATE:MEMBER,MEMBER,... (e.g. busy:acc,count)")
        groups.append((gate.strip(), names))
    return tuple(groups)


def _held(args) -> tuple:
    """The --held options as ((gate, dirty, (member, ...)), ...)."""
    groups = []
    for text in args.held or ():
        parts = text.split(":")
        names = tuple(n.strip() for n in parts[-1].split(",") if n.strip()) if len(parts) == 3 else ()
        if len(parts) != 3 or not parts[0].strip() or not names:
            raise Netlist2TFError(f"--held {text!r}: write GATE:DIRTY:REGISTER,REGISTER,... (e.g. k_emit:k_new:k), "
                                  f"or GATE::REGISTER,... for a tail group (no dirty bit)")
        groups.append((parts[0].strip(), parts[1].strip(), names))
    return tuple(groups)


def _kept(args):
    """The --keep-outputs names as a list (None: every output)."""
    if not args.keep_outputs:
        return None
    return [n.strip() for n in args.keep_outputs.split(",") if n.strip()]


def _out_folder(args, where: str, kind: str) -> Path:
    """The --out folder (default BUILD/WHERE/DESIGN) for a KIND of output, checked before any work
    (netlist2tf.common.outputs)."""
    import re
    from netlist2tf.common import check_output_folder
    from netlist2tf.common import build_dir

    out = Path(args.out) if args.out is not None else \
        build_dir(args.build_dir) / where / re.sub(r"[^A-Za-z0-9_.-]+", "_", args.design)
    design_file = args.design.partition(":")[0]
    inputs = [p for p in (design_file, args.target) if p and Path(p).exists()]
    return check_output_folder(out, "--out", kind, args.force, inputs=inputs, build=args.build_dir)


def _settings(args, target):
    """The CompileSettings of a compile or report command line."""
    from netlist2tf.compile import CompileSettings

    writes = tuple(n.strip() for n in (args.gated_writes or "").split(",") if n.strip())
    folded = tuple(n.strip() for n in (args.folded_writes or "").split(",") if n.strip())
    lookups = tuple(n.strip() for n in (getattr(args, "lookup_ports", None) or "").split(",") if n.strip())
    return CompileSettings(layers=args.layers, chunk_bits=args.chunk_bits, head_dim=args.head_dim, target=target,
                           outputs=_kept(args), gated=_gated(args), gated_writes=writes, held=_held(args),
                           folded_writes=folded, roms=args.roms, bits=args.bits, lookup_ports=lookups)


def _memory_words(spec: str, netlist) -> tuple:
    """(memory, {address: word}) of an --economy-memory MEMORY=FILE."""
    import json

    name, sep, path = spec.partition("=")
    mems = {m.name: m for m in netlist.memories}
    if not sep or not path:
        raise Netlist2TFError(f"--economy-memory {spec!r}: write MEMORY=FILE (e.g. ram=program.bin)")
    if name not in mems:
        raise Netlist2TFError(f"--economy-memory {spec!r}: the design has no memory {name!r} (its memories: "
                              f"{', '.join(sorted(mems)) or 'none'})")
    m = mems[name]
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise Netlist2TFError(f"--economy-memory {spec!r}: cannot read {path} ({exc.strerror or exc})")
    if path.endswith(".json"):
        try:
            words = {int(a): int(w) for a, w in json.loads(data).items()}
        except (ValueError, TypeError, AttributeError) as exc:
            raise Netlist2TFError(f"--economy-memory {spec!r}: {path} is not a JSON object of address -> word "
                                  f"({exc})")
    else:
        size = (m.width + 7) // 8
        words = {a: int.from_bytes(data[a * size:(a + 1) * size], "little")
                 for a in range((len(data) + size - 1) // size)}
    bad = [a for a, w in words.items() if not 0 <= a < m.size or not 0 <= w < 1 << m.width]
    if bad:
        raise Netlist2TFError(f"--economy-memory {spec!r}: address {bad[0]} or its word does not fit memory "
                              f"{name} ({m.size} words of {m.width} bits)")
    return name, {a: w for a, w in words.items() if w}


def _economy_run(args, netlist):
    """The --economy-stimulus/--economy-memory run (``driver.EconomyRun``), or None (random inputs)."""
    from netlist2tf.driver import EconomyRun

    if getattr(args, "economy_stimulus", None) is None and not getattr(args, "economy_memory", None):
        return None
    if args.economy_cycles < 1:
        raise Netlist2TFError(f"--economy-cycles {args.economy_cycles}: give at least 1 cycle")
    if args.economy_stimulus is not None and not Path(args.economy_stimulus).is_file():
        raise Netlist2TFError(f"--economy-stimulus {args.economy_stimulus}: no such file (a JSON-lines file "
                              f"of inputs per cycle, as `netlist2tf sim --stimulus` reads)")
    return EconomyRun.of(args.economy_stimulus, args.economy_cycles,
                         dict(_memory_words(spec, netlist) for spec in args.economy_memory or ()))


def _with_economy(args, netlist, settings, action):
    """``action(settings, economy)`` with the groups ``driver.find_economy`` finds (--economy auto),
    its messages printed once that succeeded. Where the design does not compile with them but does
    without (the groups' gates need FFN rows too), or the search itself fails, ``action`` without
    them, with a note; where it fails without them too, that error alone (the design's own)."""
    from netlist2tf.driver import find_economy

    if args.economy == "off":
        if getattr(args, "economy_stimulus", None) is not None or getattr(args, "economy_memory", None):
            raise Netlist2TFError("--economy-stimulus and --economy-memory search the token economy: not with "
                                  "--economy off (drop them, or --economy off)")
        return action(settings, None)
    lines = []
    run = _economy_run(args, netlist)
    try:
        eco = find_economy(netlist, settings, log=lines.append, build=args.build_dir, run=run)
        result = action(eco.settings, eco)
    except Netlist2TFError as exc:
        result = action(settings, None)            # its own error, if the design fails without them too
        print(f"token economy: not used ({str(exc).splitlines()[0]}); compiled with the hand-written groups "
              f"only", file=sys.stderr)
        return result
    for line in lines:
        print(line, file=sys.stderr)
    return result


def cmd_compile(args) -> int:
    from netlist2tf.driver import compile_netlist
    from netlist2tf.compile import plan_model

    out = None if args.check_fit else _out_folder(args, "compiled", "checkpoint")
    result, netlist, target = _compile_inputs(args)
    t0 = time.perf_counter()
    if args.check_fit:
        fit = _with_economy(args, netlist, _settings(args, target), lambda settings, eco: plan_model(netlist, settings).fit())
        print(f"{args.design} fits {fit['target']}: {fit['layers']} layers, {fit['hidden_channels']} residual "
              f"channels, FFN neurons per layer {fit['neurons_per_layer']}, DeltaNet heads per layer "
              f"{fit['deltanet_heads_per_layer']}"
              + "".join(f"; memory read {k} over DeltaNet layers {v}" for k, v in fit["memory_reads"].items() if len(v) > 1)
              + (f"; {fit['late_register_chunks']} register chunks read after layer 0" if fit["late_register_chunks"] else ""))
        return 0
    compiled = _with_economy(args, netlist, _settings(args, target), lambda settings, eco: compile_netlist(
        netlist, settings, log=lambda msg: print(msg, file=sys.stderr), out=out, netlist_json=result.json_text,
        dtype=args.dtype, record={"design": args.design, "flow": args.flow, **settings.record(),
                                          **({"economy": eco.record()} if eco else {})},
        force=args.force, proved=eco.proved if eco else (), build=args.build_dir, plan_cache=True))
    s = compiled.stats
    print(f"{args.design}: compiled in {time.perf_counter() - t0:.1f} s -> {out}", file=sys.stderr)
    print(f"  {s['layers']} layers, hidden {s['hidden_size']}, intermediate {s['intermediate_size']}, "
          f"logic depth {s['depth']}, FFN neurons per layer {s['neurons_per_layer']}", file=sys.stderr)
    print(f"  DeltaNet heads per layer {s['deltanet_heads']}, vocabulary {s['vocab_size']}, {s['tokens_per_cycle']} "
          f"tokens per cycle ({s['generated_tokens_per_cycle']} generated), {s['parameters']:,} parameters, "
          f"{s['nonzero']:,} non-zero", file=sys.stderr)
    if s.get("roms"):
        rec = s["roms"]
        ways = ", ".join(f"{w} {rec[f'{w}_parameters']:,}" if f"{w}_parameters" in rec else f"{w} does not fit"
                         for w in ("ffn", "deltanet", "attention"))
        held = {"deltanet": "DeltaNet banks preloaded by the prompt", "ffn": "FFN decoders",
                "attention": "attention lookups over the words the prompt writes"}[rec["chosen"]]
        print(f"  read-only memories {', '.join(rec['memories'])}: {held} (--roms auto, parameters: {ways})",
              file=sys.stderr)
    return 0


def cmd_report(args) -> int:
    from netlist2tf.compile import plan_model
    from netlist2tf.report import build_report, write_report

    from netlist2tf.report import attach_comparison, old_report

    out = _out_folder(args, "reports", "report")
    old, old_name = old_report(args.compare, out, args.design)    # before any work: a bad file fails at once
    result, netlist, target = _compile_inputs(args)
    plan, eco = _with_economy(args, netlist, _settings(args, target),
                              lambda settings, eco: (plan_model(netlist, settings), eco))
    report = build_report(plan, design=args.design, synth=result, netlist=netlist,
                          economy=eco.record() if eco else None)
    text = attach_comparison(report, old, old_name, bool(args.compare))
    if text:
        print(text)
    js, page = write_report(report, out, force=args.force)
    print(f"{args.design}: layer-assignment report {page} (data: {js}; one row per cell: "
          f"{out / 'assignment.csv'})", file=sys.stderr)
    return 0


def cmd_merge(args) -> int:
    from netlist2tf.merge import default_base, merge_checkpoints
    from netlist2tf.common import check_output_folder
    from netlist2tf.common import build_dir

    if not Path(args.checkpoint).is_dir():
        raise Netlist2TFError(f"{args.checkpoint}: no such checkpoint folder; give a folder written by "
                              f"`netlist2tf compile`")
    if args.base and not Path(args.base).is_dir():
        raise Netlist2TFError(f"--base {args.base}: no such folder; give a Qwen3.5 checkpoint folder")
    out = Path(args.out) if args.out is not None else \
        build_dir(args.build_dir) / "merged" / Path(args.checkpoint).resolve().name
    check_output_folder(out, "--out", "merged checkpoint", args.force, inputs=(args.checkpoint, args.base),
                        build=args.build_dir)
    base = args.base or default_base(args.checkpoint, args.build_dir)
    t0 = time.perf_counter()
    info = merge_checkpoints(args.checkpoint, base, out, _dtype(args.dtype) if args.dtype else None,
                             log=lambda msg: print(msg, file=sys.stderr), force=args.force,
                             layout=args.layout)
    ch = info["channels"]
    if ch["layout"] == "shared":
        where = (f"shared: {ch['shared'][1]} compiled channels on the base's {info['base']['hidden_size']}, "
                 f"{ch['reserved'][1] - ch['reserved'][0]} reserved + text flag; "
                 f"+{100 * (info['hidden_size'] / info['base']['hidden_size'] - 1):.2f} %")
    else:
        where = (f"separate: compiled {ch['compiled'][1]} + anchors {ch['anchors'][1] - ch['anchors'][0]} + "
                 f"text flag + base {info['base']['hidden_size']}")
    print(f"{out}: {info['layers']['compiled'][1]} compiled layers in front of {info['base']['layers']} base "
          f"layers; hidden {info['hidden_size']} ({where}); vocabulary "
          f"{info['trace_token_offset']} base + {info['trace_vocab_size']} trace tokens (from "
          f"{info['trace_token_offset']}); base residual carried x{info['residual_scale']:g}, its norms x"
          f"{info['norm_compensation']:.6f}; {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if info["base"]["multimodal"]:
        n = len(info["base"]["carried"])
        print(f"  multimodal layout kept: {n} vision tower and MTP tensors carried, bit for bit but the vision "
              f"merger's output projection (placed on the base channels)" if n else
              "  multimodal layout kept (the base has no vision tower or MTP weights)", file=sys.stderr)
    tok = info.get("tokenizer", {})
    if tok.get("trace_tokens"):
        print(f"  tokenizer: {', '.join(tok['copied'])} copied; trace tokens added as special tokens "
              f"{tok['trace_tokens'][0]}..{tok['trace_tokens'][1] - 1}", file=sys.stderr)
    return 0


def _cycle_tokens(text: str) -> tuple[int, int]:
    """``--text-between CYCLE:N``: (cycle >= 1, tokens >= 1)."""
    try:
        c, n = (int(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give CYCLE:N, e.g. 10:7 (7 text tokens before cycle 10)")
    if c < 1 or n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the cycle and the token count must be at least 1")
    return c, n


def cmd_verify(args) -> int:
    from netlist2tf.merge import is_merged, text_prefix_tokens
    from netlist2tf.run import open_checkpoint
    from netlist2tf.run import verify_model, verify_teacher_forced

    from netlist2tf.common import check_output_file

    if args.resume is not None and not args.teacher_forced:
        raise Netlist2TFError("--resume saves the progress of a --teacher-forced check; add --teacher-forced")
    if args.resume is not None:
        check_output_file(args.resume, "--resume", "progress", False, stream=False)
    if not Path(args.checkpoint).is_dir():
        raise Netlist2TFError(f"{args.checkpoint}: no such checkpoint folder; give a folder written by "
                              f"`netlist2tf compile` or `netlist2tf merge`")
    if args.text_between and (args.batch != 1 or args.resume):
        raise Netlist2TFError("--text-between runs one batch row (--batch 1) and is not resumable (drop --resume)")
    if args.executor != "stock" and args.resume:
        raise Netlist2TFError(f"--resume saves the stock forward's cache; the {args.executor} executor's check is "
                              f"not resumable (drop --resume, or use --executor stock)")
    if (args.text_prefix or args.text_between) and not is_merged(args.checkpoint):
        raise Netlist2TFError(f"--text-prefix and --text-between put base-vocabulary text in the trace: "
                              f"{args.checkpoint} is not a merged checkpoint (make one with `netlist2tf merge`)")
    prefix = text_prefix_tokens(args.checkpoint, args.text_prefix, args.seed) if args.text_prefix else ()
    if args.server is not None:
        if args.teacher_forced or args.executor != "stock" or args.dtype != "float32":
            raise Netlist2TFError("--server checks the served model by generation: drop --teacher-forced, "
                                  "--executor and --dtype")
        args.executor = args.server
    model, protocol, netlist, inits, meta, args.executor = open_checkpoint(
        args.checkpoint, _dtype(args.dtype), args.executor, prefix, text=bool(args.text_between),
        log=lambda msg: print(f"netlist2tf: {msg}", file=sys.stderr))
    if args.text_between:
        from netlist2tf.merge import MergedTrace
        from netlist2tf.run import expected_tokens
        late = [c for c, _ in args.text_between if c >= args.cycles]
        if late:
            raise Netlist2TFError(f"--text-between {late[0]}:...: the check runs cycles 0..{args.cycles - 1}; "
                                  f"give a cycle below --cycles")
        frames = expected_tokens(protocol, netlist, inits, args.cycles, 1, args.seed,
                                 meta["initial_memory"])[2][0]
        interludes = {frames[c][1]: text_prefix_tokens(args.checkpoint, n, args.seed + 1 + i)
                      for i, (c, n) in enumerate(args.text_between)}
        model = MergedTrace(model.model, model.offset, model.vocab, prefix, interludes)
    if args.teacher_forced and args.token_by_token:
        raise Netlist2TFError("--teacher-forced checks the trace in long forward calls; it cannot "
                              "be combined with --token-by-token")
    _check_verify_memory(args, model, protocol)
    t0 = time.perf_counter()
    if args.teacher_forced:
        div, _ = verify_teacher_forced(model, protocol, netlist, inits, args.cycles, args.batch,
                                       args.seed, meta["initial_memory"], window=args.window,
                                       resume=args.resume)
        mode = "teacher-forced"
    else:
        mode = "token by token" if args.token_by_token else "prefill"
        from netlist2tf.common import Progress
        bar = Progress(args.cycles, "cycle", f"verify ({mode})", min_seconds=2.0)
        div, _ = verify_model(model, protocol, netlist, inits, args.cycles, args.batch, args.seed,
                              prefill=not args.token_by_token, initial_memory=meta["initial_memory"],
                              progress=bar.update)
        bar.close()
    dt = time.perf_counter() - t0
    if div is not None:
        print(f"DIVERGENCE {div}")
        return 1
    tokens = args.cycles * args.batch * protocol.tokens_per_cycle
    rate = "" if args.resume else f"; {tokens / dt:,.0f} tokens/s"      # a resumed run did part of it
    print(f"{args.checkpoint}: the model equals the netlist simulator on every output and register in "
          f"{args.cycles} cycles x {args.batch} rows ({args.dtype}, {mode}"
          f"{'' if args.executor == 'stock' else f', {args.executor} executor'}){rate}",
          file=sys.stderr)
    return 0


def _check_verify_memory(args, model, protocol) -> None:
    """Refuse, before it starts, a check the machine's memory cannot hold (verify.memory_needed)."""
    from netlist2tf.common import available_memory, gigabytes
    from netlist2tf.run import memory_needed

    avail = available_memory()
    # the fast executor keeps no growing cache; a server's memory is the server's; llama.cpp allocates its
    # context at the start (and says so when it cannot)
    if avail is None or args.executor in ("fast", "server", "llama.cpp"):
        return

    def need(cycles):
        return memory_needed(model.config, protocol, cycles, args.batch, args.teacher_forced, args.window)

    if need(args.cycles) <= 0.8 * avail:
        return
    low, high = 0, args.cycles                          # the most cycles that fit
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if need(mid) <= 0.8 * avail else (low, mid - 1)
    raise Netlist2TFError(f"--cycles {args.cycles:,}: checking {args.cycles:,} cycles x {args.batch} row(s) "
                          f"({'teacher-forced' if args.teacher_forced else 'generated'}) needs about "
                          f"{gigabytes(need(args.cycles))} of memory (the trace and the attention layers' "
                          f"cache grow with every position), more than the {gigabytes(avail)} available; give "
                          f"fewer --cycles (about {low:,} at most here)"
                          + (" or fewer --batch rows" if args.batch > 1 else ""))


def build_parser() -> argparse.ArgumentParser:
    from netlist2tf.cliutil import Formatter, Parser, add_version, count, path_arg

    ap = Parser(prog="netlist2tf", description="Compile hardware into transformer weights.",
                                 formatter_class=Formatter)
    add_version(ap)
    sub = ap.add_subparsers(dest="command", required=True)
    build_help = ("cache and output folder (default: $NETLIST2TF_BUILD_DIR, else the project's build/, "
                  "whatever the current directory)")
    force_help = "replace an existing output that netlist2tf did not write (by default such a path is refused)"

    def parser(name, help):
        return sub.add_parser(name, help=help, description=help, formatter_class=Formatter)

    def design_args(p):
        p.add_argument("design", type=path_arg, help="module.path:Class, path/to/file.py:Class, file.il/.v, or netlist .json")
        p.add_argument("--flow", choices=("word", "gate", "lut", "macro"), default="word",
                       help="Yosys mapping: word-level cells, simple gates, 4-LUTs, or 4-LUTs "
                            "with word-level adders/comparators ($alu, the compiler's flow)")
        p.add_argument("--build-dir", type=path_arg, default=None, help=build_help)
        p.add_argument("--no-cache", action="store_true", help="re-run Yosys even if a cached netlist exists")
        p.add_argument("--force", action="store_true", help=force_help)

    p = parser("synth", "Amaranth design -> Yosys JSON netlist (cached under BUILD/synth)")
    design_args(p)
    p.add_argument("-o", "--output", type=path_arg, help="also copy the JSON netlist here")
    p.add_argument("--dump", action="store_true", help="print the IR, one line per port/register/memory/cell")
    p.set_defaults(func=cmd_synth)

    p = parser("sim", "simulate the netlist cycle by cycle")
    design_args(p)
    p.add_argument("--cycles", type=count(0, 10**9, "--cycles"), required=True, help="number of clock cycles")
    p.add_argument("--batch", type=count(1, 1 << 20, "--batch"), default=1,
                   help="independent instances simulated together")
    p.add_argument("--seed", type=count(0, 2**63 - 1, "--seed"), default=0, help="seed of the random inputs")
    p.add_argument("--stimulus", type=path_arg, help="JSON-lines file of inputs per cycle instead of random ones")
    p.add_argument("--vcd", type=path_arg, help="write a waveform (VCD) of every named signal")
    p.add_argument("--vcd-instance", type=count(0, None, "--vcd-instance"), default=0,
                   help="which batch instance the VCD shows")
    p.add_argument("--outputs", type=path_arg, help="write the outputs of every cycle as JSON lines")
    p.add_argument("--compare-amaranth", action="store_true",
                   help="also run Amaranth's simulator on the same inputs and stop at the first difference")
    p.set_defaults(func=cmd_sim)

    def compile_args(p, out_help):
        p.add_argument("design", type=path_arg, help="module.path:Class, path/to/file.py:Class or file.il/.v")
        p.add_argument("--layers", type=count(2, 1024, "--layers"), default=11, help="layers of the compiled model")
        p.add_argument("--chunk-bits", type=count(1, 12, "--chunk-bits"), default=8,
                       help="value bits per trace token (1-12; the vocabulary grows as 2^bits per chunk)")
        p.add_argument("--head-dim", type=int, default=64, choices=(16, 64, 256, 1024),
                       help="standalone models: DeltaNet key head dim = words per memory bank")
        p.add_argument("--flow", choices=("macro", "macro6", "lut"), default="macro",
                       help="macro: adders, comparisons, shifts and wide reductions as "
                            "threshold-circuit macros, the rest as 4-LUTs; macro6: the same with 6-LUTs "
                            "(shallower, more neurons; the CPU needs it); lut: everything as 4-LUTs")
        p.add_argument("--target", type=path_arg, help="a Qwen3.5 config.json (or its folder), or a published geometry "
                            "(qwen3.5-0.8b, qwen3.5-2b, qwen3.5-4b, qwen3.5-9b): use its per-layer shapes exactly")
        p.add_argument("--keep-outputs", metavar="NAMES",
                       help="comma-separated output ports: emit tokens for these only and drop the logic "
                            "only the others need (registers and memories stay; default: every output)")
        p.add_argument("--gated", metavar="GATE:MEMBER,MEMBER,...", action="append",
                       help="a gated group (repeatable): registers whose tokens are emitted only in frames "
                            "after which the 1-bit register GATE is 1 (their values must not matter while it "
                            "is 0: compile proves it with z3 or shows a counterexample), or output ports "
                            "emitted only in cycles where the 1-bit output GATE is 1; docs/design/compiler.md 2")
        p.add_argument("--held", metavar="GATE:DIRTY:REGISTER,...", action="append",
                       help="a held group (repeatable): registers that change rarely, emitted only in cycles "
                            "where the 1-bit output GATE is 1; GATE must be 1 in every cycle that changes "
                            "them and the cycle after, DIRTY a 1-bit register that is 1 after a cycle that "
                            "changed them (compile proves it with z3 or shows a counterexample); with "
                            "DIRTY empty (GATE::REGISTER,...) a tail group: one row written at the frame's "
                            "end, GATE 1 in every cycle that changes them; docs/design/compiler.md 2")
        p.add_argument("--gated-writes", metavar="MEMORY,...",
                       help="emit these memories' write tokens only in cycles where their port writes "
                            "(the frame then ends on a register token; docs/design/compiler.md 2)")
        p.add_argument("--roms", choices=("auto", "ffn", "deltanet", "attention"), default="auto",
                       help="read-only memories as FFN decoders (ffn), as DeltaNet banks the prompt "
                            "preloads (deltanet: no neurons, a longer prompt), as attention lookups over "
                            "the words the prompt writes (attention: a full-attention layer's heads, a "
                            "longer prompt), or whichever gives fewer parameters (auto, the default: "
                            "planned every way); the report says which")
        p.add_argument("--lookup-ports", metavar="MEMORY:PORT,...",
                       help="read these read ports of written memories by attention lookups over the words "
                            "the prompt wrote (no DeltaNet banks for them; a promise that the port never reads "
                            "a word written after the prompt: the model then reads the prompt's word, and "
                            "verify reports the difference; docs/design/compiler.md 5a)")
        p.add_argument("--bits", choices=("signed", "pairs"), default="signed",
                       help="how the residual stream holds a bit: one channel of +-1 (signed, the "
                            "default: half the hidden size) or the two channels (b, 1 - b) the gadgets "
                            "are planned in (pairs); the same tokens either way (docs/design/compiler.md 1b)")
        p.add_argument("--folded-writes", metavar="MEMORY,...",
                       help="emit these memories' write data only up to the word's highest non-zero "
                            "chunk: a skipped chunk is written as 0 (exact by construction, no proof; "
                            "the frame then ends on a register token; docs/design/compiler.md 2)")
        p.add_argument("--economy", choices=("auto", "off"), default="auto",
                       help="auto (the default): find the groups of registers and memory writes a frame "
                            "can skip, from a simulated run on random inputs, prove each register group "
                            "with z3 (a refuted one is reported with its counterexample and not used), "
                            "and use what saves tokens, beside the hand-written groups (which win where "
                            "they overlap); off: only the hand-written groups (docs/design/compiler.md 2)")
        p.add_argument("--economy-stimulus", type=path_arg, metavar="FILE",
                       help="search the token economy on this run of the design's own use instead of random "
                            "inputs: a JSON-lines file of inputs per cycle, as `sim --stimulus` reads (the "
                            "groups are still proved by z3 for every state; the run decides which are "
                            "proposed and whether they pay)")
        p.add_argument("--economy-cycles", type=int, default=1024, metavar="N",
                       help="cycles of that run (default 1024; inputs hold after the file's last line)")
        p.add_argument("--economy-memory", action="append", metavar="MEMORY=FILE",
                       help="the run's initial words of a memory (repeatable): a JSON object of address -> "
                            "word, or raw little-endian words of the memory's width in bytes (a program "
                            "image)")
        p.add_argument("--out", type=path_arg, help=out_help)
        p.add_argument("--build-dir", type=path_arg, default=None, help=build_help)
        p.add_argument("--no-cache", action="store_true", help="re-run Yosys even if a cached netlist exists")
        p.add_argument("--force", action="store_true", help=force_help)

    p = parser("compile", "schedule + weights -> a checkpoint folder (stock transformers loads it)")
    compile_args(p, "checkpoint folder (default: BUILD/compiled/DESIGN); a checkpoint already there is "
                    "replaced atomically, a folder holding anything else is refused (see --force)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="dtype of the stored weights (the model is exact in both)")
    p.add_argument("--check-fit", action="store_true",
                   help="only say whether the design fits (the target), with the numbers; build nothing")
    p.set_defaults(func=cmd_compile)

    p = parser("report", "layer-assignment report (JSON + CSV + a searchable HTML page with plots)")
    compile_args(p, "folder (default: BUILD/reports/DESIGN)")
    p.add_argument("--compare", type=path_arg, metavar="OLD_REPORT.json",
                   help="an earlier report of the design (report.json or its folder): print and record what "
                        "changed (layers, neurons, heads, tokens per cycle, critical path, which signals moved); "
                        "without it, a report of the same design already in --out is compared (the last build)")
    p.set_defaults(func=cmd_report)

    p = parser("verify", "run a checkpoint with transformers against the netlist simulator")
    p.add_argument("checkpoint", type=path_arg, help="a folder written by `netlist2tf compile` or `netlist2tf merge`")
    p.add_argument("--cycles", type=count(0, 10**8, "--cycles"), default=100, help="clock cycles to check")
    p.add_argument("--batch", type=count(1, 4096, "--batch"), default=1, help="batch rows (random inputs each)")
    p.add_argument("--seed", type=count(0, 2**63 - 1, "--seed"), default=0, help="seed of the random inputs")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="dtype the model runs in")
    p.add_argument("--token-by-token", action="store_true",
                   help="feed known tokens one at a time (recurrent DeltaNet path) instead of prefilling")
    p.add_argument("--teacher-forced", action="store_true",
                   help="feed the simulator's whole trace in long forward calls and check the model's "
                        "greedy choice at every generated position (same proof, much faster)")
    p.add_argument("--window", type=count(1, 1 << 20, "--window"), default=1024,
                   help="positions per forward call with --teacher-forced")
    p.add_argument("--resume", type=path_arg, metavar="FILE",
                   help="with --teacher-forced: save the check's progress (position and model cache) to "
                        "FILE every few minutes and continue from it when run again with the same "
                        "checkpoint, dtype, cycles, batch, seed and window (FILE is deleted at the end)")
    p.add_argument("--executor", choices=("stock", "fast", "llama.cpp"), default="stock",
                   help="run the model with stock transformers' forward, netlist2tf.run.fast (the same weights' "
                        "non-zero entries, one position at a time: docs/design/fast.md), or llama.cpp (the "
                        "checkpoint's float32 GGUF export, made once and cached; needs llama-cpp-python: "
                        "docs/guide/serve-it.md)")
    p.add_argument("--server", metavar="URL", default=None,
                   help="check the model an OpenAI-compatible server at URL serves (llama.cpp's, vLLM's, SGLang's: "
                        "it must serve this checkpoint, e.g. its `export-gguf` file), by generation through "
                        "/v1/completions; the trace side is read from the folder (docs/guide/serve-it.md)")
    p.add_argument("--text-prefix", type=count(0, 1 << 20, "--text-prefix"), default=0, metavar="N",
                   help="merged checkpoints: put N random base-vocabulary tokens (seeded) before the trace")
    p.add_argument("--text-between", type=_cycle_tokens, action="append", default=[], metavar="CYCLE:N",
                   help="merged checkpoints, batch 1: put N random base-vocabulary tokens (seeded) right before "
                        "the first token the model generates in cycle CYCLE, after which the trace goes on "
                        "(repeatable): trace, text, trace")
    p.set_defaults(func=cmd_verify)

    p = parser("merge", "a compiled checkpoint's layers in front of a Qwen3.5 checkpoint")
    p.add_argument("checkpoint", type=path_arg, help="a folder written by `netlist2tf compile` (or the CPU's build/cpu-model/...)")
    p.add_argument("--base", type=path_arg, help="a Qwen3.5 checkpoint folder (text-only or the published multimodal "
                                  "layout; default: a small random Qwen3.5 model with the compiled model's "
                                  "shapes, made once under BUILD/base/)")
    p.add_argument("--out", type=path_arg, help="merged checkpoint folder (default: BUILD/merged/NAME)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default=None,
                   help="dtype of the merged weights (default: the base's)")
    p.add_argument("--layout", choices=("auto", "shared", "separate"), default="auto",
                   help="the merged residual: 'shared' puts the compiled channels on the base's (hidden size "
                        "about max(compiled, base) + the few channels text must not touch), 'separate' "
                        "side by side (compiled + base); 'auto' (default): shared wherever the compiled "
                        "model allows it (docs/design/merge.md), else separate")
    p.add_argument("--build-dir", type=path_arg, default=None, help=build_help)
    p.add_argument("--force", action="store_true", help=force_help)
    p.set_defaults(func=cmd_merge)

    p = parser("export-gguf", "a checkpoint (compiled or merged) as one float32 GGUF file for llama.cpp")
    p.add_argument("checkpoint", type=path_arg, help="a folder written by `netlist2tf compile`, `cpu build` or "
                                                     "`netlist2tf merge`")
    p.add_argument("--out", type=path_arg, required=True,
                   help="the GGUF file to write (a GGUF file this command wrote is replaced atomically; any other "
                        "file is refused, see --force)")
    p.add_argument("--force", action="store_true", help="replace a file at --out that netlist2tf did not write")
    p.set_defaults(func=cmd_export_gguf)

    p = parser("chat", "moved: the chat with the compiled CPU as a tool is `cpu chat` (the CPU application's command)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_chat)
    return ap


def cmd_export_gguf(args) -> int:
    from netlist2tf.common import check_output_file
    from netlist2tf.serve import export_gguf

    if not Path(args.checkpoint).is_dir():
        raise Netlist2TFError(f"{args.checkpoint}: no such checkpoint folder; give a folder written by "
                              f"`netlist2tf compile`, `cpu build` or `netlist2tf merge`")
    check_output_file(args.out, "--out", "gguf", args.force, stream=False)
    t0 = time.perf_counter()
    info = export_gguf(args.checkpoint, args.out, log=lambda msg: print(msg, file=sys.stderr), force=args.force)
    for note in info["notes"]:
        print(f"  note: {note}", file=sys.stderr)
    print(f"{args.out}: {info['tensors']} tensors, {info['parameters']:,} parameters, {info['bytes'] / 1e9:.2f} GB "
          f"float32, vocabulary {info['vocab']:,}; {time.perf_counter() - t0:.1f} s. Run it with llama.cpp "
          f"(greedy decoding), or check it: `netlist2tf verify {args.checkpoint} --executor llama.cpp`",
          file=sys.stderr)
    return 0


def cmd_chat(args) -> int:
    raise Netlist2TFError("`netlist2tf chat` is now `cpu chat` (the chat runs the CPU application, which this "
                          "library does not import): run `cpu chat CHECKPOINT ...` with the same arguments")


def main(argv=None) -> int:
    from netlist2tf.cliutil import run

    args = build_parser().parse_args(argv)
    return run("netlist2tf", _checked(args.func), args)


def _checked(func):
    """``func`` after the checks every command makes before any work: the build folder is usable."""
    def run(args):
        from netlist2tf.common import check_build_dir
        from netlist2tf.common import ENV, build_dir

        if hasattr(args, "build_dir"):
            check_build_dir(build_dir(args.build_dir), "--build-dir" if args.build_dir else f"the build folder (${ENV} or build/)")
        return func(args)
    return run


if __name__ == "__main__":
    sys.exit(main())
