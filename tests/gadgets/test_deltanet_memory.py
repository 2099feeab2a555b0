"""DeltaNet memory gadget, through the real transformers Qwen3_5GatedDeltaNet.

Oracle: a Python dict per batch row (slot -> word), stepped position by position. The module's
output must equal the exact expected delta (+b, -b on the output pairs at read positions, 0.0
everywhere else) with torch.equal, no tolerance: float32 and bfloat16, chunked prefill (no cache, a
fresh cache, continued from a cache) and token-by-token recurrent decode, batch 8 and batch 1,
sequences of 200 positions (chunk size 64), ignored (text) positions interleaved, and channels that
belong to nobody holding arbitrary values.
"""

import random
from dataclasses import dataclass

import pytest
import torch
from transformers import DynamicCache
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet, Qwen3_5RMSNormGated

from netlist2tf.common.errors import Netlist2TFError
from netlist2tf.gadgets import deltanet_memory as dm

DTYPES = [torch.float32, torch.bfloat16]
PACKINGS = ["quarter", "half"]
T = 200
BATCH = 8
N_FOREIGN = 4          # channels of nobody (e.g. Qwen's), random values at every position


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny ops: intra-op threads only add contention (20-300x slower on a loaded 2-core box)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _config(hidden, dk, dv, nk, nv):
    return Qwen3_5TextConfig(hidden_size=hidden, intermediate_size=16, num_hidden_layers=1,
                             layer_types=["linear_attention"], vocab_size=16,
                             linear_num_key_heads=nk, linear_num_value_heads=nv,
                             linear_key_head_dim=dk, linear_value_head_dim=dv,
                             num_attention_heads=1, num_key_value_heads=1, head_dim=16)


@dataclass
class Mem:
    """Channel assignment of one memory in the test's residual layout."""
    head: int
    write: list[int]
    read: list[int]
    value: list[tuple[int, int]]
    out: list[tuple[int, int]]


class Layout:
    """ONE at channel 0, then each memory's channels, then the foreign channels."""

    def __init__(self, shapes):
        self.one = 0
        nxt = 1
        self.mems = []

        def take(k):
            nonlocal nxt
            nxt += k
            return list(range(nxt - k, nxt))

        for head, n, width in shapes:
            w, r = take(n), take(n)
            v = [tuple(take(2)) for _ in range(width)]
            o = [tuple(take(2)) for _ in range(width)]
            self.mems.append(Mem(head, w, r, v, o))
        self.foreign = take(N_FOREIGN)
        self.hidden = nxt


def _build(layout, dk, dv, nk, nv, packing="quarter"):
    """A cleared module with every memory of ``layout`` configured."""
    cfg = _config(layout.hidden, dk, dv, nk, nv)
    module = Qwen3_5GatedDeltaNet(cfg, layer_idx=0)
    dm.clear_module(module, packing)
    for m in layout.mems:
        dm.configure_memory(module, one=layout.one, write_addr=m.write, read_addr=m.read,
                            value_pairs=m.value, out_pairs=m.out, head=m.head, packing=packing)
    return cfg, module.eval()


def _sequence(layout, rng, length, p_text=0.15, p_write=0.45, p_read=0.55, same_addr=False):
    """One random sequence: inputs (length, hidden) float32 and the exact expected output delta.

    Half of the addresses come from a few hot slots, so slots are rewritten many times inside one
    chunk (the case that catches an inexact read product). ``same_addr``: all memories use the same
    address per position (memories sharing a key head)."""

    def addr(n):
        return rng.randrange(min(n, 3)) if rng.random() < 0.5 else rng.randrange(n)

    x = torch.zeros(length, layout.hidden)
    delta = torch.zeros(length, layout.hidden)
    words = [dict() for _ in layout.mems]
    for t in range(length):
        x[t, layout.foreign] = torch.tensor([rng.uniform(-3, 3) for _ in layout.foreign])
        if rng.random() < p_text:
            continue                                   # ignored: every circuit channel is 0
        x[t, layout.one] = 1.0
        shared_w = rng.random() < p_write
        shared_r = rng.random() < p_read
        aw = ar = None
        for k, m in enumerate(layout.mems):
            first = k == 0
            n, width = len(m.write), len(m.value)
            bits = [rng.randint(0, 1) for _ in range(width)]
            for (b, nb), bit in zip(m.value, bits):   # the value channels always hold a valid word
                x[t, b], x[t, nb] = bit, 1 - bit
            for (b, nb) in m.out:
                x[t, nb] = 1.0                        # output pairs start at (0, 1)
            if not same_addr or first:
                aw = addr(n) if (shared_w if same_addr else rng.random() < p_write) else None
                ar = addr(n) if (shared_r if same_addr else rng.random() < p_read) else None
            if aw is not None:
                x[t, m.write[aw]] = 1.0
                words[k][aw] = bits
            if ar is not None:
                x[t, m.read[ar]] = 1.0
                word = words[k].get(ar, [0] * width)
                for (b, nb), bit in zip(m.out, word):
                    delta[t, b], delta[t, nb] = bit, -bit
    return x, delta


def _batch(layout, seed, batch, length, **kw):
    rng = random.Random(seed)
    xs, ds = zip(*[_sequence(layout, rng, length, **kw) for _ in range(batch)])
    return torch.stack(xs), torch.stack(ds)


def _decode(module, cfg, x, prefix=0):
    """Prefill ``prefix`` positions (if any) into a fresh cache, then decode token by token."""
    cache = DynamicCache(config=cfg)
    outs = []
    if prefix:
        outs.append(module(x[:, :prefix], cache=cache))
    for t in range(prefix, x.shape[1]):
        outs.append(module(x[:, t:t + 1], cache=cache))
    return torch.cat(outs, dim=1)


def _assert_exact(out, expect, what):
    if not torch.equal(out, expect):
        bad = (out != expect).nonzero()
        err = (out.float() - expect.float()).abs().max().item()
        raise AssertionError(f"{what}: {bad.shape[0]} entries differ (max error {err}), first at "
                             f"(batch, position, channel) {bad[0].tolist()}")


# (head_k_dim, head_v_dim): the powers of 4 (exact query scale) and Qwen3.5's 128
DIMS = [(16, 16), (64, 32), (128, 128)]


@pytest.mark.parametrize("packing", PACKINGS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
@pytest.mark.parametrize("dk, dv", DIMS, ids=[f"dk{dk}" for dk, _ in DIMS])
def test_memory_exact_all_paths(dk, dv, dtype, packing):
    """Two memories (a full-capacity one in head 0, a small one in head 2, different key heads):
    every path, batch 8 and batch 1, equals the dict model exactly."""
    probe = Qwen3_5GatedDeltaNet(_config(8, dk, dv, 1, 1), layer_idx=0)
    slots, width = dm.memory_capacity(probe, packing)     # d_k = 128: 127 slots (dummy query dim)
    layout = Layout([(0, slots, width), (2, 5, 3)])
    cfg, module = _build(layout, dk, dv, nk=2, nv=4, packing=packing)
    module = module.to(dtype)
    x, delta = _batch(layout, seed=dk * 7 + (dtype == torch.bfloat16), batch=BATCH, length=T)
    for m in layout.mems:                                 # the oracle reads plenty of ones
        assert (delta[:, :, [b for b, _ in m.out]] == 1).sum() > 100 * len(m.out) // 3
    x, expect = x.to(dtype), delta.to(dtype)
    with torch.no_grad():
        prefill = module(x)
        _assert_exact(prefill, expect, "chunked prefill, batch 8, no cache")
        _assert_exact(module(x, cache=DynamicCache(config=cfg)), expect, "prefill, fresh cache")
        _assert_exact(_decode(module, cfg, x), expect, "token-by-token decode, batch 8")
        _assert_exact(_decode(module, cfg, x, prefix=70), expect, "prefill 70 then decode")
        # prefill, a few decode steps, then a long chunked prefill continuing from the cache
        cache = DynamicCache(config=cfg)
        parts = [module(x[:, :30], cache=cache)]
        parts += [module(x[:, t:t + 1], cache=cache) for t in range(30, 35)]
        parts.append(module(x[:, 35:], cache=cache))
        _assert_exact(torch.cat(parts, dim=1), expect, "prefill, decode, prefill continued")
        for row in (0, 5):
            _assert_exact(module(x[row:row + 1]), prefill[row:row + 1], f"batch 1 == batch 8 row {row}")
        _assert_exact(_decode(module, cfg, x[3:4]), expect[3:4], "decode, batch 1")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
def test_bf16_stored_weights_quarter(dtype):
    """Quarter packing: a module configured while bfloat16 (every weight rounded to bfloat16, as in
    a bfloat16 checkpoint) is exact in bfloat16 AND when run in float32."""
    layout = Layout([(1, 127, 32)])
    cfg = _config(layout.hidden, 128, 128, 2, 2)
    module = Qwen3_5GatedDeltaNet(cfg, layer_idx=0).to(torch.bfloat16)
    dm.clear_module(module)
    m = layout.mems[0]
    dm.configure_memory(module, one=0, write_addr=m.write, read_addr=m.read, value_pairs=m.value,
                        out_pairs=m.out, head=1)
    module = module.to(dtype)
    x, delta = _batch(layout, seed=11, batch=2, length=150)
    with torch.no_grad():
        _assert_exact(module(x.to(dtype)), delta.to(dtype), "prefill")


def test_bf16_stored_weights_half_is_not_exact_in_fp32():
    """Half packing needs its calibrated norm weight in float32: stored as bfloat16 (0.70703125)
    and run in float32, a read 1 comes out as 0.99989 (error 1.07e-4: NOT exact; bfloat16 runs of
    the same weights stay exact)."""
    layout = Layout([(0, 16, 8)])
    cfg = _config(layout.hidden, 16, 16, 1, 1)
    module = Qwen3_5GatedDeltaNet(cfg, layer_idx=0)
    dm.clear_module(module, "half")
    m = layout.mems[0]
    dm.configure_memory(module, one=0, write_addr=m.write, read_addr=m.read, value_pairs=m.value,
                        out_pairs=m.out, packing="half")
    x, delta = _batch(layout, seed=2, batch=1, length=100)
    rounded = module.to(torch.bfloat16)
    with torch.no_grad():
        _assert_exact(rounded(x.to(torch.bfloat16)), delta.to(torch.bfloat16), "bf16")
        out = rounded.float()(x)
    err = (out - delta).abs().max().item()
    assert not torch.equal(out, delta) and 1.0e-4 < err < 1.1e-4, err


def test_shared_key_head_wide_word():
    """Value heads sharing a key head (grouped heads) hold one wide word under one address."""
    dk, dv = 16, 16
    layout = Layout([(0, 12, 8), (1, 12, 5)])
    layout.mems[1].write, layout.mems[1].read = layout.mems[0].write, layout.mems[0].read
    cfg, module = _build(layout, dk, dv, nk=1, nv=2, packing="half")
    x, delta = _batch(layout, seed=3, batch=4, length=T, same_addr=True)
    for dtype in DTYPES:
        m = module.to(dtype)
        with torch.no_grad():
            _assert_exact(m(x.to(dtype)), delta.to(dtype), f"prefill {dtype}")
            _assert_exact(_decode(m, cfg, x.to(dtype)), delta.to(dtype), f"decode {dtype}")


def test_ignored_positions_leave_state_and_output_untouched():
    """A run of text positions (ONE = 0, circuit channels 0, foreign channels random) adds exactly
    0.0 and leaves the recurrent and conv-visible state as it was: reads after it are unchanged."""
    layout = Layout([(0, 127, 32)])
    cfg, module = _build(layout, 128, 128, nk=1, nv=1)
    x, delta = _batch(layout, seed=5, batch=2, length=80, p_text=0.0)
    rng = random.Random(9)
    text = torch.zeros(2, 90, layout.hidden)
    text[:, :, layout.foreign] = torch.tensor([[[rng.uniform(-100, 100) for _ in layout.foreign]
                                                for _ in range(90)] for _ in range(2)])
    # write phase, 90 text positions, then a read of every slot
    reads = torch.zeros(2, 127, layout.hidden)
    reads[:, :, layout.one] = 1.0
    m = layout.mems[0]
    for (b, nb) in m.out:
        reads[:, :, nb] = 1.0
    for j in range(127):
        reads[:, j, m.read[j]] = 1.0
    for dtype in DTYPES:
        mod = module.to(dtype)
        with torch.no_grad():
            cache = DynamicCache(config=cfg)
            mod(x[:, :40].to(dtype), cache=cache)
            mod(x[:, 40:].to(dtype), cache=cache)
            state = cache.layers[0].recurrent_states[0].clone()
            out_text = mod(text.to(dtype), cache=cache)
            assert torch.equal(out_text, torch.zeros_like(out_text))
            assert torch.equal(cache.layers[0].recurrent_states[0], state)
            for t in range(3):                     # and through the recurrent path
                assert torch.equal(mod(text[:, t:t + 1].to(dtype), cache=cache),
                                   torch.zeros(2, 1, layout.hidden, dtype=dtype))
            assert torch.equal(cache.layers[0].recurrent_states[0], state)
            got = mod(reads.to(dtype), cache=cache)
            ref = mod(torch.cat([x, reads], dim=1).to(dtype))[:, 80:]
            _assert_exact(got, ref, f"reads after text positions, {dtype}")
            assert bool(got.any())


def test_inside_causal_lm_with_its_cache_and_left_padding():
    """The gadget inside a real Qwen3_5ForCausalLM (linear-attention layer 0 + a full-attention
    layer, so use_cache works): the model creates its own cache, prefill then decode; one row is
    left-padded (attention_mask 0 on positions that carry active writes and reads): the model zeroes
    them, so they behave as ignored positions. The decoder RMSNorm is not made an identity here: a
    pre-hook hands the mixer the exact residual, as the compiler's layout guarantees."""
    from transformers import Qwen3_5ForCausalLM
    layout = Layout([(0, 127, 32), (1, 6, 5)])
    cfg = Qwen3_5TextConfig(hidden_size=layout.hidden, intermediate_size=16, num_hidden_layers=2,
                            layer_types=["linear_attention", "full_attention"], vocab_size=16,
                            linear_num_key_heads=2, linear_num_value_heads=2,
                            linear_key_head_dim=128, linear_value_head_dim=128,
                            num_attention_heads=1, num_key_value_heads=1, head_dim=16)
    model = Qwen3_5ForCausalLM(cfg).eval()
    mixer = model.model.layers[0].linear_attn
    dm.clear_module(mixer)
    for m in layout.mems:
        dm.configure_memory(mixer, one=0, write_addr=m.write, read_addr=m.read, value_pairs=m.value,
                            out_pairs=m.out, head=m.head)
    pad = 10
    x, delta = _batch(layout, seed=21, batch=2, length=120)
    x_pad, _ = _batch(layout, seed=22, batch=1, length=pad, p_text=0.0)   # active, but padding
    x[1, :pad] = x_pad[0]
    rng = random.Random(23)
    x[1, pad:], delta[1, pad:] = _sequence(layout, rng, 120 - pad)
    delta[1, :pad] = 0.0
    mask = torch.ones(2, 120, dtype=torch.long)
    mask[1, :pad] = 0
    feed, got = {}, []
    mixer.register_forward_pre_hook(lambda mod, args, kw: (args, {**kw, "hidden_states": feed["x"]}),
                                    with_kwargs=True)
    mixer.register_forward_hook(lambda mod, args, out: got.append(out))
    with torch.no_grad():
        feed["x"] = x[:, :50]
        out = model(inputs_embeds=x[:, :50], attention_mask=mask[:, :50], use_cache=True)
        for t in range(50, 120):
            feed["x"] = x[:, t:t + 1]
            out = model(inputs_embeds=x[:, t:t + 1], attention_mask=mask[:, :t + 1],
                        cache=out.cache, use_cache=True)
    _assert_exact(torch.cat(got, dim=1), delta, "causal LM prefill + decode, left padding")


def test_unconfigured_heads_and_untouched_weights():
    """configure_memory writes only its head's slices (and the shared norm weight); the other
    heads stay zero and output nothing; a never-written slot reads as 0."""
    layout = Layout([(2, 7, 3)])
    cfg = _config(layout.hidden, 16, 16, 2, 4)
    module = Qwen3_5GatedDeltaNet(cfg, layer_idx=0)
    dm.clear_module(module)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    m = layout.mems[0]
    spec = dm.configure_memory(module, one=0, write_addr=m.write, read_addr=m.read,
                               value_pairs=m.value, out_pairs=m.out, head=2)
    assert (spec.key_head, spec.slots, spec.width, spec.packing) == (1, 7, 3, "quarter")
    assert spec.pad_columns == (6,)                    # 3 bits + 1 pad = d_v/4 non-zeros
    after = module.state_dict()
    dk, dv, key_dim = 16, 16, 32                   # the second key head's d_k columns of q and k
    own_qkv = set(range(dk, 2 * dk)) | set(range(key_dim + dk, key_dim + 2 * dk)) \
        | set(range(2 * key_dim + 2 * dv, 2 * key_dim + 3 * dv))
    others = sorted(set(range(after["in_proj_qkv.weight"].shape[0])) - own_qkv)
    assert torch.equal(after["in_proj_qkv.weight"][others], before["in_proj_qkv.weight"][others])
    assert torch.equal(after["conv1d.weight"][others], before["conv1d.weight"][others])
    for name in ("in_proj_z.weight", "out_proj.weight"):
        cols = after[name] if name.startswith("in") else after[name].T
        prev = before[name] if name.startswith("in") else before[name].T
        keep = [r for r in range(cols.shape[0]) if not 2 * dv <= r < 3 * dv]
        assert torch.equal(cols[keep], prev[keep])
    for name in ("in_proj_b.weight", "in_proj_a.weight", "dt_bias", "A_log"):
        keep = [0, 1, 3]
        assert torch.equal(after[name][keep], before[name][keep])
    # reads of never-written slots leave the output pairs alone
    x = torch.zeros(1, 7, layout.hidden)
    x[0, :, 0] = 1.0
    for j in range(7):
        x[0, j, m.read[j]] = 1.0
    with torch.no_grad():
        assert torch.equal(module(x), torch.zeros_like(x))


def test_rejects_what_does_not_fit():
    layout = Layout([(0, 17, 8), (1, 4, 9)])
    cfg = _config(layout.hidden, 16, 16, 2, 2)
    module = Qwen3_5GatedDeltaNet(cfg, layer_idx=0)
    m0, m1 = layout.mems

    def conf(mod, m, slots=None, width=None, **kw):
        dm.configure_memory(mod, **{"one": 0, "write_addr": m.write[:slots], "read_addr": m.read[:slots],
                                    "value_pairs": m.value[:width], "out_pairs": m.out[:width], **kw})

    with pytest.raises(Netlist2TFError, match="not free"):     # random init: clear_module first
        conf(module, m0, 16, 4)
    dm.clear_module(module)
    with pytest.raises(Netlist2TFError, match="slots do not fit"):
        conf(module, m0, None, 4)
    with pytest.raises(Netlist2TFError, match="does not fit a value head"):
        conf(module, m1, None, 5)                             # quarter: 4 bits
    with pytest.raises(Netlist2TFError, match="does not fit a value head"):
        conf(module, m1, None, 9, packing="half")             # half: 8 bits
    with pytest.raises(Netlist2TFError, match="does not exist"):
        conf(module, m1, None, 4, head=2)
    with pytest.raises(Netlist2TFError, match="outside the hidden size"):
        conf(module, m1, None, 4, head=1, one=layout.hidden)
    with pytest.raises(Netlist2TFError, match="packing must be"):
        conf(module, m1, None, 4, head=1, packing="full")
    conf(module, m1, None, 4, head=1)
    with pytest.raises(Netlist2TFError, match="not free"):
        conf(module, m1, None, 4, head=1)
    with pytest.raises(Netlist2TFError, match="one packing"):  # the norm weight is shared
        conf(module, m0, 16, 8, head=0, packing="half")
    grouped = Qwen3_5GatedDeltaNet(_config(layout.hidden, 16, 16, 1, 2), layer_idx=0)
    dm.clear_module(grouped)
    conf(grouped, m1, None, 4, head=0)
    with pytest.raises(Netlist2TFError, match="share the address"):
        conf(grouped, m0, 4, 4, head=1)


@pytest.mark.parametrize("dk", [16, 64, 128])
def test_read_calibration(dk):
    """For d_k a power of 4 the query is one-hot and the read level 256; for d_k = 128 the query
    needs the dummy dim and reads 180 = 45/512 * 2048, exactly, on the real paths. The product of
    the plain one-hot query and a value tuned so that fl32(q * V) == 256 is NOT exact on the
    chunked path (several writes to a slot in one chunk leave a residual): that is why."""
    cal = dm.calibrate_read(dk)
    assert dm._read_is_exact(cal, dk)
    if dk in (16, 64):
        assert (cal.query_main, cal.query_dummy, cal.level) == (64.0, None, 256.0)
        assert dm.memory_capacity(Qwen3_5GatedDeltaNet(_config(8, dk, 32, 1, 1), 0)) == (dk, 8)
    else:
        assert (cal.query_main, cal.query_dummy, cal.query_scale, cal.value, cal.level) == \
            (251.0, 26.75, 0.087890625, 2048.0, 180.0)
        module = Qwen3_5GatedDeltaNet(_config(8, dk, 128, 1, 1), 0)
        assert dm.memory_capacity(module) == (127, 32)
        assert dm.memory_capacity(module, "half") == (127, 64)
        # the products q * V are exact: no summation order can round a partial sum
        assert cal.query_scale * cal.value == float(torch.tensor(cal.query_scale) * cal.value)
        # a one-hot query with V tuned so that fl32(q * V) == 256 rounds the PRODUCT: an
        # accumulation with fused multiply-add (or 3a partial sums) then leaves a residual where
        # a slot should read 0: the real chunked path reads a 0 as -1.28e-5
        q = float(torch.tensor(1.0) * 128 ** -0.5)
        tuned = 2896.3095703125
        assert float(torch.tensor(q) * tuned) == 256.0
        assert q * tuned != 256.0              # the exact product (float64): 256 + 1.28e-5
        assert not dm._read_is_exact(dm.ReadCalibration(64.0, None, q, tuned, 256.0), dk)
        before = torch.get_num_threads()
        try:                              # the real paths under another thread count (GEMM order)
            torch.set_num_threads(2)
            assert dm._read_is_exact(cal, dk)
        finally:
            torch.set_num_threads(before)


@pytest.mark.parametrize("packing", PACKINGS)
@pytest.mark.parametrize("dk, dv", [(16, 16), (128, 16), (128, 128)])
def test_norm_calibration_every_pattern(dk, dv, packing):
    """The calibrated gated-norm weight gives exactly GATE for every stored row the memory can
    produce (every choice of the non-zero columns when d_v = 16: 1,820 or 12,870; 3,000 random ones
    for 128), and 0 for an empty row, in float32 and bfloat16 (37 rows and all rows at a time)."""
    import itertools
    w = dm.calibrate_norm_weight(dk, dv, 1e-6, packing)
    assert w == {"quarter": 0.5, "half": 0.7071068286895752 if dk != 128 else 0.7071067690849304}[packing]
    level = dm.calibrate_read(dk).level
    nz = dv // {"quarter": 4, "half": 2}[packing]
    if dv == 16:
        combos = list(itertools.combinations(range(dv), nz))
        rows = torch.zeros(len(combos) + 1, dv)
        for r, cols in enumerate(combos):
            rows[r, list(cols)] = 1.0
    else:
        g = torch.Generator().manual_seed(0)
        rows = torch.stack([torch.randperm(dv, generator=g) < nz for _ in range(3000)]).float()
        rows = torch.cat([rows, torch.zeros(1, dv)])
    norm = Qwen3_5RMSNormGated(dv, eps=1e-6)
    with torch.no_grad():
        norm.weight.fill_(w)
    for dtype in DTYPES:
        for part in (rows[-37:], rows):
            with torch.no_grad():
                out = norm.to(dtype)((part * level).to(dtype), torch.full_like(part, dm.GATE).to(dtype))
            _assert_exact(out, (part * dm.GATE).to(dtype), f"gated norm {dtype}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
@pytest.mark.parametrize("dk, dv", [(16, 16), (64, 64)])
def test_write_fields_from_earlier_positions(dk, dv, dtype):
    """write_lag / value_lags: the address comes from 2 positions back, value bits 0-1 from 1 back
    and bits 2-3 from the current position; the write happens only where the position 2 back carried
    an address. Python model of the memory as the oracle; prefill and decode, float32 and bfloat16."""
    layout = Layout([(0, 8, 4)])
    (m,) = layout.mems
    cfg = _config(layout.hidden, dk, dv, 1, 1)
    module = Qwen3_5GatedDeltaNet(cfg, layer_idx=0)
    dm.clear_module(module)
    dm.configure_memory(module, one=layout.one, write_addr=m.write, read_addr=m.read,
                        value_pairs=m.value, out_pairs=m.out, write_lag=2, value_lags=[1, 1, 0, 0])
    module = module.eval().to(dtype)
    rng = random.Random(dk)
    length = 150
    x = torch.zeros(length, layout.hidden)
    delta = torch.zeros(length, layout.hidden)
    words, bits_at, addr_at = {}, [], []
    for t in range(length):
        x[t, layout.one] = 1.0
        bits = [rng.randint(0, 1) for _ in range(4)]
        bits_at.append(bits)
        for (b, nb), bit in zip(m.value, bits):
            x[t, b], x[t, nb] = bit, 1 - bit
        for (b, nb) in m.out:
            x[t, nb] = 1.0
        a = rng.randrange(8) if rng.random() < 0.4 else None
        addr_at.append(a)
        if a is not None:
            x[t, m.write[a]] = 1.0
        if t >= 2 and addr_at[t - 2] is not None:
            words[addr_at[t - 2]] = bits_at[t - 1][:2] + bits[2:]
        r = rng.randrange(8) if rng.random() < 0.6 else None
        if r is not None:
            x[t, m.read[r]] = 1.0
            for (b, nb), bit in zip(m.out, words.get(r, [0] * 4)):
                delta[t, b], delta[t, nb] = bit, -bit
    x, delta = x.unsqueeze(0).to(dtype), delta.unsqueeze(0).to(dtype)
    with torch.no_grad():
        _assert_exact(module(x), delta, "prefill")
        _assert_exact(_decode(module, cfg, x, prefix=37), delta, "decode")
    with pytest.raises(Netlist2TFError, match=r"lag 4 is outside the conv kernel \(0..3\)"):
        fresh = Qwen3_5GatedDeltaNet(cfg, layer_idx=0)
        dm.clear_module(fresh)
        dm.configure_memory(fresh, one=layout.one, write_addr=m.write, read_addr=m.read,
                            value_pairs=m.value, out_pairs=m.out, write_lag=4)


# -- decoded addresses (banks) and per-value-head write enables ---------------------------------

def _bits_of(value, n):
    return [(value >> i) & 1 for i in range(n)]


def _put(xt, pairs, bits):
    """Set the (b, 1-b) channel pairs of one position's input to ``bits``."""
    for (p, q), bit in zip(pairs, bits):
        xt[p], xt[q] = bit, 1 - bit


def _decoded_case(dk, dtype, seed, length=150, batch=4):
    """A 2*slots-word memory in two banks (heads 0, 1) addressed by bit pairs and decoded inside the
    heads, written where ``en`` is 1; plus two register-like value heads (2, 3) sharing key head 2
    (group 2), one row, each written only where its own enable channel is 1. Returns the module's
    output and the dict oracle's expected delta."""
    slots = dm.memory_capacity(Qwen3_5GatedDeltaNet(_config(8, dk, 32, 2, 4), 0))[0]
    abits = (2 * slots - 1).bit_length()
    width = 8
    ch = iter(range(1, 10_000))
    one = 0
    wa = [(next(ch), next(ch)) for _ in range(abits)]
    ra = [(next(ch), next(ch)) for _ in range(abits)]
    en = next(ch)
    val = [(next(ch), next(ch)) for _ in range(width)]
    out = [(next(ch), next(ch)) for _ in range(width)]
    we = [next(ch), next(ch)]
    rout = [[(next(ch), next(ch)) for _ in range(width)] for _ in range(2)]
    hidden = next(ch) + N_FOREIGN
    cfg = _config(hidden, dk, 32, 3, 6)
    module = Qwen3_5GatedDeltaNet(cfg, layer_idx=0)
    dm.clear_module(module)

    def match(pairs, addr, extra=()):
        return [p[0] if (addr >> i) & 1 else p[1] for i, p in enumerate(pairs)] + list(extra)

    for bank in range(2):
        words = range(bank * slots, (bank + 1) * slots)
        dm.configure_memory(module, one=one, head=2 * bank, value_pairs=val, out_pairs=out,
                            write_match=[match(wa, a, [en]) for a in words],
                            read_match=[match(ra, a) for a in words])
    for r in range(2):
        dm.configure_memory(module, one=one, head=4 + r, value_pairs=val, out_pairs=rout[r],
                            write_match=[[one]], read_match=[[one]], write_enable=we[r])
    module.eval()
    rng = random.Random(seed)
    x = torch.zeros(batch, length, hidden)
    delta = torch.zeros(batch, length, hidden)
    for b in range(batch):
        mem, regs = {}, [[0] * width, [0] * width]
        for t in range(length):
            x[b, t, hidden - N_FOREIGN:] = torch.tensor([rng.uniform(-3, 3) for _ in range(N_FOREIGN)])
            if rng.random() < 0.1:
                continue
            x[b, t, one] = 1.0
            a_w = rng.randrange(2 * slots) if rng.random() < 0.5 else rng.randrange(3)
            a_r = rng.randrange(2 * slots) if rng.random() < 0.5 else rng.randrange(3)
            bits = [rng.randint(0, 1) for _ in range(width)]
            _put(x[b, t], wa, _bits_of(a_w, len(wa)))
            _put(x[b, t], ra, _bits_of(a_r, len(ra)))
            _put(x[b, t], val, bits)
            for (p, q) in out + rout[0] + rout[1]:
                x[b, t, q] = 1.0
            if rng.random() < 0.4:
                x[b, t, en] = 1.0
                mem[a_w] = bits
            r = rng.randrange(3)
            if r < 2:
                x[b, t, we[r]] = 1.0
                regs[r] = bits
            for (p, q), bit in zip(out, mem.get(a_r, [0] * width)):
                delta[b, t, p], delta[b, t, q] = bit, -bit
            for r in range(2):
                for (p, q), bit in zip(rout[r], regs[r]):
                    delta[b, t, p], delta[b, t, q] = bit, -bit
    return module.to(dtype), cfg, x.to(dtype), delta.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
@pytest.mark.parametrize("dk", [16, 64, 128])
def test_decoded_banks_and_write_enables(dk, dtype):
    """Banks addressed by bit pairs (the decoder inside q/k projections + silu) and value heads with
    their own write enables: exact against a dict, chunked prefill and token-by-token decode."""
    module, cfg, x, delta = _decoded_case(dk, dtype, seed=dk)
    with torch.no_grad():
        _assert_exact(module(x), delta, "prefill")
        _assert_exact(_decode(module, cfg, x, prefix=37), delta, "prefill 37 + decode")


def _shared_key_case(dk, dtype, seed, banks=4, length=150, batch=4):
    """One memory of ``banks`` x rows words in ONE key head: the row is the address's low bits
    (decoded in the key and query), the bank its high bits, selected per value head by
    ``write_select`` (beta) and ``read_select`` (the output gate); every bank adds into the same
    output pairs. Returns the module, its config, the input and the dict oracle's expected delta."""
    rows = 1 << (dm.memory_capacity(Qwen3_5GatedDeltaNet(_config(8, dk, 32, 1, 1), 0))[0].bit_length() - 1)
    rbits, bbits = rows.bit_length() - 1, (banks - 1).bit_length()
    width = 8
    ch = iter(range(1, 10_000))
    one = 0
    wa = [(next(ch), next(ch)) for _ in range(rbits + bbits)]
    ra = [(next(ch), next(ch)) for _ in range(rbits + bbits)]
    en = next(ch)
    val = [(next(ch), next(ch)) for _ in range(width)]
    out = [(next(ch), next(ch)) for _ in range(width)]
    hidden = next(ch) + N_FOREIGN
    cfg = _config(hidden, dk, 32, 1, banks)
    module = Qwen3_5GatedDeltaNet(cfg, layer_idx=0)
    dm.clear_module(module)

    def lits(pairs, value, bits):
        return [pairs[i][0] if (value >> (i - bits.start)) & 1 else pairs[i][1] for i in bits]

    low, high = range(rbits), range(rbits, rbits + bbits)
    for bank in range(banks):
        dm.configure_memory(module, one=one, head=bank, value_pairs=val, out_pairs=out,
                            write_match=[lits(wa, r, low) + [en] for r in range(rows)],
                            read_match=[lits(ra, r, low) for r in range(rows)],
                            write_select=lits(wa, bank, high), read_select=lits(ra, bank, high))
    module.eval()
    rng = random.Random(seed)
    x = torch.zeros(batch, length, hidden)
    delta = torch.zeros(batch, length, hidden)
    n = rows * banks
    for b in range(batch):
        mem = {}
        for t in range(length):
            x[b, t, hidden - N_FOREIGN:] = torch.tensor([rng.uniform(-3, 3) for _ in range(N_FOREIGN)])
            if rng.random() < 0.1:
                continue
            x[b, t, one] = 1.0
            # hot rows in every bank: a write to one bank between reads of the same row of another
            a_w = rng.randrange(n) if rng.random() < 0.5 else rng.randrange(banks) * rows + rng.randrange(2)
            a_r = rng.randrange(n) if rng.random() < 0.5 else rng.randrange(banks) * rows + rng.randrange(2)
            bits = [rng.randint(0, 1) for _ in range(width)]
            _put(x[b, t], wa, _bits_of(a_w, len(wa)))
            _put(x[b, t], ra, _bits_of(a_r, len(ra)))
            _put(x[b, t], val, bits)
            for (p, q) in out:
                x[b, t, q] = 1.0
            if rng.random() < 0.5:
                x[b, t, en] = 1.0
                mem[a_w] = bits
            for (p, q), bit in zip(out, mem.get(a_r, [0] * width)):
                delta[b, t, p], delta[b, t, q] = bit, -bit
    return module.to(dtype), cfg, x.to(dtype), delta.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
@pytest.mark.parametrize("dk", [16, 64, 128])
def test_banks_sharing_a_key_head(dk, dtype):
    """Four banks in the value heads of one key head, told apart by write/read selects on the high
    address bits: a write to one bank leaves the same row of the others, and only the addressed
    bank's row reaches the output (exact against a dict; chunked prefill and token-by-token decode)."""
    module, cfg, x, delta = _shared_key_case(dk, dtype, seed=dk + 1)
    with torch.no_grad():
        _assert_exact(module(x), delta, "prefill")
        _assert_exact(_decode(module, cfg, x, prefix=37), delta, "prefill 37 + decode")
