"""Attention lookup: one head of a real ``Qwen3_5Attention`` as an exact associative memory read.

Residual conventions (the module input, exactly these values; every other channel is ignored):

* ``one`` is 1.0 on every active position. On an *ignored* position (a text token of a merged model)
  every channel this gadget reads is 0.0;
* bits live in pairs ``(b, 1 - b)``; an output pair starts at ``(0, 1)`` and the gadget adds
  ``(+b, -b)`` to it;
* a *key position* offers one entry: exactly one of ``key[0..n)`` is 1.0 and the value is the
  ``width`` pairs ``value_pairs`` (only the first channel of each pair, ``b``, is read);
* a *query position* has ``flag`` (LOOKUP) = 1.0 and exactly one of ``query[0..n)`` = 1.0;
* a *sink position* has ``sink`` = 1.0 (e.g. the first token of the trace). It offers no entry and
  the first channel of each of its value pairs is 0.0 (bit 0). A lookup that matches nothing lands on
  the sink and so adds exactly 0; every lookup needs a sink at or before it.

Semantics: at a query position the head reads the value of the most recent position at or before it
whose key equals the query (later writes shadow earlier ones; with ``max_distance`` = None the keys
must instead be unique: each key offered at most once before a lookup; with recency,
``max_distance`` must be at least the sequence length - 1), adds it to ``out_pairs`` as
``(+b, -b)`` and, if ``found_pair`` is given, adds ``(+1, -1)`` there when an entry was found. If no
entry matches, it adds exactly 0. Every position that is not a lookup adds exactly 0.0 everywhere.

How (per head, ``hd`` = head_dim, ``r`` = rotary dims = int(hd * partial_rotary_factor)):

* score = ``q_norm(q) . k_norm(k) * hd**-0.5`` = MATCH + SINK + RECENCY, from three groups of dims:
  - MATCH: ``query[i]`` and ``key[i]`` on non-rotary dim ``r + i`` with magnitude A (pre-norm), so a
    matching key adds ``kappa * A**2``; a pad dim on each side (``A * (one - sum(query))`` in q,
    ``A * (one - sum(key))`` in k, on different dims) keeps the norm constant;
  - SINK: ``one`` in q times ``sink`` in k, magnitude Sg, adds ``kappa * Sg**2`` on sink positions
    (a k-only pad ``Sg * (one - sink)`` keeps the norm constant);
  - RECENCY (only with ``max_distance``): one rotary pair (dims ``i``, ``i + r/2``, frequency
    ``theta = inv_freq[i]``) holds ``(R, 0)`` in q and ``(R, -R)`` in k; RoPE turns their product
    into ``f(d) = sqrt(2) * kappa * R**2 * cos(d * theta + pi/4)`` for the distance ``d = p_q - p_k``.
    The pair is the fastest one with ``theta * max_distance <= pi/2``, where f falls strictly and
    every step ``f(d) - f(d+1)`` is at least LEAD: the most recent match wins.
  - filler dims (q-only or k-only, placed preferably on unused rotary pairs, where rotation cannot
    reach the other side) top the pre-norm squared norm of q and of k up to exactly
    ``hd * 4**m``: q_norm/k_norm then multiply by exactly ``2**-m`` (mean(x**2) = 4**m >= 64, so
    eps = 1e-6 vanishes in float32 rounding), and their weight ``gain - 1`` (gain a power of two)
    makes every normed value ``int * gain / 2**m``: exact in float32 and bfloat16 (all pre-norm
    integers are <= INT_MAX = 256, exact in bfloat16). ``kappa = gain**2 / (4**m * sqrt(hd))``.
  The plan (``plan_lookup``) picks A, Sg, R, m and gain so that, with ``fmax = f(0)`` and
  ``fmin = f(max_distance)`` (both 0 without recency):
  - a sink beats every non-matching key: ``kappa*Sg**2 + fmin >= fmax + LEAD`` and beats ignored
    positions (k = 0, score exactly 0): ``kappa*Sg**2 + fmin >= LEAD``;
  - a match beats every sink and every non-match: ``kappa*A**2 + fmin >= kappa*Sg**2 + fmax + LEAD``;
  - a more recent match beats an older one by at least the smallest recency step >= LEAD.
  So the winner leads every other score by >= LEAD = 128 > 104: exp(-104) underflows to exactly 0
  in float32 (exp(-100) = 3.7e-44 is a denormal that leaks), the softmax is exactly one-hot and the
  value comes through exactly (weight 1.0 times 0/1). Only the RoPE term is inexact; its float32
  error is ~1e-7 of its amplitude, far inside the 24 units LEAD leaves above 104. Sinks may tie:
  they all carry value 0.
* value: ``v[j] = b_j`` of ``value_pairs[j]`` (and ``v = sum(key)`` for ``found_pair``): 0/1 exactly;
  ``o_proj`` writes ``+v`` to the pair's first channel and ``-v`` to its second.
* output gate (second half of q_proj): ``GATE_OPEN * flag - GATE_SHUT * one`` = +128 on a lookup
  (sigmoid = 1.0 exactly in float32 and bfloat16: it saturates from 17, resp. 6.5) and -128 on any
  other active position (sigmoid = 0.0 exactly: it is 0 from -89 down), so non-lookups add 0.0.
* ignored positions (every read channel 0): q = 0, so the scores are all 0 and the attention is a
  uniform average of the visible values, and the gate is 0, sigmoid(0) = 0.5. No linear read of
  all-zero channels can shut that, so the head carries *mirror* dims: each value dim j is repeated
  as dim j' with the same v_proj row, a gate shut on every active position (``-GATE_SHUT * one``)
  and the opposite o_proj weight. On an ignored position both dims hold the same average, both are
  halved, and they cancel exactly (``a + (-a) == 0``); on a lookup the mirror gate is 0. This
  assumes the kernel computes two identical value columns identically (same reduction order):
  true on the CPU eager/sdpa paths and on an H200 (tested), not a law of floating point.
  Alternatively pass ``text``, a channel that is 1.0 on ignored positions: the gate gets
  ``-GATE_SHUT * text`` and no mirror dims are needed (twice the value width).

Constants (below): EXP_UNDERFLOW = 104 (float32 exp(-104) == 0; exp(-100) = 3.7e-44 leaks);
LEAD = 128 (planned lead: 24 units for rounding); GATE_OPEN = 256, GATE_SHUT = 128 (gate +-128,
far past sigmoid's saturation at +17 / -89); INT_MAX = 256 (pre-norm integers exact in bfloat16);
MIN_MEAN_EXP = 3 (mean(x**2) >= 64, eps vanishes); BF16_MAX_GAIN = 256 (gain - 1 <= 255 is exact
in a bfloat16 norm weight; 1023 is not, so a float32-only plan with gain >= 512 must be stored in
float32); BF16_MAX_DISTANCE = 8; CERTIFY_LENGTH = 1024.

Capacity per head: keys ``n <= hd - r - 4`` (head_dim 256, factor 0.25: 188; head_dim 64: 44);
value bits (plus one for ``found_pair``) ``<= hd // 2`` with mirror dims, ``<= hd`` with ``text``.
Several heads of one module work independently (each owns its q rows, gate rows and o_proj
columns). Under GQA the q heads of one group share k/v: a second head may read the same memory
(identical key/value/sink/found/text spec, its own query, flag and output channels), otherwise the
group's k/v rows must be free. q_norm and k_norm weights are shared by all heads of the module, so
all its lookups use one ``gain`` (configure the longest ``max_distance`` first, or pass ``gain``).

Certificate: ``lookup_margins`` evaluates the real q_proj, q_norm/k_norm, RoPE and score scaling on
every (query position, key position, key kind) and bounds each score by its rounding (half an ulp of
the dtype per rounding plus 8 float32 ulps: any summation order, eager or sdpa, prefill or decode),
giving the smallest lead over all sequences of a length. ``configure_lookup`` runs it for up to
CERTIFY_LENGTH positions and refuses a head that leads by less than 104.

Exactness (tests/gadgets/test_attention_lookup.py; torch.equal everywhere):

* float32, eager and sdpa: exact with recency (latest write wins) and with unique keys, batch 1
  and 8, prefill == decode == chunked prefill, left padding. Certified leads: >= 126.9 at max_distance
  1023 (head_dim 64 and 256), 127 at 4095 (head_dim 64), 110 at 32767 (head_dim 256; the full
  certificate took ~10 minutes). Beyond ~2**15
  the float32 rounding of scores near 2**24 eats the slack (lead ~56 at 131071, not certified).
* bfloat16, eager and sdpa: exact with unique keys at any length. Recency is exact only up to
  distance 8 (certified lead >= 105.8 for head_dim 64 and 256): RoPE's cos/sin are cast to bfloat16
  (relative error 2**-9) and eager rounds q.k to bfloat16 (8 significant bits), so the recency
  term's error is ~1 % of its amplitude, while the amplitude must be ~180/theta >= 115 *
  max_distance for steps of LEAD; no placement of the position term escapes the 8-bit score of
  eager attention (a ladder of N steps >= 104 apart needs scores >= 104 N, rounded to within
  ~score/256). head_dim 128 (scaling 128**-0.5 inexact: eager rounds twice) fails the certificate at
  distance 8. Longer recency in bfloat16 raises LookupConfigError.
* Also exact on an NVIDIA H200 (torch 2.11 + CUDA 13, transformers 5.24) in the model cases of
  the tests (both dtypes, eager and sdpa, prefill/decode/chunked/batch 1, 1024 positions), and with
  TF32 matmuls switched on (random cases only, not certified).
* Eager and sdpa differ at the edge: with a lead of ~100 (below 104) eager float32 leaks 9e-43
  (a denormal exp), the CPU sdpa kernel returned 0; with LEAD = 128 both are exact.
* Certificates cover position ids below the length checked (``start`` moves the window): RoPE
  angles lose float32 precision as the absolute position grows (~2e-5 * position units of score).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from netlist2tf.common import Netlist2TFError
from netlist2tf.gadgets.rom_lookup import squares as _squares

EXP_UNDERFLOW = 104      # float32 exp(-x) == 0.0 for x >= 104 (exp(-103.9) is the smallest denormal)
LEAD = 128               # planned lead of every winning score (24 units of slack for rounding)
GATE_OPEN = 256          # gate = GATE_OPEN * flag - GATE_SHUT * one: +128 on lookups, -128 elsewhere
GATE_SHUT = 128
INT_MAX = 256            # pre-norm integers <= 256 are exact in bfloat16
MIN_MEAN_EXP = 3         # mean(x**2) = 4**m >= 64: eps = 1e-6 vanishes when added in float32
MAX_GAIN_EXP = 14        # gains tried: 2**1 .. 2**14 (gain 1 would look like an untouched norm)
BF16_MAX_GAIN = 256      # gain - 1 <= 255 is exact in a bfloat16 norm weight (1023 is not)
BF16_MAX_DISTANCE = 8    # recency in bfloat16 is refused beyond this distance (certified at 8 for
                         # head_dim 64 and 256; head_dim 128 fails at 8: its inexact scaling rounds twice)
CERTIFY_LENGTH = 1024    # configure_lookup certifies by default up to this many positions (~1 s)


class LookupConfigError(Netlist2TFError):
    """A lookup that does not fit the module (capacity, channels, gains, shared k/v heads)."""


@dataclass(frozen=True, slots=True)
class LookupPlan:
    """Weights of one lookup head (all integers pre-norm) and the score levels they give."""
    head_dim: int
    rotary_dim: int
    n_keys: int
    gain: int                     # q_norm/k_norm multiply by gain (weight = gain - 1)
    mean_exp: int                 # pre-norm mean(x**2) == 4**mean_exp on q and k
    kappa: float                  # score = kappa * (pre-norm q . k) outside the rotary pair
    match: int                    # A
    sink: int                     # Sg
    rope: int                     # R (0 without recency)
    rope_pair: int | None         # i: rotary dims i and i + rotary_dim/2
    theta: float | None           # inv_freq[i] (radians per position)
    max_distance: int | None
    q_fill: tuple[tuple[int, int], ...]   # (dim, value) q-only fillers
    k_fill: tuple[tuple[int, int], ...]   # (dim, value) k-only fillers
    match_dims: tuple[int, ...]
    q_pad_dim: int
    k_pad_dim: int
    sink_dim: int
    sink_pad_dim: int

    @property
    def recency_max(self) -> float:
        """f(0): the recency term at distance 0 (0 without recency)."""
        if self.rope_pair is None:
            return 0.0
        return math.sqrt(2) * self.kappa * self.rope ** 2 * math.cos(math.pi / 4)

    @property
    def recency_min(self) -> float:
        """f(max_distance)."""
        if self.rope_pair is None:
            return 0.0
        u = math.sqrt(2) * self.kappa * self.rope ** 2
        return u * math.cos(math.pi / 4 + self.max_distance * self.theta)

    @property
    def recency_step(self) -> float:
        """Smallest f(d) - f(d + 1) over 0 <= d < max_distance (inf without recency)."""
        if self.rope_pair is None:
            return math.inf
        return _min_step(math.sqrt(2) * self.kappa * self.rope ** 2, self.theta, self.max_distance)

    def margins(self) -> dict[str, float]:
        """Predicted (real-number) leads of the winner; each must be >= LEAD."""
        m, s = self.kappa * self.match ** 2, self.kappa * self.sink ** 2
        fmax, fmin = self.recency_max, self.recency_min
        return {
            "sink_over_nonmatch": s + fmin - fmax,
            "sink_over_ignored": s + fmin,
            "match_over_sink": m + fmin - s - fmax,
            "recency_step": self.recency_step,
        }


@dataclass(frozen=True, slots=True)
class Lookup:
    """A configured lookup head: its channels and its plan."""
    head: int
    one: int
    flag: int
    query: tuple[int, ...]
    key: tuple[int, ...]
    sink: int
    value_pairs: tuple[tuple[int, int], ...]
    out_pairs: tuple[tuple[int, int], ...]
    found_pair: tuple[int, int] | None
    text: int | None
    plan: LookupPlan


def _min_step(u: float, theta: float, distance: int) -> float:
    # f(d) - f(d+1) = 2 u sin(theta/2) sin((d + 1/2) theta + pi/4): sin is concave on the range,
    # so its minimum is at one end.
    ends = (math.sin(theta / 2 + math.pi / 4), math.sin((distance - 0.5) * theta + math.pi / 4))
    return 2 * u * math.sin(theta / 2) * min(ends)


def _rope_frequencies(config) -> tuple[torch.Tensor, float]:
    """inv_freq (float32, as the model computes it) and attention_scaling of the text RoPE."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding

    rope = Qwen3_5TextRotaryEmbedding(config)
    if rope.rope_type != "default":
        raise LookupConfigError(f"recency needs rope_type 'default', the config has {rope.rope_type!r}")
    return rope.inv_freq.float(), float(rope.attention_scaling)


def plan_lookup(config, n_keys: int, *, max_distance: int | None = None, gain: int | None = None,
                dtype: torch.dtype = torch.float32) -> LookupPlan:
    """Choose the integers of a lookup head for ``config`` (a Qwen3_5TextConfig).

    ``max_distance``: None for unique keys (each key offered at most once before a lookup), else the
    largest distance between a lookup and any position it can see (the sequence length - 1); the
    most recent match then wins. ``gain``: force the q/k norm gain (a power of two), e.g. the one
    other heads of the same module already use. ``dtype``: the dtype the model will run in;
    bfloat16 limits recency to ``BF16_MAX_DISTANCE``.
    """
    hd = int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
    factor = config.rope_parameters.get("partial_rotary_factor", 1.0) if config.rope_parameters else 1.0
    r = int(hd * factor)
    if r % 2:
        raise LookupConfigError(f"rotary dims {r} must be even")
    free = hd - r - 4
    if n_keys < 1 or n_keys > free:
        raise LookupConfigError(f"{n_keys} keys do not fit a head of {hd} dims with {r} rotary dims "
                                f"(capacity {free})")
    if gain is not None and (gain < 1 or gain & (gain - 1)):
        raise LookupConfigError(f"gain {gain} must be a power of two")

    pair, theta, scale2 = None, None, 1.0
    if max_distance is not None:
        if max_distance < 1:
            raise LookupConfigError(f"max_distance {max_distance} must be >= 1 (or None for unique keys)")
        if dtype == torch.bfloat16 and max_distance > BF16_MAX_DISTANCE:
            raise LookupConfigError(
                f"recency over {max_distance} positions is not exact in bfloat16 (RoPE's cos/sin are "
                f"rounded to 8 bits); at most {BF16_MAX_DISTANCE}: use unique keys or float32")
        inv_freq, att = _rope_frequencies(config)
        scale2 = att * att
        ok = [i for i in range(r // 2) if float(inv_freq[i]) * max_distance <= math.pi / 2]
        if not ok:
            raise LookupConfigError(
                f"no rotary frequency is slow enough for max_distance {max_distance} "
                f"(slowest {float(inv_freq[r // 2 - 1]):.3g} rad/position)")
        pair = max(ok, key=lambda i: float(inv_freq[i]))
        theta = float(inv_freq[pair])

    # Dims: non-rotary [r, hd): match dims, then the pads and the sink; rotary pairs other than the
    # recency pair, then the leftover non-rotary dims, hold the fillers.
    match_dims = tuple(range(r, r + n_keys))
    q_pad, k_pad, sink_dim, sink_pad = r + n_keys, r + n_keys + 1, r + n_keys + 2, r + n_keys + 3
    half = r // 2
    fill_pairs = [(i, i + half) for i in range(half) if i != pair]
    leftovers = list(range(r + n_keys + 4, hd))

    best = None
    top_gain = BF16_MAX_GAIN if dtype != torch.float32 else 1 << MAX_GAIN_EXP
    if gain is not None and gain > top_gain:
        raise LookupConfigError(f"gain {gain} - 1 is not exact in a {dtype} norm weight (at most {top_gain})")
    gains = [gain] if gain is not None else [1 << g for g in range(1, MAX_GAIN_EXP + 1) if 1 << g <= top_gain]
    for g in gains:
        for m in range(MIN_MEAN_EXP, 16):
            n_sq = hd * 4 ** m
            kappa = g * g / (4 ** m * math.sqrt(hd))
            if pair is not None:
                # the smallest R whose recency steps are all >= LEAD
                unit = _min_step(math.sqrt(2) * kappa * scale2, theta, max_distance)
                rr = max(1, math.ceil(math.sqrt(LEAD / unit)))
                while _min_step(math.sqrt(2) * kappa * scale2 * rr * rr, theta, max_distance) < LEAD:
                    rr += 1
                u = math.sqrt(2) * kappa * scale2 * rr * rr
                fmax, fmin = u * math.cos(math.pi / 4), u * math.cos(math.pi / 4 + max_distance * theta)
            else:
                rr, fmax, fmin = 0, 0.0, 0.0
            sg = math.ceil(math.sqrt(max(fmax - fmin + LEAD, LEAD - fmin) / kappa))
            a = math.ceil(math.sqrt((kappa * sg * sg + fmax - fmin + LEAD) / kappa))
            if max(a, sg, rr) > INT_MAX:
                continue
            fq, fk = n_sq - a * a - sg * sg - rr * rr, n_sq - a * a - sg * sg - 2 * rr * rr
            if fq < 0 or fk < 0:
                continue
            placed = _place_fillers(fq, fk, fill_pairs, leftovers)
            if placed is None:
                continue
            top = kappa * (a * a + sg * sg) + fmax
            key = (top, g)
            if best is None or key < best[0]:
                best = (key, LookupPlan(
                    head_dim=hd, rotary_dim=r, n_keys=n_keys, gain=g, mean_exp=m, kappa=kappa,
                    match=a, sink=sg, rope=rr, rope_pair=pair, theta=theta, max_distance=max_distance,
                    q_fill=placed[0], k_fill=placed[1], match_dims=match_dims, q_pad_dim=q_pad,
                    k_pad_dim=k_pad, sink_dim=sink_dim, sink_pad_dim=sink_pad))
    if best is None:
        raise LookupConfigError(
            f"no integer plan for head_dim {hd}, {n_keys} keys, max_distance {max_distance}, gain {gain}")
    return best[1]


def _place_fillers(fq: int, fk: int, fill_pairs, leftovers):
    """Filler (dim, value) lists for q and k: q-only and k-only dims never share a rotary pair."""
    pairs = list(fill_pairs)
    dims_left = list(leftovers)
    out = []
    for f in (fq, fk):
        for budget in range(1, 9):
            vals = _squares(f, budget)
            if vals is not None:
                break
        else:
            return None
        dims = []
        while len(dims) < len(vals) and pairs:
            dims.extend(pairs.pop(0))
        while len(dims) < len(vals) and dims_left:
            dims.append(dims_left.pop(0))
        if len(dims) < len(vals):
            return None
        out.append(tuple(zip(dims, vals)))
    return out[0], out[1]


def reset_attention(module) -> None:
    """Zero every projection (and bias) and set q_norm/k_norm weights to 0 (gain 1): every head then
    adds exactly 0.0. Call once before configuring heads."""
    with torch.no_grad():
        for lin in (module.q_proj, module.k_proj, module.v_proj, module.o_proj):
            lin.weight.zero_()
            if lin.bias is not None:
                lin.bias.zero_()
        module.q_norm.weight.zero_()
        module.k_norm.weight.zero_()


def module_gain(module) -> int | None:
    """The q/k norm gain a configured module uses, or None if the norms are untouched (weight 0)."""
    w = torch.cat([module.q_norm.weight.detach().float(), module.k_norm.weight.detach().float()])
    if torch.all(w == 0):
        return None
    g = float(w[0]) + 1
    if not torch.all(w == w[0]) or g < 1 or g != int(g) or int(g) & (int(g) - 1):
        raise LookupConfigError("q_norm/k_norm weights are not a uniform power-of-two gain minus 1: "
                                "the module was configured by something else")
    return int(g)


def configure_lookup(
    module,
    *,
    head: int,
    one: int,
    flag: int,
    query: list[int],
    key: list[int],
    value_pairs: list[tuple[int, int]],
    out_pairs: list[tuple[int, int]],
    sink: int,
    max_distance: int | None = None,
    found_pair: tuple[int, int] | None = None,
    text: int | None = None,
    dtype: torch.dtype = torch.float32,
    gain: int | None = None,
    certify: bool | None = None,
) -> Lookup:
    """Make q head ``head`` of ``module`` (a Qwen3_5Attention, reset with ``reset_attention``) an
    exact lookup; see the module docstring for the channel conventions. ``max_distance``: None =
    unique keys, else recency over distances up to it (latest write wins). ``found_pair``: also add
    (+1, -1) there when an entry was found. ``text``: a channel that is 1.0 on ignored positions
    (shuts the gate there; without it mirror dims cancel the output, halving the value width).
    ``dtype``: the dtype the model will run in. ``gain``: the q/k norm gain, shared by every head of
    the module (default: the one already set by an earlier head, else the plan's best; configure the
    most demanding head, the longest ``max_distance``, first). ``certify``: check with
    ``lookup_margins`` that every sequence up to ``max_distance + 1`` positions gives a one-hot
    softmax in ``dtype`` (None: when that is at most CERTIFY_LENGTH positions); on failure the head is left unconfigured and
    LookupConfigError names the margins. Returns the ``Lookup`` (channels and plan)."""
    cfg = module.config
    nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    hidden = cfg.hidden_size
    if not 0 <= head < nh:
        raise LookupConfigError(f"head {head} out of range (module has {nh} heads)")
    if len(query) != len(key):
        raise LookupConfigError(f"{len(query)} query channels but {len(key)} key channels")
    if len(value_pairs) != len(out_pairs):
        raise LookupConfigError(f"{len(value_pairs)} value pairs but {len(out_pairs)} output pairs")
    channels = [one, flag, sink, *query, *key, *(c for p in value_pairs for c in p),
                *(c for p in out_pairs for c in p), *(found_pair or ()), *(() if text is None else (text,))]
    bad = [c for c in channels if not 0 <= c < hidden]
    if bad:
        raise LookupConfigError(f"channels {bad} are outside the hidden size {hidden}")
    if len(set(query)) != len(query) or len(set(key)) != len(key):
        raise LookupConfigError("query channels and key channels must be distinct")

    current = module_gain(module)
    if gain is not None and current is not None and gain != current:
        raise LookupConfigError(f"gain {gain} asked, but the module's other heads use gain {current}")
    gain = gain if gain is not None else current
    plan = plan_lookup(cfg, len(key), max_distance=max_distance, gain=gain, dtype=dtype)
    hd, r = plan.head_dim, plan.rotary_dim
    reads = [p[0] for p in value_pairs] + ([None] if found_pair is not None else [])
    writes = list(out_pairs) + ([found_pair] if found_pair is not None else [])
    width = len(reads)
    mirror = text is None
    capacity = hd // 2 if mirror else hd
    if width > capacity:
        raise LookupConfigError(f"{width} value dims exceed the head's capacity {capacity}"
                                + (" (mirror dims halve it; pass text= to lift that)" if mirror else ""))

    dev, wdt = module.q_proj.weight.device, module.q_proj.weight.dtype
    q = torch.zeros(2 * hd, hidden, dtype=torch.float64)     # query rows, then gate rows
    k = torch.zeros(hd, hidden, dtype=torch.float64)
    v = torch.zeros(hd, hidden, dtype=torch.float64)
    o = torch.zeros(hidden, hd, dtype=torch.float64)

    a, sg, rr = plan.match, plan.sink, plan.rope
    for i, (qc, kc) in enumerate(zip(query, key)):
        d = plan.match_dims[i]
        q[d, qc] += a
        k[d, kc] += a
        q[plan.q_pad_dim, qc] -= a
        k[plan.k_pad_dim, kc] -= a
    q[plan.q_pad_dim, one] += a
    k[plan.k_pad_dim, one] += a
    q[plan.sink_dim, one] += sg
    k[plan.sink_dim, sink] += sg
    k[plan.sink_pad_dim, one] += sg
    k[plan.sink_pad_dim, sink] -= sg
    if plan.rope_pair is not None:
        i = plan.rope_pair
        q[i, one] += rr
        k[i, one] += rr
        k[i + r // 2, one] -= rr
    for d, val in plan.q_fill:
        q[d, one] += val
    for d, val in plan.k_fill:
        k[d, one] += val

    for j, ch in enumerate(reads):
        if ch is None:                       # found: v = sum(key)
            for kc in key:
                v[j, kc] += 1
        else:
            v[j, ch] += 1
        plus, minus = writes[j]
        o[plus, j] += 1
        o[minus, j] -= 1
        g_row = q[hd + j]
        g_row[flag] += GATE_OPEN
        g_row[one] -= GATE_SHUT
        if text is not None:
            g_row[text] -= GATE_SHUT
        if mirror:
            jm = width + j
            v[jm] = v[j]
            o[plus, jm] -= 1
            o[minus, jm] += 1
            q[hd + jm, one] -= GATE_SHUT

    groups = nh // nkv
    kv = head // groups
    rows_q = slice(head * 2 * hd, (head + 1) * 2 * hd)
    cols_o = slice(head * hd, (head + 1) * hd)
    rows_kv = slice(kv * hd, (kv + 1) * hd)
    with torch.no_grad():
        if torch.any(module.q_proj.weight[rows_q] != 0) or torch.any(module.o_proj.weight[:, cols_o] != 0):
            raise LookupConfigError(f"head {head} is already configured (reset_attention first)")
        new_k, new_v = k.to(dev, wdt), v.to(dev, wdt)
        old_k, old_v = module.k_proj.weight[rows_kv].clone(), module.v_proj.weight[rows_kv].clone()
        old_norm = module.q_norm.weight.clone(), module.k_norm.weight.clone()
        if torch.any(old_k != 0) or torch.any(old_v != 0):
            if not (torch.equal(old_k, new_k) and torch.equal(old_v, new_v)):
                raise LookupConfigError(
                    f"k/v head {kv} (shared by q heads {kv * groups}..{kv * groups + groups - 1}) "
                    f"already holds a different memory")
        module.k_proj.weight[rows_kv] = new_k
        module.v_proj.weight[rows_kv] = new_v
        module.q_proj.weight[rows_q] = q.to(dev, wdt)
        module.o_proj.weight[:, cols_o] = o.to(dev, wdt)
        module.q_norm.weight.fill_(plan.gain - 1)
        module.k_norm.weight.fill_(plan.gain - 1)
    lookup = Lookup(head=head, one=one, flag=flag, query=tuple(query), key=tuple(key), sink=sink,
                    value_pairs=tuple(map(tuple, value_pairs)), out_pairs=tuple(map(tuple, out_pairs)),
                    found_pair=None if found_pair is None else tuple(found_pair), text=text, plan=plan)
    length = max_distance + 1 if max_distance is not None else 16   # unique keys: no position term
    if certify or (certify is None and length <= CERTIFY_LENGTH):
        margins = lookup_margins(module, lookup, length, dtype)
        if margins["lead"] < EXP_UNDERFLOW:
            with torch.no_grad():
                module.k_proj.weight[rows_kv] = old_k
                module.v_proj.weight[rows_kv] = old_v
                module.q_proj.weight[rows_q] = 0
                module.o_proj.weight[:, cols_o] = 0
                module.q_norm.weight.copy_(old_norm[0])
                module.k_norm.weight.copy_(old_norm[1])
            raise LookupConfigError(
                f"head {head}: the winning score leads by only {margins['lead']:.1f} < {EXP_UNDERFLOW} "
                f"in {dtype} over {length} positions ({margins}); use unique keys, a shorter "
                f"max_distance or float32")
    return lookup


def _ulp(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Spacing of ``dtype`` numbers at |x| (x float32)."""
    bits = {torch.float32: 23, torch.bfloat16: 7, torch.float16: 10}[dtype]
    e = torch.floor(torch.log2(x.abs().clamp_min(torch.finfo(dtype).tiny)))
    return torch.exp2(e - bits)


def lookup_margins(module, lookup: Lookup, length: int, dtype: torch.dtype | None = None,
                   query_positions: list[int] | None = None, start: int = 0) -> dict[str, float]:
    """Smallest lead of the winning score over every other visible score, for EVERY sequence of
    ``length`` positions (position ids start..start+length-1), computed through the module's own
    q_proj, q_norm/k_norm and the model's RoPE (Qwen3_5TextRotaryEmbedding, apply_rotary_pos_emb)
    in ``dtype``: a certificate that the softmax of this head is one-hot.

    Each score is bounded by its float32 value +- (half an ulp of ``dtype`` per rounding + 8
    float32 ulps), which covers the rounding of the q.k product to ``dtype`` (eager) or not (sdpa)
    in any summation order (prefill, decode, any batch). Keys: ``recency`` (newest match over an
    older match; inf for unique keys), ``match`` (a match over every non-match, sink and ignored
    key), ``sink`` (a sink over every non-match and ignored key) and ``lead`` (their minimum).
    The softmax is exactly one-hot when ``lead`` >= EXP_UNDERFLOW (104). ``query_positions``: check only these lookup positions (indices into the
    sequence; default: all). ``start``: the first position id (RoPE angles, hence their float32
    error, grow with the absolute position)."""
    import copy

    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding, apply_rotary_pos_emb

    cfg = module.config
    dtype = dtype or module.q_proj.weight.dtype
    m = copy.deepcopy(module).to(dtype)
    hd, hidden = lookup.plan.head_dim, cfg.hidden_size
    kv = lookup.head // (cfg.num_attention_heads // cfg.num_key_value_heads)

    def residual(*chs):
        x = torch.zeros(hidden, dtype=dtype)
        for c in chs:
            x[c] = 1
        return x

    cats = {"match": residual(lookup.one, lookup.key[0]), "nonentry": residual(lookup.one),
            "sink": residual(lookup.one, lookup.sink)}
    if len(lookup.key) > 1:
        cats["mismatch"] = residual(lookup.one, lookup.key[1])
    xq = residual(lookup.one, lookup.flag, lookup.query[0])
    with torch.no_grad():
        q = m.q_norm(m.q_proj(xq).view(-1, 2 * hd)[lookup.head, :hd])
        ks = {c: m.k_norm(m.k_proj(x).view(-1, hd)[kv]) for c, x in cats.items()}
        rope = Qwen3_5TextRotaryEmbedding(cfg)
        pos = torch.arange(start, start + length)[None, None].expand(3, 1, length)
        cos, sin = rope(q[None, None], pos)

        def embed(v):                       # v rotated at every position, as the module does it
            e, _ = apply_rotary_pos_emb(v.expand(1, 1, length, hd), v.expand(1, 1, length, hd), cos, sin)
            return e[0, 0].float()

        qe = embed(q)
        kes = {c: embed(k) for c, k in ks.items()}
    # eager rounds q.k to dtype, then multiplies by the scaling (a second rounding unless it is a
    # power of two); sdpa keeps float32 scores. Bound both: +- n/2 ulp(dtype) + 8 ulp(float32).
    exact_scale = math.log2(m.scaling) == int(math.log2(m.scaling))
    halves = 1 if exact_scale else 2
    rows_all = list(range(length)) if query_positions is None else sorted(query_positions)
    out = {"match": math.inf, "sink": math.inf, "recency": math.inf}
    inf = torch.tensor(float("inf"))
    for start in range(0, len(rows_all), 256):
        rows = torch.tensor(rows_all[start:start + 256])
        n_rows = len(rows)
        visible = torch.arange(length)[None, :] <= rows[:, None]
        lo, hi = {}, {}
        for c, ke in kes.items():
            sc = (qe[rows] @ ke.T) * m.scaling                      # [p_q, p_k]
            err = _ulp(sc, dtype) * halves / 2 + 8 * _ulp(sc, torch.float32)
            lo[c], hi[c] = sc - err, sc + err
        others = [torch.where(visible, hi[c], -inf).amax(1) for c in ("nonentry", "mismatch") if c in hi]
        others_hi = torch.maximum(torch.stack(others).amax(0), torch.zeros(n_rows))  # ignored keys: 0
        sink_hi = torch.where(visible, hi["sink"], -inf).amax(1)
        match_lo = torch.where(visible, lo["match"], inf).amin(1)
        sink_lo = torch.where(visible, lo["sink"], inf).amin(1)
        out["match"] = min(out["match"], float((match_lo - torch.maximum(others_hi, sink_hi)).min()))
        out["sink"] = min(out["sink"], float((sink_lo - others_hi).min()))
        if lookup.plan.rope_pair is not None:
            # the newest match p_w over every older one: lo[p_w] - max_{p_o < p_w} hi[p_o]
            prev = torch.cummax(torch.where(visible, hi["match"], -inf), dim=1).values
            prev = torch.cat([torch.full((n_rows, 1), -inf), prev[:, :-1]], dim=1)
            out["recency"] = min(out["recency"], float(torch.where(visible, lo["match"] - prev, inf).min()))
    out["lead"] = min(out.values())
    return out
