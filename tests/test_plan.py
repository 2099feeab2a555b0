"""The plan/weights split (netlist2tf.plan, netlist2tf.assemble.write_weights, netlist2tf.driver):
the plan is made without torch, the weights written from it are byte-identical to the ones the
compiler wrote before the split, and the plan's figures are the written model's."""

import subprocess
import sys

import pytest

from netlist2tf.driver import compile_netlist
from netlist2tf.emit import emit_checkpoint, file_digest
from netlist2tf.frontend import synthesize
from netlist2tf.ir import parse_netlist
from netlist2tf.plan import CompileSettings, plan_model

# sha256 of model.safetensors (float32) written by the compiler before the split (commit 78e7282,
# `assemble` deciding and writing in one scope), for the same netlists: a change here means the
# weights changed, which needs a reason (and the CPU's proofs re-run), not a new number
BEFORE_SPLIT = {
    ("hdl.examples.counter:Counter", 4, None):
        "64b7e3dcf2e46a2e6853d67aa345fb5545dcf4ac74c77daa09239d42cf4956f5",
    ("tests/designs/unusual.py:SerialMultiplier", 8, ("busy", ("acc", "mcand", "mult", "count"))):
        "e10a1cfa535075031ff5e3acf74d789cc2da1d8ef5d2c1d21ab7572cec82dd0e",
}


@pytest.mark.parametrize("case", list(BEFORE_SPLIT), ids=["counter", "serial-multiplier-gated"])
def test_weights_byte_identical_to_before_the_split(case, tmp_path, build_dir):
    design, layers, gated = case
    result = synthesize(design, "macro", build_dir)
    compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=layers, gated=gated))
    folder = emit_checkpoint(compiled, result.json_text, tmp_path / "ckpt")
    assert file_digest(folder / "model.safetensors") == BEFORE_SPLIT[case]
    # the plan's figures are the model's: parameters, FFN rows per layer, configured value heads
    plan, model = compiled.plan, compiled.model
    assert plan.stats["parameters"] == sum(p.numel() for p in model.parameters())
    for neurons, layer in zip(plan.neurons, model.model.layers):
        assert len(neurons) == int((layer.mlp.gate_proj.weight.abs().sum(dim=1) > 0).sum())
    assert [len([h for h in plan.heads if h.layer == i]) for i in range(layers)] == [
        sum(1 for v in range(plan.target.linear_num_value_heads) if bool(
            (layer.linear_attn.out_proj.weight[:, v * plan.target.linear_value_head_dim:
                                               (v + 1) * plan.target.linear_value_head_dim] != 0).any()))
        if hasattr(layer, "linear_attn") else 0 for layer in model.model.layers]


def test_the_plan_needs_no_torch(build_dir):
    """plan_model, --check-fit's figures and the report's inputs come from a process where importing
    torch fails."""
    path = synthesize("hdl.examples.fifo:FIFO", "macro", build_dir).json_path
    code = (
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "from netlist2tf.ir import parse_netlist\n"
        "from netlist2tf.plan import CompileSettings, plan_model\n"
        f"plan = plan_model(parse_netlist(open({str(path)!r}).read()), CompileSettings(layers=7))\n"
        "fit = plan.fit()\n"
        "print(fit['hidden_channels'], fit['neurons_per_layer'], plan.stats['parameters'])\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    plan = plan_model(parse_netlist(path.read_text()), CompileSettings(layers=7))
    assert run.stdout.split()[0] == str(plan.hidden_needed)
    assert run.stdout.split()[-1] == str(plan.stats["parameters"])


def test_check_fit_equals_the_written_model(build_dir):
    """What --check-fit prints (the plan) is what the weights then hold."""
    nl = parse_netlist(synthesize("hdl.examples.fifo:FIFO", "macro", build_dir).json_text)
    settings = CompileSettings(layers=7)
    fit = plan_model(nl, settings).fit()
    compiled = compile_netlist(nl, settings)
    assert fit["neurons_per_layer"] == compiled.stats["neurons_per_layer"]
    assert fit["deltanet_heads_per_layer"] == compiled.stats["deltanet_heads"]
    assert fit["hidden_channels"] <= compiled.model.config.hidden_size
    assert fit["vocab_size"] == compiled.model.config.vocab_size
