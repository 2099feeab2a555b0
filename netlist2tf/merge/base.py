"""The embedded default base: a small random Qwen3.5 checkpoint this package creates (no weights can
be downloaded), text-only or in the published multimodal layout, or of a published geometry's shapes;
``default_base`` caches the one ``netlist2tf merge`` uses when no base is given."""

import json
from pathlib import Path

import torch

from netlist2tf.checkpoint import write_shards
from netlist2tf.common import Netlist2TFError
from netlist2tf.common import write_folder
from netlist2tf.merge.merge import GEOMETRY, _shape, _table


def make_base(folder, like: dict, hidden_size: int = 256, layers: int = 4, intermediate_size: int = 512,
              vocab_size: int = 1024, seed: int = 0, tied: bool = True, multimodal: bool = False,
              shard_bytes: int | None = None, vision_config: dict | None = None) -> Path:
    """Write a random ``Qwen3_5ForCausalLM`` checkpoint with ``like``'s shared geometry (the keys of
    GEOMETRY it has; Qwen3.5's defaults for the others), ``layers`` layers of the published pattern (three DeltaNet, then full attention), and
    random norm weights, decays and convolutions (so that merging has something to preserve), and
    (for a vocabulary of at least 265) netlist2tf.merge.qwen_text's byte-level tokenizer with Qwen3.5's special
    tokens and chat format.

    ``multimodal``: the published layout instead (``Qwen3_5ForConditionalGeneration``: text weights
    under ``model.language_model.``, a small vision tower, an MTP head with the published weight names,
    a WordLevel tokenizer with a chat template and the vision tokens; ``vision_config``: its vision
    tower's config, default a one-block tower of width 32); ``shard_bytes``: shards of at most that
    size with an index instead of one file. Deterministic: the same arguments give
    byte-identical files."""
    from transformers import Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5Config, Qwen3_5TextConfig

    folder = Path(folder)
    geometry = {k: like[k] for k in GEOMETRY if k in like}
    config = Qwen3_5TextConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=layers, layer_types=["full_attention" if i % 4 == 3 else "linear_attention"
                                               for i in range(layers)],
        tie_word_embeddings=tied, rope_parameters=like.get("rope_parameters"), **geometry)
    if multimodal:
        config.mtp_num_hidden_layers = 1
        special = {n: vocab_size - 1 - i for i, n in enumerate(MM_SPECIAL)}
        config = Qwen3_5Config(
            text_config=config.to_dict(), tie_word_embeddings=tied,
            vision_config=dict(vision_config or {"depth": 1, "hidden_size": 32, "intermediate_size": 64,
                                                 "num_heads": 2, "patch_size": 4, "num_position_embeddings": 16},
                               out_hidden_size=hidden_size),
            image_token_id=special["<|image_pad|>"], video_token_id=special["<|video_pad|>"],
            vision_start_token_id=special["<|vision_start|>"], vision_end_token_id=special["<|vision_end|>"])
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = (Qwen3_5ForConditionalGeneration if multimodal else Qwen3_5ForCausalLM)(config).eval()
    tensors = dict(model.state_dict())
    if multimodal:                                  # MTP: transformers has no module for it
        text = config.text_config.to_dict()
        mtp = {"fc.weight": ("H", 2 * hidden_size), "norm.weight": ("H",), "pre_fc_norm_embedding.weight": ("H",),
               "pre_fc_norm_hidden.weight": ("H",)}
        mtp |= {f"layers.0.{k}": axes for k, axes in _table(text)["full_attention"].items()}
        for k, axes in sorted(mtp.items()):
            tensors["mtp." + k] = torch.zeros(_shape(axes, text))
    with torch.no_grad():
        for name, p in sorted(tensors.items()):
            if name.endswith("norm.weight") and "linear_attn" not in name:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))        # (1 + w) around 1
            elif name.endswith("linear_attn.norm.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith(("A_log", "dt_bias")):
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
    if tied:
        tensors.pop("lm_head.weight", None)
    model.generation_config.do_sample = False

    def write(tmp):
        from netlist2tf.common import quiet_transformers
        with quiet_transformers():
            config.save_pretrained(tmp)
            model.generation_config.save_pretrained(tmp)
        write_shards(tmp, {k: v.contiguous() for k, v in tensors.items()}, shard_bytes)
        if multimodal:
            _write_base_tokenizer(tmp, vocab_size)
        else:                   # the text base: Qwen3.5's special tokens and chat format (cpu/chat.py)
            from netlist2tf.merge.qwen_text import SPECIAL, write_text_tokenizer
            if vocab_size >= 256 + len(SPECIAL):
                write_text_tokenizer(tmp, vocab_size)
        (tmp / "netlist2tf.json").write_text(json.dumps({"made_by": "netlist2tf", "what": "random Qwen3.5 base",
                                                         "recipe": BASE_RECIPE}, sort_keys=True) + "\n")
    write_folder(folder, write, "base model")
    return folder


def make_geometry_base(folder, name: str, layers: int | None = None, vocab_size: int | None = None,
                       vision_depth: int | None = None, seed: int = 0, shard_bytes: int | None = 5 << 30) -> Path:
    """A random multimodal checkpoint of a published geometry (``netlist2tf.compile.target.geometries``):
    its text shapes, tying and vision tower, with ``layers`` decoder layers (default all),
    ``vocab_size`` tokens (default the published 248,320) and ``vision_depth`` vision blocks (default
    all): full size for measurements, fewer layers and a small vocabulary for tests."""
    from netlist2tf.compile import geometry_path

    path = geometry_path(name)
    if path is None:
        from netlist2tf.compile import geometries
        raise Netlist2TFError(f"no published geometry {name!r}; known: {', '.join(geometries())}")
    doc = json.loads(path.read_text())
    text, vision = doc["text_config"], dict(doc["vision_config"])
    vision.pop("model_type", None)
    if vision_depth is not None:
        vision["depth"] = vision_depth
    return make_base(folder, text, hidden_size=text["hidden_size"], layers=layers or text["num_hidden_layers"],
                     intermediate_size=text["intermediate_size"], vocab_size=vocab_size or text["vocab_size"],
                     seed=seed, tied=doc["tie_word_embeddings"], multimodal=True, shard_bytes=shard_bytes,
                     vision_config=vision)


# The random multimodal base's special tokens (the last ids of its vocabulary) and chat template.
MM_SPECIAL = ("<|vision_end|>", "<|vision_start|>", "<|video_pad|>", "<|image_pad|>", "<|im_end|>", "<|im_start|>")


MM_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }} {{ m['content'] }}<|im_end|> {% endfor %}"
               "{% if add_generation_prompt %}<|im_start|>assistant {% endif %}")


def _write_base_tokenizer(folder: Path, vocab_size: int) -> None:
    """A WordLevel tokenizer for the random multimodal base: words ``w0`` .. and MM_SPECIAL as special
    tokens, with MM_TEMPLATE as its chat template (tokenizer_config.json and chat_template.jinja)."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    words = {f"w{i}": i for i in range(vocab_size - len(MM_SPECIAL))}
    tok = Tokenizer(models.WordLevel(words, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([AddedToken(n, special=True, normalized=False) for n in reversed(MM_SPECIAL)])
    (folder / "tokenizer.json").write_text(json.dumps(json.loads(tok.to_str()), indent=2) + "\n")
    decoder = {str(tok.token_to_id(n)): {"content": n, "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": True} for n in MM_SPECIAL}
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": None,
         "unk_token": "w0", "added_tokens_decoder": decoder, "chat_template": MM_TEMPLATE,
         "model_max_length": 4096, "clean_up_tokenization_spaces": False}, indent=2, sort_keys=True) + "\n")
    (folder / "chat_template.jinja").write_text(MM_TEMPLATE + "\n")


BASE_DEFAULTS = {"hidden_size": 256, "layers": 4, "intermediate_size": 512, "vocab_size": 1024, "seed": 0}


BASE_RECIPE = 2                 # bump when make_base's output changes (the cache key); 2: the text tokenizer


def default_base(compiled_folder, build_dir=None) -> Path:
    """The embedded default base for ``compiled_folder``: ``make_base`` with its shapes and
    ``BASE_DEFAULTS``, made once and cached under ``build_dir/base/`` by those settings."""
    import hashlib

    path = Path(compiled_folder) / "config.json"
    try:
        like = json.loads(path.read_text())
        key = {k: like[k] for k in GEOMETRY} | {"rope_parameters": like.get("rope_parameters")}
    except (OSError, ValueError, KeyError, TypeError):
        raise Netlist2TFError(f"{compiled_folder} is not a checkpoint folder: {path} is missing or not a "
                              f"Qwen3.5 config")
    digest = hashlib.sha256(json.dumps([key, BASE_DEFAULTS, BASE_RECIPE], sort_keys=True).encode()).hexdigest()[:16]
    from netlist2tf.common import build_dir as default_build_dir
    folder = default_build_dir(build_dir) / "base" / digest
    if not (folder / "model.safetensors").is_file():
        make_base(folder, like, **BASE_DEFAULTS)
    return folder
