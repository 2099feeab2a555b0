"""Targets: standalone shapes, shapes read from Qwen3.5 config.json files (text-only and the published
multimodal layout), validation errors, and the fit check's messages (hand-checked numbers)."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from netlist2tf.errors import Netlist2TFError
from netlist2tf.target import FULL, LINEAR, Target

# The text part of Qwen3.5-4B's published config (shared/TOOLCHAIN-NOTES.md), in the multimodal layout.
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
    assert not t.key_dim_exact          # 128 is not a power of 4 (DESIGN.md 2c)
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
