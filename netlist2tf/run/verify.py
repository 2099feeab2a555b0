"""Verify a compiled model against the netlist simulator, cycle by cycle.

The same seeded random inputs (a different stream per batch row) drive the simulator and the model
(stock ``transformers`` modules, greedy decoding, the model's own cache); every output and every
register value of every cycle must be equal. The first difference is reported with its cycle, row and
values.
"""

import dataclasses
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from netlist2tf.run.host import run_model, single_thread
from netlist2tf.netlist import Port
from netlist2tf.compile import MA, MD, OUT
from netlist2tf.sim import RandomStimulus, Simulator


@dataclass
class Divergence:
    cycle: int
    row: int
    what: str        # "output NAME" or "register NAME"
    model: int
    simulator: int

    def __str__(self):
        return (f"cycle {self.cycle}, batch row {self.row}: {self.what} is {self.model:#x} in the model "
                f"but {self.simulator:#x} in the netlist simulator")


def memory_needed(config, protocol, cycles: int, batch: int, teacher_forced: bool, window: int = 1024) -> int:
    """About the bytes a check of ``cycles`` cycles x ``batch`` rows holds at its peak, from the
    model's config and the trace protocol (measured on the counter, 4 layers, float32, peak RSS of
    ``netlist2tf verify CK --cycles 2000|8000 [--teacher-forced]`` under ``/usr/bin/time``: 4.4 KB a
    cycle generated, 29 KB a cycle teacher-forced at 8,000 cycles; the formula's terms are each an
    upper bound of what they stand for):

    * the trace as Python values: ~60 bytes a token, and the simulator's and the model's records of
      every cycle (~1.5 KB a row and cycle) when generating;
    * the full-attention layers' key/value cache, which grows with every position (compiled layers
      are silent, but transformers computes and keeps them);
    * teacher-forced: one window's attention scores against every earlier position (positions x
      window x heads), the largest transient."""
    tokens = cycles * protocol.tokens_per_cycle + 64
    item = 2 if str(getattr(config, "dtype", "") or getattr(config, "torch_dtype", "")).endswith("bfloat16") else 4
    types = list(getattr(config, "layer_types", None) or [])
    full = sum(t == "full_attention" for t in types)
    kv = 2 * full * config.num_key_value_heads * getattr(config, "head_dim", 64) * item
    need = batch * tokens * (60 + kv)
    if teacher_forced:
        need += batch * min(window, tokens) * tokens * config.num_attention_heads * 8 * (1 if full else 0)
    else:
        need += batch * cycles * 1500
    return need


def verify_model(model, protocol, netlist, initial_registers: dict, cycles: int, batch: int = 1,
                 seed: int = 0, prefill: bool = True, initial_memory: dict | None = None, progress=None):
    """Run both; return (the first Divergence or None, the ModelRun). ``progress(cycles)`` is called
    as the model's cycles are done."""
    # The simulator's run, recorded per row: the inputs it got, its outputs, its state after each edge.
    probe = tuple(Port(f"__gate_{i}", "output", protocol.gate_probe(i), False) for i in range(len(protocol.groups)))
    sim = Simulator(dataclasses.replace(netlist, ports=netlist.ports + probe), batch=batch)
    stim = RandomStimulus(seed)
    inputs = [[{} for _ in range(cycles)] for _ in range(batch)]
    outputs = [[{} for _ in range(cycles)] for _ in range(batch)]
    regs = [[{} for _ in range(cycles)] for _ in range(batch)]
    for k in range(cycles):
        vals = stim.values(k, sim)
        out = sim.step(vals)
        state = sim.state()
        for row in range(batch):
            inputs[row][k] = {n: _lane(v, row) for n, v in vals.items()}
            outputs[row][k] = {n: _lane(v, row) for n, v in out.items()}
            regs[row][k] = {n: _lane(v, row) for n, v in state.items() if n.startswith("reg:")}
    run = run_model(model, protocol, initial_registers, inputs, cycles, prefill=prefill,
                    initial_memory=initial_memory,
                    until=None if progress is None else lambda cycle, frames: progress(1) and False)
    for k in range(cycles):
        for row in range(batch):
            gates = protocol.presence([outputs[row][k].pop(f"__gate_{i}") for i in range(len(protocol.groups))])
            present = run.groups[row][k] if run.groups else ()
            for g, gate, emitted in zip(protocol.groups, gates, present):
                if emitted != bool(gate):
                    return Divergence(k, row, f"gated group {g.name} emitted", int(emitted), gate), run
            for n, v in outputs[row][k].items():
                if n in run.outputs[row][k] and run.outputs[row][k][n] != v:
                    return Divergence(k, row, f"output {n}", run.outputs[row][k][n], v), run
            for n, v in regs[row][k].items():
                if n in run.registers[row][k] and run.registers[row][k][n] != v:
                    return Divergence(k, row, f"register {n[4:]}", run.registers[row][k][n], v), run
    return None, run


# -- teacher forcing -------------------------------------------------------------------------------
#
# Greedy decoding produces a trace t exactly when, at every position p before a generated token,
# argmax(model(t[:p + 1])) == t[p + 1] (by induction over the positions: the model then generates
# t[p + 1] itself). So the simulator's whole trace can be checked in long parallel forward calls
# (the chunked DeltaNet path, the model's own cache between windows) instead of one call per
# generated token: the same proof, far faster for long runs.


def expected_tokens(protocol, netlist, initial_registers: dict, cycles: int, batch: int = 1,
                    seed: int = 0, initial_memory=None, stimulus=None):
    """The trace the compiled model must produce, from the netlist simulator with the same seeded
    inputs as ``verify_model`` (or ``stimulus``, a ``sim.Stimulus``): (token rows, generated mask
    per row, per row [(cycle, position of its first generated token)]). Rows are padded at the end
    to one length (a gated protocol's frames differ in length; the padding is never checked). The
    generated chunks' nets (and the gate) are exposed as extra output ports, so memory write tokens
    come from the simulator too. ``initial_memory``: {memory name: {address: word}}, or a list of
    those (one per row; prompts padded to one length)."""
    probes = [(kind, c.index) for kind in (OUT, MA, MD) for c in protocol.chunks_of(kind)]
    extra = tuple(Port(f"__chunk_{kind}_{j}", "output", protocol.chunks_of(kind)[j].bits, False)
                  for kind, j in probes)
    extra += tuple(Port(f"__gate_{i}", "output", protocol.gate_probe(i), False) for i in range(len(protocol.groups)))
    sim = Simulator(dataclasses.replace(netlist, ports=netlist.ports + extra), batch=batch)
    mems = initial_memory if isinstance(initial_memory, list) else [initial_memory] * batch
    for row, mem in enumerate(mems):
        for name, words in (mem or {}).items():
            sim.load_memory(name, words, instance=row if batch > 1 else None)
    sim.set_state({k: v for k, v in initial_registers.items() if k in sim.state_names})
    stim = stimulus or RandomStimulus(seed)
    rows = protocol.initial_prompts(initial_registers, mems)
    generated = [[False] * len(rows[0]) for _ in range(batch)]
    frames = [[] for _ in range(batch)]
    for k in range(cycles):
        vals = stim.values(k, sim)
        out = sim.step(vals)
        state = sim.state()
        for row in range(batch):
            toks = protocol.input_tokens(k, {n: _lane(v, row) for n, v in vals.items()})
            n_in = len(toks)
            toks += protocol.generated_tokens(
                k, {(kind, j): _lane(out[f"__chunk_{kind}_{j}"], row) for kind, j in probes},
                {n: _lane(v, row) for n, v in state.items() if n.startswith("reg:")},
                gates=[bool(_lane(out[f"__gate_{i}"], row)) for i in range(len(protocol.groups))])
            frames[row].append((k, len(rows[row]) + n_in))
            generated[row] += [False] * n_in + [True] * (len(toks) - n_in)
            rows[row] += toks
    longest = max(len(r) for r in rows)
    for row in range(batch):
        pad = longest - len(rows[row])
        rows[row] += [rows[row][-1]] * pad
        generated[row] += [False] * pad
    return rows, generated, frames


def _lane(v, row: int) -> int:
    """Batch row ``row`` of a simulator value (an int, or one value per row / one for all)."""
    if isinstance(v, np.ndarray):              # the simulator's usual value: no copy
        arr = v.reshape(-1)
    elif isinstance(v, (int, np.integer)):
        return int(v)
    else:
        arr = np.asarray(v, dtype=object).reshape(-1)
    return int(arr[row] if len(arr) > 1 else arr[0])


def verify_teacher_forced(model, protocol, netlist, initial_registers: dict, cycles: int,
                          batch: int = 1, seed: int = 0, initial_memory=None,
                          window: int = 1024, stimulus=None, threads: int = 1,
                          resume=None, save_every: float = 300.0, log=None, expected=None):
    """Check every generated token of the simulator's trace against the model's greedy choice, in
    forward calls of ``window`` positions on ``threads`` torch threads. Returns (None, tokens checked)
    or (the first Divergence, its position in the trace).

    ``resume``: a file where the check saves its progress (the position reached and the model's cache,
    every ``save_every`` seconds) and from which a later call with the same model, weights, dtype,
    device, trace and window continues: the restored cache tensors are the ones the forward returned,
    so the continued forward computes exactly what one uninterrupted run would. A file made by a
    different model or trace is ignored (and replaced); the file is deleted when the check ends.
    ``expected``: ``expected_tokens``'s result for these arguments, when the caller already has it."""
    rows, generated, frames = expected or expected_tokens(protocol, netlist, initial_registers, cycles,
                                                          batch, seed, initial_memory, stimulus)
    device = next(model.parameters()).device
    ids = torch.tensor(rows, dtype=torch.long, device=device)
    n = ids.shape[1]
    # Keep the logits of one window (batch x window x vocab floats) to a few hundred MB.
    window = max(1, min(window, (1 << 26) // max(1, batch * protocol.vocab_size)))
    log = log or (lambda msg: print(msg, file=sys.stderr))
    cache, first = None, 0
    if resume is not None:
        from netlist2tf.common import check_output_file
        check_output_file(resume, "--resume", "progress", stream=False)    # never a file that is not ours
        resume = Path(os.path.realpath(resume))     # a symlink's target holds the progress
        key = None                   # hashing ~1 GB of weights takes seconds: only when it is needed
        if resume.is_file():
            key = _fingerprint(model, rows, generated, window)
            cache, first = _load_progress(resume, key, model, log)
    last_save = time.monotonic()
    from netlist2tf.common import Progress
    bar = Progress(n - 1 - first, "position", "teacher-forced check") if n >= 8 * window else None
    with single_thread(threads), torch.no_grad():
        for start in range(first, n - 1, window):
            if bar is not None and start > first:
                bar.update(window)
            if resume is not None and start > first and time.monotonic() - last_save >= save_every:
                key = key or _fingerprint(model, rows, generated, window)
                _save_progress(resume, key, start, n, cache)
                last_save = time.monotonic()
            stop = min(n - 1, start + window)
            out = model(input_ids=ids[:, start:stop], cache=cache, use_cache=True)
            cache = out.cache
            pred = torch.argmax(out.logits.float(), dim=-1)
            want = ids[:, start + 1:stop + 1]
            mask = torch.tensor([g[start + 1:stop + 1] for g in generated], device=device)
            bad = (pred != want) & mask
            if bool(bad.any()):
                hits = torch.nonzero(bad).tolist()
                row, col = min(hits, key=lambda rc: (rc[1], rc[0]))     # earliest position
                pos = start + 1 + col
                if resume is not None:
                    resume.unlink(missing_ok=True)
                return _token_divergence(protocol, frames[row], pos, row, int(pred[row, col]),
                                         rows[row][pos]), pos
    if bar is not None:
        bar.close()
    if resume is not None:
        resume.unlink(missing_ok=True)
    return None, sum(sum(g) for g in generated)


_PROGRESS_VERSION = 1


def _fingerprint(model, rows, generated, window: int) -> str:
    """What a saved check depends on: the model's config, every weight's bytes and dtype, the device
    type, the trace, which of its positions are checked, the window (the forward's chunking) and a
    merged model's text prefix."""
    h = hashlib.sha256()
    h.update(json.dumps(model.config.to_dict(), sort_keys=True, default=str).encode())
    for name, t in model.state_dict().items():
        t = t.detach().to("cpu").contiguous().reshape(-1)
        h.update(f"{name}:{t.dtype}:{t.numel()}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    h.update(str(next(model.parameters()).device.type).encode())
    h.update(np.asarray(rows, dtype=np.int64).tobytes())
    h.update(np.asarray(generated, dtype=np.bool_).tobytes())
    h.update(str(window).encode())
    if getattr(model, "prefix", None):                   # a merged model's text before the trace
        h.update(json.dumps(list(model.prefix)).encode())
    if getattr(model, "interludes", None):               # and between its tokens
        h.update(json.dumps(sorted(model.interludes.items())).encode())
    return h.hexdigest()


def _save_progress(path: Path, key: str, start: int, n: int, cache) -> None:
    """Atomically write the check's progress: positions before ``start`` were checked; ``cache`` is
    the model's cache after them (every layer's state, as plain tensors and values). The file is
    ``outputs.PROGRESS_MAGIC`` then torch.save's bytes: a file without that line is not ours."""
    import io

    from netlist2tf.common import PROGRESS_MAGIC, write_file

    state = {"version": _PROGRESS_VERSION, "key": key, "start": start, "positions": n,
             "layers": [(type(layer).__name__, vars(layer)) for layer in cache.layers]}
    buf = io.BytesIO()
    torch.save(state, buf)
    write_file(path, PROGRESS_MAGIC + buf.getvalue(), "--resume")


def _load_progress(path: Path, key: str, model, log):
    """(cache, first window start) saved by an earlier call with the same fingerprint, else (None, 0)."""
    from transformers.cache_utils import DynamicCache

    import io

    from netlist2tf.common import PROGRESS_MAGIC

    try:
        data = path.read_bytes()
        if not data.startswith(PROGRESS_MAGIC):
            raise ValueError("not a progress file")     # refused before any work (cli); a library caller's
        state = torch.load(io.BytesIO(data[len(PROGRESS_MAGIC):]),
                           map_location=next(model.parameters()).device, weights_only=True)
    except Exception as exc:                    # a torn file of ours: start over, never trust it
        log(f"ignoring the saved teacher-forced progress {path}: unreadable ({exc.__class__.__name__})")
        return None, 0
    if not isinstance(state, dict) or state.get("version") != _PROGRESS_VERSION or state.get("key") != key:
        log(f"ignoring the saved teacher-forced progress {path}: it was made by another model, dtype, "
            f"device or trace")
        return None, 0
    cache = DynamicCache(config=model.config)
    if [kind for kind, _ in state["layers"]] != [type(layer).__name__ for layer in cache.layers]:
        log(f"ignoring the saved teacher-forced progress {path}: its cache layers differ from this "
            f"transformers version's")
        return None, 0
    for layer, (_, values) in zip(cache.layers, state["layers"]):
        vars(layer).update(values)
    log(f"resuming the teacher-forced check at position {state['start']:,} of {state['positions']:,} "
        f"(the positions before it were checked by an earlier run; {path})")
    return cache, state["start"]


def _token_divergence(protocol, frames, pos: int, row: int, got: int, want: int) -> Divergence:
    """Name the field and bits where the model's token differs from the simulator's."""
    cycle = max((k for k, first in frames if first <= pos), default=-1)
    fw = protocol.field(want)
    what = f"token {pos} ({fw.kind} chunk {fw.chunk})"
    fg = protocol.field(got) if 0 <= got < protocol.vocab_size else None
    if fg is not None and (fg.kind, fg.chunk, fg.parity) == (fw.kind, fw.chunk, fw.parity):
        chunk = protocol.chunks_of(fw.kind)[fw.chunk]
        diff = [name for i, name in enumerate(chunk.names) if ((fg.value ^ fw.value) >> i) & 1]
        what += f", bits {', '.join(diff)}"
        return Divergence(cycle, row, what, fg.value, fw.value)
    got_s = f"{fg.kind} chunk {fg.chunk} parity {fg.parity}" if fg else f"id {got}"
    return Divergence(cycle, row, what + f", the model emitted a {got_s} token instead", got, want)

