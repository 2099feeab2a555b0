"""The fast executor as the hosts run it, without torch: its C kernel (``csrc/step.c``), the kernel's
image (every array the kernel reads, cached once per checkpoint) and the trace interface.

``netlist2tf.run.fast.FastModel`` reads a checkpoint's dense weights with torch, keeps their non-zero
entries and works out the kernel's exactness bounds: most of a run's start-up. What it hands the
kernel is an ``Image``: named numpy arrays (sparse matrices by columns, norms, the embedding, the LM
head's max tree) and a small JSON spec of the model's shape that points at them. The image is saved
under the build folder (``fast/images/``), keyed by the sha256 of the checkpoint's config and weight
files (remembered by ``netlist2tf.checkpoint.emit.file_digest`` under each file's identity, so not
read again), the dtype, and the sources of this module, ``fast.py`` and ``step.c``; the next run of
the same checkpoint maps the image and starts the kernel at once (no torch import, no dense weights
read; ``netlist2tf.run.opener.fast_trace`` chooses). A damaged or stale image is derived again, never trusted: the file carries its format, its
length and the sha256 of its spec and data (checked on every load); the arrays' bounds are checked
against the spec before the kernel sees a pointer.
"""

import ctypes
import functools
import hashlib
import json
import mmap
import os
from pathlib import Path

import numpy as np

from netlist2tf.common import Netlist2TFError


class FastUnsupported(Netlist2TFError):
    """The checkpoint breaks one of the fast executor's assumptions; run it with stock transformers."""


class FastInexact(Netlist2TFError):
    """A value outside the regions where the C kernel is provably equal to the stock forward (e.g. a
    silu of a non-saturated input): run the checkpoint with stock transformers."""


_OPS = {1: "silu of a value where it is not saturated", 2: "sigmoid of a value where it is not saturated",
        3: "softplus inside its curved range", 4: "a DeltaNet decay that is not exactly 1",
        5: "a DeltaNet key with more than two non-zero entries (of head)",
        6: "a DeltaNet query with more than two non-zero entries (of head)",
        7: "a mean square that float32 cannot hold exactly",
        8: "a sum that double precision cannot be proved to hold exactly (bits needed beyond 53)",
        11: "a full-attention layer whose output is not provably exact here: a silent one (a merged base "
            "layer) got non-zero values (text before the trace?), or a lookup's softmax is not one-hot (its "
            "best score shown: a tie of different values, or a key offered twice)"}

_LIBS: dict = {}
CSRC = Path(__file__).parent / "csrc"


def library(name: str):
    """netlist2tf/run/csrc/NAME.c compiled once with the system's C compiler into BUILD/fast/ (cached by
    the source's hash), as a ctypes library; None if it cannot be built (no compiler): the torch
    path is used instead (the same values, slower)."""
    if name not in _LIBS:
        import shutil
        import subprocess
        import tempfile

        from netlist2tf.common import build_dir

        src = CSRC / f"{name}.c"
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


# -- the image ---------------------------------------------------------------------------------------

IMAGE_FORMAT = 1
IMAGE_CACHE_FILES = 8                 # images kept (the most recently used), and their bytes in all
IMAGE_CACHE_BYTES = 4 << 30
_MAGIC = b"N2TFIMG\0"
_ALIGN = 64
_DTYPES = {"float32", "int32", "int64", "uint8"}
# a matrix in the spec: shape, exactness bound l1, and the names of its arrays (step.c's mat_t)
MAT_ARRAYS = ("colptr", "row", "val", "cwlow")


class Image:
    """What the C kernel reads: ``spec`` (the model's shape as JSON: sizes, layer kinds, each matrix's
    shape and bound; array fields name an entry of ``arrays``) and ``arrays`` (name -> a C-contiguous
    numpy array of float32, int32, int64 or uint8)."""

    def __init__(self, spec: dict, arrays: dict):
        self.spec, self.arrays = spec, arrays

    def save(self, path) -> None:
        """Write the image to ``path`` (whole, then renamed into place: a reader sees the old file
        or the new one). Deterministic: the same image gives the same bytes."""
        path = Path(path)
        table, offset = {}, 0
        for name in sorted(self.arrays):
            a = self.arrays[name]
            table[name] = {"dtype": a.dtype.name, "shape": list(a.shape), "offset": offset}
            offset += -(-a.nbytes // _ALIGN) * _ALIGN
        spec = json.dumps(self.spec, sort_keys=True)
        data = hashlib.sha256()
        for name in sorted(self.arrays):
            data.update(self._padded(name))
        header = json.dumps({"format": IMAGE_FORMAT, "spec": spec, "table": table, "data": offset,
                             "sha256": hashlib.sha256(spec.encode() + data.digest()).hexdigest()},
                            sort_keys=True).encode()
        start = -(-(len(_MAGIC) + 8 + len(header)) // _ALIGN) * _ALIGN
        from netlist2tf.common import file_writer

        with file_writer(path, "wb", "the fast executor's image") as f:
            head = _MAGIC + len(header).to_bytes(8, "little") + header
            f.write(head + b"\0" * (start - len(head)))
            for name in sorted(self.arrays):
                f.write(self._padded(name))

    def _padded(self, name) -> bytes:
        b = np.ascontiguousarray(self.arrays[name]).tobytes()
        return b + b"\0" * (-len(b) % _ALIGN)

    @classmethod
    def load(cls, path) -> "Image":
        """The image at ``path``, its arrays mapped read-only (pages are read as the kernel touches
        them). Raises ValueError for a file that is not a complete image of this format."""
        with open(path, "rb") as f:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if buf[:len(_MAGIC)] != _MAGIC:
            raise ValueError("not an image")
        n = int.from_bytes(buf[len(_MAGIC):len(_MAGIC) + 8], "little")
        head = json.loads(bytes(buf[len(_MAGIC) + 8:len(_MAGIC) + 8 + n]))
        if head.get("format") != IMAGE_FORMAT:
            raise ValueError(f"format {head.get('format')!r}")
        start = -(-(len(_MAGIC) + 8 + n) // _ALIGN) * _ALIGN
        if len(buf) != start + head["data"]:
            raise ValueError(f"{len(buf)} bytes, the header says {start + head['data']}")
        data = hashlib.sha256(memoryview(buf)[start:]).digest()
        if hashlib.sha256(head["spec"].encode() + data).hexdigest() != head["sha256"]:
            raise ValueError("its sha256 differs from its header's: the file changed after it was written")
        arrays = {}
        for name, entry in head["table"].items():
            if entry["dtype"] not in _DTYPES:
                raise ValueError(f"array {name}: dtype {entry['dtype']!r}")
            dt = np.dtype(entry["dtype"])
            count = int(np.prod(entry["shape"], dtype=np.int64))
            if not 0 <= entry["offset"] <= head["data"] - count * dt.itemsize:
                raise ValueError(f"array {name} lies outside the file")
            arrays[name] = np.frombuffer(buf, dt, count, start + entry["offset"]).reshape(entry["shape"])
        image = cls(json.loads(head["spec"]), arrays)
        image.check()
        return image

    def check(self) -> None:
        """Raise ValueError unless every array the spec names exists with the length the kernel will
        read (so no pointer the kernel gets can be read past its end)."""
        s, a = self.spec, self.arrays

        def need(name, length, dtype):
            if name is None:
                return
            arr = a.get(name)
            if arr is None or arr.dtype.name != dtype or arr.size < length or not arr.flags.c_contiguous:
                raise ValueError(f"array {name} is missing or shorter than {length} {dtype}")

        def mat(m):
            need(m["colptr"], m["cols"] + 1, "int64")
            nnz = int(a[m["colptr"]][m["cols"]])
            if nnz < 0 or (m["cols"] and int(a[m["colptr"]][0]) != 0) or np.any(np.diff(a[m["colptr"]][:m["cols"] + 1]) < 0):
                raise ValueError(f"array {m['colptr']} is not a column pointer")
            need(m["row"], nnz, "int32")
            need(m["val"], nnz, "float32")
            need(m["cwlow"], m["cols"], "int32")
            if nnz and (int(a[m["row"]][:nnz].min()) < 0 or int(a[m["row"]][:nnz].max()) >= m["rows"]):
                raise ValueError(f"array {m['row']} names a row outside the matrix")

        D, V = s["D"], s["V"]
        if s["embed"] is not None:
            need(s["embed"], V * D, "float32")
        else:
            need(s["eptr"], V + 1, "int64")
            ptrs = a[s["eptr"]][:V + 1]
            if int(ptrs[0]) != 0 or np.any(np.diff(ptrs) < 0):
                raise ValueError(f"array {s['eptr']} is not a row pointer")
            need(s["ecol"], int(ptrs[V]), "int32")
            need(s["eval"], int(ptrs[V]), "float32")
            if ptrs[V] and (int(a[s["ecol"]][:ptrs[V]].min()) < 0 or int(a[s["ecol"]][:ptrs[V]].max()) >= D):
                raise ValueError(f"array {s['ecol']} names a column outside the embedding")
        if s["max_len"] < max(D, V):
            raise ValueError("max_len is shorter than the model's vectors")
        need(s["final_n"], D, "float32")
        mat(s["head"])
        if s["tree"]:
            need(s["tptr"], s["head"]["cols"] + 1, "int64")
            nn = int(a[s["tptr"]][s["head"]["cols"]])
            need(s["tnode"], nn, "int32")
            need(s["tw"], nn, "float32")
        for L in s["layers"]:
            need(L["n1"], D, "float32")
            need(L["n2"], D, "float32")
            for k in ("gate_up", "down", "qkv", "z", "ab", "out", "v", "aq", "ak", "av", "ao"):
                if L.get(k):
                    mat(L[k])
            if L["kind"] == 3:
                need(L["qn_w"], L["hd"], "float32")
                need(L["kn_w"], L["hd"], "float32")
                if L["nh"] % L["nkv"] or L["aq"]["rows"] != 2 * L["nh"] * L["hd"] or \
                        L["ao"]["cols"] != L["nh"] * L["hd"] or L["ak"]["rows"] != L["nkv"] * L["hd"]:
                    raise ValueError("a lookup layer's head shapes do not match its matrices")
            if L["kind"] == 1:
                need(L["conv_w"], L["conv_dim"] * L["K"], "float32")
                need(L["conv_b"], L["conv_dim"], "float32")
                for k, n in (("neg_exp_a", L["nv"]), ("dt_bias", L["nv"]), ("norm_w", L["dv"])):
                    need(L[k], n, "float32")
                need(L["live"], L["n_live"], "int32")
                need(L["lagged"], L["conv_dim"], "uint8")


# -- the kernel --------------------------------------------------------------------------------------

_STRUCTS = None


def _structs():
    """The ctypes mirrors of step.c's structs (made once: the library's argtypes name them)."""
    global _STRUCTS
    if _STRUCTS is None:
        C = ctypes

        class Mat(C.Structure):
            _fields_ = [("rows", C.c_int64), ("cols", C.c_int64), ("colptr", C.c_void_p), ("row", C.c_void_p),
                        ("val", C.c_void_p), ("l1", C.c_int64), ("cwlow", C.c_void_p)]

        class Layer(C.Structure):
            _fields_ = [("kind", C.c_int64), ("n1", C.c_void_p), ("n2", C.c_void_p), ("gate_up", Mat),
                        ("down", Mat), ("neurons", C.c_int64), ("qkv", Mat), ("z", Mat), ("ab", Mat), ("out", Mat),
                        ("v", Mat), ("conv_w", C.c_void_p), ("conv_b", C.c_void_p), ("conv_dim", C.c_int64),
                        ("K", C.c_int64), ("neg_exp_a", C.c_void_p), ("dt_bias", C.c_void_p),
                        ("norm_w", C.c_void_p), ("nk", C.c_int64), ("nv", C.c_int64), ("dk", C.c_int64),
                        ("dv", C.c_int64), ("live", C.c_void_p), ("n_live", C.c_int64), ("lagged", C.c_void_p),
                        ("aq", Mat), ("ak", Mat), ("av", Mat), ("ao", Mat), ("qn_w", C.c_void_p),
                        ("kn_w", C.c_void_p), ("nh", C.c_int64), ("nkv", C.c_int64), ("hd", C.c_int64),
                        ("scaling", C.c_double)]

        MeanRsqrt = C.CFUNCTYPE(C.c_float, C.c_double, C.c_int64, C.c_double)

        class Model(C.Structure):
            _fields_ = [("D", C.c_int64), ("V", C.c_int64), ("n_layers", C.c_int64), ("bf16", C.c_int64),
                        ("embed", C.c_void_p), ("final_n", C.c_void_p), ("head", Mat),
                        ("layers", C.POINTER(Layer)), ("eps", C.c_double), ("mean_rsqrt", MeanRsqrt),
                        ("err_layer", C.c_int64), ("err_op", C.c_int64), ("err_value", C.c_double),
                        ("cache_n", C.c_int64 * 64), ("cache_sum", C.c_double * 64),
                        ("cache_val", C.c_float * 64), ("flag", C.c_void_p), ("list", C.c_void_p),
                        ("max_len", C.c_int64), ("positions", C.c_int64), ("resets", C.c_int64),
                        ("blocks_computed", C.c_int64), ("updates", C.c_int64), ("updates_head", C.c_int64),
                        ("tree", C.c_int64), ("tptr", C.c_void_p), ("tnode", C.c_void_p), ("tw", C.c_void_p),
                        ("eptr", C.c_void_p), ("ecol", C.c_void_p), ("eval", C.c_void_p)]
        _STRUCTS = Mat, Layer, Model, MeanRsqrt
    return _STRUCTS


def _bind(lib):
    """Declare step.c's entry points on ``lib`` (once per library)."""
    if getattr(lib, "_n2t_bound", False):
        return
    C = ctypes
    Mat, Layer, Model, MeanRsqrt = _structs()
    for name, res, args in (
            ("n2t_row_new", C.c_void_p, [C.POINTER(Model)]),
            ("n2t_row_free", None, [C.c_void_p]),
            ("n2t_row_bytes", C.c_int64, [C.c_void_p]),
            ("n2t_row_last", C.c_int64, [C.c_void_p]),
            ("n2t_step", C.c_int, [C.POINTER(Model), C.c_void_p, C.c_int64, C.c_void_p, C.c_void_p]),
            ("n2t_generate", C.c_int, [C.POINTER(Model), C.c_void_p, C.c_void_p, C.c_int64, C.c_void_p,
                                       C.c_int64, C.c_void_p, C.POINTER(C.c_int64)]),
            ("n2t_mean_rsqrt", C.c_float, [C.c_double, C.c_int64, C.c_double])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    lib._n2t_bound = True


class Rows:
    """The C kernel's state for a batch: one row_t per batch row (every vector of the forward as of
    the last position, the DeltaNet windows and states, the products' exact sums: a constant size,
    ``nbytes``), freed with this object."""

    def __init__(self, kernel: "Kernel", batch: int):
        self.lib, self.rows, self.kernel = kernel.lib, [], kernel
        for _ in range(batch):
            r = self.lib.n2t_row_new(ctypes.byref(kernel.model))
            if not r:
                raise MemoryError("the fast executor's state for one batch row does not fit in memory")
            self.rows.append(r)
        self.nbytes = sum(self.lib.n2t_row_bytes(r) for r in self.rows)

    def __len__(self):
        return len(self.rows)

    def __del__(self):
        for r in getattr(self, "rows", []):
            self.lib.n2t_row_free(r)
        self.rows = []


class Kernel:
    """The C kernel (``csrc/step.c``) bound to an ``Image`` (it keeps the arrays the C structs point
    to alive). ``name`` names the checkpoint in its errors."""

    def __init__(self, image: Image, lib, name: str = "the checkpoint"):
        C = ctypes
        Mat, Layer, Model, MeanRsqrt = _structs()
        _bind(lib)
        self.image, self.lib, self.name = image, lib, name
        s, arrays = image.spec, image.arrays

        def ptr(key):
            return None if key is None else arrays[key].ctypes.data

        def mat(m):
            return Mat(m["rows"], m["cols"], ptr(m["colptr"]), ptr(m["row"]), ptr(m["val"]), m["l1"], ptr(m["cwlow"]))

        layers = (Layer * len(s["layers"]))()
        for L, spec in zip(layers, s["layers"]):
            L.kind, L.n1, L.n2, L.neurons = spec["kind"], ptr(spec["n1"]), ptr(spec["n2"]), spec["neurons"]
            L.gate_up, L.down = mat(spec["gate_up"]), mat(spec["down"])
            if spec["kind"] == 2:
                L.v = mat(spec["v"])
            elif spec["kind"] == 3:
                L.aq, L.ak, L.av, L.ao = (mat(spec[f"a{k}"]) for k in "qkvo")
                L.qn_w, L.kn_w = ptr(spec["qn_w"]), ptr(spec["kn_w"])
                L.nh, L.nkv, L.hd, L.scaling = spec["nh"], spec["nkv"], spec["hd"], spec["scaling"]
            elif spec["kind"] == 1:
                L.qkv, L.z, L.ab, L.out = (mat(spec[k]) for k in ("qkv", "z", "ab", "out"))
                L.conv_w, L.conv_b = ptr(spec["conv_w"]), ptr(spec["conv_b"])
                L.conv_dim, L.K = spec["conv_dim"], spec["K"]
                L.neg_exp_a, L.dt_bias, L.norm_w = ptr(spec["neg_exp_a"]), ptr(spec["dt_bias"]), ptr(spec["norm_w"])
                L.nk, L.nv, L.dk, L.dv = spec["nk"], spec["nv"], spec["dk"], spec["dv"]
                L.live, L.n_live, L.lagged = ptr(spec["live"]), spec["n_live"], ptr(spec["lagged"])
        self.layers = layers
        m = Model()
        m.D, m.V, m.n_layers, m.bf16 = s["D"], s["V"], len(s["layers"]), s["bf16"]
        m.embed, m.final_n, m.head, m.layers = ptr(s["embed"]), ptr(s["final_n"]), mat(s["head"]), layers
        if s["embed"] is None:
            m.eptr, m.ecol, m.eval = ptr(s["eptr"]), ptr(s["ecol"]), ptr(s["eval"])
        m.tree = s["tree"]
        if s["tree"]:
            m.tptr, m.tnode, m.tw = ptr(s["tptr"]), ptr(s["tnode"]), ptr(s["tw"])
        m.eps = s["eps"]
        # torch's rsqrt(mean + eps) in step.c (its comment says why that is torch's value)
        m.mean_rsqrt = C.cast(lib.n2t_mean_rsqrt, MeanRsqrt)
        for i in range(64):
            m.cache_n[i] = -1                    # empty slots
        m.max_len = s["max_len"]
        self.flag = np.zeros(m.max_len, dtype=np.uint8)
        self.list = np.zeros(m.max_len, dtype=np.int32)
        m.flag, m.list = self.flag.ctypes.data, self.list.ctypes.data
        self.model = m
        self.vocab_size, self.hidden_size, self.n_layers = s["V"], s["D"], len(s["layers"])

    def state(self, batch: int) -> Rows:
        return Rows(self, batch)

    def _check(self, status):
        if status == 0:
            return
        m = self.model
        if status == 10:
            raise Netlist2TFError(f"token {int(m.err_value)} is outside the vocabulary (0..{m.V - 1})")
        where = "the final norm or LM head" if m.err_layer == self.n_layers else f"layer {m.err_layer}"
        raise FastInexact(f"{self.name}: {where}: {_OPS.get(m.err_op, m.err_op)} "
                          f"({m.err_value:g}): the fast executor's C kernel is exact only where every "
                          f"such value is; run this checkpoint with --executor stock")

    def step(self, tokens, state: Rows, hidden: bool = False):
        """Feed ``tokens`` (one per batch row); returns (logits (B, V) float32, and with ``hidden``
        the hidden states (B, layers + 1, D) after the embedding and every layer, the last one
        normalised; else None). Values are the model dtype's, held in float32."""
        toks = [int(t) for t in tokens]
        B = len(toks)
        if not isinstance(state, Rows) or len(state) != B:
            raise Netlist2TFError(f"a state for {len(state)} rows fed {B} tokens")
        m = self.model
        logits = np.empty((B, m.V), dtype=np.float32)
        buf = np.empty((B, m.n_layers + 1, m.D), dtype=np.float32) if hidden else None
        for b, t in enumerate(toks):
            self._check(self.lib.n2t_step(ctypes.byref(m), state.rows[b], t, logits[b].ctypes.data,
                                          None if buf is None else buf[b].ctypes.data))
        return logits, buf

    def generate(self, state: Rows, row: int, feed, end_mask, max_new: int) -> list:
        """Feed ``feed`` to batch row ``row``, then generate greedily until a token whose ``end_mask``
        entry is set (a uint8 array over the vocabulary, or None) or ``max_new`` tokens; every
        generated token is fed too. Returns the generated tokens."""
        f = np.asarray(list(feed), dtype=np.int64)
        out = np.empty(max(max_new, 1), dtype=np.int64)
        if end_mask is not None:
            end_mask = np.ascontiguousarray(end_mask, dtype=np.uint8)
            if end_mask.size < self.model.V:
                raise Netlist2TFError(f"an end mask of {end_mask.size} entries for {self.model.V} tokens")
        n = ctypes.c_int64(0)
        self._check(self.lib.n2t_generate(ctypes.byref(self.model), state.rows[row], f.ctypes.data, f.size,
                                          None if end_mask is None else end_mask.ctypes.data, max_new,
                                          out.ctypes.data, ctypes.byref(n)))
        return out[:n.value].tolist()

    def counters(self) -> dict:
        """Work done since the model was loaded: positions computed, products or norms recomputed from
        scratch (their exactness bound failed from the changes alone), blocks of 64 logits scanned
        again for their maximum, weights applied to changed inputs (all, the LM head's)."""
        m = self.model
        return {"positions": int(m.positions), "resets": int(m.resets), "blocks": int(m.blocks_computed),
                "updates": int(m.updates), "head updates": int(m.updates_head)}


# -- the trace interface ----------------------------------------------------------------------------

class FastCache:
    """The executor's cache for one batch: the DeltaNet layers' state (constant size)."""

    def __init__(self, state, batch):
        self.state, self.batch = state, batch


class FastTrace:
    """The fast executor behind the interface the trace hosts call (``netlist2tf.run.host.run_model``,
    ``verify_teacher_forced``, the CPU's model engine): ``generate`` runs whole frames in the C kernel;
    ``model(input_ids=(B, T), cache=...)`` returns ``.logits`` (B, T, vocab, a torch tensor) and
    ``.cache``, feeding the T tokens one position at a time. Either ``kernel`` (the C kernel) or
    ``fast`` (a ``FastModel``: the torch path where no C compiler exists) runs it; torch is imported
    only by the calls that return torch values."""

    def __init__(self, folder, dtype: str, vocab_size: int, kernel: Kernel | None = None, fast=None):
        self.folder, self.dtype_name, self.vocab_size = Path(folder), dtype, vocab_size
        self.kernel, self.fast = kernel, fast

    @functools.cached_property
    def config(self):
        """The checkpoint's config, read by transformers when first asked for (running needs none of
        it: importing transformers takes about as long as the rest of the start-up)."""
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(self.folder)

    @property
    def dtype(self):
        import torch
        return getattr(torch, self.dtype_name)

    def parameters(self):
        import torch
        yield torch.zeros(1, dtype=self.dtype)

    def to(self, device):
        if str(device) != "cpu":
            raise FastUnsupported("the fast executor runs on the CPU only; use --executor stock on a GPU")
        return self

    def state_dict(self):
        raise FastUnsupported("the fast executor has no state dict; resume saved checks with --executor stock")

    @property
    def generates(self) -> bool:
        """True where ``generate`` runs whole frames in the C kernel (netlist2tf.run.host uses it)."""
        return self.kernel is not None

    def new_cache(self, batch: int) -> FastCache:
        return FastCache(self.kernel.state(batch) if self.kernel is not None else self.fast.new_state(batch), batch)

    def generate(self, cache: FastCache, row: int, feed, end_mask, max_new: int) -> list:
        """Feed ``feed`` to batch row ``row``, then generate greedily (each token fed too) until a
        token whose ``end_mask`` entry is set or ``max_new`` tokens (the C kernel: no Python per
        token). With nothing to feed the first token is the greedy choice after the row's last."""
        return self.kernel.generate(cache.state, row, feed, end_mask, max_new)

    def __call__(self, input_ids, cache=None, **kw):
        from types import SimpleNamespace

        import torch

        ids = torch.as_tensor(input_ids)
        B, T = ids.shape
        if cache is None:
            cache = self.new_cache(B)
        logits = torch.empty(B, T, self.vocab_size, dtype=self.dtype)
        with torch.no_grad():
            for t in range(T):
                if self.kernel is not None:
                    logits[:, t] = torch.from_numpy(self.kernel.step(ids[:, t].tolist(), cache.state)[0])
                else:
                    logits[:, t] = self.fast.step(ids[:, t], cache.state)
        return SimpleNamespace(logits=logits, cache=cache)


# -- opening a checkpoint ----------------------------------------------------------------------------

def dtype_name(dtype) -> str | None:
    """"float32" for "float32", torch.float32 or None's default; None stays None."""
    return None if dtype is None else str(dtype).rpartition(".")[2]


def _code_digest() -> str:
    """What an image is derived by: this module, fast.py and step.c."""
    h = hashlib.sha256()
    for f in (Path(__file__), Path(__file__).with_name("fast.py"), CSRC / "step.c"):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def image_path(folder, dtype: str, tree: bool = True) -> Path | None:
    """Where the kernel image of checkpoint ``folder`` run in ``dtype`` is cached: named by the sha256
    of the folder's config and weight files, the dtype and the code that derives it (None where the
    folder has no weights it can name)."""
    from netlist2tf.checkpoint import INDEX, SINGLE, file_digest
    from netlist2tf.common import build_dir

    folder = Path(folder)
    try:
        if (folder / INDEX).is_file():
            files = [INDEX] + sorted(set(json.loads((folder / INDEX).read_text())["weight_map"].values()))
        else:
            files = [SINGLE]
        h = hashlib.sha256(f"{IMAGE_FORMAT}\0{dtype}\0{int(tree)}\0{_code_digest()}".encode())
        for name in ["config.json", *files]:
            h.update(f"\0{name}\0{file_digest(folder / name)}".encode())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return build_dir() / "fast" / "images" / f"{h.hexdigest()[:24]}.img"
