"""Bits as signs (netlist2tf.weights.signed): one residual channel per bit instead of a pair.

Oracles: the pair-layout model of the same plan (its hidden states after every layer, read through
the hand-checkable map s = b - (1 - b)), the netlist simulator's traces (tests/run/test_compile_e2e.py
runs every design on the signed checkpoints, the default), the real Qwen3_5RMSNorm, and hand-made
weights that break the pair discipline on purpose.
"""

import random

import numpy as np
import pytest
import torch
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5RMSNorm

from netlist2tf.weights.assemble import write_weights
from netlist2tf.common.errors import Netlist2TFError
from netlist2tf.gadgets.layout import NORM_WEIGHT, ResidualLayout
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.compile.plan import CompileSettings, plan_model
from netlist2tf.weights import signed as signed_module
from netlist2tf.weights.signed import (_bf16, _split_constant, bits_layout_of, fold_arrays, fold_state, signed_layout,
                                       unfold_state)
from netlist2tf.run.verify import expected_tokens
from netlist2tf.frontend.synth import synthesize


@pytest.mark.parametrize("hidden, n", [(64, 40), (1280, 1200), (2048, 2000)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_signed_rmsnorm_is_identity(hidden, n, dtype):
    layout = ResidualLayout.build(hidden, n, signed=True)
    rng = random.Random(hidden)
    bits = [{i: rng.randint(0, 1) for i in range(n)} for _ in range(16)]
    x = torch.stack([layout.initial(b) for b in bits]).to(dtype)
    assert float(x[0].double().pow(2).sum()) == 64 * hidden          # +-1 squares to 1, like a pair
    assert set(x[:, 1:1 + n].flatten().tolist()) == {-1.0, 1.0}
    norm = Qwen3_5RMSNorm(hidden, eps=1e-6)
    with torch.no_grad():
        norm.weight.fill_(NORM_WEIGHT)
    assert torch.equal(norm.to(dtype)(x), x)
    assert layout.read_bits(x[3], range(n)) == [bits[3][i] for i in range(n)]
    with pytest.raises(AssertionError, match="no pairs"):
        layout.pair(0)
    with pytest.raises(Netlist2TFError, match=r"40 bits need \d+ residual channels"):
        ResidualLayout.build(40, 40, signed=True)


@pytest.fixture(scope="module")
def fifo_plans(tmp_path_factory):
    result = synthesize("hdl.examples.fifo:FIFO", "macro", tmp_path_factory.mktemp("build"))
    nl = parse_netlist(result.json_text)
    return nl, {bits: plan_model(nl, CompileSettings(layers=6, bits=bits)) for bits in ("pairs", "signed")}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_signed_model_is_the_pair_model(fifo_plans, dtype):
    """On the simulator's trace of the FIFO (4 rows, 60 cycles), every hidden state of the signed
    checkpoint is the pair model's read through s = b - (1 - b), the constant equal, and the logits
    equal; and the signed model is half as wide."""
    nl, plans = fifo_plans
    pairs, signed = (write_weights(plans[b]) for b in ("pairs", "signed"))
    assert signed.layout.signed and not pairs.layout.signed
    assert signed.model.config.hidden_size < 0.6 * pairs.model.config.hidden_size
    assert signed.stats["parameters"] == sum(p.numel() for p in signed.model.parameters())
    rows, _, _ = expected_tokens(plans["pairs"].protocol, nl, plans["pairs"].initial_registers, 60, 4,
                                 initial_memory=plans["pairs"].initial_memory)
    ids = torch.tensor(rows)
    with torch.no_grad():
        a = pairs.model.to(dtype)(input_ids=ids, output_hidden_states=True)
        b = signed.model.to(dtype)(input_ids=ids, output_hidden_states=True)
    P, S = pairs.layout, signed.layout
    hi = [P.pair(k)[0] for k in range(P.n_pairs)]
    lo = [P.pair(k)[1] for k in range(P.n_pairs)]
    for layer, (x, y) in enumerate(zip(a.hidden_states, b.hidden_states)):
        assert torch.equal(y[..., [S.bit(k) for k in range(S.n_pairs)]], x[..., hi] - x[..., lo]), layer
        assert torch.equal(y[..., S.one], x[..., P.one]), layer
    assert torch.equal(a.logits, b.logits)


def test_unfold_gives_back_an_equal_pair_model(fifo_plans):
    """unfold(fold(state)) computes what the pair model computes (its weights may sit on other sides
    of a pair: reads of s become reads of b): hidden states equal on every channel."""
    from transformers import Qwen3_5ForCausalLM

    nl, plans = fifo_plans
    pairs = write_weights(plans["pairs"])
    signed = write_weights(plans["signed"])
    state = unfold_state(signed.model.state_dict(), signed.layout, pairs.layout)
    model = Qwen3_5ForCausalLM(pairs.model.config).eval()
    model.load_state_dict(state)
    rows, _, _ = expected_tokens(plans["pairs"].protocol, nl, plans["pairs"].initial_registers, 40, 2,
                                 initial_memory=plans["pairs"].initial_memory)
    ids = torch.tensor(rows)
    with torch.no_grad():
        a = pairs.model(input_ids=ids, output_hidden_states=True)
        b = model(input_ids=ids, output_hidden_states=True)
    for x, y in zip(a.hidden_states, b.hidden_states):
        assert torch.equal(x, y)
    assert bits_layout_of(signed.model.model.embed_tokens.weight.detach()) == signed.layout
    assert bits_layout_of(pairs.model.model.embed_tokens.weight.detach()) == pairs.layout


def test_the_embedding_folds_to_the_signed_layouts_rows():
    """The compile writes a folded model's embedding in the signed layout directly: that is what the
    fold makes of the pair layout's rows of the same bits (random rows, some tokens without bits, a
    zero row past them), byte for byte."""
    pairs = ResidualLayout.build(200, 90)
    signed = signed_layout(pairs)
    rng = random.Random(7)
    rows = [{i: rng.randint(0, 1) for i in rng.sample(range(90), rng.randint(0, 90))} for _ in range(50)]
    state = {"model.embed_tokens.weight": np.zeros((51, pairs.hidden_size), dtype=np.float32)}
    state["model.embed_tokens.weight"][:50] = pairs.initial_rows_array(rows)
    want = np.zeros((51, signed.hidden_size), dtype=np.float32)
    want[:50] = signed.initial_rows_array(rows)
    assert fold_arrays(state, pairs, signed)["model.embed_tokens.weight"].tobytes() == want.tobytes()


@pytest.mark.parametrize("dense", [False, True], ids=["sparse", "dense"])
def test_fold_refuses_what_breaks_the_pairs(fifo_plans, dense, monkeypatch):
    """A write to b without its 1 - b, a write to an anchor, a read of an anchor: each refused, naming
    the weight, by the fold of a matrix's non-zero entries (the compiler's weights: quarters) and by
    the dense float64 fold (any other weights); and both fold the good model to the same bytes."""
    _, plans = fifo_plans
    pairs = write_weights(plans["pairs"])
    P = pairs.layout
    S = signed_layout(P)
    good = pairs.model.state_dict()
    if dense:
        sparse_fold = fold_state(good, P, S)
        monkeypatch.setattr(signed_module, "_nonzero", lambda t: None)
        dense_fold = fold_state(good, P, S)
        assert dense_fold.keys() == sparse_fold.keys()
        assert all(dense_fold[k].numpy().tobytes() == sparse_fold[k].numpy().tobytes() for k in dense_fold)
    hi, lo = P.pair(3)
    anchor = P.anchors[0][0]
    key = "model.layers.1.mlp.down_proj.weight"
    for name, change, match in [
            ("uneven", lambda s: s[key][hi].add_(1.0), f"{key} writes a pair unevenly"),
            ("anchor write", lambda s: s[key][anchor].add_(1.0), f"{key} writes the constant, an anchor"),
            ("anchor read", lambda s: s["lm_head.weight"][:, anchor].add_(1.0), "lm_head.weight reads an anchor")]:
        state = {k: v.clone() for k, v in good.items()}
        change(state)
        with pytest.raises(Netlist2TFError, match=match):
            fold_state(state, P, S)
    fold_state(good, P, S)                    # as written, it folds


def test_a_constant_bfloat16_cannot_hold_is_split_over_an_anchor():
    """A fold's constant term 64 * 301 has 9 significant bits (bfloat16 holds 8): it is split into
    c0 + 127 * c1, both exact (torch's own bfloat16 rounding is the oracle), their sum the value; one
    bfloat16 already holds is left alone."""
    col = np.array([64.0 * 301, 64.0 * 3, -257.0 * 2 ** 10], dtype=np.float64)
    c0, c1 = _split_constant(col, (99, 127))
    assert np.array_equal(c0 + 127 * c1, col)
    for c in (c0, c1):
        t = torch.from_numpy(c)
        assert torch.equal(t.to(torch.bfloat16).double(), t)
    assert c1[1] == 0 and c0[1] == 64 * 3
    with pytest.raises(Netlist2TFError, match="--bits pairs"):
        _split_constant(col, None)


def test_bfloat16_rounding_is_torchs():
    """The fold's numpy rounding to bfloat16 equals torch's on 100,000 float64 numbers: halves,
    ties, neighbours of ties, tiny, huge."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(0, 1, 40000) * 2.0 ** rng.integers(-30, 30, 40000),
                        (rng.integers(-2 ** 9, 2 ** 9, 20000) + 0.5) * 2.0 ** -1,        # bfloat16 ties
                        np.nextafter((rng.integers(1, 2 ** 9, 20000) + 0.5), np.inf) * 4.0])
    assert np.array_equal(_bf16(x), torch.from_numpy(x).to(torch.bfloat16).double().numpy())


def test_entries_are_the_matrix_add_at_writes_and_fold_the_same(monkeypatch):
    """``Entries.of_terms`` (the FFN projections as the compile hands them to the fold) is the matrix
    ``np.add.at`` writes from the same terms (repeated entries summed, entries that cancel gone),
    and folds to the bytes the dense float64 fold makes of that matrix; terms a float32 sum could
    round are refused (None: the compile writes them dense)."""
    pairs = ResidualLayout.build(64, 24)
    signed = signed_layout(pairs)
    rng = np.random.default_rng(3)
    shape = (40, pairs.hidden_size)
    rows = rng.integers(0, 40, 600)
    chans = np.concatenate([[pairs.one] * 40, rng.integers(0, 24, 560) * 2 + pairs.first_pair
                            + rng.integers(0, 2, 560)])
    rows[:40] = np.arange(40)
    vals = rng.integers(-3, 4, 600) * 128.0
    vals[100], vals[101], rows[101], chans[101] = 256.0, -256.0, rows[100], chans[100]    # a cancelling pair
    dense = np.zeros(shape, dtype=np.float32)
    np.add.at(dense, (rows, chans), vals.astype(np.float32))
    entries = signed_module.Entries.of_terms(shape, rows, chans, vals)
    assert np.array_equal(entries.dense(), dense) and entries.values.size == np.count_nonzero(dense)
    assert np.array_equal(entries.column(pairs.one), dense[:, pairs.one])
    key = "model.layers.0.mlp.gate_proj.weight"
    from_entries = fold_arrays({key: entries}, pairs, signed)[key]
    monkeypatch.setattr(signed_module, "_nonzero", lambda t: None)
    assert from_entries.tobytes() == fold_arrays({key: dense}, pairs, signed)[key].tobytes()
    assert signed_module.Entries.of_terms(shape, [0, 0], [1, 1], [1.0, 2.0 ** -30]) is None
    assert signed_module.Entries.of_terms(shape, [0], [1], [0.1]) is None          # not a float32
