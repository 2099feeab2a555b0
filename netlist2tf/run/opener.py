"""The one way to open a checkpoint folder for running: standalone or merged, by the fast executor or
stock transformers, with the fallback from fast to stock said in one line.

Every caller that runs a checkpoint (``netlist2tf verify``, the CPU's model engine, ``cpu chat``, the
benchmarks) opens it here, so what a folder is and which executor runs it is decided in one place."""

import sys
from pathlib import Path
from typing import NamedTuple

from netlist2tf.checkpoint import load_checkpoint
from netlist2tf.common import Netlist2TFError
from netlist2tf.merge import is_merged, load_merged
from netlist2tf.run.fast import FastUnsupported, load_fast_checkpoint


class Opened(NamedTuple):
    """A checkpoint ready to run: the model (a trace model the host drives by trace token numbers), its
    trace protocol, its netlist, its initial registers, its compile.json, and the executor that runs it
    ("fast" or "stock": stock where the fast executor cannot)."""
    model: object
    protocol: object
    netlist: object
    initial_registers: dict
    meta: dict
    executor: str


def open_checkpoint(folder, dtype=None, executor: str = "stock", prefix=(), interludes=None, text: bool = False,
                    log=None) -> Opened:
    """Open the checkpoint ``folder`` (written by ``netlist2tf compile`` or ``netlist2tf merge``).

    ``executor``: "stock" (transformers' own forward) or "fast" (``netlist2tf.run.fast``: the same
    weights computed sparsely). The fast executor runs trace-only prompts of the checkpoints it can
    run; otherwise (base-vocabulary text in the prompt, weights it cannot run exactly) the checkpoint
    runs stock, and ``log`` gets one line saying why. ``prefix`` (base-vocabulary tokens before the
    trace) and ``interludes`` ({trace position: tokens}) need a merged checkpoint, as does ``text``
    (True: the caller puts base-vocabulary text in the trace itself, as ``netlist2tf verify
    --text-between`` does once it knows the frames). ``dtype``: the
    checkpoint's own when None. Raises Netlist2TFError naming a missing, malformed or changed file."""
    folder = Path(folder)
    log = log or (lambda msg: print(msg, file=sys.stderr))
    merged = is_merged(folder)
    text = bool(prefix or interludes or text)
    if text and not merged:
        raise Netlist2TFError(f"base-vocabulary text in the trace needs a merged checkpoint: {folder} is not one "
                              f"(make one with `netlist2tf merge`)")
    if executor == "fast":
        try:
            if text:
                raise FastUnsupported("text runs the base layers, which the fast executor runs only where they "
                                      "are silent (trace-only prompts)")
            return Opened(*load_fast_checkpoint(folder, dtype), "fast")
        except FastUnsupported as exc:
            log(f"the fast executor cannot run {folder} ({exc}); running it with stock transformers")
    loaded = (load_merged(folder, dtype, prefix, interludes=interludes)[:5] if merged
              else load_checkpoint(folder, dtype))
    return Opened(*loaded, "stock")
