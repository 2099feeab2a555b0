"""A checkpoint folder (compiled or merged) as one GGUF file that llama.cpp runs, in float32.

llama.cpp's ``qwen35`` architecture is Qwen3.5's text model: the same modules, its own tensor names and
a few stored forms that differ from Hugging Face's (what ``convert_hf_to_gguf.py`` in llama.cpp does for
``Qwen3_5ForCausalLM``, written here for our folders):

* the decoder norms store ``1 + weight`` (Qwen3.5 scales by ``1 + w``; llama.cpp by ``w``), the DeltaNet
  output norm its weight as it is;
* a DeltaNet layer stores ``-exp(A_log)`` (``ssm_a``) and its conv kernel as (channels, taps);
* where a key head serves several value heads, llama.cpp broadcasts key heads *tiled* (value head i
  reads key head ``i mod n_k``) where transformers repeats them *interleaved* (``i // group``): the value
  heads are renumbered in every tensor that has them (in_proj_qkv's value rows, in_proj_z, in_proj_a/b,
  A_log, dt_bias, the conv's value channels, out_proj's columns), which leaves the layer's function
  unchanged.

Every stored value is float32 and computed in float32 as transformers computes it (``1 + w`` and
``-exp(A_log)`` are the very operations Qwen3.5's forward does), so no weight is rounded: llama.cpp
rounds activations to the weights' type before each product, so only float32 weights keep the
compiled model's numbers. llama.cpp needs square DeltaNet heads (``linear_key_head_dim ==
linear_value_head_dim``; it sizes both from one key); a folder without them is refused with the fix.

The tokenizer goes with the weights: a compiled folder's trace tokens (a WordLevel vocabulary) as
llama.cpp "user-defined" tokens, so that a text of concatenated token names tokenizes to exactly those
tokens and generated tokens print as their names; a merged folder's byte-level BPE vocabulary with its
merges, special tokens and chat template (the trace tokens are among its special tokens). Only the text
model is written: a multimodal folder's vision tower (llama.cpp's ``mmproj`` file) and MTP head are
left out, and said so.
"""

import json
import os
from pathlib import Path

import numpy as np

from netlist2tf.common import Netlist2TFError

ARCH = "qwen35"
FORMAT = 1                           # bump when the file written for the same folder changes
MAGIC_KEY = "netlist2tf.format"      # ours: the key every file we write carries (and check_output_file reads)
# Qwen3.5's pre-tokenizer regex (tokenizer.json), which llama.cpp knows as the "qwen35" pre-tokenizer
QWEN35_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+"
                r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
MROPE_SECTIONS = [11, 11, 10, 0]     # transformers' default for Qwen3.5 (text positions: all sections equal)


def _text_config(doc: dict) -> dict:
    return doc.get("text_config", doc)


def gguf_refusal(config: dict) -> str | None:
    """Why llama.cpp cannot run a checkpoint with this config.json (None: it can)."""
    text = _text_config(config)
    if text.get("model_type") not in ("qwen3_5_text", "qwen3_5"):
        return f"model_type {text.get('model_type')!r} is not Qwen3.5's text model"
    dk, dv = text.get("linear_key_head_dim"), text.get("linear_value_head_dim")
    if dk != dv:
        return (f"its DeltaNet heads are not square (linear_key_head_dim {dk}, linear_value_head_dim {dv}) and "
                f"llama.cpp's qwen35 sizes both from one value; compile onto a target whose heads are, e.g. "
                f"`--target qwen3.5-0.8b` (or `cpu build --target qwen3.5-4b`; every published Qwen3.5 has "
                f"square heads)")
    if text.get("num_key_value_heads") and text.get("head_dim") is None:
        return "config.json has no head_dim"
    return None


def _reorder_heads(a: np.ndarray, axis: int, nk: int, group: int, size: int) -> np.ndarray:
    """Value heads from transformers' grouped order (key head j's group side by side) to llama.cpp's
    tiled order (value head g*nk + j = transformers' j*group + g), ``size`` entries per head."""
    shape = list(a.shape)
    a = a.reshape(shape[:axis] + [nk, group, size] + shape[axis + 1:])
    a = np.swapaxes(a, axis, axis + 1)
    return np.ascontiguousarray(a.reshape(shape))


def text_tensors(names, get, text: dict):
    """(GGUF name, float32 array) for every text-model tensor of a checkpoint, in a fixed order.
    ``names``: the folder's tensor names; ``get(name)``: that tensor as a torch tensor."""
    import gguf
    import torch

    n_layers = text["num_hidden_layers"]
    table = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN35, n_layers)
    nk, nv = text["linear_num_key_heads"], text["linear_num_value_heads"]
    dk, dv = text["linear_key_head_dim"], text["linear_value_head_dim"]
    group = nv // nk
    tied = bool(text.get("tie_word_embeddings", False))
    out = []
    for name in sorted(names):
        hf = name
        for prefix in ("model.language_model.", "model."):
            if hf.startswith(prefix):
                hf = "model." + hf[len(prefix):]
                break
        if hf.startswith(("model.visual.", "mtp.", "model.mtp.")) or name.startswith(("visual.", "mtp.")):
            continue
        if hf == "lm_head.weight" and tied:
            continue
        t = get(name)
        with torch.no_grad():
            t = t.to(torch.float32)
            if hf.endswith(".A_log"):
                t = -torch.exp(t)                          # transformers: -self.A_log.float().exp()
            elif hf.endswith("norm.weight") and ".linear_attn.norm." not in hf:
                t = 1.0 + t                                # Qwen3_5RMSNorm: output * (1.0 + weight.float())
        a = t.contiguous().numpy()
        base = hf
        if hf.endswith(".dt_bias"):
            base = hf[:-len(".dt_bias")] + ".dt_proj.bias"
        if ".conv1d." in hf:
            a = a.reshape(a.shape[0], a.shape[-1])
        if group > 1 and ".linear_attn." in hf:
            qk = 2 * nk * dk
            if ".in_proj_qkv." in hf:
                a = np.concatenate([a[:qk], _reorder_heads(a[qk:], 0, nk, group, dv)])
            elif ".conv1d." in hf:
                a = np.concatenate([a[:qk], _reorder_heads(a[qk:], 0, nk, group, dv)])
            elif ".in_proj_z." in hf:
                a = _reorder_heads(a, 0, nk, group, dv)
            elif ".in_proj_a." in hf or ".in_proj_b." in hf or hf.endswith((".A_log", ".dt_bias")):
                a = _reorder_heads(a, 0, nk, group, 1)
            elif ".out_proj." in hf:
                a = _reorder_heads(a, 1, nk, group, dv)
        stem, _, suffix = base.rpartition(".")
        if suffix in ("weight", "bias"):
            mapped = table.get_name(stem)
            gname = None if mapped is None else f"{mapped}.{suffix}"
        else:
            gname = table.get_name(base)                   # A_log: a bare parameter (ssm_a)
        if gname is None:
            raise Netlist2TFError(f"tensor {name} has no place in llama.cpp's qwen35 model; this folder is not "
                                  f"one netlist2tf wrote (or its format is newer than this exporter)")
        out.append((gname, np.ascontiguousarray(a, dtype=np.float32)))
    return out


def vocabulary(folder: Path, vocab_size: int, plain=range(0)) -> dict:
    """The GGUF tokenizer of a checkpoint folder: {"model", "pre", "tokens", "types", "merges",
    "eos", "template", "notes"}. Ids with no token in tokenizer.json (a model vocabulary padded past
    the tokenizer's) become unused tokens. ``plain``: ids that are user-defined tokens even where the
    tokenizer calls them special (a merged folder's trace tokens: llama.cpp prints a user-defined
    token's text in a completion and drops a control token's)."""
    import gguf

    notes = []
    doc = json.loads((folder / "tokenizer.json").read_text())
    model = doc.get("model", {})
    tokens: list = [None] * vocab_size
    types = [gguf.TokenType.UNUSED] * vocab_size
    kind = model.get("type")
    if kind == "WordLevel":                       # a compiled folder: trace token names
        for word, i in model["vocab"].items():
            if 0 <= i < vocab_size:
                tokens[i], types[i] = word, gguf.TokenType.USER_DEFINED
        merges, pre = [], "default"
    elif kind == "BPE":
        for word, i in model["vocab"].items():
            if 0 <= i < vocab_size:
                tokens[i], types[i] = word, gguf.TokenType.NORMAL
        merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
        split = _split_regex(doc.get("pre_tokenizer"))
        pre = "qwen35" if split == QWEN35_SPLIT else "default"
        if pre != "qwen35":
            notes.append("the tokenizer's pre-tokenizer is not Qwen3.5's; llama.cpp splits text with its default "
                         "rules (text may tokenize differently than with transformers; trace tokens do not)")
    else:
        raise Netlist2TFError(f"{folder}/tokenizer.json: a {kind!r} tokenizer; the GGUF export knows WordLevel "
                              f"(compiled folders) and byte-level BPE (Qwen3.5 bases)")
    for added in doc.get("added_tokens", []):
        i = added["id"]
        if 0 <= i < vocab_size:
            tokens[i] = added["content"]
            types[i] = (gguf.TokenType.CONTROL if added.get("special") and i not in plain
                        else gguf.TokenType.USER_DEFINED)
    for i, t in enumerate(tokens):
        if t is None:
            tokens[i] = f"[PAD{i}]"
    if not merges:
        # llama.cpp's BPE vocabulary requires a merges list and GGUF has no empty arrays: one merge of two
        # byte symbols, whose result is no token (so BPE falls back to the bytes it would use without it)
        merges = ["\u0120 \u0120"]
    cfg_path = folder / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
    template = cfg.get("chat_template")
    if (folder / "chat_template.jinja").is_file():
        template = (folder / "chat_template.jinja").read_text()
    eos = cfg.get("eos_token")
    eos = eos.get("content") if isinstance(eos, dict) else eos
    eos_id = tokens.index(eos) if eos in tokens else None
    return {"model": "gpt2", "pre": pre, "tokens": tokens, "types": types, "merges": merges, "eos": eos_id,
            "template": template, "notes": notes}


def trace_ids(folder) -> range:
    """The ids of a merged folder's trace tokens (merge.json), an empty range for a compiled one."""
    folder = Path(folder)
    if not (folder / "merge.json").is_file():
        return range(0)
    info = json.loads((folder / "merge.json").read_text())
    return range(info["trace_token_offset"], info["trace_token_offset"] + info["trace_vocab_size"])


def token_names(folder) -> list:
    """Every token id's text as the GGUF export writes it (what a server prints for the token)."""
    folder = Path(folder)
    size = _text_config(json.loads((folder / "config.json").read_text()))["vocab_size"]
    return vocabulary(folder, size, trace_ids(folder))["tokens"]


def _split_regex(pre) -> str | None:
    if not isinstance(pre, dict):
        return None
    items = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    for p in items:
        if p.get("type") == "Split":
            return p.get("pattern", {}).get("Regex")
    return None


def write_gguf(path, name: str, text: dict, tensors: list, vocab: dict) -> None:
    """The GGUF file ``path``: llama.cpp's qwen35 metadata from the text config ``text``, the tokenizer
    ``vocab`` (``vocabulary``) and ``tensors`` [(GGUF name, float32 array)] (``text_tensors``)."""
    import gguf

    w = gguf.GGUFWriter(None, ARCH)
    w.add_key_value(MAGIC_KEY, FORMAT, gguf.GGUFValueType.UINT32)
    w.add_name(name)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_block_count(text["num_hidden_layers"])
    w.add_context_length(text.get("max_position_embeddings", 32768))
    w.add_embedding_length(text["hidden_size"])
    w.add_feed_forward_length(text["intermediate_size"])
    w.add_head_count(text["num_attention_heads"])
    w.add_head_count_kv(text["num_key_value_heads"])
    w.add_key_length(text["head_dim"])
    w.add_value_length(text["head_dim"])
    w.add_layer_norm_rms_eps(text["rms_norm_eps"])
    rope = text.get("rope_parameters") or {}
    w.add_rope_freq_base(float(rope.get("rope_theta", 10000.0)))
    w.add_rope_dimension_count(int(text["head_dim"] * rope.get("partial_rotary_factor", 0.25)))
    sections = list(rope.get("mrope_section") or MROPE_SECTIONS[:3])
    w.add_rope_dimension_sections((sections + [0] * 4)[:4])
    w.add_ssm_conv_kernel(text["linear_conv_kernel_dim"])
    w.add_ssm_state_size(text["linear_key_head_dim"])
    w.add_ssm_group_count(text["linear_num_key_heads"])
    w.add_ssm_time_step_rank(text["linear_num_value_heads"])
    w.add_ssm_inner_size(text["linear_value_head_dim"] * text["linear_num_value_heads"])
    types = text["layer_types"]
    w.add_array(f"{ARCH}.attention.recurrent_layers", [t == "linear_attention" for t in types])
    w.add_full_attention_interval(int(text.get("full_attention_interval", 4)))
    w.add_tokenizer_model(vocab["model"])
    w.add_tokenizer_pre(vocab["pre"])
    w.add_token_list(vocab["tokens"])
    w.add_token_types([int(t) for t in vocab["types"]])
    w.add_token_merges(vocab["merges"])
    w.add_add_bos_token(False)
    if vocab["eos"] is not None:
        w.add_eos_token_id(vocab["eos"])
    if vocab["template"]:
        w.add_chat_template(vocab["template"])
    for tname, a in tensors:
        w.add_tensor(tname, a)
    w.write_header_to_file(Path(path))
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def export_gguf(folder, out, log=None, force: bool = False) -> dict:
    """Write the checkpoint ``folder`` (a compiled or merged netlist2tf folder, its files checked
    against their seal) as the GGUF file ``out`` (written whole beside it, then moved into place).
    Returns a summary: {"tensors", "parameters", "bytes", "vocab", "notes"}. Raises Netlist2TFError
    for a folder llama.cpp cannot run (with the fix) or that is not ours."""
    from netlist2tf.checkpoint import WeightFiles, check_seal, read_meta
    from netlist2tf.common import check_output_file, check_room, destination, file_beside

    folder, log = Path(folder), log or (lambda msg: None)
    for name in ("config.json", "compile.json", "tokenizer.json"):
        if not (folder / name).is_file():
            raise Netlist2TFError(f"{folder} is not a netlist2tf checkpoint folder: {name} is missing; give a "
                                  f"folder written by `netlist2tf compile`, `cpu build` or `netlist2tf merge`")
    merged = (folder / "merge.json").is_file()
    if merged:
        from netlist2tf.merge import MERGED_SEALED

        info = read_meta(folder, "merge.json")          # what load_merged checks: the sealed files
        sealed = info.get("sealed", MERGED_SEALED)
        check_seal(folder, info.get("sha256"), sealed if isinstance(sealed, list) and sealed else MERGED_SEALED,
                   "merge.json")
    else:
        meta = read_meta(folder)
        check_seal(folder, meta.get("sha256"))
    config = json.loads((folder / "config.json").read_text())
    why = gguf_refusal(config)
    if why:
        raise Netlist2TFError(f"{folder}: llama.cpp cannot run this checkpoint: {why}")
    text = _text_config(config)
    check_output_file(out, "--out", "gguf", force, stream=False)
    weights = WeightFiles(folder)
    notes = []
    skipped = sorted({k.split(".")[1] if k.startswith("model.") else k.split(".")[0] for k in weights.keys()
                      if k.startswith(("model.visual.", "mtp.", "model.mtp.", "visual."))})
    if skipped:
        notes.append(f"left out: {', '.join(skipped)} (llama.cpp keeps a vision tower in a separate mmproj file; the "
                     f"MTP head is not used to run traces)")
    tensors = text_tensors(list(weights.keys()), weights.get, text)
    size = sum(a.nbytes for _, a in tensors)
    check_room(out, size, "--out")
    vocab_size = text["vocab_size"]
    vocab = vocabulary(folder, vocab_size, trace_ids(folder))
    notes += vocab["notes"]

    log(f"writing {len(tensors)} tensors ({size / 1e9:.2f} GB, float32) to {out}")
    with file_beside(destination(out, "--out")[1]) as (fd, tmp):
        os.close(fd)
        write_gguf(tmp, folder.name, text, tensors, vocab)
    return {"tensors": len(tensors), "parameters": sum(a.size for _, a in tensors), "bytes": size,
            "vocab": vocab_size, "notes": notes}


GGUF_CACHE_FILES = 4                 # exported files kept in the build folder (the most recently used)
GGUF_CACHE_BYTES = 16 << 30


def cached_gguf(folder, log=None) -> Path:
    """The GGUF file of checkpoint ``folder`` in the build folder's cache (``gguf/``), exported on first
    use: named by the sha256 of what the export reads (the folder's sealed record: its weights, config
    and tokenizer files) and of this module. The same folder, unchanged, is exported once."""
    import hashlib

    from netlist2tf.checkpoint import file_digest
    from netlist2tf.common import build_dir, cache_lock, prune_cache

    folder = Path(folder)
    h = hashlib.sha256(f"{FORMAT}\n".encode())
    h.update(Path(__file__).read_bytes())
    names = sorted(n for n in os.listdir(folder) if n.endswith((".json", ".safetensors", ".jinja")))
    for n in names:
        h.update(f"{n}\0{file_digest(folder / n)}\n".encode())
    where = build_dir() / "gguf" / f"{h.hexdigest()[:32]}.gguf"
    where.parent.mkdir(parents=True, exist_ok=True)
    with cache_lock(where.with_suffix(".lock")):
        if not where.is_file():
            export_gguf(folder, where, log=log)
        else:
            os.utime(where)
    prune_cache(where.parent, ".gguf", GGUF_CACHE_FILES, GGUF_CACHE_BYTES)
    return where
