"""The ``cpu`` command line: run C programs and ELF files on the RV32IM+Zba machine.

    cpu run PROGRAM.c|PROGRAM.elf [--engine unicorn|netlist|model] [--max-steps N] [--trace FILE] [--input FILE|-]
                                  [--ram-size BYTES] [--compiler zig|gcc|clang] [--no-zba] [-O LEVEL]
                                  [--dtype float32|bfloat16] [--batch N] [--token-by-token]  (model)
                                  [--teacher-forced [--threads N]]                           (model)
    cpu check [NAME ...] [--engine unicorn] [--compiler ...]    run the program table, compare outputs
              [--dtype ...] [--teacher-forced [--threads N]]     (model)
    cpu programs                                                 list the program table

``run`` compiles a .c file (cached under build/cpu/), loads the ELF, runs it and writes the program's
console output to stdout; statistics and halt messages go to stderr. Exit status: the program's exit
code (a0 & 0xff) when it exits or hits ebreak; 3 on a trap; 4 when the step limit is reached; 2 for
errors in the input (compile errors, bad ELF files, missing files).

Engines are functions ``(image, ram_size, max_steps, trace) -> RunResult`` in ``ENGINES``; ``model``
is the CPU compiled into a Qwen3.5 checkpoint (cpu/model_engine.py: built once and cached under
build/cpu-model/, 64 KiB of RAM by default, the machine's), run with stock transformers.
"""

import argparse
import contextlib
import sys
import time
from pathlib import Path

from netlist2tf.common import Netlist2TFError

from .engines import ENGINES, default_ram_size, model_dtype  # noqa: F401 (cli.ENGINES: the engine table)
from .machine import DEFAULT_RAM_SIZE, Halt

EXIT_TRAP = 3
EXIT_STEP_LIMIT = 4
EXIT_INPUT_ERROR = 2
OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Os", "-Oz", "-Og")


class InputError(Netlist2TFError):
    """A command-line input that cannot be used (missing file, unknown engine, bad number)."""


FETCH_HELP = ("how the instruction fetch reads the RAM: DeltaNet banks of it, as every read (deltanet, the "
              "default), or an attention lookup over the words the prompt wrote (attention: one full-attention "
              "layer instead of the fetch's banks; a program may not run code it wrote: the engine refuses it)")

def load_program(path, ram_size=DEFAULT_RAM_SIZE, compiler=None, opt="-O2", zba=True):
    """The machine image of a .c program (compiled, cached) or an ELF file."""
    from .elf import load_elf
    from .toolchain import compile_c

    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a folder; give a C source file (.c) or an ELF executable")
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if not path.is_file():
        raise InputError(f"{path}: is not a regular file (a device or a pipe); give a C source file (.c) or an "
                         f"ELF executable")
    if path.suffix.lower() in (".cpp", ".cc", ".cxx", ".c++", ".s", ".asm", ".rs", ".h", ".o", ".a"):
        raise InputError(f"{path}: {path.suffix} files are not accepted; give one C source file (.c) or a "
                         f"linked RV32 ELF executable")
    if path.suffix == ".py":
        raise InputError(f"{path}: a Python script; run it on MicroPython with `cpu python {path}`")
    if path.suffix == ".c":
        path = compile_c(path, ram_size=ram_size, compiler=compiler, opt=opt, zba=zba)
    return load_elf(path, ram_size=ram_size)


def read_input(where: str, limit: int) -> bytes:
    """The bytes of ``--input``: a file (a device or a pipe too), or standard input for ``-``, read in
    pieces and refused as soon as it is longer than ``limit`` bytes (the room the program's RAM has
    for it): an endless stream (``< /dev/zero``) is one clear error, not a machine out of memory."""
    from netlist2tf.common import read_limited

    name = "standard input" if where == "-" else where
    if where != "-" and Path(where).is_dir():
        raise InputError(f"--input {where}: a folder; give a file (or - for standard input)")
    try:
        if where == "-":
            stdin = getattr(sys.stdin, "buffer", None) or open(sys.stdin.fileno(), "rb", closefd=False)
        with (contextlib.nullcontext(stdin) if where == "-" else open(where, "rb", buffering=0)) as f:
            return read_limited(f, limit, f"--input {where}: {name}",
                                "the room the program's RAM has for it (after its code and data, before its "
                                "stack): give a shorter input or a larger --ram-size")
    except OSError as e:
        raise InputError(f"--input {where}: cannot read it: {e.strerror or e}") from None


def program_input(image, data: bytes, ram_size: int, program="the program"):
    """``machine.with_input`` with its errors as InputError naming the program and the way out."""
    from .machine import InputTooLong, with_input
    try:
        return with_input(image, data, ram_size)
    except InputTooLong as e:
        raise InputError(f"--input: {e}; give a shorter input or a larger --ram-size") from None
    except ValueError as e:
        raise InputError(f"--input: {program}: {e}") from None


def _engine(name):
    try:
        return ENGINES[name]
    except KeyError:
        raise InputError(f"unknown engine {name!r}; available: {', '.join(ENGINES)}") from None


def exit_status(halt: Halt) -> int:
    """The process exit status for a run that ended with ``halt``."""
    if halt.kind in (Halt.EXIT, Halt.EBREAK):
        return halt.exit_code & 0xFF
    return EXIT_TRAP if halt.kind == Halt.TRAP else EXIT_STEP_LIMIT


def _configured_engine(args):
    """The engine function of ``args.engine`` with the model engine's options bound (errors for model
    options given to another engine, or combined wrongly)."""
    engine = _engine(args.engine)
    batch, token_by_token = getattr(args, "batch", None), getattr(args, "token_by_token", False)
    if args.engine != "model" and (args.dtype or batch or token_by_token or args.teacher_forced or args.threads
                                   or args.plain or args.checkpoint or args.executor or args.text_prefix
                                   or getattr(args, "server", None)):
        raise InputError("--dtype, --batch, --plain, --token-by-token, --teacher-forced, --threads, "
                         "--checkpoint, --executor, --server and --text-prefix are options of --engine model")
    if args.text_prefix and not args.checkpoint:
        raise InputError("--text-prefix puts text before the program's trace in a merged model: give the merged "
                         "checkpoint with --checkpoint (make one with `netlist2tf merge`)")
    if getattr(args, "server", None) is not None:
        if not args.checkpoint or args.executor or args.teacher_forced or args.dtype or args.text_prefix:
            raise InputError("--server runs the program on a served model by generation: give the folder it "
                             "serves with --checkpoint (the trace side is read from it), without --executor, "
                             "--teacher-forced, --dtype or --text-prefix")
        args.executor = args.server
    if args.executor in ("fast", "llama.cpp") and args.threads is not None:
        raise InputError(f"--threads sets torch threads of the stock forward; the {args.executor} executor chooses "
                         f"its own")
    if args.executor == "llama.cpp" and args.dtype not in (None, "float32"):
        raise InputError("the llama.cpp executor runs the checkpoint's float32 GGUF export only (llama.cpp rounds "
                         "activations to the weights' type): drop --dtype")
    if args.checkpoint and not Path(args.checkpoint).is_dir():
        raise InputError(f"--checkpoint {args.checkpoint}: no such folder")
    if args.teacher_forced and args.plain:
        raise InputError("--teacher-forced checks the netlist simulator's trace in long forward calls; it "
                         "cannot be combined with --plain (generation)")
    if args.teacher_forced and token_by_token:
        raise InputError("--teacher-forced feeds the whole trace in long forward calls; it cannot be "
                         "combined with --token-by-token")
    plain = args.plain or token_by_token
    if args.threads is not None and plain:
        raise InputError("--threads sets the torch threads of the long forward calls of speculative "
                         "decoding and --teacher-forced; plain generation runs on one thread (its forward "
                         "calls are too small to share)")
    if args.threads == 0:
        raise InputError("--threads must be at least 1")
    if args.engine == "model":
        import functools
        # the fast executor generates faster than speculative decoding verifies: it generates plainly
        decoding = ("teacher-forced" if args.teacher_forced
                    else "plain" if plain or args.executor in ("fast", "llama.cpp")
                    or getattr(args, "server", None) is not None else "speculative")
        from netlist2tf.common import where_it_runs

        name, why = model_dtype(args.dtype)
        if args.executor == "fast" and not args.dtype:
            # the fast executor sums in float64 and stores float32: bfloat16 only adds its rounding steps
            name, why = "float32", "the fast executor's default: bfloat16 only adds rounding work there"
        if getattr(args, "server", None) is not None:
            name = "float32"
            print(f"cpu: model: the server at {args.server} (OpenAI-compatible /v1/completions, greedy), serving "
                  f"{args.checkpoint}", file=sys.stderr)
        elif args.executor == "llama.cpp":
            name = "float32"
            print("cpu: model: llama.cpp (the checkpoint's float32 GGUF export, made once and cached under the "
                  "build folder; greedy decoding, all of llama.cpp's threads)", file=sys.stderr)
        elif args.executor == "fast":
            print(f"cpu: model: fast executor (netlist2tf.run.fast: the weights' non-zero entries, one position at "
                  f"a time on one core, equal to the stock forward), {name} ({why})", file=sys.stderr)
        else:
            print(f"cpu: {where_it_runs('cpu', name, why, 1 if plain else args.threads or 1)}", file=sys.stderr)
        engine = functools.partial(engine, dtype=name, batch=batch or 1, executor=args.executor or "stock",
                                   prefill=not token_by_token, decoding=decoding, threads=args.threads,
                                   checkpoint=args.checkpoint, text_prefix=args.text_prefix)
    return engine


def cmd_run(args) -> int:
    from netlist2tf.common import check_output_file

    if args.trace is not None:
        check_output_file(args.trace, "--trace", "trace", args.force)
    engine = _configured_engine(args)
    ram_size = args.ram_size or default_ram_size(args.engine, args.checkpoint)
    image = load_program(args.program, ram_size=ram_size, compiler=args.compiler, opt=args.opt,
                         zba=not args.no_zba)
    if args.input is not None:
        if image.input_addr is None:          # no input area: say so before reading anything
            program_input(image, b"", ram_size, args.program)
        from .machine import input_room
        image = program_input(image, read_input(args.input, input_room(image, ram_size)), ram_size, args.program)
    return _run_image(args, engine, image, ram_size)


def _run_image(args, engine, image, ram_size, extra=None) -> int:
    """Run ``image`` on the configured ``engine``; print its console output, then the halt and the
    figures on standard error (``extra``: more lines for there, e.g. the MicroPython boot);
    write ``--trace``; return the exit status."""
    t0 = time.perf_counter()
    result = engine(image, ram_size, args.max_steps, args.trace is not None)
    wall = time.perf_counter() - t0
    sys.stdout.flush()
    sys.stdout.buffer.write(result.console)
    sys.stdout.buffer.flush()
    if args.trace is not None:
        from netlist2tf.common import file_writer
        with file_writer(args.trace, option="--trace") as f:
            for record in result.records:
                f.write(f"{record}\n")
    seconds = result.seconds or wall
    rate = result.instructions / seconds if seconds > 0 else 0.0
    halt = result.halt
    print(f"cpu: {halt.describe()}", file=sys.stderr)
    for line in (extra or ()):
        print(f"cpu: {line}", file=sys.stderr)
    print(f"cpu: {args.engine}: {result.instructions} instructions, {result.cycles} cycles, {seconds:.3f} s, "
          f"{rate:,.2f} instructions/s", file=sys.stderr)
    if args.engine == "model":
        tokens = result.tokens
        per = tokens / result.instructions if result.instructions else float("nan")
        mode = {"teacher-forced": "teacher-forced: every generated token checked as the model's greedy choice",
                "speculative": "speculative decoding: every token drafted by the netlist simulator was the "
                               "model's greedy choice",
                "plain": ("plain generation by the fast executor" if args.executor == "fast" else
                          "plain generation, " + ("token by token" if args.token_by_token else "prompt prefilled")),
                }.get(result.decoding, result.decoding)
        print(f"cpu: model: {tokens} generated tokens ({result.prompt_tokens} prompt tokens), "
              f"{per:.1f} tokens/instruction, {tokens * result.batch / seconds:,.1f} tokens/s "
              f"(batch {result.batch}, {getattr(result, 'dtype', None) or model_dtype(args.dtype)[0]}, {mode})", file=sys.stderr)
        print(f"cpu: model: checkpoint {result.checkpoint}, layer report {result.checkpoint}/report/report.html",
              file=sys.stderr)
    return exit_status(halt)


def cmd_python(args) -> int:
    from netlist2tf.common import check_output_file

    from . import micropython
    from .machine import input_room

    if args.trace is not None:
        check_output_file(args.trace, "--trace", "trace", args.force)
    if (args.script is None) == (args.code is None):
        raise InputError("give a script (a file, or - for standard input) or -c CODE, not both")
    if args.script not in (None, "-"):
        script = Path(args.script)
        if script.is_dir():
            raise InputError(f"{script} is a folder; give a Python script (or - for standard input)")
        if not script.exists():
            raise InputError(f"{script}: no such file")
    engine = _configured_engine(args)
    ram_size = args.ram_size or (default_ram_size("model", args.checkpoint) if args.checkpoint else
                                 micropython.RAM_SIZE)
    firmware = micropython.build_firmware(ram_size, micropython.heap_for(ram_size), compiler=args.compiler,
                                          log=lambda line: print(f"cpu: micropython: {line}", file=sys.stderr))
    boot = micropython.booted_image(firmware)
    base = micropython.cold_image(firmware) if args.cold_boot else boot.image
    if args.code is not None:
        source = args.code.encode()
        if len(source) > input_room(base, ram_size):
            raise InputError(f"-c: the code is {len(source):,} bytes; the firmware leaves room for "
                             f"{input_room(base, ram_size):,} in {ram_size:,} bytes of RAM: give a larger --ram-size")
    else:
        source = read_input(args.script, input_room(base, ram_size))
    image = program_input(base, source, ram_size, "the MicroPython firmware")
    how = ("paid in this run (--cold-boot)" if args.cold_boot else
           "skipped: the run starts from the RAM after the boot, taken once on unicorn")
    extra = [f"micropython: {micropython.MICROPYTHON_VERSION}, {firmware.code_bytes:,} bytes of code and data, "
             f"a {firmware.heap_size:,}-byte heap, {ram_size:,} bytes of RAM; boot {boot.instructions:,} "
             f"instructions, {how}"]
    return _run_image(args, engine, image, ram_size, extra)


def cmd_check(args) -> int:
    from .programs import PROGRAMS

    engine = _configured_engine(args)
    chosen = [p for p in PROGRAMS if not args.names or p.name in args.names]
    unknown = set(args.names) - {p.name for p in PROGRAMS}
    if unknown:
        raise InputError(f"unknown program(s) {', '.join(sorted(unknown))}; see `cpu programs`")
    failures = 0
    for prog in chosen:
        ram_size = args.ram_size or default_ram_size(args.engine, args.checkpoint)
        image = load_program(prog.path, ram_size=ram_size, compiler=args.compiler)
        result = engine(image, ram_size, args.max_steps, False)
        ok = (result.halt.kind == Halt.EXIT and result.halt.exit_code == prog.expected_exit
              and result.console == prog.expected_output)
        failures += not ok
        detail = "" if ok else (f" (expected exit {prog.expected_exit}, output "
                                f"{'matches' if result.console == prog.expected_output else 'differs'})")
        print(f"{'ok  ' if ok else 'FAIL'} {prog.name:12s} {result.halt.describe()}{detail}; "
              f"{result.instructions} instructions, {result.seconds:.3f} s")
    print(f"{len(chosen) - failures}/{len(chosen)} programs passed on {args.engine}")
    return 0 if failures == 0 else 1


def cmd_programs(args) -> int:
    from .programs import PROGRAMS

    for prog in PROGRAMS:
        print(f"{prog.name:12s} exit {prog.expected_exit:3d}  {prog.path}  {prog.description}")
    return 0


def _int(text):
    from netlist2tf.cliutil import count
    return count(0, None, "the value")(text)


def _opt(text):
    level = text if text.startswith("-O") else f"-O{text}"
    if level not in OPT_LEVELS:
        raise argparse.ArgumentTypeError(f"unknown optimization level {text!r}; use one of "
                                         f"{', '.join(o[2:] for o in OPT_LEVELS)}")
    return level


def _ram_size(text):
    value = _int(text)
    if value < 4096 or value % 4 or value > 0x1000_0000:
        raise argparse.ArgumentTypeError(f"RAM size must be a multiple of 4 from 4096 to 0x10000000: {text!r}")
    return value


def _fit_row(target, ram, layers, demand) -> list[str]:
    """One row of ``cpu fit``'s table: the plan's demands against ``target``'s shapes."""
    from netlist2tf.compile import FULL, LINEAR

    heads = demand["deltanet_heads_per_layer"]
    types = demand["layer_types"]
    merged = sum(target.layer_parameters(t) for t in types) + demand["vocab_size"] * target.hidden_size
    return [target.name, f"{ram // 1024} KiB", str(layers),
            f"{demand['hidden_channels']:,} of {target.hidden_size:,}",
            f"{max(heads, default=0)} of {target.linear_num_value_heads} ({types.count(LINEAR)} layers)",
            f"{max(demand.get('attention_heads_per_layer', ()), default=0)} of {target.num_attention_heads} "
            f"({types.count(FULL)} layer{'s' if types.count(FULL) != 1 else ''})",
            f"{max(demand['neurons_per_layer'], default=0):,} of {target.intermediate_size:,}",
            f"{demand['parameters'] / 1e9:.2f} G",
            f"+{merged / target.base_parameters():.1%}"]


FIT_HEADER = ["target", "RAM", "layers", "residual channels", "DeltaNet value heads a layer",
              "attention heads a layer", "FFN neurons a layer", "parameters", "merged: + of the base"]


def _table(rows) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def cmd_fit(args) -> int:
    from netlist2tf.compile import Target, geometries

    from .model_engine import LAYERS, MODEL_RAM_SIZE, fewest_layers, fit

    rams = args.ram_size or [MODEL_RAM_SIZE]
    # every target read first: a bad one is refused before any planning
    targets = {t: Target.from_config_json(t) for t in args.targets or list(geometries())}
    log = (lambda msg: print(f"cpu fit: {msg}", file=sys.stderr)) if sys.stderr.isatty() else None
    rows, bad = [FIT_HEADER], 0
    for ram in rams:
        for t, target in targets.items():
            name = target.name
            if args.layers:
                layers = args.layers
                demand, problems = fit(t, ram, layers=layers, fetch=args.fetch)
            else:
                layers, demand, problems = fewest_layers(t, ram, start=LAYERS, log=log, fetch=args.fetch)
            if demand:
                rows.append(_fit_row(target, ram, layers, demand))
                spread = "; ".join(f"{k} read over layers {v}" for k, v in demand["memory_reads"].items())
                late = (f"; {demand['late_register_chunks']} register chunks read after layer 0"
                        if demand["late_register_chunks"] else "")
                looks = (f"; attention heads per layer {demand['attention_heads_per_layer']} (the fetch: a lookup "
                         f"over the prompt's words)" if any(demand.get("attention_heads_per_layer", ())) else "")
                note = (f"{name}, {ram // 1024} KiB, {layers} layers: DeltaNet value heads per layer "
                        f"{demand['deltanet_heads_per_layer']}; FFN neurons per layer "
                        f"{demand['neurons_per_layer']}; {spread}{late}{looks}")
            else:
                bad += 1
                rows.append([name, f"{ram // 1024} KiB", f"not {layers}" if layers else "none", "", "", "",
                             "", "", ""])
                note = (f"{name}, {ram // 1024} KiB: does not fit "
                        f"{f'{layers} layers' if layers else 'any number of layers'} of its shapes:\n{problems}")
            print(note, flush=True)
    print("\n" + _table(rows))
    print("\nlayers: " + (f"exactly {args.layers} (--layers)" if args.layers else f"the fewest from {LAYERS} that hold it")
          + "; merged: + of the base = the compiled layers at the base's per-layer shapes and one embedding row per "
            "trace token, over the base's parameters as transformers builds it (vision tower included)")
    return 1 if bad else 0


def cmd_build(args) -> int:
    from netlist2tf.common import check_output_folder
    from netlist2tf.compile import Target

    from .model_engine import LAYERS, MODEL_RAM_SIZE, build_on_target

    if args.layers is not None and args.layers < 2:
        raise InputError(f"--layers {args.layers}: the compiled CPU needs more layers (`cpu fit --layers N "
                         f"TARGET` says whether N fit)")
    # never an input or a cache; that the folder is new or empty build_on_target says itself
    check_output_folder(args.out, "--out", "checkpoint", force=True, inputs=[t for t in (args.target,) if Path(t).exists()])
    target = Target.from_config_json(args.target, layers=args.layers or LAYERS)
    folder = build_on_target(target, args.out, args.ram_size or MODEL_RAM_SIZE, fetch=args.fetch)
    print(f"cpu: the CPU ({(args.ram_size or MODEL_RAM_SIZE) // 1024} KiB of RAM) compiled onto {target.name}'s "
          f"shapes in {target.num_layers} layers: {folder} (run programs on it with `cpu run PROGRAM --engine model "
          f"--checkpoint {folder}" + (f" --ram-size {args.ram_size}" if args.ram_size else "") + "`)")
    return 0


def cmd_report(args) -> int:
    from netlist2tf.common import check_output_folder
    from netlist2tf.common import build_dir
    from netlist2tf.report import write_report
    from netlist2tf.report import attach_comparison, old_report

    from .model_engine import MODEL_RAM_SIZE, core_design, cpu_report

    ram = args.ram_size or MODEL_RAM_SIZE
    out = Path(args.out) if args.out is not None else \
        build_dir() / "reports" / f"cpu-{ram // 1024}k{'-nozba' if args.no_zba else ''}"
    check_output_folder(out, "--out", "report", args.force)
    design = core_design(ram, zba=not args.no_zba)
    old, old_name = old_report(args.compare, out, design)      # before any work: a bad file fails at once
    report = cpu_report(ram, zba=not args.no_zba)
    text = attach_comparison(report, old, old_name, bool(args.compare))
    if text:
        print(text)
    _, page = write_report(report, out, force=args.force)
    print(f"cpu: layer-assignment report {page} (data: report.json, assignment.csv beside it)", file=sys.stderr)
    return 0


def cmd_chat(args) -> int:
    from cpu.chat import Chat

    script = None
    if args.assistant:
        from netlist2tf.common import MAX_SMALL_TEXT_BYTES, read_text
        text = read_text(args.assistant, f"--assistant {args.assistant}", MAX_SMALL_TEXT_BYTES)
        import re
        script = iter([r.strip("\n") for r in re.split(r"(?m)^---$", text) if r.strip()])

    def scripted(messages, prompt):
        reply = next(script, None)
        if reply is None:
            raise Netlist2TFError(f"--assistant {args.assistant}: out of scripted replies")
        return reply

    chat = Chat(Path(args.checkpoint), assistant=scripted if script else None, engine=args.engine,
                executor=args.executor, max_new_tokens=args.max_new_tokens,
                time_limit=args.tool_time_limit or None, max_steps=args.tool_max_steps)
    if args.message is not None:
        messages = args.message
    else:                                   # one message a line, each line bounded (inputs.lines)
        from netlist2tf.common import lines
        messages = (line.rstrip("\n") for _, line in lines(sys.stdin.buffer, "standard input"))
    for message in messages:
        if not message.strip():
            continue
        done = len(chat.runs)
        reply = chat.send(message)
        print(f"user: {message}")
        for run in chat.runs[done:]:
            print(f"tool {run.tool}: {run.output}")
            print(f"cpu: chat: {run.tool} on {run.engine}: {run.instructions:,} instructions, "
                  f"{run.tokens:,} trace tokens, {run.seconds:.2f} s", file=sys.stderr)
        print(f"assistant: {reply}", flush=True)
    return 0


def build_parser():
    from netlist2tf.cliutil import Formatter, Parser, add_version, count, path_arg, seconds

    from cpu.chat import TOOL_MAX_STEPS, TOOL_TIME_LIMIT
    from cpu.tools import PYTHON

    parser = Parser(prog="cpu", description="Run programs on the RV32IM+Zba machine.",
                                     formatter_class=Formatter)
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--engine", default="unicorn", help=f"engine to run on (default unicorn; known: "
                       f"{', '.join(ENGINES)})")
        p.add_argument("--max-steps", type=count(1, None, "--max-steps"), default=10_000_000,
                       help="stop after N instructions (exit status 4)")
        p.add_argument("--ram-size", type=_ram_size, default=None,
                       help=f"RAM size in bytes (default {DEFAULT_RAM_SIZE}; for --engine model --checkpoint, the checkpoint's)")
        p.add_argument("--compiler", choices=("zig", "gcc", "clang"), default=None,
                       help="C compiler (default: $NETLIST2TF_CC, else zig)")

    def model_options(p):
        p.add_argument("--dtype", choices=("float32", "bfloat16"), default=None,
                       help="model engine: run the checkpoint in this dtype (default: bfloat16 on a CPU with "
                            "bfloat16 matrix instructions (avx512_bf16, amx_bf16), where it was 2.4x faster, "
                            "float32 elsewhere, where bfloat16 was 3-4x slower; the model is exact in both)")
        p.add_argument("--teacher-forced", action="store_true",
                       help="model engine: check the model instead of running it: like the default "
                            "speculative decoding (the netlist simulator's trace fed in long forward calls, "
                            "every generated token checked as the model's greedy choice), but a token the "
                            "model rejects stops the run with an error naming it (progress saved under "
                            "build/teacher-forced/ every 5 minutes and resumed when run again)")
        p.add_argument("--plain", action="store_true",
                       help="model engine: plain greedy generation, one forward call per generated token, "
                            "instead of speculative decoding (the same output; ~8x slower)")
        p.add_argument("--threads", type=count(1, 256, "--threads"), default=None,
                       help="model engine: torch threads of the long forward calls of speculative decoding "
                            "and --teacher-forced (default 1; 2 on an idle 2-core machine: 1.8x faster, but "
                            "more threads than free cores is many times slower)")
        p.add_argument("--executor", choices=("stock", "fast", "llama.cpp"), default=None,
                       help="model engine: stock transformers' forward (default), or netlist2tf.run.fast: the same "
                            "weights' non-zero entries computed sparsely on one core, equal to the stock "
                            "forward at every layer (docs/design/fast.md; bench/fast_executor.py measures it); it "
                            "generates plainly; merged checkpoints too (trace-only prompts); a checkpoint or a value it "
                            "cannot prove exact runs stock, with a line saying why; or llama.cpp: the checkpoint's "
                            "float32 GGUF export run by llama.cpp (needs llama-cpp-python and a checkpoint with "
                            "square DeltaNet heads, e.g. from `cpu build qwen3.5-4b`: docs/guide/serve-it.md)")
        p.add_argument("--server", metavar="URL", default=None,
                       help="model engine: run on the model an OpenAI-compatible server at URL serves (llama.cpp's, "
                            "vLLM's, SGLang's), by generation through /v1/completions; --checkpoint names the folder "
                            "it serves (docs/guide/serve-it.md)")
        p.add_argument("--checkpoint", type=path_arg, metavar="FOLDER", default=None,
                       help="model engine: run this checkpoint instead of the cached build: the compiled "
                            "CPU's folder (build/cpu-model/...) or one merged in front of a Qwen3.5 model "
                            "from it by `netlist2tf merge`")
        p.add_argument("--text-prefix", type=count(0, 1 << 20, "--text-prefix"), default=0, metavar="N",
                       help="model engine, merged checkpoints: run each program after N random base-vocabulary "
                            "tokens (seeded: the same every run), i.e. a trace after text; stock transformers")

    run = sub.add_parser("run", help="run one program (.c or .elf)", description="run one program (.c or .elf)",
                         formatter_class=Formatter)
    run.add_argument("program", type=path_arg, help="a C source file (one file with main) or an ELF executable")
    common(run)
    run.add_argument("--trace", type=path_arg, metavar="FILE", help="write one line per retired instruction")
    run.add_argument("--input", type=path_arg, metavar="FILE", default=None,
                     help="the program's input (its stdin: getchar, fgets ...): the bytes of FILE, or of standard "
                          "input for -, placed in RAM after the program's data before it starts (every engine "
                          "reads the same memory image; the model reads it from its prompt)")
    run.add_argument("--force", action="store_true",
                     help="let --trace replace a file that is not a trace written by cpu run")
    run.add_argument("-O", dest="opt", default="-O2", type=_opt,
                     help="optimization level for .c files: 0, 1, 2, 3, s, z or g (default 2)")
    run.add_argument("--no-zba", action="store_true", help="compile without the Zba extension")
    model_options(run)
    run.add_argument("--batch", type=count(1, 4096, "--batch"), default=None,
                     help="model engine: run N copies of the program in one batch (default 1)")
    run.add_argument("--token-by-token", action="store_true",
                     help="model engine: plain generation with the prompt fed one token per forward call "
                          "(the recurrent path; implies --plain)")
    run.set_defaults(func=cmd_run)

    what = ("run a Python script on MicroPython on the machine (the firmware is built once from the pinned "
            "MicroPython sources; docs/guide/python-on-the-cpu.md)")
    py = sub.add_parser("python", help=what, description=what, formatter_class=Formatter)
    py.add_argument("script", nargs="?", type=path_arg, default=None,
                    help="the Python script: a file, or - for standard input")
    py.add_argument("-c", dest="code", metavar="CODE", default=None, help="run CODE instead of a script file")
    py.add_argument("--engine", default="unicorn", help=f"engine to run on (default unicorn; known: {', '.join(ENGINES)})")
    py.add_argument("--max-steps", type=count(1, None, "--max-steps"), default=100_000_000,
                    help="stop after N instructions (exit status 4; default 100,000,000)")
    py.add_argument("--ram-size", type=_ram_size, default=None,
                    help="the machine's RAM in bytes (default 262144, the least MicroPython's firmware fits in "
                         "with its heap; more RAM is more heap; for --engine model --checkpoint, the checkpoint's)")
    py.add_argument("--compiler", choices=("zig", "gcc"), default=None,
                    help="C compiler of the firmware (default: $NETLIST2TF_CC, else zig; clang has no soft float for rv32)")
    py.add_argument("--cold-boot", action="store_true",
                    help="boot MicroPython in the run itself instead of starting from the booted snapshot "
                         "(the same output; the boot's instructions are paid in the run)")
    py.add_argument("--trace", type=path_arg, metavar="FILE", help="write one line per retired instruction")
    py.add_argument("--force", action="store_true",
                    help="let --trace replace a file that is not a trace written by cpu")
    model_options(py)
    py.add_argument("--batch", type=count(1, 4096, "--batch"), default=None,
                    help="model engine: run N copies of the script in one batch (default 1)")
    py.add_argument("--token-by-token", action="store_true",
                    help="model engine: plain generation with the prompt fed one token per forward call")
    py.set_defaults(func=cmd_python)

    check = sub.add_parser("check", help="run the program table and compare outputs and exit codes",
                           description="run the program table and compare outputs and exit codes",
                           formatter_class=Formatter)
    check.add_argument("names", nargs="*", help="program names (default: all)")
    common(check)
    model_options(check)
    check.set_defaults(func=cmd_check)

    fit = sub.add_parser("fit", help="check whether the compiled CPU fits published Qwen3.5 geometries",
                         description="plan the compiled CPU onto each target's per-layer shapes: the fewest layers "
                                     "from 11 that hold it (or exactly --layers N), its residual, heads and FFN "
                                     "width per layer, its parameters and what it adds merged in front of the "
                                     "base; or which numbers do not fit (exit status 1 if one does not fit). "
                                     "Plans only: 2-6 minutes a plan, 1-3 plans a row", formatter_class=Formatter)
    fit.add_argument("targets", nargs="*", metavar="TARGET",
                     help="a published geometry (qwen3.5-0.8b, qwen3.5-2b, qwen3.5-4b, qwen3.5-9b), a "
                          "Qwen3.5 config.json or checkpoint folder (default: the four published geometries)")
    fit.add_argument("--ram-size", type=_ram_size, default=None, action="append",
                     help="RAM size in bytes (default 65536, the model engine's); repeat it for a row per size")
    fit.add_argument("--layers", type=int, default=None, metavar="N",
                     help="plan exactly N compiled layers (default: the fewest from 11, the model engine's "
                          "count, that hold it: a published geometry's layers hold few DeltaNet heads, so a "
                          "large RAM's reads spread over more of them)")
    fit.add_argument("--fetch", choices=("deltanet", "attention"), default="deltanet", help=FETCH_HELP)
    fit.set_defaults(func=cmd_fit)

    build = sub.add_parser("build", help="compile the CPU onto a Qwen3.5 geometry's shapes (a checkpoint folder)",
                           description="compile the CPU of hdl/rv32 with the model engine's settings onto the "
                                       "per-layer shapes of a published Qwen3.5 geometry or a Qwen3.5 config.json "
                                       "(DeltaNet heads of 128, its head counts, hidden and FFN sizes) and write the "
                                       "checkpoint to a new folder, to run programs on (`cpu run --engine model "
                                       "--checkpoint`) or to merge in front of a checkpoint of those shapes "
                                       "(`netlist2tf merge`); `cpu fit --layers N` first says how many layers it "
                                       "needs. A published geometry's full width makes a checkpoint of several GB "
                                       "(docs/design/merge.md)", formatter_class=Formatter)
    build.add_argument("target", metavar="TARGET",
                       help="a published geometry (qwen3.5-0.8b, qwen3.5-2b, qwen3.5-4b, qwen3.5-9b), a Qwen3.5 "
                            "config.json or checkpoint folder")
    build.add_argument("--layers", type=int, default=None, metavar="N", help="compiled layers (default 11)")
    build.add_argument("--ram-size", type=_ram_size, default=None,
                       help="RAM size in bytes (default 65536, the model engine's)")
    build.add_argument("--out", type=path_arg, metavar="DIR", required=True, help="a new folder for the checkpoint")
    build.add_argument("--fetch", choices=("deltanet", "attention"), default="deltanet", help=FETCH_HELP)
    build.set_defaults(func=cmd_build)
    report = sub.add_parser("report", help="the compiled CPU's layer report from hdl/rv32 as it is now (no weights)",
                            description="plan the CPU of hdl/rv32/core.py as the model engine compiles it and write "
                                        "its layer report (report.html, report.json, assignment.csv; docs/design/report.md), "
                                        "~1 minute; with --compare, what an HDL edit changed against an earlier "
                                        "report (e.g. build/cpu-model/<hash>/report/report.json)",
                            formatter_class=Formatter)
    report.add_argument("--ram-size", type=_ram_size, default=None,
                        help="RAM size in bytes (default 65536, the model engine's)")
    report.add_argument("--no-zba", action="store_true", help="the core without the Zba extension")
    report.add_argument("--out", type=path_arg, metavar="DIR", default=None,
                        help="the report folder (default build/reports/cpu-16k[-nozba])")
    report.add_argument("--compare", type=path_arg, metavar="OLD_REPORT.json", default=None,
                        help="an earlier report (report.json or its folder): print and record what changed "
                             "(without it: the report already in --out, if any: the last build)")
    report.add_argument("--force", action="store_true", help="let --out replace a folder that is not a report of ours")
    report.set_defaults(func=cmd_report)

    what = "a chat over a merged CPU checkpoint whose assistant calls the compiled CPU (the calc tool) in Qwen3.5's tool-call format"
    p = sub.add_parser("chat", help=what, description=what, formatter_class=Formatter)
    p.add_argument("checkpoint", type=path_arg, help="a merged checkpoint of the CPU (`make merge`: build/merged/cpu)")
    p.add_argument("--message", "-m", action="append", default=None, metavar="TEXT",
                   help="a user message (repeatable); without it, one message per line of standard input")
    p.add_argument("--assistant", type=path_arg, metavar="FILE", default=None,
                   help="the assistant's replies, scripted: FILE's replies separated by lines that are exactly ---, "
                        "used in order instead of generating them (a random base cannot decide to call)")
    p.add_argument("--engine", choices=("model", "unicorn", "netlist"), default="model",
                   help="where tool calls run (default model: the checkpoint's compiled layers generate the trace)")
    p.add_argument("--executor", choices=("fast", "stock"), default="fast",
                   help="how the model engine runs the compiled layers (default fast: exact, one core)")
    p.add_argument("--max-new-tokens", type=count(1, 1 << 20, "--max-new-tokens"), default=256, help="generated tokens per assistant reply")
    p.add_argument("--tool-time-limit", type=seconds("--tool-time-limit"), default=TOOL_TIME_LIMIT, metavar="SECONDS",
                   help="wall-clock seconds a tool call may run, from its program's first cycle (loading the model "
                        "is not counted); past it the engine is stopped and the tool response says so "
                        f"(default {TOOL_TIME_LIMIT:g}; 0: no limit)")
    p.add_argument("--tool-max-steps", type=count(1, None, "--tool-max-steps"), default=None, metavar="N",
                   help="instructions a tool call may run; past it the call is stopped and the tool response says "
                        f"so (default: each tool's own, calc {TOOL_MAX_STEPS:,}: about 100 s of the fast executor on a "
                        f"2-core machine, python {PYTHON.max_steps:,})")
    p.set_defaults(func=cmd_chat)

    programs = sub.add_parser("programs", help="list the program table")
    programs.set_defaults(func=cmd_programs)
    return parser


def main(argv=None) -> int:
    from netlist2tf.cliutil import run

    args = build_parser().parse_args(argv)

    def checked(args):
        from netlist2tf.common import check_build_dir
        from netlist2tf.common import ENV, build_dir
        if args.command != "programs":
            check_build_dir(build_dir(), f"the build folder (${ENV} or the project's build/)")
        return args.func(args)
    return run("cpu", checked, args)


if __name__ == "__main__":
    sys.exit(main())
