"""The one way to open a checkpoint folder for running: standalone or merged, by the fast executor or
stock transformers, with the fallback from fast to stock said in one line.

Every caller that runs a checkpoint (``netlist2tf verify``, the CPU's model engine, ``cpu chat``, the
benchmarks) opens it here, so what a folder is and which executor runs it is decided in one place."""

import os
import sys
from pathlib import Path
from typing import NamedTuple

from netlist2tf.checkpoint import load_checkpoint
from netlist2tf.common import Netlist2TFError
from netlist2tf.merge import is_merged, load_merged
from netlist2tf.run.executor import (IMAGE_CACHE_BYTES, IMAGE_CACHE_FILES, FastTrace, FastUnsupported, Image, Kernel,
                                     dtype_name, image_path, library)


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

    ``executor``: "stock" (transformers' own forward), "fast" (``netlist2tf.run.fast``: the same
    weights computed sparsely) or "llama.cpp" (the folder exported to GGUF, cached, and run by llama.cpp:
    ``netlist2tf.serve``), or the address of an OpenAI-compatible server that serves the folder
    ("http://HOST:PORT": ``netlist2tf.serve.ServerTrace`` drives it by the token names; Opened.executor
    is then "server"). The fast executor runs trace-only prompts of the checkpoints it can
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
    if executor not in ("stock", "fast", "llama.cpp") and not executor.startswith(("http://", "https://")):
        raise Netlist2TFError(f"executor {executor!r}: use stock, fast, llama.cpp, or a server's address as "
                              f"http://HOST:PORT")
    if executor.startswith(("http://", "https://")):
        return Opened(*load_server_checkpoint(folder, executor, text or bool(prefix or interludes)), "server")
    if executor == "llama.cpp":
        return Opened(*load_llama_checkpoint(folder, dtype, prefix, interludes, log), "llama.cpp")
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


def fast_trace(folder, dtype: str | None = None, cfg_dtype: str = "float32") -> FastTrace:
    """The fast executor on checkpoint ``folder`` in ``dtype`` (its own, ``cfg_dtype``, when None):
    from the cached kernel image when there is one (no torch), else through ``FastModel`` (torch: it
    reads the weights), whose image is then cached for the next run. FastUnsupported where the
    executor cannot run the folder."""
    dtype = dtype_name(dtype) or cfg_dtype
    lib = library("step")
    where = image_path(folder, dtype) if lib is not None else None
    if where is not None and where.is_file():
        try:
            image = Image.load(where)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"netlist2tf: the fast executor's cached image {where} is unreadable ({exc}); deriving it again",
                  file=sys.stderr)
        else:
            try:
                os.utime(where)                   # recently used: pruned last
            except OSError:
                pass
            return FastTrace(folder, dtype, image.spec["V"], Kernel(image, lib, str(folder)))
    import torch

    from netlist2tf.run.fast import FastModel

    fast = FastModel(folder, getattr(torch, dtype))
    if fast.kernel is not None and where is not None:
        size = sum(a.nbytes for a in fast.kernel.image.arrays.values())
        if size <= IMAGE_CACHE_BYTES:
            from netlist2tf.common import prune_cache

            try:
                fast.kernel.image.save(where)
            except (OSError, Netlist2TFError):
                pass                              # a read-only or full build folder: derived again next time
            prune_cache(where.parent, ".img", IMAGE_CACHE_FILES, IMAGE_CACHE_BYTES)
    return FastTrace(folder, dtype, fast.vocab_size, fast.kernel, fast)


def load_fast_checkpoint(folder, dtype=None):
    """``emit.load_checkpoint``'s tuple with the model run by the fast executor: (FastTrace, or a
    ``netlist2tf.merge.MergedTrace`` around one for a merged folder, protocol, netlist, initial registers,
    meta). The same checks of the folder (its files sealed, the protocol read from
    trace_protocol.json); FastUnsupported where the executor cannot run it."""
    if is_merged(folder):
        return load_merged(folder, dtype, model=lambda f, d: fast_trace(f, d))[:5]
    from netlist2tf.checkpoint import read_checkpoint

    protocol, netlist, meta = read_checkpoint(folder)
    trace = fast_trace(folder, dtype, meta.get("dtype", "float32"))
    if trace.vocab_size != protocol.vocab_size:
        raise Netlist2TFError(f"{folder}: the model's vocabulary ({trace.vocab_size}) does not match its "
                              f"trace protocol ({protocol.vocab_size}); recompile it")
    return trace, protocol, netlist, meta["initial_registers"], meta


def load_llama_checkpoint(folder, dtype=None, prefix=(), interludes=None, log=None):
    """``emit.load_checkpoint``'s tuple with the model run by llama.cpp (``netlist2tf.serve.LlamaTrace``
    on the folder's GGUF export, made once and cached in the build folder). llama.cpp runs the float32
    file: another dtype is refused (llama.cpp rounds activations to the weights' type)."""
    from netlist2tf.checkpoint import read_checkpoint
    from netlist2tf.serve import LlamaTrace, cached_gguf, llama_available

    if dtype is not None and dtype_name(dtype) != "float32":
        raise Netlist2TFError(f"the llama.cpp engine runs the float32 GGUF export only (not {dtype_name(dtype)}): "
                              f"llama.cpp rounds activations to the weights' type before every product")
    why = llama_available()
    if why:
        raise Netlist2TFError(why)
    path = cached_gguf(folder, log)
    if is_merged(folder):
        return load_merged(folder, None, prefix, interludes=interludes,
                           model=lambda f, d: LlamaTrace(path, config_folder=f))[:5]
    protocol, netlist, meta = read_checkpoint(folder)
    return LlamaTrace(path, config_folder=folder), protocol, netlist, meta["initial_registers"], meta


def load_server_checkpoint(folder, url: str, text: bool = False):
    """``emit.load_checkpoint``'s tuple with the model an OpenAI-compatible server at ``url`` that serves
    the folder (``netlist2tf.serve.ServerTrace``): the trace side (protocol, netlist, registers) is read
    from the folder, the tokens come from the server. Trace-only prompts (base-vocabulary text has no
    names a server reads back), float32 (what the server runs is its own)."""
    from netlist2tf.checkpoint import read_checkpoint
    from netlist2tf.serve import ServerTrace, token_names

    if text:
        raise Netlist2TFError("base-vocabulary text in the trace cannot go through a server's text protocol: "
                              "drop --text-prefix/--text-between with --server")
    names = token_names(folder)
    if is_merged(folder):
        return load_merged(folder, None, model=lambda f, d: ServerTrace(url, names, config_folder=f))[:5]
    protocol, netlist, meta = read_checkpoint(folder)
    return ServerTrace(url, names, config_folder=folder), protocol, netlist, meta["initial_registers"], meta
