"""Targets: standalone shapes, shapes read from Qwen3.5 config.json files (text-only and the published
multimodal layout), validation errors, and the fit check's messages (hand-checked numbers)."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from netlist2tf.common.errors import Netlist2TFError
from netlist2tf.compile.target import FULL, LINEAR, Target, geometries

# The text part of Qwen3.5-4B's published config (its config.json on the Hugging Face hub), in the multimodal layout.
QWEN35_4B = {
    "model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
    "text_config": {
        "model_type": "qwen3_5_text", "hidden_size": 2560, "intermediate_size": 9216,
        "num_hidden_layers": 32, "layer_types": [LINEAR, LINEAR, LINEAR, FULL] * 8,
        "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 256,
        "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "rms_norm_eps": 1e-6,
        "vocab_size": 248320, "rope_parameters": {"partial_rotary_factor": 0.25, "rope_theta": 10000000},
    },
    "vision_config": {"depth": 24},
}


def test_standalone_defaults():
    t = Target.standalone()
    assert t.num_layers == 11 and t.layer_types[0] == FULL and t.layer_types[1] == LINEAR
    assert t.layer_types.count(FULL) == 3 and t.key_dim_exact


def test_from_multimodal_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(QWEN35_4B))
    t = Target.from_config_json(tmp_path, layers=11)
    assert (t.hidden_size, t.intermediate_size, t.linear_key_head_dim, t.linear_num_value_heads) == \
        (2560, 9216, 128, 32)
    assert t.layer_types == (LINEAR, LINEAR, LINEAR, FULL) * 2 + (LINEAR, LINEAR, LINEAR)
    assert not t.key_dim_exact          # 128 is not a power of 4: 1/sqrt(128) is not a power of two
    assert Target.from_config_json(tmp_path / "config.json").num_layers == 32


def test_hf_config_loads_with_stock_transformers(tmp_path):
    t = Target.standalone(layers=2, hidden_size=64, intermediate_size=128, linear_heads=2,
                          linear_key_head_dim=16, linear_value_head_dim=16, attention_heads=2, head_dim=16,
                          full_attention_every=2)
    model = AutoModelForCausalLM.from_config(t.to_hf_config(vocab_size=40))
    assert type(model).__name__ == "Qwen3_5ForCausalLM"
    layers = model.model.layers
    assert layers[0].self_attn.q_proj.weight.shape == (2 * 2 * 16, 64)      # query + output gate
    assert layers[1].linear_attn.in_proj_qkv.weight.shape == (2 * 16 * 2 + 2 * 16, 64)
    assert model(torch.tensor([[1, 2, 3]])).logits.shape == (1, 3, 40)


@pytest.mark.parametrize("doc, message", [
    ("{", "is not JSON"),
    ('{"model_type": "llama", "hidden_size": 4}', "is not a Qwen3.5 config (model_type 'llama')"),
    ('{"model_type": "qwen3_5_text", "hidden_size": 64}', "lacks the Qwen3.5 key(s) intermediate_size, layer_types, linear_num_key_heads"),
])
def test_bad_configs(tmp_path, doc, message):
    path = tmp_path / "config.json"
    path.write_text(doc)
    with pytest.raises(Netlist2TFError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Target.from_config_json(path)


def test_invalid_shapes():
    with pytest.raises(Netlist2TFError, match=r"unknown layer types \['mamba'\]"):
        Target(64, 64, ("mamba",), 1, 1, 16, 16, 1, 1, 16)
    with pytest.raises(Netlist2TFError, match="hidden_size must be a positive integer, not 0"):
        Target(0, 64, (FULL,), 1, 1, 16, 16, 1, 1, 16)


def test_fit_messages():
    t = Target.standalone(layers=4, hidden_size=256, intermediate_size=100, linear_heads=8,
                          full_attention_every=4)
    assert t.fits(hidden_channels=200, neurons_per_layer=[100, 50], deltanet_heads_per_layer=[0, 8],
                  attention_heads_per_layer=[4]) == []
    assert t.fits(hidden_channels=300, neurons_per_layer=[0, 120, 0, 0, 7], deltanet_heads_per_layer=[2, 9],
                  attention_heads_per_layer=[0, 1]) == [
        "the residual stream needs 300 channels, the target's hidden size is 256",
        "layer 1 needs 120 FFN neurons, the target has 100 per layer",
        "layer 4 needs 7 FFN neurons but the target has only 4 layers",
        "layer 0 needs 2 DeltaNet value heads but it is a full_attention layer",
        "layer 1 needs 9 DeltaNet value heads, the target has 8 per layer",
        "layer 1 needs 1 attention heads but it is a linear_attention layer",
    ]


# The published geometries (netlist2tf/geometries/): shapes typed from the public configs (the
# README's table), and a byte count from the published 9B index.
PUBLISHED = {  # name: (hidden, intermediate, layers, attention heads, kv heads, DeltaNet value heads, tied)
    "qwen3.5-0.8b": (1024, 3584, 24, 8, 2, 16, True), "qwen3.5-2b": (2048, 6144, 24, 8, 2, 16, True),
    "qwen3.5-4b": (2560, 9216, 32, 16, 4, 32, True), "qwen3.5-9b": (4096, 12288, 32, 16, 4, 32, False)}


def test_published_geometries_by_name():
    from netlist2tf.compile.target import geometries

    assert list(geometries()) == list(PUBLISHED)
    for name, (h, i, n, nh, nkv, nv, tied) in PUBLISHED.items():
        for spelling in (name, name.upper(), "Qwen/" + name.replace("qwen", "Qwen").upper().replace("QWEN", "Qwen")):
            t = Target.from_config_json(spelling)
            assert (t.hidden_size, t.intermediate_size, t.num_layers, t.num_attention_heads,
                    t.num_key_value_heads, t.linear_num_value_heads) == (h, i, n, nh, nkv, nv), spelling
            assert (t.linear_num_key_heads, t.linear_key_head_dim, t.linear_value_head_dim, t.head_dim,
                    t.linear_conv_kernel_dim) == (16, 128, 128, 256, 4)
            assert t.layer_types == tuple(FULL if k % 4 == 3 else LINEAR for k in range(n))
        doc = json.loads(geometries()[name].read_text())
        assert doc["tie_word_embeddings"] is tied and doc["text_config"]["vocab_size"] == 248320
        assert doc["vision_config"]["out_hidden_size"] == h
    assert Target.from_config_json("qwen3.5-4b", layers=11).layer_types[3] == FULL


def test_the_9b_geometry_holds_exactly_the_published_bytes():
    """Qwen3.5-9B's published model.safetensors.index.json says total_size 19,306,216,416 bytes. The
    kept config, built by transformers on the meta device (text model, vision tower, LM head), plus
    the MTP head (an fc of 2H -> H, three norms, one full-attention decoder layer) in bfloat16, with
    the DeltaNet A_log and gated-norm weights in float32 as published, holds exactly that many."""
    from transformers import Qwen3_5ForConditionalGeneration
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5Config

    from netlist2tf.compile.target import geometries

    doc = json.loads(geometries()["qwen3.5-9b"].read_text())
    cfg = Qwen3_5Config(**{k: v for k, v in doc.items() if k not in ("_name_or_path", "architectures", "model_type")})
    with torch.device("meta"):
        model = Qwen3_5ForConditionalGeneration(cfg)
    params = dict(model.named_parameters())
    fp32 = sum(p.numel() for k, p in params.items() if k.endswith(("A_log", "linear_attn.norm.weight")))
    t = doc["text_config"]
    H, I, hd, nh, nkv = t["hidden_size"], t["intermediate_size"], t["head_dim"], t["num_attention_heads"], t["num_key_value_heads"]
    layer = 2 * nh * hd * H + 2 * nkv * hd * H + nh * hd * H + 2 * hd + 2 * H + 3 * I * H
    mtp = 2 * H * H + 3 * H + layer
    total = 2 * (sum(p.numel() for p in params.values()) + mtp) + 2 * fp32
    assert total == 19_306_216_416


def test_random_checkpoint_of_a_published_geometry(tmp_path):
    """make_geometry_base: a random Qwen3.5-0.8B-shaped multimodal checkpoint (2 layers, a small
    vocabulary, one vision block) that stock transformers loads with the published per-layer shapes."""
    from transformers import AutoModelForImageTextToText

    from netlist2tf.merge import make_geometry_base

    folder = make_geometry_base(tmp_path / "b", "qwen3.5-0.8b", layers=2, vocab_size=512, vision_depth=1,
                                shard_bytes=32 << 20)
    model = AutoModelForImageTextToText.from_pretrained(folder)
    lm = model.model.language_model
    assert len(lm.layers) == 2 and lm.embed_tokens.weight.shape == (512, 1024)
    assert lm.layers[0].mlp.up_proj.weight.shape == (3584, 1024)
    assert lm.layers[0].linear_attn.in_proj_qkv.weight.shape == (2 * 16 * 128 + 16 * 128, 1024)
    assert model.model.visual.merger.linear_fc2.weight.shape == (1024, 768 * 4)
    assert json.loads((folder / "config.json").read_text())["tie_word_embeddings"] is True
    assert (folder / "model.safetensors.index.json").is_file()
    with pytest.raises(Netlist2TFError, match="no published geometry 'qwen3.5-3b'"):
        make_geometry_base(tmp_path / "c", "qwen3.5-3b")


def test_the_compiled_layers_types_are_the_compilers():
    """On a target, the compiled part takes DeltaNet in every layer but the last (full attention),
    whatever the base's pattern; the shapes stay the target's."""
    from netlist2tf.compile.plan import compiled_target

    t = Target.from_config_json("qwen3.5-4b", layers=11)
    c = compiled_target(t)
    assert c.layer_types == (LINEAR,) * 10 + (FULL,)
    assert (c.hidden_size, c.intermediate_size, c.linear_num_value_heads, c.head_dim) == \
        (t.hidden_size, t.intermediate_size, t.linear_num_value_heads, t.head_dim)


@pytest.mark.parametrize("name", ["qwen3.5-0.8b", "qwen3.5-4b"])
def test_layer_and_base_parameters_are_transformers_counts(name):
    """``layer_parameters`` equals the parameters of transformers' own decoder layer of each type at
    the geometry's shapes, and ``base_parameters`` the model transformers builds from the config,
    which is the sum of its parts: embedding (tied: once), layers, final norm, vision tower."""
    import torch
    from transformers.models.qwen3_5 import modeling_qwen3_5 as qm
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    t = Target.from_config_json(name)
    doc = json.loads(geometries()[name].read_text())
    config = CONFIG_MAPPING[doc["model_type"]].from_dict(doc)
    text = config.text_config
    with torch.device("meta"):
        for kind in (LINEAR, FULL):
            i = text.layer_types.index(kind)
            layer = qm.Qwen3_5DecoderLayer(text, i)
            assert t.layer_parameters(kind) == sum(p.numel() for p in layer.parameters()), kind
        vision = qm.Qwen3_5VisionModel._from_config(config.vision_config)
    layers = sum(t.layer_parameters(k) for k in t.layer_types)
    embedding = text.vocab_size * text.hidden_size
    assert doc["tie_word_embeddings"] is True
    assert t.base_parameters() == embedding + layers + text.hidden_size + sum(p.numel() for p in vision.parameters())
