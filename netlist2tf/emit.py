"""Emit a compiled model as a checkpoint folder that stock ``transformers`` loads, and load it back.

The folder holds ``config.json`` + ``model.safetensors`` + ``generation_config.json`` (written by
``save_pretrained``: ``AutoModelForCausalLM.from_pretrained`` needs no custom code), the trace
vocabulary ``trace_protocol.json``, the netlist it was compiled from (``netlist.json``, so ``verify``
can simulate it) and ``compile.json`` (settings, initial register values, the output ports kept when
the model was compiled with only some of them, and the figures). Writing is
deterministic: the same design and settings give byte-identical files.
"""

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch

from .assemble import Compiled, resolve_gated
from .errors import Netlist2TFError
from .graph import keep_outputs
from .ir import parse_netlist
from .protocol import TraceProtocol

FORMAT = 2


def emit_checkpoint(compiled: Compiled, netlist_json: str, folder, dtype=torch.float32, settings=None):
    """Write ``compiled`` to ``folder`` (replaced atomically: a failed write leaves the old one)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        model = compiled.model.to(dtype)
        model.generation_config.do_sample = False
        model.save_pretrained(tmp)
        (tmp / "trace_protocol.json").write_text(compiled.protocol.to_json())
        (tmp / "netlist.json").write_text(netlist_json)
        meta = {"format": FORMAT, "chunk_bits": compiled.protocol.chunk_bits,
                "initial_registers": compiled.initial_registers,
                "initial_memory": {name: {str(a): w for a, w in words.items()}
                                   for name, words in compiled.initial_memory.items()},
                "dtype": str(dtype).split(".")[-1],
                "outputs": None if compiled.outputs is None else list(compiled.outputs),
                "gated": None if compiled.gated is None else [compiled.gated[0], list(compiled.gated[1])],
                "settings": settings or {}, "stats": compiled.stats}
        (tmp / "compile.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def load_checkpoint(folder, dtype=None):
    """(model, protocol, netlist, initial registers, meta) of an emitted folder; the initial memory
    words are ``meta["initial_memory"]`` ({address: word}, keys as ints).

    Raises Netlist2TFError naming the missing or malformed file."""
    from transformers import AutoModelForCausalLM

    folder = Path(folder)
    for name in ("config.json", "model.safetensors", "compile.json", "netlist.json"):
        if not (folder / name).is_file():
            raise Netlist2TFError(f"{folder} is not a netlist2tf checkpoint: {name} is missing; "
                                  f"create one with `netlist2tf compile`")
    try:
        meta = json.loads((folder / "compile.json").read_text())
    except json.JSONDecodeError as exc:
        raise Netlist2TFError(f"{folder}/compile.json is not JSON ({exc.msg})")
    if meta.get("format") != FORMAT:
        raise Netlist2TFError(f"{folder} was written by another netlist2tf version (format "
                              f"{meta.get('format')!r}, this one reads {FORMAT}); recompile it")
    netlist = parse_netlist((folder / "netlist.json").read_text(), str(folder / "netlist.json"))
    if meta.get("outputs") is not None:           # compiled with only these outputs
        netlist = keep_outputs(netlist, meta["outputs"])
    clocks = {r.clock for r in netlist.registers}
    gated = meta.get("gated")
    protocol = TraceProtocol.from_netlist(netlist, clocks, meta["chunk_bits"],
                                          None if gated is None else resolve_gated(netlist, *gated))
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype or getattr(torch, meta["dtype"]))
    except Exception as exc:        # transformers raises many kinds; name the folder and the cause
        raise Netlist2TFError(f"transformers could not load {folder}: {type(exc).__name__}: {exc}")
    model.eval()
    if model.config.vocab_size != protocol.vocab_size:
        raise Netlist2TFError(f"{folder}: the model's vocabulary ({model.config.vocab_size}) does not "
                              f"match its trace protocol ({protocol.vocab_size}); recompile it")
    meta["initial_memory"] = {name: {int(a): w for a, w in words.items()}
                              for name, words in meta.get("initial_memory", {}).items()}
    return model, protocol, netlist, meta["initial_registers"], meta
