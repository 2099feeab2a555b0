"""llama.cpp as a trace model: a checkpoint's GGUF file run by llama.cpp (through llama-cpp-python's
bindings of its C API) behind the interface the trace hosts call (``netlist2tf.run.host.run_model``,
``verify_teacher_forced``, the CPU's model engine), like the fast executor's ``FastTrace``:
``generate`` feeds a row's tokens and decodes greedily until a frame ends, ``model(input_ids=(B, T))``
returns every position's logits. Batch row r is llama.cpp sequence r of one context.

What llama.cpp is asked for, and why: float32 key/value cache (its default, float16, would round the
attention lookups' keys and values), no flash attention (its CPU kernel rounds the query to float16),
greedy choices made here from the float32 logits llama.cpp returns (the first of equal maxima, as
``torch.argmax``). Nothing else is changed: the graph, the kernels, the thread count and the batching
are llama.cpp's own, so a run compares the engine as users run it with the netlist simulator.
"""

import ctypes
import os
import threading
from pathlib import Path

import numpy as np

from netlist2tf.common import Netlist2TFError

POSITIONS = 1 << 16          # positions a row may hold by default (the KV cache is allocated for them)
POSITIONS_ENV = "NETLIST2TF_LLAMA_POSITIONS"     # another default, for longer runs
THREADS_ENV = "NETLIST2TF_LLAMA_THREADS"         # llama.cpp's threads (default: every core this process may use)
BATCH = 512                  # tokens per llama_decode call when feeding


def llama_available() -> str | None:
    """None where llama-cpp-python imports, else why not (with the install command)."""
    import importlib

    try:
        importlib.import_module("llama_cpp")
    except ImportError as exc:
        return (f"llama-cpp-python is not installed ({exc}); install it with `pip install "
                f"'netlist2tf[llama]'` (it builds llama.cpp from source: several minutes)")
    return None


_LOG = threading.local()


def _bindings():
    why = llama_available()
    if why:
        raise Netlist2TFError(why)
    import llama_cpp

    if not getattr(_bindings, "ready", False):
        @llama_cpp.llama_log_callback
        def quiet(level, text, _user):            # llama.cpp's progress lines off; errors kept for messages
            if level >= 4:                        # GGML_LOG_LEVEL_ERROR
                lines = getattr(_LOG, "errors", None)
                if lines is not None:
                    lines.append(text.decode(errors="replace").strip())

        _bindings.callback = quiet                # kept alive: llama.cpp calls it later
        llama_cpp.llama_log_set(quiet, ctypes.c_void_p())
        llama_cpp.llama_backend_init()
        _bindings.ready = True
    return llama_cpp


class LlamaModel:
    """A GGUF file loaded by llama.cpp (the weights, shared by every context made from it)."""

    def __init__(self, path, threads: int | None = None):
        L = _bindings()
        self.path = Path(path)
        params = L.llama_model_default_params()
        _LOG.errors = []
        self.handle = L.llama_model_load_from_file(str(self.path).encode(), params)
        errors, _LOG.errors = _LOG.errors, None
        if not self.handle:
            raise Netlist2TFError(f"llama.cpp could not load {self.path}" + (f": {errors[-1]}" if errors else ""))
        self.vocab_size = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.handle))
        env = os.environ.get(THREADS_ENV, "")
        if env and (not env.isdigit() or int(env) < 1):
            raise Netlist2TFError(f"{THREADS_ENV}={env!r}: give a number of threads, e.g. 2")
        self.threads = threads or (int(env) if env else len(os.sched_getaffinity(0)))
        self._L = L

    def __del__(self):
        if getattr(self, "handle", None):
            self._L.llama_model_free(self.handle)
            self.handle = None


class LlamaCache:
    """One llama.cpp context for ``batch`` rows (sequence r = row r), each with room for
    ``positions`` positions; per row the positions fed so far and the logits after the last one."""

    def __init__(self, model: LlamaModel, batch: int, positions: int):
        L = model._L
        self.model, self.batch, self.positions, self._L = model, batch, positions, L
        p = L.llama_context_default_params()
        p.n_ctx = positions * batch
        p.n_batch = p.n_ubatch = BATCH
        p.n_seq_max = batch
        p.n_threads = p.n_threads_batch = model.threads
        p.type_k = p.type_v = L.GGML_TYPE_F32
        p.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
        p.kv_unified = False
        p.no_perf = True
        _LOG.errors = []
        self.ctx = L.llama_init_from_model(model.handle, p)
        errors, _LOG.errors = _LOG.errors, None
        if not self.ctx:
            raise Netlist2TFError(f"llama.cpp could not make a context of {batch} x {positions} positions for "
                                  f"{model.path}" + (f": {errors[-1]}" if errors else "") +
                                  "; run fewer rows or a shorter trace")
        self.fed = [0] * batch
        self.last = [None] * batch
        self._batch = L.llama_batch_init(BATCH, 0, 1)

    def __del__(self):
        if getattr(self, "ctx", None):
            self._L.llama_batch_free(self._batch)
            self._L.llama_free(self.ctx)
            self.ctx = None

    def decode(self, items: list, want_all: bool) -> np.ndarray | None:
        """Feed ``items`` [(row, token)] in llama.cpp batches; return the logits of every item
        (``want_all``) as (n, vocab) float32, else None (each row's last logits are kept)."""
        L, V = self._L, self.model.vocab_size
        out = np.empty((len(items), V), dtype=np.float32) if want_all else None
        last_index = {}
        for i, (row, _) in enumerate(items):
            last_index[row] = i
        for start in range(0, len(items), BATCH):
            chunk = items[start:start + BATCH]
            b = self._batch
            for j, (row, tok) in enumerate(chunk):
                if not 0 <= tok < V:
                    raise Netlist2TFError(f"token {tok} is outside the model's vocabulary of {V}")
                if self.fed[row] >= self.positions:
                    raise Netlist2TFError(f"batch row {row} needs more than the {self.positions:,} positions the "
                                          f"llama.cpp engine holds a row; set {POSITIONS_ENV} to more (its key/value "
                                          f"cache is allocated for them at the start)")
                b.token[j] = tok
                b.pos[j] = self.fed[row]
                b.n_seq_id[j] = 1
                b.seq_id[j][0] = row
                b.logits[j] = 1 if want_all or last_index[row] == start + j else 0
                self.fed[row] += 1
            b.n_tokens = len(chunk)
            _LOG.errors = []
            rc = L.llama_decode(self.ctx, b)
            errors, _LOG.errors = _LOG.errors, None
            if rc != 0:
                raise Netlist2TFError(f"llama.cpp's llama_decode failed (status {rc})" +
                                      (f": {errors[-1]}" if errors else ""))
            for j, (row, _) in enumerate(chunk):
                if b.logits[j]:
                    ptr = L.llama_get_logits_ith(self.ctx, j)
                    logits = np.ctypeslib.as_array(ptr, shape=(V,)).copy()
                    if want_all:
                        out[start + j] = logits
                    if last_index[row] == start + j:
                        self.last[row] = logits
        return out


class EngineTrace:
    """What the trace hosts ask of a model that an engine outside torch runs (llama.cpp here, a server):
    float32, the checkpoint's config read from ``config_folder`` when asked for, no state dict (a
    check is redone, not resumed). Subclasses set ``config_folder`` and implement ``new_cache``,
    ``generate`` (and ``__call__`` where the engine returns every position's logits)."""

    generates = True
    dtype_name = "float32"
    config_folder = None
    what = "this engine"

    @property
    def config(self):
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(self.config_folder)

    @property
    def dtype(self):
        import torch
        return torch.float32

    def parameters(self):
        import torch
        yield torch.zeros(1)

    def to(self, device):
        return self

    def state_dict(self):
        raise Netlist2TFError(f"{self.what} has no state dict: a check run by it is not resumable (run it again, "
                              f"or resume with --executor stock)")


class LlamaTrace(EngineTrace):
    """llama.cpp behind the trace hosts' interface (see the module's docstring). ``path``: the GGUF
    file; ``positions``: positions each batch row may hold."""

    what = "the llama.cpp engine"

    def __init__(self, path, positions: int | None = None, threads: int | None = None, config_folder=None):
        self.model = LlamaModel(path, threads)
        self.vocab_size = self.model.vocab_size
        if positions is None:
            text = os.environ.get(POSITIONS_ENV, str(POSITIONS))
            if not text.isdigit() or int(text) < 1:
                raise Netlist2TFError(f"{POSITIONS_ENV}={text!r}: give a number of positions, e.g. {POSITIONS}")
            positions = int(text)
        self.positions = positions
        self.config_folder = config_folder

    def to(self, device):
        if str(device) != "cpu":
            raise Netlist2TFError("the llama.cpp engine runs on the CPU here (llama-cpp-python's CPU build)")
        return self

    def new_cache(self, batch: int) -> LlamaCache:
        return LlamaCache(self.model, batch, self.positions)

    def generate(self, cache: LlamaCache, row: int, feed, end_mask, max_new: int) -> list:
        """Feed ``feed`` to row ``row``, then decode greedily (each token fed too) until a token whose
        ``end_mask`` entry is set or ``max_new`` tokens; with nothing to feed, the first token is the
        greedy choice after the row's last."""
        feed = list(feed)
        if feed:
            cache.decode([(row, t) for t in feed], False)
        if cache.last[row] is None:
            raise Netlist2TFError("nothing to generate from: the row has been fed no token")
        out = []
        while len(out) < max(max_new, 1):
            tok = int(np.argmax(cache.last[row]))
            out.append(tok)
            cache.decode([(row, tok)], False)
            if end_mask is not None and end_mask[tok]:
                break
        return out

    def __call__(self, input_ids, cache=None, **kw):
        from types import SimpleNamespace

        import torch

        ids = np.asarray(torch.as_tensor(input_ids).cpu())
        B, T = ids.shape
        if cache is None:
            cache = self.new_cache(B)
        items = [(r, int(ids[r, t])) for r in range(B) for t in range(T)]
        logits = cache.decode(items, True).reshape(B, T, -1)
        return SimpleNamespace(logits=torch.from_numpy(logits), cache=cache)
