"""End to end: compile example designs, emit the checkpoint, load it with AutoModelForCausalLM, and
run it against the netlist simulator (the oracle) on every output and register of every cycle."""

from pathlib import Path

import pytest
import torch

from netlist2tf import cli
from netlist2tf.compile.plan import CompileSettings
from netlist2tf.driver import compile_netlist
from netlist2tf.checkpoint.emit import emit_checkpoint, load_checkpoint
from netlist2tf.common.errors import Netlist2TFError
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.compile.protocol import OUT, REG, Field, TraceError, TraceProtocol
from netlist2tf.compile.schedule import ScheduleError
from netlist2tf.run.verify import verify_model

# The fewest layers each design fits in with the compiler's default (macro) flow: depth + 1.
LAYERS = {"hdl.examples.counter:Counter": 4, "hdl.examples.lfsr:LFSR": 4,
          "hdl.examples.multiplier:PipelinedMultiplier": 8, "hdl.examples.fifo:FIFO": 7,
          "hdl.examples.regfile:RegisterFile": 3}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, build_dir):
    """design -> emitted checkpoint folder (float32), compiled once per module."""
    made = {}

    def get(design):
        if design not in made:
            result = synthesize(design, "macro", build_dir)
            compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=LAYERS[design]), prove=False)
            made[design] = emit_checkpoint(compiled, result.json_text,
                                           tmp_path_factory.mktemp("ckpt") / design.split(":")[1])
        return made[design]
    return get


def _verify(folder, cycles, batch, dtype=torch.float32, prefill=True, seed=0):
    model, protocol, netlist, inits, meta = load_checkpoint(folder, dtype)
    assert type(model).__name__ == "Qwen3_5ForCausalLM"
    div, run = verify_model(model, protocol, netlist, inits, cycles, batch, seed, prefill,
                            initial_memory=meta["initial_memory"])
    assert div is None, str(div)
    return run


def test_counter_batch_8(checkpoints):
    run = _verify(checkpoints("hdl.examples.counter:Counter"), cycles=300, batch=8)
    # the rows really got different inputs and went different ways
    assert run.registers[0][-1] != run.registers[1][-1] or run.outputs[0] != run.outputs[1]


OTHERS = ["hdl.examples.lfsr:LFSR", "hdl.examples.multiplier:PipelinedMultiplier",
          "hdl.examples.fifo:FIFO", "hdl.examples.regfile:RegisterFile"]


@pytest.mark.parametrize("design", OTHERS)
def test_other_designs(design, checkpoints):
    _verify(checkpoints(design), cycles=30, batch=2)


@pytest.mark.slow
@pytest.mark.parametrize("design", OTHERS)
def test_thousand_cycles_batch_8(design, checkpoints):
    _verify(checkpoints(design), cycles=1000, batch=8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_memory_design_token_by_token(dtype, checkpoints):
    """The register file (initial contents written by prompt tokens, an asynchronous read port and a
    synchronous one) through the recurrent DeltaNet path, in both dtypes."""
    _verify(checkpoints("hdl.examples.regfile:RegisterFile"), cycles=20, batch=2, dtype=dtype,
            prefill=False, seed=3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("prefill", [True, False])
@pytest.mark.parametrize("batch", [1, 8])
def test_same_trace_in_every_mode(dtype, prefill, batch, checkpoints):
    """float32 / bfloat16, prefill / token by token, batch 1 / 8: every run equals the simulator, and
    every row's tokens equal those of the float32 prefill run of the same inputs."""
    folder = checkpoints("hdl.examples.lfsr:LFSR")
    run = _verify(folder, cycles=25, batch=batch, dtype=dtype, prefill=prefill, seed=7)
    assert run.tokens == _reference_tokens(folder, batch)


_REF = {}


def _reference_tokens(folder, batch):
    if (folder, batch) not in _REF:
        _REF[folder, batch] = _verify(folder, cycles=25, batch=batch, seed=7).tokens
    return _REF[folder, batch]


def test_emit_is_byte_identical(tmp_path, build_dir):
    result = synthesize("hdl.examples.counter:Counter", "lut", build_dir)
    folders = []
    for name in ("a", "b"):
        compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=5), prove=False)
        folders.append(emit_checkpoint(compiled, result.json_text, tmp_path / name))
    files = sorted(p.name for p in folders[0].iterdir())
    assert files == ["compile.json", "config.json", "generation_config.json", "model.safetensors",
                     "netlist.json", "prompt.txt", "tokenizer.json", "tokenizer_config.json",
                     "trace_protocol.json"]
    for name in files:
        assert (folders[0] / name).read_bytes() == (folders[1] / name).read_bytes(), name


@pytest.mark.slow          # the ALU synthesized in the lut flow: ~50 s (suite time)
def test_too_deep_names_path_and_numbers(build_dir):
    """The ALU's 4-LUT netlist is 34 levels deep; collapsing its LUT chains (schedule.compose) gets
    it to 20, still too deep for 11 layers: the error names the path and the layers it needs."""
    nl = parse_netlist(synthesize("hdl.examples.alu:ALU", "lut", build_dir).json_text)
    with pytest.raises(ScheduleError, match=r"(?s)the logic is 20 levels deep but 11 layers allow 10 .*"
                                            r"critical path:\n    level 0: in:.*level 20: output mod_mix"
                                            r".*use --layers 21"):
        compile_netlist(nl, CompileSettings(layers=11), prove=False)


def test_two_write_ports_outside_the_compile_flows_are_refused_clearly(build_dir):
    """The compile flows split such a memory (tests/frontend/test_multiport.py); a netlist made otherwise (the
    word flow) is refused with the way out."""
    from pathlib import Path
    design = f"{Path(__file__).parent.parent}/designs/unusual.py:TwoWritePorts"
    nl = parse_netlist(synthesize(design, "word", build_dir).json_text)
    with pytest.raises(Netlist2TFError, match=r"memory mem \(2 write ports\) at .*unusual.py:\d+: .*the "
                                              r"compile flows \(lut, macro, macro6\) rewrite .*--flow macro"):
        compile_netlist(nl, CompileSettings(), prove=False)


def test_malformed_trace_is_rejected(build_dir):
    nl = parse_netlist(synthesize("hdl.examples.counter:Counter", "lut", build_dir).json_text)
    proto = TraceProtocol.from_netlist(nl, {r.clock for r in nl.registers})
    good = [proto.token(Field(OUT, 0, 0, 5)), proto.token(Field(OUT, 1, 0, 1)), proto.token(Field(REG, 0, 1, 6))]
    outs, regs = proto.decode_frame(0, good)
    # the lut flow gives one flip-flop per bit: chunk value 6 spreads over 8 one-bit registers
    assert outs == {"count": 5, "wrap": 1} and list(regs.values()) == [0, 1, 1, 0, 0, 0, 0, 0]
    # after the frame's last token the next frame's registers are read; inside it, this frame's
    last = proto.field(good[-1])
    assert proto.read_parity(last) == 1 and proto.read_parity(proto.field(good[0])) == 0
    with pytest.raises(TraceError, match="cycle 0, token 2: got reg chunk 0 parity 0, expected reg chunk 0 parity 1"):
        proto.decode_frame(0, good[:2] + [proto.token(Field(REG, 0, 0, 6))])
    with pytest.raises(TraceError, match="token 99999 is outside the trace vocabulary"):
        proto.decode_frame(0, good[:2] + [99999])
    with pytest.raises(TraceError, match="cycle 3: 2 generated tokens, the protocol has 3"):
        proto.decode_frame(3, good[:2])


def test_cli_compile_and_verify(tmp_path, capsys, build_dir):
    out = tmp_path / "counter"
    assert cli.main(["compile", "hdl.examples.counter:Counter", "--layers", "5", "--out", str(out),
                     "--build-dir", str(build_dir)]) == 0
    assert "5 layers, hidden" in capsys.readouterr().err
    assert cli.main(["verify", str(out), "--cycles", "30", "--batch", "2", "--dtype", "bfloat16"]) == 0
    assert "equals the netlist simulator on every output and register in 30 cycles x 2 rows" in capsys.readouterr().err
    assert cli.main(["verify", str(out), "--cycles", "200", "--batch", "3", "--teacher-forced"]) == 0
    assert "in 200 cycles x 3 rows (float32, teacher-forced)" in capsys.readouterr().err
    assert cli.main(["verify", str(out), "--teacher-forced", "--token-by-token"]) == 2
    assert "cannot be combined with --token-by-token" in capsys.readouterr().err
    progress = tmp_path / "progress.pt"
    assert cli.main(["verify", str(out), "--cycles", "200", "--teacher-forced", "--window", "64",
                     "--resume", str(progress)]) == 0
    assert "(float32, teacher-forced)" in capsys.readouterr().err and not progress.exists()
    assert cli.main(["verify", str(out), "--resume", str(progress)]) == 2
    assert "add --teacher-forced" in capsys.readouterr().err
    assert cli.main(["verify", str(tmp_path / "missing")]) == 2
    assert "missing: no such checkpoint folder" in capsys.readouterr().err


def _qwen_like(tmp_path, hidden, intermediate):
    """A Qwen3.5-shaped text config (DeltaNet heads of 128, 2 value heads per key head, the
    [linear x3, full] pattern), small enough to build in a test."""
    import json
    cfg = {"model_type": "qwen3_5_text", "hidden_size": hidden, "intermediate_size": intermediate,
           "num_hidden_layers": 8, "layer_types": ["linear_attention"] * 3 + ["full_attention"],
           "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
           "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 128,
           "linear_value_head_dim": 128, "vocab_size": 1000}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_compile_onto_qwen_shapes(tmp_path, build_dir):
    """d_k = 128 heads grouped 2:1, used exactly; the layer types the compiler's (DeltaNet in every
    layer but the last, whatever the base's [linear x3, full] pattern: a merge lists every layer's
    type); exact runs."""
    from netlist2tf.compile.target import Target
    target = Target.from_config_json(_qwen_like(tmp_path, 512, 256), layers=8)
    result = synthesize("hdl.examples.counter:Counter", "lut", build_dir)
    compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(target=target), prove=False)
    cfg = compiled.model.config
    assert (cfg.hidden_size, cfg.intermediate_size, cfg.linear_key_head_dim, cfg.linear_num_value_heads) == \
        (512, 256, 128, 8)
    assert list(cfg.layer_types) == ["linear_attention"] * 7 + ["full_attention"]
    folder = emit_checkpoint(compiled, result.json_text, tmp_path / "ckpt")
    _verify(folder, cycles=40, batch=2)
    _verify(folder, cycles=15, batch=2, dtype=torch.bfloat16, prefill=False)


@pytest.mark.slow       # the suite's longest compile; test_compile_onto_qwen_shapes keeps the Qwen3.5 shapes in the default suite
def test_reads_spread_over_deltanet_layers_on_qwen_shapes(tmp_path, build_dir):
    """A RAM too big for one layer of a Qwen3.5-shaped target (d_k = 128, 6 key heads of 2 value
    heads): each of its two read ports takes 9 interleaved banks of 254 words (value head = the
    address's low bit, row = the rest), spread over several DeltaNet layers (plan.spread_reads), the
    banks' outputs adding into the same data pairs; and a register read after layer 0
    (plan.late_registers). Hand-counted: layer 0 holds the 5 input and 4 write-field chunks (2 to a
    key head: 5) and the counter's 2 register chunks (1): 6 key heads, full, so the checksum
    register ``acc`` (2 chunks, needed only with the reads' data) goes to layer 2 (1); the
    input-address read, moved to layer 2 by balance_reads, spreads over layers 2 and 3 (5 + 4 key
    heads: each layer filled up to 6) and the counter's read (address ready at layer 1) over 1, 2,
    3, 4 (6 + 0 + 2 + 1). Every compiled layer but the last is DeltaNet (the target's pattern has
    full attention in layer 3: there the reads spread over 1, 2, 4, 5 and 2, 4).
    Exact against the simulator with random writes and reads over all 2,048 words, float32 and
    bfloat16 (prefill)."""
    import json

    from netlist2tf.report.build import memory_lowering
    from netlist2tf.compile.target import Target
    cfg = json.loads(_qwen_like(tmp_path, 512, 512).read_text())
    cfg.update(linear_num_key_heads=6, linear_num_value_heads=12)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    target = Target.from_config_json(tmp_path / "config.json", layers=8)
    result = synthesize(f"{Path(__file__).parent.parent}/designs/unusual.py:BigRam", "macro", build_dir)
    compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(target=target), prove=False)
    assert compiled.stats["deltanet_key_heads"] == [6, 6, 6, 6, 1, 0, 0, 0]
    sched = compiled.plan.schedule
    assert sched.read_layers(("ram", 1)) == (1, 2, 3, 4) and sched.read_layers(("ram", 0)) == (2, 3)
    assert sorted((h.layer, h.holds.rsplit(": ", 1)[1]) for h in compiled.plan.heads if "acc[" in h.holds) == \
        [(2, "acc[0:8]"), (2, "acc[8:16]")]
    ports = {p["port"]: p for p in memory_lowering(compiled.plan)[0]["read_ports"]}
    assert ports[0]["layers"] == [2, 3] and ports[0]["key_heads"] == 9
    folder = emit_checkpoint(compiled, result.json_text, tmp_path / "ckpt")
    _verify(folder, cycles=40, batch=2)
    _verify(folder, cycles=12, batch=2, dtype=torch.bfloat16)


def test_too_wide_for_a_qwen_target(tmp_path, build_dir, capsys):
    path = _qwen_like(tmp_path, 64, 16)
    assert cli.main(["compile", "hdl.examples.lfsr:LFSR", "--target", str(path), "--layers", "8",
                     "--build-dir", str(build_dir)]) == 2
    err = capsys.readouterr().err
    assert "does not fit the target" in err
    # (dead nets' bits are reused, one channel each: 88 channels since the balancer's second pass,
    # 96 with one; 176 as pairs, 240 without reuse)
    assert "the residual stream needs 88 channels, the target's hidden size is 64" in err
    # the logic is spread over the layers (balanced within each cell's slack): every layer but the
    # last has more than 16 neurons; each line names its layer and count
    import re
    counts = {int(a): int(b) for a, b in re.findall(r"layer (\d+) needs (\d+) FFN neurons, the target has 16", err)}
    assert sorted(counts) == list(range(8)) and all(c > 16 for c in counts.values())
    # 3 input + 2 register chunks, two value heads to a key head: 3 key heads (6 of 8 value heads)
    assert "DeltaNet" not in err


def _teacher(folder, cycles, batch, dtype=torch.float32):
    from netlist2tf.run.verify import verify_teacher_forced
    model, protocol, netlist, inits, meta = load_checkpoint(folder, dtype)
    div, checked = verify_teacher_forced(model, protocol, netlist, inits, cycles, batch, 0,
                                         meta["initial_memory"], window=512)
    assert div is None, str(div)
    return checked


@pytest.mark.slow          # ~15 s each; shorter teacher-forced runs of every example stay in the default suite
@pytest.mark.parametrize("design", ["hdl.examples.fifo:FIFO", "hdl.examples.regfile:RegisterFile"])
def test_teacher_forced_thousand_cycles(design, checkpoints):
    """1,000 cycles x 8 rows, every generated token (memory writes included) checked against the
    model's greedy choice in long forward calls."""
    checked = _teacher(checkpoints(design), 1000, 8)
    model, protocol, *_ = load_checkpoint(checkpoints(design), torch.float32)
    assert checked == 1000 * 8 * len(protocol.generated)


def test_teacher_forced_agrees_with_generation_on_a_broken_model(checkpoints):
    """A single corrupted weight (negated: a bit written with the wrong sign): the teacher-forced check
    and greedy generation name the same first divergence (cycle, row, output)."""
    from netlist2tf.run.verify import verify_teacher_forced
    model, protocol, netlist, inits, meta = load_checkpoint(checkpoints("hdl.examples.fifo:FIFO"), torch.float32)
    with torch.no_grad():
        w = model.model.layers[-1].mlp.down_proj.weight
        nz = torch.nonzero(w)
        i, j = nz[len(nz) // 2].tolist()
        w[i, j] = -w[i, j]
    tf, _ = verify_teacher_forced(model, protocol, netlist, inits, 100, 4, 0, meta["initial_memory"])
    gen, _ = verify_model(model, protocol, netlist, inits, 100, 4, 0, True, initial_memory=meta["initial_memory"])
    assert tf is not None and gen is not None
    assert (tf.cycle, tf.row) == (gen.cycle, gen.row)
    assert gen.what.split()[1] in tf.what            # the output port's name is in the bit names


class _StopAfter:
    """The model, but its ``calls``-th forward call raises KeyboardInterrupt (a run killed mid-way)."""
    def __init__(self, model, calls):
        self.model, self.calls = model, calls

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, **kw):
        self.calls -= 1
        if self.calls == 0:
            raise KeyboardInterrupt
        return self.model(**kw)


def test_teacher_forced_resumes(checkpoints, tmp_path):
    """A teacher-forced check killed after two windows continues from its saved progress (the cache
    tensors the forward returned) and reaches the uninterrupted run's result; the saved cache really is
    used (a corrupted one diverges); progress of another window size or another model is ignored."""
    from netlist2tf.run.verify import verify_teacher_forced
    model, protocol, netlist, inits, meta = load_checkpoint(checkpoints("hdl.examples.fifo:FIFO"), torch.float32)
    args = (protocol, netlist, inits, 200, 2, 0, meta["initial_memory"])
    full = verify_teacher_forced(model, *args, window=64)
    assert full[0] is None and full[1] == 200 * 2 * len(protocol.generated)
    saved, logs = tmp_path / "progress.pt", []
    with pytest.raises(KeyboardInterrupt):
        verify_teacher_forced(_StopAfter(model, 3), *args, window=64, resume=saved, save_every=0,
                              log=logs.append)
    import io

    from netlist2tf.common.outputs import PROGRESS_MAGIC, OutputError
    data = saved.read_bytes()
    assert data.startswith(PROGRESS_MAGIC)
    state = torch.load(io.BytesIO(data[len(PROGRESS_MAGIC):]), weights_only=True)
    assert state["start"] == 128 and len(state["layers"]) == model.config.num_hidden_layers
    # another window size: the saved progress does not apply (the forward would be chunked differently)
    broken = tmp_path / "broken.pt"
    broken.write_bytes(saved.read_bytes())
    assert verify_teacher_forced(model, *args, window=32, resume=broken, log=logs.append) == full
    assert "another model" in logs[-1] and not broken.exists()
    # a corrupted register state in layer 0's saved cache: the resumed check must notice
    kind, layer0 = state["layers"][0]
    layer0["recurrent_states"] = {k: torch.zeros_like(v) for k, v in layer0["recurrent_states"].items()}
    buf = io.BytesIO()
    torch.save(state, buf)
    broken.write_bytes(PROGRESS_MAGIC + buf.getvalue())
    div, pos = verify_teacher_forced(model, *args, window=64, resume=broken, log=logs.append)
    assert div is not None and pos > 128 and "resuming" in logs[-1]
    # the real saved progress: resumed at position 128, same result as one uninterrupted run
    assert verify_teacher_forced(model, *args, window=64, resume=saved, log=logs.append) == full
    assert logs[-1].startswith("resuming the teacher-forced check at position 128 of") and not saved.exists()
    # a different model (one weight changed) does not resume from progress saved by this one
    with pytest.raises(KeyboardInterrupt):
        verify_teacher_forced(_StopAfter(model, 3), *args, window=64, resume=saved, save_every=0)
    with torch.no_grad():
        model.lm_head.weight[0, 0] += 1.0
    verify_teacher_forced(model, *args, window=64, resume=saved, log=logs.append)
    assert "another model" in logs[-1]
    # a file that is not ours (torch.save's own zip, without our first line) is refused and kept
    foreign = tmp_path / "thesis.pt"
    torch.save({"chapter": 1}, foreign)
    before = foreign.read_bytes()
    with pytest.raises(OutputError, match="did not write"):
        verify_teacher_forced(model, *args, window=64, resume=foreign)
    assert foreign.read_bytes() == before


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_teacher_forced_batch_1(dtype, checkpoints):
    assert _teacher(checkpoints("hdl.examples.lfsr:LFSR"), 200, 1, dtype) == 200 * 4


@pytest.fixture(scope="module")
def alu_folder(tmp_path_factory, build_dir):
    result = synthesize("hdl.examples.alu:ALU", "macro", build_dir)
    compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=11), prove=False)
    return emit_checkpoint(compiled, result.json_text, tmp_path_factory.mktemp("alu"))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_alu_in_11_layers_teacher_forced(dtype, alu_folder):
    """The ALU (every Amaranth operator; its 8-bit dividers one-layer macros, issue 22) compiled in
    11 layers: 1,000 cycles x 4 rows teacher-forced by the fast executor (equal to the stock forward
    layer by layer on this model: tests/run/test_fast.py), and the stock forward itself on the first 20
    cycles x 4 rows (the model has 331 M dense parameters: stock float32 checks ~25 tokens/s here, and
    stock bfloat16 ~15 on a machine without bfloat16 matrix instructions, where all 1,000 x 4 cycles
    would take hours)."""
    from netlist2tf.run import load_fast_checkpoint
    from netlist2tf.run.verify import verify_teacher_forced
    fast, protocol, netlist, inits, meta = load_fast_checkpoint(alu_folder, dtype)
    assert _teacher(alu_folder, 20, 4, dtype) == 20 * 4 * len(protocol.generated)
    div, checked = verify_teacher_forced(fast, protocol, netlist, inits, 1000, 4, 0, meta["initial_memory"])
    assert div is None, str(div)
    assert checked == 1000 * 4 * len(protocol.generated)


@pytest.mark.slow
def test_two_memories_written_in_one_cycle(tmp_path, build_dir):
    """Two write ports committed together at the frame's last token, a memory in 4 banks with an
    address token of two chunks and initial contents in the prompt, a 40-bit word in 5 data chunks:
    the emitted checkpoint against the simulator, generated (float32 prefill, bfloat16 token by
    token) and teacher-forced with a different initial image per batch row (prompts padded)."""
    from pathlib import Path

    from netlist2tf.run.verify import verify_teacher_forced

    design = f"{Path(__file__).parent.parent}/designs/unusual.py:TwoMemories"
    result = synthesize(design, "macro", build_dir)
    nl = parse_netlist(result.json_text)
    compiled = compile_netlist(nl, CompileSettings(layers=6), prove=False)
    st = compiled.stats
    assert [p.memory for p in compiled.protocol.ports] == ["wide", "big"]     # the largest last
    assert len(compiled.protocol.port("big").ma) == 2 and len(compiled.protocol.port("wide").md) == 5
    assert st["deltanet_key_heads"][1] == 4 + 1          # big: 4 banks of 64; wide: 1
    folder = emit_checkpoint(compiled, result.json_text, tmp_path / "ckpt")
    _verify(folder, cycles=40, batch=2)
    _verify(folder, cycles=12, batch=2, dtype=torch.bfloat16, prefill=False)
    model, protocol, netlist, inits, meta = load_checkpoint(folder)
    images = [meta["initial_memory"], {"big": {3: 0x123, 200: 0xABC}}]
    div, checked = verify_teacher_forced(model, protocol, netlist, inits, 150, 2, 5, images)
    assert div is None, str(div)


def test_keep_outputs(tmp_path, capsys, build_dir):
    """``compile --keep-outputs``: tokens for the kept outputs only and less logic; the kept outputs
    are unchanged (the full netlist's simulator is the oracle, on the same random inputs) and the
    checkpoint verifies against the pruned netlist (what load_checkpoint returns)."""
    import numpy as np

    from netlist2tf.sim.simulator import RandomStimulus, Simulator

    design, kept = "hdl.examples.fifo:FIFO", ["r_data"]
    out = tmp_path / "fifo"
    assert cli.main(["compile", design, "--layers", "7", "--keep-outputs", ",".join(kept), "--out", str(out),
                     "--build-dir", str(build_dir)]) == 0
    capsys.readouterr()
    _, protocol, netlist, _, meta = load_checkpoint(out)
    full = parse_netlist(synthesize(design, "macro", build_dir).json_text)
    assert [p.name for p in netlist.outputs] == kept and meta["outputs"] == kept
    assert len(netlist.cells) < len(full.cells) and len(netlist.registers) == len(full.registers)
    clocks = {r.clock for r in full.registers}
    assert len(protocol.outputs) < len(TraceProtocol.from_netlist(full, clocks).outputs)
    a, b, stim = Simulator(full, batch=4), Simulator(netlist, batch=4), RandomStimulus(3)
    for k in range(300):
        values = stim.values(k, a)
        oa, ob = a.step(values), b.step(values)
        for name in kept:
            assert np.array_equal(np.asarray(oa[name]), np.asarray(ob[name])), (k, name)
    assert cli.main(["verify", str(out), "--cycles", "40", "--batch", "2"]) == 0
    assert cli.main(["compile", design, "--keep-outputs", "r_data,nope", "--out", str(tmp_path / "bad"),
                     "--build-dir", str(build_dir)]) == 2
    err = capsys.readouterr().err
    assert "has no output 'nope'" in err and "r_rdy" in err
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("design,layers", [("hdl.examples.fifo:FIFO", 5), ("hdl.examples.counter:Counter", 3)])
def test_collapsed_logic_fits_fewer_layers(design, layers, tmp_path, build_dir):
    """Fewer layers than the mapped netlist's depth needs: the scheduler collapses LUT chains
    (schedule.compose) and the model still equals the netlist simulator on every output and
    register, every cycle."""
    result = synthesize(design, "macro", build_dir)
    nl = parse_netlist(result.json_text)
    from netlist2tf.netlist.graph import find_drivers, netlist_graph
    from netlist2tf.compile.schedule import _levelise
    from netlist2tf.compile.target import Target

    # as mapped, the logic is too deep for these layers
    mapped, _ = _levelise(nl, Target.standalone(layers=layers), 8, netlist_graph(nl), find_drivers(nl),
                          collapse=None)
    assert mapped.depth > layers - 1
    compiled = compile_netlist(nl, CompileSettings(layers=layers), prove=False)
    assert compiled.stats["layers"] == layers < LAYERS[design]
    folder = emit_checkpoint(compiled, result.json_text, tmp_path / "ckpt")
    _verify(folder, cycles=60, batch=2)


@pytest.mark.parametrize("dtype,prefill,batch", [(torch.float32, True, 3),
                                                 pytest.param(torch.bfloat16, False, 2, marks=pytest.mark.slow)])
def test_gated_registers(dtype, prefill, batch, tmp_path, build_dir, capsys):
    """``gated``: a serial multiplier's working registers are emitted only in the frames after
    which it is busy (12 generated tokens then, 6 otherwise); generated frames vary per batch row
    and the model still equals the netlist simulator on every output, every emitted register and
    which frames emit them; teacher forcing agrees."""
    from netlist2tf.run.verify import verify_teacher_forced

    design = "tests/designs/unusual.py:SerialMultiplier"
    out = tmp_path / "sm"
    assert cli.main(["compile", design, "--layers", "8", "--gated", "busy:acc,mcand,mult,count",
                     "--out", str(out), "--build-dir", str(build_dir)]) == 0
    assert "proved that the group does not matter while busy is 0" in capsys.readouterr().err
    model, protocol, netlist, inits, meta = load_checkpoint(out, dtype)
    assert meta["stats"]["generated_tokens_per_cycle"] == 12
    assert meta["stats"]["generated_tokens_per_cycle_gate_off"] == 6
    div, run = verify_model(model, protocol, netlist, inits, 100, batch, 3, prefill)
    assert div is None, str(div)
    assert all(sorted(set(counts)) == [6, 12] for counts in run.frame_tokens)
    assert [c for c in run.frame_tokens[0]] != [c for c in run.frame_tokens[1]]   # rows drift apart
    div, checked = verify_teacher_forced(model, protocol, netlist, inits, 100, batch, 3)
    assert div is None, str(div)


GATED_MACHINE = ["--gated", "busy:acc,mcand,mult,count", "--gated", "err:code", "--gated", "done:p",
                 "--gated-writes", "mem"]


@pytest.mark.parametrize("dtype,prefill,batch", [(torch.float32, True, 3),
                                                 pytest.param(torch.bfloat16, False, 2, marks=pytest.mark.slow)])
def test_every_kind_of_gated_group(dtype, prefill, batch, tmp_path, build_dir, capsys):
    """Two register groups (a serial multiplier's working registers gated by busy, an error code by
    err), an output group (the product, emitted only in the cycle done is 1) and gated writes (the
    memory's write group only on a store): the frame's length and make-up change every cycle and
    differ between batch rows, and the model still equals the netlist simulator on every output it
    emits, every register, every write and which groups each frame holds; teacher forcing agrees."""
    from netlist2tf.run.verify import verify_teacher_forced

    out = tmp_path / "gm"
    assert cli.main(["compile", "tests/designs/unusual.py:GatedMachine", "--layers", "8", *GATED_MACHINE,
                     "--out", str(out), "--build-dir", str(build_dir)]) == 0
    assert "proved that the group does not matter while its gate is 0" in capsys.readouterr().err
    model, protocol, netlist, inits, meta = load_checkpoint(out, dtype)
    assert [(g.kind, g.name) for g in protocol.groups] == [("out", "done"), ("reg", "busy"), ("reg", "err"),
                                                            ("write", "mem")]
    assert protocol.generated[-1][0] == "reg"         # the ports come before the ungated registers
    # the output group's gate is not emitted: its value is the group's presence
    assert not any(name.split("[")[0] == "done" for c in protocol.outputs for name in c.names)
    div, run = verify_model(model, protocol, netlist, inits, 120, batch, 5, prefill, meta["initial_memory"])
    assert div is None, str(div)
    assert {o["done"] for o in run.outputs[0]} == {0, 1}
    assert all(o["done"] == g[0] for o, g in zip(run.outputs[0], run.groups[0]))
    seen = {g for row in run.groups for g in row}
    assert len(seen) >= 5                          # many combinations of groups, and ...
    assert all(any(g[i] for g in seen) and not all(g[i] for g in seen) for i in range(4))   # each on and off
    assert run.frame_tokens[0] != run.frame_tokens[1]
    assert any(w["mem"][0] is not None for w in run.writes[0]) and any(w["mem"][0] is None for w in run.writes[0])
    div, checked = verify_teacher_forced(model, protocol, netlist, inits, 120, batch, 5, meta["initial_memory"])
    assert div is None, str(div)


def test_a_broken_gate_is_refused_with_a_counterexample(tmp_path, capsys, build_dir):
    """The error code gated by busy instead of err: it matters while busy is 0 (the code output reads
    it once err is set; a start while idle makes busy's next value 1, so the frame emits code's
    stale value as its next one), and compile stops with z3's counterexample naming it. Which of the
    two z3 reports depends on the solver's state in the process (an earlier test's queries)."""
    out = tmp_path / "gm"
    args = ["--gated", "busy:acc,mcand,mult,count,code", "--gated", "done:p", "--gated-writes", "mem"]
    assert cli.main(["compile", "tests/designs/unusual.py:GatedMachine", "--layers", "8", *args,
                     "--out", str(out), "--build-dir", str(build_dir)]) == 2
    err = capsys.readouterr().err
    assert "the group matters while busy is 0" in err and "code = 0x" in err
    assert "output code_o" in err or "register code (next, with busy next 1)" in err, err
    assert not out.exists()


def test_gated_group_that_matters_is_refused(tmp_path, capsys, build_dir):
    """``--gated`` with a register an output reads while idle (p, the result): compile stops with the
    prover's counterexample and writes nothing."""
    out = tmp_path / "sm"
    assert cli.main(["compile", "tests/designs/unusual.py:SerialMultiplier", "--layers", "8", "--gated",
                     "busy:acc,mcand,mult,count,p", "--out", str(out), "--build-dir", str(build_dir)]) == 2
    err = capsys.readouterr().err
    assert "the group matters while busy is 0" in err and "output p" in err
    assert not out.exists()


def test_gated_registers_errors(build_dir):
    nl = parse_netlist(synthesize("tests/designs/unusual.py:SerialMultiplier", "macro", build_dir).json_text)
    with pytest.raises(Netlist2TFError, match="'start' is not a register"):
        compile_netlist(nl, CompileSettings(layers=8, gated=("busy", ["acc", "start"])), prove=False)
    with pytest.raises(Netlist2TFError, match="the gate 'acc' must be a 1-bit register"):
        compile_netlist(nl, CompileSettings(layers=8, gated=("acc", ["mcand"])), prove=False)


def test_design_without_inputs_runs_by_stock_generate(tmp_path, build_dir):
    """A design whose only input is its clock (a register and a memory written every cycle): after
    the prompt the model needs no host tokens, so generation runs frame after frame on the model's own
    logits (generated float32 prefill batch 2, bfloat16 token by token, teacher-forced: equal to the
    simulator), and stock ``model.generate()`` alone produces the simulator's exact token trace."""
    from pathlib import Path

    from netlist2tf.run.verify import expected_tokens, verify_teacher_forced

    design = f"{Path(__file__).parent.parent}/designs/free_running.v"
    result = synthesize(design, "macro", build_dir)
    compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=4), prove=False)
    assert compiled.protocol.inputs == () and compiled.protocol.ports
    folder = emit_checkpoint(compiled, result.json_text, tmp_path / "ckpt")
    _verify(folder, cycles=40, batch=2)
    _verify(folder, cycles=20, batch=1, dtype=torch.bfloat16, prefill=False)
    model, protocol, netlist, inits, meta = load_checkpoint(folder)
    div, _ = verify_teacher_forced(model, protocol, netlist, inits, 60, 1, 0, meta["initial_memory"])
    assert div is None, str(div)
    cycles = 30
    rows, generated, _ = expected_tokens(protocol, netlist, inits, cycles, 1, 0, meta["initial_memory"])
    prompt = rows[0][:generated[0].index(True)]
    out = model.generate(torch.tensor([prompt]), max_new_tokens=len(rows[0]) - len(prompt), do_sample=False)
    assert out[0].tolist() == rows[0]
    counts = [protocol.decode_frame(k, rows[0][len(prompt) + k * protocol.tokens_per_cycle:][
        :protocol.tokens_per_cycle])[0]["count"] for k in range(4)]
    assert counts == [5, 28, 143, 206]          # hand-checked: x -> 5x + 3 mod 256 from 5


# the bfloat16 token-by-token case takes ~2 min on 2 cores: slow (suite time)
@pytest.mark.parametrize("gated,dtype,prefill", [(True, torch.float32, True),
                                                 pytest.param(False, torch.bfloat16, False, marks=pytest.mark.slow)])
def test_folded_writes(gated, dtype, prefill, tmp_path, build_dir):
    """``--folded-writes``: a 32-bit memory written with words of every size emits each word's data
    only up to the chunk of its highest 1 (its low 4 bits packed with the address: the frame's
    length changes with it), a skipped chunk is
    written as 0 (the port's first chunk clears its field), and the model equals the netlist
    simulator on every read-back word, generated (batch 4) and teacher-forced, with the write
    group gated or not. (Without the clear the model reads stale upper bytes: checked by hand.)"""
    from netlist2tf.run.verify import verify_teacher_forced

    out = tmp_path / "fm"
    args = ["--folded-writes", "mem"] + (["--gated-writes", "mem"] if gated else [])
    assert cli.main(["compile", "tests/designs/unusual.py:FoldedMachine", "--layers", "6", *args,
                     "--out", str(out), "--build-dir", str(build_dir)]) == 0
    model, protocol, netlist, inits, meta = load_checkpoint(out, dtype)
    assert [g.kind for g in protocol.groups] == ["write"] * gated + ["fold"] * 4
    assert meta["folded_writes"] == ["mem"]
    div, run = verify_model(model, protocol, netlist, inits, 60, 4, 3, prefill, meta["initial_memory"])
    assert div is None, str(div)
    words = [w["mem"][1] for row in run.writes for w in row if w["mem"][0] is not None]
    assert {max(1, -(-v.bit_length() // 8)) for v in words} == {1, 2, 3, 4}      # every size written
    lengths = {n for row in run.frame_tokens for n in row}
    assert len(lengths) >= 4 and max(lengths) == len(protocol.generated)
    div, checked = verify_teacher_forced(model, protocol, netlist, inits, 200, 4, 3, meta["initial_memory"])
    assert div is None, str(div)


HELD_MACHINE = ["--held", "k_emit:k_new:k"]


def _check_k_emit_group(model, protocol, netlist, inits):
    """The one group gated by k_emit: the model equals the netlist simulator, prefilled and token by
    token (80 cycles, 2 rows), with frames both with and without the group (its presence is
    k_emit), and teacher-forced."""
    from netlist2tf.run.verify import verify_teacher_forced

    for prefill in (True, False):
        div, run = verify_model(model, protocol, netlist, inits, 80, 2, 7, prefill)
        assert div is None, str(div)
        held = [g[0] for row in run.groups for g in row]
        assert any(held) and not all(held)
        assert all(o["k_emit"] == g[0] for o, g in zip(run.outputs[0], run.groups[0]))
    div, checked = verify_teacher_forced(model, protocol, netlist, inits, 80, 2, 7)
    assert div is None, str(div)


def test_held_group(tmp_path, build_dir, capsys):
    """A held group (``--held``): the register k is read every cycle but emitted only in the cycles
    that load it and the ones after (its gate k_emit, not emitted itself); the frames that skip it
    leave the double-buffer row written two frames before, and the model still equals the netlist
    simulator on every emitted token, prefilled and token by token, and teacher-forced."""
    out = tmp_path / "hm"
    assert cli.main(["compile", "tests/designs/unusual.py:HeldMachine", "--layers", "4", *HELD_MACHINE,
                     "--out", str(out), "--build-dir", str(build_dir)]) == 0
    assert "proved that the group is unchanged for two cycles while k_emit is 0" in capsys.readouterr().err
    model, protocol, netlist, inits, meta = load_checkpoint(out, torch.float32)
    assert [(g.kind, g.name, g.hold) for g in protocol.groups] == [("reg", "k_emit", "k_new")]
    assert not any(name.split("[")[0] == "k_emit" for c in protocol.outputs for name in c.names)
    _check_k_emit_group(model, protocol, netlist, inits)


def test_tail_group(tmp_path, build_dir, capsys):
    """A tail group (``--held GATE::REGISTER``, no dirty bit): k (two chunks) is read every cycle
    but emitted only in the cycles that may change it (a load or a reset), just before the frame's
    last two tokens, and kept in one row that the frame's last token writes from the k tokens 3 and 2
    positions back; the model equals the netlist simulator on every emitted token, prefilled and
    token by token, float32 and bfloat16, teacher-forced, with frames with and without k."""
    out = tmp_path / "tm"
    assert cli.main(["compile", "tests/designs/unusual.py:TailMachine", "--layers", "4", "--held", "k_emit::k",
                     "--out", str(out), "--build-dir", str(build_dir)]) == 0
    assert "proved that the group is unchanged while k_emit is 0" in capsys.readouterr().err
    model, protocol, netlist, inits, meta = load_checkpoint(out, torch.float32)
    assert [(g.kind, g.name, g.hold, g.tail) for g in protocol.groups] == [("reg", "k_emit", "", True)]
    assert sorted(protocol.tail_lags().values()) == [2, 3]
    assert protocol.frame_kinds(False)[-2:] == protocol.generated[-2:]      # the frame ends on acc's chunks
    _check_k_emit_group(model, protocol, netlist, inits)
    model16, *_ = load_checkpoint(out, torch.bfloat16)
    div, _ = verify_model(model16, protocol, netlist, inits, 60, 4, 3, True)
    assert div is None, str(div)


def test_a_tail_group_whose_gate_misses_a_change_is_refused(tmp_path, capsys, build_dir):
    """k_load is 1 on a load but not on the reset, which restores k: z3 finds the reset changing k
    while the gate is 0; one clear error, exit 2, nothing written."""
    out = tmp_path / "tm"
    assert cli.main(["compile", "tests/designs/unusual.py:TailMachine", "--layers", "4", "--held", "k_load::k",
                     "--out", str(out), "--build-dir", str(build_dir)]) == 2
    err = capsys.readouterr().err
    assert "the group changes in a cycle where k_load is 0" in err and "Traceback" not in err
    assert not out.exists()


def test_two_tail_groups_are_refused(tmp_path, capsys, build_dir):
    """Only one group can end the frame: a second tail group is one clear error naming both."""
    out = tmp_path / "hm"
    assert cli.main(["compile", "tests/designs/unusual.py:HeldMachine", "--layers", "4", "--held", "k_emit::k",
                     "--held", "k_emit::k_new", "--out", str(out), "--build-dir", str(build_dir)]) == 2
    err = capsys.readouterr().err
    assert "at most one such (tail) group" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("held,what", [
    ("k_emit:k_new:acc", "the group changes in a cycle where k_emit is 0"),     # acc changes every cycle
    ("load_gate:k_new:k", "gate must be a 1-bit output"),                        # no such output
    ("k_emit:acc:k", "dirty bit 'acc' must be a 1-bit register"),
    ("k_emit:k", "write GATE:DIRTY:REGISTER"),
    (":k_new:k", "write GATE:DIRTY:REGISTER"),
])
def test_a_broken_held_group_is_refused(held, what, tmp_path, capsys, build_dir):
    """A held group whose promise fails (acc changes while k_emit is 0: z3's counterexample), or that
    names what cannot be a gate or a dirty bit: one clear error, exit 2, nothing written."""
    out = tmp_path / "hm"
    assert cli.main(["compile", "tests/designs/unusual.py:HeldMachine", "--layers", "4", "--held", held,
                     "--out", str(out), "--build-dir", str(build_dir)]) == 2
    err = capsys.readouterr().err
    assert what in err and "Traceback" not in err
    assert not out.exists()
