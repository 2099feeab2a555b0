"""The checkpoints in llama.cpp: the GGUF export and llama.cpp's own forward against the netlist simulator.

Oracles: the netlist simulator (every token llama.cpp generates, and its greedy choice at every position
of the simulator's trace, teacher-forced), the checkpoint's safetensors read independently (every GGUF
tensor at its place: ``1 + w`` norms, ``-exp(A_log)``, value heads renumbered to llama.cpp's tiled order),
and transformers' own ``l2norm`` (the key magnitudes the compiler chose for head dims that are not a
power of 4). The design is Qwen3.5's published shapes in miniature (DeltaNet heads of 128, two value heads
per key head: the case where llama.cpp's l2norm and broadcast differ from transformers')."""

import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors import safe_open

from netlist2tf.checkpoint import emit_checkpoint
from netlist2tf.compile import CompileSettings
from netlist2tf.driver import compile_netlist
from netlist2tf.frontend import synthesize
from netlist2tf.netlist import parse_netlist
from netlist2tf.run import open_checkpoint, verify_model, verify_teacher_forced
from netlist2tf.serve import export_gguf


gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (`make test` installs it: "
                                                    "pip install -e '.[llama]')")

pytestmark = pytest.mark.xdist_group("llama")

def _run(opened, cycles=40, batch=2, seed=0):
    return verify_model(opened.model, opened.protocol, opened.netlist, opened.initial_registers, cycles, batch, seed,
                        initial_memory=opened.meta["initial_memory"])[0]


def test_the_compiled_fifo_in_llama_cpp_equals_the_simulator(fifo):
    folder = fifo[0]
    opened = open_checkpoint(folder, executor="llama.cpp")
    assert opened.executor == "llama.cpp" and type(opened.model).__name__ == "LlamaTrace"
    assert _run(opened, cycles=40, batch=2) is None                         # generated, two rows at once
    div, _ = verify_teacher_forced(opened.model, opened.protocol, opened.netlist, opened.initial_registers, 60, 2, 1,
                                   opened.meta["initial_memory"])
    assert div is None                                                      # every position's greedy choice


def test_the_merged_fifo_in_llama_cpp_equals_the_simulator(fifo):
    merged = fifo[1]
    opened = open_checkpoint(merged, executor="llama.cpp")
    assert _run(opened, cycles=30, batch=2) is None
    # after base-vocabulary text: llama.cpp runs the random base's own layers on it
    prefix = list(range(20, 60))
    opened = open_checkpoint(merged, executor="llama.cpp", prefix=prefix)
    assert _run(opened, cycles=30, batch=1) is None


def test_power_of_two_keys_are_what_llama_cpp_gets_wrong(fifo, tmp_path, monkeypatch, onto):
    """The compiler's keys before this export existed (magnitude 64 and 128 on heads of 128) read back
    exactly in transformers but not in llama.cpp (its l2norm is an RMS norm and a scale: 0.99999994): the
    check above can fail, and the magnitudes chosen now are what makes it pass."""
    from netlist2tf.gadgets import deltanet_memory as dm

    x = torch.zeros(1, 128)
    for m in (dm.key_magnitude(128, dm.ADDRESS_MAGNITUDE), dm.key_magnitude(128, dm.MATCH_MAGNITUDE)):
        x[0, 0] = m
        assert m not in (64.0, 128.0)
        assert float(x[0, 0] * torch.rsqrt((x * x).sum() + 1e-6)) == 1.0              # transformers' l2norm
        assert float(dm.two_step_l2norm(x.numpy())[0, 0]) == 1.0
    x[0, 0] = 64.0
    assert float(dm.two_step_l2norm(x.numpy())[0, 0]) != 1.0
    monkeypatch.setattr(dm, "key_magnitude", lambda dk, base: base)
    old = onto(fifo[2], tmp_path / "old", fifo[3])
    stock = open_checkpoint(old)
    assert _run(stock, cycles=20, batch=1) is None                                # transformers: exact
    assert _run(open_checkpoint(old, executor="llama.cpp"), cycles=20, batch=1) is not None


def _tensors(folder):
    out = {}
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        for k in f.keys():
            out[k] = f.get_tensor(k).float().numpy()
    return out


def test_the_gguf_holds_every_tensor_at_its_place(fifo, tmp_path):
    folder = fifo[0]
    out = tmp_path / "fifo.gguf"
    info = export_gguf(folder, out)
    r = gguf.GGUFReader(str(out))
    cfg = json.loads((folder / "config.json").read_text())
    field = lambda k: r.fields[k].contents()  # noqa: E731
    assert field("general.architecture") == "qwen35"
    assert field("qwen35.block_count") == cfg["num_hidden_layers"] == 8
    assert field("qwen35.attention.recurrent_layers") == [t == "linear_attention" for t in cfg["layer_types"]]
    assert field("qwen35.ssm.state_size") == 128 and field("qwen35.ssm.group_count") == 4
    assert field("qwen35.ssm.time_step_rank") == 8 and field("qwen35.ssm.inner_size") == 8 * 128
    assert len(field("tokenizer.ggml.tokens")) == cfg["vocab_size"] == info["vocab"]
    names = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    tokens = field("tokenizer.ggml.tokens")
    assert all(tokens[i] == n for n, i in names.items())
    got = {t.name: np.array(t.data).reshape(list(reversed([int(d) for d in t.shape]))) for t in r.tensors}
    hf = _tensors(folder)
    assert len(got) == info["tensors"] == len(hf)
    nk, group, d = 4, 2, 128
    tiled = [(i % nk) * group + i // nk for i in range(nk * group)]       # llama.cpp's value head i: HF head
    for layer, kind in enumerate(cfg["layer_types"]):
        p, b = f"model.layers.{layer}.", f"blk.{layer}."
        np.testing.assert_array_equal(got[b + "attn_norm.weight"], 1 + hf[p + "input_layernorm.weight"])
        np.testing.assert_array_equal(got[b + "ffn_up.weight"], hf[p + "mlp.up_proj.weight"])
        if kind != "linear_attention":
            np.testing.assert_array_equal(got[b + "attn_q_norm.weight"], 1 + hf[p + "self_attn.q_norm.weight"])
            continue
        a = p + "linear_attn."
        np.testing.assert_array_equal(got[b + "ssm_a"], -np.exp(hf[a + "A_log"].astype(np.float64)).astype(np.float32)[tiled])
        np.testing.assert_array_equal(got[b + "ssm_norm.weight"], hf[a + "norm.weight"])
        qkv = hf[a + "in_proj_qkv.weight"]
        v = qkv[2 * nk * d:].reshape(nk * group, d, -1)[tiled].reshape(nk * group * d, -1)
        np.testing.assert_array_equal(got[b + "attn_qkv.weight"], np.concatenate([qkv[:2 * nk * d], v]))
        out_proj = hf[a + "out_proj.weight"]
        np.testing.assert_array_equal(got[b + "ssm_out.weight"],
                                      out_proj.reshape(-1, nk * group, d)[:, tiled].reshape(out_proj.shape[0], -1))
        np.testing.assert_array_equal(got[b + "ssm_beta.weight"], hf[a + "in_proj_b.weight"][tiled])
        conv = hf[a + "conv1d.weight"][:, 0]
        np.testing.assert_array_equal(got[b + "ssm_conv1d.weight"], np.concatenate(
            [conv[:2 * nk * d], conv[2 * nk * d:].reshape(nk * group, d, -1)[tiled].reshape(nk * group * d, -1)]))
    # deterministic: the same folder gives the same bytes
    again = tmp_path / "again.gguf"
    export_gguf(folder, again)
    assert out.read_bytes() == again.read_bytes()


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "netlist2tf.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)


def test_export_gguf_refuses_what_llama_cpp_cannot_run_and_keeps_user_files(fifo, tmp_path, build_dir):
    result = synthesize("hdl.examples.counter:Counter", "macro", build_dir)
    compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=4), prove=False)
    standalone = emit_checkpoint(compiled, result.json_text, tmp_path / "counter")   # heads of 64 x 32
    out = tmp_path / "c.gguf"
    r = _cli("export-gguf", standalone, "--out", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "not square" in r.stderr and "--target qwen3.5-0.8b" in r.stderr and not out.exists()
    mine = tmp_path / "notes.gguf"
    mine.write_text("my notes\n")
    r = _cli("export-gguf", fifo[0], "--out", mine)
    assert r.returncode == 2 and "did not write" in r.stderr and mine.read_text() == "my notes\n"
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    r = _cli("export-gguf", fifo[0], "--out", pipe)
    assert r.returncode == 2 and stat.S_ISFIFO(os.stat(pipe).st_mode)
    r = _cli("export-gguf", tmp_path / "missing", "--out", out)
    assert r.returncode == 2 and "no such checkpoint folder" in r.stderr
    import shutil

    for which in (0, 1):                          # a changed file in a compiled and in a merged folder
        copy = shutil.copytree(fifo[which], tmp_path / f"copy{which}")
        cfg = json.loads((copy / "config.json").read_text())
        (copy / "config.json").write_text(json.dumps(cfg, indent=1))
        r = _cli("export-gguf", copy, "--out", tmp_path / f"copy{which}.gguf")
        assert r.returncode == 2 and "changed after" in r.stderr and not (tmp_path / f"copy{which}.gguf").exists()
    ours = tmp_path / "ours.gguf"
    assert _cli("export-gguf", fifo[0], "--out", ours).returncode == 0
    assert _cli("export-gguf", fifo[0], "--out", ours).returncode == 0           # our own file: replaced
    assert ours.read_bytes()[:4] == b"GGUF"
