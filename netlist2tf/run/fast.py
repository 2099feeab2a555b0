"""A fast exact executor for compiled checkpoints: the same weights, computed sparsely.

``FastModel(folder)`` reads a compiled checkpoint's ``config.json`` and ``model.safetensors`` (or shards; nothing
else: no netlist, no simulator) and runs the Qwen3.5 forward one position at a time, as stock
``transformers`` runs it with its cache (the recurrent DeltaNet path), but without multiplying zeros:

* every weight matrix is kept as its non-zero entries (CSR, float64) and applied as a sparse product;
  FFN neurons whose gate row, up row or down column is all zero are dropped (their product is 0);
* full-attention layers whose output projection is all zero are skipped: their output is exactly zero
  for any finite input (a sum of products with 0), so they need no KV cache either: memory does not
  grow with the trace;
* DeltaNet layers: the in-projections are sparse products, the short convolution, the L2 norms,
  beta, the decay and the gated norm are the stock element-wise operations on the same values, and the
  delta rule touches only the state rows its key and query select (one per head: the compiler's keys
  and queries are one-hot or zero), with the stock dense expression as the fallback for any head whose
  key or query has several non-zero entries, or any decay that is not exactly 1;
* the LM head is a sparse product too, and the greedy token is ``argmax`` over it.

Why the values equal the stock forward's (docs/design/fast.md has the argument and the checks): a dense
matrix product and a sparse one differ only in the order of their additions and in the products with
zero they leave out. Products of float32 (or bfloat16) values are exact in float64, and the compiled
models' sums are sums of few integers and halves (exact in float64 in any order), so the float64
accumulation gives the exact sum; where the stock float32 product is exact too (which the compiler
engineers: every pre-activation is an integer well inside float32's and bfloat16's exact range, or a
large negative that silu sends to zero), the two round to the same value. Left-out products with zero
can only change the sign of a zero. Every other operation is the stock one on the same values in the
same dtype. ``tests/run/test_fast.py`` checks this claim instead of trusting it: the hidden state after
every layer and the greedy token at every position equal stock transformers', float32 and bfloat16.

The executor refuses (``FastUnsupported``, a Netlist2TFError naming the reason) a checkpoint outside
its assumptions: not a text Qwen3.5 model, a full-attention layer with a non-zero output projection
(a merged checkpoint's base layers, for example), a non-SiLU activation, weights it cannot read.
Callers then fall back to stock transformers.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from netlist2tf.run.executor import _OPS, FastInexact, FastUnsupported, Image, Kernel, library

_KERNEL = None          # the compiled spmv (ctypes), False where it cannot be built


def _kernel():
    global _KERNEL
    if _KERNEL is None:
        import ctypes
        lib = library("spmv")
        if lib is None:
            _KERNEL = False
        else:
            _KERNEL = lib.n2t_spmv
            _KERNEL.restype = None
            _KERNEL.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 5
    return _KERNEL or None


class _Sparse:
    """A weight matrix as its non-zero entries (CSR: int64 indices, float32 values: the model's
    weights widened exactly)."""

    def __init__(self, w: torch.Tensor):
        import warnings
        with warnings.catch_warnings():          # "Sparse CSR tensor support is in beta state"
            warnings.simplefilter("ignore")
            csr = w.detach().to(torch.float32).to_sparse_csr()
        self.shape = tuple(w.shape)
        self.indptr = csr.crow_indices().contiguous()
        self.col = csr.col_indices().contiguous()
        self.val = csr.values().contiguous()
        self.nnz = int(self.val.numel())
        self.csr64 = None

    def __call__(self, x: torch.Tensor, dtype) -> torch.Tensor:
        """``self @ x`` for x of shape (B, N): the sum in float64 (exact for the compiled models'
        values), then rounded to ``dtype`` as a stock linear layer's output is."""
        k = _kernel()
        B = x.shape[0]
        if k is not None:
            xf = x.to(torch.float32).contiguous()
            y = torch.empty(B, self.shape[0], dtype=torch.float32)
            k(self.shape[0], B, self.shape[1], self.indptr.data_ptr(), self.col.data_ptr(),
              self.val.data_ptr(), xf.data_ptr(), y.data_ptr())
            return y.to(dtype)
        if self.csr64 is None:
            self.csr64 = torch.sparse_csr_tensor(self.indptr, self.col, self.val.double(), self.shape)
        return (self.csr64 @ x.to(torch.float64).T).T.to(torch.float32).to(dtype)


def _csr(w: torch.Tensor) -> "_Sparse":
    return _Sparse(w)


def _mv(m: "_Sparse", x: torch.Tensor, dtype) -> torch.Tensor:
    return m(x, dtype)


@dataclass
class _Norm:
    scale: torch.Tensor       # 1 + weight, float32
    eps: float

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        """Qwen3_5RMSNorm: the stock operations."""
        x = h.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x * self.scale).type_as(h)


class _MLP:
    def __init__(self, gate, up, down, dtype):
        keep = ((gate != 0).any(1) & (up != 0).any(1) & (down != 0).any(0)).nonzero().flatten()
        self.neurons = int(keep.numel())
        self.gate_up = _csr(torch.cat([gate[keep], up[keep]]))
        self.down = _csr(down[:, keep])
        self.dtype = dtype

    def __call__(self, x):
        gu = _mv(self.gate_up, x, self.dtype)
        g, u = gu[:, :self.neurons], gu[:, self.neurons:]
        return _mv(self.down, F.silu(g) * u, self.dtype)


class _SilentAttention:
    """A full-attention layer with a non-zero output projection (a merged model's base layer), run
    where it is exactly silent: if ``v_proj(x)`` is 0 at every position so far, every attention
    output is a weighted sum of zero values (finite softmax weights), gated and projected: exactly 0.
    A non-zero value stops the executor (FastInexact: the caller runs stock transformers)."""

    def __init__(self, index, v, dtype):
        self.index, self.v, self.dtype = index, v, dtype

    def state(self, batch):
        return None

    def __call__(self, x, st):
        if bool(_mv(self.v, x, self.dtype).any()):
            raise FastInexact(f"layer {self.index}: {_OPS[11]}; run this checkpoint with --executor stock")
        return None


class _Lookup:
    """A full-attention layer whose softmax is one-hot at every position: the compiler's lookups
    (gadgets/rom_lookup.py). Taken only where on every rotary pair of every head only the queries or
    only the keys are non-zero (``fits``), so RoPE changes no score and is not applied. Per q head the
    scores against every distinct key seen so far (the state keeps one entry per distinct key: the
    value first offered with it, how many positions offered it and whether their values differed; it
    grows with the distinct keys, a lookup's addresses, not with the trace); the winner
    must lead every other entry by 104 after any rounding of the scores to the dtype (exp(-104) is 0.0
    in float32) and be offered once, or every entry within that lead must carry 0; the output gate
    must saturate. Anything else stops the executor (FastInexact: stock transformers runs it)."""

    def __init__(self, index, get, prefix, cfg, dtype):
        self.index, self.dtype, self.eps = index, dtype, cfg["rms_norm_eps"]
        self.nh, self.nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.hd = cfg.get("head_dim") or cfg["hidden_size"] // self.nh
        self.q, self.k, self.v, self.o = (_csr(get(prefix + f"{n}_proj.weight")) for n in "qkvo")
        # the dims whose o_proj column has a weight (the others add nothing, whatever they hold)
        self.used = (get(prefix + "o_proj.weight") != 0).any(0)
        self.qn_w = 1.0 + get(prefix + "q_norm.weight").float()
        self.kn_w = 1.0 + get(prefix + "k_norm.weight").float()
        self.scaling = self.hd ** -0.5

    @staticmethod
    def fits(get, prefix, cfg) -> bool:
        from netlist2tf.gadgets import one_sided
        nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
        rope = cfg.get("rope_parameters") or {}
        rotary = int(hd * rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
        q, k = get(prefix + "q_proj.weight"), get(prefix + "k_proj.weight")
        if not (bool(q.any()) and bool(k.any())):
            return False                      # no keys or no queries: not a lookup (checked silent instead)
        return one_sided(q, k, nh, nkv, hd, rotary)

    def state(self, batch):
        return [{} for _ in range(batch)]

    def _norm(self, t, w):
        x = t.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x * w).to(self.dtype)

    def __call__(self, x, st):
        hd, group = self.hd, self.nh // self.nkv
        q, k, v = (_mv(m, x, self.dtype) for m in (self.q, self.k, self.v))
        out = torch.zeros(x.shape[0], self.nh * hd, dtype=self.dtype)
        for b, entries in enumerate(st):
            for g in range(self.nkv):
                kn, vv = self._norm(k[b, g * hd:(g + 1) * hd], self.kn_w), v[b, g * hd:(g + 1) * hd]
                key = (g, kn.float().numpy().tobytes())
                if key in entries:              # one entry per distinct key: its first value, count, mixed
                    first, n, mixed = entries[key][1:]
                    entries[key] = (kn.double(), first, n + 1, mixed or not torch.equal(first, vv))
                else:
                    entries[key] = (kn.double(), vv, 1, False)
            for h in range(self.nh):
                g = h // group
                gate = q[b, h * 2 * hd + hd:(h + 1) * 2 * hd].float()
                used = self.used[h * hd:(h + 1) * hd]
                if not bool((used & (gate > -90)).any()):
                    continue
                qn = self._norm(q[b, h * 2 * hd:h * 2 * hd + hd], self.qn_w).double()
                mine = [(float(qn @ kn) * self.scaling, vv, n, mx) for (gg, _), (kn, vv, n, mx) in entries.items()
                        if gg == g]
                best = max(sc for sc, _, _, _ in mine)
                near = [(vv, n, mx) for sc, vv, n, mx in mine
                        if best - sc < 104 + 2 ** -8 * (abs(best) + abs(sc)) + 1e-9 * abs(best)]
                zero = all(not bool(vv.any()) and not mx for vv, _, mx in near)
                if not zero and (len(near) > 1 or near[0][1] > 1 or near[0][2]):
                    raise FastInexact(f"layer {self.index}: attention head {h} is not one-hot here (best score "
                                      f"{best:g}); run this checkpoint with --executor stock")
                value = torch.zeros(hd, dtype=self.dtype) if zero else near[0][0] * used
                # a value of 0 times any finite gate is 0; elsewhere the gate must saturate
                if bool(((value != 0) & (gate > -90) & (gate < 18)).any()) or not bool(gate.isfinite().all()):
                    raise FastInexact(f"layer {self.index}: an output gate of head {h} is not saturated; run "
                                      f"this checkpoint with --executor stock")
                out[b, h * hd:(h + 1) * hd] = value * (gate >= 18).to(self.dtype)
        return _mv(self.o, out, self.dtype)


class _DeltaNet:
    """One Qwen3_5GatedDeltaNet layer, recurrent (one position per call)."""

    def __init__(self, get, prefix, cfg, dtype):
        self.dtype = dtype
        self.nk, self.nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
        self.dk, self.dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
        self.key_dim, self.value_dim = self.nk * self.dk, self.nv * self.dv
        self.eps = cfg["rms_norm_eps"]
        self.qkv = _csr(get(prefix + "in_proj_qkv.weight"))
        self.z = _csr(get(prefix + "in_proj_z.weight"))
        self.ab = _csr(torch.cat([get(prefix + "in_proj_a.weight"), get(prefix + "in_proj_b.weight")]))
        self.conv_w = get(prefix + "conv1d.weight").squeeze(1)         # (C, K)
        self.conv_w64 = self.conv_w.double()
        self.conv_b = get(prefix + "conv1d.bias", missing_ok=True)
        self.A_log, self.dt_bias = get(prefix + "A_log"), get(prefix + "dt_bias")
        self.norm_w = get(prefix + "norm.weight")
        self.out = _csr(get(prefix + "out_proj.weight"))
        self.K = self.conv_w.shape[1]

    def state(self, batch):
        C = self.conv_w.shape[0]
        return [torch.zeros(batch, C, self.K - 1, dtype=self.dtype),
                torch.zeros(batch, self.nv, self.dk, self.dv, dtype=torch.float32)]

    def __call__(self, x, st):
        B = x.shape[0]
        conv_state, rec = st
        mixed = _mv(self.qkv, x, self.dtype)                            # (B, C)
        z = _mv(self.z, x, self.dtype)
        ab = _mv(self.ab, x, self.dtype)
        a, b = ab[:, :self.nv], ab[:, self.nv:]
        # causal_conv1d_update: the stock operations on (B, C, K)
        full = torch.cat([conv_state, mixed.unsqueeze(-1)], dim=-1).to(self.conv_w.dtype)
        conv_state.copy_(full[:, :, 1:])
        # the depthwise convolution's last output, F.conv1d's sum of K products (+ bias), in float64:
        # exact for the compiled models' taps (0, 1, 128) and values, so the same as conv1d's
        out = (full.double() * self.conv_w64).sum(-1)
        if self.conv_b is not None:
            out = out + self.conv_b.double()
        mixed = F.silu(out.to(self.conv_w.dtype)).to(self.dtype)
        q, k, v = torch.split(mixed, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        q, k = q.reshape(B, self.nk, self.dk), k.reshape(B, self.nk, self.dk)
        v = v.reshape(B, self.nv, self.dv)
        beta = b.sigmoid()
        g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias)
        if self.nk != self.nv:
            q = q.repeat_interleave(self.nv // self.nk, dim=1)
            k = k.repeat_interleave(self.nv // self.nk, dim=1)
        q, k, v, beta, g = (t.to(torch.float32) for t in (q, k, v, beta, g))
        q = q * torch.rsqrt((q * q).sum(dim=-1, keepdim=True) + 1e-6)       # l2norm
        k = k * torch.rsqrt((k * k).sum(dim=-1, keepdim=True) + 1e-6)
        q = q / (q.shape[-1] ** 0.5)
        core = self._rule(q, k, v, g, beta, rec)                          # (B, nv, dv) float32
        core = core.to(self.dtype).reshape(-1, self.dv)
        zz = z.reshape(-1, self.dv)
        # Qwen3_5RMSNormGated: the stock operations
        h = core.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        h = self.norm_w * h.to(self.dtype)
        h = (h * F.silu(zz.to(torch.float32))).to(self.dtype)
        return _mv(self.out, h.reshape(B, -1), self.dtype)

    @staticmethod
    def _rule(q, k, v, g, beta, rec):
        """The gated delta rule on the state rows that one-hot keys and queries select (exactly the
        stock recurrent rule's values: every other row's term is a product with 0); the stock dense
        expression where a key or query has several non-zero entries or a decay is not 1."""
        kn, qn = (k != 0).sum(-1), (q != 0).sum(-1)
        decay = g.exp()
        if bool((kn > 1).any() or (qn > 1).any() or (decay != 1).any()):
            rec.mul_(decay[..., None, None])
            kv_mem = (rec * k.unsqueeze(-1)).sum(dim=-2)
            delta = (v - kv_mem) * beta.unsqueeze(-1)
            rec.add_(k.unsqueeze(-1) * delta.unsqueeze(-2))
            return (rec * q.unsqueeze(-1)).sum(dim=-2)
        B, H = k.shape[:2]
        bi = torch.arange(B)[:, None].expand(B, H)
        hi = torch.arange(H)[None, :].expand(B, H)
        ki = k.abs().argmax(-1)
        kval = k.gather(-1, ki[..., None])                      # (B, H, 1): 0 where the key is zero
        rows = rec[bi, hi, ki]                                  # (B, H, dv)
        delta = (v - rows * kval) * beta.unsqueeze(-1)
        rec[bi, hi, ki] = rows + kval * delta
        qi = q.abs().argmax(-1)
        return rec[bi, hi, qi] * q.gather(-1, qi[..., None])


class FastModel:
    """A compiled checkpoint run sparsely (module docstring). ``step(tokens, state)`` feeds one token
    per batch row and returns the logits of the next position; ``generate`` runs greedily."""

    def __init__(self, folder, dtype=None, kernel: str = "auto", head_tree: bool = True, embedding: str = "auto"):
        """``kernel``: "c" (netlist2tf/run/csrc/step.c: the whole position in one call, incremental),
        "torch" (the same operations as torch calls, one per operation, every position from scratch:
        the reference), "auto": c where a C compiler exists. ``head_tree``: the C kernel keeps the LM
        head as a max tree where that is provably exact (False: by rows, the general path).
        ``embedding``: how the C kernel holds the embedding: "dense", "rows" (its non-zero entries) or
        "auto" (rows where at most half the entries are non-zero)."""
        from netlist2tf.checkpoint import WeightFiles, checkpoint_name

        folder = Path(folder)
        try:
            cfg = json.loads((folder / "config.json").read_text())
        except (OSError, ValueError) as exc:
            raise FastUnsupported(f"{folder}: cannot read config.json ({exc})")
        multimodal = cfg.get("model_type") == "qwen3_5" and isinstance(cfg.get("text_config"), dict)
        if multimodal:                  # the published layout: its text model (the trace never sees images)
            cfg = dict(cfg["text_config"], tie_word_embeddings=cfg.get("tie_word_embeddings", False))
        elif cfg.get("model_type") != "qwen3_5_text":
            raise FastUnsupported(f"{folder}: the fast executor runs Qwen3.5 checkpoints (model_type "
                                  f"qwen3_5_text or qwen3_5), not {cfg.get('model_type')!r}")
        if cfg.get("hidden_act", "silu") != "silu":
            raise FastUnsupported(f"{folder}: hidden_act {cfg.get('hidden_act')!r}; the executor implements silu")
        self.folder, self.config = folder, cfg
        self.dtype = dtype or getattr(torch, cfg.get("dtype") or cfg.get("torch_dtype") or "float32")
        weights = WeightFiles(folder, "checkpoint", FastUnsupported)

        def get(key, missing_ok=False):
            key = checkpoint_name(key, multimodal)
            if key not in weights:
                if missing_ok:
                    return None
                raise FastUnsupported(f"{folder}: weight {key} is missing")
            return weights.get(key).to(self.dtype)     # as from_pretrained(dtype=...) loads it

        eps = cfg["rms_norm_eps"]
        self.embed = get("model.embed_tokens.weight")
        self.layers = []
        self.skipped = []
        for i, kind in enumerate(cfg["layer_types"]):
            p = f"model.layers.{i}."
            norms = (_Norm(1.0 + get(p + "input_layernorm.weight").float(), eps),
                     _Norm(1.0 + get(p + "post_attention_layernorm.weight").float(), eps))
            if kind == "linear_attention":
                mixer = _DeltaNet(get, p + "linear_attn.", cfg, self.dtype)
            elif kind == "full_attention":
                if bool(get(p + "self_attn.o_proj.weight").any()):
                    if _Lookup.fits(get, p + "self_attn.", cfg):
                        # the compiler's lookups (ROMs, the CPU's fetch): a softmax one-hot at every position
                        mixer = _Lookup(i, get, p + "self_attn.", cfg, self.dtype)
                    else:
                        # a merged model's base layer: exactly zero while its values are (a trace)
                        mixer = _SilentAttention(i, _csr(get(p + "self_attn.v_proj.weight")), self.dtype)
                else:
                    mixer = None                      # silent: its output is exactly zero
                    self.skipped.append(i)
            else:
                raise FastUnsupported(f"{folder}: layer {i} is of unknown type {kind!r}")
            mlp = _MLP(get(p + "mlp.gate_proj.weight"), get(p + "mlp.up_proj.weight"),
                       get(p + "mlp.down_proj.weight"), self.dtype)
            self.layers.append((norms, mixer, mlp))
        self.final_norm = _Norm(1.0 + get("model.norm.weight").float(), eps)
        head = get("lm_head.weight", missing_ok=True)
        if head is None:
            if not cfg.get("tie_word_embeddings"):
                raise FastUnsupported(f"{folder}: lm_head.weight is missing")
            head = self.embed
        self.head = _csr(head)
        self.vocab_size = int(head.shape[0])
        self.nonzero = sum(m.nnz for m in self._matrices())
        self.kernel = None
        if kernel in ("auto", "c"):
            lib = library("step")
            if lib is None and kernel == "c":
                raise FastUnsupported("the fast executor's C kernel cannot be built here (no C compiler)")
            if lib is not None:
                self.kernel = Kernel(image_of(self, head_tree, embedding), lib, str(folder))

    def _matrices(self):
        yield self.head
        for _, mixer, mlp in self.layers:
            yield mlp.gate_up
            yield mlp.down
            if isinstance(mixer, _DeltaNet):
                yield from (mixer.qkv, mixer.z, mixer.ab, mixer.out)
            elif isinstance(mixer, _Lookup):
                yield from (mixer.q, mixer.k, mixer.v, mixer.o)
            elif mixer is not None:
                yield mixer.v

    def new_state(self, batch: int = 1):
        """The per-row state: each DeltaNet layer's convolution window and delta-rule state (constant
        size: nothing grows with the trace)."""
        if self.kernel is not None:
            return self.kernel.state(batch)
        return [m.state(batch) if isinstance(m, (_DeltaNet, _Lookup)) else None for _, m, _ in self.layers]

    def state_bytes(self, state) -> int:
        """The state's size in bytes (it does not grow with the trace)."""
        if self.kernel is not None:
            return state.nbytes
        return sum(t.numel() * t.element_size() for layer in state if layer for t in layer)

    @torch.no_grad()
    def step(self, tokens, state, hidden=None):
        """Feed ``tokens`` (one per batch row) and return the logits (B, vocab) of the next position
        in the model's dtype. ``hidden``: a list that receives the hidden state after the embedding and
        after every layer (as ``output_hidden_states`` gives them, the last one normalised)."""
        if self.kernel is not None:
            logits, buf = self.kernel.step(torch.as_tensor(tokens).reshape(-1).tolist(), state, hidden is not None)
            if hidden is not None:
                hidden.extend(torch.from_numpy(buf[:, i]).to(self.dtype) for i in range(buf.shape[1]))
            return torch.from_numpy(logits).to(self.dtype)
        h = self.embed[torch.as_tensor(tokens, dtype=torch.long)]
        if hidden is not None:
            hidden.append(h)
        for ((n1, n2), mixer, mlp), st in zip(self.layers, state):
            if isinstance(mixer, _SilentAttention):
                mixer(n1(h), st)              # checks that it adds exactly zero
            elif mixer is not None:           # DeltaNet or lookups (a skipped attention layer adds exactly zero)
                h = h + mixer(n1(h), st)
            h = h + mlp(n2(h))
            if hidden is not None:
                hidden.append(h)
        h = self.final_norm(h)
        if hidden is not None:
            hidden[-1] = h
        return _mv(self.head, h, self.dtype)


@dataclass
class Comparison:
    positions: int             # batch rows x positions compared
    layers: int                # hidden states compared per position (embedding, every layer)
    mismatches: list           # (position, layer index or "logits") where a value differs


@torch.no_grad()
def compare_with_stock(fast: FastModel, stock, ids: torch.Tensor, limit: int = 50, every: int = 1) -> Comparison:
    """Run ``ids`` (B, T) through the stock model (one forward call, ``output_hidden_states``) and
    through ``fast`` one position at a time, and compare, at every ``every``-th position (and the
    last), the hidden state after the embedding and after every layer (the last one normalised, as
    transformers returns it) and the logits: equal values (``torch.equal``). Returns the first
    ``limit`` mismatches; ``positions`` counts the compared ones (batch rows x positions)."""
    out = stock(input_ids=ids, output_hidden_states=True)
    B, T = ids.shape
    state = fast.new_state(B)
    bad = []
    compared = 0
    for t in range(T):
        if t % every and t != T - 1:
            fast.step(ids[:, t], state)
            continue
        compared += B
        hidden = []
        logits = fast.step(ids[:, t], state, hidden)
        for layer, (mine, theirs) in enumerate(zip(hidden, out.hidden_states)):
            if not torch.equal(mine, theirs[:, t]):
                bad.append((t, layer))
        if not torch.equal(logits, out.logits[:, t]):
            bad.append((t, "logits"))
        if len(bad) >= limit:
            break
    return Comparison(compared, len(out.hidden_states), bad[:limit])


# -- the C kernel (netlist2tf/csrc/step.c): the whole position in one call ---------------------------

def _csc(m: "_Sparse"):
    """``m``'s non-zero entries by columns: (colptr int64, row int32, val float32), rows ascending
    within a column."""
    rows = torch.repeat_interleave(torch.arange(m.shape[0]), m.indptr[1:] - m.indptr[:-1])
    order = torch.argsort(m.col * m.shape[0] + rows, stable=True)
    colptr = torch.zeros(m.shape[1] + 1, dtype=torch.int64)
    colptr[1:] = torch.cumsum(torch.bincount(m.col, minlength=m.shape[1]), 0)
    return colptr.contiguous(), rows[order].to(torch.int32).contiguous(), m.val[order].contiguous()


def _exactness_bound(m: "_Sparse", csc) -> tuple[int, torch.Tensor]:
    """(l1, cwlow) for the kernel's exactness checks (step.c): every row's sum of absolute weights is
    below 2^l1 (with one bit of margin for that sum's own rounding) and every weight of column j a
    multiple of 2^cwlow[j] (int32 per column; 0 for an empty column)."""
    colptr, _, val = csc
    cwlow = torch.zeros(m.shape[1], dtype=torch.int32)
    if m.nnz == 0:
        return -(1 << 20), cwlow
    u = val.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    e, mant = (u >> 23) & 0xFF, u & 0x7FFFFF
    if bool((e == 255).any()):
        raise FastUnsupported("a weight is infinite or NaN; the fast executor cannot prove its sums exact")
    sig = torch.where(e == 0, mant, mant | 0x800000)
    tz = torch.log2((sig & -sig).double()).to(torch.int64)             # trailing zeros (a power of two)
    low = torch.where(e == 0, tz - 149, tz + e - 150)
    cols = torch.repeat_interleave(torch.arange(m.shape[1]), colptr[1:] - colptr[:-1])
    cwlow = torch.full((m.shape[1],), 1 << 20, dtype=torch.int64).scatter_reduce(0, cols, low, "amin")
    cwlow = torch.where(colptr[1:] > colptr[:-1], cwlow, torch.zeros_like(cwlow)).to(torch.int32).contiguous()
    rows = torch.repeat_interleave(torch.arange(m.shape[0]), m.indptr[1:] - m.indptr[:-1])
    l1 = torch.zeros(m.shape[0], dtype=torch.float64).index_add_(0, rows, m.val.abs().double())
    return math.frexp(float(l1.max()))[1] + 1, cwlow


def _head_tree(m: "_Sparse", csc):
    """The LM head's columns as runs for step.c's max tree over S rows (S a power of two >= rows):
    each column's non-zero weights cut into runs of 2^k equal weights on 2^k-aligned rows, each run
    a tree node (root 1, row i's leaf S + i). Returns S and (tptr int64, node int32, weight float32),
    grouped by column."""
    import numpy as np

    colptr, row, val = (t.numpy() for t in csc)
    S = 1
    while S < m.shape[0]:
        S *= 2
    col = np.repeat(np.arange(m.shape[1]), np.diff(colptr))
    start = np.ones(row.size, dtype=bool)            # a run starts where the column, the row sequence
    start[1:] = (col[1:] != col[:-1]) | (row[1:] != row[:-1] + 1) | (val[1:] != val[:-1])   # or the weight breaks
    first = np.flatnonzero(start)
    ends = np.append(first[1:], row.size)
    cols, nodes, weights = [], [], []
    for f, e in zip(first.tolist(), ends.tolist()):
        a, b, c, w = int(row[f]), int(row[e - 1]) + 1, int(col[f]), float(val[f])
        while a < b:                                  # the largest aligned power of two at a
            size = a & -a if a else S
            while a + size > b:
                size //= 2
            cols.append(c)
            nodes.append((S + a) // size)
            weights.append(w)
            a += size
    cols = np.asarray(cols, dtype=np.int64)
    tptr = np.zeros(m.shape[1] + 1, dtype=np.int64)
    tptr[1:] = np.cumsum(np.bincount(cols, minlength=m.shape[1]))
    return S, (torch.from_numpy(tptr), torch.tensor(nodes, dtype=torch.int32),
               torch.tensor(weights, dtype=torch.float32))


def image_of(fast: "FastModel", tree: bool = True, embedding: str = "auto") -> Image:
    """The C kernel's ``Image`` of ``fast`` (netlist2tf.run.executor): every matrix by columns with its
    exactness bound, the norms' scales, the DeltaNet constants, the embedding, and with ``tree`` the LM
    head as a max tree (where its sums are provably exact in the output dtype step.c uses it; else
    it goes by rows)."""
    arrays = {}
    longest = [fast.embed.shape[1], fast.vocab_size]

    def put(name, t):
        a = t.detach().numpy() if isinstance(t, torch.Tensor) else t
        arrays[name] = np.ascontiguousarray(a)
        return name

    def f32(name, t):
        return put(name, t.detach().to(torch.float32).contiguous())

    def mat(name, m: _Sparse, csc=None):
        colptr, row, val = csc or _csc(m)
        longest.extend(m.shape)
        l1, cwlow = _exactness_bound(m, (colptr, row, val))
        return {"rows": m.shape[0], "cols": m.shape[1], "colptr": put(f"{name}.colptr", colptr),
                "row": put(f"{name}.row", row), "val": put(f"{name}.val", val), "l1": l1,
                "cwlow": put(f"{name}.cwlow", cwlow)}

    layers = []
    for i, ((n1, n2), mixer, mlp) in enumerate(fast.layers):
        p = f"L{i}"
        L = {"kind": 0 if mixer is None else 2 if isinstance(mixer, _SilentAttention) else
             3 if isinstance(mixer, _Lookup) else 1,
             "n1": f32(f"{p}.n1", n1.scale), "n2": f32(f"{p}.n2", n2.scale),
             "gate_up": mat(f"{p}.gate_up", mlp.gate_up), "down": mat(f"{p}.down", mlp.down),
             "neurons": mlp.neurons}
        if isinstance(mixer, _SilentAttention):
            L["v"] = mat(f"{p}.v", mixer.v)
        elif isinstance(mixer, _Lookup):
            L.update({f"a{k}": mat(f"{p}.a{k}", getattr(mixer, k)) for k in "qkvo"})
            L["qn_w"], L["kn_w"] = f32(f"{p}.qn_w", mixer.qn_w), f32(f"{p}.kn_w", mixer.kn_w)
            L.update(nh=mixer.nh, nkv=mixer.nkv, hd=mixer.hd, scaling=mixer.scaling)
            longest.append(mixer.nh * mixer.hd)
        elif mixer is not None:
            L.update({k: mat(f"{p}.{k}", getattr(mixer, k)) for k in ("qkv", "z", "ab", "out")})
            L["conv_w"] = f32(f"{p}.conv_w", mixer.conv_w)
            L["conv_b"] = f32(f"{p}.conv_b", mixer.conv_b) if mixer.conv_b is not None else None
            L["conv_dim"], L["K"] = mixer.conv_w.shape
            L["neg_exp_a"] = f32(f"{p}.neg_exp_a", -mixer.A_log.float().exp())   # as the stock layer computes it
            L["dt_bias"], L["norm_w"] = f32(f"{p}.dt_bias", mixer.dt_bias), f32(f"{p}.norm_w", mixer.norm_w)
            L.update(nk=mixer.nk, nv=mixer.nv, dk=mixer.dk, dv=mixer.dv)
            live = mixer.qkv.indptr[1:] > mixer.qkv.indptr[:-1]
            if mixer.conv_b is not None:
                live |= mixer.conv_b != 0
            L["live"] = put(f"{p}.live", live.nonzero().flatten().to(torch.int32))
            L["n_live"] = int(arrays[L["live"]].size)
            L["lagged"] = put(f"{p}.lagged", (mixer.conv_w[:, :-1] != 0).any(1).to(torch.uint8))
            longest.append(mixer.nv * mixer.dv)
        layers.append(L)
    head_csc = _csc(fast.head)
    spec = {"D": int(fast.embed.shape[1]), "V": fast.vocab_size, "bf16": int(fast.dtype == torch.bfloat16),
            **_embedding(put, fast.embed, embedding), "final_n": f32("final_n", fast.final_norm.scale),
            "head": mat("head", fast.head, head_csc), "layers": layers, "eps": fast.config["rms_norm_eps"],
            "tree": 0, "tptr": None, "tnode": None, "tw": None}
    if tree:
        spec["tree"], (tptr, tnode, tw) = _head_tree(fast.head, head_csc)
        spec.update(tptr=put("tptr", tptr), tnode=put("tnode", tnode), tw=put("tw", tw))
    spec["max_len"] = max(longest)
    return Image(spec, arrays)


def _embedding(put, embed: torch.Tensor, how: str = "auto") -> dict:
    """The embedding for the image: dense (V x D float32) where most entries are non-zero (a merged
    model's base rows), else by rows: every entry whose float32 bits are not +0.0 (a -0.0 included, so
    the kernel sets exactly the values the dense rows hold)."""
    e = embed.detach().to(torch.float32).contiguous().numpy()
    keep = e.view(np.uint32) != 0
    if how == "dense" or (how == "auto" and keep.sum() * 2 > e.size):
        return {"embed": put("embed", e), "eptr": None, "ecol": None, "eval": None}
    rows, cols = np.nonzero(keep)
    eptr = np.zeros(e.shape[0] + 1, dtype=np.int64)
    eptr[1:] = np.cumsum(np.bincount(rows, minlength=e.shape[0]))
    return {"embed": None, "eptr": put("eptr", eptr), "ecol": put("ecol", cols.astype(np.int32)),
            "eval": put("eval", e[rows, cols])}
