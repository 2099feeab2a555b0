"""DeltaNet memory: one head of a real ``Qwen3_5GatedDeltaNet`` as an exact word-addressed RAM.

What the head computes (transformers ``modeling_qwen3_5``; re-read it before changing anything)::

    qkv = silu(causal_conv1d(in_proj_qkv(x)))       (depthwise, kernel 4, no bias)
    q, k = l2norm(q), l2norm(k)                      (x * rsqrt(sum(x**2) + 1e-6), float32)
    q = q * d_k**-0.5                                (chunked path; the recurrent one divides by d_k**0.5)
    beta = sigmoid(in_proj_b(x));  g = -exp(A_log) * softplus(in_proj_a(x) + dt_bias)
    S <- S * exp(g);  S <- S + k (beta (v - S^T k))^T;  o = S^T q        (S: d_k x d_v, float32)
    y = norm.weight * rmsnorm(o) * silu(in_proj_z(x))   (per head over d_v; ONE weight for all heads)
    out = out_proj(y)

``configure_memory`` makes value head ``head`` (with its key head) hold ``n`` words of ``width``
bits. Slot j is row j of S (key = e_j). At every position, in order: when the write address channel
``W_j`` is 1, row j is replaced by the value word (the delta rule with beta = 1 and a one-hot key
replaces exactly that row); then, when the read address channel ``R_j`` is 1, row j as it is after
this position's write is read back and added to the output pairs as (+b, -b).

Row layout (the d_v value columns of the head): bit i is stored in columns ``2i`` (copy of the b
channel) and ``2i + 1`` (copy of 1 - b), exactly one of them non-zero; the next ``P - width``
columns are PAD columns copied from the constant channel ``one``, where P = d_v/4 ("quarter"
packing, the default) or d_v/2 ("half" packing). So every stored row holds exactly P entries equal to
the read level and zeros elsewhere, for every memory, width and bit pattern: one row norm, hence
one gated-norm weight right for every head (the weight is shared by all heads of the module, so all
memories of one module use one packing). Only columns ``2i`` feed ``out_proj``.

The one hard part is the read scale. Every product in the read, ``q_scaled * V``, must be EXACT (not
just round to a nice number): the chunked path's ``intra_chunk_attn @ v_new`` sums ``q * (+V)``,
``q * (-V)``, ... for several writes to one slot inside a chunk, in an order (vectorised, fused
multiply-add) where a partial sum like 3a occurs; if a = q*V is not short, that rounds and a slot
that should read 0 reads 1.3e-5 (measured: d_k = 128 with a value 2896.3095703125, chosen so that
fl32(q * V) == 256, failed this way in float32 and bfloat16). Hence V is a power of two and the
scaled query q itself must have a short mantissa:

* d_k a power of 4 (16, 64, 256): the query is one-hot, ``ADDRESS_MAGNITUDE = 64`` on dim j, and
  q_scaled = d_k**-0.5 is a power of two (1/4, 1/8, 1/16). ``silu(64) == 64``; ``4096 + 1e-6``
  rounds to 4096 and ``rsqrt(4096) = 1/64``, so l2norm gives exactly e_j.
* d_k = 128 (real Qwen3.5 checkpoints): d_k**-0.5 = 0.0883883461... has a full mantissa, and no
  one-hot query can fix it. The query gets a second non-zero on a DUMMY dim (the last key dim,
  d_k - 1, never written, so its row of S stays 0 and adds 0 to the read): pre-activations
  (x_main, x_dummy) = (251, 26.75), found by ``calibrate_read`` (a search over bfloat16-exact pairs
  >= 17.5), give q_scaled = 0.087890625 = 45/512 EXACTLY on both paths (multiply by
  fl32(128**-0.5) and divide by fl32(sqrt(128))). Cost: one slot, 127 words per head.

Constants (each keeps a step exact in float32 AND bfloat16, chunked prefill AND recurrent decode):

* keys: ``ADDRESS_MAGNITUDE = 64`` on dim j, so l2norm gives exactly e_j (magnitude 1 would give
  0.9999995 because of eps). An all-zero address gives ``0 * rsqrt(1e-6) = 0``: no write, no read.
  With d_k = 128 the magnitude is 68.5 instead (decoded matches: 137 for 128), ``key_magnitude``:
  llama.cpp normalises in two steps (an RMS norm, then ``1/sqrt(d_k)``), where any power of two
  gives 0.99999994; 68.5 and 137 give exactly 1 there and in transformers (docs/design/serve.md).
* silu of every q/k/v pre-activation is exact: values are 0 (silu(0) == 0) or >= 17.5, where
  sigmoid rounds to 1.0 and silu(x) == x; they are never negative (silu's tiny negative values).
* conv: weight 1 on tap ``kernel - 1`` (3), the lag-0 tap of the causal conv (``F.conv1d`` correlates over a
  left-padded input, ``out[t] = sum_k w[k] x[t + k - 3]``; the decode update concatenates the conv
  state and keeps the last output: same orientation). The other taps are 0, so only the current
  position counts (``0 * x == 0`` for every earlier one).
* values: V (``ReadCalibration.value``) on the value bit channels (and on ``one`` for the pads) is
  the power of two with read level a = q_scaled * V in (128, 256]: 1024 (d_k = 16), 2048 (d_k = 64
  and 128), 4096 (d_k = 256). Read levels a: 256, 256, 180 (= 45/512 * 2048), 256; all exact in
  bfloat16, every partial sum k*a is an exact float32 integer, and the row's mean square (a**2/4 >=
  8100) swamps eps (1e-6) in rounding.
* beta: ``BETA_LOGIT = 32`` on the constant channel: ``sigmoid(32) == 1.0`` (>= ~17 needed). On an
  ignored position (one = 0) beta is 0.5, but the key is 0 there, so nothing is written.
* decay: ``DT_BIAS = -200``, ``A_LOG = -200``, ``in_proj_a = 0``: ``softplus(-200) == 0.0`` exactly
  (exp(-200) underflows; softplus(-50) is 1.9e-22, not 0) AND ``exp(-200) == 0.0``, so
  ``g = -0 * 0`` and ``exp(g) == 1`` whatever the input.
* output gate: ``GATE = 32`` on the constant channel (in_proj_z, every column of the head):
  ``silu(32) == 32``; ``silu(0) == 0`` on an ignored position, which then adds exactly 0.
* ``norm.weight`` = ``calibrate_norm_weight``, picked by evaluating the real
  ``Qwen3_5RMSNormGated`` on the real read level over many bit patterns, in float32 and bfloat16,
  so that ``weight * rmsnorm(o)`` is exactly 1.0. Quarter packing: the row's mean square is
  a**2/4, rmsnorm(o) is exactly 2 (also for a = 180: fl32(180 * rsqrt(8100)) == 2) and the weight is
  0.5, a power of two, exact whatever precision the weights are stored in. Half packing: rmsnorm(o)
  is ~sqrt(2) (float32 1.4142135 for a = 256, 1.4142137 for a = 180; bfloat16 1.4140625) and the
  weight is 0.7071068286895752 (d_k = 16, 64: one ulp above fl32(sqrt(1/2)), which gives
  0.99999994) or 0.7071067690849304 (d_k = 128); exact in float32 and bfloat16 only while the
  weight itself is kept in float32 (a bfloat16-stored weight, 0.70703125, run in float32 gives
  0.9998 instead of 1: not exact).
* ``out_proj``: ``+1/32`` to the output pair's b channel and ``-1/32`` to its 1 - b channel, from
  column 2i only: one non-zero product per output channel, exact in any reduction order.

A never-written slot reads as an all-zero row: rmsnorm(0) = 0, the output pair stays (0, 1). A
position without a read has q = 0, o = 0 and adds exactly 0.0. A position with one = 0 and all
address channels 0 (e.g. a text token of a merged model) has k = q = 0 and gate 0: S is unchanged
and it adds exactly 0.0. Value channels may hold anything finite where no write happens.

Capacity per value head: d_k slots (d_k a power of 4) or d_k - 1 (d_k = 128: 127), of at most
d_v/4 bits (quarter; d_v = 128: 32) or d_v/2 bits (half; d_v = 128: 64). Value heads that share a
key head (``num_v_heads > num_k_heads``) share the row address: configure them with the same address
channels (raises otherwise), to build a wider word or, with ``write_select``/``read_select``, to
hold other words (other banks) at the same rows. Heads that are not configured must be zero
(``clear_module``) and then output exactly 0.

Exact (torch.equal, tests/gadgets/test_deltanet_memory.py, CPU torch paths; also checked with
ATEN_CPU_CAPABILITY=avx2 / default and 2 threads): d_k = 16, 64 and 128, both packings, float32 and
bfloat16, chunked prefill (no cache, fresh cache, continued from a cache), token-by-token recurrent
decode, batch 1 and 8, inside a Qwen3_5ForCausalLM with its own cache and left padding.
Measured once on an NVIDIA H200 (torch 2.11+cu130, these transformers 5.24 torch paths; no
flash-linear-attention kernels): quarter packing exact in every case above; half packing exact in
bfloat16 and for d_k = 128, but NOT in float32 for d_k = 16 and 64 (reads of 1 off by 5.96e-8: CUDA's
rsqrt differs from the CPU's by an ulp, and the half-packing weight is calibrated on the CPU).
Quarter packing is the default for that reason too.
"""

from __future__ import annotations

import copy
import functools
import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from netlist2tf.common import Netlist2TFError
from netlist2tf.gadgets.arrays import deltanet_arrays

if TYPE_CHECKING:                   # for the annotations only: imported where a calibration runs
    import torch

ADDRESS_MAGNITUDE = 64.0    # one-hot key (and one-hot query when d_k is a power of 4)
MATCH_MAGNITUDE = 128.0     # decoded key/query: silu(-128 m) == -0.0 exactly for every m >= 1
BETA_SHUT = 128.0           # write enable off: sigmoid(-128) == 0.0 exactly (float32, bfloat16)
SELECT_SHUT = 256.0         # a select literal off: sigmoid(32 - 256) == 0.0, silu(32 - 256) == -0.0
MIN_ACTIVATION = 17.5       # silu(x) == x exactly in float32 for x >= ~17.4
BETA_LOGIT = 32.0
GATE = 32.0
OUT_SCALE = 1.0 / GATE
DT_BIAS = -200.0
A_LOG = -200.0
CALIBRATION_ULPS = 16       # how many float32 ulps either side of 1/rmsnorm the weight search tries
PACKINGS = {"quarter": 4, "half": 2}   # a stored row has d_v / PACKINGS[p] non-zero entries
MAX_READ_BITS = 8           # significant bits allowed in the scaled query (bfloat16-exact read level)


def _cached(fn):
    """``fn`` (a calibration: it runs torch and transformers) remembered in the process and on disk,
    under BUILD/calibration/, by its arguments, this file's text and the torch and transformers
    versions that computed it: a later compile reads the constant instead of importing them. A
    cache that cannot be read or written is computed again."""
    import dataclasses
    import hashlib
    import inspect
    import json
    from pathlib import Path

    sig = inspect.signature(fn)

    @functools.lru_cache(maxsize=None)
    def cached(*args, **kwargs):
        from importlib.metadata import version

        from netlist2tf.common import build_dir, write_file

        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        key = json.dumps([fn.__name__, list(bound.arguments.values()), version("torch"), version("transformers"),
                          hashlib.sha256(Path(__file__).read_bytes()).hexdigest()])
        path = build_dir() / "calibration" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
        try:
            rec = json.loads(path.read_text())
            if rec["key"] == key:
                value = rec["value"]
                return ReadCalibration(**value) if isinstance(value, dict) else value
        except (OSError, ValueError, KeyError, TypeError):
            pass
        value = fn(*args, **kwargs)
        stored = dataclasses.asdict(value) if isinstance(value, ReadCalibration) else value
        try:
            write_file(path, json.dumps({"key": key, "value": stored}), "the calibration cache")
        except (OSError, Netlist2TFError):
            pass
        return value

    cached.__doc__ = fn.__doc__
    cached.__wrapped__ = fn
    return cached


def _torch():
    """torch and transformers' Qwen3.5 modelling code, imported where a calibration runs them (a
    compile whose calibrations are cached imports neither)."""
    import torch
    from transformers.models.qwen3_5 import modeling_qwen3_5 as qm

    from netlist2tf.common import drop_kernel_notes

    drop_kernel_notes()             # the reference-kernel notes are about speed; a calibration is small
    return torch, qm, (torch.float32, torch.bfloat16)


@dataclass(frozen=True, slots=True)
class ReadCalibration:
    """How a key head's query is formed and what a stored 1 reads as.

    ``query_main``: pre-activation on the slot's own dim; ``query_dummy``: pre-activation on the
    dummy dim ``head_k_dim - 1`` (None: one-hot query, all d_k dims are slots); ``query_scale``:
    the query entry after l2norm and the d_k**-0.5 scale; ``value``: V; ``level``: the read
    ``o = query_scale * value`` of a stored 1 (before the gated norm)."""
    query_main: float
    query_dummy: float | None
    query_scale: float
    value: float
    level: float


@dataclass(frozen=True, slots=True)
class MemorySpec:
    """What ``configure_memory`` set: ``slots`` words of ``width`` bits in value head ``head``
    (key head ``key_head``), with the calibrated constants it used."""
    head: int
    key_head: int
    slots: int
    width: int
    packing: str
    read: ReadCalibration
    norm_weight: float
    pad_columns: tuple[int, ...]


# ----------------------------------------------------------------------------------------------
# Calibration: evaluate the real transformers code on the discrete cases, pick the constants.
# ----------------------------------------------------------------------------------------------

def _significant_bits(x: torch.Tensor) -> torch.Tensor:
    """Significant bits of the mantissa of each (positive, normal) float32 in ``x``."""
    torch, qm, _DTYPES = _torch()
    m = (x.float().view(torch.int32) & 0x7FFFFF) | 0x800000
    low = m & -m
    return 24 - torch.log2(low.double()).round().long()


def _bf16_values(lo: float, hi: float) -> torch.Tensor:
    """Every bfloat16 number in [lo, hi), as float32."""
    torch, qm, _DTYPES = _torch()
    out, e = [], math.floor(math.log2(lo))
    while 2.0 ** e < hi:
        out.append(2.0 ** e * (1 + torch.arange(128, dtype=torch.float64) / 128))
        e += 1
    x = torch.cat(out).float()
    return x[(x >= lo) & (x < hi)]


def _scaled_query(pre: torch.Tensor, head_k_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The query after l2norm and scale, as the chunked and the recurrent path compute it (rows of
    ``pre`` are post-silu query vectors). Only a candidate generator: ``calibrate_read`` then runs
    the real transformers functions."""
    torch, qm, _DTYPES = _torch()
    q = qm.l2norm(pre.float(), dim=-1, eps=1e-6)
    return q * head_k_dim ** -0.5, q / head_k_dim ** 0.5


def _read_cases(cal: ReadCalibration, head_k_dim: int, dtype: torch.dtype, columns: int = 32):
    """A write/read sequence on a few slots, as the post-conv q, k, v, g, beta tensors the module
    feeds the delta rule, and a mask of where the read must be non-zero. It covers read-after-write
    at one position, later reads, overwrites with another and with the same word, many writes to a
    slot before one read (the partial sums that broke an inexact product), a never-written slot,
    over 161 positions (3 chunks of 64), with ``columns`` random value bits."""
    torch, qm, _DTYPES = _torch()
    steps = [  # (write slot or None, read slot or None)
        (0, 0), (None, 0), (0, 0), (0, 0), (1, 1), (None, 0), (0, 1), (None, 2), (0, None), (None, 0),
        (1, 1), (0, 0), (0, None), (0, None), (0, 0), (0, None), (0, None), (0, None), (0, 0)]
    rng = random.Random(0)       # then random steps on 3 slots: many rewrites in every chunk
    steps += [(rng.choice([None, 0, 1, 2]), rng.choice([None, 0, 1, 2, 3])) for _ in range(142)]
    T = len(steps)
    q = torch.zeros(1, T, 1, head_k_dim)
    k = torch.zeros(1, T, 1, head_k_dim)
    bits = torch.tensor([[rng.randrange(2) for _ in range(columns)] for _ in range(T)],
                        dtype=torch.bool)
    v = (bits.float() * cal.value)[None, :, None, :]
    stored = torch.zeros(1, T, 1, columns, dtype=torch.bool)
    rows: dict[int, torch.Tensor] = {}
    for t, (w, r) in enumerate(steps):
        if w is not None:
            k[0, t, 0, w] = key_magnitude(head_k_dim, ADDRESS_MAGNITUDE)
            rows[w] = bits[t]
        if r is not None:
            q[0, t, 0, r] = cal.query_main
            if cal.query_dummy is not None:
                q[0, t, 0, head_k_dim - 1] = cal.query_dummy
            if r in rows:
                stored[0, t, 0] = rows[r]
    g = torch.zeros(1, T, 1)
    beta = torch.ones(1, T, 1)
    return q.to(dtype), k.to(dtype), v.to(dtype), g, beta.to(dtype), stored


def _real_reads(cal: ReadCalibration, head_k_dim: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """``o`` for ``_read_cases`` through the real chunked path (prefill) and the real recurrent path
    (decode; the first token of a fresh cache takes the chunked path), with prefill chunk sizes 64
    (the module's) and 4 (so chunk boundaries fall inside the sequence)."""
    torch, qm, _DTYPES = _torch()
    q, k, v, g, beta, _ = _read_cases(cal, head_k_dim, dtype)
    kw = dict(use_qk_l2norm_in_kernel=True)
    outs = [qm.torch_chunk_gated_delta_rule(q, k, v, g=g, beta=beta, chunk_size=c, **kw)[0]
            for c in (64, 4)]
    steps, state = [], None
    for t in range(q.shape[1]):
        at = slice(t, t + 1)
        if state is None:
            o, state = qm.torch_chunk_gated_delta_rule(q[:, at], k[:, at], v[:, at], g=g[:, at],
                                                       beta=beta[:, at], output_final_state=True, **kw)
        else:
            o, state = qm.torch_recurrent_gated_delta_rule(
                q[:, at], k[:, at], v[:, at], g=g[:, at], beta=beta[:, at], initial_state=state,
                output_final_state=True, **kw)
        steps.append(o)
    return outs + [torch.cat(steps, dim=1)]


def _read_is_exact(cal: ReadCalibration, head_k_dim: int) -> bool:
    """Do all real read paths, in float32 and bfloat16, give exactly ``cal.level`` where a 1 is
    stored and exactly 0 elsewhere?"""
    torch, qm, _DTYPES = _torch()
    for dtype in _DTYPES:
        stored = _read_cases(cal, head_k_dim, dtype)[-1]
        for o in _real_reads(cal, head_k_dim, dtype):
            if not torch.equal(o.float(), stored.float() * cal.level):
                return False
    return True


def two_step_l2norm(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """l2norm of the rows of ``x`` as llama.cpp computes it for Qwen3.5's DeltaNet (its
    ``build_gdn_l2_norm``): an RMS norm with eps/d (squares summed in double, the mean cast to
    float32, ``1.0f / sqrtf(mean + eps/d)``), then a scale by ``1.0f / sqrtf(d)``, every step
    rounded to float32. Equal to transformers' ``x * rsqrt(sum(x**2) + eps)`` only where the
    roundings happen to agree: the magnitudes below are chosen where they do."""
    f = np.float32
    x = np.asarray(x, dtype=np.float32)
    d = x.shape[-1]
    sq = (x * x).astype(np.float64).sum(-1, keepdims=True)
    mean = (sq / d).astype(np.float32)
    r = (f(1.0) / np.sqrt(mean + f(f(eps) / f(d)))).astype(np.float32)
    y = (x * r).astype(np.float32)
    return (y * (f(1.0) / np.sqrt(f(d)))).astype(np.float32)


def _unit_key(m: float, head_k_dim: int) -> bool:
    """Does a one-hot key entry of magnitude ``m`` l2-normalise to exactly 1.0 in transformers
    (float32 and bfloat16) and in llama.cpp's two-step form?"""
    torch, qm, _DTYPES = _torch()
    for dtype in _DTYPES:
        x = torch.zeros(1, head_k_dim, dtype=dtype)
        x[0, 0] = m
        if qm.l2norm(x, dim=-1, eps=1e-6)[0, 0].item() != 1.0:
            return False
    one_hot = np.zeros((1, head_k_dim), dtype=np.float32)
    one_hot[0, 0] = m
    return float(two_step_l2norm(one_hot)[0, 0]) == 1.0


@_cached
def key_magnitude(head_k_dim: int, base: float) -> float:
    """The magnitude of a key entry (``base``: ADDRESS_MAGNITUDE or MATCH_MAGNITUDE) for key heads of
    ``head_k_dim``: ``base`` itself where it normalises to exactly 1 everywhere (d_k a power of 4),
    else the smallest bfloat16 number above it that does (d_k = 128: llama.cpp's two-step l2norm
    gives 0.99999994 for every power of two; 68.5 and 137 give 1.0 on every path)."""
    for m in _bf16_values(base, 4 * base).tolist():
        if _unit_key(m, head_k_dim):
            return m
    raise Netlist2TFError(f"no key magnitude in [{base:g}, {4 * base:g}) normalises to exactly 1 for "
                          f"linear_key_head_dim={head_k_dim} in transformers and llama.cpp")


def _two_step_query(main: float, dummy: float | None, head_k_dim: int) -> float:
    """The read's scale per stored unit as llama.cpp computes it: the two-step l2norm of the query
    (main entry, dummy entry), then the delta rule's output scale ``1.0f / sqrtf(d)``."""
    q = np.zeros((1, head_k_dim), dtype=np.float32)
    q[0, 0] = main
    if dummy is not None:
        q[0, head_k_dim - 1] = dummy
    f = np.float32
    return float(f(two_step_l2norm(q)[0, 0] * (f(1.0) / np.sqrt(f(head_k_dim)))))


def _calibration(main: float, dummy: float | None, scale: float) -> ReadCalibration:
    """V is the power of two that puts the read level scale * V in (128, 256]."""
    value = 2.0 ** math.floor(math.log2(256.0 / scale))
    return ReadCalibration(main, dummy, scale, value, scale * value)


@_cached
def calibrate_read(head_k_dim: int) -> ReadCalibration:
    """The query pre-activations and value magnitude that make the read exact for ``head_k_dim``.

    First the one-hot query (ADDRESS_MAGNITUDE on the slot's dim) if its scaled value is a power of
    two on both paths (d_k a power of 4). Otherwise a search over pairs (main, dummy) of
    bfloat16-exact numbers in [17.5, 512) for the ones whose scaled query is the same on both paths
    and has at most MAX_READ_BITS significant bits; the fewest bits win, then the smallest main.
    Every candidate is accepted only if the real transformers read paths (``_read_is_exact``:
    chunked and recurrent, float32 and bfloat16) return its read level exactly.
    Raises Netlist2TFError if nothing passes."""
    torch, qm, _DTYPES = _torch()
    if head_k_dim < 2:
        raise Netlist2TFError(f"linear_key_head_dim={head_k_dim} is too small for a memory")
    one_hot = torch.zeros(1, head_k_dim)
    one_hot[0, 0] = ADDRESS_MAGNITUDE
    qc, qr = _scaled_query(one_hot, head_k_dim)
    s = qc[0, 0].item()
    if (qc[0, 0] == qr[0, 0] and _significant_bits(qc[:, 0]).item() == 1
            and _two_step_query(ADDRESS_MAGNITUDE, None, head_k_dim) == s):
        cal = _calibration(ADDRESS_MAGNITUDE, None, s)
        if _read_is_exact(cal, head_k_dim):
            return cal
    grid = _bf16_values(MIN_ACTIVATION, 512.0)
    main = grid.repeat_interleave(len(grid))
    dummy = grid.repeat(len(grid))
    # the other d_k - 2 dims are 0 and add exact zeros to the l2norm's sum: leave them out
    qc, qr = _scaled_query(torch.stack([main, dummy], dim=1), head_k_dim)
    qc, qr = qc[:, 0], qr[:, 0]
    bits = _significant_bits(qc)
    ok = (qc == qr) & (bits <= MAX_READ_BITS)
    order = sorted(ok.nonzero().flatten().tolist(), key=lambda i: (bits[i].item(), main[i].item()))
    # llama.cpp normalises in two steps and scales the delta rule's output, not the query: the same
    # read scale there too (the stored values are V, a power of two, so V * q is exact on every path)
    order = [i for i in order if _two_step_query(main[i].item(), dummy[i].item(), head_k_dim) == qc[i].item()]
    for i in order[:32]:
        cal = _calibration(main[i].item(), dummy[i].item(), qc[i].item())
        if _read_is_exact(cal, head_k_dim):
            return cal
    raise Netlist2TFError(
        f"no query for linear_key_head_dim={head_k_dim} makes the DeltaNet read exact (tried the "
        f"one-hot query and {len(order)} two-dim queries); use a head_k_dim of 16, 64, 128 or 256")


def _row_nonzeros(head_v_dim: int, packing: str) -> int:
    """How many entries of a stored row are non-zero under ``packing`` (see PACKINGS)."""
    if packing not in PACKINGS:
        raise Netlist2TFError(f"packing must be one of {sorted(PACKINGS)}, got {packing!r}")
    if head_v_dim % PACKINGS[packing]:
        raise Netlist2TFError(f"{packing!r} packing needs linear_value_head_dim divisible by "
                              f"{PACKINGS[packing]}, got {head_v_dim}")
    return head_v_dim // PACKINGS[packing]


def _norm_cases(head_v_dim: int, nonzeros: int) -> torch.Tensor:
    """Row masks the gated norm can meet: a written row has ``nonzeros`` non-zero entries (which
    ones depends on the bit pattern), a never-written row none: 4 structured and 60 random
    patterns and an empty row. (The tests check all 12,870 patterns for d_v = 16, half packing.)"""
    torch, qm, _DTYPES = _torch()
    rng = random.Random(head_v_dim * 1000 + nonzeros)
    base = [1] * nonzeros + [0] * (head_v_dim - nonzeros)
    rows = [base, base[::-1], [int(c % 2 == 1 and c < 2 * nonzeros) for c in range(head_v_dim)],
            [int(c % 2 == 0 and c < 2 * nonzeros) for c in range(head_v_dim)]]
    while len(rows) < 64:
        r = list(base)
        rng.shuffle(r)
        rows.append(r)
    rows.append([0] * head_v_dim)
    return torch.tensor(rows, dtype=torch.float32)


def _norm_is_exact(level: float, mask: torch.Tensor, eps: float, weight: float) -> bool:
    """Is ``Qwen3_5RMSNormGated(weight)(o, gate=GATE)`` exactly GATE where a written row (``mask``)
    holds the read level and 0 elsewhere, in float32 and with the norm (its weight) cast to
    bfloat16, with 65, 37 and 101 rows at a time (vectorised kernels' main loop and tail)?"""
    torch, qm, _DTYPES = _torch()
    norm = qm.Qwen3_5RMSNormGated(mask.shape[1], eps=eps)
    with torch.no_grad():
        norm.weight.fill_(weight)
    for dtype in _DTYPES:
        mod = copy.deepcopy(norm).to(dtype)
        for reps in (mask.shape[0], 37, 101):
            rows = mask.repeat(reps // mask.shape[0] + 1, 1)[:reps]
            o = (rows * level).to(dtype)
            with torch.no_grad():
                out = mod(o, torch.full_like(o, GATE))
            if not torch.equal(out, (rows * GATE).to(dtype)):
                return False
    return True


@_cached
def calibrate_norm_weight(head_k_dim: int, head_v_dim: int, eps: float = 1e-6,
                          packing: str = "quarter") -> float:
    """The gated-norm weight w with ``w * rmsnorm(o) == 1.0`` exactly for every stored row: the
    real ``Qwen3_5RMSNormGated`` with weight 1 on a row at the real read level
    (``calibrate_read``) gives r = rmsnorm(o); float32 numbers near 1/r are tried, nearest first,
    until one is exact on every ``_norm_cases`` row in float32 and bfloat16.
    Quarter packing: r = 2 exactly and w = 0.5. Half packing: r = fl32(sqrt 2) or one ulp above it
    (read level 256 or 180), and w = 0.7071068286895752 (one ulp above fl32(sqrt(1/2))) or
    0.7071067690849304. Raises Netlist2TFError if none within CALIBRATION_ULPS ulps is exact."""
    torch, qm, _DTYPES = _torch()
    mask = _norm_cases(head_v_dim, _row_nonzeros(head_v_dim, packing))
    level = calibrate_read(head_k_dim).level
    norm = qm.Qwen3_5RMSNormGated(head_v_dim, eps=eps)
    row = mask[:1] * level
    with torch.no_grad():
        norm.weight.fill_(1.0)
        r = norm(row, torch.full_like(row, GATE))[0, 0].item() / GATE
    x32 = np.float32(1.0 / r)
    cands, up, down = [float(x32)], x32, x32
    for _ in range(CALIBRATION_ULPS):
        up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(-np.inf))
        cands += [float(up), float(down)]
    for cand in cands:
        if _norm_is_exact(level, mask, eps, cand):
            return cand
    raise Netlist2TFError(f"no gated-norm weight within {CALIBRATION_ULPS} ulps of {1.0 / r} is exact "
                          f"for linear_key_head_dim={head_k_dim}, linear_value_head_dim={head_v_dim}, "
                          f"{packing} packing")


# ----------------------------------------------------------------------------------------------
# Weights
# ----------------------------------------------------------------------------------------------

def memory_capacity(module, packing: str = "quarter") -> tuple[int, int]:
    """(slots, bits per word) one value head of ``module`` (a ``Qwen3_5GatedDeltaNet`` or its
    ``gadgets.arrays.DeltaNetArrays``) can hold with ``packing``."""
    dummy = calibrate_read(module.head_k_dim).query_dummy is not None
    return module.head_k_dim - dummy, _row_nonzeros(module.head_v_dim, packing)


def clear_module(module, packing: str = "quarter", zeroed: bool = False) -> None:
    """Zero every weight of ``module`` (a ``Qwen3_5GatedDeltaNet``, randomly initialised when fresh,
    or its ``DeltaNetArrays``) and make every head inert: decay exactly 1 (dt_bias = A_log = -200),
    no write, no read, output exactly 0. The gated-norm weight (shared by all heads) is set to its
    calibrated value for ``packing``. ``zeroed``: the projections and the conv are all zero already
    (a fresh state's arrays): they are not written again (a large model's pages stay untouched)."""
    with deltanet_arrays(module) as m:
        w = calibrate_norm_weight(m.head_k_dim, m.head_v_dim, m.norm_eps, packing)
        for a in () if zeroed else (m.qkv, m.z, m.b, m.a, m.out, m.conv):
            a[...] = 0
        m.dt_bias[...] = DT_BIAS
        m.A_log[...] = A_LOG
        m.norm[...] = w


def _channels(name: str, chans: Sequence[int], hidden: int) -> list[int]:
    chans = [int(c) for c in chans]
    bad = [c for c in chans if not 0 <= c < hidden]
    if bad:
        raise Netlist2TFError(f"{name}: channels {bad} outside the hidden size {hidden}")
    if len(set(chans)) != len(chans):
        raise Netlist2TFError(f"{name}: repeated channels in {chans}")
    return chans


def _match_channels(name: str, matches, hidden: int):
    """Every slot's match list (``name[j]``) checked as ``_channels`` checks one, all at once, as
    (slot of each channel, the channel, channels per slot): int64 arrays. The first bad list's error
    where one is bad."""
    lens = np.fromiter((len(m) for m in matches), dtype=np.int64, count=len(matches))
    if lens.size and (lens == lens[0]).all():     # the usual case: one list length, converted at once
        grid = np.asarray(matches, dtype=np.int64).reshape(len(lens), int(lens[0]))
        ordered = np.sort(grid, axis=1)
        repeated = bool((ordered[:, 1:] == ordered[:, :-1]).any())
        chans = grid.reshape(-1)
    else:
        chans = np.fromiter((int(c) for m in matches for c in m), dtype=np.int64, count=int(lens.sum()))
        repeated = any(len(set(m)) != len(m) for m in matches)
    slots = np.repeat(np.arange(len(lens)), lens)
    if repeated or (chans.size and (chans.min() < 0 or chans.max() >= hidden)):
        for j, m in enumerate(matches):
            _channels(f"{name}[{j}]", m, hidden)
    return slots, chans, lens


def _count_matches(w: np.ndarray, matches, one: int) -> None:
    """Row j of ``w`` += 1 on each channel of slot j's matches and -= (len - 1) on ``one``: the decoded
    slot's count of matches (small integers: exact in any order). ``matches``: ``_match_channels``'s."""
    slots, chans, lens = matches
    np.add.at(w, (slots, chans), np.ones(len(chans), dtype=w.dtype))
    np.add.at(w, (np.arange(len(lens)), np.full(len(lens), one, dtype=np.int64)), -(lens - 1).astype(w.dtype))


def configure_memory(module, *, one: int, write_addr: Sequence[int] | None = None,
                     read_addr: Sequence[int] | None = None, value_pairs: Sequence[tuple[int, int]],
                     out_pairs: Sequence[tuple[int, int]], head: int = 0,
                     packing: str = "quarter", write_lag: int = 0,
                     value_lags: Sequence[int] | None = None,
                     write_match: Sequence[Sequence[int]] | None = None,
                     read_match: Sequence[Sequence[int]] | None = None,
                     write_enable: int | None = None, clear: int | None = None,
                     write_select: Sequence[int] = (), read_select: Sequence[int] = ()) -> MemorySpec:
    """Make value head ``head`` of ``module`` an exact word memory (see the module docstring).

    ``one``: the constant channel (1.0 on active positions, 0.0 on ignored ones).
    ``write_addr[j]`` / ``read_addr[j]``: the one-hot channel selecting slot j for writing / reading.
    ``value_pairs[i]``: the (b, 1-b) channels of bit i of the word written (valid where a write
    address is set). ``out_pairs[i]``: the (b, 1-b) channels bit i is added to, as (+b, -b).
    ``packing``: "quarter" (words of up to d_v/4 bits, norm weight 0.5: exact whatever precision
    the weights are stored in) or "half" (up to d_v/2 bits, a calibrated norm weight that must be
    kept in float32). Every memory of one module must use the same packing (shared norm weight).
    ``write_lag`` / ``value_lags[i]``: how many positions back the write address / value bit i is
    taken from (0..kernel-1, through the depthwise conv's taps; default 0, the current position), so
    a write can combine fields of up to 4 consecutive tokens and happen at the last one only. Reads
    always use the current position.

    Decoded addresses (instead of one-hot channels): ``write_match[j]`` / ``read_match[j]`` list
    channels (e.g. the b or 1-b side of address bit pairs, an enable, a commit flag) that are ALL 1
    exactly when slot j is written / read. The key/query pre-activation of slot j is then
    ``MATCH_MAGNITUDE * (sum(channels) - (len - 1) * one)``: MATCH_MAGNITUDE when all match, 0 when
    one misses and <= -128 otherwise, and silu makes that exactly (MATCH_MAGNITUDE, 0, -0.0): the
    decoder runs inside the head's own projection + silu, with no FFN level and no one-hot channels.
    With d_k = 128 the query's main pre-activation is the calibrated one (>= 128 as well) and the
    dummy dim is always on (a query that matches no slot reads the never-written dummy row: 0).
    An address that matches no slot (another bank's) writes nothing and reads exactly 0, so several
    heads (banks) can hold one memory and add into the same output pairs.
    ``write_enable``: a channel gating the write of this VALUE head alone (beta = sigmoid(32) = 1 when
    it is 1, sigmoid(-128) = 0 exactly when 0), so value heads sharing a key head (and so a row)
    can be written by different tokens: e.g. register chunks in the rows of one parity key head.
    ``write_select`` / ``read_select``: channels that must ALL be 1 for this value head to be written
    / to add its read to the output (a bank's id in the address bits above the rows): beta's and
    the output gate's pre-activations get ``SELECT_SHUT`` per channel and ``-SELECT_SHUT * len`` on
    ``one``, so a miss gives sigmoid(32 - 256) == 0.0 (the head's state unchanged) and silu(32 - 256)
    == -0.0 (its output exactly 0 whatever its row holds). Value heads sharing a key head then hold
    different words at the same row: a key head of d_k rows holds ``group / heads per word`` banks.
    ``clear``: a channel that, where it is 1, makes the written word all zero: every value column
    gets ``-2 V`` from it, so its pre-activation is ``-V`` or ``-2 V`` and silu gives exactly -0.0
    (the delta rule then stores exactly 0, which reads as 0 bits, like a never-written slot); the
    head must also be written there (its write enable on). A folded write chunk's field is cleared
    this way by its port's first chunk.

    The module must have been cleared (``clear_module``); only the head's own slices (its value
    rows, z rows, b/a rows, dt_bias, A_log, out_proj columns, the key head's q/k rows and their conv
    taps) and the shared norm weight are written. Raises Netlist2TFError when the memory does not
    fit, a channel is out of range or repeated, or the head (or its key head, with other
    addresses) is in use.
    """
    with deltanet_arrays(module) as m:
        return _configure_memory(m, one=one, write_addr=write_addr, read_addr=read_addr, value_pairs=value_pairs,
                                 out_pairs=out_pairs, head=head, packing=packing, write_lag=write_lag,
                                 value_lags=value_lags, write_match=write_match, read_match=read_match,
                                 write_enable=write_enable, clear=clear, write_select=write_select,
                                 read_select=read_select)


def _configure_memory(module, *, one, write_addr, read_addr, value_pairs, out_pairs, head, packing, write_lag,
                      value_lags, write_match, read_match, write_enable, clear, write_select,
                      read_select) -> MemorySpec:
    """``configure_memory`` on a ``DeltaNetArrays``."""
    hidden = module.hidden_size
    dk, dv = module.head_k_dim, module.head_v_dim
    nk, nv = module.num_k_heads, module.num_v_heads
    if not 0 <= head < nv:
        raise Netlist2TFError(f"value head {head} does not exist (the module has {nv})")
    cal = calibrate_read(dk)
    max_slots, max_width = memory_capacity(module, packing)
    if (write_addr is None) == (write_match is None) or (read_addr is None) == (read_match is None):
        raise Netlist2TFError("give each of the write and the read address either as one-hot "
                              "channels (write_addr/read_addr) or as matches (write_match/read_match)")
    wlist = write_addr if write_addr is not None else write_match
    rlist = read_addr if read_addr is not None else read_match
    n = len(wlist)
    if len(rlist) != n or n == 0:
        raise Netlist2TFError(f"the write and read addresses must name the same number (>= 1) of "
                              f"slots, got {len(wlist)} and {len(rlist)}")
    if n > max_slots:
        raise Netlist2TFError(f"{n} slots do not fit a head with linear_key_head_dim={dk} (at most "
                              f"{max_slots}); split the memory over several key heads or layers")
    width = len(value_pairs)
    if len(out_pairs) != width or width == 0:
        raise Netlist2TFError(f"value_pairs and out_pairs must have the same length (>= 1), got "
                              f"{len(value_pairs)} and {len(out_pairs)}")
    if width > max_width:
        raise Netlist2TFError(f"a {width}-bit word does not fit a value head with "
                              f"linear_value_head_dim={dv} and {packing} packing (at most {max_width} "
                              f"bits); put the upper bits in another value head sharing the key head "
                              f"(same addresses)")
    (one,) = _channels("one", [one], hidden)
    if write_addr is not None:
        write_addr = _channels("write_addr", write_addr, hidden)
    else:
        write_match = _match_channels("write_match", write_match, hidden)
    if read_addr is not None:
        read_addr = _channels("read_addr", read_addr, hidden)
    else:
        read_match = _match_channels("read_match", read_match, hidden)
    if write_enable is not None:
        (write_enable,) = _channels("write_enable", [write_enable], hidden)
    if clear is not None:
        (clear,) = _channels("clear", [clear], hidden)
    write_select = _channels("write_select", write_select, hidden) if write_select else []
    read_select = _channels("read_select", read_select, hidden) if read_select else []
    for i, pair in enumerate(value_pairs):   # a channel may feed several bits from different lags
        _channels(f"value_pairs[{i}]", pair, hidden)
    _channels("out_pairs", [c for p in out_pairs for c in p], hidden)

    w_norm = calibrate_norm_weight(dk, dv, module.norm_eps, packing)
    kh = head // (nv // nk)
    q_rows = slice(kh * dk, (kh + 1) * dk)
    k_rows = slice(module.key_dim + kh * dk, module.key_dim + (kh + 1) * dk)
    v0 = 2 * module.key_dim + head * dv
    v_rows = slice(v0, v0 + dv)
    h_cols = slice(head * dv, (head + 1) * dv)
    pads = tuple(range(2 * width, max_width + width))       # row: max_width non-zeros

    f32 = np.float32
    wq = np.zeros((dk, hidden), dtype=f32)
    wk = np.zeros((dk, hidden), dtype=f32)
    wv = np.zeros((dv, hidden), dtype=f32)
    # Decoded slots: the projection counts matches minus (len - 1), a small integer exact in
    # bfloat16, and the lag-0 conv tap scales it (a weight like 251 * 7 would round in bfloat16).
    q_mag = cal.query_main if cal.query_dummy is not None else MATCH_MAGNITUDE
    q_tap = np.ones(dk, dtype=f32)
    k_tap = np.ones(dk, dtype=f32)
    slots = np.arange(n)
    if read_addr is not None:
        wq[slots, read_addr] = cal.query_main
        if cal.query_dummy is not None:       # exactly one read channel is 1: the sum is exact
            wq[dk - 1, read_addr] = cal.query_dummy
    else:
        _count_matches(wq, read_match, one)
        q_tap[:n] = q_mag
    if write_addr is not None:
        wk[slots, write_addr] = key_magnitude(dk, ADDRESS_MAGNITUDE)
    else:
        _count_matches(wk, write_match, one)
        k_tap[:n] = key_magnitude(dk, MATCH_MAGNITUDE)
    if read_match is not None and cal.query_dummy is not None:
        wq[dk - 1, one] = 1
        q_tap[dk - 1] = cal.query_dummy
    for i, (b, nb) in enumerate(value_pairs):
        wv[2 * i, b] = cal.value
        wv[2 * i + 1, nb] = cal.value
    for c in pads:
        wv[c, one] = cal.value
    if clear is not None:
        for c in list(range(2 * width)) + list(pads):
            wv[c, clear] -= 2 * cal.value
    K = module.conv_kernel_size
    value_lags = list(value_lags) if value_lags is not None else [0] * width
    if len(value_lags) != width:
        raise Netlist2TFError(f"value_lags names {len(value_lags)} lags for {width} value bits")
    for lag in [write_lag, *value_lags]:
        if not 0 <= lag < K:
            raise Netlist2TFError(f"lag {lag} is outside the conv kernel (0..{K - 1})")
    sources = [(tuple(p), lag) for p, lag in zip(value_pairs, value_lags)]
    if len(set(sources)) != len(sources):
        raise Netlist2TFError(f"value_pairs: two bits read the same channels at the same lag {sources}")

    def tap(lag: int) -> np.ndarray:
        t = np.zeros(K, dtype=f32)
        t[K - 1 - lag] = 1.0                  # out[t] = sum_k w[k] x[t + k - (K - 1)]
        return t

    W, z, conv = module.qkv, module.z, module.conv            # conv: (conv_dim, 1, kernel)
    in_use = [name for name, t in (
        ("in_proj_qkv value rows", W[v_rows]), ("in_proj_z rows", z[h_cols]),
        ("in_proj_b row", module.b[head]), ("in_proj_a row", module.a[head]),
        ("out_proj columns", module.out[:, h_cols]), ("conv taps", conv[v_rows]))
        if t.any()]
    if in_use:
        raise Netlist2TFError(f"value head {head} is not free ({', '.join(in_use)} non-zero); "
                              f"call clear_module first or pick another head")
    q_old, k_old = W[q_rows], W[k_rows]
    held = q_old.any() or k_old.any()
    if held and not (np.array_equal(q_old, wq) and np.array_equal(k_old, wk)):
        raise Netlist2TFError(f"key head {kh} (shared by value head {head}) already holds other "
                              f"addresses; value heads sharing a key head must share the address")
    # another head in use (a z row outside this head's) with another norm weight; the z rows are
    # looked at only when the norm weight differs (after a module's first memory it does not)
    if not (module.norm == f32(w_norm)).all() and (z[:h_cols.start].any() or z[h_cols.stop:].any()):
        raise Netlist2TFError(f"the gated-norm weight (shared by all heads) is not the one of "
                              f"{packing} packing: the module's memories must all use one packing")

    if not held:                            # a shared key head holds these rows already
        W[q_rows] = wq
        W[k_rows] = wk
    W[v_rows] = wv
    conv[q_rows, 0, :] = q_tap[:, None] * tap(0)
    conv[k_rows, 0, :] = k_tap[:, None] * tap(write_lag)
    conv[v_rows, 0, :] = tap(0)                           # pads (from the constant channel): lag 0
    for i, lag in enumerate(value_lags):
        conv[v0 + 2 * i, 0, :] = tap(lag)
        conv[v0 + 2 * i + 1, 0, :] = tap(lag)
    z[h_cols, one] = GATE
    b = module.b
    if write_enable is None:
        b[head, one] = BETA_LOGIT
    else:
        b[head, write_enable] = BETA_LOGIT + BETA_SHUT
        b[head, one] = -BETA_SHUT
    for c in write_select:
        b[head, c] += SELECT_SHUT
    b[head, one] -= SELECT_SHUT * len(write_select)
    for c in read_select:
        z[h_cols, c] += SELECT_SHUT
    z[h_cols, one] -= SELECT_SHUT * len(read_select)
    module.dt_bias[head] = DT_BIAS
    module.A_log[head] = A_LOG
    module.norm[...] = w_norm
    for i, (p, m) in enumerate(out_pairs):
        module.out[p, head * dv + 2 * i] = OUT_SCALE
        module.out[m, head * dv + 2 * i] = -OUT_SCALE
    return MemorySpec(head=head, key_head=kh, slots=n, width=width, packing=packing, read=cal,
                      norm_weight=w_norm, pad_columns=pads)
