"""Write a model plan's weights: ``ModelPlan`` -> a ``Qwen3_5ForCausalLM`` (docs/design/compiler.md 2).

``netlist2tf.compile.plan.plan_model`` decides everything (schedule, protocol, residual layout, neurons,
heads, token rows); ``write_weights`` only writes it into the modules of a fresh model:

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
folded to one channel per bit (``netlist2tf.weights.signed.fold_state``), the checkpoint's hidden size.

One call compiles a netlist: ``netlist2tf.driver.compile_netlist`` (prove, plan, write, emit).
"""

from dataclasses import dataclass, replace

import torch

from netlist2tf.common import Netlist2TFError
from netlist2tf.gadgets import calibrate_read, clear_module, configure_memory
from netlist2tf.gadgets import configure_mlp
from netlist2tf.gadgets import NORM_WEIGHT, ResidualLayout
from netlist2tf.compile import ModelPlan, memory_capacity_slots
from netlist2tf.compile import TraceProtocol
from netlist2tf.compile import Schedule
from netlist2tf.compile import LINEAR


@dataclass(frozen=True)
class Compiled:
    """Everything the emitter and the host need: the model, its protocol and how it was laid out."""
    model: object               # Qwen3_5ForCausalLM
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


def write_weights(plan: ModelPlan) -> Compiled:
    """The weights of ``plan`` in a fresh ``Qwen3_5ForCausalLM`` (float32; deterministic)."""
    from transformers import Qwen3_5ForCausalLM

    target, layout, proto = plan.target, plan.layout, plan.protocol
    dk = target.linear_key_head_dim
    if memory_capacity_slots(dk) != dk - (1 if calibrate_read(dk).query_dummy is not None else 0):
        raise Netlist2TFError(f"linear_key_head_dim={dk}: the planned memory capacity does not match the "
                              f"calibrated DeltaNet read; use a head_k_dim of 16, 64, 128 or 256")
    from transformers.initialization import no_init_weights

    torch.manual_seed(0)
    folded = plan.model_layout is not None and plan.model_layout.signed
    pair_target = replace(target, hidden_size=layout.hidden_size) if folded else target
    with no_init_weights():             # every parameter is zeroed or written below: no random init
        model = Qwen3_5ForCausalLM(pair_target.to_hf_config(vocab_size=proto.vocab_size))
    model.eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        m = model.model
        m.norm.weight.fill_(NORM_WEIGHT)
        for i, layer in enumerate(m.layers):
            layer.input_layernorm.weight.fill_(NORM_WEIGHT)
            layer.post_attention_layernorm.weight.fill_(NORM_WEIGHT)
            if target.layer_types[i] == LINEAR:
                clear_module(layer.linear_attn)
            configure_mlp(layer.mlp, plan.neurons[i], layout.one, torch.bfloat16)
        for h in plan.heads:
            configure_memory(m.layers[h.layer].linear_attn, one=layout.one, head=h.head,
                             write_match=[list(w) for w in h.write_match],
                             read_match=[list(r) for r in h.read_match], write_enable=h.write_enable,
                             clear=h.clear, write_lag=h.lag, value_lags=[h.lag] * len(h.value_pairs),
                             write_select=h.write_select, read_select=h.read_select,
                             value_pairs=list(h.value_pairs), out_pairs=list(h.out_pairs))
        for h in plan.lookups:
            from netlist2tf.gadgets import configure_rom_lookup
            configure_rom_lookup(m.layers[h.layer].self_attn, h.plan, head=h.head, one=layout.one, query=h.query,
                                 key_flag=h.key_flag, key_bits=h.key_bits, values=list(h.values),
                                 out_pairs=list(h.out_pairs))
        emb = m.embed_tokens.weight
        emb[:len(plan.embedding)] = layout.initial_rows(plan.embedding)
        head_w = model.lm_head.weight
        toks = [tok for tok, row in enumerate(plan.lm_head) for _ in row]
        if toks:
            head_w[torch.tensor(toks), torch.tensor([ch for row in plan.lm_head for ch in row])] = 1.0
    if folded:
        from netlist2tf.weights.signed import fold_state

        # The pair model is freed tensor by tensor as it is folded, and the signed model is made without
        # an initialisation (its untouched storage is replaced by the folded tensors): a model of a
        # published geometry's width (1.7 G parameters for 4B x 14 layers) is never held twice.
        state = model.state_dict()
        del model, m, emb, head_w, layer          # nothing but ``state`` holds the pair model's tensors now
        state = fold_state(state, layout, plan.model_layout, consume=True)
        torch.manual_seed(0)
        with no_init_weights():
            model = Qwen3_5ForCausalLM(target.to_hf_config(vocab_size=proto.vocab_size))
        model.eval()
        model.load_state_dict(state, strict=True, assign=True)
        del state
        layout = plan.model_layout
    params = sum(p.numel() for p in model.parameters())
    if params != plan.stats["parameters"]:
        raise AssertionError(f"the plan counts {plan.stats['parameters']} parameters, the model has {params}")
    stats = dict(plan.stats, nonzero=sum(int(torch.count_nonzero(p)) for p in model.parameters()))
    return Compiled(model, proto, plan.schedule, layout, plan.initial_registers, plan.initial_memory, stats,
                    plan.outputs, plan.gated, plan, plan.gated_writes)
