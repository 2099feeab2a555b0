"""The target machine: one frozen description of the transformer a design is compiled onto.

Two kinds:

* ``Target.standalone(...)``: shapes chosen for the design (DeltaNet key head dim may be a power of 4,
  where the ``d_k ** -0.5`` query scale is exact);
* ``Target.from_config_json(path)``: the per-layer shapes of a real Qwen3.5 checkpoint (text-only
  ``qwen3_5_text`` or the published multimodal ``qwen3_5`` layout with a ``text_config``), which the
  compiled layers must use exactly so they can later be merged in front of that checkpoint.

``to_hf_config`` gives the ``Qwen3_5TextConfig`` of the compiled model; ``fits`` says whether a
resource demand fits and, if not, exactly which numbers do not.
"""

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from netlist2tf.common import Netlist2TFError

FULL, LINEAR = "full_attention", "linear_attention"
# The published dense Qwen3.5 configs (netlist2tf/geometries/README.md says where each value is from).
GEOMETRY_DIR = Path(__file__).parent / "geometries"


def geometries() -> dict[str, Path]:
    """{name: config.json path} of the published geometries we keep ("qwen3.5-4b", ...), by size."""
    paths = sorted(GEOMETRY_DIR.glob("qwen3.5-*.json"), key=lambda p: float(p.stem.split("-")[1][:-1]))
    return {p.stem: p for p in paths}


def geometry_path(name: str) -> Path | None:
    """The kept config of a published geometry named ``name`` ("qwen3.5-4b", "Qwen3.5-4B" or
    "Qwen/Qwen3.5-4B", any case), or None."""
    key = str(name).lower().removeprefix("qwen/")
    return geometries().get(key)


@dataclass(frozen=True, slots=True)
class Target:
    """Shapes of the compiled model. ``layer_types`` has one entry per layer."""
    hidden_size: int
    intermediate_size: int
    layer_types: tuple[str, ...]
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    partial_rotary_factor: float = 0.25
    linear_conv_kernel_dim: int = 4
    rms_norm_eps: float = 1e-6
    name: str = "standalone"
    source: str = ""                 # the config.json it was read from, if any
    extra: tuple = field(default=(), compare=False)   # unrelated keys kept for the report

    def __post_init__(self):
        problems = []
        for key in ("hidden_size", "intermediate_size", "linear_num_key_heads", "linear_num_value_heads",
                    "linear_key_head_dim", "linear_value_head_dim", "num_attention_heads",
                    "num_key_value_heads", "head_dim", "linear_conv_kernel_dim"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                problems.append(f"{key} must be a positive integer, not {getattr(self, key)!r}")
        if not self.layer_types:
            problems.append("layer_types is empty")
        bad = sorted(set(self.layer_types) - {FULL, LINEAR})
        if bad:
            problems.append(f"unknown layer types {bad}; Qwen3.5 layers are {FULL!r} or {LINEAR!r}")
        if not problems and self.linear_num_value_heads % self.linear_num_key_heads:
            problems.append("linear_num_value_heads must be a multiple of linear_num_key_heads")
        if not problems and self.num_attention_heads % self.num_key_value_heads:
            problems.append("num_attention_heads must be a multiple of num_key_value_heads")
        if problems:
            raise Netlist2TFError(f"target {self.name}{' (' + self.source + ')' if self.source else ''} "
                                  f"is not a valid Qwen3.5 text model: " + "; ".join(problems))

    @property
    def num_layers(self) -> int:
        return len(self.layer_types)

    @property
    def key_dim_exact(self) -> bool:
        """True when the DeltaNet query scale d_k**-0.5 is a power of two (d_k a power of 4)."""
        d = self.linear_key_head_dim
        return d & (d - 1) == 0 and (d.bit_length() - 1) % 2 == 0

    @staticmethod
    def standalone(layers: int = 11, hidden_size: int = 1024, intermediate_size: int = 4096,
                   linear_heads: int = 16, linear_key_head_dim: int = 64, linear_value_head_dim: int = 64,
                   attention_heads: int = 4, head_dim: int = 64, full_attention_every: int = 4) -> "Target":
        """A target sized for a design: ``layers`` layers, every ``full_attention_every``-th (and
        layer 0, so lookups of the prompt are possible first) a full-attention layer."""
        if layers < 1:
            raise Netlist2TFError(f"--layers must be at least 1 (got {layers})")
        types = tuple(FULL if i % full_attention_every == 0 else LINEAR for i in range(layers))
        return Target(hidden_size, intermediate_size, types, linear_heads, linear_heads,
                      linear_key_head_dim, linear_value_head_dim, attention_heads, attention_heads, head_dim)

    @staticmethod
    def from_config_json(path, layers: int | None = None) -> "Target":
        """The per-layer shapes of a Qwen3.5 checkpoint's ``config.json`` (file or folder), or of a
        published geometry by name (``geometries()``: "qwen3.5-0.8b", "qwen3.5-2b", "qwen3.5-4b", "qwen3.5-9b").

        ``layers`` (default: the checkpoint's own count) sets how many compiled layers to build with
        those shapes; their types repeat the checkpoint's pattern. Raises Netlist2TFError for a file
        that is missing, not JSON, or not a Qwen3.5 config.
        """
        path = Path(path)
        if not path.exists() and geometry_path(str(path)):
            path = geometry_path(str(path))
        elif path.is_dir():
            path = path / "config.json"
        from netlist2tf.common import MAX_SMALL_TEXT_BYTES, read_text

        if not path.exists():
            raise Netlist2TFError(f"cannot read target config {path}: no such file; give a Qwen3.5 config.json, a "
                                  f"checkpoint folder or a published geometry ({', '.join(geometries())})")
        try:
            doc = json.loads(read_text(path, f"target config {path}", MAX_SMALL_TEXT_BYTES))
        except json.JSONDecodeError as exc:
            raise Netlist2TFError(f"target config {path} is not JSON ({exc.msg} at line {exc.lineno})")
        text = doc.get("text_config", doc) if isinstance(doc, dict) else None
        kind = doc.get("model_type") if isinstance(doc, dict) else None
        if not isinstance(text, dict) or kind not in ("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"):
            raise Netlist2TFError(f"{path} is not a Qwen3.5 config (model_type {kind!r}); give the "
                                  f"config.json of a Qwen3.5 checkpoint")
        if "intermediate_size" not in text and "moe_intermediate_size" in text:
            raise Netlist2TFError(f"{path} is a mixture-of-experts Qwen3.5 model; netlist2tf targets the "
                                  f"dense models (a single MLP per layer)")
        required = ("hidden_size", "intermediate_size", "layer_types", "linear_num_key_heads",
                    "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                    "num_attention_heads", "num_key_value_heads")
        missing = [k for k in required if k not in text]
        if missing:
            raise Netlist2TFError(f"{path} lacks the Qwen3.5 key(s) {', '.join(missing)}")
        ints = [k for k in required if k != "layer_types"] + [k for k in ("head_dim", "linear_conv_kernel_dim")
                                                              if k in text]
        bad = [f"{k} = {text[k]!r}" for k in ints if not isinstance(text[k], int) or isinstance(text[k], bool)
               or text[k] <= 0]
        if "rms_norm_eps" in text and (not isinstance(text["rms_norm_eps"], (int, float))
                                       or isinstance(text["rms_norm_eps"], bool) or not text["rms_norm_eps"] > 0):
            bad.append(f"rms_norm_eps = {text['rms_norm_eps']!r}")
        if (not isinstance(text["layer_types"], list) or not text["layer_types"]
                or not set(text["layer_types"]) <= {LINEAR, FULL}):
            bad.append(f"layer_types = {text['layer_types']!r} (a list of {LINEAR!r} and {FULL!r})")
        if bad:
            raise Netlist2TFError(f"{path}: {'; '.join(bad)}: the Qwen3.5 shape fields must be positive "
                                  f"integers (rms_norm_eps a positive number); fix the config")
        try:
            types = tuple(text["layer_types"])
            rope = text.get("rope_parameters") or text.get("rope_scaling") or {}
            count = layers or len(types)
            return Target(
                hidden_size=text["hidden_size"], intermediate_size=text["intermediate_size"],
                layer_types=tuple(types[i % len(types)] for i in range(count)),
                linear_num_key_heads=text["linear_num_key_heads"],
                linear_num_value_heads=text["linear_num_value_heads"],
                linear_key_head_dim=text["linear_key_head_dim"],
                linear_value_head_dim=text["linear_value_head_dim"],
                num_attention_heads=text["num_attention_heads"],
                num_key_value_heads=text["num_key_value_heads"],
                head_dim=text.get("head_dim", text["hidden_size"] // text["num_attention_heads"]),
                partial_rotary_factor=rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 0.25)),
                linear_conv_kernel_dim=text.get("linear_conv_kernel_dim", 4),
                rms_norm_eps=text.get("rms_norm_eps", 1e-6),
                name=str(doc.get("_name_or_path") or path.parent.name or "checkpoint"), source=str(path))
        except (TypeError, ValueError) as exc:
            raise Netlist2TFError(f"{path} has a malformed Qwen3.5 text config: {exc}")

    def base_parameters(self) -> int:
        """The parameter count of the checkpoint this target was read from (``source``): the model
        transformers builds from its config.json, vision tower included for a multimodal layout,
        tied embeddings counted once (the MTP head, which transformers does not build, is not
        counted). Built on the meta device: no memory, about a second."""
        import torch
        from transformers import AutoModelForCausalLM, AutoModelForImageTextToText
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        doc = json.loads(Path(self.source).read_text())
        config = CONFIG_MAPPING[doc["model_type"]].from_dict(doc)
        with torch.device("meta"):
            auto = AutoModelForImageTextToText if hasattr(config, "vision_config") else AutoModelForCausalLM
            model = auto.from_config(config)
        return sum(p.numel() for p in model.parameters())

    def layer_parameters(self, kind: str) -> int:
        """The parameters one decoder layer of type ``kind`` has at these shapes (its mixer, FFN and
        two norms): ``dense_breakdown``'s formula for a single layer."""

        one = dense_breakdown(replace(self, layer_types=(kind,)), 0)
        return sum(one.values()) - self.hidden_size      # less the final norm

    def hf_config_values(self, vocab_size: int) -> dict:
        """The values of the compiled model's ``Qwen3_5TextConfig`` that this target sets (the rest are
        transformers' defaults): ``to_hf_config``'s arguments, and what ``checkpoint.hf.config_text``
        writes without transformers."""
        return dict(vocab_size=vocab_size, hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                    num_hidden_layers=self.num_layers, layer_types=list(self.layer_types),
                    linear_num_key_heads=self.linear_num_key_heads, linear_num_value_heads=self.linear_num_value_heads,
                    linear_key_head_dim=self.linear_key_head_dim, linear_value_head_dim=self.linear_value_head_dim,
                    num_attention_heads=self.num_attention_heads, num_key_value_heads=self.num_key_value_heads,
                    head_dim=self.head_dim, linear_conv_kernel_dim=self.linear_conv_kernel_dim,
                    rms_norm_eps=self.rms_norm_eps, tie_word_embeddings=False,
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                     "partial_rotary_factor": self.partial_rotary_factor})

    def to_hf_config(self, vocab_size: int):
        """The ``Qwen3_5TextConfig`` of a compiled model on this target."""
        from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig

        return Qwen3_5TextConfig(**self.hf_config_values(vocab_size))

    def fits(self, *, hidden_channels: int, neurons_per_layer, deltanet_heads_per_layer,
             attention_heads_per_layer) -> list[str]:
        """Every way a demand exceeds this target, as sentences with the numbers; [] if it fits.

        The per-layer demands are sequences indexed by layer (shorter ones mean 0 beyond)."""
        out = []
        if hidden_channels > self.hidden_size:
            out.append(f"the residual stream needs {hidden_channels} channels, the target's hidden size "
                       f"is {self.hidden_size}")
        for kind, demand, cap, ok_type in (
                ("FFN neurons", neurons_per_layer, self.intermediate_size, None),
                ("DeltaNet value heads", deltanet_heads_per_layer, self.linear_num_value_heads, LINEAR),
                ("attention heads", attention_heads_per_layer, self.num_attention_heads, FULL)):
            for layer, need in enumerate(demand):
                if not need:
                    continue
                if layer >= self.num_layers:
                    out.append(f"layer {layer} needs {need} {kind} but the target has only "
                               f"{self.num_layers} layers")
                elif ok_type and self.layer_types[layer] != ok_type:
                    out.append(f"layer {layer} needs {need} {kind} but it is a {self.layer_types[layer]} layer")
                elif need > cap:
                    out.append(f"layer {layer} needs {need} {kind}, the target has {cap} per layer")
        return out


def dense_parameters(target: Target, vocab_size: int) -> int:
    """The parameter count of a ``Qwen3_5ForCausalLM`` of these shapes (untied embedding and LM
    head), by the shapes of transformers' Qwen3.5 modules (tests compare it with the real model)."""
    return sum(dense_breakdown(target, vocab_size).values())


def dense_breakdown(target: Target, vocab_size: int) -> dict:
    """``dense_parameters`` by part: the FFNs, the DeltaNet mixers, the attention mixers, the
    embedding and LM head, the norms. Qwen3.5's shapes are global: every FFN is as wide as the
    widest layer's, every DeltaNet layer has all the key and value heads."""
    h, i = target.hidden_size, target.intermediate_size
    nk, nv, dk, dv = (target.linear_num_key_heads, target.linear_num_value_heads,
                      target.linear_key_head_dim, target.linear_value_head_dim)
    na, nkv, hd = target.num_attention_heads, target.num_key_value_heads, target.head_dim
    conv = 2 * nk * dk + nv * dv
    linear = h * conv + h * nv * dv + 2 * h * nv + conv * target.linear_conv_kernel_dim + 2 * nv + dv + nv * dv * h
    full = h * 2 * na * hd + 2 * h * nkv * hd + na * hd * h + 2 * hd
    types = target.layer_types
    return {"ffn": 3 * h * i * len(types), "deltanet": linear * types.count(LINEAR),
            "attention": full * types.count(FULL), "embedding and LM head": 2 * vocab_size * h,
            "norms": h * (2 * len(types) + 1)}
