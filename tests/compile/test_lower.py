"""Lowered combinational logic through real Qwen3_5DecoderLayers against the netlist simulator.

For register-only designs (the compiler's LUT flow, and its macro flow whose adders and comparisons
are threshold circuits spanning several layers), random register states and inputs are
put into the residual as bit pairs; the stack of decoder layers (identity norms, silent DeltaNet
mixers, FFNs from ``lower_logic``) must produce, bit for bit, the outputs and next register values
the simulator computes from the same state and inputs: float32 and bfloat16.
"""

import random
from pathlib import Path

import pytest
import torch
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer

from netlist2tf.frontend.synth import synthesize
from netlist2tf.gadgets.ffn_threshold import configure_mlp
from netlist2tf.gadgets.layout import NORM_WEIGHT, ResidualLayout
from netlist2tf.netlist.ir import CONST1, CONSTX, CONST0, parse_netlist
from netlist2tf.compile.lower import allocate_pairs, lower_logic
from netlist2tf.compile.schedule import schedule
from netlist2tf.sim.simulator import Simulator
from netlist2tf.compile.target import LINEAR, Target

SAMPLES = 150


def _stack(target, layout, neurons, dtype):
    config = target.to_hf_config(vocab_size=8)
    layers = []
    for i in range(target.num_layers):
        layer = Qwen3_5DecoderLayer(config, i)
        with torch.no_grad():
            for p in layer.parameters():
                p.zero_()
            layer.input_layernorm.weight.fill_(NORM_WEIGHT)
            layer.post_attention_layernorm.weight.fill_(NORM_WEIGHT)
        configure_mlp(layer.mlp, neurons[i], layout.one, dtype)
        layers.append(layer.to(dtype))
    return layers


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("design, flow", [
    ("hdl.examples.counter:Counter", "lut"), ("hdl.examples.lfsr:LFSR", "lut"),
    ("hdl.examples.multiplier:PipelinedMultiplier", "lut"),
    ("hdl.examples.multiplier:PipelinedMultiplier", "macro"),
    (f"{Path(__file__).parent.parent}/designs/arith.py:Arith", "macro")])
def test_logic_through_decoder_layers(design, flow, dtype, build_dir):
    nl = parse_netlist(synthesize(design, flow, build_dir).json_text)
    probe = schedule(nl, Target.standalone())
    pairs = allocate_pairs(nl, probe)
    hidden = 2 * len(pairs) + 48
    intermediate = max(8, max(probe.neurons))
    target = Target(hidden, intermediate, (LINEAR,) * 11, 1, 1, 16, 16, 1, 1, 16)
    sched = schedule(nl, target)
    layout = ResidualLayout.build(hidden, len(pairs))
    layers = _stack(target, layout, lower_logic(nl, sched, layout, pairs), dtype)

    rng = random.Random(design)
    sim = Simulator(nl, batch=SAMPLES)
    states = [{f"reg:{r.name}": rng.getrandbits(r.width) for r in nl.registers} for _ in range(SAMPLES)]
    inputs = {p.name: [rng.getrandbits(p.width) for _ in range(SAMPLES)] for p in sim.input_ports}
    inputs["rst"] = [int(rng.random() < 0.1) for _ in range(SAMPLES)]
    for lane, state in enumerate(states):
        sim.set_state(state, instance=lane)
    out = sim.step(inputs)
    after = sim.state()
    rows, expected = [], []
    for lane in range(SAMPLES):
        bits = {}
        for p in sim.input_ports:
            for i, n in enumerate(p.bits):
                bits[pairs[n]] = (inputs[p.name][lane] >> i) & 1
        for r in nl.registers:
            for i, n in enumerate(r.q):
                bits[pairs[n]] = (states[lane][f"reg:{r.name}"] >> i) & 1
        want = {}
        for p in nl.outputs:
            for i, n in enumerate(p.bits):
                want[n] = (int(out[p.name][lane]) >> i) & 1
        for r in nl.registers:
            for i, n in enumerate(r.d):
                want[n] = (int(after[f"reg:{r.name}"][lane]) >> i) & 1
        rows.append(layout.initial(bits))
        expected.append(want)

    x = torch.stack(rows).unsqueeze(0).to(dtype)
    with torch.no_grad():
        for layer in layers:
            x = layer(x, position_embeddings=None)
    y = x[0]
    for row, want in enumerate(expected):
        for n, bit in want.items():
            if n in (CONST0, CONST1, CONSTX):
                assert bit == (n == CONST1)
                continue
            (got,) = layout.read_bits(y[row], [pairs[n]])
            assert got == bit, f"sample {row}: net {nl.nets[n]} is {got}, the simulator says {bit}"
    # nothing outside the pairs moved: constant, anchors, free channels
    assert torch.equal(y[:, [layout.one] + [c for c, _ in layout.anchors]],
                       torch.stack(rows)[:, [layout.one] + [c for c, _ in layout.anchors]].to(dtype))


@pytest.mark.parametrize("design", ["hdl.examples.multiplier:PipelinedMultiplier", "hdl.examples.alu:ALU"])
def test_pair_reuse_never_overlaps_live_nets(design, build_dir):
    """Checked apart from the allocator: two nets share a pair only when the first one's last reader
    (an FFN) runs no later than the second one's writer, and the first one's pair is then reset in
    that reader's layer; the emitted nets are never given away."""
    from netlist2tf.compile.lower import allocate_pairs_reusing, live_pairs_per_layer
    nl = parse_netlist(synthesize(design, "macro", build_dir).json_text)
    # the ALU's dividers put ~6,000 neurons in layer 0 (their thermometer steps)
    sched = schedule(nl, Target.standalone(layers=40, intermediate_size=8192))
    kept = {n for p in nl.outputs for n in p.bits} | {n for r in nl.registers for n in r.d}
    pairs, resets = allocate_pairs_reusing(nl, sched, kept)
    assert len(set(pairs.values())) < 0.8 * len(pairs)               # it does reuse
    writer, readers = {}, {}
    for n in {n for p in nl.inputs for n in p.bits} | {n for r in nl.registers for n in r.q}:
        writer[n] = 0
    for unit, layer in sched.cell_layer.items():
        for f in sched.functions[unit]:
            writer[f.out] = 2 * layer + 1
            for n in f.support:
                readers.setdefault(n, []).append(2 * layer + 1)
    reset_at = {n: 2 * layer + 1 for layer, nets in enumerate(resets) for n in nets}
    by_pair = {}
    for n, p in pairs.items():
        by_pair.setdefault(p, []).append(n)
    for p, nets in by_pair.items():
        nets.sort(key=lambda n: writer[n])
        for a, b in zip(nets, nets[1:]):
            assert a not in kept, f"emitted net {nl.nets[a]} shares its pair"
            assert max(readers.get(a, [writer[a]])) <= writer[b], (a, b)
            assert reset_at.get(a) == max(readers[a]), f"net {a} is not reset where it is last read"
    # the pairs in use per layer (the report's), counted here from the same writers and readers: a
    # net holds its pair from its write until its last reader's FFN, a kept or unread one to the end
    L = sched.target.num_layers
    end = {n: (2 * L + 1 if n in kept or n not in readers or max(readers[n]) <= writer[n] else max(readers[n]))
           for n in pairs}
    want = [max(sum(1 for n in pairs if writer[n] <= t < end[n]) for t in (2 * i, 2 * i + 1)) for i in range(L)]
    assert live_pairs_per_layer(nl, sched, kept) == want
    assert max(want) == len(set(pairs.values()))
