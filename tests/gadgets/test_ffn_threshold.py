"""FFN threshold gadget and the residual layout, through the real transformers modules.

Oracle: Python evaluates each boolean function / threshold on every input pattern; the real
Qwen3_5MLP / Qwen3_5RMSNorm / Qwen3_5DecoderLayer must reproduce it with torch.equal, in float32 and
bfloat16, for every one of the 2**k input patterns at once (a batch of positions).
"""

import itertools
import random

import pytest
import torch
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import (Qwen3_5DecoderLayer, Qwen3_5MLP,
                                                          Qwen3_5RMSNorm)

from netlist2tf.common.errors import Netlist2TFError
from netlist2tf.gadgets.ffn_threshold import (Neuron, boolean_function, configure_mlp,
                                              threshold_gate)
from netlist2tf.gadgets.layout import NORM_WEIGHT, ResidualLayout

DTYPES = [torch.float32, torch.bfloat16]


def _config(hidden=96, intermediate=512):
    return Qwen3_5TextConfig(hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=1,
                             layer_types=["linear_attention"], vocab_size=16,
                             linear_num_key_heads=1, linear_num_value_heads=1,
                             linear_key_head_dim=16, linear_value_head_dim=16,
                             num_attention_heads=1, num_key_value_heads=1, head_dim=16)


def _inputs(layout, n_in, dtype):
    """Every pattern of n_in input bits (pairs 0..n_in-1), one position each."""
    patterns = list(itertools.product([0, 1], repeat=n_in))
    x = torch.stack([layout.initial({j: bits[j] for j in range(n_in)}) for bits in patterns])
    return x.to(dtype), patterns


@pytest.mark.parametrize("hidden, n_pairs", [(64, 20), (96, 40), (2560, 1200), (4096, 2000)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_is_identity(hidden, n_pairs, dtype):
    layout = ResidualLayout.build(hidden, n_pairs)
    assert all(0 < v <= 127 for _, v in layout.anchors)
    rng = random.Random(hidden)
    x = torch.stack([layout.initial({i: rng.randint(0, 1) for i in range(n_pairs)}) for _ in range(16)])
    x = x.to(dtype)
    # the invariant itself, hand-checkable: sum of squares == 64 * hidden
    assert float(x[0].double().pow(2).sum()) == 64 * hidden
    norm = Qwen3_5RMSNorm(hidden, eps=1e-6)
    with torch.no_grad():
        norm.weight.fill_(NORM_WEIGHT)
    norm = norm.to(dtype)
    assert torch.equal(norm(x), x)


def test_layout_too_small():
    with pytest.raises(Netlist2TFError, match=r"40 bit pairs need \d+ residual channels .* but the "
                                              r"hidden size is 64; raise the hidden size"):
        ResidualLayout.build(64, 40)


def _run_mlp(layout, neurons, x, dtype, intermediate=512):
    mlp = Qwen3_5MLP(_config(layout.hidden_size), intermediate)
    with torch.no_grad():
        for p in mlp.parameters():
            p.zero_()
    configure_mlp(mlp, neurons, layout.one, dtype)
    mlp = mlp.to(dtype)
    with torch.no_grad():
        return mlp(x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_random_boolean_functions_exact(k, dtype):
    layout = ResidualLayout.build(96, 12)
    rng = random.Random(k)
    x, patterns = _inputs(layout, k, dtype)
    for _ in range(4):
        table = rng.getrandbits(1 << k)
        out_pairs = [layout.pair(k), layout.pair(k + 1)]
        neurons = boolean_function([layout.pair(j) for j in range(k)], table, out_pairs[0])
        neurons += boolean_function([layout.pair(j) for j in range(k)], ~table & ((1 << (1 << k)) - 1),
                                    out_pairs[1])   # and its complement into a second pair
        y = _run_mlp(layout, neurons, x, dtype)
        expected = torch.zeros_like(x)
        for row, bits in enumerate(patterns):
            index = sum(b << j for j, b in enumerate(bits))
            f = (table >> index) & 1
            for pair, bit in ((out_pairs[0], f), (out_pairs[1], 1 - f)):
                expected[row, pair[0]], expected[row, pair[1]] = bit, -bit
        assert torch.equal(y, expected), f"truth table {table:#x}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_threshold_gates_exact(dtype):
    """Carry out of an 4-bit addition (a weighted threshold), majority-of-5, and a constant."""
    layout = ResidualLayout.build(96, 16)
    x, patterns = _inputs(layout, 8, dtype)
    a_bits, b_bits = range(4), range(4, 8)
    carry = threshold_gate([(layout.pair(j)[0], 1 << j) for j in a_bits]
                           + [(layout.pair(j)[0], 1 << (j - 4)) for j in b_bits], 16, layout.pair(8))
    majority = threshold_gate([(layout.pair(j)[0], 1) for j in range(5)], 3, layout.pair(9))
    never = threshold_gate([(layout.pair(0)[0], 1)], 5, layout.pair(10))
    always = threshold_gate([(layout.pair(0)[0], 1)], -3, layout.pair(11))
    assert never == [] and len(always) == 1 and len(carry) == 2
    y = _run_mlp(layout, carry + majority + always, x, dtype)
    for row, bits in enumerate(patterns):
        a = sum(bits[j] << j for j in a_bits)
        b = sum(bits[j] << (j - 4) for j in b_bits)
        for pair, bit in ((8, int(a + b >= 16)), (9, int(sum(bits[:5]) >= 3)), (11, 1), (10, 0)):
            hi, lo = layout.pair(pair)
            assert (float(y[row, hi]), float(y[row, lo])) == (bit, -bit), (pair, bits)
    touched = {c for p in (8, 9, 10, 11) for c in layout.pair(p)}
    assert torch.count_nonzero(y[:, [c for c in range(96) if c not in touched]]) == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_decoder_layer_applies_the_logic_and_ignores_text_positions(dtype):
    """A whole Qwen3_5DecoderLayer (identity norms, silent DeltaNet mixer, threshold MLP): the output
    residual is the input with the result pairs set; an all-zero (text) position stays all zero."""
    layout = ResidualLayout.build(96, 12)
    layer = Qwen3_5DecoderLayer(_config(96), 0)
    with torch.no_grad():
        for p in layer.parameters():
            p.zero_()
        layer.input_layernorm.weight.fill_(NORM_WEIGHT)
        layer.post_attention_layernorm.weight.fill_(NORM_WEIGHT)
    xor3 = boolean_function([layout.pair(j) for j in range(3)], 0b10010110, layout.pair(5))
    configure_mlp(layer.mlp, xor3, layout.one, dtype)
    layer = layer.to(dtype)
    x, patterns = _inputs(layout, 3, dtype)
    x = torch.cat([x, torch.zeros(1, 96, dtype=dtype)])          # a text position at the end
    with torch.no_grad():
        y = layer(x.unsqueeze(0), position_embeddings=None)[0]
    for row, bits in enumerate(patterns):
        assert layout.read_bits(y[row], [0, 1, 2, 5]) == [*bits, sum(bits) % 2]
    assert torch.equal(y[:-1, 1 + 2 * 6:], x[:-1, 1 + 2 * 6:])   # other pairs and anchors kept
    assert torch.count_nonzero(y[-1]) == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_negative_preactivations_are_exact(dtype):
    """b = [x1 + 256 * x2 - 1000 * x0 >= 1]-style neurons: the negative side reaches -1000 (not exact in
    bfloat16), the positive side stays <= 256; every output is exact on all 8 patterns."""
    layout = ResidualLayout.build(96, 12)
    ins = [(layout.pair(0)[0], -1000), (layout.pair(1)[0], 1), (layout.pair(2)[0], 255)]
    neurons = [Neuron(tuple(ins), 0, ((layout.pair(5)[0], 1),)),          # relu(m): m in [-1000, 256]
               *threshold_gate(ins, 200, layout.pair(6))]                 # [m >= 200]
    x, patterns = _inputs(layout, 3, dtype)
    y = _run_mlp(layout, neurons, x, dtype).float()
    for row, (x0, x1, x2) in enumerate(patterns):
        m = -1000 * x0 + x1 + 255 * x2
        assert float(y[row, layout.pair(5)[0]]) == max(m, 0)
        assert float(y[row, layout.pair(6)[0]]) == int(m >= 200) == -float(y[row, layout.pair(6)[1]])


def test_range_and_capacity_errors():
    layout = ResidualLayout.build(96, 12)
    mlp = Qwen3_5MLP(_config(96), 4)
    wide = Neuron(tuple((layout.pair(j)[0], 100) for j in range(3)), 0, ((1, 1),))
    with pytest.raises(Netlist2TFError, match=r"neuron 0: pre-activation range \[0, 300\] is not exact "
                                              r"in bfloat16 \(limit 256\); split the gate"):
        configure_mlp(mlp, [wide], layout.one, torch.bfloat16)
    configure_mlp(mlp, [wide], layout.one, torch.float32)   # fine in float32
    # a large negative side is fine: it rounds, but stays negative, and silu of it is exactly 0
    configure_mlp(mlp, [Neuron(((layout.pair(0)[0], -3000),), 256, ((1, 1),))], layout.one, torch.bfloat16)
    with pytest.raises(Netlist2TFError, match=r"5 FFN neurons needed but the layer has 4"):
        configure_mlp(mlp, [wide] * 5, layout.one)


def test_anchors_exist_for_every_size():
    """sum(x**2) == 64 * hidden exactly for many hidden sizes and pair counts (the anchor search
    must also handle remainders that need more than four squares of at most 127)."""
    for hidden in list(range(48, 6000, 37)) + [2560, 3360, 4096]:
        for n in (0, 1, hidden // 4, hidden // 2 - 24):
            layout = ResidualLayout.build(hidden, n)
            assert n + 1 + sum(v * v for _, v in layout.anchors) == 64 * hidden
            assert all(0 < v <= 127 for _, v in layout.anchors)
