"""The Hugging Face side files of a compiled checkpoint, for users of stock ``transformers`` alone:
readable token names, a tokenizer over them and the generation settings of one frame.

**Token names.** Every trace token id 0..vocab_size-1 gets one name (unique, no whitespace)::

    <KIND:LABEL=0xVALUE|pPARITY>        e.g. <in:load+load_value[0:7]=0x3d|p0>
                                             <reg:count[0:8]=0x3c|p1>
                                             <ma:storage.en+storage.addr[0:4]=0x13|p1>

* KIND is the field's kind: ``in`` (inserted by the user), ``out``, ``reg``, ``ma``, ``md``
  (generated), see netlist2tf/compile/protocol.py and docs/design/compiler.md 2.
* LABEL names the chunk's bits, least significant (value bit 0) first, as ``+``-joined parts:
  ``sig`` is a one-bit signal, ``sig[i]`` bit i of a wider one, ``sig[lo:hi]`` its bits lo..hi-1
  (Amaranth/Python slice convention: half-open, LSB first). ``load+load_value[0:7]``: value bit 0 is
  ``load``, bits 1..7 are ``load_value`` bits 0..6. Register chunks carry the design's signal names
  (``readable_register_names``), not Yosys cell names.
* VALUE is the chunk value in hex, zero-padded to the chunk's width (``ceil(width / 4)`` digits;
  the vocabulary also holds values beyond a narrow chunk's width, which the model never generates:
  they print with more digits and stay unique).
* PARITY is the token's parity bit (IN/OUT/MA/MD of frame k carry ``k % 2``, REG tokens ``(k + 1) %
  2``; the prompt's initial REG tokens 0, its memory groups 1).

Parse one with ``re.fullmatch(r"<(\\w+):(.+)=0x([0-9a-f]+)\\|p([01])>", name)``. A signal name
that itself holds ``+`` or a trailing ``[...]`` makes a label ambiguous to such a parser (Amaranth
and Yosys names do not).

**Tokenizer.** ``write_tokenizer`` writes ``tokenizer.json`` (a WordLevel model over exactly these
names, whitespace split, decoded joined by single spaces: ``decode`` then ``encode`` round-trips) and
``tokenizer_config.json`` (``PreTrainedTokenizerFast``), so ``AutoTokenizer.from_pretrained(folder)``
has exactly ``vocab_size`` tokens. It declares no special tokens: a tokenizer has one eos token and a
frame ends on any of 2 * 2**chunk_bits tokens, and marking one data token special would make
``decode(skip_special_tokens=True)`` drop real values; an unknown name raises instead of mapping to an
unk token. The stopping tokens are in the generation config (``generation_settings``).
"""

import json
import math
import re
from pathlib import Path

from netlist2tf.netlist import Netlist
from netlist2tf.compile import IN, KINDS, REG, Field, TraceProtocol

_INDEXED = re.compile(r"(.*)\[(\d+)\]")
_WHITESPACE = re.compile(r"\s")


def _clean(name: str) -> str:
    return _WHITESPACE.sub("_", name)


def _split_bit(name: str) -> tuple[str, int | None]:
    m = _INDEXED.fullmatch(name)
    return (m[1], int(m[2])) if m else (name, None)


def _public_names(netlist: Netlist) -> set[str]:
    return {p.name for p in netlist.ports} | {s.name for s in netlist.signals}


def _register_bits(netlist: Netlist) -> dict[int, tuple[str, int | None]]:
    """Register output net -> (signal name, bit or None) of the design's name for it: a port or a
    public (``hide_name=0``) Yosys netname of the net; else a hidden netname Yosys derived from a user
    identifier (it holds a backslash, e.g. ``$\\storage$rdreg[0]$q``); else the register's own name
    (``$auto$ff.cc:337:slice$100``) and the bit's index in it."""
    public = _public_names(netlist)
    out = {}
    for r in netlist.registers:
        for i, q in enumerate(r.q):
            net = netlist.nets[q]
            if net.base in public or "\\" in net.base:
                out[q] = (_clean(net.base), net.bit)
            else:
                out[q] = (_clean(r.name), i if r.width > 1 else None)
    return out


def _runs(bits) -> list[list]:
    """(base, bit) pairs -> runs [base, lo, hi] of consecutive bits (hi exclusive; lo None: a bare
    one-bit name)."""
    runs: list[list] = []
    for base, bit in bits:
        if runs and bit is not None and runs[-1][0] == base and runs[-1][1] is not None \
                and runs[-1][2] == bit:
            runs[-1][2] = bit + 1
        else:
            runs.append([base, bit, None if bit is None else bit + 1])
    return runs


def _label(bits, whole: dict | None = None) -> str:
    """The ``+``-joined label of (base, bit) pairs; with ``whole`` ({name: width}), a run that is a
    whole signal (bits 0..width-1) is written as the bare name."""
    parts = []
    for base, lo, hi in _runs(bits):
        if lo is None or (whole is not None and lo == 0 and whole.get(base) == hi):
            parts.append(base)
        elif hi == lo + 1:
            parts.append(f"{base}[{lo}]")
        else:
            parts.append(f"{base}[{lo}:{hi}]")
    return "+".join(parts)


def readable_register_names(netlist: Netlist) -> dict[str, str]:
    """Register name (``Register.name``, often a Yosys cell like ``$auto$ff.cc:337:slice$100``) ->
    the design's signal name for it, from the names of its output (q) nets: ``count`` when the
    register is the whole signal, ``count[3]`` or ``count[0:4]`` (half-open, LSB first) for part of
    it, ``a[0:3]+b`` across signals. A net without a user name keeps a hidden name Yosys derived from
    a user identifier, else the register's own name. Deterministic; a name two registers would share
    gets ``~2``, ``~3``, ... in register order (registers are sorted by name)."""
    bits = _register_bits(netlist)
    widths = {p.name: p.width for p in netlist.ports}
    for s in netlist.signals:
        widths.setdefault(s.name, len(s.bits))
    for r in netlist.registers:                 # a register that keeps its own name, whole
        widths.setdefault(_clean(r.name), r.width)
    names, seen = {}, {}
    for r in netlist.registers:
        name = _label([bits[q] for q in r.q], widths)
        seen[name] = seen.get(name, 0) + 1
        names[r.name] = name if seen[name] == 1 else f"{name}~{seen[name]}"
    return names


def chunk_labels(protocol: TraceProtocol, netlist: Netlist | None = None) -> dict[tuple[str, int], str]:
    """(kind, chunk index) -> the chunk's label (see the module docstring), unique per kind. With
    ``netlist`` (the one ``protocol`` was built from), register chunks carry the design's signal
    names; without it, their registers' names."""
    reg_bits = _register_bits(netlist) if netlist is not None else {}
    labels = {}
    for kind in KINDS:
        seen = {}
        for c in protocol.chunks_of(kind):
            if kind == REG and all(n in reg_bits for n in c.bits):
                bits = [reg_bits[n] for n in c.bits]
            else:
                bits = [_split_bit(_clean(nm.removeprefix("reg:") if kind == REG else nm))
                        for nm in c.names]
            label = _label(bits)
            seen[label] = seen.get(label, 0) + 1
            labels[kind, c.index] = label if seen[label] == 1 else f"{label}~{seen[label]}"
    return labels


def token_names(protocol: TraceProtocol, netlist: Netlist | None = None) -> list[str]:
    """One readable, unique, whitespace-free name per trace token id 0..vocab_size-1 (the module
    docstring gives the format); ``netlist``: as for ``chunk_labels``."""
    labels = chunk_labels(protocol, netlist)
    digits = {(k, c.index): max(1, math.ceil(len(c.bits) / 4)) for k in KINDS for c in protocol.chunks_of(k)}
    names, per = [], 1 << protocol.chunk_bits
    for start in range(0, protocol.vocab_size, per):     # a block: one kind, chunk and parity, every value
        f = protocol.field(start)
        width, head, tail = digits[f.kind, f.chunk] + 2, f"<{f.kind}:{labels[f.kind, f.chunk]}=", f"|p{f.parity}>"
        names += [f"{head}{value:#0{width}x}{tail}" for value in range(per)]
    if len(set(names)) != len(names):
        raise AssertionError("token names are not unique")
    return names


def tokenizer(protocol: TraceProtocol, netlist: Netlist | None = None, names: list[str] | None = None):
    """A ``tokenizers.Tokenizer``: WordLevel over ``token_names`` (id = trace token id; ``names``: those,
    where the caller has them), split on whitespace, no normalizer, no post-processor (encoding adds
    no tokens), no decoder (``decode`` joins the names with single spaces, which encodes back to the
    same ids). An unknown name raises (its unk token is not in the vocabulary)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    names = names if names is not None else token_names(protocol, netlist)
    tok = Tokenizer(models.WordLevel({n: i for i, n in enumerate(names)}, unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok


def write_tokenizer(protocol: TraceProtocol, folder, netlist: Netlist | None = None,
                    model_max_length: int | None = None, names: list[str] | None = None) -> list[Path]:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` into ``folder`` (byte-identical for the
    same inputs); returns their paths. ``model_max_length``: default 2**31 - 1, not the config's
    ``max_position_embeddings``: a trace runs for as many cycles as the user wants (the compiled CPU
    runs past a million positions; the state is in the DeltaNet layers' recurrent state), and a
    smaller figure only makes ``transformers`` warn about long prompts.
    ``AutoTokenizer.from_pretrained(folder)`` then gives a fast tokenizer of exactly
    ``protocol.vocab_size`` tokens and no special tokens (module docstring). ``names``: the
    ``token_names``, where the caller has them."""
    folder = Path(folder)
    if model_max_length is None:
        model_max_length = 2**31 - 1
    tok = tokenizer(protocol, netlist, names)
    doc = json.loads(tok.to_str())
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"    # keys in tokenizers' own order
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": model_max_length,
              "clean_up_tokenization_spaces": False, "add_bos_token": False, "add_eos_token": False,
              "bos_token": None, "eos_token": None, "pad_token": None, "unk_token": None,
              "model_input_names": ["input_ids", "attention_mask"],
              "added_tokens_decoder": {}}
    paths = [folder / "tokenizer.json", folder / "tokenizer_config.json"]
    paths[0].write_text(text, encoding="utf-8")
    paths[1].write_text(json.dumps(config, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return paths


def frame_end_ids(protocol: TraceProtocol) -> list[int]:
    """Every token id of the frame's last generated chunk (``protocol.generated[-1]``; also with a
    gated group, which is never last): both parities, all values."""
    kind, chunk = protocol.generated[-1]
    return [protocol.token(Field(kind, chunk, p, v)) for p in (0, 1) for v in range(1 << protocol.chunk_bits)]


def generation_settings(protocol: TraceProtocol, stop_at_frame_end: bool | None = None) -> dict:
    """Values for ``generation_config.json`` (``model.generation_config.update(**...)``):

    * ``do_sample`` False (the trace is the argmax), ``max_new_tokens`` the generated tokens of one
      frame (``len(protocol.generated)``; a frame without its gated group is shorter and stops on its
      eos token);
    * ``eos_token_id``: every id of the frame's last generated chunk (``frame_end_ids``), so
      ``generate()`` stops at the end of one frame; ``pad_token_id`` the first of them (only fills
      rows of a batch that stopped early); ``bos_token_id`` None (a prompt starts with the initial
      register frame, there is no BOS token).
    * ``stop_at_frame_end`` (default: whether the design has inputs): False leaves ``eos_token_id``
      None, for a design without inputs, whose frames follow each other with no user tokens:
      ``generate(prompt, max_new_tokens=cycles * len(protocol.generated))`` runs ``cycles`` cycles in
      one call (``max_new_tokens`` stays one frame by default).

    Running several cycles with inputs: encode the prompt (the initial register frame), then per
    cycle k append the IN tokens of that cycle's input values (by name: ``<in:LABEL=0xV|p{k % 2}>``,
    one per IN chunk in id order), call ``model.generate(ids)`` (it stops after the frame's last
    token), decode the new tokens into output and next register values, and continue from the whole
    returned sequence. docs/design/transformers.md has the code."""
    ends = frame_end_ids(protocol)
    if stop_at_frame_end is None:
        stop_at_frame_end = bool(protocol.chunks_of(IN))
    return {"do_sample": False, "max_new_tokens": len(protocol.generated),
            "eos_token_id": ends if stop_at_frame_end else None, "pad_token_id": ends[0],
            "bos_token_id": None}


def _transformers_version() -> str:
    from importlib.metadata import version

    return version("transformers")


def config_text(target, hidden_size: int, vocab_size: int, dtype: str = "float32") -> str:
    """``config.json`` of a compiled checkpoint, as transformers' ``save_pretrained`` writes it for a
    ``Qwen3_5ForCausalLM`` of ``Target.to_hf_config`` (``hidden_size`` instead of the target's) in
    ``dtype``, without importing transformers (tests/checkpoint/test_emit.py compares the two)."""
    from dataclasses import replace

    # transformers' defaults that save_pretrained writes beside the target's own values
    cfg = {"architectures": ["Qwen3_5ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
           "bos_token_id": None, "dtype": dtype, "eos_token_id": None, "hidden_act": "silu",
           "initializer_range": 0.02, "max_position_embeddings": 32768, "model_type": "qwen3_5_text",
           "pad_token_id": None, "transformers_version": _transformers_version(), "use_cache": True,
           **replace(target, hidden_size=hidden_size).hf_config_values(vocab_size)}
    return json.dumps(cfg, indent=2, sort_keys=True) + "\n"


def generation_config_text(settings: dict) -> str:
    """``generation_config.json`` as ``save_pretrained`` writes a compiled model's generation config
    updated with ``settings`` (``generation_settings``; None values are transformers' defaults and
    left out), without importing transformers."""
    cfg = {"_from_model_config": True, "output_attentions": False, "output_hidden_states": False,
           "transformers_version": _transformers_version(), "use_cache": True}
    cfg.update({k: v for k, v in settings.items() if v is not None})
    return json.dumps(cfg, indent=2, sort_keys=True) + "\n"
