"""Run programs on the compiled CPU: hdl/rv32 -> Yosys (macro6 flow) -> netlist2tf -> a Qwen3.5
checkpoint that stock ``transformers`` runs.

``build_checkpoint`` compiles the core into ``LAYERS`` layers and writes the checkpoint under
``build/cpu-model/<hash>/``, keyed by the hash of its inputs (the synthesized netlist, the compile
settings and the compiler's own source), so a rebuild happens only when one of them changes.
``run_model_batch`` loads it (once per process), turns each program image into prompt tokens (the
initial register frame, then one write group per non-zero word of the image: no host code writes
model state), lets the model generate one frame of tokens per clock cycle (greedy, the model's own
cache) until every program halts, and decodes the frames into the machine's ``RunResult``: console
bytes, the halt, and one ``Retire`` record per cycle whose ``rvfi_valid`` token bit is set.
"""

import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

from netlist2tf.errors import Netlist2TFError

from .machine import Halt, RunResult
from .netlist_engine import RETIRE_FIELDS, check_image, core_design, halt_from_port

MODEL_RAM_SIZE = 16 * 1024       # 4,096 words: the table but libc (~17 KiB) fits; 64 KiB is 4x the heads
LAYERS = 11
KEY_HEAD_DIM = 256               # DeltaNet slots per key head: a bank of 256 RAM words
FLOW = "macro6"
CHUNK_BITS = 8
M_CYCLES = 34                    # a multiplication or division occupies the core this many cycles

_LOADED: dict = {}


# netlist2tf modules the checkpoint and its report are made from (not the command line, the run loop
# or the verifier): a change to one of them rebuilds the cached checkpoint
_COMPILER_SOURCES = ("assemble.py", "emit.py", "frontend.py", "graph.py", "ir.py", "logic.py", "lower.py",
                     "macros.py", "nodes.py", "protocol.py", "report.py", "schedule.py", "target.py",
                     "validate.py", "yosys.py", "gadgets")


def compiler_digest() -> str:
    """A hash of the compiler's source: a changed compiler rebuilds the cached checkpoint."""
    root = Path(__file__).resolve().parent.parent / "netlist2tf"
    h = hashlib.sha256()
    for name in _COMPILER_SOURCES:
        files = sorted((root / name).rglob("*.py")) if (root / name).is_dir() else [root / name]
        for f in files:
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def build_checkpoint(ram_size: int = MODEL_RAM_SIZE, build_dir="build", log=None) -> Path:
    """The compiled CPU's checkpoint folder, built if it is not cached yet."""
    from netlist2tf.assemble import assemble
    from netlist2tf.emit import emit_checkpoint
    from netlist2tf.frontend import synthesize
    from netlist2tf.ir import parse_netlist
    from netlist2tf.report import build_report, write_report

    log = log or (lambda msg: print(msg, file=sys.stderr))
    result = synthesize(core_design(ram_size), flow=FLOW, build_dir=build_dir)
    settings = {"design": core_design(ram_size), "flow": FLOW, "layers": LAYERS,
                "chunk_bits": CHUNK_BITS, "head_dim": KEY_HEAD_DIM}
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode() + b"\0" +
                         result.json_text.encode() + b"\0" + compiler_digest().encode()).hexdigest()[:16]
    folder = Path(build_dir) / "cpu-model" / key
    if (folder / "compile.json").is_file() and (folder / "report" / "report.html").is_file():
        return folder
    for old in folder.parent.glob("*"):          # one checkpoint at a time: they are ~2 GB each
        if old.is_dir() and len(old.name) == 16 and old.name != key:     # not emit's temporary dirs
            shutil.rmtree(old, ignore_errors=True)
    log(f"compiling the CPU into {LAYERS} layers (cached afterwards in {folder}) ...")
    t0 = time.perf_counter()
    netlist = parse_netlist(result.json_text, str(result.json_path))
    compiled = assemble(netlist, layers=LAYERS, chunk_bits=CHUNK_BITS, head_dim=KEY_HEAD_DIM)
    emit_checkpoint(compiled, result.json_text, folder, settings=settings)
    write_report(build_report(netlist, compiled), folder / "report")
    st = compiled.stats
    log(f"compiled in {time.perf_counter() - t0:.0f} s: {st['layers']} layers, hidden {st['hidden_size']}, "
        f"{st['parameters'] / 1e6:.1f} M parameters ({st['nonzero'] / 1e6:.1f} M non-zero), "
        f"{st['generated_tokens_per_cycle']} generated tokens per cycle")
    return folder


def load_model(ram_size: int = MODEL_RAM_SIZE, dtype=None, build_dir="build", log=None):
    """(model, protocol, netlist, initial registers, meta, folder), loaded once per process."""
    from netlist2tf.emit import load_checkpoint

    folder = build_checkpoint(ram_size, build_dir, log)
    key = (str(folder), str(dtype))
    if key not in _LOADED:
        _LOADED.clear()                      # one model in memory at a time (they are large)
        _LOADED[key] = (*load_checkpoint(folder, dtype), folder)
    return _LOADED[key]


def run_model_batch(images: list, ram_size: int = MODEL_RAM_SIZE, max_steps: int = 1_000_000,
                    trace: bool = True, dtype=None, prefill: bool = True, build_dir="build",
                    log=None) -> list:
    """Run programs on the compiled CPU, one batch row each, until every one halts or retires
    ``max_steps`` instructions. Returns one RunResult per image, with three more attributes:
    ``tokens`` (generated for that row), ``prompt_tokens`` and ``checkpoint`` (the folder)."""
    from netlist2tf.host import run_model

    entries = {img.entry for img in images}
    if len(entries) != 1 or entries != {0}:
        raise Netlist2TFError("the compiled CPU starts at address 0: every program's entry point must be 0")
    for img in images:
        check_image(img, ram_size)
    model, protocol, netlist, inits, meta, folder = load_model(ram_size, dtype, build_dir, log)
    B = len(images)
    limit = M_CYCLES * (max_steps + 1) + 2
    state = [{"records": [], "console": bytearray(), "halt": None, "retired": 0, "cycles": 0}
             for _ in range(B)]

    def until(cycle, outputs):
        for row, out in enumerate(outputs):
            s = state[row]
            if s["halt"] is not None:
                continue
            s["cycles"] += 1
            if out["rvfi_valid"]:
                if s["retired"] >= max_steps:
                    s["halt"] = Halt(Halt.STEP_LIMIT, out["rvfi_pc"])
                    continue
                s["retired"] += 1
                if trace:
                    s["records"].append(_retire(out))
            if out["console_valid"]:
                s["console"].append(out["console_data"])
            if out["halt"]:
                s["halt"] = halt_from_port(out.__getitem__)
        return all(s["halt"] is not None for s in state)

    inputs = [_Repeat({"rst": 0}, limit)] * B      # the same inputs every cycle, without a huge list
    t0 = time.perf_counter()
    run = run_model(model, protocol, inits, inputs, limit, prefill=prefill,
                    initial_memory=[{"ram": img.words()} for img in images], until=until)
    seconds = time.perf_counter() - t0
    results = []
    for row, s in enumerate(state):
        r = RunResult(bytes(s["console"]), s["halt"] or Halt(Halt.STEP_LIMIT, 0), s["records"],
                      s["retired"], s["cycles"], seconds)
        r.tokens = len(protocol.generated) * len(run.outputs[row])
        r.prompt_tokens = len(run.tokens[row]) - (protocol.tokens_per_cycle * len(run.outputs[row]))
        r.checkpoint = folder
        results.append(r)
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


def _retire(out: dict):
    from .machine import Retire
    return Retire(**{f: out["rvfi_" + f] for f in RETIRE_FIELDS})
