"""Emit a compiled model as a checkpoint folder that stock ``transformers`` loads, and load it back.

The folder holds ``config.json`` + ``model.safetensors`` + ``generation_config.json`` (written by
``save_pretrained``: ``AutoModelForCausalLM.from_pretrained`` needs no custom code), the trace
vocabulary ``trace_protocol.json`` (the one definition of the tokens: every host reads it), the netlist
it was compiled from (``netlist.json``, so ``verify`` can simulate it), a tokenizer for the trace
vocabulary (``tokenizer.json``: one readable name per token, netlist2tf.checkpoint.hf), the initial state as
those names (``prompt.txt``: what a stock ``transformers`` user starts generating from) and ``compile.json``
(settings, initial register values, the output ports kept when the model was compiled with only some
of them, the figures, and the sha256 of the weights, config, protocol and netlist, checked on load).
Writing is deterministic: the same design and settings give byte-identical files.
"""

import hashlib
import json
import os
import pickle
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from netlist2tf.common import Netlist2TFError
from netlist2tf.common import write_file, write_folder
from netlist2tf.compile import TraceProtocol

if TYPE_CHECKING:                   # the weights stage loads transformers' modeling code: only for writing
    from netlist2tf.weights import Compiled

FORMAT = 4
# the files whose sha256 compile.json records: a checkpoint whose weights, config, protocol or netlist
# were changed after compiling is refused on load (they must agree; docs/design/compiler.md 7)
SEALED = ("config.json", "model.safetensors", "trace_protocol.json", "netlist.json")


DIGESTS = "digests.json"          # under the build folder: {file id: [stamp..., sha256]}
REMEMBERED = 1 << 24                # files this large have their sha256 remembered


def file_digest(path) -> str:
    """The sha256 of the file ``path``. A large file's digest is remembered (the build folder's
    digests.json) under its device, inode, size, modification and change times: the same file,
    unchanged (a write changes its change time, which no tool can set back), is not read again, so
    opening a 2 GB checkpoint does not hash it every time."""
    st = os.stat(path)
    stamp = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    known = _digests() if st.st_size >= REMEMBERED else {}
    key = f"{st.st_dev}:{st.st_ino}"
    if known.get(key, [None])[:-1] == stamp:
        return known[key][-1]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            h.update(block)
    if st.st_size >= REMEMBERED:
        _remember(key, stamp + [h.hexdigest()])
    return h.hexdigest()


def _digests_file() -> Path:
    from netlist2tf.common import build_dir
    return build_dir() / DIGESTS


def _digests() -> dict:
    try:
        known = json.loads(_digests_file().read_text())
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def _remember(key: str, entry: list) -> None:
    """Add one digest to digests.json (written whole and renamed: a reader never sees half a file;
    a lost race loses an entry, which only costs a hash later). Nothing is remembered where the
    build folder cannot be written."""
    known = _digests()
    known[key] = entry
    if len(known) > 256:                # the oldest entries go (dicts keep insertion order)
        known = dict(list(known.items())[-256:])
    target = _digests_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{DIGESTS}.{os.getpid()}")
        tmp.write_text(json.dumps(known))
        os.replace(tmp, target)
    except OSError:
        pass


def seal(folder, names=SEALED) -> dict:
    """{file name: sha256} of ``names`` in ``folder``."""
    return {n: file_digest(Path(folder) / n) for n in names}


def check_seal(folder, record, names=SEALED, what="compile.json") -> None:
    """Raise Netlist2TFError naming every file of ``names`` whose sha256 differs from ``record``."""
    folder = Path(folder)
    if not isinstance(record, dict):
        raise Netlist2TFError(f"{folder}/{what} has no record of its files' hashes; recompile the checkpoint")
    changed = [n for n in names if record.get(n) != file_digest(folder / n)]
    if changed:
        raise Netlist2TFError(f"{folder}: {', '.join(changed)} changed after the checkpoint was written (their "
                              f"sha256 differs from the record in {what}), so the weights, config and trace "
                              f"protocol may disagree; restore the files or write the checkpoint again")


def emit_checkpoint(compiled: "Compiled", netlist_json: str, folder, dtype=None, settings=None,
                    force: bool = False, netlist=None):
    """Write ``compiled`` to ``folder`` in ``dtype`` (float32 when None, or bfloat16: a torch dtype or
    its name; replaced atomically: a failed or interrupted write leaves the old one; a folder that is
    not one of ours is refused unless ``force``: netlist2tf.common.outputs). The files transformers'
    ``save_pretrained`` would write (``model.safetensors``, ``config.json``,
    ``generation_config.json``) are written from ``compiled.state`` directly, byte for byte the same,
    without torch for float32. ``netlist``: ``netlist_json`` parsed, where the caller has it."""
    from netlist2tf.checkpoint.hf import (config_text, generation_config_text, generation_settings,
                                          readable_register_names, token_names, write_tokenizer)
    from netlist2tf.netlist import keep_outputs, parse_netlist

    dtype = str(dtype or "float32").split(".")[-1]
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"a checkpoint is written in float32 or bfloat16, not {dtype}")

    netlist = netlist if netlist is not None else parse_netlist(netlist_json)
    if compiled.outputs is not None:
        netlist = keep_outputs(netlist, list(compiled.outputs))
    signals = {f"reg:{name}": signal for name, signal in readable_register_names(netlist).items()}

    def write(tmp: Path):
        if dtype == "float32":
            from safetensors.numpy import save_file

            save_file(compiled.state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        else:
            import torch
            from safetensors.torch import save_file

            save_file({k: torch.from_numpy(a).to(torch.bfloat16) for k, a in compiled.state.items()},
                      str(tmp / "model.safetensors"), metadata={"format": "pt"})
        # the weights' sha256 (most of the bytes) is taken while the other files are written
        with ThreadPoolExecutor(1) as pool:
            weights_digest = pool.submit(file_digest, tmp / "model.safetensors")
            write_rest(tmp, weights_digest)

    def write_rest(tmp: Path, weights_digest):
        (tmp / "config.json").write_text(config_text(compiled.plan.target, compiled.layout.hidden_size,
                                                     compiled.protocol.vocab_size, dtype))
        (tmp / "generation_config.json").write_text(generation_config_text(generation_settings(compiled.protocol)))
        (tmp / "trace_protocol.json").write_text(compiled.protocol.to_json(signals))
        (tmp / "netlist.json").write_text(netlist_json)
        names = token_names(compiled.protocol, netlist)    # also the initial state as a stock user types it
        write_tokenizer(compiled.protocol, tmp, netlist, names=names)
        held = compiled.plan.settings.held if compiled.plan is not None else ()
        folded = compiled.plan.settings.folded_writes if compiled.plan is not None else ()
        preloaded = (compiled.plan.settings.preloaded_roms or ()) if compiled.plan is not None else ()
        lookups = compiled.plan.settings.lookup_roms if compiled.plan is not None else ()
        lookup_ports = compiled.plan.settings.lookup_ports if compiled.plan is not None else ()
        # The pairs the LM head reads as one-hot flags (at most one is 1 on any position, by the token
        # selection's construction: docs/design/compiler.md): the merge may read them through a binary code.
        emit = compiled.plan.fields.get("emit", ()) if compiled.plan is not None else ()
        readout = {"one_hot": [list(emit)]} if len(emit) > 1 else {}
        prompt = compiled.protocol.initial_tokens(compiled.initial_registers, compiled.initial_memory)
        (tmp / "prompt.txt").write_text(" ".join(names[t] for t in prompt) + "\n")
        meta = {"format": FORMAT, "chunk_bits": compiled.protocol.chunk_bits,
                "initial_registers": compiled.initial_registers,
                "initial_memory": {name: {str(a): w for a, w in words.items()}
                                   for name, words in compiled.initial_memory.items()},
                "dtype": dtype,
                "outputs": None if compiled.outputs is None else list(compiled.outputs),
                "gated": [[g, list(m)] for g, m in compiled.gated], "gated_writes": list(compiled.gated_writes),
                **({"held": [[g, d, list(m)] for g, d, m in held]} if held else {}),
                **({"folded_writes": list(folded)} if folded else {}),
                **({"preloaded_roms": list(preloaded)} if preloaded else {}),
                **({"lookup_roms": list(lookups)} if lookups else {}),
                **({"lookup_ports": list(lookup_ports)} if lookup_ports else {}),
                **({"readout": readout} if readout else {}),
                "settings": settings or {}, "stats": compiled.stats,
                "sha256": {**seal(tmp, [n for n in SEALED if n != "model.safetensors"]),
                           "model.safetensors": weights_digest.result()}}
        (tmp / "compile.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")

    size = sum(a.size for a in compiled.state.values()) * (4 if dtype == "float32" else 2)
    return write_folder(Path(folder), write, "checkpoint", force, size=size)


def read_meta(folder, what="compile.json") -> dict:
    folder = Path(folder)
    try:
        meta = json.loads((folder / what).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Netlist2TFError(f"{folder}/{what} is not JSON ({exc}); write the checkpoint again")
    if not isinstance(meta, dict):
        raise Netlist2TFError(f"{folder}/{what} is not a JSON object; write the checkpoint again")
    return meta


TRACE_SIDE_FORMAT = 1
TRACE_SIDE_FILES = 64               # cached trace sides kept (the most recently used)


def trace_side(folder, meta: dict, sealed=SEALED):
    """(protocol, netlist) of a checkpoint folder: the protocol read from ``trace_protocol.json`` (the
    one source of truth for every host), after checking that the files in ``sealed`` are the ones
    written and that the protocol is the one the netlist and the compile settings give.

    The result is cached under the build folder (``trace-side/``, a pickle) by the sha256 of
    compile.json's content (which records the protocol's and the netlist's sha256, checked here on
    every call) and of this package's sources: parsing a large netlist and deriving its protocol
    again takes most of a second. A cache file that cannot be read is derived again."""
    from netlist2tf.common import build_dir, prune_cache, source_digest

    folder = Path(folder)
    check_seal(folder, meta.get("sha256"), sealed)
    key = hashlib.sha256(json.dumps([TRACE_SIDE_FORMAT, meta, list(sealed)], sort_keys=True).encode()
                         + source_digest().encode()).hexdigest()[:24]
    cached = build_dir() / "trace-side" / f"{key}.pickle"
    try:
        protocol, netlist = pickle.loads(cached.read_bytes())
        if isinstance(protocol, TraceProtocol):
            os.utime(cached)        # recently used: pruned last
            return protocol, netlist
    except Exception:               # missing, cut short, or from another version: derive it again
        pass
    protocol, netlist = _derive_trace_side(folder, meta)
    try:
        write_file(cached, pickle.dumps((protocol, netlist), protocol=pickle.HIGHEST_PROTOCOL), "the trace-side cache")
    except (OSError, Netlist2TFError):
        pass                        # a read-only build folder: derived again next time
    prune_cache(cached.parent, ".pickle", TRACE_SIDE_FILES)
    return protocol, netlist


def _derive_trace_side(folder: Path, meta: dict):
    from netlist2tf.compile import CompileSettings, trace_protocol
    from netlist2tf.netlist import keep_outputs, parse_netlist

    protocol = TraceProtocol.from_json((folder / "trace_protocol.json").read_text(),
                                       str(folder / "trace_protocol.json"))
    netlist = parse_netlist((folder / "netlist.json").read_text(), str(folder / "netlist.json"),
                            schema=False)     # sealed above: the text checked when it was written
    try:
        if meta.get("outputs") is not None:           # compiled with only these outputs
            netlist = keep_outputs(netlist, meta["outputs"])
        derived = trace_protocol(netlist, CompileSettings(chunk_bits=meta["chunk_bits"], gated=meta["gated"],
                                                          gated_writes=meta["gated_writes"],
                                                          held=meta.get("held", ()),
                                                          folded_writes=meta.get("folded_writes", ()),
                                                          preloaded_roms=meta.get("preloaded_roms", ()),
                                                          lookup_roms=meta.get("lookup_roms", ()),
                                                          lookup_ports=meta.get("lookup_ports", ())))
    except (KeyError, TypeError, ValueError) as exc:
        raise Netlist2TFError(f"{folder}/compile.json lacks or garbles {exc}; write the checkpoint again")
    if derived != protocol:
        raise Netlist2TFError(f"{folder}: trace_protocol.json is not the protocol of netlist.json with the "
                              f"settings in compile.json; write the checkpoint again")
    return protocol, netlist


def load_hf_model(folder, dtype):
    """``AutoModelForCausalLM.from_pretrained(folder)`` quietly (no loading bars, no notes about
    optional kernels), as a Netlist2TFError naming the folder when transformers cannot load it."""
    from transformers import AutoModelForCausalLM

    from netlist2tf.common import quiet_transformers

    try:
        with quiet_transformers():
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    except Exception as exc:        # transformers raises many kinds; name the folder and the cause
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise Netlist2TFError(f"transformers could not load {folder}: {type(exc).__name__}: {first}")
    return model.eval()


def read_checkpoint(folder):
    """(protocol, netlist, meta) of an emitted folder, every check of ``load_checkpoint`` made but
    the model not loaded (the fast executor loads the weights its own way); the initial memory words
    are ``meta["initial_memory"]`` ({address: word}, keys as ints)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise Netlist2TFError(f"{folder}: no such checkpoint folder; create one with `netlist2tf compile`")
    for name in ("config.json", "model.safetensors", "compile.json", "netlist.json", "trace_protocol.json"):
        if not (folder / name).is_file():
            raise Netlist2TFError(f"{folder} is not a netlist2tf checkpoint: {name} is missing; "
                                  f"create one with `netlist2tf compile`")
    meta = read_meta(folder)
    if meta.get("format") != FORMAT:
        raise Netlist2TFError(f"{folder} was written by another netlist2tf version (format "
                              f"{meta.get('format')!r}, this one reads {FORMAT}); recompile it")
    protocol, netlist = trace_side(folder, meta)
    meta["initial_memory"] = {name: {int(a): w for a, w in words.items()}
                              for name, words in meta.get("initial_memory", {}).items()}
    return protocol, netlist, meta


def load_checkpoint(folder, dtype=None):
    """(model, protocol, netlist, initial registers, meta) of an emitted folder; the initial memory
    words are ``meta["initial_memory"]`` ({address: word}, keys as ints).

    Raises Netlist2TFError naming the missing, malformed or changed file."""
    protocol, netlist, meta = read_checkpoint(folder)
    import torch

    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    model = load_hf_model(folder, dtype or getattr(torch, meta.get("dtype", "float32"), torch.float32))
    if model.config.vocab_size != protocol.vocab_size:
        raise Netlist2TFError(f"{folder}: the model's vocabulary ({model.config.vocab_size}) does not "
                              f"match its trace protocol ({protocol.vocab_size}); recompile it")
    return model, protocol, netlist, meta["initial_registers"], meta
