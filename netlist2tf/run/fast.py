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

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from netlist2tf.common import Netlist2TFError


class FastUnsupported(Netlist2TFError):
    """The checkpoint breaks one of the fast executor's assumptions; run it with stock transformers."""


_KERNEL = None          # the compiled spmv (ctypes), False where it cannot be built


_LIBS: dict = {}


def _library(name: str):
    """netlist2tf/csrc/NAME.c compiled once with the system's C compiler into BUILD/fast/ (cached by
    the source's hash), as a ctypes library; None if it cannot be built (no compiler): the torch
    path is used instead (the same values, slower)."""
    if name not in _LIBS:
        import ctypes
        import hashlib
        import os
        import shutil
        import subprocess
        import tempfile

        from netlist2tf.common import build_dir

        src = Path(__file__).parent / "csrc" / f"{name}.c"
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        lib = build_dir() / "fast" / f"{name}-{hashlib.sha256(src.read_bytes()).hexdigest()[:16]}.so"
        try:
            if not lib.is_file():
                if cc is None:
                    raise OSError("no C compiler (cc/gcc) on PATH")
                lib.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(suffix=".so", dir=lib.parent)
                os.close(fd)
                subprocess.run([cc, "-O2", "-fPIC", "-shared", "-ffp-contract=off", "-o", tmp, str(src), "-lm"],
                               check=True, capture_output=True)
                os.replace(tmp, lib)
            _LIBS[name] = ctypes.CDLL(str(lib))
        except (OSError, subprocess.CalledProcessError):
            _LIBS[name] = None
    return _LIBS[name]


def _kernel():
    global _KERNEL
    if _KERNEL is None:
        import ctypes
        lib = _library("spmv")
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

    def __init__(self, folder, dtype=None, kernel: str = "auto", head_tree: bool = True):
        """``kernel``: "c" (netlist2tf/csrc/step.c: the whole position in one call, incremental),
        "torch" (the same operations as torch calls, one per operation, every position from scratch:
        the reference), "auto": c where a C compiler exists. ``head_tree``: the C kernel keeps the LM
        head as a max tree where that is provably exact (False: by rows, the general path)."""
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
            lib = _library("step")
            if lib is None and kernel == "c":
                raise FastUnsupported("the fast executor's C kernel cannot be built here (no C compiler)")
            self.kernel = _CStep(self, lib, head_tree) if lib is not None else None

    def _matrices(self):
        yield self.head
        for _, mixer, mlp in self.layers:
            yield mlp.gate_up
            yield mlp.down
            if isinstance(mixer, _DeltaNet):
                yield from (mixer.qkv, mixer.z, mixer.ab, mixer.out)
            elif mixer is not None:
                yield mixer.v

    def new_state(self, batch: int = 1):
        """The per-row state: each DeltaNet layer's convolution window and delta-rule state (constant
        size: nothing grows with the trace)."""
        if self.kernel is not None:
            return self.kernel.state(batch)
        return [m.state(batch) if isinstance(m, _DeltaNet) else None for _, m, _ in self.layers]

    def state_bytes(self, state) -> int:
        """The state's size in bytes (it does not grow with the trace)."""
        if isinstance(state, _Rows):
            return state.nbytes
        return sum(t.numel() * t.element_size() for layer in state if layer for t in layer)

    @torch.no_grad()
    def step(self, tokens, state, hidden=None):
        """Feed ``tokens`` (one per batch row) and return the logits (B, vocab) of the next position
        in the model's dtype. ``hidden``: a list that receives the hidden state after the embedding and
        after every layer (as ``output_hidden_states`` gives them, the last one normalised)."""
        if self.kernel is not None:
            return self.kernel(tokens, state, hidden)
        h = self.embed[torch.as_tensor(tokens, dtype=torch.long)]
        if hidden is not None:
            hidden.append(h)
        for ((n1, n2), mixer, mlp), st in zip(self.layers, state):
            if isinstance(mixer, _SilentAttention):
                mixer(n1(h), st)              # checks that it adds exactly zero
            elif mixer is not None:           # DeltaNet (a skipped attention layer adds exactly zero)
                h = h + mixer(n1(h), st)
            h = h + mlp(n2(h))
            if hidden is not None:
                hidden.append(h)
        h = self.final_norm(h)
        if hidden is not None:
            hidden[-1] = h
        return _mv(self.head, h, self.dtype)


class FastCache:
    """The executor's cache for one batch: the DeltaNet layers' state (constant size)."""

    def __init__(self, state, batch):
        self.state, self.batch = state, batch


class FastTrace:
    """``FastModel`` behind the interface the trace hosts call (``netlist2tf.run.host.run_model``,
    ``verify_teacher_forced``, the CPU's model engine): ``model(input_ids=(B, T), cache=...)`` returns
    ``.logits`` (B, T, vocab) and ``.cache``, feeding the T tokens one position at a time. ``config``
    is the checkpoint's (a ``Qwen3_5TextConfig``)."""

    def __init__(self, fast: FastModel):
        self.fast = fast
        self._param = torch.zeros(1, dtype=fast.dtype)

    @functools.cached_property
    def config(self):
        """The checkpoint's config, read by transformers when first asked for (running needs none of
        it: importing transformers would cost a second of start-up)."""
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(self.fast.folder)

    def parameters(self):
        yield self._param

    def to(self, device):
        if str(device) != "cpu":
            raise FastUnsupported("the fast executor runs on the CPU only; use --executor stock on a GPU")
        return self

    def state_dict(self):
        raise FastUnsupported("the fast executor has no state dict; resume saved checks with --executor stock")

    @property
    def generates(self) -> bool:
        """True where ``generate`` runs whole frames in the C kernel (netlist2tf.run.host uses it)."""
        return self.fast.kernel is not None

    def new_cache(self, batch: int) -> FastCache:
        return FastCache(self.fast.new_state(batch), batch)

    def generate(self, cache: FastCache, row: int, feed, end_mask, max_new: int) -> list:
        """Feed ``feed`` to batch row ``row``, then generate greedily (each token fed too) until a
        token whose ``end_mask`` entry is set or ``max_new`` tokens (the C kernel: no Python per
        token). With nothing to feed the first token is the greedy choice after the row's last."""
        return self.fast.kernel.generate(cache.state, row, feed, end_mask, max_new)

    @torch.no_grad()
    def __call__(self, input_ids, cache=None, **kw):
        from types import SimpleNamespace

        ids = torch.as_tensor(input_ids)
        B, T = ids.shape
        if cache is None:
            cache = FastCache(self.fast.new_state(B), B)
        logits = torch.empty(B, T, self.fast.vocab_size, dtype=self.fast.dtype)
        for t in range(T):
            logits[:, t] = self.fast.step(ids[:, t], cache.state)
        return SimpleNamespace(logits=logits, cache=cache)


def load_fast_checkpoint(folder, dtype=None):
    """``emit.load_checkpoint``'s tuple with the model run by the fast executor: (FastTrace, or a
    ``netlist2tf.merge.MergedTrace`` around one for a merged folder, protocol, netlist, initial registers,
    meta). The same checks of the folder (its files sealed, the protocol read from
    trace_protocol.json); FastUnsupported where the executor cannot run it."""
    from netlist2tf.checkpoint import read_checkpoint

    if (Path(folder) / "merge.json").is_file():
        from netlist2tf.merge import load_merged
        return load_merged(folder, dtype, model=lambda f, d: FastTrace(FastModel(f, d)))[:5]
    protocol, netlist, meta = read_checkpoint(folder)
    fast = FastModel(folder, dtype or getattr(torch, meta.get("dtype", "float32"), torch.float32))
    if fast.vocab_size != protocol.vocab_size:
        raise Netlist2TFError(f"{folder}: the model's vocabulary ({fast.vocab_size}) does not match its "
                              f"trace protocol ({protocol.vocab_size}); recompile it")
    return FastTrace(fast), protocol, netlist, meta["initial_registers"], meta


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

class FastInexact(Netlist2TFError):
    """A value outside the regions where the C kernel is provably equal to the stock forward (e.g. a
    silu of a non-saturated input): run the checkpoint with stock transformers."""


_OPS = {1: "silu of a value where it is not saturated", 2: "sigmoid of a value where it is not saturated",
        3: "softplus inside its curved range", 4: "a DeltaNet decay that is not exactly 1",
        5: "a DeltaNet key with more than two non-zero entries (of head)",
        6: "a DeltaNet query with more than two non-zero entries (of head)",
        7: "a mean square that float32 cannot hold exactly",
        8: "a sum that double precision cannot be proved to hold exactly (bits needed beyond 53)",
        11: "a full-attention layer with a non-zero output projection got non-zero values (v_proj of "
            "its input, at the entry shown): its output is not provably zero (text before the trace?)"}


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


_STRUCTS = None


def _structs():
    """The ctypes mirrors of step.c's structs (made once: the library's argtypes name them)."""
    global _STRUCTS
    if _STRUCTS is None:
        _STRUCTS = _make_structs()
    return _STRUCTS


def _make_structs():
    import ctypes as C

    class Mat(C.Structure):
        _fields_ = [("rows", C.c_int64), ("cols", C.c_int64), ("colptr", C.c_void_p), ("row", C.c_void_p),
                    ("val", C.c_void_p), ("l1", C.c_int64), ("cwlow", C.c_void_p)]

    class Layer(C.Structure):
        _fields_ = [("kind", C.c_int64), ("n1", C.c_void_p), ("n2", C.c_void_p), ("gate_up", Mat), ("down", Mat),
                    ("neurons", C.c_int64), ("qkv", Mat), ("z", Mat), ("ab", Mat), ("out", Mat), ("v", Mat),
                    ("conv_w", C.c_void_p), ("conv_b", C.c_void_p), ("conv_dim", C.c_int64), ("K", C.c_int64),
                    ("neg_exp_a", C.c_void_p), ("dt_bias", C.c_void_p), ("norm_w", C.c_void_p),
                    ("nk", C.c_int64), ("nv", C.c_int64), ("dk", C.c_int64), ("dv", C.c_int64),
                    ("live", C.c_void_p), ("n_live", C.c_int64), ("lagged", C.c_void_p)]

    MeanRsqrt = C.CFUNCTYPE(C.c_float, C.c_double, C.c_int64, C.c_double)

    class Model(C.Structure):
        _fields_ = [("D", C.c_int64), ("V", C.c_int64), ("n_layers", C.c_int64), ("bf16", C.c_int64),
                    ("embed", C.c_void_p), ("final_n", C.c_void_p), ("head", Mat),
                    ("layers", C.POINTER(Layer)), ("eps", C.c_double), ("mean_rsqrt", MeanRsqrt),
                    ("err_layer", C.c_int64), ("err_op", C.c_int64), ("err_value", C.c_double),
                    ("cache_n", C.c_int64 * 64), ("cache_sum", C.c_double * 64), ("cache_val", C.c_float * 64),
                    ("flag", C.c_void_p), ("list", C.c_void_p), ("max_len", C.c_int64),
                    ("positions", C.c_int64), ("resets", C.c_int64), ("blocks_computed", C.c_int64),
                    ("updates", C.c_int64), ("updates_head", C.c_int64), ("tree", C.c_int64),
                    ("tptr", C.c_void_p), ("tnode", C.c_void_p), ("tw", C.c_void_p)]
    return Mat, Layer, Model, MeanRsqrt


class _Rows:
    """The C kernel's state for a batch: one row_t per batch row (every vector of the forward as of
    the last position, the DeltaNet windows and states, the products' exact sums: a constant size,
    ``nbytes``), freed with this object."""

    def __init__(self, lib, model, batch):
        import ctypes as C

        self.lib, self.rows = lib, []
        for _ in range(batch):
            r = lib.n2t_row_new(C.byref(model))
            if not r:
                raise MemoryError("the fast executor's state for one batch row does not fit in memory")
            self.rows.append(r)
        self.nbytes = sum(lib.n2t_row_bytes(r) for r in self.rows)

    def __len__(self):
        return len(self.rows)

    def __del__(self):
        for r in getattr(self, "rows", []):
            self.lib.n2t_row_free(r)
        self.rows = []


class _CStep:
    """The C kernel bound to one FastModel (it keeps every array the C structs point to alive)."""

    def __init__(self, fast: "FastModel", lib, tree: bool = True):
        """``tree``: the LM head as a max tree where its sums are provably exact in the output dtype
        (else, or with False, by rows)."""
        import ctypes as C

        Mat, Layer, Model, MeanRsqrt = _structs()
        self.keep = []
        f32 = lambda t: self._keep(t.detach().to(torch.float32).contiguous())      # noqa: E731
        longest = [fast.embed.shape[1], fast.vocab_size]

        def mat(m: _Sparse, csc=None):
            colptr, row, val = self._keep(csc or _csc(m))
            longest.extend(m.shape)
            l1, cwlow = _exactness_bound(m, (colptr, row, val))
            return Mat(m.shape[0], m.shape[1], colptr.data_ptr(), row.data_ptr(), val.data_ptr(), l1,
                       self._keep(cwlow).data_ptr())

        layers = (Layer * len(fast.layers))()
        for i, ((n1, n2), mixer, mlp) in enumerate(fast.layers):
            L = layers[i]
            L.kind = 0 if mixer is None else 2 if isinstance(mixer, _SilentAttention) else 1
            L.n1, L.n2 = f32(n1.scale).data_ptr(), f32(n2.scale).data_ptr()
            L.gate_up, L.down, L.neurons = mat(mlp.gate_up), mat(mlp.down), mlp.neurons
            if isinstance(mixer, _SilentAttention):
                L.v = mat(mixer.v)
            elif mixer is not None:
                L.qkv, L.z, L.ab, L.out = mat(mixer.qkv), mat(mixer.z), mat(mixer.ab), mat(mixer.out)
                L.conv_w = f32(mixer.conv_w).data_ptr()
                L.conv_b = f32(mixer.conv_b).data_ptr() if mixer.conv_b is not None else None
                L.conv_dim, L.K = mixer.conv_w.shape
                L.neg_exp_a = f32(-mixer.A_log.float().exp()).data_ptr()     # as the stock layer computes it
                L.dt_bias, L.norm_w = f32(mixer.dt_bias).data_ptr(), f32(mixer.norm_w).data_ptr()
                L.nk, L.nv, L.dk, L.dv = mixer.nk, mixer.nv, mixer.dk, mixer.dv
                live = mixer.qkv.indptr[1:] > mixer.qkv.indptr[:-1]
                if mixer.conv_b is not None:
                    live |= mixer.conv_b != 0
                live = self._keep(live.nonzero().flatten().to(torch.int32).contiguous())
                L.live, L.n_live = live.data_ptr(), live.numel()
                lagged = self._keep((mixer.conv_w[:, :-1] != 0).any(1).to(torch.uint8).contiguous())
                L.lagged = lagged.data_ptr()
                longest.append(mixer.nv * mixer.dv)
        self.layers = layers
        self.cache = {}

        def mean_rsqrt(total, n, eps):
            """torch's rsqrt(mean + eps) over n float32 values summing to ``total`` (exactly)."""
            key = (total, n)
            if key not in self.cache:
                v = torch.zeros(1, 1, n, dtype=torch.float32)
                v[0, 0, 0] = total
                self.cache[key] = float(torch.rsqrt(v.mean(-1, keepdim=True) + eps))
            return self.cache[key]
        self.callback = MeanRsqrt(mean_rsqrt)
        self.embed = f32(fast.embed)
        m = Model()
        m.D, m.V, m.n_layers = fast.embed.shape[1], fast.vocab_size, len(fast.layers)
        m.bf16 = int(fast.dtype == torch.bfloat16)
        m.embed, m.final_n = self.embed.data_ptr(), f32(fast.final_norm.scale).data_ptr()
        head_csc = _csc(fast.head)
        m.head, m.layers = mat(fast.head, head_csc), layers
        if tree:
            m.tree, arrays = _head_tree(fast.head, head_csc)
            m.tptr, m.tnode, m.tw = (t.data_ptr() for t in self._keep(arrays))
        m.eps, m.mean_rsqrt = fast.config["rms_norm_eps"], self.callback
        for i in range(64):
            m.cache_n[i] = -1                    # empty slots
        m.max_len = max(longest)
        self.flag = self._keep(torch.zeros(m.max_len, dtype=torch.uint8))
        self.list = self._keep(torch.zeros(m.max_len, dtype=torch.int32))
        m.flag, m.list = self.flag.data_ptr(), self.list.data_ptr()
        self.model = m
        lib.n2t_row_new.restype = C.c_void_p
        lib.n2t_row_new.argtypes = [C.POINTER(Model)]
        lib.n2t_row_free.restype = None
        lib.n2t_row_free.argtypes = [C.c_void_p]
        lib.n2t_row_bytes.restype = C.c_int64
        lib.n2t_row_bytes.argtypes = [C.c_void_p]
        lib.n2t_row_last.restype = C.c_int64
        lib.n2t_row_last.argtypes = [C.c_void_p]
        lib.n2t_step.restype = C.c_int
        lib.n2t_step.argtypes = [C.POINTER(Model), C.c_void_p, C.c_int64, C.c_void_p, C.c_void_p]
        lib.n2t_generate.restype = C.c_int
        lib.n2t_generate.argtypes = [C.POINTER(Model), C.c_void_p, C.c_void_p, C.c_int64, C.c_void_p, C.c_int64,
                                 C.c_void_p, C.POINTER(C.c_int64)]
        self.lib = lib
        self.fast = fast

    def _keep(self, t):
        self.keep.append(t)
        return t

    def state(self, batch):
        return _Rows(self.lib, self.model, batch)

    def _check(self, status):
        if status == 0:
            return
        m = self.model
        if status == 10:
            raise Netlist2TFError(f"token {int(m.err_value)} is outside the vocabulary (0..{m.V - 1})")
        where = "the final norm or LM head" if m.err_layer == len(self.fast.layers) else f"layer {m.err_layer}"
        raise FastInexact(f"{self.fast.folder}: {where}: {_OPS.get(m.err_op, m.err_op)} "
                          f"({m.err_value:g}): the fast executor's C kernel is exact only where every "
                          f"such value is; run this checkpoint with --executor stock")

    def __call__(self, tokens, state, hidden=None):
        import ctypes as C

        toks = torch.as_tensor(tokens, dtype=torch.int64).reshape(-1).tolist()
        B = len(toks)
        if not isinstance(state, _Rows) or len(state) != B:
            raise Netlist2TFError(f"a state for {len(state)} rows fed {B} tokens")
        m = self.model
        logits = torch.empty(B, m.V, dtype=torch.float32)
        buf = None if hidden is None else torch.empty(B, m.n_layers + 1, m.D, dtype=torch.float32)
        for b, t in enumerate(toks):
            self._check(self.lib.n2t_step(C.byref(m), state.rows[b], t, logits[b].data_ptr(),
                                      None if buf is None else buf[b].data_ptr()))
        if hidden is not None:
            hidden.extend(buf[:, i].to(self.fast.dtype) for i in range(m.n_layers + 1))
        return logits.to(self.fast.dtype)

    def generate(self, state, row: int, feed, end_mask, max_new: int) -> list:
        """Feed ``feed`` to batch row ``row``, then generate greedily until a token whose ``end_mask``
        entry is set (a uint8 tensor over the vocabulary, or None) or ``max_new`` tokens; every
        generated token is fed too. Returns the generated tokens."""
        import ctypes as C

        f = torch.as_tensor(list(feed), dtype=torch.int64)
        out = torch.empty(max(max_new, 1), dtype=torch.int64)
        n = C.c_int64(0)
        self._check(self.lib.n2t_generate(C.byref(self.model), state.rows[row], f.data_ptr(), f.numel(),
                                      None if end_mask is None else end_mask.data_ptr(), max_new,
                                      out.data_ptr(), C.byref(n)))
        return out[:n.value].tolist()

    def counters(self):
        """Work done since the model was loaded: positions computed, products or norms recomputed from
        scratch (their exactness bound failed from the changes alone), blocks of 64 logits scanned
        again for their maximum, weights applied to changed inputs (all, the LM head's)."""
        m = self.model
        return {"positions": int(m.positions), "resets": int(m.resets), "blocks": int(m.blocks_computed),
                "updates": int(m.updates), "head updates": int(m.updates_head)}
