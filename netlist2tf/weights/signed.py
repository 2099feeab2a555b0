"""Bits as signs: a pair-layout checkpoint's weights rewritten for one channel per bit (docs/design/compiler.md 1b).

The compiler plans and writes every gadget in pairs (``gadgets.layout``: bit b as the channels
``(b, 1 - b)``, which keeps every decoder RMSNorm an exact identity). Half of those channels carry no
information: on every position, ``b + (1 - b)`` equals the constant channel ``one`` (1 on an active
position, 0 on a merged model's text position, where the pair is (0, 0)). So a pair can be stored as ONE
channel ``s = b - (1 - b)`` (+-1 on an active position, 0 where ``one`` is 0), whose square is 1 like
the pair's ``b**2 + (1 - b)**2``: the same anchors keep ``sum(x**2) == 64 * hidden`` with half the
channels, and the whole model (every matrix that reads or writes the residual stream, the embedding)
shrinks by the ratio. The rewrite is linear and exact:

* a matrix that READS the residual (FFN gate/up, DeltaNet in-projections, attention q/k/v, LM head)
  with weights ``(u, v)`` on a pair reads ``u b + v (1 - b) = (u + v)/2 one + (u - v)/2 s``;
* a matrix that WRITES it (FFN down, DeltaNet out, attention o) adds ``(+d, -d)`` to a pair (every
  gadget does: the pair stays a bit) and so adds ``2 d`` to s; a write that is not balanced like that,
  or that touches the constant, an anchor or a free channel, is refused (it would break the identity);
* the embedding's rows hold ``s = b - (1 - b)``; the anchors are re-chosen for the new hidden size.

Every rewritten weight is checked to be exactly representable in float32 and in bfloat16 (halves of
the compiler's small integers are; a read's constant term ``(u + v)/2`` summed over many pairs may need
more than bfloat16's 8 significant bits: it is then split between ``one`` and an anchor channel, whose
value is a known constant). The models' sums stay sums of few integers and halves. ``unfold_state``
is the inverse (the merge, docs/design/merge.md, works on pairs). Both only move weights: tests check the
folded model against the netlist simulator through the real transformers modules, float32 and bfloat16.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from netlist2tf.common import Netlist2TFError
from netlist2tf.gadgets import ResidualLayout

if TYPE_CHECKING:
    import torch

# Qwen3.5's matrices by how they touch the residual stream (suffixes of the layer's state-dict keys)
READERS = ("mlp.gate_proj.weight", "mlp.up_proj.weight", "linear_attn.in_proj_qkv.weight",
           "linear_attn.in_proj_z.weight", "linear_attn.in_proj_b.weight", "linear_attn.in_proj_a.weight",
           "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight")
WRITERS = ("mlp.down_proj.weight", "linear_attn.out_proj.weight", "self_attn.o_proj.weight")
NORMS = ("input_layernorm.weight", "post_attention_layernorm.weight")
EMBEDDING, LM_HEAD, FINAL_NORM = "model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"


def _role(key: str) -> str | None:
    if key == EMBEDDING:
        return "embedding"
    if key == LM_HEAD:
        return "reader"
    if key == FINAL_NORM:
        return "norm"
    if key.startswith("model.layers."):
        rest = key.split(".", 3)[3]
        if rest in READERS:
            return "reader"
        if rest in WRITERS:
            return "writer"
        if rest in NORMS:
            return "norm"
    return None


def _residual_tensors(state: dict, out: dict, consume: bool = False):
    """(key, role, tensor) of every tensor of ``state`` that touches the residual stream, in float64;
    the others are copied into ``out`` unchanged. ``consume``: take each tensor out of ``state`` as it
    is reached (the others moved, not copied), so that a large model is never held twice."""
    for key in list(state):
        t = state.pop(key) if consume else state[key]
        role = _role(key)
        if role is None:
            out[key] = t if consume else t.clone()
        else:
            yield key, role, t.double()


def _quarters(t: np.ndarray) -> bool:
    """Every entry of the float32 ``t`` a multiple of 1/4 below 2**21 in magnitude: then the sums,
    differences and halves ``fold_arrays`` takes of two entries are exact in float32 (at most 24
    significant bits), and it need not work in float64 (the compiler's weights are such numbers).
    (NaN and the infinities are not.)"""
    if t.dtype != np.float32:
        return False
    if not t.size:
        return True
    if not (-2 ** 21 < float(t.min()) and float(t.max()) < 2 ** 21):
        return False
    q = t * 4
    return bool(np.array_equal(q, np.trunc(q)))


def signed_layout(pairs: ResidualLayout, hidden_size: int | None = None) -> ResidualLayout:
    """The signed layout of ``pairs``'s bits: at ``hidden_size`` (default the smallest standalone size)."""
    n = pairs.n_pairs
    return ResidualLayout.build(hidden_size or ResidualLayout.channels_needed(n, signed=True), n, signed=True)


def _bf16(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to bfloat16 as torch rounds it (to float32 first, then to the nearest bfloat16,
    ties to even; NaN is not expected), as float64."""
    u = np.asarray(x, dtype=np.float64).astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def _exact_array(w: np.ndarray) -> bool:
    """Every entry of the float64 (or float32) ``w`` held exactly in float32 and in bfloat16 (checked on
    the non-zero entries: zero is)."""
    if w.dtype == np.float32:                 # zero's low bits are zero: no need to pick the non-zeros
        return not (w.view(np.uint32) & 0xFFFF).any()
    w = w[w != 0]
    w32 = w.astype(np.float32)
    if w.dtype != np.float32 and not np.array_equal(w32.astype(w.dtype), w):
        return False
    return not (w32.view(np.uint32) & 0xFFFF).any()


def _split_constant(col: np.ndarray, anchor: tuple[int, int] | None):
    """``col`` (the constant channel's weights, float64) as ``c0 + value * c1`` with c0 and c1 exact
    in bfloat16: (c0, c1), c1 None where col is exact already; raises where no split is exact."""
    if _exact_array(col):
        return col, None
    bad = ~(_bf16(col) == col)
    if anchor is None:
        raise Netlist2TFError("a folded read's constant term is not exact in bfloat16 and the layout has no "
                              "anchor to split it over; compile with --bits pairs")
    value = anchor[1]
    c1 = np.zeros_like(col)
    c1[bad] = _bf16(col[bad] / value)
    c0 = col - value * c1
    if not (_exact_array(c0) and _exact_array(c1)):
        raise Netlist2TFError("a folded read's constant term is not exact in bfloat16, even split over an "
                              "anchor; compile with --bits pairs")
    return c0, c1


FOLD_THREADS = min(4, os.cpu_count() or 1)     # tensors folded at once


def fold_state(state: dict, pairs: ResidualLayout, signed: ResidualLayout, consume: bool = False) -> dict:
    """``fold_arrays`` of a state dict of torch tensors (float32): a new one of torch tensors."""
    import torch

    arrays = {k: t.detach().float().numpy() for k, t in state.items()}
    if consume:
        state.clear()
    return {k: torch.from_numpy(a) for k, a in fold_arrays(arrays, pairs, signed, consume=True).items()}


def fold_arrays(state: dict, pairs: ResidualLayout, signed: ResidualLayout, consume: bool = False) -> dict:
    """``state`` (a pair-layout model's state dict of float32 numpy arrays) for the signed layout
    ``signed`` (same bits): a new state dict, float32. Raises Netlist2TFError where a weight breaks the
    pair discipline. ``consume``: empty ``state`` as it goes (its arrays freed once folded, when nothing
    else holds them)."""
    if pairs.signed or not signed.signed or pairs.n_pairs != signed.n_pairs:
        raise AssertionError("fold_state maps a pair layout onto a signed layout of the same bits")
    n, Dp, Ds = pairs.n_pairs, pairs.hidden_size, signed.hidden_size
    hi = np.arange(n) * 2 + pairs.first_pair
    lo = hi + 1
    # the pairs' b and 1 - b channels and the signed bits as slices (views: no gathered copies of the large matrices)
    hi_s = slice(pairs.first_pair, pairs.first_pair + 2 * n, 2)
    lo_s = slice(pairs.first_pair + 1, pairs.first_pair + 2 * n, 2)
    bits_s = slice(signed.first_pair, signed.first_pair + n)
    other = np.ones(Dp, dtype=bool)                     # channels that must be untouched: anchors, free
    other[pairs.one] = False
    other[hi] = False
    other[lo] = False
    # the anchor a read's constant may be split over: the largest (every anchor row is fixed)
    split = max(signed.anchors, key=lambda a: a[1]) if signed.anchors else None

    def fold_one(key, t):
        role = _role(key)
        if role is None:
            return t if consume else t.copy()
        if isinstance(t, Entries):
            sparse, one_column = (t.flat, t.values), t.column(pairs.one)
        elif role in ("reader", "writer"):
            sparse, one_column = _nonzero(t), t[:, pairs.one] if role == "reader" else None
        else:
            sparse = None
        if sparse is not None:
            folded = (_fold_reader if role == "reader" else _fold_writer)(key, t.shape, *sparse, pairs, signed,
                                                                          other, split, one_column)
            if folded is not None:
                return folded
        if isinstance(t, Entries):
            t = t.dense()
        w = t if _quarters(t) else t.astype(np.float64)     # float32 where exact, else float64
        dt = w.dtype
        if role == "norm":
            if not (w == w[0]).all():
                raise Netlist2TFError(f"{key}: the decoder norm's weights differ between channels")
            new = np.full((Ds,), float(w[0]), dtype=np.float32)
        elif role == "reader":
            if w[:, other].any():
                raise Netlist2TFError(f"{key} reads an anchor or a free channel; the signed layout cannot hold it")
            new = np.zeros((w.shape[0], Ds), dtype=dt)
            u, v = w[:, hi_s], w[:, lo_s]
            bits = new[:, bits_s]
            np.subtract(u, v, out=bits)
            bits *= 0.5                                 # halves: exact (no weight is that small)
            c0, c1 = _split_constant(w[:, pairs.one].astype(np.float64) + (u.sum(axis=1, dtype=np.float64)
                                                                           + v.sum(axis=1, dtype=np.float64)) / 2,
                                     split)
            new[:, signed.one] = c0
            if c1 is not None:
                new[:, split[0]] = c1
        elif role == "writer":
            if w[pairs.one].any() or w[other].any():
                raise Netlist2TFError(f"{key} writes the constant, an anchor or a free channel")
            if (w[hi_s] + w[lo_s]).any():
                raise Netlist2TFError(f"{key} writes a pair unevenly (b and 1 - b must change by opposite "
                                      f"amounts); the signed layout cannot hold it")
            new = np.zeros((Ds, w.shape[1]), dtype=dt)
            np.subtract(w[hi_s], w[lo_s], out=new[bits_s])
        else:                                           # the embedding: residual rows
            one = w[:, pairs.one]
            if not np.array_equal(w[:, hi_s] + w[:, lo_s], np.broadcast_to(one[:, None], (w.shape[0], n))):
                raise Netlist2TFError(f"{key}: a token's pair does not sum to its constant channel")
            anchor = dict(pairs.anchors)
            free = [c for c in np.flatnonzero(other).tolist() if c not in anchor]
            if w[:, free].any() or not all(np.array_equal(w[:, c].astype(np.float64), a * one.astype(np.float64))
                                           for c, a in pairs.anchors):
                raise Netlist2TFError(f"{key}: a token's anchors or free channels are not the layout's")
            new = np.zeros((w.shape[0], Ds), dtype=dt)   # exact in float32 where w's entries are quarters
            new[:, signed.one] = one
            np.subtract(w[:, hi_s], w[:, lo_s], out=new[:, bits_s])
            for c, a in signed.anchors:
                new[:, c] = a * one.astype(np.float64)
        if not _exact_array(new):
            raise Netlist2TFError(f"{key}: a folded weight is not exact in bfloat16; compile with --bits pairs")
        return new.astype(np.float32, copy=False)

    # the tensors fold independently, most of the work in numpy (which lets other threads run): a
    # thread per core; results (and the first error) in the state's order
    out, pending = {}, []
    with ThreadPoolExecutor(FOLD_THREADS) as pool:
        for key in list(state):
            pending.append((key, pool.submit(fold_one, key, state.pop(key) if consume else state[key])))
        try:
            for key, job in pending:
                out[key] = job.result()
        except BaseException:
            for _, job in pending:
                job.cancel()
            raise
    return out


def _granularity(v: np.ndarray) -> float:
    """The largest power of two that divides every non-zero entry of the float64 ``v`` (1.0 when there is
    none)."""
    v = np.abs(v[v != 0])
    if not v.size:
        return 1.0
    mant, exp = np.frexp(v)                         # v = mant * 2**exp, mant in [0.5, 1): 53 bits
    ints = (mant * 2.0 ** 53).astype(np.int64)
    low = np.log2((ints & -ints).astype(np.float64)).astype(np.int64)      # the lowest set bit
    return 2.0 ** int((exp - 53 + low).min())


def _sums_exact(groups: np.ndarray, v: np.ndarray, significand: int) -> bool:
    """Whether every partial sum of the float64 values ``v`` within each group (``groups[i]``: value
    i's) is exact in a float of ``significand`` bits (24: float32, 53: float64), in any order: every
    value is a multiple of ``_granularity(v)``, so it is while each group's absolute sum stays below
    ``2**significand`` such units."""
    return not v.size or bool(np.bincount(groups, weights=np.abs(v)).max() < 2.0 ** significand * _granularity(v))


class Entries:
    """A matrix given by its non-zero entries (``flat``: sorted flat indices, ``values``: float32),
    for the fold: the compiler's FFN projections are written so, never held dense in the pair layout.
    ``of_terms`` sums the terms named at one entry as ``np.add.at`` into a float32 matrix would."""

    def __init__(self, shape, flat: np.ndarray, values: np.ndarray):
        self.shape, self.flat, self.values = tuple(shape), flat, values

    @classmethod
    def of_terms(cls, shape, rows, cols, values):
        """The matrix of ``shape`` whose entry (r, c) is the sum of the ``values`` (each held in float32)
        at (r, c); None where a float32 accumulation might round (``_sums_exact``; then write it
        dense)."""
        flat = np.asarray(rows, dtype=np.int64) * shape[1] + np.asarray(cols, dtype=np.int64)
        v64 = np.asarray(values, dtype=np.float64)
        if not v64.size:
            return cls(shape, flat, v64.astype(np.float32))
        if not (np.isfinite(v64).all() and np.array_equal(v64.astype(np.float32).astype(np.float64), v64)):
            return None
        cell, where = np.unique(flat, return_inverse=True)
        if not _sums_exact(where, v64, 24):
            return None
        sums = np.bincount(where, weights=v64)
        keep = sums != 0
        return cls(shape, cell[keep], sums[keep].astype(np.float32))

    def column(self, c: int) -> np.ndarray:
        """Column ``c``, dense."""
        out = np.zeros(self.shape[0], dtype=np.float32)
        rows, cols = np.divmod(self.flat, self.shape[1])
        out[rows[cols == c]] = self.values[cols == c]
        return out

    def dense(self) -> np.ndarray:
        out = np.zeros(self.shape, dtype=np.float32)
        out.reshape(-1)[self.flat] = self.values
        return out


def _nonzero(t: np.ndarray):
    """(flat indices, values) of the float32 ``t``'s non-zero entries, all finite; None otherwise (then
    the dense fold, in float64, decides). A compiled matrix is mostly zeros: the fold of a reader or
    a writer from its non-zero entries alone is the dense fold's, byte for byte, where its arithmetic
    is exact in any order (``_fold_reader`` checks that, ``_fold_writer`` needs no sum)."""
    if t.dtype != np.float32:
        return None
    idx = np.flatnonzero(t)
    vals = t.reshape(-1)[idx]
    return (idx, vals) if np.isfinite(vals).all() else None


def _pair_bits(channels: np.ndarray, pairs: ResidualLayout, signed: ResidualLayout):
    """(signed bit channel, is the pair's b channel) of pair-layout ``channels`` (each a pair's)."""
    off = channels - pairs.first_pair
    return (off >> 1) + signed.first_pair, (off & 1) == 0


def _fold_reader(key, shape, idx, vals, pairs, signed, other, split, one_column):
    """``fold_arrays``'s reader rule from the non-zero entries ``(idx, vals)`` of the float32 matrix
    (rows read the residual's ``shape[1]`` pair-layout channels; ``one_column``: its column on the
    constant channel, dense): bit columns ``(u - v)/2``,
    the constant ``one + (u + v)/2`` per row (split over an anchor where bfloat16 needs it). None
    where a row's sum might round in float64 (``_sums_exact``; then the dense fold's summation order
    would decide)."""
    rows, cols = np.divmod(idx, shape[1])
    if other[cols].any():
        raise Netlist2TFError(f"{key} reads an anchor or a free channel; the signed layout cannot hold it")
    v64 = vals.astype(np.float64)
    if not _sums_exact(rows, v64, 53):
        return None
    on_pair = cols != pairs.one
    r, v = rows[on_pair], v64[on_pair]
    bit, is_b = _pair_bits(cols[on_pair], pairs, signed)
    # a bit read from both of its pair's channels gets both halves: the entries summed per (row, bit)
    cell, where = np.unique(r * signed.hidden_size + bit, return_inverse=True)
    value = np.bincount(where, weights=np.where(is_b, v, -v) * 0.5, minlength=cell.size)
    c0, c1 = _split_constant(one_column.astype(np.float64)
                             + np.bincount(r, weights=v, minlength=shape[0]) / 2, split)
    if not (_exact_array(value) and _exact_array(c0) and (c1 is None or _exact_array(c1))):
        raise Netlist2TFError(f"{key}: a folded weight is not exact in bfloat16; compile with --bits pairs")
    new = np.zeros((shape[0], signed.hidden_size), dtype=np.float32)
    new.reshape(-1)[cell] = value
    new[:, signed.one] = c0
    if c1 is not None:
        new[:, split[0]] = c1
    return new


def _fold_writer(key, shape, idx, vals, pairs, signed, other, split, one_column):
    """``fold_arrays``'s writer rule from the non-zero entries ``(idx, vals)`` of the float32 matrix
    (rows write the residual's pair-layout channels): a pair written ``(+d, -d)`` becomes ``2 d`` on
    its bit; anything else is refused. None where a doubled entry could overflow float32 (the
    dense fold decides)."""
    if vals.size and float(np.abs(vals).max()) >= 2.0 ** 126:
        return None
    rows, cols = np.divmod(idx, shape[1])
    if (rows == pairs.one).any() or other[rows].any():
        raise Netlist2TFError(f"{key} writes the constant, an anchor or a free channel")
    bit, is_b = _pair_bits(rows, pairs, signed)
    new = np.zeros((signed.hidden_size, shape[1]), dtype=np.float32)
    new[bit[is_b], cols[is_b]] = vals[is_b]
    lo_bit, lo_col, lo_val = bit[~is_b], cols[~is_b], vals[~is_b]
    if int(is_b.sum()) != lo_val.size or not np.array_equal(new[lo_bit, lo_col], -lo_val):
        raise Netlist2TFError(f"{key} writes a pair unevenly (b and 1 - b must change by opposite "
                              f"amounts); the signed layout cannot hold it")
    new[lo_bit, lo_col] -= lo_val
    if not _exact_array(new[bit, cols]):
        raise Netlist2TFError(f"{key}: a folded weight is not exact in bfloat16; compile with --bits pairs")
    return new


def _exact(w: torch.Tensor) -> bool:
    """Every entry of the float64 (or float32) tensor ``w`` held exactly in float32 and in bfloat16."""
    import torch

    if w.dtype == torch.float32:
        return torch.equal(w.to(torch.bfloat16).to(torch.float32), w)
    return (torch.equal(w.to(torch.float32).double(), w)
            and torch.equal(w.to(torch.bfloat16).double(), w))


def unfold_state(state: dict, signed: ResidualLayout, pairs: ResidualLayout) -> dict:
    """The inverse of ``fold_state``: a signed-layout state dict for the pair layout ``pairs`` (same
    bits), float32. A read of s becomes a read of b (twice the weight) less the constant; a read of an
    anchor (a split constant) goes back to ``one``."""
    import torch

    if pairs.signed or not signed.signed or pairs.n_pairs != signed.n_pairs:
        raise AssertionError("unfold_state maps a signed layout onto a pair layout of the same bits")
    n, Dp = pairs.n_pairs, pairs.hidden_size
    hi = torch.arange(n) * 2 + pairs.first_pair
    lo = hi + 1
    bits = torch.arange(n) + signed.first_pair
    s_anchor = dict(signed.anchors)
    rest = torch.ones(signed.hidden_size, dtype=torch.bool)
    rest[signed.one] = False
    rest[bits] = False
    out = {}
    for key, role, w in _residual_tensors(state, out):
        if role == "norm":
            out[key] = torch.full((Dp,), float(w[0]), dtype=torch.float32)
            continue
        if role == "reader":
            extra = [c for c in torch.nonzero(w[:, rest].any(dim=0)).flatten().tolist()]
            cols = torch.nonzero(rest).flatten()
            const = w[:, signed.one].clone()
            for j in extra:
                c = int(cols[j])
                if c not in s_anchor:
                    raise Netlist2TFError(f"{key} reads a free channel of the signed layout")
                const += s_anchor[c] * w[:, c]
            new = torch.zeros(w.shape[0], Dp, dtype=torch.float64)
            s = w[:, bits]
            new[:, hi], new[:, pairs.one] = 2 * s, const - s.sum(dim=1)
            if not _exact(new):                         # the symmetric form: +s on b, -s on 1 - b
                new[:, hi], new[:, lo], new[:, pairs.one] = s, -s, const
        elif role == "writer":
            if bool(w[rest].any()) or bool(w[signed.one].any()):
                raise Netlist2TFError(f"{key} writes the constant, an anchor or a free channel")
            new = torch.zeros(Dp, w.shape[1], dtype=torch.float64)
            new[hi], new[lo] = w[bits] / 2, -w[bits] / 2
        else:
            one = w[:, signed.one]
            new = torch.zeros(w.shape[0], Dp, dtype=torch.float64)
            new[:, pairs.one] = one
            new[:, hi], new[:, lo] = (one[:, None] + w[:, bits]) / 2, (one[:, None] - w[:, bits]) / 2
            for c, a in pairs.anchors:
                new[:, c] = a * one
        if not _exact(new):
            raise Netlist2TFError(f"{key}: an unfolded weight is not exact in bfloat16")
        out[key] = new.to(torch.float32)
    return out


def bits_layout_of(emb: torch.Tensor) -> ResidualLayout:
    """The layout of a compiled checkpoint, read back from its embedding (constant channel 0, then the
    bits as pairs (0/1 values) or signs (+-1), then anchors: the first of them is the first channel every
    token holds at the same value >= 2; the last may be 1), checked against ``ResidualLayout.build``."""
    import torch

    D = emb.shape[1]
    if not bool((emb[:, 0] == 1).all()):
        raise Netlist2TFError("its embedding has no constant channel 0: it was not compiled by netlist2tf")
    same = (emb == emb[0]).all(dim=0) & (emb[0] >= 2)
    chans = torch.nonzero(same).flatten().tolist()
    if not chans or chans != list(range(chans[0], chans[-1] + 1)):
        raise Netlist2TFError("its embedding has no anchor channels after the bits: it was not "
                              "compiled by netlist2tf")
    signed = bool((emb[:, 1:chans[0]] < 0).any())
    n = chans[0] - 1 if signed else (chans[0] - 1) // 2
    if not signed and chans[0] % 2 == 0:
        raise Netlist2TFError("its embedding's bit pairs do not end before the anchors: it was not "
                              "compiled by netlist2tf")
    layout = ResidualLayout.build(D, n, signed=signed)
    if layout.anchors != tuple((c, int(emb[0, c])) for c, _ in layout.anchors) or not all(
            bool((emb[:, c] == v).all()) for c, v in layout.anchors):
        raise Netlist2TFError("its anchors are not the ones netlist2tf chooses for its hidden size")
    return layout
