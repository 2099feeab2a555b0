"""The host side of a compiled model: build the prompt, run frames with stock forward calls and the
model's own cache, decode the generated trace into per-cycle outputs and register values.

No host code writes model state: the prompt (initial register frame + each cycle's input tokens) is
all the model is given; every other token it generates itself (greedy argmax).
"""

import contextlib
from dataclasses import dataclass

from netlist2tf.common import Netlist2TFError
from netlist2tf.compile import Field, TraceProtocol


@dataclass
class ModelRun:
    """Per-cycle results of each batch row: ``outputs[row][cycle]`` / ``registers[row][cycle]`` are
    dicts (registers = values for the next cycle), ``writes[row][cycle]`` the frame's memory writes
    ({memory: (address or None, word)}); ``tokens[row]`` the whole sequence."""
    outputs: list
    registers: list
    tokens: list
    writes: list
    frame_tokens: list = None     # [row][cycle]: generated tokens of that frame (gated frames vary)
    prompt_tokens: int = 0        # the prompt's length (every row's, padded)
    groups: list = None           # [row][cycle]: which gated groups the frame holds (one bool each)


class RunStopped(Exception):
    """``run_model``'s ``stop()`` returned True while the prompt was being fed: the run ended before its
    first cycle."""


PROMPT_PIECE = 256      # with ``stop``: the prompt is fed this many tokens per forward call, stop() between


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame of one batch row (what ``until`` sees)."""
    outputs: dict
    registers: dict
    writes: dict
    groups: tuple = ()            # which gated groups the frame holds (protocol.groups order)


def run_model(model, protocol: TraceProtocol, initial_registers: dict, inputs: list, cycles: int,
              prefill: bool = True, initial_memory=None, until=None, stop=None) -> ModelRun:
    """Run up to ``cycles`` cycles on a batch: ``inputs[row][cycle]`` is that row's {input port: value}.

    ``initial_memory`` ({memory name: {address: word}}, or a list of those, one per row) is written
    by prompt tokens. ``prefill=True`` feeds each stretch of known tokens (the prompt, each cycle's
    inputs) in one call (the chunked DeltaNet path); ``False`` feeds every token alone (the recurrent
    path). ``until(cycle, frames)`` (frames: that cycle's ``Frame`` per row) returning True
    stops after that cycle. ``stop()``: asked between forward calls of the prompt, which is then fed
    ``PROMPT_PIECE`` tokens at a time (a long prompt takes minutes on stock transformers: the
    prompt of the CPU with 16 KiB of RAM, 15,710 tokens, 230 s on one core); True raises RunStopped.
    Raises TraceError when the generated tokens break the protocol.
    """
    B = len(inputs)
    if B == 0:
        raise Netlist2TFError("run_model needs at least one batch row of inputs")
    mems = initial_memory if isinstance(initial_memory, list) else [initial_memory] * B
    if len(mems) != B:
        raise Netlist2TFError(f"{len(mems)} initial memories for {B} batch rows")
    seqs = protocol.initial_prompts(initial_registers, mems)
    pending = [list(s) for s in seqs]          # tokens not yet fed to the model
    cache = None
    n_gen = len(protocol.generated)
    outputs = [[] for _ in range(B)]
    registers = [[] for _ in range(B)]

    def feed(rows: list[list[int]]):
        nonlocal cache
        import torch

        ids = torch.tensor(rows, dtype=torch.long, device=device)
        logits = None
        with torch.no_grad():
            piece = max(1, PROMPT_PIECE if stop is not None else ids.shape[1]) if prefill else 1
            steps = [ids[:, k:k + piece] for k in range(0, ids.shape[1], piece)]
            for chunk in steps:
                if stop is not None and len(steps) > 1 and stop():
                    raise RunStopped()
                out = model(input_ids=chunk, cache=cache, use_cache=True)
                cache = out.cache
                logits = out.logits[:, -1]
        return logits

    prompt_tokens = len(seqs[0])
    if getattr(model, "generates", False):      # the fast executor's C kernel: no torch
        run = _run_generating(model, protocol, inputs, cycles, B, seqs, until)
        run.prompt_tokens = prompt_tokens
        return run
    device = next(model.parameters()).device
    with single_thread():
        if protocol.groups:
            run = _run_gated(protocol, inputs, cycles, B, seqs, pending, feed, outputs, registers, until)
        else:
            run = _run(protocol, inputs, cycles, B, seqs, pending, feed, n_gen, outputs, registers, until)
    run.prompt_tokens = prompt_tokens
    return run


@contextlib.contextmanager
def single_thread(n: int = 1):
    """Run torch on ``n`` threads (default one) meanwhile. The compiled model's tensors are tiny when
    generating: one thread avoids thread-pool hand-offs that cost more than the work (measured: a
    48-channel depthwise conv1d took 49 ms on 2 busy cores, 0.06 ms on 1). Long teacher-forced
    windows are large matrix products and do gain from more (2 threads: 1.8x on 1,024 positions)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _run_generating(model, protocol, inputs, cycles, B, seqs, until) -> ModelRun:
    """The run loop for a model that generates whole frames itself (``model.generate``: the fast
    executor's C kernel): per cycle and row, one call feeds the pending tokens (the prompt, that
    cycle's input tokens) and generates the frame until its last token (gated protocols: the frame's
    length depends on the gate) or the longest frame. The same frames, tokens and errors as the
    token-by-token loops (``_run``, ``_run_gated``): rows are independent."""
    gen = protocol.generated
    n_gen = len(gen)
    end = None
    if protocol.groups:
        import numpy as np

        end = np.zeros(protocol.vocab_size, dtype=np.uint8)
        per = 1 << protocol.chunk_bits
        for parity in (0, 1):
            first = protocol.token(Field(gen[-1][0], gen[-1][1], parity, 0))
            end[first:first + per] = 1
    cache = model.new_cache(B)
    pending = [list(s) for s in seqs]
    fed = [bool(p) for p in pending]
    outputs, registers, writes, counts, groups = ([[] for _ in range(B)] for _ in range(5))
    for cycle in range(cycles):
        frames = []
        for row in range(B):
            host = protocol.input_tokens(cycle, inputs[row][cycle] if cycle < len(inputs[row]) else {})
            fed[row] = fed[row] or bool(host)
            if not fed[row]:
                raise Netlist2TFError("nothing to run: the design has no inputs and an empty prompt")
            toks = model.generate(cache, row, pending[row] + host, end, n_gen)
            pending[row] = []
            seqs[row] += host + toks
            outs, regs = protocol.decode_frame(cycle, toks)          # raises TraceError naming a bad frame
            frames.append(Frame(outs, regs, protocol.decode_writes(toks), protocol.present_groups(toks)))
            outputs[row].append(outs)
            registers[row].append(regs)
            writes[row].append(frames[-1].writes)
            groups[row].append(frames[-1].groups)
            counts[row].append(len(toks))
        if until is not None and until(cycle, frames):
            break
    return ModelRun(outputs, registers, seqs, writes, counts, groups=groups)


def _run(protocol, inputs, cycles, B, seqs, pending, feed, n_gen, outputs, registers, until) -> ModelRun:
    import sys

    from tqdm import tqdm

    writes = [[] for _ in range(B)]
    logits = None       # the next position's logits: after the known tokens, or the frame's last token
    for cycle in tqdm(range(cycles), desc="cycles", unit="cycle", file=sys.stderr,
                      disable=not sys.stderr.isatty() or cycles < 50):
        for row in range(B):
            toks = protocol.input_tokens(cycle, inputs[row][cycle] if cycle < len(inputs[row]) else {})
            pending[row] += toks
            seqs[row] += toks
        if pending[0]:      # a design without inputs has none after the prompt: the last logits stand
            logits = feed(pending)
        pending = [[] for _ in range(B)]
        generated = [[] for _ in range(B)]
        for _ in range(n_gen):
            if logits is None:
                raise Netlist2TFError("nothing to run: the design has no inputs and an empty prompt")
            nxt = logits.float().argmax(dim=-1).tolist()
            for row in range(B):
                generated[row].append(nxt[row])
                seqs[row].append(nxt[row])
            logits = feed([[t] for t in nxt])
        frames = []
        for row in range(B):
            outs, regs = protocol.decode_frame(cycle, generated[row])
            frames.append(Frame(outs, regs, protocol.decode_writes(generated[row])))
            outputs[row].append(outs)
            registers[row].append(regs)
            writes[row].append(frames[-1].writes)
        if until is not None and until(cycle, frames):
            break
    return ModelRun(outputs, registers, seqs, writes, [[n_gen] * len(o) for o in outputs])


def _run_gated(protocol, inputs, cycles, B, seqs, pending, feed, outputs, registers, until) -> ModelRun:
    """The run loop for a protocol with a gated register group: a row's frame is longer when its
    gate is 1, so rows drift apart. Every step feeds each row one token (its next input token at a
    frame start, else its own greedy choice); frames are reported to ``until`` in cycle order once
    every row has finished that cycle."""
    end = protocol.generated[-1]
    longest = len(protocol.generated)
    writes = [[] for _ in range(B)]
    frames = [[] for _ in range(B)]
    counts = [[] for _ in range(B)]
    cycle = [0] * B
    cur = [[] for _ in range(B)]

    def host_tokens(row):
        k = cycle[row]
        return protocol.input_tokens(k, inputs[row][k] if k < len(inputs[row]) else {})

    queue = [host_tokens(row) for row in range(B)]
    logits = feed(pending) if pending[0] else None
    reported = 0
    while reported < cycles:
        if logits is None and not all(queue):
            raise Netlist2TFError("nothing to run: the design has no inputs and an empty prompt")
        greedy = logits.float().argmax(dim=-1).tolist() if logits is not None else [None] * B
        step = []
        for row in range(B):
            if queue[row]:
                step.append(queue[row].pop(0))
            else:
                step.append(greedy[row])
                cur[row].append(greedy[row])
            seqs[row].append(step[-1])
        logits = feed([[t] for t in step])
        for row in range(B):
            if not cur[row] or queue[row]:
                continue
            f = protocol.field(cur[row][-1])
            if (f.kind, f.chunk) == end:
                outs, regs = protocol.decode_frame(cycle[row], cur[row])
                frames[row].append(Frame(outs, regs, protocol.decode_writes(cur[row]), protocol.present_groups(cur[row])))
                counts[row].append(len(cur[row]))
                cycle[row] += 1
                cur[row] = []
                queue[row] = host_tokens(row)
            elif len(cur[row]) >= longest:
                protocol.decode_frame(cycle[row], cur[row])          # raises TraceError naming it
        while reported < min(cycle) and reported < cycles:
            stop = until is not None and until(reported, [frames[row][reported] for row in range(B)])
            reported += 1
            if stop:
                cycles = reported
    groups = [[fr.groups for fr in frames[row][:reported]] for row in range(B)]
    for row in range(B):
        for fr in frames[row][:reported]:
            outputs[row].append(fr.outputs)
            registers[row].append(fr.registers)
            writes[row].append(fr.writes)
    return ModelRun(outputs, registers, seqs, writes, [c[:reported] for c in counts], groups=groups)
