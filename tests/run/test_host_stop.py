"""netlist2tf.run.host.run_model's ``stop`` (what a time-limited tool call of the compiled CPU uses,
cpu.model_engine.run_model_batch): the prompt fed in pieces, stop() asked between them, gives the
simulator's trace (the oracle) and the same tokens as one piece; stop() returning True ends the run
before its first cycle."""

import pytest
import torch

from netlist2tf.run import host; from netlist2tf.run import verify
from netlist2tf.compile.plan import CompileSettings
from netlist2tf.driver import compile_netlist
from netlist2tf.checkpoint.emit import emit_checkpoint, load_checkpoint
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist


@pytest.fixture(scope="module")
def regfile(tmp_path_factory, build_dir):
    """The register file: its initial contents are prompt tokens, so the prompt has several pieces."""
    result = synthesize("hdl.examples.regfile:RegisterFile", "macro", build_dir)
    compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=3), prove=False)
    folder = emit_checkpoint(compiled, result.json_text, tmp_path_factory.mktemp("ckpt") / "RegisterFile")
    return load_checkpoint(folder, torch.float32)


def _verify(loaded, monkeypatch, stop=None):
    model, protocol, netlist, inits, meta = loaded
    if stop is not None:
        monkeypatch.setattr(verify, "run_model", lambda *a, **kw: host.run_model(*a, **kw, stop=stop))
    div, run = verify.verify_model(model, protocol, netlist, inits, 20, 2, 5, True,
                                   initial_memory=meta["initial_memory"])
    assert div is None, str(div)
    return run


@pytest.mark.parametrize("piece", [1, 5, 13])   # the prompt: 26 tokens
def test_prompt_in_pieces_gives_the_same_trace(regfile, monkeypatch, piece):
    whole = _verify(regfile, monkeypatch)
    asked = []
    monkeypatch.setattr(host, "PROMPT_PIECE", piece)
    run = _verify(regfile, monkeypatch, stop=lambda: asked.append(1) and False)
    assert run.tokens == whole.tokens and run.prompt_tokens == whole.prompt_tokens
    assert len(asked) >= -(-run.prompt_tokens // piece) > 1         # at least once per piece of the prompt


def test_stop_ends_the_run_in_the_prompt(regfile, monkeypatch):
    asked = []
    monkeypatch.setattr(host, "PROMPT_PIECE", 7)
    with pytest.raises(host.RunStopped):
        _verify(regfile, monkeypatch, stop=lambda: asked.append(1) or len(asked) == 3)
    assert len(asked) == 3
