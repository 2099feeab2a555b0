"""The attention lookup gadget, run through the real transformers modules and checked bit for bit
(torch.equal only, never a tolerance) against a Python model of the memory (a dict, latest write
wins; unique keys where recency is not exact)."""

import math
import random
from dataclasses import dataclass

import pytest
import torch
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
from transformers.cache_utils import DynamicCache
from transformers.masking_utils import create_causal_mask
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5Attention, Qwen3_5TextRotaryEmbedding

from netlist2tf.gadgets.attention_lookup import (
    BF16_MAX_DISTANCE,
    EXP_UNDERFLOW,
    GATE_OPEN,
    GATE_SHUT,
    INT_MAX,
    LEAD,
    LookupConfigError,
    configure_lookup,
    lookup_margins,
    plan_lookup,
    reset_attention,
)

F32, BF16 = torch.float32, torch.bfloat16


# ----------------------------------------------------------------------------------------------
# A residual layout for the tests: every flag is a pair, so sum(x**2) is the same on every active
# position and the decoder RMSNorm (weight 7, mean(x**2) = 64 via anchors) is an exact identity.

@dataclass
class Chans:
    hidden: int
    one: int
    flag: int
    flag_n: int
    sink: int
    sink_n: int
    query: list
    query_n: int
    key: list
    key_n: int
    value: list
    out: list
    found: tuple
    anchors: list
    text: list            # free channels: random content on ignored positions, else 0
    text_flag: int        # 1.0 on ignored positions (only read by lookups configured with text=)

    @staticmethod
    def build(n_keys: int, width: int, hidden: int) -> "Chans":
        it = iter(range(hidden))
        take = lambda k: [next(it) for _ in range(k)]
        one, flag, flag_n, sink, sink_n = take(5)
        query, (query_n,) = take(n_keys), take(1)
        key, (key_n,) = take(n_keys), take(1)
        value = [tuple(take(2)) for _ in range(width)]
        out = [tuple(take(2)) for _ in range(width)]
        found = tuple(take(2))
        anchors = take(12)
        (text_flag,) = take(1)
        text = list(it)
        assert len(text) >= 4, "hidden size too small for the layout"
        return Chans(hidden, one, flag, flag_n, sink, sink_n, query, query_n, key, key_n, value, out,
                     found, anchors, text, text_flag)

    def anchor_values(self) -> list[int]:
        """Integers < 128 whose squares bring sum(x**2) to 64 * hidden on an active position."""
        # one, the flag, sink, query and key pairs (query/key one-hot or their "none" channel),
        # the value pairs, the output pairs and the found pair: 1 each
        base = 6 + 2 * len(self.value)
        need = 64 * self.hidden - base
        vals = []
        while need > 4 * 127 * 127:
            vals.append(127)
            need -= 127 * 127
        vals += _four_squares(need)
        assert len(vals) <= len(self.anchors)
        return vals + [0] * (len(self.anchors) - len(vals))


def _four_squares(n: int) -> list[int]:
    for a in range(min(127, math.isqrt(n)), -1, -1):
        for b in range(min(a, math.isqrt(n - a * a)), -1, -1):
            for c in range(min(b, math.isqrt(n - a * a - b * b)), -1, -1):
                r = n - a * a - b * b - c * c
                d = math.isqrt(r)
                if d <= c and d * d == r:
                    return [a, b, c, d]
    raise AssertionError(n)


def make_batch(ch: Chans, T: int, B: int, seed: int, *, unique: bool, p_ignored=0.15, p_key=0.5,
               p_lookup=0.5, p_sink=0.03, n_used: int | None = None):
    """Residual inputs (B, T, hidden) and the exact expected module output: (+b, -b) on the output
    pairs (and the found pair) of every lookup that hits, 0.0 everywhere else. Position 0 of each row
    is a sink; more sinks, ignored positions (random text channels), writes that shadow older ones
    (unless ``unique``) and lookups that miss are mixed in at random."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    n = n_used or len(ch.key)
    width = len(ch.value)
    anchors = ch.anchor_values()
    x = torch.zeros(B, T, ch.hidden)
    want = torch.zeros(B, T, ch.hidden)
    for b in range(B):
        memory = {}
        for t in range(T):
            row = x[b, t]
            if t > 0 and rng.random() < p_ignored:
                row[ch.text] = torch.randn(len(ch.text), generator=gen) * 3
                row[ch.text_flag] = 1.0
                continue
            row[ch.one] = 1
            row[ch.anchors] = torch.tensor(anchors, dtype=torch.float32)
            for _, neg in ch.out:
                row[neg] = 1
            row[ch.found[1]] = 1
            is_sink = t == 0 or rng.random() < p_sink
            row[ch.sink if is_sink else ch.sink_n] = 1
            k = None
            if not is_sink and rng.random() < p_key:
                k = rng.randrange(n)
                if unique and k in memory:
                    k = None
            bits = [0] * width if is_sink else [rng.randrange(2) for _ in range(width)]
            if k is not None:
                row[ch.key[k]] = 1
                memory[k] = bits
            else:
                row[ch.key_n] = 1
            for bit, (pos, neg) in zip(bits, ch.value):
                row[pos], row[neg] = bit, 1 - bit
            if rng.random() < p_lookup:
                q = rng.randrange(n)
                row[ch.flag] = 1
                row[ch.query[q]] = 1
                if q in memory:
                    for bit, (pos, neg) in zip(memory[q], ch.out):
                        want[b, t, pos], want[b, t, neg] = bit, -bit
                    want[b, t, ch.found[0]], want[b, t, ch.found[1]] = 1, -1
            else:
                row[ch.flag_n] = 1
                row[ch.query_n] = 1
            assert float(row.square().sum()) == 64 * ch.hidden
    return x, want


def config(hd: int, *, nh=4, nkv=2, hidden=96, theta=1e7, factor=0.25, impl="eager") -> Qwen3_5TextConfig:
    cfg = Qwen3_5TextConfig(
        hidden_size=hidden, num_hidden_layers=1, num_attention_heads=nh, num_key_value_heads=nkv,
        head_dim=hd, layer_types=["full_attention"], vocab_size=8, intermediate_size=16,
        rope_parameters={"rope_type": "default", "rope_theta": theta, "partial_rotary_factor": factor})
    cfg._attn_implementation = impl
    return cfg


def tiny_model(cfg) -> Qwen3_5ForCausalLM:
    """One full-attention layer whose MLP is zero and whose norms are identities on the layout."""
    torch.manual_seed(0)
    model = Qwen3_5ForCausalLM(cfg).eval()
    layer = model.model.layers[0]
    with torch.no_grad():
        for p in layer.mlp.parameters():
            p.zero_()
        for norm in (layer.input_layernorm, layer.post_attention_layernorm, model.model.norm):
            norm.weight.fill_(7)
    reset_attention(layer.self_attn)
    return model


def run_model(model, x, mode: str, attention_mask=None):
    """The attention module's outputs and the model's last hidden state for ``x``: 'prefill' (all at
    once), 'decode' (token by token with the model's cache) or 'split' (prefill half, decode rest)."""
    attn = model.model.layers[0].self_attn
    seen = []
    hook = attn.register_forward_hook(lambda mod, args, out: seen.append(out[0]))
    T = x.shape[1]
    cut = {"prefill": T, "decode": 0, "split": T // 2}[mode]
    try:
        with torch.no_grad():
            if mode == "prefill":
                r = model.model(inputs_embeds=x, attention_mask=attention_mask, use_cache=False)
                return seen[0], r.last_hidden_state
            cache = DynamicCache(config=model.config)
            lasts = []
            if cut:
                r = model.model(inputs_embeds=x[:, :cut], cache=cache, use_cache=True)
                lasts.append(r.last_hidden_state)
            for t in range(cut, T):
                r = model.model(inputs_embeds=x[:, t:t + 1], cache=cache, use_cache=True)
                lasts.append(r.last_hidden_state)
    finally:
        hook.remove()
    return torch.cat(seen, 1), torch.cat(lasts, 1)


def run_module(attn: Qwen3_5Attention, x, cfg):
    """The bare module with the model's own RoPE and causal mask."""
    B, T, _ = x.shape
    pos = torch.arange(T)[None].expand(B, T)
    cos, sin = Qwen3_5TextRotaryEmbedding(cfg)(x, pos[None].expand(3, B, T))
    mask = create_causal_mask(config=cfg, inputs_embeds=x, attention_mask=None, cache=None, position_ids=pos)
    with torch.no_grad():
        return attn(x, (cos, sin), mask)[0]


def lookup_on(attn, ch: Chans, head: int, **kw):
    return configure_lookup(attn, head=head, one=ch.one, flag=ch.flag, query=ch.query, key=ch.key,
                            value_pairs=ch.value, out_pairs=ch.out, sink=ch.sink, found_pair=ch.found, **kw)


# ----------------------------------------------------------------------------------------------

def test_saturation_facts_behind_the_constants():
    for dt in (F32, BF16):
        gate = torch.tensor([GATE_OPEN - GATE_SHUT, -GATE_SHUT, -GATE_SHUT * 2], dtype=dt)
        assert torch.equal(torch.sigmoid(gate), torch.tensor([1.0, 0.0, 0.0], dtype=dt))
    # a lead of 104 gives an exactly one-hot softmax in float32, 100 leaves a denormal
    assert torch.equal(torch.softmax(torch.tensor([0.0, -EXP_UNDERFLOW]), -1), torch.tensor([1.0, 0.0]))
    assert torch.softmax(torch.tensor([0.0, -100.0]), -1)[1] > 0
    assert LEAD > EXP_UNDERFLOW


@pytest.mark.parametrize("hd", [64, 256])
@pytest.mark.parametrize("distance", [None, 8, 255, 4095])
def test_plan_integers_and_margins(hd, distance):
    p = plan_lookup(config(hd), 40, max_distance=distance)
    assert all(v >= LEAD for v in p.margins().values()), p.margins()
    ints = [p.match, p.sink, p.rope] + [v for _, v in p.q_fill + p.k_fill]
    assert max(ints) <= INT_MAX and p.gain & (p.gain - 1) == 0
    q_sq = p.match ** 2 + p.sink ** 2 + p.rope ** 2 + sum(v * v for _, v in p.q_fill)
    k_sq = p.match ** 2 + p.sink ** 2 + 2 * p.rope ** 2 + sum(v * v for _, v in p.k_fill)
    assert q_sq == k_sq == hd * 4 ** p.mean_exp
    used = set(p.match_dims) | {p.q_pad_dim, p.k_pad_dim, p.sink_dim, p.sink_pad_dim}
    fill = [d for d, _ in p.q_fill + p.k_fill]
    assert len(set(fill)) == len(fill) and not used & set(fill)
    if p.rope_pair is not None:
        assert {p.rope_pair, p.rope_pair + p.rotary_dim // 2}.isdisjoint(fill)
        assert p.theta * distance <= math.pi / 2


@pytest.mark.parametrize("dt", [F32, BF16])
def test_q_and_k_norms_are_exact_scalings(dt):
    cfg = config(64)
    ch = Chans.build(6, 3, 96)
    attn = Qwen3_5Attention(cfg, 0)
    reset_attention(attn)
    lk = lookup_on(attn, ch, 1, max_distance=8 if dt == BF16 else 255, dtype=dt)
    attn = attn.to(dt)
    x, _ = make_batch(ch, 64, 2, seed=3, unique=False, p_ignored=0.0)
    x = x.to(dt)
    scale = lk.plan.gain / 2 ** lk.plan.mean_exp
    with torch.no_grad():
        q_pre = attn.q_proj(x).view(2, 64, 4, 128)[..., 1, :64]
        k_pre = attn.k_proj(x).view(2, 64, 2, 64)[..., 0, :]
        assert torch.equal(attn.q_norm(q_pre), q_pre * scale)
        assert torch.equal(attn.k_norm(k_pre), k_pre * scale)
        assert torch.all(q_pre.float().square().sum(-1) == 64 * 4 ** lk.plan.mean_exp)


# One config per (head_dim, implementation, dtype); float32 with recency (latest write wins) over
# 200 positions, bfloat16 with unique keys. Batch 8 prefill == token-by-token decode == batch 1.
# float32 with eager attention (~35 s each) runs under -m slow (suite time): float32 keeps sdpa, eager
# keeps bfloat16.
@pytest.mark.parametrize("dt,hd,impl", [
    pytest.param(dt, hd, impl, marks=[pytest.mark.slow] if (dt == F32 and impl == "eager") else [])
    for dt in (F32, BF16) for hd in (64, 256) for impl in ("eager", "sdpa")])
def test_lookup_through_the_model(hd, impl, dt):
    cfg = config(hd, impl=impl)
    ch = Chans.build(6, 3, cfg.hidden_size)
    model = tiny_model(cfg)
    recency = dt == F32
    lookup_on(model.model.layers[0].self_attn, ch, 1, max_distance=199 if recency else None, dtype=dt)
    model = model.to(dt)
    x, want = make_batch(ch, 200, 8, seed=hd + len(impl), unique=not recency)
    x = x.to(dt)
    if recency:    # the data really exercises shadowing and misses
        assert x[..., ch.key].float().sum() > 8 * 6 * 2
        assert want[..., ch.found[0]].sum() < x[..., ch.flag].float().sum()
    out_p, last_p = run_model(model, x, "prefill")
    assert torch.equal(out_p.float(), want)
    out_d, last_d = run_model(model, x, "decode")
    assert torch.equal(out_d.float(), want)
    assert torch.equal(last_p, last_d)
    active = x[..., ch.one] == 1
    # the whole layer adds exactly the lookup (identity norms, zero MLP)
    assert torch.equal(last_p[active].float(), (x.float() + want)[active])
    out_1, _ = run_model(model, x[5:6], "prefill")
    assert torch.equal(out_1.float(), want[5:6])


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_chunked_prefill_and_left_padding(impl):
    cfg = config(64, impl=impl)
    ch = Chans.build(6, 3, cfg.hidden_size)
    model = tiny_model(cfg)
    lookup_on(model.model.layers[0].self_attn, ch, 0, max_distance=149)
    x, want = make_batch(ch, 150, 4, seed=11, unique=False)
    out_s, _ = run_model(model, x, "split")
    assert torch.equal(out_s, want)
    # left padding: rows shifted right by 0..30 positions under an attention mask; padded positions
    # hold nothing (like ignored ones) and must add exactly 0.0
    pads = [0, 7, 19, 30]
    xp = torch.zeros(4, 180, cfg.hidden_size)
    wp = torch.zeros_like(xp)
    mask = torch.zeros(4, 180, dtype=torch.long)
    for b, p in enumerate(pads):
        xp[b, p:p + 150], wp[b, p:p + 150], mask[b, p:p + 150] = x[b], want[b], 1
    out_pad, _ = run_model(model, xp, "prefill", attention_mask=mask)
    assert torch.equal(out_pad, wp)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("hd", [64, 256])
def test_bfloat16_recency_over_short_distances(hd, impl):
    cfg = config(hd, impl=impl)
    ch = Chans.build(2, 3, cfg.hidden_size)         # two keys: many overwrites
    model = tiny_model(cfg)
    lk = lookup_on(model.model.layers[0].self_attn, ch, 3, max_distance=BF16_MAX_DISTANCE, dtype=BF16)
    margins = lookup_margins(model.model.layers[0].self_attn, lk, BF16_MAX_DISTANCE + 1, BF16)
    assert margins["lead"] >= EXP_UNDERFLOW
    model = model.to(BF16)
    for seed in range(4):
        x, want = make_batch(ch, BF16_MAX_DISTANCE + 1, 8, seed=seed, unique=False, p_key=0.7, p_lookup=0.7,
                             p_ignored=0.1)
        x = x.to(BF16)
        assert torch.equal(run_model(model, x, "prefill")[0].float(), want)
        assert torch.equal(run_model(model, x, "decode")[0].float(), want)


def test_bfloat16_recency_beyond_the_certified_distance_is_refused():
    ch = Chans.build(6, 3, 96)
    attn = Qwen3_5Attention(config(256), 0)
    reset_attention(attn)
    with pytest.raises(LookupConfigError, match="not exact in bfloat16"):
        lookup_on(attn, ch, 0, max_distance=199, dtype=BF16)
    # head_dim 128: the score scaling 128**-0.5 is inexact, eager rounds twice, and the certificate
    # finds the lead below 104 at distance 8; the head is left untouched
    attn = Qwen3_5Attention(config(128), 0)
    reset_attention(attn)
    with pytest.raises(LookupConfigError, match="leads by only"):
        lookup_on(attn, ch, 0, max_distance=8, dtype=BF16)
    assert all(torch.all(p == 0) for p in attn.parameters())
    # unique keys are fine there, and shorter recency too
    lookup_on(attn, ch, 2, max_distance=4, dtype=BF16)
    lookup_on(attn, ch, 0, dtype=BF16)


@pytest.mark.parametrize("hd, theta", [(256, 1e7), (64, 1e4)])
def test_float32_recency_certificate_over_1024_positions(hd, theta):
    """Every sequence of 1024 positions: the newest match leads every other score by > 104."""
    ch = Chans.build(6, 3, 96)
    attn = Qwen3_5Attention(config(hd, theta=theta), 0)
    reset_attention(attn)
    lk = lookup_on(attn, ch, 0, max_distance=1023, certify=False)
    margins = lookup_margins(attn, lk, 1024, F32)
    assert margins["lead"] >= EXP_UNDERFLOW + 16, margins


def _shifted(ch: Chans, offset: int, hidden: int) -> Chans:
    """The same layout moved up by ``offset`` channels inside a wider residual."""
    f = lambda c: c + offset
    return Chans(hidden, f(ch.one), f(ch.flag), f(ch.flag_n), f(ch.sink), f(ch.sink_n),
                 [f(c) for c in ch.query], f(ch.query_n), [f(c) for c in ch.key], f(ch.key_n),
                 [(f(a), f(b)) for a, b in ch.value], [(f(a), f(b)) for a, b in ch.out],
                 (f(ch.found[0]), f(ch.found[1])), [f(c) for c in ch.anchors], [f(c) for c in ch.text],
                 f(ch.text_flag))


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_several_heads_of_one_module(impl):
    """Qwen3.5 geometry (head_dim 256, factor 0.25, 16 heads on 4 k/v heads), bare module: head 0 is
    a recency lookup on memory A; head 2 reads the same memory (its k/v group) into other output
    channels; head 9 looks up an unrelated unique-key memory B and shuts its gate with a text flag
    (no mirror dims). Every other head adds exactly 0.0."""
    block = 96
    cfg = config(256, nh=16, nkv=4, hidden=3 * block, impl=impl)
    a = _shifted(Chans.build(6, 3, block), 0, 3 * block)
    b = _shifted(Chans.build(6, 3, block), block, 3 * block)
    spare = list(range(2 * block, 3 * block))
    reader_out, reader_found = [tuple(spare[2 * j:2 * j + 2]) for j in range(3)], (spare[6], spare[7])
    attn = Qwen3_5Attention(cfg, 0)
    reset_attention(attn)
    lookup_on(attn, a, 0, max_distance=127)
    configure_lookup(attn, head=2, one=a.one, flag=a.flag, query=a.query, key=a.key, value_pairs=a.value,
                     out_pairs=reader_out, sink=a.sink, found_pair=reader_found, max_distance=127)
    lookup_on(attn, b, 9, text=b.text_flag)
    with pytest.raises(LookupConfigError, match="different memory"):    # head 1 shares k/v head 0
        configure_lookup(attn, head=1, one=a.one, flag=a.flag, query=a.query, key=a.query,
                         value_pairs=a.value, out_pairs=a.out, sink=a.sink)
    with pytest.raises(LookupConfigError, match="already configured"):
        lookup_on(attn, b, 9, text=b.text_flag)
    x_a, want_a = make_batch(a, 128, 4, seed=31, unique=False)
    x_b, want_b = make_batch(b, 128, 4, seed=32, unique=True)
    x = x_a + x_b
    want = want_a + want_b
    want[..., spare[:8]] = want_a[..., [c for p in a.out + [a.found] for c in p]]
    for dt in (F32,):
        out = run_module(attn.to(dt), x.to(dt), cfg)
        assert torch.equal(out.float(), want)
    # the unconfigured heads really are zero: q rows and o_proj columns
    hd = 256
    for h in set(range(16)) - {0, 2, 9}:
        assert torch.all(attn.q_proj.weight[h * 2 * hd:(h + 1) * 2 * hd] == 0)
        assert torch.all(attn.o_proj.weight[:, h * hd:(h + 1) * hd] == 0)


@pytest.mark.parametrize("text_flag", [False, True])
def test_full_capacity_head_dim_256(text_flag):
    """188 keys (256 - 64 rotary - 4) and the widest value: 127 bits + found with mirror dims, 255
    bits + found with a text flag; bfloat16, unique keys, eager."""
    width = 255 if text_flag else 127
    n = 188
    hidden = 5 + 2 * (n + 1) + 4 * width + 2 + 12 + 1 + 8
    cfg = config(256, nh=2, nkv=1, hidden=hidden)
    ch = Chans.build(n, width, hidden)
    attn = Qwen3_5Attention(cfg, 0)
    reset_attention(attn)
    lookup_on(attn, ch, 1, dtype=BF16, text=ch.text_flag if text_flag else None)
    x, want = make_batch(ch, 256, 2, seed=41, unique=True, p_key=0.8)
    if not text_flag:
        x[..., ch.text_flag] = 0        # mirror mode reads no text flag; ignored rows stay all-zero
    out = run_module(attn.to(BF16), x.to(BF16), cfg)
    assert torch.equal(out.float(), want)
    with pytest.raises(LookupConfigError, match="capacity"):
        plan_lookup(cfg, n + 1)
    attn2 = Qwen3_5Attention(cfg, 0)
    reset_attention(attn2)
    with pytest.raises(LookupConfigError, match="capacity"):
        configure_lookup(attn2, head=0, one=ch.one, flag=ch.flag, query=ch.query, key=ch.key,
                         value_pairs=ch.value + [ch.out[0]], out_pairs=ch.out + [ch.out[0]], sink=ch.sink,
                         found_pair=ch.found, text=ch.text_flag if text_flag else None)


def test_all_zero_positions_need_mirror_dims_or_a_text_flag():
    """Why the mirror dims exist: a position whose channels are all 0 has q = 0 (uniform attention)
    and gate 0 (sigmoid 0.5). With a text flag that is not set there, the head leaks half the
    average visible value; with mirror dims it adds exactly 0."""
    cfg = config(64)
    ch = Chans.build(6, 3, 96)
    x, want = make_batch(ch, 64, 2, seed=5, unique=False)
    x[..., ch.text_flag] = 0
    leaky = Qwen3_5Attention(cfg, 0)
    reset_attention(leaky)
    lookup_on(leaky, ch, 0, max_distance=63, text=ch.text_flag)
    ignored = x[..., ch.one] == 0
    assert ignored.any()
    leak = run_module(leaky, x, cfg)[ignored]
    assert leak.abs().max() > 0.01
    mirrored = Qwen3_5Attention(cfg, 0)
    reset_attention(mirrored)
    lookup_on(mirrored, ch, 0, max_distance=63)
    assert torch.equal(run_module(mirrored, x, cfg), want)


def test_rejections():
    cfg = config(64)
    ch = Chans.build(6, 3, 96)
    assert plan_lookup(cfg, 44).n_keys == 44                 # 64 - 16 rotary - 4
    with pytest.raises(LookupConfigError, match="capacity"):
        plan_lookup(cfg, 45)
    with pytest.raises(LookupConfigError, match="slow enough"):
        plan_lookup(config(64, theta=1e4), 6, max_distance=10_000)
    attn = Qwen3_5Attention(cfg, 0)
    reset_attention(attn)
    with pytest.raises(LookupConfigError, match="outside"):
        configure_lookup(attn, head=0, one=96, flag=1, query=[2], key=[3], value_pairs=[(4, 5)],
                         out_pairs=[(6, 7)], sink=8)
    with pytest.raises(LookupConfigError, match="distinct"):
        configure_lookup(attn, head=0, one=0, flag=1, query=[2, 2], key=[3, 4], value_pairs=[(4, 5)],
                         out_pairs=[(6, 7)], sink=8)
    with pytest.raises(LookupConfigError, match="out of range"):
        lookup_on(attn, ch, 4)
    lookup_on(attn, ch, 0, max_distance=255)
    with pytest.raises(LookupConfigError, match="gain"):
        lookup_on(attn, ch, 2, gain=8)
