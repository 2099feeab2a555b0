"""Write a model plan's weights: ``ModelPlan`` -> a ``Qwen3_5ForCausalLM`` (docs/design/compiler.md 2).

``netlist2tf.compile.plan.plan_model`` decides everything (schedule, protocol, residual layout, neurons,
heads, token rows); ``assemble_state`` only writes it into a fresh model's tensors (numpy arrays by
transformers' parameter names, ``state_shapes``; no torch), ``write_weights`` returns them with the
rest (``Compiled``, whose ``model`` is a real ``Qwen3_5ForCausalLM`` made from them on first use):

* **embedding**: each token's row is an active residual vector (``layout.initial``) with the pairs
  its plan row sets: the token's value bits, which layer-0 head it writes, the register row to read,
  the commit flag, what the model must emit next;
* **DeltaNet value heads** (``gadgets.deltanet_memory.configure_memory``): layer 0's register, input
  and write-field heads, then the memory banks (addresses decoded in the head's projection + silu);
* **FFNs** (``gadgets.ffn_threshold.configure_mlp``): the scheduled logic and, in the last layer, the
  selection of the emitted chunk's bits;
* **attention lookups** (``gadgets.rom_lookup.configure_rom_lookup``): the ROMs read over the prompt's words;
* **LM head**: weight 1 on the channels of a token's fields, so the right token wins by at least 1.
  Other full-attention layers have all-zero weights (silent).

Every gadget writes pairs; with ``bits="signed"`` (the default) the pair model's weights are then
folded to one channel per bit (``netlist2tf.weights.signed.fold_arrays``), the checkpoint's hidden size.

One call compiles a netlist: ``netlist2tf.driver.compile_netlist`` (prove, plan, write, emit).
"""

from dataclasses import dataclass, field, replace

import numpy as np

from netlist2tf.common import Netlist2TFError
from netlist2tf.gadgets import calibrate_read, clear_module, configure_memory
from netlist2tf.gadgets import configure_mlp, configure_rom_lookup, mlp_entries
from netlist2tf.gadgets import AttentionArrays, DeltaNetArrays, MlpArrays
from netlist2tf.gadgets import NORM_WEIGHT, ResidualLayout
from netlist2tf.compile import ModelPlan, memory_capacity_slots
from netlist2tf.compile import TraceProtocol
from netlist2tf.compile import Schedule
from netlist2tf.compile import LINEAR


@dataclass(frozen=True)
class Compiled:
    """Everything the emitter and the host need: the weights, their protocol and how they were laid
    out. ``state``: the checkpoint's tensors as float32 numpy arrays, by transformers' parameter
    names; ``model``: them in a ``Qwen3_5ForCausalLM``, made on first use (it imports torch and
    transformers: writing a checkpoint does not need it)."""
    state: dict
    protocol: TraceProtocol
    schedule: Schedule
    layout: ResidualLayout
    initial_registers: dict     # "reg:NAME" -> init value
    initial_memory: dict        # memory name -> {address: word} (non-zero initial words)
    stats: dict
    outputs: tuple | None = None    # the output ports kept (``CompileSettings.outputs``); None: all
    gated: tuple = ()               # the gated groups of ``CompileSettings.gated``
    plan: ModelPlan | None = None
    gated_writes: tuple = ()        # ``CompileSettings.gated_writes``
    _model: list = field(default_factory=list, repr=False, compare=False)

    @property
    def model(self):
        """The ``Qwen3_5ForCausalLM`` holding ``state`` (float32, eval mode; its tensors share the
        arrays' memory)."""
        if not self._model:
            self._model.append(model_of(self.state, self.plan.target, self.layout.hidden_size,
                                        self.protocol.vocab_size))
        return self._model[0]


def state_shapes(target, vocab_size: int, hidden_size: int | None = None) -> dict:
    """{name: shape} of every parameter of transformers' ``Qwen3_5ForCausalLM`` for ``target``'s
    shapes (``hidden_size`` instead of the target's where given), in the model's order."""
    H = hidden_size or target.hidden_size
    I = target.intermediate_size                                # noqa: E741
    dk, dv = target.linear_key_head_dim, target.linear_value_head_dim
    nk, nv = target.linear_num_key_heads, target.linear_num_value_heads
    hd, nh, nkv = target.head_dim, target.num_attention_heads, target.num_key_value_heads
    shapes = {"model.embed_tokens.weight": (vocab_size, H)}
    for i, kind in enumerate(target.layer_types):
        p = f"model.layers.{i}."
        if kind == LINEAR:
            conv = 2 * nk * dk + nv * dv
            shapes.update({p + "linear_attn.dt_bias": (nv,), p + "linear_attn.A_log": (nv,),
                           p + "linear_attn.conv1d.weight": (conv, 1, target.linear_conv_kernel_dim),
                           p + "linear_attn.norm.weight": (dv,),
                           p + "linear_attn.out_proj.weight": (H, nv * dv),
                           p + "linear_attn.in_proj_qkv.weight": (conv, H),
                           p + "linear_attn.in_proj_z.weight": (nv * dv, H),
                           p + "linear_attn.in_proj_b.weight": (nv, H),
                           p + "linear_attn.in_proj_a.weight": (nv, H)})
        else:
            shapes.update({p + "self_attn.q_proj.weight": (2 * nh * hd, H),
                           p + "self_attn.k_proj.weight": (nkv * hd, H),
                           p + "self_attn.v_proj.weight": (nkv * hd, H),
                           p + "self_attn.o_proj.weight": (H, nh * hd),
                           p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)})
        shapes.update({p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H),
                       p + "mlp.down_proj.weight": (H, I), p + "input_layernorm.weight": (H,),
                       p + "post_attention_layernorm.weight": (H,)})
    shapes.update({"model.norm.weight": (H,), "lm_head.weight": (vocab_size, H)})
    return shapes


def model_of(state: dict, target, hidden_size: int, vocab_size: int):
    """A ``Qwen3_5ForCausalLM`` (float32, eval mode) whose parameters are ``state``'s arrays (shared,
    not copied)."""
    import torch
    from transformers import Qwen3_5ForCausalLM
    from transformers.initialization import no_init_weights

    torch.manual_seed(0)
    with no_init_weights():             # every parameter is replaced below: no random init
        model = Qwen3_5ForCausalLM(replace(target, hidden_size=hidden_size).to_hf_config(vocab_size=vocab_size))
    model.eval()
    model.load_state_dict({k: torch.from_numpy(a) for k, a in state.items()}, strict=True, assign=True)
    return model


def assemble_state(plan: ModelPlan) -> tuple[dict, ResidualLayout]:
    """The weights of ``plan`` as float32 numpy arrays by parameter name, and the residual layout they
    are in (deterministic; no torch)."""
    target, layout, proto = plan.target, plan.layout, plan.protocol
    dk = target.linear_key_head_dim
    if memory_capacity_slots(dk) != dk - (1 if calibrate_read(dk).query_dummy is not None else 0):
        raise Netlist2TFError(f"linear_key_head_dim={dk}: the planned memory capacity does not match the "
                              f"calibrated DeltaNet read; use a head_k_dim of 16, 64, 128 or 256")
    folded = plan.model_layout is not None and plan.model_layout.signed
    if folded:
        from netlist2tf.weights.signed import Entries, fold_arrays
    state = {k: np.zeros(shape, dtype=np.float32)
             for k, shape in state_shapes(target, proto.vocab_size, layout.hidden_size).items()}
    pair_target = replace(target, hidden_size=layout.hidden_size)
    state["model.norm.weight"][...] = NORM_WEIGHT
    for i, kind in enumerate(target.layer_types):
        p = f"model.layers.{i}."
        state[p + "input_layernorm.weight"][...] = NORM_WEIGHT
        state[p + "post_attention_layernorm.weight"][...] = NORM_WEIGHT
        if kind == LINEAR:
            clear_module(DeltaNetArrays.of_state(state, p + "linear_attn.", pair_target), zeroed=True)
        if folded:
            # the fold reads the FFN projections' entries as they are written: never held dense in pairs
            terms = mlp_entries(plan.neurons[i], layout.one, target.intermediate_size, "bfloat16")
            for name, (rows, cols, vals) in zip(("gate_proj", "up_proj", "down_proj"), terms):
                key = f"{p}mlp.{name}.weight"
                entries = Entries.of_terms(state[key].shape, rows, cols, vals)
                if entries is None:
                    np.add.at(state[key], (rows, cols), vals.astype(np.float32))
                else:
                    state[key] = entries
        else:
            configure_mlp(MlpArrays.of_state(state, p + "mlp."), plan.neurons[i], layout.one, "bfloat16",
                          zeroed=True)
    for h in plan.heads:
        configure_memory(DeltaNetArrays.of_state(state, f"model.layers.{h.layer}.linear_attn.", pair_target),
                         one=layout.one, head=h.head, write_match=[list(w) for w in h.write_match],
                         read_match=[list(r) for r in h.read_match], write_enable=h.write_enable,
                         clear=h.clear, write_lag=h.lag, value_lags=[h.lag] * len(h.value_pairs),
                         write_select=h.write_select, read_select=h.read_select,
                         value_pairs=list(h.value_pairs), out_pairs=list(h.out_pairs))
    for h in plan.lookups:
        configure_rom_lookup(AttentionArrays.of_state(state, f"model.layers.{h.layer}.self_attn.", pair_target),
                             h.plan, head=h.head, one=layout.one, query=h.query, key_flag=h.key_flag,
                             key_bits=h.key_bits, values=list(h.values), out_pairs=list(h.out_pairs))
    toks = [tok for tok, row in enumerate(plan.lm_head) for _ in row]
    if toks:
        state["lm_head.weight"][np.asarray(toks), np.asarray([ch for row in plan.lm_head for ch in row])] = 1.0
    embedding = "model.embed_tokens.weight"
    if folded:
        # the pair model's arrays are freed one by one as they are folded: a model of a published
        # geometry's width (1.7 G parameters for 4B x 14 layers) is never held twice. The embedding
        # is written in the signed layout directly: the fold of the pair layout's rows is the signed
        # layout's rows of the same bits (tests/weights/test_signed.py), and the vocabulary's rows
        # are the largest dense matrix of a small design
        names = list(state)
        rows = state.pop(embedding)
        folded_state = fold_arrays(state, layout, plan.model_layout, consume=True)
        layout = plan.model_layout
        rows = np.zeros((rows.shape[0], layout.hidden_size), dtype=np.float32)
        rows[:len(plan.embedding)] = layout.initial_rows_array(plan.embedding)
        state = {k: rows if k == embedding else folded_state[k] for k in names}
    else:
        state[embedding][:len(plan.embedding)] = layout.initial_rows_array(plan.embedding)
    return state, layout


def write_weights(plan: ModelPlan) -> Compiled:
    """The weights of ``plan`` (``assemble_state``) with everything the emitter and the host need;
    ``Compiled.model`` puts them in a fresh ``Qwen3_5ForCausalLM`` when asked (float32;
    deterministic)."""
    state, layout = assemble_state(plan)
    params = sum(a.size for a in state.values())
    if params != plan.stats["parameters"]:
        raise AssertionError(f"the plan counts {plan.stats['parameters']} parameters, the model has {params}")
    stats = dict(plan.stats, nonzero=sum(int(np.count_nonzero(a)) for a in state.values()))
    return Compiled(state, plan.protocol, plan.schedule, layout, plan.initial_registers, plan.initial_memory, stats,
                    plan.outputs, plan.gated, plan, plan.gated_writes)
