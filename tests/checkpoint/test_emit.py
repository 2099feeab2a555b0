"""The checkpoint written without transformers (``assemble_state``, ``emit_checkpoint``): the same bytes
transformers' own ``save_pretrained`` writes for the same weights, the parameter names and shapes of a
real ``Qwen3_5ForCausalLM``, and a compile that imports neither torch nor transformers.

Oracles: transformers itself (its model's state dict, ``save_pretrained``'s files) and the numpy gadgets
against their transformers modules (``gadgets/arrays.py``'s adapters)."""

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from netlist2tf.checkpoint import emit_checkpoint
from netlist2tf.checkpoint.hf import generation_settings
from netlist2tf.compile import CompileSettings, Target, geometry_path, plan_model
from netlist2tf.frontend import synthesize
from netlist2tf.netlist import parse_netlist
from netlist2tf.weights import state_shapes, write_weights

SAVED = ("model.safetensors", "config.json", "generation_config.json")


def _plan(design, build_dir, **settings):
    result = synthesize(design, "macro", build_dir)
    return result, plan_model(parse_netlist(result.json_text), CompileSettings(**settings))


@pytest.mark.parametrize("design, settings, dtype", [
    ("hdl.examples.counter:Counter", dict(layers=4), "float32"),
    ("hdl.examples.lfsr:LFSR", dict(layers=4), "bfloat16"),                  # no inputs: no eos ids
    ("hdl.examples.fifo:FIFO", dict(layers=7, bits="pairs"), "float32"),     # the pair layout, unfolded
    ("tests/designs/constructs.py:Rom16x8", dict(layers=4, roms="attention"), "float32"),   # a lookup head
])
def test_the_files_are_the_ones_save_pretrained_writes(design, settings, dtype, build_dir, tmp_path):
    result, plan = _plan(design, build_dir, **settings)
    compiled = write_weights(plan)
    emit_checkpoint(compiled, result.json_text, tmp_path / "ours", dtype)
    model = compiled.model.to(getattr(torch, dtype))
    model.generation_config.update(**generation_settings(compiled.protocol))
    model.save_pretrained(tmp_path / "theirs")
    for name in SAVED:
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "theirs" / name).read_bytes(), name
    assert json.loads((tmp_path / "ours" / "compile.json").read_text())["dtype"] == dtype


@pytest.mark.parametrize("geometry", ["qwen3.5-0.8b", "qwen3.5-4b"])
def test_state_shapes_are_a_real_models(geometry):
    """Names and shapes of every parameter, against a real model on the meta device (no memory), for a
    published geometry's shapes with both layer types, and a hidden size other than the target's."""
    target = replace(Target.from_config_json(geometry_path(geometry)),
                     layer_types=("linear_attention", "full_attention", "linear_attention", "full_attention"))
    from transformers import Qwen3_5ForCausalLM

    for hidden in (None, 1032):
        with torch.device("meta"):
            model = Qwen3_5ForCausalLM(replace(target, hidden_size=hidden or target.hidden_size)
                                       .to_hf_config(vocab_size=3000))
        theirs = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        assert state_shapes(target, 3000, hidden) == theirs


def test_a_compile_imports_neither_torch_nor_transformers(tmp_path):
    """The second compile of a design (its calibrations cached by the first) loads neither library."""
    code = ("import sys; from netlist2tf.cli import main; "
            f"rc = main(['compile', 'hdl.examples.counter:Counter', '--layers', '4', '--out', sys.argv[1], "
            f"'--force', '--build-dir', {str(tmp_path / 'build')!r}]); "
            "print(rc, 'torch' in sys.modules, 'transformers' in sys.modules)")
    env = {**os.environ, "NETLIST2TF_BUILD_DIR": str(tmp_path / "build")}
    for run in ("first", "second"):
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path / run)], capture_output=True, text=True,
                             env=env, check=True)
    assert out.stdout.split()[-3:] == ["0", "False", "False"], out.stdout + out.stderr
    assert (tmp_path / "first" / "model.safetensors").read_bytes() == \
        (tmp_path / "second" / "model.safetensors").read_bytes()


def test_a_gadget_writes_through_to_a_bfloat16_module():
    """A numpy gadget given a bfloat16 transformers module writes its weights back into it: the same
    weights as on the float32 module, rounded."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5MLP

    from netlist2tf.gadgets import Neuron, configure_mlp

    cfg = Target(hidden_size=16, intermediate_size=8, layer_types=("linear_attention",),
                 linear_num_key_heads=1, linear_num_value_heads=1, linear_key_head_dim=16,
                 linear_value_head_dim=8, num_attention_heads=1, num_key_value_heads=1,
                 head_dim=16).to_hf_config(vocab_size=8)
    neurons = [Neuron(((1, 1), (3, -1)), -1, ((5, 1), (6, -1))), Neuron(((2, 2),), 0, ((7, 3),))]
    mods = [Qwen3_5MLP(cfg, 8), Qwen3_5MLP(cfg, 8).to(torch.bfloat16)]
    for m in mods:
        assert configure_mlp(m, neurons, 0, "bfloat16") == 2
    for name in ("gate_proj", "up_proj", "down_proj"):
        a, b = (getattr(m, name).weight for m in mods)
        assert b.dtype == torch.bfloat16
        assert torch.equal(a[:2].to(torch.bfloat16), b[:2]) if name != "down_proj" else \
            torch.equal(a[:, :2].to(torch.bfloat16), b[:, :2])
    w = {name: getattr(mods[1], name).weight.detach() for name in ("gate_proj", "down_proj")}
    assert float(w["gate_proj"][0, 3]) == -128.0 and float(w["down_proj"][7, 1]) == 3.0
