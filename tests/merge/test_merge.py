"""The merge: a compiled checkpoint's layers in front of a Qwen3.5 checkpoint.

Oracles: the base model itself, run by ``transformers`` (text-only prompts: the merged model's logits
over the base vocabulary must be the base's within the base's own float32 / bfloat16 noise, measured
against float64 in the same test), the base checkpoint's tensors (every one must be found in the merged
file at its place, with its value), and the netlist simulator (the trace on the merged model, with and
without text before it, in every mode)."""

import hashlib
import json
import math

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from netlist2tf import cli
from netlist2tf.compile.plan import CompileSettings
from netlist2tf.driver import compile_netlist
from netlist2tf.checkpoint.emit import emit_checkpoint
from netlist2tf.common.errors import Netlist2TFError
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.merge import load_merged, make_base, merge_checkpoints
from netlist2tf.run import open_checkpoint
from netlist2tf.merge.merge import FLAG_SHUT, WRITES
from netlist2tf.weights.signed import bits_layout_of
from netlist2tf.compile.target import Target
from netlist2tf.run.verify import expected_tokens, verify_model, verify_teacher_forced

# Qwen3.5's published shapes in miniature: DeltaNet key/value heads of 128, two value heads per key
# head, attention heads of 64 grouped 2:1, the [linear x3, full] pattern.
QWEN_LIKE = {"model_type": "qwen3_5_text", "hidden_size": 384, "intermediate_size": 192,
             "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
             "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 128,
             "linear_value_head_dim": 128, "vocab_size": 300,
             "layer_types": ["linear_attention"] * 3 + ["full_attention"]}
BASE_VOCAB = 300


@pytest.fixture(scope="module")
def merged(tmp_path_factory, build_dir):
    """(base folder, compiled folder, merged folder, merge info): a random Qwen3.5-shaped base; the
    FIFO (a memory: DeltaNet writes) compiled onto its shapes with ``--target``; the two merged."""
    root = tmp_path_factory.mktemp("merge")
    base = make_base(root / "base", QWEN_LIKE, hidden_size=384, layers=4, intermediate_size=192,
                     vocab_size=BASE_VOCAB, seed=3)
    result = synthesize("hdl.examples.fifo:FIFO", "macro", build_dir)
    compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=8, target=Target.from_config_json(base, layers=8)), prove=False)
    folder = emit_checkpoint(compiled, result.json_text, root / "fifo")
    info = merge_checkpoints(folder, base, root / "merged")
    return base, folder, root / "merged", info


@pytest.fixture(scope="module")
def pair_twin(merged, build_dir, tmp_path_factory):
    """The merged FIFO compiled again with ``bits="pairs"`` (two channels a bit, the compiler's gadgets
    written directly), and merged in front of the same base: the merge keeps signed bits signed and
    pairs as pairs, and both must hold. (base, compiled, merged, info) like ``merged``."""
    base = merged[0]
    root = tmp_path_factory.mktemp("twin")
    result = synthesize("hdl.examples.fifo:FIFO", "macro", build_dir)
    compiled = compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=8, target=Target.from_config_json(base, layers=8), bits="pairs"), prove=False)
    folder = emit_checkpoint(compiled, result.json_text, root / "fifo")
    return base, folder, root / "merged", merge_checkpoints(folder, base, root / "merged")


def _logits(folder, ids, dtype):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()
    with torch.no_grad():
        return model(input_ids=ids).logits.double()


def test_text_logits_are_the_base_models(merged):
    """On text-only prompts the merged model computes the base model: its logits over the base
    vocabulary differ from the base's exact (float64) ones no more than the base's own do in the
    same dtype, and the trace tokens never come near winning."""
    base, _, out, info = merged
    ids = torch.randint(0, BASE_VOCAB, (3, 48), generator=torch.Generator().manual_seed(7))
    exact = _logits(base, ids, torch.float64)
    for dtype in (torch.float32, torch.bfloat16):
        own = (_logits(base, ids, dtype) - exact).abs().max().item()
        m = _logits(out, ids, dtype)
        ours = (m[..., :BASE_VOCAB] - exact).abs().max().item()
        assert ours <= 3 * own, (dtype, ours, own)
        assert (m[..., BASE_VOCAB:].max(-1).values < m[..., :BASE_VOCAB].max(-1).values - 1000).all()
    # and greedy text generation is the base's
    from transformers import AutoModelForCausalLM
    outs = [AutoModelForCausalLM.from_pretrained(f).eval().generate(ids[:, :8], max_new_tokens=12,
                                                                    do_sample=False) for f in (base, out)]
    assert torch.equal(outs[0], outs[1])


@pytest.fixture(scope="module")
def merged_separate(merged, tmp_path_factory):
    """``merged``'s compiled model and base merged with ``--layout separate`` (nothing shared)."""
    base, compiled, _, _ = merged
    out = tmp_path_factory.mktemp("merge-separate") / "merged"
    return base, compiled, out, merge_checkpoints(compiled, base, out, layout="separate")


def _trace_vectors(compiled, n: int = 64) -> torch.Tensor:
    """n residual vectors a trace position of the compiled model can hold where a layer reads it:
    channel 0 the constant 1, every bit random: as a pair (2k + 1, 2k + 2) = (b, 1 - b), or as a signed
    channel k + 1 = 2b - 1; the rest 0 (the compiled weights read nothing else: the merge checks it).
    Float64, (n, P)."""
    emb = safe_open(str(compiled / "model.safetensors"), "pt").get_tensor("model.embed_tokens.weight")
    anchors = int(((emb == emb[0]).all(dim=0) & (emb[0] >= 2)).nonzero()[0])
    signed = bool((emb[:, 1:anchors] < 0).any())
    bits = torch.randint(0, 2, (n, anchors - 1 if signed else (anchors - 1) // 2),
                         generator=torch.Generator().manual_seed(4)).double()
    x = torch.zeros(n, anchors, dtype=torch.float64)
    x[:, 0] = 1
    if signed:
        x[:, 1:] = 2 * bits - 1
    else:
        x[:, 1::2], x[:, 2::2] = bits, 1 - bits
    return x


@pytest.mark.parametrize("which", ["merged", "merged_separate", "pair_twin"], ids=["shared", "separate", "pairs"])
def test_base_weights_keep_their_values(which, request):
    """Every base tensor is in the merged file at its layer and channels, bit for bit (the embedding and
    the residual-writing projections times the residual scale, a power of two: exact), the norms
    compensated; nothing else of a base layer is non-zero. Every compiled tensor computes, on every
    residual a trace position can hold (mapped to the merged channels), what it computed in the
    compiled model the merge read, in float64; on the shared layout the last compiled FFN also leaves 0
    on every channel the base reads, and the compiled tensors that gate a sublayer read nothing text
    carries. The compiled FIFO holds its bits signed (the default: kept signed, one channel a bit) and,
    compiled again with ``bits="pairs"``, as pairs."""
    base, compiled, out, info = request.getfixturevalue(which)
    signed = bits_layout_of(safe_open(str(compiled / "model.safetensors"), "pt").get_tensor(
        "model.embed_tokens.weight")).signed
    assert signed == (which != "pair_twin") == info["channels"]["signed"]
    b = safe_open(str(base / "model.safetensors"), "pt")
    c = safe_open(str(compiled / "model.safetensors"), "pt")
    m = safe_open(str(out / "model.safetensors"), "pt")
    s, comp = info["residual_scale"], info["norm_compensation"]
    assert s in (1, 2, 4, 8, 16)
    ch = info["channels"]
    assert info["layout"] == ch["layout"] == {"merged_separate": "separate"}.get(which, "shared")
    assert info["not_shared_because"] == (["--layout separate"] if which == "merged_separate" else [])
    lo, hi = ch["base"]
    n_cpu = info["layers"]["compiled"][1]
    checked = 0
    for key in b.keys():
        t = b.get_tensor(key)
        if key.startswith("model.layers."):
            i, rest = key[len("model.layers."):].split(".", 1)
            mkey = f"model.layers.{int(i) + n_cpu}.{rest}"
        else:
            mkey = key
        got = m.get_tensor(mkey)
        if key.endswith("layernorm.weight") or key == "model.norm.weight":
            assert torch.allclose(1 + got[lo:hi].double(), (1 + t.double()) * comp, rtol=1e-6, atol=0)
            assert key == "model.norm.weight" or (not got[:lo].any() and not got[hi:].any())
            continue
        if key == "model.embed_tokens.weight":
            assert torch.equal(got[:BASE_VOCAB, lo:hi], t * s)
            assert torch.equal(m.get_tensor("lm_head.weight")[:BASE_VOCAB, lo:hi], t)   # untied
            checked += 1
            continue
        want = t * s if rest.endswith(WRITES) else t
        dims = [(d, n) for d, n in enumerate(t.shape) if n == 384]         # the hidden axes
        index = tuple(slice(lo, hi) if any(d == k for k, _ in dims) else slice(0, n)
                      for d, n in enumerate(t.shape))
        assert torch.equal(got[index], want), key
        outside = got.clone()
        outside[index] = 0
        assert not outside.any(), key
        checked += 1
    assert checked > 20

    x = _trace_vectors(compiled)
    P = x.shape[1]
    cmap = torch.tensor(ch["compiled_map"] if ch["layout"] == "shared" else list(range(P)))
    xm = torch.zeros(len(x), info["hidden_size"], dtype=torch.float64)
    xm[:, cmap] = x
    a0, a1 = ch["anchors"]                                   # and the merged anchors
    xm[:, a0:a1] = m.get_tensor("model.embed_tokens.weight")[BASE_VOCAB, a0:a1].double()
    unused = torch.ones(info["hidden_size"], dtype=torch.bool)
    unused[cmap] = False
    unused[ch["flag"]] = False
    last = f"model.layers.{n_cpu - 1}.mlp."
    reads = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "in_proj_qkv.weight", "in_proj_z.weight",
             "in_proj_b.weight", "in_proj_a.weight", "gate_proj.weight", "up_proj.weight")
    for key in c.keys():
        t, got = c.get_tensor(key).double(), m.get_tensor(key).double()
        if not key.startswith("model.layers.") or t.dim() != 2 or (ch["layout"] == "shared" and key.startswith(last)):
            continue
        if key.endswith(reads):
            assert torch.equal(got[:len(t)] @ xm.T, t[:, :P] @ x.T), key
            assert not got[len(t):].any() and not got[:, unused].any(), key
            if not key.endswith(FLAG_SHUT):
                assert not got[:, ch["flag"]].any(), key
            else:   # the text flag shuts DeltaNet writes and output gates: on every base token (the
                    # compiled layers' input there is its embedding) the write strength's logit, and
                    # every output gate that reads channels text carries, is <= -128 (sigmoid/silu 0)
                shut = got[:, ch["flag"]] != 0
                assert "in_proj_b" not in key or shut.all(), key
                assert not got[~shut][:, lo:hi].any(), key
                e = m.get_tensor("model.embed_tokens.weight").double()[:BASE_VOCAB]
                w = m.get_tensor(key.split(".linear_attn.")[0] + ".input_layernorm.weight").double()
                xhat = e * torch.rsqrt((e ** 2).mean(dim=1, keepdim=True) + 1e-6) * (1 + w)
                assert (xhat @ got[shut].T <= -128).all(), key
        elif key.endswith("proj.weight"):                        # writes the residual
            assert torch.equal(got[cmap, :t.shape[1]], t[:P]), key
            rest = got.clone()
            rest[cmap, :t.shape[1]] = 0
            assert not rest.any(), key
    for key in ("model.embed_tokens.weight", "lm_head.weight"):
        t, got = c.get_tensor(key).double(), m.get_tensor(key).double()[BASE_VOCAB:]
        if key == "lm_head.weight":
            if ch["layout"] == "separate":               # (shared: on the final residual, below)
                assert torch.equal(got @ xm.T, t[:, :P] @ x.T)
        else:
            assert torch.equal(got[:, cmap], t[:, :P]) and (got ** 2).mean(dim=1).eq(64).all()
    if ch["layout"] == "shared":
        _check_trace_end(compiled, out, info, signed)
        assert info["hidden_size"] < 384 + P                 # not the sum of both widths


def _check_trace_end(compiled, out, info, signed):
    """On a real trace of the shared layout: the last compiled FFN leaves 0 on every channel the base
    reads, 2b - 1 on the reserved bit channels (a signed bit holds it already), o on ``one`` and the
    group code's bits; the logits over the trace vocabulary are the compiled model's bit for bit on the
    emitted group's tokens and at most the compiled model's elsewhere."""
    ch, n_cpu = info["channels"], info["layers"]["compiled"][1]
    cmap = torch.tensor(ch["compiled_map"])
    from transformers import AutoModelForCausalLM

    _, protocol, netlist, inits, meta, _ = load_merged(out)
    ids = torch.tensor(expected_tokens(protocol, netlist, inits, 12, 1, 4, meta["initial_memory"])[0])
    runs = []
    for folder, offset in ((compiled, 0), (out, BASE_VOCAB)):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        seen = []
        hook = model.model.layers[n_cpu - 1].mlp.register_forward_hook(
            lambda mod, args, result: seen.append((args[0] + result).double()))   # its input is the residual
        with torch.no_grad():
            logits = model(input_ids=ids + offset).logits
        hook.remove()
        runs.append((seen[0][0], logits[0, :, offset:offset + info["trace_vocab_size"]]))
    (want, logits_c), (after, logits_m) = runs
    reserved = torch.arange(*ch["reserved"])
    assert not after[:, :reserved[0]].any()          # the base reads zeros on a trace position
    code = ch["group_code"]              # the FIFO's 6 emit flags, read through a 3-bit code
    flags, (c0, c1) = code["flags"], code["channels"]
    assert len(flags) == 6 and c1 - c0 == 3 and c1 == reserved[-1] + 1
    assert all(cmap[f] < ch["shared"][1] for f in flags)  # the flags themselves are shared
    assert reserved[0] == ch["one"] and (after[:, ch["one"]] == info["final_norm"]["one"]).all()
    kept = reserved[1:c0 - reserved[0]]
    cols = [int((cmap == r).nonzero()) for r in kept]
    assert torch.equal(after[:, kept], want[:, cols] if signed else 2 * want[:, cols] - 1)  # bits: 2b - 1
    # the code: the compiled model's flags after its last FFN (at most one set: the compiler's
    # token selection), flag i's word i + 1 in binary, +1 / -1 per bit
    b = (want[:, flags] + 1) / 2 if signed else want[:, flags]
    assert (b.sum(dim=1) <= 1).all() and (b.sum(dim=1) == 1).sum() > len(ids) // 2
    word = (b * torch.arange(1, len(flags) + 1, dtype=b.dtype)).sum(dim=1).long()
    expect = torch.stack([2.0 * ((word >> j) & 1) - 1 for j in range(c1 - c0)], dim=1).double()
    assert torch.equal(after[:, c0:c1], expect)
    # the logits over the trace vocabulary: the emitted group's tokens' are the compiled model's
    # bit for bit, every other token's at most the compiled model's, so the argmax is the same
    head = safe_open(str(compiled / "model.safetensors"), "pt").get_tensor("lm_head.weight").double()
    group = head[:, flags] != 0                      # (token, flag): the flag a token's row reads
    mine = (group.double() @ b.T).T.bool()           # (position, token): its group's flag is set
    assert torch.equal(logits_m[mine], logits_c[mine]) and (logits_m <= logits_c).all()
    assert torch.equal(logits_m.argmax(dim=1), logits_c.argmax(dim=1))


@pytest.mark.parametrize("dtype,prefill,batch,prefix", [      # token by token in bfloat16: ~40 s here
    (torch.float32, True, 2, 0), pytest.param(torch.bfloat16, False, 1, 0, marks=pytest.mark.slow),
    (torch.float32, True, 1, 9), pytest.param(torch.bfloat16, True, 1, 5, marks=pytest.mark.slow)])
def test_trace_on_the_merged_model(merged, dtype, prefill, batch, prefix):
    """The compiled design inside the merged model equals the netlist simulator on every output and
    register, choosing among the whole vocabulary (base tokens included), also after text."""
    _, _, out, _ = merged
    text = torch.randint(0, BASE_VOCAB, (prefix,), generator=torch.Generator().manual_seed(prefix)).tolist()
    model, protocol, netlist, inits, meta, info = load_merged(out, dtype, prefix=text)
    div, run = verify_model(model, protocol, netlist, inits, 25, batch, seed=1, prefill=prefill,
                            initial_memory=meta["initial_memory"])
    assert div is None, str(div)
    div, n = verify_teacher_forced(model, protocol, netlist, inits, 60, batch, 2, meta["initial_memory"],
                                   window=100)
    assert div is None and n > 0, str(div)


def test_the_final_norm_leaves_powers_of_two():
    """A shared layout's final norm maps a trace position's residual (``one`` = o, the other reserved
    channels +-1, the rest 0) to exactly o v and +-v, v and o powers of two, for every hidden size from
    the test bases' to 9B's and reserved counts from the FIFO's to the CPU's, in float32 and bfloat16,
    run through transformers' own Qwen3_5RMSNorm; float32 needs o > 1 for some widths."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5RMSNorm

    from netlist2tf.merge.merge import _unit_norm_weight

    seen = set()
    for D in list(range(380, 420)) + [1755, 2103, 2586, 2615, 4122, 4151]:
        for ones in (13, 26, 54):
            for dtype in (torch.float32, torch.bfloat16):
                w, v, o = _unit_norm_weight(D, ones, 1e-6, dtype)
                norm = Qwen3_5RMSNorm(D, eps=1e-6).to(dtype)
                x = torch.zeros(3, D, dtype=dtype)
                x[:, :ones] = torch.tensor([1.0, -1.0, 1.0])[:, None]
                x[:, ones - 1] = o
                x[2, ones + 5] = 0.0
                with torch.no_grad():
                    norm.weight.fill_(w)
                    y = norm(x).double()
                assert torch.equal(y[:, :ones - 1], x[:, :ones - 1].double() * v) and (y[:, ones - 1] == o * v).all()
                assert not y[:, ones:].any()
                assert math.log2(v).is_integer() and math.log2(o).is_integer()
                seen.add((dtype, o))
    assert (torch.float32, 1.0) in seen and any(d == torch.float32 and o > 1 for d, o in seen)
    assert {o for d, o in seen if d == torch.bfloat16} == {1.0}


def test_a_final_norm_that_needs_one_above_1(merged, tmp_path, monkeypatch):
    """Where no float32 weight maps +-1 to a power of two, ``one`` ends the compiled layers at 2 (or 4,
    ...): forced here, the merged FIFO still traces exactly, generated and teacher-forced."""
    import netlist2tf.merge.merge as merge

    base, compiled, _, _ = merged
    monkeypatch.setattr(merge, "NORM_ONE_VALUES", (2.0, 4.0, 8.0))
    info = merge_checkpoints(compiled, base, tmp_path / "two")
    assert info["final_norm"]["one"] in (2.0, 4.0, 8.0)
    model, protocol, netlist, inits, meta, _ = load_merged(tmp_path / "two", torch.float32)
    div, _ = verify_model(model, protocol, netlist, inits, 20, 2, seed=3, initial_memory=meta["initial_memory"])
    assert div is None, str(div)
    div, n = verify_teacher_forced(model, protocol, netlist, inits, 40, 2, 2, meta["initial_memory"], window=100)
    assert div is None and n > 0, str(div)
    _check_trace_end(compiled, tmp_path / "two", info, True)


def test_pairs_merge_and_a_read_split_over_an_anchor(merged, pair_twin, tmp_path, monkeypatch):
    """The merge keeps pairs as pairs (the FIFO compiled with ``bits="pairs"``: exact in its merged
    model), and a signed model whose read splits a constant over an anchor (what ``signed.fold_state``
    does where a constant is not exact in bfloat16) is unfolded into pairs, since the merge re-chooses
    the anchors: a layer-0 FFN row's constant moved onto the 127 anchor, the merged model still exact."""
    from netlist2tf.merge.merge import _Checkpoint

    base, compiled, _, _ = merged
    layout = bits_layout_of(safe_open(str(compiled / "model.safetensors"), "pt").get_tensor(
        "model.embed_tokens.weight"))
    col, value = max(layout.anchors, key=lambda a: a[1])
    key = "model.layers.0.mlp.gate_proj.weight"
    get = _Checkpoint.get

    def split(self, k):
        t = get(self, k)
        if self.role == "compiled checkpoint" and k == key:
            t = t.clone()
            r = int(torch.nonzero(t[:, layout.one])[0])
            t[r, layout.one] -= value                 # the same constant on a trace position: -value + value * 1
            t[r, col] += 1
        return t

    monkeypatch.setattr(_Checkpoint, "get", split)
    monkeypatch.setattr(_Checkpoint, "columns", lambda self, k, lo, hi: split(self, k)[:, lo:hi])
    info = merge_checkpoints(compiled, base, tmp_path / "split")
    monkeypatch.undo()
    assert info["layout"] == "shared" and not info["channels"]["signed"]
    for folder in (tmp_path / "split", pair_twin[2]):
        model, protocol, netlist, inits, meta, _ = load_merged(folder, torch.float32)
        div, n = verify_teacher_forced(model, protocol, netlist, inits, 40, 2, 2, meta["initial_memory"],
                                       window=100)
        assert div is None and n > 0, str(div)


@pytest.mark.parametrize("prefill", [True, False], ids=["prefill", "token-by-token"])
def test_the_trace_continues_after_text(merged, prefill):
    """Trace, text, trace in one sequence: text put between two frames (and in the middle of one) of
    the FIFO's trace, the trace then goes on equal to the netlist simulator, generated (the host keeps
    the model's pending choice across the text) and teacher-forced; at every trace position the greedy
    choice over the whole vocabulary is the one without the text (the logits themselves are scaled: the
    base layers now see text, and the final norm divides by a larger mean square)."""
    from netlist2tf.merge import MergedTrace

    base, _, out, info = merged
    model, protocol, netlist, inits, meta, _ = load_merged(out)
    rows, generated, frames = expected_tokens(protocol, netlist, inits, 30, 1, 4, meta["initial_memory"])
    starts = [start for _, start in frames[0]]
    text = torch.randint(0, BASE_VOCAB, (20,), generator=torch.Generator().manual_seed(3)).tolist()
    interludes = {starts[8]: text[:7], starts[17] + 2: text[7:], starts[25]: [5]}
    spliced = MergedTrace(model.model, model.offset, model.vocab, interludes=interludes)
    div, run = verify_model(spliced, protocol, netlist, inits, 30, 1, seed=4, prefill=prefill,
                            initial_memory=meta["initial_memory"])
    assert div is None, str(div)
    div, n = verify_teacher_forced(spliced, protocol, netlist, inits, 30, 1, 4, meta["initial_memory"], window=64)
    assert div is None and n > 0, str(div)
    ids = torch.tensor(rows)
    with torch.no_grad():
        plain, got = model(ids).logits, spliced(ids).logits
        assert got.shape == plain.shape and torch.equal(got.argmax(-1), plain.argmax(-1))
        assert not torch.equal(got, plain)                   # the text was there
    with pytest.raises(Netlist2TFError, match="one batch row"):
        spliced(ids.expand(2, -1))


def test_text_leaves_the_compiled_state_alone(merged):
    """Text after a trace does not touch the compiled DeltaNet memories (registers and the FIFO's RAM),
    although the short convolution still shows it the trace tokens: every compiled layer's recurrent
    state after 7 text tokens is the state the trace left, bit for bit (the text flag also holds every
    compiled write strength at exactly 0 there); one more trace frame instead does change it."""
    _, _, out, info = merged
    model, protocol, netlist, inits, meta, _ = load_merged(out)
    hf, offset = model.model, info["trace_token_offset"]
    trace = expected_tokens(protocol, netlist, inits, 20, 1, 4, meta["initial_memory"])[0][0]  # 20 cycles
    cut = len(trace) - protocol.tokens_per_cycle
    linear = [i for i, t in enumerate(hf.config.layer_types[:info["layers"]["compiled"][1]])
              if t == "linear_attention"]

    def states_after(more):
        with torch.no_grad():
            cache = hf(input_ids=torch.tensor([trace[:cut]]) + offset, use_cache=True).cache
            before = [cache.get_recurrent_state(i, state_idx=0).clone() for i in linear]
            cache = hf(input_ids=torch.tensor([more]), cache=cache, use_cache=True).cache
            return before, [cache.get_recurrent_state(i, state_idx=0) for i in linear]

    before, after = states_after([3, 141, 59, 26, 5, 35, 89])
    assert any(b.any() for b in before)                       # the trace wrote something
    assert all(torch.equal(b, a) for b, a in zip(before, after))
    before, after = states_after([t + offset for t in trace[cut:]])      # the last frame: it writes
    assert not all(torch.equal(b, a) for b, a in zip(before, after))


def test_a_base_token_winning_is_caught(merged):
    """The host sees a base token win (ties included) as a trace error, not as some trace token."""
    _, _, out, _ = merged
    model, protocol, netlist, inits, meta, info = load_merged(out)
    lm = model.model.lm_head.weight
    with torch.no_grad():
        keep = lm[:BASE_VOCAB].clone()
        lm[:BASE_VOCAB] = 0            # base tokens now score 0 at trace positions: they win ties
        lm[5, info["channels"].get("one", 0)] = 1e6       # and base token 5 wins outright (`one`: 1 on a trace)
        try:
            div, _ = verify_model(model, protocol, netlist, inits, 5, 1, 0,
                                  initial_memory=meta["initial_memory"])
        except Netlist2TFError as exc:
            assert "base-vocabulary token" in str(exc)
        else:
            assert div is not None
        finally:
            lm[:BASE_VOCAB] = keep


def test_merge_is_deterministic(merged, tmp_path):
    base, compiled, out, _ = merged
    again = tmp_path / "again"
    merge_checkpoints(compiled, base, again)
    for name in ("model.safetensors", "config.json", "merge.json"):
        if name == "merge.json":        # records the folders it came from; the rest is the same
            a, b = (json.loads((f / name).read_text()) for f in (out, again))
            assert {k: v for k, v in a.items() if k != "base"} == {k: v for k, v in b.items() if k != "base"}
            continue
        assert hashlib.sha256((out / name).read_bytes()).digest() == \
            hashlib.sha256((again / name).read_bytes()).digest(), name


@pytest.fixture(scope="module")
def merged_multimodal(merged, tmp_path_factory):
    """(base, merged folder, merge info): a random base in the published multimodal layout (a vision
    tower, an MTP head, shards with an index, a tokenizer with a chat template) with the same text
    shapes as ``merged``'s, and the compiled FIFO merged in front of it."""
    root = tmp_path_factory.mktemp("merge-mm")
    base = make_base(root / "base", QWEN_LIKE, hidden_size=384, layers=4, intermediate_size=192,
                     vocab_size=BASE_VOCAB, seed=5, multimodal=True, shard_bytes=1 << 20)
    info = merge_checkpoints(merged[1], base, root / "merged")
    return base, root / "merged", info


def _tensors(folder) -> dict:
    """{key: tensor} of every weight of a checkpoint folder (one file or shards)."""
    from netlist2tf.checkpoint.weightfiles import WeightFiles
    w = WeightFiles(folder)
    return {k: w.get(k) for k in w.keys()}


def test_multimodal_base_round_trip(merged_multimodal):
    """A multimodal base gives a multimodal merged model of the same layout: Qwen3_5ForConditionalGeneration,
    text weights under model.language_model., shards with an index; every vision and MTP tensor bit
    for bit, but the vision merger's output projection, which is the base's placed on the base
    channels times s (its bias also writes the text flag); the tokenizer and chat template copied
    with the trace tokens added as special tokens at offset + t."""
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    from netlist2tf.checkpoint.weightfiles import INDEX

    base, out, info = merged_multimodal
    doc = json.loads((out / "config.json").read_text())
    assert doc["model_type"] == "qwen3_5" and doc["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    D, (B0, end), flag, s = info["hidden_size"], info["channels"]["base"], info["channels"]["flag"], info["residual_scale"]
    assert doc["text_config"]["hidden_size"] == doc["vision_config"]["out_hidden_size"] == D
    assert end - B0 == 384
    assert doc["text_config"]["mtp_num_hidden_layers"] == 1 and doc["tie_word_embeddings"] is False
    assert (out / INDEX).is_file() and len(info["sealed"]) > 3
    before, after = _tensors(base), _tensors(out)
    outside = sorted(k for k in before if not k.startswith("model.language_model."))
    assert any(k.startswith("mtp.") for k in outside) and any(k.startswith("model.visual.") for k in outside)
    for k in outside:
        if k.startswith("model.visual.merger.linear_fc2."):
            t = after[k]
            assert t.shape[0] == D and torch.equal(t[B0:end], before[k] * s), k
            rest = t.clone()
            rest[B0:end] = 0
            if k.endswith("bias"):
                assert float(t[flag]) == float(torch.tensor(info["text_flag"], dtype=t.dtype))
                rest[flag] = 0
            assert not rest.any(), k
        else:
            assert after[k].dtype == before[k].dtype and torch.equal(after[k], before[k]), k
    assert any(k.startswith("model.language_model.layers.") for k in after)
    model = AutoModelForImageTextToText.from_pretrained(out).eval()
    assert type(model).__name__ == "Qwen3_5ForConditionalGeneration"

    # the tokenizer: the base's tokens unchanged, the trace tokens special at offset + t
    tok, base_tok = AutoTokenizer.from_pretrained(out), AutoTokenizer.from_pretrained(base)
    assert (out / "chat_template.jinja").read_text() == (base / "chat_template.jinja").read_text()
    chat = [{"role": "user", "content": "w5 w7"}]
    assert tok.apply_chat_template(chat, tokenize=False) == base_tok.apply_chat_template(chat, tokenize=False)
    assert tok("w1 w2 <|im_end|>")["input_ids"] == base_tok("w1 w2 <|im_end|>")["input_ids"]
    names = [tok.convert_ids_to_tokens(info["trace_token_offset"] + t) for t in range(3)]
    assert len(tok) == BASE_VOCAB + info["trace_vocab_size"]
    off = info["trace_token_offset"]
    assert all(tok.added_tokens_decoder[off + t].special and tok.added_tokens_decoder[off + t].content == n
               for t, n in enumerate(names)), names
    assert tok.decode([off, 1, off + 1], skip_special_tokens=True).strip() == "w1"
    assert tok.encode(" ".join(names)) == [info["trace_token_offset"] + t for t in range(3)]


def _image_prompt(cfg, length=12):
    """(input_ids, pixel_values, image_grid_thw, mm_token_type_ids): random base text around one 8x8-pixel image (a 2x2
    grid of patches of 4: one merged image token), in the Qwen3.5 processor's format."""
    g = torch.Generator().manual_seed(11)
    v = cfg.vision_config
    grid = torch.tensor([[1, 4, 4]])
    n_tokens = int(grid.prod()) // v.spatial_merge_size ** 2
    pixels = torch.randn(int(grid.prod()), v.in_channels * v.temporal_patch_size * v.patch_size ** 2, generator=g)
    text = torch.randint(0, BASE_VOCAB - 6, (length,), generator=g).tolist()
    ids = text[:4] + [cfg.vision_start_token_id] + [cfg.image_token_id] * n_tokens + [cfg.vision_end_token_id] + text[4:]
    kinds = [1 if t == cfg.image_token_id else 0 for t in ids]      # the processor's mm_token_type_ids
    return torch.tensor([ids]), pixels, grid, torch.tensor([kinds])


def test_multimodal_merged_model_sees_images_as_the_base_does(merged_multimodal):
    """With an image in the prompt, the merged multimodal model's logits over the base vocabulary are
    the base's (float64 oracle) within the base's own float32 error, at every position; and the
    compiled FIFO still runs exactly in the merged multimodal folder (stock transformers and the fast
    executor, teacher-forced)."""
    from transformers import AutoModelForImageTextToText

    base, out, info = merged_multimodal
    runs = {}
    for folder, dtype in ((base, torch.float64), (base, torch.float32), (out, torch.float32)):
        m = AutoModelForImageTextToText.from_pretrained(folder, dtype=dtype).eval()
        ids, pixels, grid, kinds = _image_prompt(m.config)
        with torch.no_grad():
            runs[folder, dtype] = m(input_ids=ids, pixel_values=pixels.to(dtype), image_grid_thw=grid,
                                    mm_token_type_ids=kinds).logits.double()
    exact = runs[base, torch.float64]
    own = (runs[base, torch.float32] - exact).abs().max().item()
    ours = (runs[out, torch.float32][..., :BASE_VOCAB] - exact).abs().max().item()
    assert 0 < ours <= 3 * own, (ours, own)
    for executor in ("stock", "fast"):
        model, protocol, netlist, inits, meta, ran = open_checkpoint(out, torch.float32, executor)
        assert ran == executor          # the fast executor runs the merged multimodal folder, no fallback
        div, n = verify_teacher_forced(model, protocol, netlist, inits, 40, 2, 2, meta["initial_memory"],
                                       window=100)
        assert div is None and n > 0, (executor, str(div))


def test_merge_errors(merged, tmp_path, build_dir):
    base, compiled, out, _ = merged
    # shapes Qwen3.5 shares between layers differ: every number named, and the fix
    other = make_base(tmp_path / "other", {**QWEN_LIKE, "linear_value_head_dim": 64, "head_dim": 32},
                      hidden_size=64, layers=1, intermediate_size=32, vocab_size=50)
    with pytest.raises(Netlist2TFError, match=r"head_dim: compiled 64, base 32; linear_value_head_dim: "
                                              r"compiled 128, base 64.*--target"):
        merge_checkpoints(compiled, other, tmp_path / "x")
    with pytest.raises(Netlist2TFError, match="already a merged checkpoint"):
        merge_checkpoints(out, base, tmp_path / "x")
    with pytest.raises(Netlist2TFError, match="not a netlist2tf checkpoint: compile.json"):
        merge_checkpoints(base, base, tmp_path / "x")
    with pytest.raises(Netlist2TFError, match="cannot read config.json"):
        merge_checkpoints(compiled, tmp_path / "nowhere", tmp_path / "x")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "qwen3_5_text", "hidden_size": 64}))
    with pytest.raises(Netlist2TFError, match=r"lacks the Qwen3.5 key\(s\) intermediate_size, layer_types"):
        merge_checkpoints(compiled, broken, tmp_path / "x")
    (broken / "config.json").write_text((base / "config.json").read_text())
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(Netlist2TFError, match="not a readable safetensors file"):
        merge_checkpoints(compiled, broken, tmp_path / "x")
    src = safe_open(str(base / "model.safetensors"), "pt")
    save_file({k: src.get_tensor(k) for k in src.keys() if "layers.2.mlp.up_proj" not in k},
              str(broken / "model.safetensors"))
    with pytest.raises(Netlist2TFError, match=r"model.layers.2.mlp.up_proj.weight is missing"):
        merge_checkpoints(compiled, broken, tmp_path / "x")
    assert not (tmp_path / "x").exists()                  # nothing half-written
    with pytest.raises(Netlist2TFError, match="not base-vocabulary tokens"):
        load_merged(out, prefix=[BASE_VOCAB + 1])
    # verify --text-prefix is for merged checkpoints only
    assert cli.main(["verify", str(compiled), "--cycles", "2", "--text-prefix", "3"]) == 2


def test_cli_merge_with_the_default_base(tmp_path, build_dir, capsys):
    """`netlist2tf merge` without --base makes (once) the embedded random base with the compiled
    model's shapes; `verify --text-prefix` runs the merged trace after text."""
    ckpt = tmp_path / "counter"
    assert cli.main(["compile", "hdl.examples.counter:Counter", "--layers", "4", "--out", str(ckpt),
                     "--build-dir", str(build_dir)]) == 0
    assert cli.main(["merge", str(ckpt), "--build-dir", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert "4 compiled layers in front of 4 base layers" in err
    out = tmp_path / "b" / "merged" / "counter"
    assert json.loads((out / "merge.json").read_text())["trace_token_offset"] == 1024
    assert cli.main(["verify", str(out), "--cycles", "12", "--text-prefix", "4", "--batch", "2"]) == 0
    assert "equals the netlist simulator" in capsys.readouterr().err
    # trace, text, trace: text before cycle 5's and cycle 9's generated tokens, the trace goes on exactly
    assert cli.main(["verify", str(out), "--cycles", "12", "--text-between", "5:6", "--text-between", "9:2"]) == 0
    assert "equals the netlist simulator" in capsys.readouterr().err
    assert cli.main(["verify", str(out), "--cycles", "12", "--text-between", "5:6", "--batch", "2"]) == 2
    assert "--batch 1" in capsys.readouterr().err
    assert cli.main(["verify", str(out), "--cycles", "12", "--text-between", "12:6"]) == 2
    assert "give a cycle below --cycles" in capsys.readouterr().err
    assert cli.main(["verify", str(ckpt), "--cycles", "12", "--text-between", "5:6"]) == 2
    assert "is not a merged checkpoint" in capsys.readouterr().err


@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.bfloat16, marks=pytest.mark.slow)],
                         ids=["float32", "bfloat16"])     # bfloat16 ~40 s here; its kernel is checked on the examples
def test_the_fast_executor_runs_a_merged_checkpoint(merged, dtype):
    """netlist2tf.run.fast on the merged FIFO, trace-only prompts: the hidden state after every layer (the
    base layers included: they add exactly zero there) and the logits over the whole vocabulary equal
    stock transformers' at every position; generation by frames through MergedTrace equals stock
    generation; after a text prefix (base tokens: real-valued embeddings, the base layers no longer
    silent) the executor stops (FastInexact) instead of guessing."""
    from transformers import AutoModelForCausalLM

    from netlist2tf.run import FastInexact, load_fast_checkpoint
    from netlist2tf.run.fast import FastModel, compare_with_stock
    from netlist2tf.run.host import run_model

    _, _, out, info = merged
    stock_trace, protocol, netlist, inits, meta, _ = load_merged(out, dtype)
    rows, _, _ = expected_tokens(protocol, netlist, inits, 16, 2, 4, meta["initial_memory"])
    ids = torch.tensor(rows) + info["trace_token_offset"]
    stock = AutoModelForCausalLM.from_pretrained(out, dtype=dtype).eval()
    fast = FastModel(out, dtype)
    report = compare_with_stock(fast, stock, ids)
    assert report.mismatches == [], report.mismatches[:5]
    assert report.layers == len(stock.model.layers) + 1

    fast_trace = load_fast_checkpoint(out, dtype)[0]
    assert fast_trace.generates
    import random
    rng = random.Random(2)
    inputs = [[{n: rng.getrandbits(w) for n, w in protocol.input_ports} for _ in range(16)] for _ in range(2)]
    runs = [run_model(m, protocol, inits, inputs, 16, initial_memory=meta["initial_memory"])
            for m in (stock_trace, fast_trace)]
    for field in ("outputs", "registers", "writes", "tokens"):
        assert getattr(runs[0], field) == getattr(runs[1], field), field

    text = torch.randint(0, BASE_VOCAB, (1, 6), generator=torch.Generator().manual_seed(1))
    state = fast.new_state(1)
    with pytest.raises(FastInexact):
        for t in torch.cat([text, ids[:1]], dim=1)[0]:
            fast.step([int(t)], state)


def test_a_base_tokenizer_that_cannot_take_the_trace_tokens_is_refused(merged, merged_multimodal, tmp_path):
    """A base tokenizer with an id the trace tokens need, or one malformed, is refused before anything
    is written (the --out folder is not created)."""
    import shutil

    base = tmp_path / "base"
    shutil.copytree(merged_multimodal[0], base)
    doc = json.loads((base / "tokenizer.json").read_text())
    doc["added_tokens"].append(dict(doc["added_tokens"][0], id=BASE_VOCAB, content="<|extra|>"))
    (base / "tokenizer.json").write_text(json.dumps(doc))
    with pytest.raises(Netlist2TFError, match=f"its tokenizer has token id {BASE_VOCAB}"):
        merge_checkpoints(merged[1], base, tmp_path / "out")
    (base / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(Netlist2TFError, match="tokenizer files are not what"):
        merge_checkpoints(merged[1], base, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_shared_layout_is_refused_where_text_could_reach_the_trace(merged, pair_twin, tmp_path):
    """The shared layout's conditions, on the real compiled FIFO with one tensor changed: as compiled
    it shares; a compiled attention projection that is not a lookup's (its gate reads more than the
    constant channel: a text query's output is not provably 0) makes it refuse, naming why (`auto` then merges side by side); an FFN `up` that reads one more bit reserves
    that bit's channel (the residual one channel wider): its signed channel, or, compiled as pairs, its
    b channel, the 1 - b read folded into `one - b`, which must be exact in the merged dtype."""
    from netlist2tf.merge.merge import _Checkpoint, _compiled_layout, _shared_channels

    base, compiled, _, _ = merged
    b = _Checkpoint(base, "base checkpoint")

    def changed(cpu, layout, key, change, dtype=None):
        get = cpu.get
        cpu.get = lambda k: change(get(k)) if k == key else get(k)
        try:
            return _shared_channels(cpu, layout, cpu.config, b, dtype)
        finally:
            cpu.get = get

    key = "model.layers.0.mlp.up_proj.weight"
    for folder in (compiled, pair_twin[1]):
        cpu = _Checkpoint(folder, "compiled checkpoint")
        layout = _compiled_layout(cpu.get("model.embed_tokens.weight").float())
        assert layout.signed == (folder == compiled)        # as compiled: signed; the twin: pairs
        shared, why = _shared_channels(cpu, layout, cpu.config, b)
        assert shared is not None and why == [] and shared.D < 384 + layout.width * layout.n_pairs
        full = cpu.config["layer_types"].index("full_attention")
        ch, why = changed(cpu, layout, f"model.layers.{full}.self_attn.q_proj.weight", lambda t: t + 1)
        assert ch is None and why == [f"compiled attention in layer(s) [{full}] whose output on a text position is "
                                      f"not provably 0 (a text key could out-score its match)"]
        bits = [layout.bit(k) for k in range(layout.n_pairs)]
        hi = next(c for c in bits if shared.cmap[c] < shared.n_shared)      # a bit text may see
        read = hi if layout.signed else hi + 1                              # signed: s; pairs: its 1 - b
        ch, why = changed(cpu, layout, key, lambda t: t.index_fill(1, torch.tensor([read]), 1.0))
        assert why == [] and len(ch.reserved) == len(shared.reserved) + 1 and ch.cmap[hi] in ch.reserved
        if layout.signed:
            assert ch.fold == {} and ch.D == shared.D + 1
        else:
            assert ch.fold[read] == hi and ch.cmap[read] < ch.n_shared
            # read as `one - b`, a weight of 3 on 1 - b puts 3 + 1/128 on `one`: exact in float32, not in bfloat16
            three = lambda t: t.index_fill(1, torch.tensor([read]), 3.0)
            assert changed(cpu, layout, key, three, torch.float32)[1] == []
            assert changed(cpu, layout, key, three, torch.bfloat16)[1] == [
                f"{key} read through `one - b` is not exact in torch.bfloat16"]
    with pytest.raises(Netlist2TFError, match="--layout"):
        merge_checkpoints(compiled, base, tmp_path / "x", layout="bogus")
    assert not (tmp_path / "x").exists()
