"""A ROM as an attention lookup over the prompt (gadgets/rom_lookup.py), through the real
``Qwen3_5Attention``: every position's read against a Python dict of the words offered so far
(the oracle), float32 and bfloat16, eager and sdpa, every Hamming distance between a query and the
keys, ignored (all-zero) positions adding exactly 0, and keys thousands of positions back."""

import random

import pytest
import torch
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5Attention

from netlist2tf.gadgets.rom_lookup import (LEAD, RomLookupError, configure_rom_lookup, plan_rom_lookup,
                                           rom_lookup_weights)
from tests.gadgets.test_attention_lookup import config, run_module


class Chans:
    """Channel numbers of one lookup's residual: one, the key flag pair, the query pairs, the gated
    key bits, the gated word bits and the output pairs."""

    def __init__(self, bits, width, const_query=()):
        c = iter(range(10 ** 6))
        self.bits, self.width = bits, width
        self.one = next(c)
        self.flag = (next(c), next(c))
        self.const = dict(const_query)                    # query bit -> constant 0/1
        self.query = [self.const[i] if i in self.const else (next(c), next(c)) for i in range(bits)]
        self.key = [next(c) for _ in range(bits)]
        self.values = [next(c) for _ in range(width)]
        self.out = [(next(c), next(c)) for _ in range(width)]
        self.hidden = next(c)

    def channels(self):
        return dict(one=self.one, query=self.query, key_flag=self.flag, key_bits=self.key,
                    values=self.values, out_pairs=self.out)


def _sequence(ch, T, B, seed, keys_before=None, p_ignored=0.1):
    """(x, want): T positions per row; a position is ignored (all 0), a key offering a fresh
    address's word, or a plain position; every active one queries an address (offered or not,
    near an offered one half the time). ``want``: the out pairs' (+b, -b) per position."""
    rng = random.Random(seed)
    n = ch.bits
    x = torch.zeros(B, T, ch.hidden)
    want = torch.zeros(B, T, ch.hidden)
    for b in range(B):
        table, free = {}, list(range(1 << n))
        rng.shuffle(free)
        for t in range(T):
            if rng.random() < p_ignored and t:
                continue
            row = x[b, t]
            row[ch.one] = 1
            # position 0 is never a key: every read needs a non-key (value 0) at or before it
            is_key = t and free and (keys_before is None or t < keys_before) and rng.random() < 0.4
            if is_key:
                a, w = free.pop(), rng.getrandbits(ch.width) | 1
                table[a] = w
                row[ch.flag[0]] = 1
                for i in range(n):
                    row[ch.key[i]] = (a >> i) & 1
                for j in range(ch.width):
                    row[ch.values[j]] = (w >> j) & 1
            else:
                row[ch.flag[1]] = 1
            r = rng.random()
            if table and r < 0.4:
                q = rng.choice(sorted(table))
            elif table and r < 0.7:
                q = rng.choice(sorted(table)) ^ (1 << rng.randrange(n))       # one bit off a key
            else:
                q = rng.getrandbits(n)
            for i in ch.const:
                q = q & ~(1 << i) | (ch.const[i] << i)
            for i, qb in enumerate(ch.query):
                if qb not in (0, 1):
                    row[qb[0 if (q >> i) & 1 else 1]] = 1
            word = table.get(q, 0)
            for j, (plus, minus) in enumerate(ch.out):
                want[b, t, plus] = (word >> j) & 1
                want[b, t, minus] = -((word >> j) & 1)
    return x, want


def _module(hd, ch, impl, nh=2, nkv=1):
    cfg = config(hd, nh=nh, nkv=nkv, hidden=ch.hidden, impl=impl)
    attn = Qwen3_5Attention(cfg, 0).eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.zero_()
    return cfg, attn


@pytest.mark.parametrize("hd, bits, width", [(64, 10, 16), (64, 14, 32), (256, 16, 32), (16, 4, 8)])
def test_plan_scores_and_weights_are_exact_integers(hd, bits, width):
    plan = plan_rom_lookup(hd, hd // 4, bits)
    leads = plan.leads()
    assert leads["match_over_non_key"] >= LEAD and leads["non_key_over_nearest_miss"] >= LEAD
    n_sq = hd * 4 ** plan.mean_exp
    assert bits * plan.match ** 2 + plan.sink_q ** 2 + sum(v * v for _, v in plan.q_fill) == n_sq
    assert bits * plan.match ** 2 + sum(on * on for _, on, _ in plan.k_fill) == n_sq
    assert plan.sink_k ** 2 + sum(off * off for _, _, off in plan.k_fill) == n_sq
    r, half = plan.rotary_dim, plan.rotary_dim // 2
    q_pairs = {d % half for d, _ in plan.q_fill if d < r}
    k_pairs = {d % half for d, _, _ in plan.k_fill if d < r}
    assert not q_pairs & k_pairs, "a q filler and a k filler share a rotary pair"
    ch = Chans(bits, width)
    rows = rom_lookup_weights(plan, **ch.channels())
    for name, entries in rows.items():
        for entry in entries:
            w = entry[2]
            assert w == int(w) and float(torch.tensor(float(w), dtype=torch.bfloat16)) == w, (name, entry)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hd, bits, width", [(64, 6, 16), (64, 10, 32), (256, 12, 24)])
def test_reads_equal_the_table(impl, dt, hd, bits, width):
    ch = Chans(bits, width, const_query={bits - 1: 0} if bits > 6 else {})
    cfg, attn = _module(hd, ch, impl)
    plan = plan_rom_lookup(hd, cfg.head_dim // 4, bits)
    configure_rom_lookup(attn, plan, head=0, **ch.channels())
    # a second q head of the KV group (a second read port) reads the same keys: with the same query
    # and output pairs here, every read lands twice
    configure_rom_lookup(attn, plan, head=1, **ch.channels())
    attn = attn.to(dt)
    x, want = _sequence(ch, 300, 3, seed=hd + bits)
    out = run_module(attn, x.to(dt), cfg).float()
    assert torch.equal(out, 2 * want), (out - 2 * want).abs().max()


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_keys_thousands_of_positions_back(dt):
    """Keys only in the first 64 positions of 4,096: nothing depends on the distance."""
    ch = Chans(10, 16)
    cfg, attn = _module(64, ch, "sdpa", nh=1)
    configure_rom_lookup(attn, plan_rom_lookup(64, 16, 10), head=0, **ch.channels())
    x, want = _sequence(ch, 4096, 1, seed=3, keys_before=64)
    out = run_module(attn.to(dt), x.to(dt), cfg).float()
    assert torch.equal(out, want)


def test_refusals():
    with pytest.raises(RomLookupError, match="power of 4"):
        plan_rom_lookup(128, 32, 8)
    with pytest.raises(RomLookupError, match="do not fit"):
        plan_rom_lookup(16, 4, 14)
    ch = Chans(6, 40)
    with pytest.raises(RomLookupError, match="split the word"):
        rom_lookup_weights(plan_rom_lookup(64, 16, 6), **ch.channels())
    ch = Chans(6, 8)
    cfg, attn = _module(64, ch, "eager")
    plan = plan_rom_lookup(64, 16, 6)
    configure_rom_lookup(attn, plan, head=0, **ch.channels())
    with pytest.raises(RomLookupError, match="already holds a lookup"):
        configure_rom_lookup(attn, plan, head=0, **ch.channels())
    other = Chans(6, 8)
    other.values = other.values[::-1]
    with pytest.raises(RomLookupError, match="another memory"):
        configure_rom_lookup(attn, plan, head=1, **other.channels())
