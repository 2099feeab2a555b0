"""Merge: a compiled checkpoint's layers in front of a Qwen3.5 checkpoint (docs/design/merge.md).

Two residual layouts (docs/design/merge.md). The default, *shared* (``_shared_channels``, used wherever the
compiled model allows it), lays the compiled channels that text may see over the base's and adds only
``one``, the bit channels read on text positions and the text flag (a group of one-hot flags the LM
head alone reads, such as the CPU's 35 emit flags, costs only its binary code's channels:
``_code_head``); the last compiled FFN then clears the shared channels on trace positions. The
*separate* layout, described here, keeps them apart.

In the separate layout the merged model is one ``Qwen3_5ForCausalLM`` whose residual stream is the
compiled model's channels followed by the base model's::

    [0, P)            the compiled model's constant channel and bits (P = 1 + 2 * pairs, or 1 + bits
                      where the compiled model holds each bit in one signed channel: kept so)
    [P, F)            anchors, re-chosen so that sum(x**2) == 64 * D' on every trace position
    F                 the text flag: f > 0 on every base-vocabulary token, 0 on trace tokens
    [F + 1, D')       the base model's channels, carrying its residual times s (a power of two)

and whose layers are the compiled model's (reading and writing only [0, P)) followed by the base
model's (reading and writing only the base channels). The vocabulary is the base's followed by the
trace tokens (trace token t is model token ``offset + t``).

Why it is exact on a trace and the base model on text:

* a trace token carries zeros in the base channels and the compiled layers never write there, so on a
  trace-only prompt every base layer sees zeros and adds exactly zero; the compiled layers see the
  residual they were compiled for (the anchors make every decoder RMSNorm the same identity at D');
* a base token carries zeros in the compiled channels (no constant channel: every compiled neuron,
  DeltaNet output gate and attention value stays shut, so the compiled layers add exactly nothing);
  the base residual is carried s times larger and the flag holds f, chosen (``_compensation``) so that
  a decoder RMSNorm's mean square over D' channels is a constant c times the base's own over D_base,
  epsilon included; its weight (1 + w) * sqrt(D_base / D') then gives back the base's normalised
  vector: every base layer computes what it computed;
* the LM head keeps base tokens out of trace positions (a weight of -2**14 on the constant channel)
  and trace tokens out of text positions (a weight of -2**20 on the flag: logits near -2**20 f / rms).

The base's weights keep their values: bit for bit, or times s (the embedding and the three
residual-writing projections; s is a power of two, so w = w' / s exactly), or compensated (its RMSNorm
weights); its LM head is untied from the embedding when they were tied. ``merge.json`` records the
channel and layer map. ``MergedTrace`` lets the trace host (``host.run_model``, ``verify``, the CPU's
model engine) drive a merged model by trace token numbers while the model still chooses over its whole
vocabulary.
"""

import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import torch

from netlist2tf.common import Netlist2TFError
from netlist2tf.gadgets import K
from netlist2tf.gadgets import NORM_WEIGHT, SCALE, ResidualLayout
from netlist2tf.gadgets import one_sided
from netlist2tf.weights import LM_HEAD, READERS, bits_layout_of, unfold_state
from netlist2tf.common import check_output_folder, write_folder
from netlist2tf.checkpoint import INDEX, WeightFiles, checkpoint_name, text_name, write_shards

FORMAT = 2
MERGED_SEALED = ("config.json", "model.safetensors")   # sealed before merge.json listed "sealed" (the trace
                                                        # side's files are sealed by compile.json)
FLAG_WEIGHT = -2.0 ** 20        # trace tokens' LM-head weight on the normalised text flag
BASE_BLOCK = -2.0 ** 14         # base tokens' LM-head weight on the normalised constant channel
LAYOUTS = ("auto", "shared", "separate")
NORM_ONE_VALUES = (1.0, 2.0, 4.0, 8.0, 16.0)   # what `one` may hold at the final norm (``_unit_norm_weight``)
BETA_SHUT = -128.0              # compiled DeltaNet write strength on text: sigmoid(-128) == 0 exactly
# The base's weights that write the residual stream (scaled by the residual scale with its embedding)
WRITES = ("self_attn.o_proj.weight", "linear_attn.out_proj.weight", "mlp.down_proj.weight")

# The geometry that must be equal in the compiled model and the base (Qwen3.5's shapes are global).
GEOMETRY = ("num_attention_heads", "num_key_value_heads", "head_dim", "linear_num_key_heads",
            "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
            "linear_conv_kernel_dim", "rms_norm_eps", "hidden_act")


# --------------------------------------------------------------------------------------------------
# The weight table: every key of a Qwen3.5 text model and the meaning of each of its axes.
# "H" hidden, "I" FFN intermediate, "V" vocabulary; an int is a fixed size from the config.

def _table(cfg: dict) -> dict:
    """{key suffix: axes} for one layer of each type, and the model-level keys."""
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv, K = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"], cfg["linear_conv_kernel_dim"]
    conv = 2 * nk * dk + nv * dv
    common = {"input_layernorm.weight": ("H",), "post_attention_layernorm.weight": ("H",),
              "mlp.gate_proj.weight": ("I", "H"), "mlp.up_proj.weight": ("I", "H"),
              "mlp.down_proj.weight": ("H", "I")}
    full = {"self_attn.q_proj.weight": (2 * nh * hd, "H"), "self_attn.k_proj.weight": (nkv * hd, "H"),
            "self_attn.v_proj.weight": (nkv * hd, "H"), "self_attn.o_proj.weight": ("H", nh * hd),
            "self_attn.q_norm.weight": (hd,), "self_attn.k_norm.weight": (hd,)}
    linear = {"linear_attn.in_proj_qkv.weight": (conv, "H"), "linear_attn.in_proj_z.weight": (nv * dv, "H"),
              "linear_attn.in_proj_b.weight": (nv, "H"), "linear_attn.in_proj_a.weight": (nv, "H"),
              "linear_attn.conv1d.weight": (conv, 1, K), "linear_attn.dt_bias": (nv,),
              "linear_attn.A_log": (nv,), "linear_attn.norm.weight": (dv,),
              "linear_attn.out_proj.weight": ("H", nv * dv)}
    return {"full_attention": {**common, **full}, "linear_attention": {**common, **linear}}


def _shape(axes, cfg) -> tuple:
    size = {"H": cfg["hidden_size"], "I": cfg["intermediate_size"], "V": cfg["vocab_size"]}
    return tuple(size[a] if isinstance(a, str) else a for a in axes)


# --------------------------------------------------------------------------------------------------
# Reading checkpoints

class _Checkpoint:
    """A Qwen3.5 checkpoint folder's text config and text weights (text-only ``qwen3_5_text`` or the
    published multimodal ``qwen3_5`` layout, one safetensors file or a sharded index)."""

    def __init__(self, folder, role: str):
        self.folder = folder = Path(folder)
        self.role = role
        cfg_path = folder / "config.json"
        try:
            doc = json.loads(cfg_path.read_text())
        except OSError as exc:
            raise Netlist2TFError(f"{role} {folder}: cannot read config.json ({exc.strerror or exc}); give "
                                  f"a Qwen3.5 checkpoint folder")
        except json.JSONDecodeError as exc:
            raise Netlist2TFError(f"{role} {cfg_path} is not JSON ({exc.msg} at line {exc.lineno})")
        kind = doc.get("model_type") if isinstance(doc, dict) else None
        if kind not in ("qwen3_5", "qwen3_5_text"):
            raise Netlist2TFError(f"{role} {folder} is not a dense Qwen3.5 checkpoint (model_type {kind!r})")
        self.multimodal = kind == "qwen3_5"
        self.config = doc.get("text_config") if self.multimodal else doc
        if not isinstance(self.config, dict):
            raise Netlist2TFError(f"{role} {cfg_path} has no text_config (a multimodal Qwen3.5 config needs one)")
        self.config = dict(self.config)
        missing = [k for k in ("hidden_size", "intermediate_size", "layer_types", "vocab_size",
                               "num_attention_heads", "num_key_value_heads", "linear_num_key_heads",
                               "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim")
                   if k not in self.config]
        if missing:
            raise Netlist2TFError(f"{role} {cfg_path} lacks the Qwen3.5 key(s) {', '.join(missing)}")
        if len(self.config["layer_types"]) != self.config.get("num_hidden_layers", len(self.config["layer_types"])):
            raise Netlist2TFError(f"{role} {cfg_path}: num_hidden_layers is {self.config['num_hidden_layers']} "
                                  f"but layer_types has {len(self.config['layer_types'])} entries")
        self.config.setdefault("head_dim", self.config["hidden_size"] // self.config["num_attention_heads"])
        self.config.setdefault("linear_conv_kernel_dim", 4)
        self.config.setdefault("rms_norm_eps", 1e-6)
        self.config.setdefault("hidden_act", "silu")
        self.tied = bool(doc.get("tie_word_embeddings", self.config.get("tie_word_embeddings", False)))
        self.doc = doc
        self.files = WeightFiles(folder, role)
        self.where = self.files.where
        self.keys = {}
        self.skipped = []
        for key in sorted(self.where):
            name = text_name(key, self.multimodal)
            if name is None:
                self.skipped.append(key)          # vision tower, MTP head: not part of the text model
            else:
                self.keys[name] = key

    def get(self, key: str) -> torch.Tensor:
        if key not in self.keys:
            raise Netlist2TFError(f"{self.role} {self.folder} lacks the weight {key}")
        return self.where[self.keys[key]].get_tensor(self.keys[key])

    def columns(self, key: str, lo: int, hi: int) -> torch.Tensor:
        """Columns [lo, hi) of the 2-D weight ``key``, read without loading the rest."""
        if key not in self.keys:
            raise Netlist2TFError(f"{self.role} {self.folder} lacks the weight {key}")
        return self.where[self.keys[key]].get_slice(self.keys[key])[:, lo:hi]

    def check(self, table: dict, cfg: dict) -> None:
        """Every text weight present with the shape the config implies, and nothing else."""
        expected = {"model.embed_tokens.weight": ("V", "H"), "model.norm.weight": ("H",)}
        if not self.tied or "lm_head.weight" in self.keys:
            expected["lm_head.weight"] = ("V", "H")
        for i, kind in enumerate(cfg["layer_types"]):
            if kind not in table:
                raise Netlist2TFError(f"{self.role} {self.folder}: layer {i} has type {kind!r}")
            for suffix, axes in table[kind].items():
                expected[f"model.layers.{i}.{suffix}"] = axes
        problems = []
        for key, axes in expected.items():
            if key not in self.keys:
                problems.append(f"{key} is missing")
                continue
            got = tuple(self.where[self.keys[key]].get_slice(self.keys[key]).get_shape())
            if got != _shape(axes, cfg):
                problems.append(f"{key} has shape {got}, the config implies {_shape(axes, cfg)}")
        problems += [f"unexpected weight {k}" for k in sorted(set(self.keys) - set(expected))]
        if problems:
            raise Netlist2TFError(f"{self.role} {self.folder} does not match its Qwen3.5 config: "
                                  + "; ".join(problems[:8]) + (f" (and {len(problems) - 8} more)"
                                                                 if len(problems) > 8 else ""))

    @property
    def dtype(self) -> torch.dtype:
        return self.get("model.norm.weight").dtype


def _compiled_layout(emb: torch.Tensor) -> ResidualLayout:
    """The residual layout of a compiled model, read back from its embedding (constant channel 0,
    bit pairs or signed bits, then anchors: ``signed.bits_layout_of``)."""
    return bits_layout_of(emb)


class _Unfolded:
    """A compiled checkpoint whose bits are signed (one channel each, ``netlist2tf.weights.signed``), seen as
    the pair-layout model it was folded from (``unfold_state``, exact). The merge keeps signed bits
    signed; it unfolds only a model whose reads split a constant over an anchor (``_anchor_reads``),
    which the pair layout reads from ``one`` instead."""

    def __init__(self, cpu: "_Checkpoint", signed: ResidualLayout):
        n = signed.n_pairs
        self.layout = ResidualLayout.build(ResidualLayout.channels_needed(n), n)
        self.state = unfold_state({k: cpu.get(k) for k in cpu.keys}, signed, self.layout)
        self.config = dict(cpu.config, hidden_size=self.layout.hidden_size)
        self.folder, self.role, self.keys = cpu.folder, cpu.role, cpu.keys

    def get(self, key: str) -> torch.Tensor:
        return self.state[key]


def _anchor_reads(cpu, layout: ResidualLayout) -> list:
    """The compiled tensors that read an anchor channel (a signed fold splits a read's constant over
    one when it is not exact on ``one`` in bfloat16): the merge re-chooses the anchors, so it
    unfolds such a model into pairs, which read the constant from ``one``."""
    if not layout.anchors:
        return []
    lo, hi = layout.anchors[0][0], layout.anchors[-1][0] + 1          # the anchors are consecutive channels
    return [k for k in cpu.keys if (k == LM_HEAD or k.endswith(READERS)) and bool(cpu.columns(k, lo, hi).any())]


def merged_layout(n_pairs: int, base_hidden: int, signed: bool = False) -> tuple[ResidualLayout, int]:
    """The smallest merged hidden size D' whose layout (the compiled bits: pairs or signed channels,
    anchors for D'), one flag channel and the base channels fit; returns (layout at D', the flag channel)."""
    pairs_end = 1 + (1 if signed else 2) * n_pairs
    room = 0
    while True:
        D = pairs_end + room + 1 + base_hidden
        layout = ResidualLayout.build(D, n_pairs, signed)
        if len(layout.anchors) <= room:
            return layout, pairs_end + room
        room = len(layout.anchors)


def _compensation(Db: int, D: int, eps: float) -> tuple[float, float, float]:
    """(residual scale s, text flag f, norm factor) that make a base RMSNorm over D' channels compute
    what it computed over Db, eps included.

    The base's residual is carried s times larger (s a power of two: exact in every float format)
    and the flag channel holds f on text positions, so the merged mean square is
    (s**2 * sum + f**2) / D' + eps. With s**2 = c * D' / Db and f**2 = (c - 1) * D' * eps this is
    c * (sum / Db + eps): c times the base's own, whatever the sum; the norm weight (1 + w) * sqrt(Db / D')
    then gives back the base's normalised vector exactly (in real arithmetic). c > 1 keeps f > 0."""
    s = 1.0
    while s * s <= D / Db:
        s *= 2
    c = s * s * Db / D
    return s, math.sqrt((c - 1) * D * eps), math.sqrt(Db / D)


# --------------------------------------------------------------------------------------------------
# The merged residual: which channel of the merged model holds what

@dataclass
class _Channels:
    """Where the merged residual keeps what (docs/design/merge.md): ``cmap[c]`` is the merged channel of the
    compiled model's channel c (< P: ``one`` and the bits: pairs, or one signed channel each);
    ``anchors`` the (merged channel, value) pairs re-chosen for D; the text flag; the base channels
    [B0, B0 + Db).

    ``separate``: [compiled | anchors | flag | base], nothing shared. ``shared``: the compiled bit
    channels that text may see (``shared``) and the anchors overlap the base channels [0, Db); the
    channels that must read 0 on text (``reserved``: ``one``, and of every bit that the LM head or a
    text-zero projection reads, its b channel (pairs) or its signed channel) and the flag sit after
    them; ``fold``: {lo: hi} of those pairs, whose 1 - b side is read as ``one - b`` instead (a signed
    bit needs no fold: its channel is 0 on text already); ``clean``: what the last compiled FFN zeroes
    so that the base layers read zeros on a trace position: every pair (hi, lo, hi shared), every
    shared signed channel (c, None, True). ``code``: the one-hot flags the LM head reads through a
    binary group code (``_group_code``) instead of keeping them reserved: shared, cleaned like the other
    shared bits, their code's bits in ``code_channels`` (reserved, after the others)."""
    layout: str
    D: int
    cmap: list
    anchors: tuple
    flag: int
    B0: int
    reserved: tuple = ()
    fold: dict = field(default_factory=dict)
    clean: tuple = ()
    n_shared: int = 0
    signed: bool = False
    n_bits: int = 0
    code: tuple = ()           # (compiled flag channel, its code word) of every one-hot flag read through a code
    code_channels: tuple = ()  # the merged channels of the code's bits (reserved, the last ones)

    def record(self, P: int, Db: int) -> dict:
        bits = {"bits": self.n_bits, "signed": self.signed}
        if self.code:
            bits["group_code"] = {"flags": [c for c, _ in sorted(self.code, key=lambda cw: cw[1])],
                                  "channels": [self.code_channels[0], self.code_channels[-1] + 1]}
        if self.layout == "separate":
            return {"layout": "separate", "compiled": [0, P], "anchors": [P, self.flag], "flag": self.flag,
                    "base": [self.B0, self.D]} | bits
        return {"layout": "shared", "base": [self.B0, self.B0 + Db], "shared": [0, self.n_shared],
                "anchors": [self.anchors[0][0], self.anchors[-1][0] + 1] if self.anchors else [0, 0],
                "reserved": [self.reserved[0], self.reserved[-1] + 1], "flag": self.flag,
                "one": self.cmap[0], "compiled_map": list(self.cmap), "folded": len(self.fold),
                "cleaned": len(self.clean)} | bits


def _bits_end(layout: ResidualLayout) -> int:
    """P: the compiled channels a merge maps (``one`` and the bits; the anchors are re-chosen)."""
    return layout.first_pair + layout.width * layout.n_pairs


def _separate_channels(layout: ResidualLayout, Db: int) -> _Channels:
    new, flag = merged_layout(layout.n_pairs, Db, layout.signed)
    return _Channels("separate", new.hidden_size, list(range(_bits_end(layout))), new.anchors, flag, flag + 1,
                     signed=layout.signed, n_bits=layout.n_pairs)


# The compiled projections that must add nothing on a text position of a shared layout, because they
# gate a whole sublayer (an FFN's up, a DeltaNet's decay input a). Their reads of a pair's 1 - b
# channel are folded into ``one - b``; the b channel (or a signed bit's channel) is then reserved.
TEXT_ZERO = ("mlp.up_proj.weight", "linear_attn.in_proj_a.weight")
# A compiled attention layer (a ROM or fetch lookup: gadgets/rom_lookup.py) keeps its keys and values on
# reserved channels, so a text position offers the key 0 and the value 0 (it scores 0, below every
# lookup's non-key positions, and adds nothing); its queries may read text (``_text_safe_attention``).
ATTENTION_TEXT_ZERO = ("self_attn.k_proj.weight", "self_attn.v_proj.weight")
# The compiled projections that may read channels text carries because the text flag shuts them: a
# DeltaNet's write strength b (logit <= -128: beta = 0) and output gate z (<= -128: silu(z) == 0, so
# the head's output is exactly 0 on text), with a flag weight sized from every base token (``_shut``).
FLAG_SHUT = ("linear_attn.in_proj_b.weight", "linear_attn.in_proj_z.weight")


def _text_safe_attention(cpu, i: int, cc: dict, one: int) -> bool:
    """Whether compiled attention layer ``i`` adds exactly 0 on a text position whatever its queries
    see there, given keys and values that read 0 on text (``ATTENTION_TEXT_ZERO``): every q head's
    output gate reads only the constant channel (0 on text: every gate is sigmoid(0) = 0.5), and its
    value dims come in mirror pairs (equal value rows, opposite output columns), whose halves of the
    same average cancel exactly (gadgets/attention_lookup.py's mirror dims)."""
    nh, nkv = cc["num_attention_heads"], cc["num_key_value_heads"]
    hd = cc.get("head_dim") or cc["hidden_size"] // nh
    p = f"model.layers.{i}.self_attn."
    q, v, o = (cpu.get(p + f"{k}_proj.weight").float() for k in "qvo")
    for h in range(nh):
        gate = q[h * 2 * hd + hd:(h + 1) * 2 * hd]
        others = torch.ones(gate.shape[1], dtype=torch.bool)
        others[one] = False
        if bool(gate[:, others].any()):
            return False
        cols = o[:, h * hd:(h + 1) * hd]
        vrows = v[(h // (nh // nkv)) * hd:(h // (nh // nkv) + 1) * hd]
        used = [j for j in range(hd) if bool(cols[:, j].any())]
        mate = {}
        for j in used:
            if j in mate:
                continue
            pair = [k for k in used if k != j and k not in mate and torch.equal(cols[:, k], -cols[:, j])
                    and torch.equal(vrows[k], vrows[j])]
            if not pair:
                return False
            mate[j], mate[pair[0]] = pair[0], j
    return True


def _rope_free(cpu, i: int, cc: dict, rotary: int) -> bool:
    """Whether compiled attention layer ``i``'s scores are the same under the merged model's RoPE (the
    base's: its theta, its mrope sections), which rotates the first ``rotary`` dims of a head:
    ``gadgets.one_sided`` (a lookup's fillers)."""
    nh, nkv = cc["num_attention_heads"], cc["num_key_value_heads"]
    hd = cc.get("head_dim") or cc["hidden_size"] // nh
    p = f"model.layers.{i}.self_attn."
    return one_sided(cpu.get(p + "q_proj.weight").float(), cpu.get(p + "k_proj.weight").float(), nh, nkv, hd, rotary)


def _group_code(head: torch.Tensor, flags: list) -> list:
    """The one-hot flag channels ``flags`` (a group of the compiler's ``readout.one_hot``: at most one
    of them is 1 on any position) if the LM head ``head`` (its columns the compiled channels) reads
    each of them the same way (one positive weight: the b side) and no row reads two of them: then
    every row's flag term can be read through a binary code of the group (``_code_head``); else []."""
    if len(flags) < 3:                                   # a code of 2 flags needs 2 channels too
        return []
    cols = head[:, flags]
    values = torch.unique(cols[cols != 0])
    if len(values) != 1 or float(values[0]) <= 0 or bool(((cols != 0).sum(dim=1) > 1).any()):
        return []
    return list(flags)


def _code_width(n_flags: int) -> int:
    """The bits of a binary code of ``n_flags`` one-hot flags: words 1..n (the all-zero word is "no flag");
    0 for none."""
    return n_flags.bit_length()


def _shared_channels(cpu, layout: ResidualLayout, cc: dict, base, dtype=None,
                     one_hot=()) -> tuple[_Channels | None, list]:
    """The shared layout for this compiled model and base, or (None, [why not, ...]). ``dtype``: the
    merged weights' (default the compiled checkpoint's), in which every rewritten weight must be exact.
    ``layout`` is the compiled model's: bit pairs or signed bits (one channel each, kept signed).
    ``one_hot``: groups of pair indices the compiler records as one-hot (compile.json ``readout``); a
    group only the LM head reads costs the reserved channels of its binary code, not one a flag."""
    P = _bits_end(layout)
    Db = base.config["hidden_size"]
    one = layout.one
    pair_of = {}                               # channel -> (the bit's b or signed channel, its 1 - b or None)
    for k in range(layout.n_pairs):
        if layout.signed:
            pair_of[layout.bit(k)] = (layout.bit(k), None)
        else:
            hi, lo = layout.pair(k)
            pair_of[hi] = pair_of[lo] = (hi, lo)
    why = []
    types = cc["layer_types"]
    attention = [i for i, t in enumerate(types) if t == "full_attention" and any(
        bool(cpu.get(f"model.layers.{i}.self_attn.{p}_proj.weight").any()) for p in "qkvo")]
    unsafe = [i for i in attention if not _text_safe_attention(cpu, i, cc, one)]
    if unsafe:
        why.append(f"compiled attention in layer(s) {unsafe} whose output on a text position is not provably 0 "
                   f"(a text key could out-score its match)")
    # What must read 0 on a text position: the LM head, the text-zero projections, and the DeltaNet
    # qkv rows that look back (a trace after text would see the text there through the convolution).
    head = cpu.get("lm_head.weight").float()[:, :P]
    coded = []                                   # the LM head's one-hot flags it may read through a code
    for group in one_hot:
        coded += _group_code(head, [layout.bit(k) if layout.signed else layout.pair(k)[0] for k in group])
    reads = {"lm_head.weight": head.clone()}
    reads["lm_head.weight"][:, coded] = 0
    for i, kind in enumerate(types):
        for suffix in TEXT_ZERO + (ATTENTION_TEXT_ZERO if i in attention else ()):
            if suffix.startswith("linear_attn") and kind != "linear_attention":
                continue
            reads[f"model.layers.{i}.{suffix}"] = cpu.get(f"model.layers.{i}.{suffix}").float()[:, :P]
        if kind == "linear_attention":
            conv = cpu.get(f"model.layers.{i}.linear_attn.conv1d.weight").float().squeeze(1)
            rows = torch.nonzero((conv[:, :-1] != 0).any(dim=1)).flatten()
            if len(rows):
                qkv = cpu.get(f"model.layers.{i}.linear_attn.in_proj_qkv.weight").float()[:, :P]
                reads[f"model.layers.{i}.linear_attn.in_proj_qkv.weight"] = (rows, qkv[rows])
    kept = set()
    for key, m in reads.items():
        m = m[1] if isinstance(m, tuple) else m
        for c in torch.nonzero((m != 0).any(dim=0)).flatten().tolist():
            if c == one:
                continue
            if c not in pair_of:
                why.append(f"{key} reads channel {c}, which is not a bit")
                break
            kept.add(pair_of[c][0])
    if why:
        return None, why
    n_code = _code_width(len(coded))
    # No code where another tensor reads a flag (it stays reserved), or where the flags would only
    # widen the shared channels (a base narrower than them) by as much as the code saves.
    if coded and (any(c in kept for c in coded) or _shared_width(P - 1 - len(kept), 1 + len(kept) + n_code, Db, layout)[0]
                  >= _shared_width(P - 1 - len(kept) - len(coded), 1 + len(kept) + len(coded), Db, layout)[0]):
        kept.update(coded)                       # a flag's channel is its bit's b (or signed) channel
        coded, n_code = [], 0
    reserved_c = [one] + sorted(kept)
    fold = {} if layout.signed else {pair_of[h][1]: h for h in kept}
    shared_c = [c for c in range(P) if c != one and c not in kept]
    n_pairs = layout.n_pairs
    D, X, new, n_anchor = _shared_width(len(shared_c), len(reserved_c) + n_code, Db, layout)
    n_shared = len(shared_c) + n_anchor
    cmap = [0] * P
    for m, c in enumerate(shared_c):
        cmap[c] = m
    for j, c in enumerate(reserved_c):
        cmap[c] = X + j
    anchors = tuple((len(shared_c) + j, v) for j, (_, v) in enumerate(new.anchors))
    if layout.signed:                              # a reserved signed bit is +-1 already: nothing to clean
        clean = tuple((c, None, True) for c in (layout.bit(k) for k in range(n_pairs)) if c not in kept)
    else:
        clean = tuple((hi, lo, hi not in kept) for hi, lo in (layout.pair(k) for k in range(n_pairs)))
    code_channels = tuple(range(X + len(reserved_c), X + len(reserved_c) + n_code))
    ch = _Channels("shared", D, cmap, anchors, D - 1, 0, tuple(range(X, X + len(reserved_c) + n_code)), fold,
                   clean, n_shared=n_shared, signed=layout.signed, n_bits=n_pairs,
                   code=tuple((c, w + 1) for w, c in enumerate(coded)), code_channels=code_channels)
    dtype = dtype or cpu.get("lm_head.weight").dtype
    for key, m in reads.items():               # the rewritten weights, in the compiled channels' order
        rows = m[0] if isinstance(m, tuple) else None
        w = cpu.get(key).to(dtype)[:, :P]
        placed = torch.zeros(w.shape[0], D, dtype=dtype)
        placed[:, cmap] = w
        out = _fold(placed, ch, rows, signed=key == "lm_head.weight")
        if out is None or (key == "lm_head.weight" and _code_head(out, ch) is None):
            why.append(f"{key} read through `one - b`{' or the group code' if ch.code else ''} is not exact "
                       f"in {dtype}")
    if why:
        return None, why
    return ch, []


def _shared_width(n_shared: int, n_reserved: int, Db: int, layout: ResidualLayout) -> tuple:
    """(D, X, the anchors' layout, the channels kept for anchors) of a shared residual: ``n_shared``
    compiled channels and D's anchors over the base's Db from channel 0, X = the wider, then
    ``n_reserved`` channels and the flag."""
    n_anchor = 0
    while True:                                   # the anchors depend on D, D on the anchors
        X = max(n_shared + n_anchor, Db)
        D = X + n_reserved + 1
        try:
            new = ResidualLayout.build(D, layout.n_pairs, layout.signed)
        except Netlist2TFError:                   # not room for D's anchors yet
            n_anchor += 1
            continue
        if len(new.anchors) <= n_anchor:
            return D, X, new, n_anchor
        n_anchor = len(new.anchors)


def _fold(t: torch.Tensor, ch: _Channels, rows=None, signed: bool = False) -> torch.Tensor | None:
    """A merged tensor (its last axis the merged channels) rewritten for the reserved pairs of a shared
    layout, or None when a rewritten weight is not exactly representable in the tensor's dtype.

    ``signed=False`` (a compiled layer's input, where a pair holds (b, 1 - b)): each 1 - b read is read
    as ``one - b``. ``signed=True`` (the LM head: after the last compiled FFN a reserved pair holds
    z = 2b - 1 on its b channel and nothing on 1 - b): b = (1 + z) / 2 and 1 - b = (1 - z) / 2, so
    every token's logit is the same integer (halves of 0/1 weights). ``rows``: only those rows."""
    w = t.double()
    sel = slice(None) if rows is None else rows
    one = ch.cmap[0]
    for lo, hi in ch.fold.items():
        a, b = w[sel, ch.cmap[hi]].clone(), w[sel, ch.cmap[lo]].clone()
        if not bool(b.any()) and not signed:
            continue
        w[sel, one] += (a + b) / 2 if signed else b
        w[sel, ch.cmap[hi]] = (a - b) / 2 if signed else a - b
        w[sel, ch.cmap[lo]] = 0
    out = w.to(t.dtype)
    return out if torch.equal(out.double(), w) else None


def _code_head(t: torch.Tensor, ch: _Channels) -> torch.Tensor | None:
    """The trace rows of a shared layout's LM head (after ``_fold``) with every one-hot flag of
    ``ch.code`` read through its group's code instead, or None where a weight is not exact in the
    tensor's dtype. After the last compiled FFN the code's bit j holds c_j = +1 where the flag set has
    bit j in its word, else -1 (all -1: no flag set). A row's flag term w_b * b (b = 1 for the flag set,
    0 for the others) becomes w_b * (m - (n - 1)), m = sum_j (1 + sigma_j c_j) / 2 the bits of the
    row's word that match (sigma_j = +-1: its bit j): w_b where its flag is set (m = n), at most 0 where
    another is (m <= n - 1, words distinct) or none (all-zero is no word). So the emitted token's logit
    is the compiled model's, every other token's is at most the compiled model's, and the argmax and its
    margin are the compiled model's. A signed flag s = 2b - 1 is read as w_s * s: w_b = 2 w_s, less
    w_s on ``one``."""
    if not ch.code:
        return t
    w = t.double()
    one, n = ch.cmap[0], len(ch.code_channels)
    codes = list(ch.code_channels)
    for c, word in ch.code:
        m = ch.cmap[c]
        col = w[:, m].clone()
        sigma = torch.tensor([1.0 if (word >> j) & 1 else -1.0 for j in range(n)], dtype=torch.float64)
        w_b, rest = (2 * col, -col) if ch.signed else (col, torch.zeros_like(col))
        w[:, m] = 0
        w[:, codes] += w_b[:, None] * sigma[None, :] / 2
        w[:, one] += rest + w_b * (1 - n / 2)
    out = w.to(t.dtype)
    return out if torch.equal(out.double(), w) else None


def _image_bound(base) -> torch.Tensor | None:
    """A bound on |the vision merger's output| per text channel, over every image: LayerNorm's output
    is at most sqrt(d) |gamma| + |beta| per entry, |GELU(u)| <= |u|, and each linear map adds at most
    |W| times the bound of its input plus |bias|. None for a base without a vision tower."""
    if not base.multimodal or "model.visual.merger.linear_fc2.weight" not in base.skipped:
        return None
    get = lambda k: base.files.get(f"model.visual.merger.{k}").double()
    gamma, beta = get("norm.weight"), get("norm.bias")
    w1, b1, w2, b2 = get("linear_fc1.weight"), get("linear_fc1.bias"), get("linear_fc2.weight"), get("linear_fc2.bias")
    d = gamma.shape[0]
    L = (math.sqrt(d) * gamma.abs() + beta.abs()).repeat(w1.shape[1] // d)
    return w2.abs() @ (w1.abs() @ L + b1.abs()) + b2.abs()


def _shut(base, ch: _Channels, Db: int, scale: float, flag_value: float, eps: float,
          w: torch.Tensor, norm: torch.Tensor) -> torch.Tensor:
    """Per row, the flag weight of a compiled ``in_proj_b`` or ``in_proj_z`` (FLAG_SHUT) that reads
    shared channels: large enough that the row's output is at most -128 on every text position (a write
    strength's sigmoid exactly 0, an output gate's silu exactly 0), from the exact text residual of every
    base token (the compiled layers add nothing there, so it is the embedding) and the bound on an image
    position's; twice that, for rounding."""
    cols = torch.nonzero(w[:, ch.B0:ch.B0 + Db].any(dim=0)).flatten()        # base channels the rows read
    w = w[:, ch.B0 + cols].double() * (1 + norm[ch.B0 + cols].double())      # (rows, n)
    E = base.get("model.embed_tokens.weight")
    worst = torch.zeros(w.shape[0], dtype=torch.float64)
    for start in range(0, E.shape[0], 8192):           # float64 a block at a time (a real vocabulary is 248k)
        rows = E[start:start + 8192].double() * scale
        r = torch.sqrt(((rows ** 2).sum(dim=1) + flag_value ** 2) / ch.D + eps)
        a = (rows[:, cols] @ w.T).abs() + 128 * r[:, None]
        worst = torch.maximum(worst, a.max(dim=0).values)
    Y = _image_bound(base)
    if Y is not None:
        Y = Y * scale
        r = math.sqrt((float((Y ** 2).sum()) + flag_value ** 2) / ch.D + eps)
        worst = torch.maximum(worst, w.abs() @ Y[cols] + 128 * r)
    return -2 * worst / flag_value


def _clean_last_ffn(state: dict, prefix: str, ch: _Channels, rows: list, one_value: float = 1.0) -> None:
    """The last compiled FFN of a shared layout leaves, on a trace position, 0 on every shared channel
    (so the base layers read zeros) and 2b - 1 on every reserved b channel (+-1: the final residual's
    mean square is then the same on every trace position, and the final norm can be made exactly the
    identity; docs/design/merge.md). Its own writes to shared channels are dropped (the LM head reads only
    reserved ones), its writes to reserved b channels doubled; a neuron relu(b) per pair writes +1 on
    1 - b and, by b's side, -1 where b is shared or +1 where it is reserved; one constant neuron writes
    -1 on every 1 - b and on every reserved b, and minus its value on every anchor. ``rows``: free FFN
    rows, the pairs' then the constant's.

    Signed bits: a reserved one holds s = 2b - 1 already (the FFN's writes to it stay as they are); a
    shared one is zeroed by a neuron relu(b) (its gate reads (one + s) / 2: 0 or 1 exactly) writing
    -2 on s, and the constant neuron's +1 (s - 2b + 1 = 0).

    The constant neuron also writes ``one_value`` - 1 on ``one`` (the final norm's o:
    ``_unit_norm_weight``), and the group code's bits are written (``_code_writes``)."""
    gate, up, down = (state[prefix + n] for n in ("gate_proj.weight", "up_proj.weight", "down_proj.weight"))
    one = ch.cmap[0]
    if bool(down[one].any()):
        raise Netlist2TFError("the last compiled FFN writes the constant channel")
    writes = {c: down[ch.cmap[c]].double() * (1 if ch.signed else 2) for c, _ in ch.code}   # 2 x (its b's change)
    shared = torch.ones(ch.D, dtype=torch.bool)
    shared[list(ch.reserved)] = False
    down[shared] = 0
    if ch.signed:
        for j, (c, _, _) in zip(rows, ch.clean):
            gate[j, one] = gate[j, ch.cmap[c]] = K / 2
            up[j, one] = 1.0 / K
            down[ch.cmap[c], j] = -2
        j = rows[len(ch.clean)]
        gate[j, one] = K
        up[j, one] = 1.0 / K
        for c, _, _ in ch.clean:
            down[ch.cmap[c], j] = 1
        for c, v in ch.anchors:
            down[c, j] = -v
        down[one, j] = one_value - 1
        _code_writes(down, ch, writes, {c: row for row, (c, _, _) in zip(rows, ch.clean)}, j)
        return
    down *= 2
    for j, (hi, lo, hi_shared) in zip(rows, ch.clean):
        gate[j, ch.cmap[hi]] = K
        up[j, one] = 1.0 / K
        down[ch.cmap[lo], j] = 1
        down[ch.cmap[hi], j] = -1 if hi_shared else 1
    j = rows[len(ch.clean)]
    gate[j, one] = K
    up[j, one] = 1.0 / K
    for hi, lo, hi_shared in ch.clean:
        down[ch.cmap[lo], j] = -1
        if not hi_shared:
            down[ch.cmap[hi], j] = -1
    for c, v in ch.anchors:
        down[c, j] = -v
    down[one, j] = one_value - 1
    _code_writes(down, ch, writes, {hi: row for row, (hi, _, _) in zip(rows, ch.clean)}, j)


def _code_writes(down: torch.Tensor, ch: _Channels, writes: dict, clean_row: dict, constant: int) -> None:
    """The last compiled FFN's writes of the group code (``_code_head``): bit j's channel (0 before: no
    compiled tensor touches it) ends as c_j = sum_f 2 b_f - 1 over the flags f whose word has bit j (+1
    if the flag set is one of them, else -1). 2 b_f after the FFN is 2 b_f before it (its clean neuron's
    activation b, weight 2) plus twice the FFN's own change of b_f (``writes``: the flag's row of
    ``down`` as compiled; a signed flag's row changes s = 2b - 1); the constant neuron adds the -1."""
    if not ch.code:
        return
    for j, m in enumerate(ch.code_channels):
        row = torch.zeros(down.shape[1], dtype=torch.float64)
        for c, word in ch.code:
            if (word >> j) & 1:
                row += writes[c]
                row[clean_row[c]] += 2
        row[constant] = -1
        down[m] = row.to(down.dtype)
        if not torch.equal(down[m].double(), row):
            raise Netlist2TFError(f"the group code's writes in the last compiled FFN are not exact in {down.dtype}")


def _unit_norm_weight(D: int, ones: int, eps: float, dtype) -> tuple[float, float, float]:
    """(w, v, o): the final-norm weight w, held in ``dtype``, for which the real ``Qwen3_5RMSNorm`` over
    D channels maps a vector of ``ones`` entries, ``one`` = o and the rest +-1 (zeros elsewhere), to
    exactly o v and +-v, v and o powers of two (the last compiled FFN leaves o on ``one``, and the LM
    head's trace rows are divided by v, their ``one`` column by o v: exact). The norm computes
    fl(r * fl(1 + w)), r = rsqrt(mean square + eps); v is the power of two in (r / 2, r], so 1 + w
    = v / r lies in [0.5, 1), where it reaches every value of its grid; in float32 that grid is still
    coarser than the window that rounds to v for some r (tests/merge/test_merge.py's sweep of widths meets
    such r), and another o moves r. bfloat16: always o = 1 (its 1 + w steps 2^-9 at most, finer than its window)."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5RMSNorm

    norm = Qwen3_5RMSNorm(D, eps=eps).to(dtype)
    bits = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}[dtype]
    for o in NORM_ONE_VALUES:
        x = torch.zeros(1, D, dtype=dtype)
        x[0, :ones] = 1
        x[0, 0], x[0, ones - 1] = -1, o
        r = float((x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps))[0, 1])
        v = 2.0 ** math.floor(math.log2(r))
        start = torch.tensor([v / r - 1], dtype=dtype).view(bits)
        with torch.no_grad():
            for k in sorted(range(-64, 65), key=abs):
                w = (start + k).view(dtype)
                norm.weight.fill_(float(w))
                y = norm(x)[0].double()
                if float(y[1]) == v and float(y[0]) == -v and float(y[ones - 1]) == o * v:
                    return float(w), v, o
    raise Netlist2TFError(f"no {dtype} final-norm weight maps {ones} of {D} channels +-1 to a power of two; "
                          f"merge in another --dtype")


# --------------------------------------------------------------------------------------------------
# The published multimodal layout: the vision tower, the MTP head, the tokenizer

MERGER_OUT = ("model.visual.merger.linear_fc2.weight", "model.visual.merger.linear_fc2.bias")
# The files of a base's tokenizer and processors copied into the merged folder (those it has).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                   "merges.txt", "added_tokens.json", "chat_template.jinja", "chat_template.json",
                   "preprocessor_config.json", "video_preprocessor_config.json", "processor_config.json",
                   "generation_config.json")


def _carry_multimodal(base, D: int, B0: int, flag: int, scale: float, flag_value, dtype) -> dict:
    """{checkpoint key: tensor} of a multimodal base's weights outside the text model, for the merged
    folder: every one bit for bit, except the vision merger's last projection, whose output is the
    embedding of an image position: its rows go to the base channels times ``scale`` (a power of two:
    exact) and its bias puts the text flag on the flag channel, so an image position is in the merged
    residual what a text token is: the base's vector times s, the flag, zeros on the compiled channels."""
    out = {}
    vision = base.doc.get("vision_config") or {}
    for key in base.skipped:
        t = base.files.get(key)
        if key in MERGER_OUT:
            if t.shape[0] != base.config["hidden_size"] or vision.get("out_hidden_size", t.shape[0]) != t.shape[0]:
                raise Netlist2TFError(f"base checkpoint {base.folder}: {key} has {t.shape[0]} output rows, the "
                                      f"text hidden size is {base.config['hidden_size']} (vision_config.out_hidden_size "
                                      f"{vision.get('out_hidden_size')!r}); the vision tower must feed the text model")
            placed = torch.zeros((D,) + tuple(t.shape[1:]), dtype=dtype)
            placed[B0:B0 + t.shape[0]] = t.to(dtype) * scale
            if key.endswith("bias"):
                placed[flag] = flag_value
            out[key] = placed
        else:
            out[key] = t
    return out


def _multimodal_config(base, text_config, D: int):
    """The merged ``Qwen3_5Config``: the base's top-level keys and vision config, the merged text
    config, the vision output widened to the merged hidden size D."""
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5Config

    top = {k: v for k, v in base.doc.items() if k not in ("architectures", "transformers_version", "dtype",
                                                          "torch_dtype", "_name_or_path", "model_type",
                                                          "text_config", "vision_config")}
    vision = dict(base.doc.get("vision_config") or {})
    vision["out_hidden_size"] = D
    top["tie_word_embeddings"] = False
    config = Qwen3_5Config(text_config=text_config.to_dict(), vision_config=vision, **top)
    config.architectures = ["Qwen3_5ForConditionalGeneration"]
    return config


def _tokenizer_files(base_folder: Path, names: list, offset: int) -> tuple[dict, dict]:
    """The base's tokenizer, chat template and processor files for the merged folder, with the trace
    tokens added to the tokenizer as special tokens (trace token t: id ``offset + t``, content
    ``names[t]``, netlist2tf.checkpoint.hf's readable names): ({file name: bytes}, what merge.json records: the
    files copied and the id range of the trace tokens, none when the base has no tokenizer.json).
    Read and checked before anything is written; raises Netlist2TFError naming a malformed file, a
    base token id at or beyond ``offset`` or a base token named like a trace token."""
    files = {n: (base_folder / n).read_bytes() for n in TOKENIZER_FILES if (base_folder / n).is_file()}
    record = {"copied": list(files)}
    if "tokenizer.json" not in files:
        return files, record
    entry = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}

    def dump(doc) -> bytes:
        return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    try:
        doc = json.loads(files["tokenizer.json"])
        vocab = doc["model"].get("vocab") or {}
        added = doc.setdefault("added_tokens", [])
        known = set(vocab if isinstance(vocab, dict) else (v[0] for v in vocab)) | {a["content"] for a in added}
        ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))
        ids += [a["id"] for a in added]
        extra = {n: json.loads(files[n]) for n in ("tokenizer_config.json", "added_tokens.json") if n in files}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Netlist2TFError(f"base checkpoint {base_folder}: its tokenizer files are not what tokenizers and "
                              f"transformers write ({type(exc).__name__}: {exc})")
    if ids and max(ids) >= offset:
        raise Netlist2TFError(f"base checkpoint {base_folder}: its tokenizer has token id {max(ids)}, but the "
                              f"model's vocabulary is {offset}; the trace tokens start at {offset}")
    clash = sorted(set(names) & known)
    if clash:
        raise Netlist2TFError(f"base checkpoint {base_folder}: its tokenizer already has the token(s) "
                              f"{clash[:3]}, which name trace tokens")
    added += [{"id": offset + t, "content": n, **entry} for t, n in enumerate(names)]
    files["tokenizer.json"] = dump(doc)
    cfg = extra.get("tokenizer_config.json")
    if isinstance(cfg, dict) and isinstance(cfg.get("added_tokens_decoder"), dict):
        cfg["added_tokens_decoder"].update({str(offset + t): {"content": n, **entry} for t, n in enumerate(names)})
        files["tokenizer_config.json"] = dump(cfg)
    if isinstance(extra.get("added_tokens.json"), dict):
        files["added_tokens.json"] = dump(extra["added_tokens.json"] | {n: offset + t for t, n in enumerate(names)})
    record["trace_tokens"] = [offset, offset + len(names)]
    return files, record


# --------------------------------------------------------------------------------------------------
# The merge

def merge_checkpoints(compiled_folder, base_folder, out_folder, dtype: torch.dtype | None = None,
                      log=None, force: bool = False, layout: str = "auto") -> dict:
    """Write the merged checkpoint to ``out_folder`` (replaced atomically; a folder that is not one of
    ours is refused unless ``force``: netlist2tf.common.outputs); returns merge.json's dict.

    Raises Netlist2TFError naming every geometry number that differs, a weight that is missing or
    misshapen, or a compiled model whose layers touch channels outside its pairs."""
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig

    from netlist2tf.checkpoint import read_checkpoint, seal
    from netlist2tf.checkpoint import token_names

    log = log or (lambda msg: None)
    layout_name = layout
    compiled_folder, base_folder, out_folder = Path(compiled_folder), Path(base_folder), Path(out_folder)
    check_output_folder(out_folder, "--out", "merged checkpoint", force, inputs=(compiled_folder, base_folder),
                        caches_ok=True)
    if (compiled_folder / "merge.json").is_file():
        raise Netlist2TFError(f"{compiled_folder} is already a merged checkpoint; merge the compiled "
                              f"checkpoint it was made from")
    protocol, netlist, cmeta = read_checkpoint(compiled_folder)   # its files present and sealed, as compiled
    cpu = _Checkpoint(compiled_folder, "compiled checkpoint")
    base = _Checkpoint(base_folder, "base checkpoint")
    cc, bc = cpu.config, base.config
    diff = [f"{k}: compiled {cc.get(k)!r}, base {bc.get(k)!r}" for k in GEOMETRY if cc.get(k) != bc.get(k)]
    if diff:
        raise Netlist2TFError(
            "the compiled model and the base differ in shapes Qwen3.5 shares between all layers ("
            + "; ".join(diff) + f"); compile the design for this base with `netlist2tf compile DESIGN "
            f"--target {base_folder}` and merge that")
    table = _table(cc)
    cpu.check(table, cc)
    base.check(table, bc)
    cpu_attention = [i for i, t in enumerate(cc["layer_types"]) if t == "full_attention" and any(
        bool(cpu.get(f"model.layers.{i}.self_attn.{p}_proj.weight").any()) for p in "qkvo")]
    rotary = int(bc["head_dim"] * (bc.get("rope_parameters") or {}).get("partial_rotary_factor", 1.0))
    if cpu_attention and cc.get("rope_parameters") != bc.get("rope_parameters") and not all(
            _rope_free(cpu, i, cc, rotary) for i in cpu_attention):
        raise Netlist2TFError(f"the compiled model's attention layers {cpu_attention} use RoPE "
                              f"{cc.get('rope_parameters')}, the base {bc.get('rope_parameters')}; "
                              f"compile with --target {base_folder}")

    emb = cpu.get("model.embed_tokens.weight").float()
    try:
        layout = _compiled_layout(emb)
    except Netlist2TFError as exc:
        raise Netlist2TFError(f"{compiled_folder}: {exc}")
    anchor_reads = _anchor_reads(cpu, layout) if layout.signed else []
    if anchor_reads:                    # a constant split over an anchor: unfold the signed bits (exact)
        log(f"unfolding the signed bits into pairs: {anchor_reads[0]}"
            f"{f' and {len(anchor_reads) - 1} more' if len(anchor_reads) > 1 else ''} read(s) an anchor")
        try:
            cpu = _Unfolded(cpu, layout)
        except Netlist2TFError as exc:
            raise Netlist2TFError(f"{compiled_folder}: {exc}")
        layout, cc = cpu.layout, cpu.config
        emb = cpu.get("model.embed_tokens.weight").float()
    P = _bits_end(layout)
    Db, Dc = bc["hidden_size"], cc["hidden_size"]
    Vb, Vt = bc["vocab_size"], cc["vocab_size"]
    dtype = dtype or base.dtype
    eps = bc["rms_norm_eps"]
    n_cpu = len(cc["layer_types"])
    if layout_name not in LAYOUTS:
        raise Netlist2TFError(f"--layout {layout_name!r}: choose one of {', '.join(LAYOUTS)}")
    ch, why = None, ["--layout separate"]
    if layout_name != "separate":
        ch, why = _shared_channels(cpu, layout, cc, base, dtype, cmeta.get("readout", {}).get("one_hot", ()))
        if ch is None and layout_name == "shared":
            raise Netlist2TFError(f"{compiled_folder} cannot share residual channels with the base: "
                                  + "; ".join(why) + "; merge with --layout separate (or auto)")
    if ch is None:
        ch = _separate_channels(layout, Db)
    D, flag, B0 = ch.D, ch.flag, ch.B0
    one = ch.cmap[layout.one]
    scale, flag_value, comp = _compensation(Db, D, eps)
    cmap = torch.tensor(ch.cmap)
    clean_rows = len(ch.clean) + 1 if ch.layout == "shared" else 0
    last = f"model.layers.{n_cpu - 1}.mlp."
    I = max(cc["intermediate_size"], bc["intermediate_size"])
    free = []
    if clean_rows:                  # the last compiled FFN's unused rows, then any the wider base adds
        busy = (cpu.get(last + "gate_proj.weight").any(dim=1) | cpu.get(last + "up_proj.weight").any(dim=1)
                | cpu.get(last + "down_proj.weight").any(dim=0))
        free = torch.nonzero(~busy).flatten().tolist() + list(range(cc["intermediate_size"], I))
    if clean_rows > len(free):
        free += list(range(I, I + clean_rows - len(free)))
        I = free[-1] + 1
    if ch.layout == "shared":
        code = (f", a {len(ch.code_channels)}-bit code of {len(ch.code)} one-hot flags the LM head reads"
                if ch.code else "")
        log(f"merged residual, shared: {ch.n_shared} compiled channels ({len(ch.anchors)} anchors) on the "
            f"base's {Db}, then {len(ch.reserved)} reserved (one, {len(ch.reserved) - 1 - len(ch.code_channels)} "
            f"bits read on text positions{code}) + flag = {D} (+{100 * (D - Db) / Db:.2f} %); the last compiled FFN clears "
            f"{len(ch.clean)} {'signed channels' if ch.signed else 'pairs'}")
    else:
        log(f"merged residual, separate ({'; '.join(why)}): {P} compiled channels + {len(ch.anchors)} anchors "
            f"+ flag + {Db} base = {D}")

    def place(t: torch.Tensor, axes, key: str, hidden=None) -> torch.Tensor:
        """``t`` in a zero tensor of the merged shape: a compiled tensor's channels c < P at
        ``cmap[c]`` (its channels beyond must be zero: nothing else may read or write them), a base
        tensor's (``hidden`` = B0) at B0..; its intermediate axis from 0."""
        shape = tuple(D if a == "H" else I if a == "I" else n for a, n in zip(axes, t.shape))
        out = torch.zeros(shape, dtype=dtype)
        src = t.to(dtype)
        idx, mapped = [], None
        for d, (a, n) in enumerate(zip(axes, t.shape)):
            if a != "H":
                idx.append(slice(0, n))
            elif hidden is not None:
                idx.append(slice(hidden, hidden + n))
            else:
                if P < n and bool(src.narrow(d, P, n - P).any()):
                    raise Netlist2TFError(f"{compiled_folder}: {key} uses residual channels beyond the "
                                          f"bit pairs; it cannot be merged")
                src = src.narrow(d, 0, P)
                idx.append(slice(None))
                mapped = d
        if mapped is None:
            out[tuple(idx)] = src
        else:                                  # the compiled channels c at cmap[c]
            out[tuple(idx)].index_copy_(mapped, cmap, src)
        return out

    def folded(t: torch.Tensor, key: str, rows=None, signed: bool = False) -> torch.Tensor:
        out = _fold(t, ch, rows, signed)
        if out is None:
            raise Netlist2TFError(f"{compiled_folder}: {key} read as `one - b` on the shared layout is not "
                                  f"exact in {dtype}; merge with --layout separate")
        return out

    def compiled_norm(t: torch.Tensor) -> torch.Tensor:
        w = torch.zeros(D, dtype=torch.float64)
        w[cmap] = t[:P].double()
        if ch.layout == "separate":
            w[P:flag] = NORM_WEIGHT
        for c, _ in ch.anchors:
            w[c] = NORM_WEIGHT
        return w

    state = {}
    for i, kind in enumerate(cc["layer_types"]):
        for suffix, axes in table[kind].items():
            key = f"model.layers.{i}.{suffix}"
            t = cpu.get(key)
            if axes == ("H",):                     # a decoder RMSNorm: identity weight on the pairs
                state[key] = compiled_norm(t)
                continue
            state[key] = place(t, axes, key)
            if ch.layout == "shared" and (suffix in TEXT_ZERO or suffix in ATTENTION_TEXT_ZERO):
                state[key] = folded(state[key], key)
        if kind != "linear_attention":
            continue
        p = f"model.layers.{i}.linear_attn."
        if ch.layout == "shared":
            conv = state[p + "conv1d.weight"].squeeze(1)
            rows = torch.nonzero((conv[:, :-1] != 0).any(dim=1)).flatten()
            if len(rows):
                state[p + "in_proj_qkv.weight"] = folded(state[p + "in_proj_qkv.weight"], p + "in_proj_qkv", rows)
            w_b = state[p + "in_proj_b.weight"]
            if bool(w_b[:, B0:B0 + Db].any()):
                # The write strength reads channels that carry text: the flag must outweigh them.
                w_b[:, flag] = _shut(base, ch, Db, scale, flag_value, eps, w_b,
                                     state[f"model.layers.{i}.input_layernorm.weight"]).to(dtype)
            else:
                w_b[:, flag] = BETA_SHUT / flag_value
            w_z = state[p + "in_proj_z.weight"]
            rows = torch.nonzero(w_z[:, B0:B0 + Db].any(dim=1)).flatten()
            if len(rows):
                # An output gate that reads channels text carries: the flag shuts it (silu(z) == 0).
                w_z[rows, flag] = _shut(base, ch, Db, scale, flag_value, eps, w_z[rows],
                                        state[f"model.layers.{i}.input_layernorm.weight"]).to(dtype)
        else:
            # A text token right after trace tokens still sees them through the short convolution, so
            # its key and value are not zero; the flag shuts its write (beta = sigmoid(-128) = 0): text
            # leaves the compiled memories exactly as the trace left them.
            state[p + "in_proj_b.weight"][:, flag] = BETA_SHUT / flag_value
    if ch.layout == "shared":
        norm_w, norm_v, norm_o = _unit_norm_weight(D, len(ch.reserved), eps, dtype)
        _clean_last_ffn(state, last, ch, free[:clean_rows], norm_o)
    for i, kind in enumerate(bc["layer_types"]):
        for suffix, axes in table[kind].items():
            t = base.get(f"model.layers.{i}.{suffix}")
            key = f"model.layers.{n_cpu + i}.{suffix}"
            if axes == ("H",):
                w = torch.zeros(D, dtype=torch.float64)
                w[B0:B0 + Db] = (1 + t.double()) * comp - 1
                state[key] = w
            else:
                state[key] = place(t, axes, key, hidden=B0) * (scale if suffix in WRITES else 1)

    # Embedding: base tokens, then trace tokens with the anchors for D'.
    E = torch.zeros(Vb + Vt, D, dtype=dtype)
    E[:Vb, B0:B0 + Db] = base.get("model.embed_tokens.weight").to(dtype) * scale
    E[:Vb, flag] = flag_value
    E[Vb:, cmap] = emb[:, :P].to(dtype)
    for c, v in ch.anchors:
        E[Vb:, c] = v
    if not bool(((E[Vb:].double() ** 2).sum(dim=1) == SCALE * SCALE * D).all()):
        raise AssertionError("merged anchors do not make every trace position's mean square 64")
    state["model.embed_tokens.weight"] = E
    head = base.get("model.embed_tokens.weight" if base.tied and "lm_head.weight" not in base.keys
                    else "lm_head.weight")
    H = torch.zeros(Vb + Vt, D, dtype=dtype)
    H[:Vb, B0:B0 + Db] = head.to(dtype)
    H[:Vb, one] = BASE_BLOCK
    trace_head = place(cpu.get("lm_head.weight"), ("V", "H"), "lm_head.weight")[:Vt]
    norm = compiled_norm(cpu.get("model.norm.weight"))
    if ch.layout == "shared":       # the final residual of a trace position: o on `one`, +-1 on the reserved bits
        norm[:] = 0
        norm[list(ch.reserved)] = norm_w                 # o v and +-v after the norm: powers of two
        H[Vb:] = _code_head(folded(trace_head, "lm_head.weight", signed=True), ch) / norm_v
        H[Vb:, one] /= norm_o
    else:
        H[Vb:] = trace_head
    H[Vb:, flag] = FLAG_WEIGHT
    state["lm_head.weight"] = H
    norm[B0:B0 + Db] = (1 + base.get("model.norm.weight").double()) * comp - 1
    state["model.norm.weight"] = norm

    cfg = {k: v for k, v in bc.items() if k not in ("architectures", "transformers_version", "dtype",
                                                     "torch_dtype", "_name_or_path", "model_type")}
    cfg.update(hidden_size=D, intermediate_size=I, num_hidden_layers=n_cpu + len(bc["layer_types"]),
               layer_types=list(cc["layer_types"]) + list(bc["layer_types"]), vocab_size=Vb + Vt,
               tie_word_embeddings=False)
    carried = {}
    if base.multimodal:
        carried = _carry_multimodal(base, D, B0, flag, scale, E[0, flag], dtype)
    if not any(k.startswith("mtp.") for k in carried):
        for k in ("mtp_num_hidden_layers", "mtp_use_dedicated_embeddings"):
            cfg.pop(k, None)            # no MTP head carried
    text_config = Qwen3_5TextConfig(**cfg)
    text_config.dtype = str(dtype).split(".")[-1]
    if base.multimodal:
        config = _multimodal_config(base, text_config, D)
    else:
        config = text_config
        config.architectures = ["Qwen3_5ForCausalLM"]
    config.dtype = text_config.dtype
    weights = {checkpoint_name(k, base.multimodal): state[k].to(dtype) for k in state} | carried
    shard_bytes = base.files.file_bytes() if base.files.files[0] == INDEX else None

    tokenizer_files, tokenizer_record = _tokenizer_files(base_folder, token_names(protocol, netlist), Vb)
    info = {"format": FORMAT, "trace_token_offset": Vb, "trace_vocab_size": Vt, "tokenizer": tokenizer_record,
            "base": {"folder": str(base_folder), "hidden_size": Db, "layers": len(bc["layer_types"]),
                     "vocab_size": Vb, "multimodal": base.multimodal, "tied_embeddings": base.tied,
                     "carried": sorted(carried)},
            "compiled": {"folder": str(compiled_folder), "hidden_size": Dc, "layers": n_cpu},
            "layout": ch.layout, "channels": ch.record(P, Db),
            "layout_asked": layout_name, "not_shared_because": [] if ch.layout == "shared" else why,
            "layers": {"compiled": [0, n_cpu], "base": [n_cpu, n_cpu + len(bc["layer_types"])]},
            **({"final_norm": {"one": norm_o, "scale": norm_v}} if ch.layout == "shared" else {}),
            "residual_scale": scale, "text_flag": flag_value, "norm_compensation": comp, "hidden_size": D, "intermediate_size": I,
            "dtype": config.dtype}
    def write(tmp: Path):
        config.save_pretrained(tmp)
        (tmp / "generation_config.json").write_text(json.dumps(
            {"do_sample": False, "transformers_version": config.transformers_version}, indent=2) + "\n")
        files = write_shards(tmp, weights, shard_bytes)
        for name in ("compile.json", "netlist.json", "trace_protocol.json"):
            shutil.copyfile(compiled_folder / name, tmp / name)
        if (compiled_folder / "report").is_dir():            # the compiled layers' report (the CPU's)
            shutil.copytree(compiled_folder / "report", tmp / "report")
        for name, data in tokenizer_files.items():       # the base's generation_config.json replaces ours
            (tmp / name).write_bytes(data)
        info["sealed"] = ["config.json"] + files
        info["sha256"] = seal(tmp, info["sealed"])
        (tmp / "merge.json").write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")

    write_folder(out_folder, write, "merged checkpoint", force,
                 size=sum(t.numel() * t.element_size() for t in weights.values()))
    return info


# --------------------------------------------------------------------------------------------------
# Running a merged checkpoint's trace


# --------------------------------------------------------------------------------------------------
# The embedded default base: a small random Qwen3.5 checkpoint


