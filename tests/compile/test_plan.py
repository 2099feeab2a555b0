"""The plan/weights split (netlist2tf.compile.plan, netlist2tf.weights.assemble.write_weights, netlist2tf.driver):
the plan is made without torch, the weights written from it are byte-identical to the ones the
compiler wrote before the split, and the plan's figures are the written model's."""

import subprocess
from pathlib import Path
import sys

import pytest

from netlist2tf.driver import compile_netlist
from netlist2tf.checkpoint.emit import emit_checkpoint, file_digest
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.compile.plan import CompileSettings, plan_model, resolve_groups

# sha256 of model.safetensors (float32) for these netlists: first pinned before the plan/weights
# split (commit 78e7282, `assemble` deciding and writing in one scope; the split kept them byte-
# identical); the serial multiplier's changed once on purpose: a macro's equal neurons merged
# (``ffn_threshold.merge_neurons``, issue 18: an adder's bit-0 steps share ReLUs; was e10a1cfa...);
# both changed on purpose once more when a standalone model's value heads per key head became the
# cheapest group instead of one word's (issue 18: banks and layer-0 chunks share key heads; the
# counter has 2 key heads of 2 value heads, was 64b7e3dc...; the multiplier 4 of 4, was ce325150...);
# the multiplier's once more when the width balancer began moving a macro's layer slices too, in
# passes until nothing moves (issue 18: the CPU's one-cycle multiplier; was 6f56bf9d...).
# A change here means the weights changed, which needs a reason (and the CPU's proofs re-run), not
# a new number. These are the pair-layout weights (``bits="pairs"``); the signed checkpoint is their
# fold (netlist2tf.weights.signed, checked against the pair model in tests/weights/test_signed.py).
BEFORE_SPLIT = {
    ("hdl.examples.counter:Counter", 4, None):
        "b9b3b046818c06bb4cba227c3faf232b83da00ab9b9e6ba7794b18d12b8169f8",
    ("tests/designs/unusual.py:SerialMultiplier", 8, ("busy", ("acc", "mcand", "mult", "count"))):
        "89038f7cc90258be196ca516254a0915ecb9a5d81bf237a0fe42beaf0b691f79",
}


@pytest.mark.parametrize("case", list(BEFORE_SPLIT), ids=["counter", "serial-multiplier-gated"])
def test_weights_byte_identical_to_before_the_split(case, tmp_path, build_dir):
    design, layers, gated = case
    result = synthesize(design, "macro", build_dir)
    compiled = compile_netlist(parse_netlist(result.json_text),
                               CompileSettings(layers=layers, gated=gated, bits="pairs"))
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
        "from netlist2tf.netlist.ir import parse_netlist\n"
        "from netlist2tf.compile.plan import CompileSettings, plan_model\n"
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


def test_gated_frames_round_trip_and_bad_frames_are_named(build_dir):
    """A protocol with every kind of gated group: each combination of gates gives a frame that
    decodes back to what was packed (the skipped groups' outputs and registers absent, a skipped
    write group no write); a frame missing part of a group, or with a group out of place, is one
    TraceError naming the token."""
    import itertools

    from netlist2tf.compile.protocol import MA, MD, OUT, REG, TraceError

    nl = parse_netlist(synthesize("tests/designs/unusual.py:GatedMachine", "macro", build_dir).json_text)
    settings = CompileSettings(layers=8, gated=(("busy", ("acc", "mcand", "mult", "count")), ("err", ("code",)),
                                                ("done", ("p",))), gated_writes=("mem",))
    proto = plan_model(nl, settings).protocol
    chunk_values = {(k, c.index): (7 * c.index + 3) % 256 for k in (OUT, MA, MD) for c in proto.chunks_of(k)}
    chunk_values[(MA, 0)] |= 1                                      # the write is enabled
    registers = {name: (5 * i + 1) % (1 << w) for i, (name, w) in enumerate(proto.register_names)}
    lengths = set()
    for gates in itertools.product((False, True), repeat=len(proto.groups)):
        toks = proto.generated_tokens(3, chunk_values, registers, gates)
        lengths.add(len(toks))
        assert proto.present_groups(toks) == gates
        outs, regs = proto.decode_frame(3, toks)
        assert ("p" in outs) == gates[0] and "busy" in outs and "rd" in outs
        for names, idx in proto._register_segments():
            assert all(n in regs for n, _ in names) == all((REG, j) in proto.frame_kinds(gates) for j in idx)
        assert all(regs[n] == v for n, v in registers.items() if n in regs)
        write = proto.decode_writes(toks)["mem"]
        assert (write[0] is not None) == gates[3]
    assert min(lengths) == len(proto.frame_kinds(False)) and max(lengths) == len(proto.generated)
    full = proto.generated_tokens(3, chunk_values, registers, True)
    group = proto.groups[1].chunks                                 # the multiplier's registers
    start = proto.generated.index(group[0])
    with pytest.raises(TraceError, match=f"cycle 3, token {start + 1}: got reg chunk {group[2][1]}"):
        proto.decode_frame(3, full[:start + 1] + full[start + 2:])       # one of its chunks missing
    with pytest.raises(TraceError, match="cycle 3: 4 generated tokens, the protocol has"):
        proto.decode_frame(3, full[:4])


def test_folded_write_frames(build_dir):
    """``folded_writes``: the port's address chunk is filled up with the word's low bits (packed: the
    enable and 3 address bits leave 4), and every data chunk is a fold group, nested (each absent
    when the one before it is), so a word costs its address chunk and its chunks up to the highest
    non-zero one (a word < 16 the address chunk alone); a skipped chunk decodes as 0; a fold chunk
    without the chunk before it is a TraceError; a constant-1 data bit keeps the chunks up to its own
    unfolded; the protocol survives its JSON."""
    import dataclasses

    from netlist2tf.netlist.ir import CONST1
    from netlist2tf.compile.protocol import MA, MD, OUT, REG, TraceError, TraceProtocol

    nl = parse_netlist(synthesize("tests/designs/unusual.py:FoldedMachine", "macro", build_dir).json_text)
    settings = CompileSettings(layers=6, gated_writes=("mem",), folded_writes=("mem",))
    proto = plan_model(nl, settings).protocol
    assert [(g.kind, g.name) for g in proto.groups] == [("write", "mem"), ("fold", "mem.data[4:]"),
                                                        ("fold", "mem.data[12:]"), ("fold", "mem.data[20:]"),
                                                        ("fold", "mem.data[28:]")]
    assert proto.groups[0].chunks == ((MA, 0),)                # enable, 3 address bits, data bits 0-3
    assert proto.mem_addr[0].names[4:] == ("mem.data[0]", "mem.data[1]", "mem.data[2]", "mem.data[3]")
    assert proto.ports[0].packed == 4 and proto.mem_data[0].names[0] == "mem.data[4]"
    assert proto.generated[-1][0] == REG and TraceProtocol.from_json(proto.to_json()) == proto
    # after the address chunk: the first data chunk if any bit from it up is 1, else the registers
    after = proto.generated[proto.generated.index((MD, 3)) + 1]
    assert proto.successors((MA, 0)) == [((MD, 0), ((1, True),)), (after, ((1, False),))]
    assert proto.successors((MD, 2)) == [((MD, 3), ((4, True),)), (after, ((4, False),))]
    # before the write group: the folds are absent with it and add no condition
    before = proto.generated[proto.generated.index((MA, 0)) - 1] if proto.generated.index((MA, 0)) else None
    cands = proto.first_chunks() if before is None else proto.successors(before)
    assert [c for _, c in cands] == [((0, True),), ((0, False),)]
    assert proto.presence([1, 0, 1, 1, 1]) == (True, False, False, False, False)   # nested under an absent fold
    assert proto.presence([0, 1, 1, 1, 1]) == (False,) * 5                         # nested under no write
    assert len(proto.fold_bits(1)) == 28 and len(proto.fold_bits(4)) == 4
    registers = {name: 0 for name, _ in proto.register_names}
    for word, want in ((0, 0), (0xF, 0), (0x10, 1), (0x7F, 1), (0x100, 1), (0x1000, 2), (0xAB0000, 3),
                       (0x80000000, 4), (0xFFFFFFFF, 4)):                        # hand-counted
        addr = 5
        values = {(k, c.index): 0 for k in (OUT,) for c in proto.outputs}
        values[(MA, 0)] = 1 | (addr << 1) | (word & 15) << 4
        values.update({(MD, j): (word >> (4 + 8 * j)) & 0xFF for j in range(4)})
        gates = [1] + [word >> k for k in (4, 12, 20, 28)]
        toks = proto.generated_tokens(2, values, registers, gates)
        assert sum(proto.field(t).kind == MD for t in toks) == want
        assert proto.decode_writes(toks)["mem"] == (addr, word)
        proto.decode_frame(2, toks)
    full = proto.generated_tokens(2, {**values, (MA, 0): 1, **{(MD, j): 9 for j in range(4)}}, registers, True)
    md1 = proto.generated.index((MD, 1))
    with pytest.raises(TraceError, match="holds mem.data.12:. without mem.data.4:."):
        proto.decode_frame(2, full[:md1 - 1] + full[md1:])
    # a data bit tied to 1 in the third data chunk: only the last one folds
    (mem,) = nl.memories
    wp = mem.write_ports[0]
    tied = dataclasses.replace(wp, data=wp.data[:20] + (CONST1,) + wp.data[21:])
    nl1 = dataclasses.replace(nl, memories=(dataclasses.replace(mem, write_ports=(tied,)),))
    proto1 = TraceProtocol.from_netlist(nl1, {r.clock for r in nl1.registers}, 8,
                                        resolve_groups(nl1, (), ("mem",), (), ("mem",)))
    assert [g.name for g in proto1.groups] == ["mem", "mem.data[28:]"]


def test_reads_move_to_lower_the_widest_deltanet_layer(build_dir):
    """plan.balance_reads: y (a constant-address read of ``mem``, 1 bank) shares layer 1 with x
    (all 16 banks of the 256-word ``mem`` at head dim 16) while layer 2 reads only the 1-bank
    ``m2``; moving y to layer 2 lowers the most key heads a layer needs. Hand-counted: the cheapest
    group is 8 value heads per key head (2 nk dk + nv (3 dv + 2) per channel: 1,632 with 2 key heads
    of 8, 3,200 with 2 of 16, 2,080 with 16 of 1), so layer 0's 8 chunks (3 input, 5 write-port) take
    1 key head, x's 16 banks 2 (8 side by side in each, told apart by the read selects), y's and
    m2's bank 1 each: [1, 2, 2] (y in layer 1 would make it 3). The model still equals the
    simulator (teacher-forced, every generated token): the banks sharing key heads are exact."""
    from netlist2tf.compile.schedule import schedule
    from netlist2tf.compile.target import Target
    from netlist2tf.run.verify import verify_teacher_forced

    nl = parse_netlist(synthesize(f"{Path(__file__).parent.parent}/designs/two_reads.v", "macro", build_dir).json_text)
    plain = schedule(nl, Target.standalone(layers=5))
    assert sorted(plain.read_layer.values()) == [1, 1, 2]
    compiled = compile_netlist(nl, CompileSettings(layers=5, head_dim=16))
    heads = compiled.plan.stats["deltanet_key_heads"]
    assert heads[:3] == [1, 2, 2] and max(heads) == 2, heads
    assert compiled.plan.target.linear_num_value_heads == 16
    shared = [h for h in compiled.plan.heads if h.layer == 1]
    assert len(shared) == 16 and all(len(h.read_select) == 4 == len(h.write_select) for h in shared)
    assert sorted(compiled.plan.schedule.read_layer.values()) == [1, 2, 2]
    div, checked = verify_teacher_forced(compiled.model, compiled.protocol, nl, compiled.initial_registers,
                                         200, 2, 0, compiled.initial_memory)
    assert div is None and checked == 200 * 2 * len(compiled.protocol.generated)
