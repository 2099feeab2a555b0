"""The designs the serving tests run: the FIFO (a written memory) compiled onto Qwen3.5's published shapes
in miniature (DeltaNet heads of 128, two value heads per key head: where llama.cpp's l2norm and head
broadcast differ from transformers'), and merged in front of a random base of those shapes."""

import os

import pytest

# one llama.cpp thread (its OpenMP workers spin while they wait): the suite runs two workers on two cores
os.environ["NETLIST2TF_LLAMA_THREADS"] = "1"

from netlist2tf.checkpoint import emit_checkpoint
from netlist2tf.compile import CompileSettings, Target
from netlist2tf.driver import compile_netlist
from netlist2tf.frontend import synthesize
from netlist2tf.merge import make_base, merge_checkpoints
from netlist2tf.netlist import parse_netlist

QWEN_LIKE = {"model_type": "qwen3_5_text", "hidden_size": 384, "intermediate_size": 192,
             "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
             "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 128,
             "linear_value_head_dim": 128, "vocab_size": 300,
             "layer_types": ["linear_attention"] * 3 + ["full_attention"]}


def compile_onto(netlist_json, folder, base):
    compiled = compile_netlist(parse_netlist(netlist_json),
                               CompileSettings(layers=8, target=Target.from_config_json(base, layers=8)), prove=False)
    return emit_checkpoint(compiled, netlist_json, folder)


@pytest.fixture(scope="module")
def fifo(tmp_path_factory, build_dir):
    """(compiled folder, merged folder, netlist json): the FIFO (a written memory: DeltaNet writes and
    reads) compiled onto QWEN_LIKE's shapes, and merged in front of a random base of those shapes."""
    root = tmp_path_factory.mktemp("llama")
    base = make_base(root / "base", QWEN_LIKE, hidden_size=384, layers=4, intermediate_size=192, vocab_size=300,
                     seed=3)
    result = synthesize("hdl.examples.fifo:FIFO", "macro", build_dir)
    folder = compile_onto(result.json_text, root / "fifo", base)
    merge_checkpoints(folder, base, root / "merged")
    return folder, root / "merged", result.json_text, base


@pytest.fixture(scope="module")
def counter(fifo, tmp_path_factory, build_dir):
    """(compiled folder, merged folder): the counter onto the same shapes, merged in front of the same base
    (its generated token names are short: llama-cpp-python's server prints at most 32 bytes a token)."""
    root = tmp_path_factory.mktemp("counter")
    result = synthesize("hdl.examples.counter:Counter", "macro", build_dir)
    folder = compile_onto(result.json_text, root / "counter", fifo[3])
    merge_checkpoints(folder, fifo[3], root / "merged")
    return folder, root / "merged"




@pytest.fixture(scope="session")
def onto():
    """compile_onto, for a test that compiles the design again."""
    return compile_onto
