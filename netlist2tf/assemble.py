"""Assemble a compiled model: schedule + protocol -> the weights of a ``Qwen3_5ForCausalLM``.

The model (docs/COMPILER.md 2), for a design with registers and at most one memory write port:

* **embedding**: each token's row is an active residual vector (``layout.initial``) carrying the
  token's value bits (TV pairs), the storage write key it implies (register chunk j, row = parity;
  input chunk j; the one-hot memory address of an enabled MA token), the register row to read at this
  position (RP pairs), and what the model must emit next: a one-hot over the generated chunks (EMIT
  pairs) and that token's parity (EP pair);
* **layer 0's mixer** (DeltaNet): one memory head per input chunk (1 row) and per register chunk
  (2 rows, the frame-parity double buffer), read into the source bit pairs of the logic;
* **memory reads**: the address decoded to one-hot pairs by an FFN, then a DeltaNet head per read
  port (and per 16 bits) in a later layer, written at the frame's last MD token from the MA/MD tokens;
* **FFNs**: the scheduled logic (``lower.lower_logic``); the last layer's FFN also copies the bits of
  the chunk to emit into the EV pairs (an AND-OR over the EMIT one-hot);
* **LM head**: the score of token T is the number of its fields that match EMIT/EP/EV, so the right
  token wins by at least 1; every other mixer is silent and the last layer is full attention (so the
  model has the attention layer that ``transformers``' cache expects).
"""

from dataclasses import dataclass

import torch

from .errors import Netlist2TFError
from .gadgets.deltanet_memory import calibrate_read, clear_module, configure_memory
from .gadgets.ffn_threshold import Neuron, configure_mlp
from .gadgets.layout import NORM_WEIGHT, ResidualLayout
from .ir import CONST0, CONST1, CONSTX, Netlist
from .lower import allocate_pairs_reusing, lower_logic, reset_neurons
from .protocol import IN, MA, REG, TraceProtocol
from .schedule import Schedule, ScheduleError, schedule
from .target import FULL, LINEAR, Target


@dataclass(frozen=True)
class Compiled:
    """Everything the emitter and the host need: the model, its protocol and how it was laid out."""
    model: object               # Qwen3_5ForCausalLM
    protocol: TraceProtocol
    schedule: Schedule
    layout: ResidualLayout
    initial_registers: dict     # "reg:NAME" -> init value
    initial_memory: dict        # address -> word (non-zero initial words of the written memory)
    stats: dict


def memory_capacity_slots(d_k: int) -> int:
    """Words one DeltaNet head holds with key head dim ``d_k`` (d_k = 128 gives one up to the exact
    query scale: see gadgets/deltanet_memory.py)."""
    return d_k - (1 if calibrate_read(d_k).query_dummy is not None else 0)


def standalone_layer_types(layers: int) -> tuple[str, ...]:
    """DeltaNet layers with the last one full attention (the attention layer transformers' cache
    expects); the widths of a standalone model are filled in by ``assemble`` from the design's needs."""
    if layers < 2:
        raise Netlist2TFError("the compiled model needs at least 2 layers (state reads, then logic)")
    return (LINEAR,) * (layers - 1) + (FULL,)


def assemble(netlist: Netlist, layers: int = 11, chunk_bits: int = 8, head_dim: int = 64,
             target: Target | None = None, check_only: bool = False):
    """Compile ``netlist`` (the LUT flow's netlist) into a model.

    Without ``target`` the model is shaped for the design (``layers`` layers, DeltaNet heads of
    ``head_dim``). With a ``target`` (e.g. ``Target.from_config_json`` of a Qwen3.5 checkpoint) the
    model uses exactly its per-layer shapes, or the error lists every number that does not fit.
    ``check_only``: stop after the fit check and return the demands (no weights are built).
    Raises ScheduleError (too deep / too wide) or Netlist2TFError (unsupported features)."""
    clocks = {r.clock for r in netlist.registers}
    proto = TraceProtocol.from_netlist(netlist, clocks, chunk_bits)
    for m in netlist.memories:
        if any(rp.clocked for rp in m.read_ports):
            raise Netlist2TFError(f"memory {m.name} has a synchronous read port; compile the lut flow's "
                                  f"netlist (memory_nordff turns it into a register and a read)")
        if not m.write_ports:
            raise Netlist2TFError(f"memory {m.name} is read-only; ROMs are not lowered yet")
    if target is not None:
        layers, types = target.num_layers, target.layer_types
        dk, dv = target.linear_key_head_dim, target.linear_value_head_dim
        group = target.linear_num_value_heads // target.linear_num_key_heads
    else:
        types = standalone_layer_types(layers)
        dk = dv = head_dim
        group = 1
    if types[0] != LINEAR or FULL not in types:
        raise Netlist2TFError("the compiled model needs a DeltaNet layer first (register reads) and "
                              f"at least one full-attention layer; the target's layers are {list(types)}")
    piece = dv // 4                           # bits per DeltaNet head (quarter packing)
    if chunk_bits > piece:
        raise Netlist2TFError(f"{chunk_bits}-bit chunks need DeltaNet value heads of at least "
                              f"{4 * chunk_bits} dims, not {dv}")
    probe = schedule(netlist, Target(1 << 30, 1 << 30, types, 1, 1, dk, dv, 1, 1, 16, name="probe"))
    heads_per_layer = [0] * layers
    heads_per_layer[0] = len(proto.inputs) + len(proto.registers)
    for (mem, port), layer in probe.read_layer.items():
        width = next(m.width for m in netlist.memories if m.name == mem)
        heads_per_layer[min(layer, layers - 1)] += -(-width // piece)
    heads = max(1, max(heads_per_layer))
    mems = {m.name: m for m in netlist.memories}
    d_of_q = {q: d for r in netlist.registers for q, d in zip(r.q, r.d)}
    emit_chunks = list(proto.generated)
    kept = {d_of_q[n] if kind == REG else n for kind, idx in emit_chunks
            for n in proto.chunks_of(kind)[idx].bits}
    pairs, resets = allocate_pairs_reusing(netlist, probe, kept)

    # Extra pairs after the logic's: token value, write keys, read rows, emit one-hot, emit parity,
    # emitted value.
    base = max(pairs.values(), default=-1) + 1
    names = {}

    def extra(name, count):
        names[name] = list(range(base + sum(len(v) for v in names.values()),
                                 base + sum(len(v) for v in names.values()) + count))

    extra("tv", chunk_bits)
    extra("key_in", len(proto.inputs))
    extra("key_reg", 2 * len(proto.registers))
    extra("rp", 2)
    extra("wa", mems[proto.memory].size if proto.memory else 0)
    for (mem, port) in sorted(probe.read_layer):
        extra(f"ra:{mem}:{port}", mems[mem].size)
    extra("emit", len(emit_chunks))
    extra("ep", 1)
    extra("ev", chunk_bits)
    n_pairs = base + sum(len(v) for v in names.values())
    hidden = 1 + 2 * n_pairs
    hidden += 8 + (64 * hidden) // (127 * 127)          # room for the anchors
    hidden = (hidden + 7) // 8 * 8
    needed = hidden
    if target is not None:
        hidden = max(hidden, target.hidden_size)         # report the need, build with the target's
    layout = ResidualLayout.build(hidden, n_pairs)

    def P(name, i=0):
        return layout.pair(names[name][i])

    # The logic, the memory address decoders, then the emit selection in the last layer's FFN.
    neurons = lower_logic(netlist, probe, layout, pairs)
    for layer, nets in enumerate(resets):
        neurons[layer] += reset_neurons(nets, layout, pairs)
    for (mem, port) in sorted(probe.read_layer):
        rp = mems[mem].read_ports[port]
        level = max((probe.level.get(n, 0) for n in rp.addr), default=0)
        for a in range(mems[mem].size):
            fixed = [(n, (a >> i) & 1) for i, n in enumerate(rp.addr)]
            if any(n in (CONST0, CONST1, CONSTX) and int(n == CONST1) != bit for n, bit in fixed):
                continue                          # a constant address bit rules this word out
            lits = [(layout.pair(pairs[n])[0 if bit else 1], 1) for n, bit in fixed
                    if n not in (CONST0, CONST1, CONSTX)]
            out = P(f"ra:{mem}:{port}", a)
            neurons[level].append(Neuron(tuple(lits), 1 - len(lits), ((out[0], 1), (out[1], -1))))
    select: list[Neuron] = []
    for e, (kind, idx) in enumerate(emit_chunks):
        chunk = proto.chunks_of(kind)[idx]
        emit = P("emit", e)[0]
        for i, net in enumerate(chunk.bits):
            net = d_of_q[net] if kind == REG else net
            ev = P("ev", i)
            if net == CONST1:
                select.append(Neuron(((emit, 1),), 0, ((ev[0], 1), (ev[1], -1))))
            elif net not in (CONST0, CONSTX):
                select.append(Neuron(((emit, 1), (layout.pair(pairs[net])[0], 1)), -1,
                                     ((ev[0], 1), (ev[1], -1))))
    neurons[layers - 1] = neurons[layers - 1] + select
    intermediate = max(8, max(len(n) for n in neurons))
    if target is None:
        target = Target(hidden, intermediate, types, heads, heads, dk, dv, 1, 1, 16,
                        name=f"standalone-{layers}")
    else:
        problems = target.fits(hidden_channels=needed, neurons_per_layer=[len(n) for n in neurons],
                               deltanet_heads_per_layer=[h * group for h in heads_per_layer],
                               attention_heads_per_layer=[])
        big = [f"memory {m.name} has {m.size} words, a DeltaNet head of the target holds "
               f"{memory_capacity_slots(dk)}" for m in netlist.memories if m.size > memory_capacity_slots(dk)]
        if problems or big:
            raise ScheduleError(f"{netlist.top} does not fit the target {target.name} ({target.source}):\n  - "
                                + "\n  - ".join(problems + big))
    sched = schedule(netlist, target)
    if check_only:
        return {"target": target.name, "fits": True, "hidden_channels": needed,
                "neurons_per_layer": [len(n) for n in neurons], "deltanet_heads_per_layer": heads_per_layer,
                "depth": sched.depth, "layers": layers, "vocab_size": proto.vocab_size}

    from transformers import Qwen3_5ForCausalLM

    torch.manual_seed(0)
    model = Qwen3_5ForCausalLM(target.to_hf_config(vocab_size=proto.vocab_size))
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
            configure_mlp(layer.mlp, neurons[i], layout.one, torch.bfloat16)

        # Layer 0: the storage heads (one per key head: value heads sharing a key head share addresses).
        mixer = m.layers[0].linear_attn
        head = 0
        for c in proto.inputs:
            configure_memory(mixer, one=layout.one, write_addr=[P("key_in", c.index)[0]],
                             read_addr=[layout.one], value_pairs=[P("tv", i) for i in range(len(c.bits))],
                             out_pairs=[layout.pair(pairs[n]) for n in c.bits], head=head * group)
            head += 1
        for c in proto.registers:
            configure_memory(mixer, one=layout.one,
                             write_addr=[P("key_reg", 2 * c.index)[0], P("key_reg", 2 * c.index + 1)[0]],
                             read_addr=[P("rp", 0)[0], P("rp", 1)[0]],
                             value_pairs=[P("tv", i) for i in range(len(c.bits))],
                             out_pairs=[layout.pair(pairs[n]) for n in c.bits], head=head * group)
            head += 1

        # Memory read ports: one copy of the memory per read port (and per `piece` bits), in the
        # mixer of the read's layer; written at the frame's last MD token from the MA/MD fields.
        used = {0: head}
        n_md = len(proto.mem_data)
        for (mem, port) in sorted(sched.read_layer):
            layer = sched.read_layer[(mem, port)]
            rp = mems[mem].read_ports[port]
            mixer = m.layers[layer].linear_attn
            for lo in range(0, mems[mem].width, piece):
                bits = range(lo, min(lo + piece, mems[mem].width))
                configure_memory(
                    mixer, one=layout.one, head=used.get(layer, 0) * group,
                    write_addr=[P("wa", a)[0] for a in range(mems[mem].size)],
                    read_addr=[P(f"ra:{mem}:{port}", a)[0] for a in range(mems[mem].size)],
                    value_pairs=[P("tv", i % chunk_bits) for i in bits],
                    value_lags=[n_md - 1 - i // chunk_bits for i in bits], write_lag=n_md,
                    out_pairs=[layout.pair(pairs[rp.data[i]]) for i in bits])
                used[layer] = used.get(layer, 0) + 1

        # Embedding: one active residual vector per token.
        emb = m.embed_tokens.weight
        for tok in range(proto.vocab_size):
            f = proto.field(tok)
            bits = {names["tv"][i]: (f.value >> i) & 1 for i in range(chunk_bits)}
            if f.kind == IN:
                bits[names["key_in"][f.chunk]] = 1
            elif f.kind == REG:
                bits[names["key_reg"][2 * f.chunk + f.parity]] = 1
            elif f.kind == MA and f.value & 1:
                addr = f.value >> 1
                if addr < len(names["wa"]):
                    bits[names["wa"][addr]] = 1
            bits[names["rp"][proto.read_parity(f)]] = 1
            nxt = proto.next_field_kind(f)
            if nxt is not None:
                bits[names["emit"][emit_chunks.index(nxt[:2])]] = 1
                bits[names["ep"][0]] = nxt[2]
            emb[tok] = layout.initial(bits)

        # LM head: count matching fields.
        head_w = model.lm_head.weight
        for tok in range(proto.vocab_size):
            f = proto.field(tok)
            if f.kind == IN:
                continue                  # never generated: scores 0, below any real match
            e = emit_chunks.index((f.kind, f.chunk))
            head_w[tok, P("emit", e)[0]] = 1.0
            ep = P("ep")
            head_w[tok, ep[0] if f.parity else ep[1]] = 1.0
            for i in range(chunk_bits):
                ev = P("ev", i)
                head_w[tok, ev[0] if (f.value >> i) & 1 else ev[1]] = 1.0

    inits = {f"reg:{r.name}": r.init for r in netlist.registers}
    memory = {a: w for a, w in enumerate(mems[proto.memory].init) if w} if proto.memory else {}
    params = sum(p.numel() for p in model.parameters())
    nonzero = sum(int(torch.count_nonzero(p)) for p in model.parameters())
    stats = {"layers": layers, "hidden_size": hidden, "intermediate_size": intermediate,
             "neurons_per_layer": [len(n) for n in neurons], "deltanet_heads": heads_per_layer,
             "tokens_per_cycle": proto.tokens_per_cycle, "generated_tokens_per_cycle":
             len(proto.generated), "vocab_size": proto.vocab_size,
             "parameters": params, "nonzero": nonzero, "depth": sched.depth}
    return Compiled(model, proto, sched, layout, inits, memory, stats)
