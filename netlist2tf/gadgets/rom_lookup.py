"""A read-only memory as an attention lookup over the prompt: one KV head of a real
``Qwen3_5Attention`` holds the words the prompt wrote, keyed by their binary address, and each q head
of its group reads the word at a read port's address (docs/design/compiler.md section 5a).

Residual conventions (pairs ``(b, 1 - b)`` as everywhere, ``one`` = 1.0 on every active position;
an ignored position, a merged model's text, has every channel this gadget reads at 0.0):

* a *key position* has the key flag pair at (1, 0) and, for each address bit i, the channel
  ``key_bits[i]`` at the bit's value; the word's bits are the channels ``value`` (0/1). Every other
  position has the flag at (0, 1) and ``key_bits`` and ``value`` all 0 (the compiler computes them in
  an FFN as ANDs with the flag: ``plan._lookup_key_neurons``);
* every position queries: ``query[i]`` is the address bit's pair (or the constant 0/1), and the word
  found is added to ``out_pairs`` as ``(+b, -b)``; an address no key offers adds exactly 0.
* keys are unique: each address is offered by at most one position (the prompt writes every word of
  a ROM once, then a disabled group, so no later commit offers one again).

Scores (``kappa = gain**2 / (4**m sqrt(head_dim))``, all pre-norm values integers):

* match dims (non-rotary, one per address bit): q ``A (2 a_i - 1)``, k ``A (2 ka_i - flag)``: a key
  whose address differs from the query in j bits scores ``kappa A**2 (n - 2 j)``, a non-key 0 there;
* the sink dim: q ``Sq`` always, k ``Sk`` on non-keys (``Sq Sk = (n - 1) A**2``): every non-key
  position scores ``kappa (n - 1) A**2`` and carries the value 0;
* fillers (q-only, and k-only with one value on keys and another elsewhere, on rotary pairs the
  other side never touches, where rotation cannot carry them over, and on spare non-rotary dims)
  make the pre-norm ``mean(x**2)`` exactly ``4**m`` on q, on keys and on non-keys: q_norm/k_norm
  multiply by exactly ``2**-m`` and their weight ``gain - 1`` scales by a power of two.

So the match leads every non-key by ``kappa A**2`` and every non-key leads the nearest miss by the
same, >= LEAD = 128 > 104 (``exp(-104)`` is 0.0 in float32): the softmax is exactly one-hot on the
key, or spread over non-keys that all carry 0. Nothing depends on positions (RoPE turns only
one-sided filler pairs), so the read is exact at any context length. Every score is a multiple of
``kappa A**2`` times an integer below 2**8, held exactly in bfloat16 as in float32, and so is every
partial sum in any order; every weight is an integer with at most 8 significant bits. The output
gate and mirror dims are ``attention_lookup``'s: the gate is +128 on active positions (sigmoid 1.0),
the mirror copy's -128 (0.0); on an ignored position both are 0.5 of the same average and cancel.
``tests/gadgets/test_rom_lookup.py`` checks it through the real module, eager and sdpa, float32 and
bfloat16, every Hamming distance, keys early and late in 4,096 positions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from netlist2tf.common import Netlist2TFError

LEAD = 128               # every winning score leads by this (>= 104: exp(-104) == 0.0 in float32)
GATE_OPEN = 128          # the output gate's pre-activation on an active position (sigmoid 1.0)
GATE_SHUT = 128          # ... of a mirror dim (sigmoid 0.0)
MAX_GAIN = 256           # gain - 1 <= 255 is exact in a bfloat16 norm weight
MAX_SIGNIFICANT = 8      # bfloat16 holds integers of at most 8 significant bits exactly
MIN_MEAN_EXP = 3         # mean(x**2) = 4**m >= 64: eps = 1e-6 vanishes when added in float32
MAX_BITS = 64


class RomLookupError(Netlist2TFError):
    """A ROM lookup that does not fit the attention head (address bits, word width, head_dim)."""


def _exact_bf16(x: int) -> bool:
    x = abs(x)
    while x and not x & 1:
        x >>= 1
    return x < (1 << MAX_SIGNIFICANT)


def squares(n: int, terms: int) -> tuple[int, ...] | None:
    """At most ``terms`` integers in [1, 256] (exact in bfloat16) whose squares sum to n, largest
    first, or None (the fillers here and in ``attention_lookup``)."""
    if n == 0:
        return ()
    if terms == 0 or n < 0:
        return None
    top = min(256, math.isqrt(n))
    if top * top * terms < n:
        return None
    for a in range(top, 0, -1):
        if a * a * terms < n:
            break
        rest = squares(n - a * a, terms - 1)
        if rest is not None:
            return (a,) + rest
    return None


def _fill(n: int) -> tuple[int, ...] | None:
    for terms in range(1, 9):
        got = squares(n, terms)
        if got is not None:
            return got
    return None


@dataclass(frozen=True)
class RomLookupPlan:
    """The integers of one ROM lookup head: ``bits`` address bits on ``match_dims``, the sink on
    ``sink_dim``, fillers ``q_fill`` ((dim, value) times ``one``) and ``k_fill`` ((dim, value on a
    key, value elsewhere)); q_norm/k_norm weight ``gain - 1`` with pre-norm ``mean(x**2) = 4**mean_exp``."""
    head_dim: int
    rotary_dim: int
    bits: int
    match: int
    sink_q: int
    sink_k: int
    gain: int
    mean_exp: int
    match_dims: tuple[int, ...]
    sink_dim: int
    q_fill: tuple[tuple[int, int], ...]
    k_fill: tuple[tuple[int, int, int], ...]

    @property
    def kappa(self) -> float:
        return self.gain ** 2 / (4 ** self.mean_exp * math.sqrt(self.head_dim))

    def scores(self) -> dict:
        """The score of each kind of position (real numbers; each is exact in float32 and bfloat16)."""
        unit = self.kappa * self.match ** 2
        return {"match": unit * self.bits, "non_key": self.kappa * self.sink_q * self.sink_k,
                "nearest_miss": unit * (self.bits - 2), "ignored": 0.0}

    def leads(self) -> dict:
        s = self.scores()
        return {"match_over_non_key": s["match"] - s["non_key"],
                "non_key_over_nearest_miss": s["non_key"] - s["nearest_miss"],
                "non_key_over_ignored": s["non_key"] - s["ignored"]}


def plan_rom_lookup(head_dim: int, rotary_dim: int, bits: int) -> RomLookupPlan:
    """The smallest-scored plan for ``bits`` address bits on a head of ``head_dim`` dims, the first
    ``rotary_dim`` rotary (RoPE's pairs ``i, i + rotary_dim / 2``). ``head_dim`` must be a power of
    4 (16, 64, 256: the score scaling ``head_dim**-0.5`` is then a power of two)."""
    hd, r = head_dim, rotary_dim
    if hd < 16 or hd & (hd - 1) or (hd.bit_length() - 1) % 2:
        raise RomLookupError(f"head_dim {hd}: a ROM lookup needs a power of 4 (16, 64, 256), where the "
                             f"score scaling head_dim**-0.5 is exact")
    if r % 2 or not 0 <= r <= hd:
        raise RomLookupError(f"rotary dims {r} must be even and at most head_dim {hd}")
    if not 1 <= bits <= MAX_BITS:
        raise RomLookupError(f"{bits} address bits: a ROM lookup takes 1 to {MAX_BITS}")
    bits_eff = bits
    free = hd - r - bits_eff - 1
    if free < 0:
        raise RomLookupError(f"{bits} address bits do not fit a head of {hd} dims with {r} rotary dims "
                             f"(at most {hd - r - 9})")
    half = r // 2
    pairs = [(i, i + half) for i in range(half)]
    spare = list(range(r + bits_eff + 1, hd))
    best = None
    for a_exp in range(0, 8):
        a = 1 << a_exp
        sq, sk = a, (bits_eff - 1) * a
        if not (_exact_bf16(sk) and sk <= 1 << 15):
            continue
        for m in range(MIN_MEAN_EXP, 10):
            n_sq = hd * 4 ** m
            if n_sq > 1 << 24:
                break
            fq, fk_key, fk_free = n_sq - bits_eff * a * a - sq * sq, n_sq - bits_eff * a * a, n_sq - sk * sk
            if min(fq, fk_key, fk_free) < 0:
                continue
            q_vals, key_vals, free_vals = _fill(fq), _fill(fk_key), _fill(fk_free)
            if None in (q_vals, key_vals, free_vals):
                continue
            k_count = max(len(key_vals), len(free_vals))
            dims_q, dims_k, pool_pairs, pool = [], [], list(pairs), list(spare)
            for want, dims in ((len(q_vals), dims_q), (k_count, dims_k)):
                while len(dims) < want and pool_pairs:
                    dims.extend(pool_pairs.pop(0))
                while len(dims) < want and pool:
                    dims.append(pool.pop(0))
            if len(dims_q) < len(q_vals) or len(dims_k) < k_count:
                continue
            for g_exp in range(1, MAX_GAIN.bit_length()):
                gain = 1 << g_exp
                kappa = gain * gain / (4 ** m * math.sqrt(hd))
                if kappa * a * a < LEAD:
                    continue
                top = kappa * a * a * bits_eff
                cand = (top, a, m, gain)
                if best is None or cand < best[0]:
                    key_vals_p = tuple(key_vals) + (0,) * (k_count - len(key_vals))
                    free_vals_p = tuple(free_vals) + (0,) * (k_count - len(free_vals))
                    best = (cand, RomLookupPlan(
                        head_dim=hd, rotary_dim=r, bits=bits_eff, match=a, sink_q=sq, sink_k=sk, gain=gain,
                        mean_exp=m, match_dims=tuple(range(r, r + bits_eff)), sink_dim=r + bits_eff,
                        q_fill=tuple(zip(dims_q, q_vals)),
                        k_fill=tuple(zip(dims_k, key_vals_p, free_vals_p))))
                break
    if best is None:
        raise RomLookupError(f"no integer plan for {bits} address bits on a head of {hd} dims")
    return best[1]


def one_sided(q, k, nh: int, nkv: int, hd: int, rotary: int) -> bool:
    """Whether the attention projections ``q`` (q_proj: query and gate rows per head) and ``k``
    (k_proj) have, on every rotary pair (d, d + rotary / 2) of every head, only query or only key
    weights: every rotated product is then a product with 0, so no RoPE (any theta, mrope sections)
    changes a score. A lookup's fillers are placed so (``plan_rom_lookup``); the fast executor and the
    merge rely on it."""
    half = rotary // 2
    for h in range(nh):
        qh = q[h * 2 * hd:h * 2 * hd + hd]
        kh = k[(h // (nh // nkv)) * hd:(h // (nh // nkv) + 1) * hd]
        for d in range(half):
            if bool(qh[[d, d + half]].any()) and bool(kh[[d, d + half]].any()):
                return False
    return True


def rom_lookup_weights(plan: RomLookupPlan, *, one: int, query, key_flag: tuple[int, int], key_bits,
                       values: list[int], out_pairs: list[tuple[int, int]]) -> dict:
    """The rows of one lookup as {name: [(row, channel, weight), ...]} per head-local matrix:
    ``q`` (2 * head_dim rows: the query, then the output gate), ``k`` and ``v`` (head_dim rows) and
    ``o`` ((channel, dim, weight): the output projection's columns of the head). ``query[i]``: the
    address bit's pair (channel of 1, channel of 0) or the constant 0 / 1 (bits past the port's
    address: 0); ``key_bits[i]``: the gated bit's channel (1 on a key with bit i set), or None for a
    bit every key has clear; ``values``: the gated word bits."""
    hd = plan.head_dim
    n = plan.bits
    if len(query) > n or len(key_bits) > n:
        raise RomLookupError(f"{max(len(query), len(key_bits))} address bits, the plan has {n}")
    if 2 * len(values) > hd:
        raise RomLookupError(f"a {len(values)}-bit word needs {2 * len(values)} value dims (mirrored), "
                             f"the head has {hd}: split the word over more heads")
    if len(values) != len(out_pairs):
        raise RomLookupError(f"{len(values)} value channels but {len(out_pairs)} output pairs")
    a = plan.match
    kf_on, kf_off = key_flag
    q, k, v, o = [], [], [], []
    query = list(query) + [0] * (n - len(query))
    key_bits = list(key_bits) + [None] * (n - len(key_bits))
    for d, qb, kb in zip(plan.match_dims, query, key_bits):
        if qb in (0, 1):
            q.append((d, one, a if qb else -a))
        else:
            q += [(d, qb[0], a), (d, qb[1], -a)]
        k.append((d, kf_on, -a))           # -A on a key, then +2A where its bit is set: +-A; 0 elsewhere
        if kb is not None:
            k.append((d, kb, 2 * a))
    q.append((plan.sink_dim, one, plan.sink_q))
    k.append((plan.sink_dim, kf_off, plan.sink_k))
    q += [(d, one, val) for d, val in plan.q_fill]
    for d, on, off in plan.k_fill:
        if on:
            k.append((d, kf_on, on))
        if off:
            k.append((d, kf_off, off))
    width = len(values)
    for j, (ch, (plus, minus)) in enumerate(zip(values, out_pairs)):
        for dim, sign in ((j, 1), (width + j, -1)):      # the value and its mirror
            v.append((dim, ch, 1))
            o += [(plus, dim, sign), (minus, dim, -sign)]
        q.append((hd + j, one, GATE_OPEN))
        q.append((hd + width + j, one, -GATE_SHUT))
    return {"q": q, "k": k, "v": v, "o": o}


def configure_rom_lookup(module, plan: RomLookupPlan, *, head: int, **channels) -> None:
    """Write one lookup (``rom_lookup_weights``'s rows) into q head ``head`` of ``module`` (a
    ``Qwen3_5Attention``, or its ``gadgets.arrays.AttentionArrays``, whose weights are zero or hold
    other lookups of the same plan) and its KV head. A KV head already holding another memory's keys
    is refused; q heads of one KV group read the same memory (a second read port)."""
    import numpy as np

    from netlist2tf.gadgets.arrays import attention_arrays

    with attention_arrays(module) as m:
        nh, nkv, hd = m.num_heads, m.num_kv_heads, m.head_dim
        if hd != plan.head_dim:
            raise RomLookupError(f"the plan is for head_dim {plan.head_dim}, the module has {hd}")
        if not 0 <= head < nh:
            raise RomLookupError(f"head {head} out of range (module has {nh} heads)")
        rows = rom_lookup_weights(plan, **channels)
        kv = head // (nh // nkv)
        qw = m.q[head * 2 * hd:(head + 1) * 2 * hd]
        ow = m.o[:, head * hd:(head + 1) * hd]
        if qw.any() or ow.any():
            raise RomLookupError(f"q head {head} already holds a lookup")
        kw = np.zeros((hd, m.k.shape[1]), dtype=m.k.dtype)
        vw = np.zeros_like(kw)
        for r, c, w in rows["q"]:
            qw[r, c] += w
        for r, c, w in rows["k"]:
            kw[r, c] += w
        for r, c, w in rows["v"]:
            vw[r, c] += w
        for c, d, w in rows["o"]:
            ow[c, d] += w
        old_k = m.k[kv * hd:(kv + 1) * hd]
        old_v = m.v[kv * hd:(kv + 1) * hd]
        if (old_k.any() or old_v.any()) and not (np.array_equal(old_k, kw) and np.array_equal(old_v, vw)):
            raise RomLookupError(f"KV head {kv} already holds another memory's keys")
        old_k[...] = kw
        old_v[...] = vw
        gains = {float(m.q_norm[0]), float(m.k_norm[0])}
        if gains != {0.0} and gains != {float(plan.gain - 1)}:
            raise RomLookupError(f"the module's q/k norms hold another gain than {plan.gain}")
        m.q_norm[...] = plan.gain - 1
        m.k_norm[...] = plan.gain - 1
