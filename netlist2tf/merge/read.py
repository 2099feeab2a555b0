"""Reading a merged checkpoint back: ``load_merged`` checks its files (the trace side as
``checkpoint.load_checkpoint`` checks it, merge.json's seal over the merged weights and config) and
``MergedTrace`` lets the trace host drive the merged model by trace token numbers while the model still
chooses over its whole vocabulary."""

from pathlib import Path
from types import SimpleNamespace

from netlist2tf.common import Netlist2TFError


class MergedTrace:
    """The trace host's view of a merged model: it is called with trace token numbers (model token
    ``offset + t``) and returns logits over the trace vocabulary plus one last column that wins the
    argmax exactly when the model's own greedy choice over its whole vocabulary is a base token
    (ties go to the base token, as they do in ``torch.argmax`` over the full vocabulary, where base
    tokens come first). ``prefix``: base-vocabulary tokens fed before the first call's tokens (their
    logits are not returned), to run a trace after text. ``interludes``: {k: base-vocabulary tokens}
    fed between trace tokens k - 1 and k (k counts every trace token fed, the prompt's included; batch
    1): text in the middle of a trace, which then continues. The model's choice for trace token k is
    its logits at token k - 1, before the text (the host keeps it across the text and feeds it after);
    the text's own logits are not returned."""

    def __init__(self, model, offset: int, vocab: int, prefix=(), interludes=None):
        self.model, self.offset, self.vocab, self.prefix = model, offset, vocab, list(prefix)
        self.interludes = {int(k): list(v) for k, v in (interludes or {}).items() if v}
        if any(k < 1 for k in self.interludes):
            raise Netlist2TFError("interludes go between trace tokens (k >= 1); text before the trace is the prefix")
        self._end = (None, None)        # generate's last frame-end mask and its whole-vocabulary widening

    @property
    def config(self):
        return self.model.config

    def parameters(self):
        return self.model.parameters()

    def state_dict(self):
        return self.model.state_dict()

    def to(self, device):
        self.model.to(device)
        return self

    @property
    def generates(self) -> bool:
        """True where the model generates whole frames (the fast executor's C kernel)."""
        return getattr(self.model, "generates", False)

    def new_cache(self, batch: int):
        cache = self.model.new_cache(batch)
        cache.fresh = [True] * batch                  # the text prefix is fed before a row's first tokens
        return cache

    def generate(self, cache, row: int, feed, end_mask, max_new: int) -> list:
        """``model.generate`` in trace token numbers: fed ``offset + t`` (after the text prefix on a
        row's first call), ``end_mask`` widened to the whole vocabulary; a base token chosen at a
        trace position is a TraceError, as in ``__call__``."""
        from netlist2tf.compile import TraceError

        ids = [t + self.offset for t in feed]
        if cache.fresh[row]:
            ids, cache.fresh[row] = list(self.prefix) + ids, False
        end = None
        if end_mask is not None:
            if self._end[0] is not end_mask:                           # widened once per mask
                import numpy as np

                wide = np.zeros(self.offset + self.vocab, dtype=np.uint8)
                wide[self.offset:] = np.asarray(end_mask)
                self._end = (end_mask, wide)
            end = self._end[1]
        out = self.model.generate(cache, row, ids, end, max_new)
        if any(t < self.offset for t in out):
            raise TraceError("the merged model's greedy choice at a trace position is a base-vocabulary "
                             "token, not a trace token (the base's logits beat the compiled model's there)")
        return [t - self.offset for t in out]

    def __call__(self, input_ids, cache=None, **kw):
        import torch

        from netlist2tf.compile import TraceError

        if bool((input_ids >= self.vocab).any()):     # the last column: the model chose a base token
            raise TraceError("the merged model's greedy choice at a trace position is a base-vocabulary "
                             "token, not a trace token (the base's logits beat the compiled model's there)")
        ids = input_ids + self.offset
        fed = 0 if cache is None else getattr(cache, "trace_fed", None)
        T = ids.shape[1]
        texts = {0: self.prefix} if cache is None and self.prefix else {}
        if self.interludes:
            if ids.shape[0] != 1:
                raise Netlist2TFError("text between trace tokens (interludes) runs one batch row at a time")
            if fed is None:
                raise Netlist2TFError("a merged model with interludes continues only caches it returned")
            texts |= {k - fed: v for k, v in self.interludes.items() if fed <= k < fed + T}
        keep = torch.arange(T)
        if texts:
            pieces, at = [], 0
            for j in sorted(texts):
                pieces += [ids[:, at:j], torch.tensor([texts[j]], dtype=ids.dtype, device=ids.device).expand(ids.shape[0], -1)]
                keep[j:] += len(texts[j])
                at = j
            ids = torch.cat(pieces + [ids[:, at:]], dim=1)
        out = self.model(input_ids=ids, cache=cache, **kw)
        if out.cache is not None:
            out.cache.trace_fed = (fed or 0) + T
        logits = out.logits[:, keep.to(out.logits.device)]
        trace = logits[..., self.offset:self.offset + self.vocab]
        best_base = logits[..., :self.offset].max(dim=-1).values
        base_wins = best_base >= trace.max(dim=-1).values
        column = torch.where(base_wins, torch.full_like(best_base, float("inf")), best_base)
        return SimpleNamespace(logits=torch.cat([trace, column.unsqueeze(-1)], dim=-1), cache=out.cache)


def text_prefix_tokens(folder, n: int, seed: int = 0) -> list:
    """n random base-vocabulary token ids of a merged checkpoint (numpy's default_rng(seed)): the
    text put before a trace by ``verify --text-prefix`` and ``cpu run --text-prefix``."""
    if not n:
        return []
    import numpy as np
    from netlist2tf.checkpoint import read_meta
    offset = read_meta(folder, "merge.json")["trace_token_offset"]
    return np.random.default_rng(seed).integers(0, offset, n).tolist()


def is_merged(folder) -> bool:
    return (Path(folder) / "merge.json").is_file()


def load_merged(folder, dtype=None, prefix=(), interludes=None, model=None):
    """(MergedTrace, protocol, netlist, initial registers, compile meta, merge info) of a merged
    checkpoint folder. Raises Netlist2TFError naming a missing, malformed or changed file (the trace
    side is read and checked as ``emit.load_checkpoint`` reads it; merge.json seals the merged weights
    and config). ``model``: called with (folder, dtype) to load the merged weights (the fast executor
    passes its own); stock transformers when None. Callers that run a checkpoint open it with
    ``netlist2tf.run.open_checkpoint``."""
    from netlist2tf.checkpoint import check_seal, load_hf_model, read_meta, trace_side
    from netlist2tf.merge.merge import FORMAT, MERGED_SEALED

    folder = Path(folder)
    for name in ("config.json", "compile.json", "netlist.json", "merge.json", "trace_protocol.json"):
        if not (folder / name).is_file():
            raise Netlist2TFError(f"{folder} is not a merged netlist2tf checkpoint: {name} is missing; "
                                  f"create one with `netlist2tf merge`")
    meta, info = read_meta(folder), read_meta(folder, "merge.json")
    if info.get("format") != FORMAT:
        raise Netlist2TFError(f"{folder} was merged by another netlist2tf version (format "
                              f"{info.get('format')!r}, this one reads {FORMAT}); merge it again")
    sealed = info.get("sealed", MERGED_SEALED)
    if not isinstance(sealed, list) or "config.json" not in sealed:
        sealed = MERGED_SEALED
    for name in sealed:
        if not (folder / name).is_file():
            raise Netlist2TFError(f"{folder} is not a complete merged checkpoint: {name} is missing; "
                                  f"merge it again")
    check_seal(folder, info.get("sha256"), sealed, "merge.json")
    protocol, netlist = trace_side(folder, meta, ("trace_protocol.json", "netlist.json"))
    if protocol.vocab_size != info["trace_vocab_size"]:
        raise Netlist2TFError(f"{folder}: merge.json's trace vocabulary ({info['trace_vocab_size']}) does "
                              f"not match its trace protocol ({protocol.vocab_size}); merge it again")
    bad = [t for t in list(prefix) + [t for v in (interludes or {}).values() for t in v]
           if not 0 <= t < info["trace_token_offset"]]
    if bad:
        raise Netlist2TFError(f"text prefix tokens {bad[:5]} are not base-vocabulary tokens "
                              f"(0..{info['trace_token_offset'] - 1})")
    dtype = dtype or info["dtype"]
    if model is None:                 # stock transformers (the fast executor takes the dtype's name)
        import torch

        dtype, model = (getattr(torch, dtype) if isinstance(dtype, str) else dtype), load_hf_model
    model = model(folder, dtype)
    meta["initial_memory"] = {name: {int(a): w for a, w in words.items()}
                              for name, words in meta.get("initial_memory", {}).items()}
    return (MergedTrace(model, info["trace_token_offset"], protocol.vocab_size, prefix, interludes), protocol, netlist,
            meta["initial_registers"], meta, info)
