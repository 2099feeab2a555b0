"""The model plan: every placement decision of a compiled model, as data, before any weight exists.

``plan_model(netlist, settings) -> ModelPlan`` schedules the netlist, fixes the trace protocol, the
residual layout (which bit pair holds which net and which control field), the FFN neurons of every
layer, the DeltaNet value heads (layer 0's register/input/write-field heads and the memory banks),
the embedding row and the LM-head row of every token, and the shapes (the ``Target``). It imports no
torch and builds no tensor: ``--check-fit`` and the layer-assignment report read it, and
``netlist2tf.weights.assemble.write_weights(plan)`` turns it into the weights of a ``Qwen3_5ForCausalLM``
(docs/design/compiler.md 2 describes the machine both build).

``CompileSettings`` is the one description of a compile (the CLI, the CPU model engine and the bench
scripts all make one and call ``netlist2tf.driver.compile_netlist``).
"""

import re
from dataclasses import dataclass, field, replace

from netlist2tf.common import Netlist2TFError, UnsupportedDesignError
from netlist2tf.gadgets import Neuron, threshold_gate
from netlist2tf.gadgets import ResidualLayout
from netlist2tf.netlist import keep_outputs
from netlist2tf.netlist import CONST0, CONST1, CONSTX, Netlist
from netlist2tf.compile.lower import allocate_pairs_reusing, live_pairs, lower_logic, pair_lifetimes, reset_neurons
from netlist2tf.compile.protocol import IN, MA, MD, REG, GroupSpec, TraceProtocol
from netlist2tf.compile.rom import preload
from netlist2tf.compile.settings import CompileSettings  # noqa: F401 (part of this module's face)
from netlist2tf.compile.schedule import Schedule, ScheduleError, schedule, shared_schedules
from netlist2tf.compile.target import FULL, LINEAR, Target, dense_parameters
from netlist2tf.netlist import Problem


@dataclass(frozen=True, slots=True)
class HeadPlan:
    """One DeltaNet value head written by ``gadgets.deltanet_memory.configure_memory``: channels
    that are all 1 exactly when slot j is written / read, the word's (b, 1-b) channel pairs and the
    pairs the read adds into, and the channel gating this value head's writes (None: the key's)."""
    layer: int
    head: int
    write_match: tuple[tuple[int, ...], ...]
    read_match: tuple[tuple[int, ...], ...]
    value_pairs: tuple[tuple[int, int], ...]
    out_pairs: tuple[tuple[int, int], ...]
    write_enable: int | None = None
    clear: int | None = None        # a channel that writes this head's word as all 0 (a folded chunk's)
    lag: int = 0                    # write address and value taken this many tokens back (a tail chunk's)
    write_select: tuple[int, ...] = ()  # channels all 1 when this head's bank is written (banks sharing a key head)
    read_select: tuple[int, ...] = ()   # ... and when its bank is read
    holds: str = ""                 # what it holds, for the report: a chunk's bits, a bank's words


@dataclass(frozen=True)
class ModelPlan:
    """A compiled model as data (see the module docstring). ``embedding[t]``: the pairs set in token
    t's residual vector ({pair: bit}, the rest (0, 1)); ``lm_head[t]``: the channels with weight 1
    in token t's LM-head row."""
    settings: CompileSettings
    netlist: Netlist                # the netlist the model computes (only the kept outputs' logic)
    protocol: TraceProtocol
    schedule: Schedule
    target: Target                  # the model's shapes
    layout: ResidualLayout          # the pairs every gadget is planned in (their channel numbers)
    pairs: dict                     # net -> residual pair index (reused once a net is dead)
    fields: dict                    # control field name -> its pair indices (token value, emit, ...)
    neurons: tuple[tuple[Neuron, ...], ...]     # per layer, in row order
    heads: tuple[HeadPlan, ...]     # every configured DeltaNet value head, layer 0 first
    key_heads: tuple[int, ...]      # key heads used per layer
    embedding: tuple[dict, ...]
    lm_head: tuple[tuple[int, ...], ...]
    hidden_needed: int              # the residual channels the design needs (<= target.hidden_size)
    initial_registers: dict         # "reg:NAME" -> init value
    initial_memory: dict            # memory name -> {address: word} (non-zero initial words)
    stats: dict = field(default_factory=dict)
    model_layout: ResidualLayout | None = None  # the checkpoint's residual: ``layout`` itself, or its signed fold
    # per layer, whose FFN rows are whose: (unit, first row, end row), the pair resets and the token
    # selection named in parentheses; rows in the order of ``neurons``
    neuron_owners: tuple = ()
    # {net: (time its pair is written, time it is freed or None)}, mixer l = 2l, FFN l = 2l + 1
    lifetimes: dict = field(default_factory=dict)
    lookups: tuple = ()             # ``LookupHead``s: the ROMs read by attention lookups

    @property
    def gated(self):
        return self.settings.gated

    @property
    def gated_writes(self):
        return self.settings.gated_writes

    @property
    def outputs(self):
        return self.settings.outputs

    def fit(self) -> dict:
        """What ``netlist2tf compile --check-fit`` prints: the demands against the target."""
        s = self.stats
        return {"target": self.target.name, "fits": True, "hidden_channels": self.hidden_needed,
                "neurons_per_layer": s["neurons_per_layer"], "deltanet_heads_per_layer": s["deltanet_heads"],
                "depth": self.schedule.depth, "layers": self.target.num_layers, "vocab_size": self.protocol.vocab_size,
                "layer_types": list(self.target.layer_types), "parameters": s["parameters"],
                "memory_reads": {f"{m}.{p}": list(self.schedule.read_layers((m, p)))
                                 for m, p in sorted(self.schedule.read_layer)},
                "late_register_chunks": sum(1 for h in self.heads if h.layer > 0 and " REG chunk " in h.holds),
                "attention_heads_per_layer": s.get("attention_heads", [0] * self.target.num_layers)}


def resolve_groups(netlist: Netlist, gated=(), gated_writes=(), held=(), folded_writes=()) -> tuple[GroupSpec, ...]:
    """The ``GroupSpec``s of ``CompileSettings.gated``/``gated_writes``/``held``/``folded_writes`` on
    ``netlist`` (names are signal names): a group of registers is gated by a 1-bit register's next
    value (its D net), a group of output ports by a 1-bit output's net, a memory's write group by its
    write enable, a held group of registers by a 1-bit output's net (with its dirty register named),
    a memory's folded data chunks by the OR of their bits (no gate net).
    Raises Netlist2TFError naming a member or gate that does not fit."""
    sigs = {s.name: s.bits for s in netlist.signals}
    outs = {p.name: p.bits for p in netlist.outputs}
    d_of_q = {q: d for r in netlist.registers for q, d in zip(r.q, r.d)}

    driven = {n for c in netlist.cells for _, sig in c.outputs for n in sig} | \
        {n for m in netlist.memories for rp in m.read_ports for n in rp.data} | \
        {n for p in netlist.inputs for n in p.bits}

    def is_reg(name):
        """A register signal: some bits register outputs, the rest constants or undriven (a dead
        register slice the kept-outputs netlist dropped)."""
        return name in sigs and any(n in d_of_q for n in sigs[name]) and \
            all(n in d_of_q or n in (CONST0, CONST1, CONSTX) or n not in driven for n in sigs[name])

    def reg_nets(name):
        return tuple(n for n in sigs[name] if n in d_of_q)
    specs = []
    for gate, members in gated:
        if not members:
            raise Netlist2TFError(f"gated group {gate}: name at least one member")
        # output ports first: a port that a register drives directly may share its name
        if all(m in outs for m in members) and gate in outs:
            if len(outs[gate]) != 1 or outs[gate][0] in (CONST0, CONST1, CONSTX) or gate in members:
                raise Netlist2TFError(f"gated outputs: the gate {gate!r} must be a 1-bit output (not a "
                                      f"constant) outside the group")
            specs.append(GroupSpec("out", gate, outs[gate][0], tuple(members)))
        elif all(is_reg(m) for m in members):
            if not is_reg(gate) or len(sigs[gate]) != 1 or gate in members:
                raise Netlist2TFError(f"gated registers: the gate {gate!r} must be a 1-bit register outside the group")
            specs.append(GroupSpec("reg", gate, d_of_q[sigs[gate][0]], tuple(n for name in members for n in reg_nets(name))))
        else:
            bad = [m for m in members if not is_reg(m) and m not in outs]
            if bad:
                raise Netlist2TFError(f"gated registers: {bad[0]!r} is not a register of {netlist.top}"
                                      + (" (nor an output port)" if outs else ""))
            raise Netlist2TFError(f"gated group {gate}: its members mix registers and outputs; a group is "
                                  f"all registers or all output ports")
    for gate, dirty, members in held:
        if not members:
            raise Netlist2TFError(f"held group {gate}: name at least one member")
        if gate not in outs or len(outs[gate]) != 1 or outs[gate][0] in (CONST0, CONST1, CONSTX):
            raise Netlist2TFError(f"held group {gate}: the gate must be a 1-bit output port of {netlist.top} "
                                  f"(kept among the outputs), 1 in the cycles that change the group and the "
                                  f"cycles after them")
        if dirty == "":             # a tail group: no dirty bit (protocol.py "tail")
            bad = [m for m in members if not is_reg(m)]
            if bad:
                raise Netlist2TFError(f"held group {gate}: {bad[0]!r} is not a register of {netlist.top}")
            specs.append(GroupSpec("reg", gate, outs[gate][0], tuple(n for name in members for n in reg_nets(name)),
                                   tail=True))
            continue
        if not is_reg(dirty) or len(sigs[dirty]) != 1 or dirty in members:
            raise Netlist2TFError(f"held group {gate}: the dirty bit {dirty!r} must be a 1-bit register outside "
                                  f"the group (1 after a cycle that changed it)")
        bad = [m for m in members if not is_reg(m)]
        if bad:
            raise Netlist2TFError(f"held group {gate}: {bad[0]!r} is not a register of {netlist.top}")
        init_of = {q: (r.init >> i) & 1 for r in netlist.registers for i, q in enumerate(r.q)}
        nets = tuple(n for name in members for n in reg_nets(name))
        if any(init_of.get(n, 0) for n in nets) and not init_of.get(sigs[dirty][0], 0):
            # the prompt writes the initial values into one double-buffer row only: a group that does
            # not start at 0 must be emitted in the first frame, which a dirty bit starting at 1 forces
            raise Netlist2TFError(f"held group {gate}: its registers do not start at 0, so the dirty bit "
                                  f"{dirty} must start at 1 (or the registers at 0)")
        specs.append(GroupSpec("reg", gate, outs[gate][0], nets, hold=dirty))
    mems = {m.name: m for m in netlist.memories}
    for kind, what, names in (("write", "gated writes", gated_writes), ("fold", "folded writes", folded_writes)):
        for name in names:
            m = mems.get(name)
            if m is None or not m.write_ports:
                raise Netlist2TFError(f"{what}: {name!r} is not a written memory of {netlist.top} (written "
                                      f"memories: {', '.join(sorted(k for k, v in mems.items() if v.write_ports)) or 'none'})")
            specs.append(GroupSpec(kind, name, m.write_ports[0].enable[0] if kind == "write" else -1, (name,)))
    return tuple(specs)


def memory_problems(netlist: Netlist) -> list[Problem]:
    """Every memory the model cannot hold as it is, each with its HDL source and the rewrite that
    compiles. The compile flows' netlists (lut, macro, macro6) never show the first two: Yosys's
    ``memory_nordff`` makes synchronous reads registers and ``multiport.split_write_ports``
    rewrites several write ports and per-bit enables."""
    problems = []
    for m in netlist.memories:
        if any(rp.clocked for rp in m.read_ports):
            problems.append(Problem(f"memory {m.name} (a synchronous read port)", m.src,
                                    "the model reads memories asynchronously: compile the netlist of a "
                                    "compile flow (`--flow macro`: memory_nordff moves the read's register "
                                    "out of the memory), or register the address instead of the data"))
        if len(m.write_ports) > 1 or (m.write_ports and len(set(m.write_ports[0].enable)) != 1):
            what = f"{len(m.write_ports)} write ports" if len(m.write_ports) > 1 else "per-bit write enables"
            problems.append(Problem(f"memory {m.name} ({what})", m.src,
                                    "the model writes whole words through one port per memory; the compile "
                                    "flows (lut, macro, macro6) rewrite such a memory into that form "
                                    "(netlist2tf/frontend/multiport.py): give the netlist of one of them "
                                    "(`netlist2tf synth DESIGN --flow macro`)"))
        if m.offset:
            problems.append(Problem(f"memory {m.name} (addresses from {m.offset})", m.src,
                                    f"the model addresses words from 0: declare the memory from address 0 "
                                    f"and subtract {m.offset} from its addresses in the design"))
    return problems


def trace_protocol(netlist: Netlist, settings: CompileSettings) -> TraceProtocol:
    """The trace protocol of ``netlist`` (already only the kept outputs) under ``settings``: what
    ``plan_model`` lays the model out for and what a checkpoint's ``trace_protocol.json`` must equal.
    A preloaded ROM (``rom.preload``) has its never-enabled write port, gated by its enable."""
    pre = tuple(settings.preloaded_roms or ())
    netlist = preload(netlist, pre)
    writes = tuple(settings.gated_writes) + tuple(n for n in pre if n not in settings.gated_writes)
    proto = TraceProtocol.from_netlist(netlist, {r.clock for r in netlist.registers}, settings.chunk_bits,
                                       resolve_groups(netlist, settings.gated, writes,
                                                      settings.held, settings.folded_writes))
    looked = set(settings.lookup_roms) | {p.rpartition(":")[0] for p in settings.lookup_ports}
    if looked:
        proto = replace(proto, ports=tuple(replace(p, lookup=p.memory in looked) for p in proto.ports))
    return proto


def reachable_banks(mem, port: int, slots: int) -> list[int]:
    """The banks of ``slots`` words that read port ``port`` of ``mem`` can address: an address bit
    tied to a constant rules out the words that differ in it (a register file kept after the RAM in
    one memory is read through a bank or two, not through all of them)."""
    fixed = {i: int(n == CONST1) for i, n in enumerate(mem.read_ports[port].addr) if n in (CONST0, CONST1, CONSTX)}
    width = len(mem.read_ports[port].addr)
    banks = []
    for bank in range(-(-mem.size // slots)):
        lo, hi = bank * slots, min(mem.size, (bank + 1) * slots)
        if any(a < (1 << width) and all(((a >> i) & 1) == v for i, v in fixed.items()) for a in range(lo, hi)):
            banks.append(bank)
    return banks


def balance_reads(netlist: Netlist, probe: Schedule, target: Target, heads_of, banks: dict,
                  layers_allowed=None, pins: dict | None = None):
    """Move memory reads to later DeltaNet layers while that lowers the most key heads any layer
    needs (Qwen3.5's config has one head count for every DeltaNet layer, so the widest layer's sets
    every layer's DeltaNet weights): a read in a widest layer (the fewest ``banks`` first) goes to
    a later layer that already reads state (``layers_allowed``, or the probe's DeltaNet layers) when
    the design still fits and the widest count, or the number of layers at it, drops. Each move is
    a new schedule with the read pinned (``schedule(read_after=)``). Returns (schedule, pins). The
    CPU: its constant-address a7/a0 reads go from layer 1 (with the fetch's 16 banks) to layer 2
    (rs1, rs2): 18 -> 16 key heads."""
    pins = dict(pins or {})
    while True:
        heads = heads_of(probe)
        top = max(heads)
        allowed = sorted(layers_allowed if layers_allowed is not None else {0} | set(probe.read_layer.values()))
        moved = None
        for key, layer in sorted(probe.read_layer.items(), key=lambda kv: (banks[kv[0]], kv[0])):
            if layer == 0 or heads[layer] != top or not banks[key]:     # a lookup's read holds no banks
                continue
            for later in (c for c in allowed if c > layer):
                trial = {**pins, key: later}
                try:
                    cand = schedule(netlist, target, read_after=trial)
                except ScheduleError:
                    break                    # a later layer is deeper still
                new = heads_of(cand)
                if (max(new), new.count(max(new))) < (top, heads.count(top)):
                    moved = (trial, cand)
                    break
            if moved:
                break
        if moved is None:
            return probe, pins
        pins, probe = moved


def spread_reads(netlist: Netlist, probe: Schedule, target: Target, heads_of, port_heads, read_after: dict,
                 key_heads: int, reg_layer: dict | None = None, span: dict | None = None):
    """Spread memory reads whose banks overflow a layer's ``key_heads`` over several DeltaNet layers
    (the banks of one read port add into the same data pairs, so a read may take its banks from k
    consecutive DeltaNet layers, its data ready after the last): while some layer holds more key
    heads than the target has, the read in such a layer with the most key heads per layer
    (``port_heads(key)`` over its layers) takes one more layer. Only reads on a published
    geometry's shapes spread (a standalone model sizes its heads to the widest layer instead); a
    read that cannot spread further leaves the problem to the fit check, which names it. Returns
    (schedule, {(memory, port): k}); each step is a new schedule (deeper where the read's data is
    needed: it is ready only after its last layer)."""
    span = dict(span or {})
    while True:
        heads = heads_of(probe)
        over = {i for i, h in enumerate(heads) if h > key_heads}
        cands = [key for key in sorted(probe.read_layer) if set(probe.read_layers(key)) & over and port_heads(key)]
        if not cands:
            return _narrowest(netlist, probe, target, heads_of, read_after, key_heads, reg_layer, span)
        key = max(cands, key=lambda k: port_heads(k) / len(probe.read_layers(k)))
        trial = {**span, key: len(probe.read_layers(key)) + 1}
        try:
            cand = schedule(netlist, target, read_after=read_after, read_span=trial, reg_layer=reg_layer)
        except ScheduleError:
            return probe, span
        if len(cand.read_layers(key)) != trial[key] or cand.read_layer[key] >= target.num_layers:
            return probe, span                 # no DeltaNet layer left to spread to
        span, probe = trial, cand


def late_registers(netlist: Netlist, proto: TraceProtocol, probe: Schedule, target: Target, heads_of,
                   read_after: dict, key_heads: int, keep: set, read_span: dict | None = None) -> dict:
    """Register chunks read by a later DeltaNet layer than 0 while layer 0 holds more than
    ``key_heads`` key heads (a published geometry's layer 0 cannot hold every register, input and
    write-port field of a large design): a chunk whose bits may come as late as level l (the latest
    level each may have and the design still fit, ``schedule.required_levels``) is read in a
    DeltaNet layer <= l instead (one with a key head that has room for it first, then the least
    loaded, the latest on ties), the chunks with the most room first. Its double-buffered head
    there is written by the chunk's REG token exactly as in layer 0 (the token's value, row and
    enable are still in the residual: the embedding's channels that no layer writes). The moves are
    kept only if the design still fits the layers (their readers may move later). Returns {chunk
    index: layer}; ``keep``: chunks that stay in layer 0 (tail chunks)."""
    from netlist2tf.compile.schedule import required_levels

    L, types = target.num_layers, target.layer_types
    need = required_levels(netlist, probe)   # net -> the latest level it may have and the design still fit
    room = {j: min((need.get(n, L - 1) for n in c.bits), default=L - 1) for j, c in enumerate(proto.registers)
            if j not in keep}
    moved: dict = {}
    for j in sorted(room, key=lambda j: (-room[j], j)):
        heads = heads_of(probe, regs=moved)
        if heads[0] <= key_heads:
            break
        where = [i for i in range(1, min(room[j], L - 1) + 1) if types[i] == LINEAR]
        if where:                   # the fewest new key heads (a half-full one first), then the least loaded
            moved[j] = min(where, key=lambda i: (heads_of(probe, regs={**moved, j: i})[i] - heads[i], heads[i], -i))
    if moved:
        reg_layer = {n: layer for j, layer in moved.items() for n in proto.registers[j].bits}
        try:
            cand = schedule(netlist, target, read_after=read_after, read_span=read_span, reg_layer=reg_layer)
        except ScheduleError:
            return {}
        if cand.depth > L - 1:
            return {}
    return moved


def _narrowest(netlist, probe, target, heads_of, read_after, key_heads, reg_layer, span):
    """Undo the spreading steps that the later ones made unnecessary: each spanning read, in
    turn, one layer narrower while no layer from 1 on holds more key heads than before."""
    for key in sorted(span):
        while span.get(key, 1) > 1:
            trial = {**span, key: span[key] - 1}
            cand = schedule(netlist, target, read_after=read_after, read_span=trial, reg_layer=reg_layer)
            old, new = heads_of(probe), heads_of(cand)
            if any(h > max(key_heads, old[i]) for i, h in enumerate(new) if i > 0):
                break
            span, probe = trial, cand
    return probe, {k: v for k, v in span.items() if v > 1}


@dataclass(frozen=True)
class BankLayout:
    """How a memory's words sit in DeltaNet key heads (``_plan_model``'s ``bank_layout``): banks of
    ``words`` words, ``per_key_head`` of them side by side in one key head (rows = low address
    bits), or one ``interleave``-way interleaved bank per key head (value head = low address bits)."""
    words: int
    per_key_head: int
    interleave: int


def memory_capacity_slots(d_k: int) -> int:
    """Words one DeltaNet head holds with key head dim ``d_k``: all d_k where the one-hot query is
    exact (d_k a power of 4: the query scale d_k**-0.5 is a power of two), else one dim is the
    query's dummy (gadgets/deltanet_memory.py). ``write_weights`` checks this against the
    calibration of the real transformers read paths."""
    return d_k if d_k & (d_k - 1) == 0 and (d_k.bit_length() - 1) % 2 == 0 else d_k - 1


ROM_WAYS = ("ffn", "deltanet", "attention")      # how ``auto`` breaks a tie in parameters
LOOKUP_HEAD_DIMS = (64, 256)                      # a standalone model's attention head_dim for ROM lookups


def standalone_layer_types(layers: int) -> tuple[str, ...]:
    """DeltaNet layers with the last one full attention (the attention layer transformers' cache
    expects); the widths of a standalone model are filled in by ``plan_model`` from the design's needs."""
    if layers < 2:
        raise Netlist2TFError("the compiled model needs at least 2 layers (state reads, then logic)")
    return (LINEAR,) * (layers - 1) + (FULL,)


def compiled_target(target: Target) -> Target:
    """``target`` with the compiled model's own layer types (``standalone_layer_types``): the shapes
    of a base checkpoint are shared by all of its layers, the types are not, so the compiled part
    takes DeltaNet wherever a read may go and the one full-attention layer transformers' cache
    expects last, instead of the base's pattern (whose silent attention layers cost depth)."""
    return replace(target, layer_types=standalone_layer_types(target.num_layers))


def plan_model(netlist: Netlist, settings: CompileSettings = CompileSettings()) -> ModelPlan:
    """Plan ``netlist`` (the LUT/macro flow's netlist) as a model (see the module docstring).

    Without ``settings.target`` the model is shaped for the design: ``layers`` layers, DeltaNet
    layers where state is read (layer 0 and the memory reads' layers, the others minimal
    full-attention layers whose weights are all zero), DeltaNet key heads of ``head_dim`` slots and
    value heads of one chunk (``4 * chunk_bits`` dims). With a target the model uses exactly its
    per-layer shapes, or the error lists every number that does not fit.
    Read-only memories are held as ``settings.roms`` says; under ``auto`` the design is planned
    with every ROM as FFN decoders, preloaded into DeltaNet banks, and as attention lookups over
    the prompt, and the plan with fewer parameters is kept (one that fits, if only some do; on a
    tie in that order: FFN needs no prompt), its ``stats["roms"]`` saying what each way cost.
    Raises ScheduleError (too deep / too wide) or Netlist2TFError (unsupported features)."""
    with shared_schedules():        # the probe's schedule is the target's when the pins are the same
        return _plan_model_ways(netlist, settings)


def _plan_model_ways(netlist: Netlist, settings: CompileSettings) -> ModelPlan:
    """``plan_model`` inside its schedule memo: the ROMs' ways planned and the best kept."""
    if settings.outputs is not None:
        netlist = keep_outputs(netlist, settings.outputs)
    problems = memory_problems(netlist)
    if problems:
        raise UnsupportedDesignError(problems)
    roms = tuple(m.name for m in netlist.memories if not m.write_ports)
    if settings.preloaded_roms is not None:
        return _plan_model(netlist, settings)

    def way_settings(way):
        return replace(settings, preloaded_roms=() if way == "ffn" else roms,
                       lookup_roms=roms if way == "attention" else ())
    if not roms or settings.roms != "auto":
        return _plan_model(netlist, way_settings(settings.roms if roms else "ffn"))
    plans, failed = {}, {}
    for way in ROM_WAYS:
        try:
            plans[way] = _plan_model(netlist, way_settings(way))
        except (ScheduleError, Netlist2TFError) as exc:
            failed[way] = exc
    if not plans:
        raise failed["ffn"]
    way = min(plans, key=lambda w: (plans[w].stats["parameters"], ROM_WAYS.index(w)))
    plans[way].stats["roms"] = {
        "chosen": way, "memories": list(roms),
        **{f"{w}_parameters": p.stats["parameters"] for w, p in plans.items()},
        **{f"{w}_failed": " ".join(str(exc).split()) for w, exc in failed.items()}}
    return plans[way]


def _plan_model(netlist: Netlist, s: CompileSettings) -> ModelPlan:
    """``plan_model`` with ``s.preloaded_roms`` resolved, in steps, each deciding one thing:

    1. ``_Shape``: the layers, their types and the DeltaNet head sizes (the target's, or the design's);
    2. ``_MemoryHeads``: how memory banks and register chunks fill DeltaNet key heads;
    3. ``_place_reads``: the layers state is read in (a probe schedule on unbounded widths);
    4. ``_residual``: the residual channels (the logic's pairs, the control fields, the layout);
    5. ``_ffn_neurons``: every layer's FFN neurons (the logic, pair resets, the token selection);
    6. ``_fit``: the shapes the model gets (the design's), or every number that does not fit the target;
    7. the final schedule, the DeltaNet heads, the embedding and LM-head rows, the stats.
    """
    netlist = preload(netlist, s.preloaded_roms)
    proto = trace_protocol(netlist, s)
    shape = _Shape.of(netlist, proto, s)
    heads_plan = _MemoryHeads(netlist, proto, shape)
    reads = _place_reads(netlist, proto, shape, heads_plan)
    res = _residual(netlist, proto, shape, reads, s)
    neurons, owners = _ffn_neurons(netlist, proto, shape, reads, res)
    looks = _plan_lookups(netlist, proto, shape, reads, res, s.lookup_roms)
    target, intermediate = _fit(netlist, shape, reads, res, neurons, looks)
    layers, group = shape.layers, reads.group
    # the reads are placed by the probe's layer types (a lookup's layer was DeltaNet there); the
    # schedule keeps the model's target
    sched = schedule(netlist, replace(target, layer_types=shape.types), read_after=reads.read_after,
                     read_span=reads.read_span, reg_layer=reads.reg_layer)
    sched = replace(sched, target=target)
    if sched.read_layer != reads.probe.read_layer:
        raise AssertionError("the memory reads moved between the probe and the final schedule")

    heads = _plan_heads(proto, res.layout, res.names, res.pairs, sched, shape.mems, res.mem_proto,
                        shape.write_chunks, group, reads.nk, shape.slots, layers,
                        lambda n: str(netlist.nets[n]), lambda mem: heads_plan.bank_layout(mem, group),
                        heads_plan.late_regs, heads_plan.port_counts(sched, group)[1].__getitem__, shape.lookups)
    embedding, lm_head = _plan_tokens(proto, res.names, res.emit_chunks, shape.write_chunks, res.layout, res.branches)
    inits = {f"reg:{r.name}": r.init for r in netlist.registers}
    memory = {p.memory: {a: w for a, w in enumerate(shape.mems[p.memory].init) if w} for p in proto.ports}
    memory = {k: v for k, v in memory.items() if v}
    possible = [g.gate not in (CONST0, CONSTX) for g in proto.groups]
    key_heads = reads.key_heads
    stats = {"layers": layers, "hidden_size": res.hidden, "intermediate_size": intermediate,
             "neurons_per_layer": [len(n) for n in neurons], "live_pairs_per_layer": res.live,
             "deltanet_heads": [h * group for h in key_heads], "deltanet_key_heads": key_heads,
             "layer_types": list(reads.types), "linear_key_head_dim": shape.dk, "linear_value_head_dim": shape.dv,
             # at most: every group that can be on (a preloaded ROM's port, gated by a constant 0, never is)
             "tokens_per_cycle": len(proto.inputs) + len(proto.frame_kinds(possible)),
             "generated_tokens_per_cycle": len(proto.frame_kinds(possible)),
             "generated_tokens_per_cycle_gate_off": len(proto.frame_kinds(False)),
             "vocab_size": proto.vocab_size, "parameters": dense_parameters(target, proto.vocab_size),
             "depth": sched.depth,
             **({"attention_heads": list(looks.per_layer)} if looks.heads else {})}
    return ModelPlan(s, netlist, proto, sched, target, res.layout, res.pairs, res.names,
                     tuple(tuple(n) for n in neurons), heads, tuple(key_heads), embedding, lm_head,
                     res.needed, inits, memory, stats, res.model_layout, tuple(tuple(o) for o in owners),
                     res.lifetimes, looks.heads)


@dataclass
class _Shape:
    """Step 1: the compiled model's layers and DeltaNet head sizes. With a target, its shapes with
    the compiled layers' own types (``compiled_target``); without, the design's (``layers`` layers,
    key heads of ``head_dim`` slots, value heads of one chunk). ``group``: value heads per key head
    (the target's; the design's widest memory word until ``_place_reads`` chooses)."""
    target: Target | None
    layers: int
    types: tuple
    dk: int
    dv: int
    group: int
    piece: int                      # bits per DeltaNet value head (quarter packing)
    word_heads: int                 # value heads the widest written memory word needs
    slots: int                      # words a key head's bank holds
    kernel: int                     # the DeltaNet conv's reach
    mems: dict
    write_chunks: list
    tail_lags: dict
    lookups: frozenset = frozenset()    # (memory, read port)s read by attention lookups (no DeltaNet banks)

    @property
    def lookup_mems(self) -> list:
        """The memories with a read port read by attention lookups (their writes make the keys)."""
        return sorted({m for m, _ in self.lookups})

    @classmethod
    def of(cls, netlist: Netlist, proto: TraceProtocol, s: CompileSettings) -> "_Shape":
        chunk_bits, target = s.chunk_bits, s.target
        if target is not None:
            # the compiled layers' own types are the compiler's, whatever the base's pattern (a merge
            # lists every layer's type): DeltaNet wherever state may be read, the last layer full
            # attention. A silent full-attention layer is depth a read cannot use, and its KV cache
            # grows with the trace (on Qwen3.5-4B's shapes 4 GB per million positions in bfloat16)
            target = compiled_target(target)
            layers, types = target.num_layers, target.layer_types
            dk, dv = target.linear_key_head_dim, target.linear_value_head_dim
            group = target.linear_num_value_heads // target.linear_num_key_heads
        else:
            layers = s.layers
            types = standalone_layer_types(layers)
            dk, dv = s.head_dim, 4 * chunk_bits
        if types[0] != LINEAR or FULL not in types:
            raise Netlist2TFError("the compiled model needs a DeltaNet layer first (register reads) and "
                                  f"at least one full-attention layer; the target's layers are {list(types)}")
        piece = dv // 4
        if chunk_bits > piece:
            raise Netlist2TFError(f"{chunk_bits}-bit chunks need DeltaNet value heads of at least "
                                  f"{4 * chunk_bits} dims, not {dv}")
        mems = {m.name: m for m in netlist.memories}
        lookups = frozenset((m.name, p) for m in netlist.memories for p in range(len(m.read_ports))
                            if m.name in s.lookup_roms or f"{m.name}:{p}" in s.lookup_ports)
        known = {f"{m.name}:{p}" for m in netlist.memories if m.write_ports for p in range(len(m.read_ports))}
        unknown = sorted(set(s.lookup_ports) - known)
        if unknown:
            raise Netlist2TFError(f"lookup ports {', '.join(unknown)}: not a read port of a written memory of "
                                  f"{netlist.top} (they are: {', '.join(sorted(known)) or 'none'})")
        banked = {m for m, p in ((m.name, p) for m in netlist.memories for p in range(len(m.read_ports)))
                  if (m, p) not in lookups}
        word_heads = max([1] + [-(-m.width // piece) for m in netlist.memories
                                if m.write_ports and m.name in banked])
        if target is None:
            group = word_heads
        write_chunks = [(MA, c.index) for c in proto.mem_addr] + [(MD, c.index) for c in proto.mem_data]
        for m in netlist.memories:
            if m.read_ports and m.write_ports and m.name in banked and -(-m.width // piece) > group:
                raise UnsupportedDesignError([Problem(
                    f"memory {m.name} ({m.width}-bit words)", m.src,
                    f"a word needs {-(-m.width // piece)} DeltaNet value heads of {piece} bits under one key "
                    f"head and the target groups {group}: split the memory into memories of at most "
                    f"{group * piece}-bit words (the same addresses), or use a target with more value heads "
                    f"per key head")])
        # a tail group's chunks: one key head each (its own write lag), written from the token `lag`
        # positions before the frame's last one, which the conv kernel must reach
        tail_lags = proto.tail_lags()
        kernel = target.linear_conv_kernel_dim if target is not None else 4
        for (kind, j), lag in tail_lags.items():
            if lag >= kernel:
                raise Netlist2TFError(f"tail group {next(g.name for g in proto.groups if g.tail)}: "
                                      f"its chunk is {lag} tokens before the frame's end, the DeltaNet conv "
                                      f"reaches {kernel - 1}; give it a dirty bit (a double-buffered held group)")
        return cls(target, layers, types, dk, dv, group, piece, word_heads, memory_capacity_slots(dk), kernel,
                   mems, write_chunks, tail_lags, lookups)


class _MemoryHeads:
    """Step 2: how state fills DeltaNet key heads of ``group`` value heads (``group`` defaults to the
    shape's): memory banks (``bank_layout``, ``banks_of``, ``port_key_heads``) and, per layer, layer
    0's state chunks, the registers read later (``late_regs``, filled by ``_place_reads``) and the
    read ports' banks (``port_counts``, ``heads_of``)."""

    def __init__(self, netlist: Netlist, proto: TraceProtocol, shape: _Shape):
        self.netlist, self.proto, self.shape = netlist, proto, shape
        self.cap = shape.target.linear_num_key_heads if shape.target is not None else None
        self.late_regs: dict = {}             # register chunk -> its (later) layer: late_registers
        self._bank_counts: dict = {}

    def bank_layout(self, mem, g) -> BankLayout:
        """How ``mem``'s words sit in key heads of ``g`` value heads. Value heads sharing a key head
        hold different words in the same rows (told apart by ``write_select``/``read_select``):
        with a power-of-two bank (d_k = 16, 64, 256) and whole banks, the rows are the address's
        low bits and a key head holds ``g / heads per word`` banks side by side (the selects: the
        bits above the rows); with d_k = 128 (127 slots) a key head holds one *interleaved* bank of
        127 x s words (s the largest power of two of value heads it can hold words in): the
        address's low log2(s) bits choose the value head, the rest the row."""
        slots, piece = self.shape.slots, self.shape.piece
        per = max(1, g // -(-mem.width // piece))
        if not (slots & (slots - 1) or mem.size % slots):
            return BankLayout(slots, per, 1)
        if slots & (slots - 1):
            s = 1 << (per.bit_length() - 1)
            return BankLayout(slots * s, 1, s)
        return BankLayout(slots, 1, 1)

    def banks_of(self, group=None) -> dict:
        """{(memory, read port): the banks it can address} with key heads of ``group`` value heads."""
        group = self.shape.group if group is None else group
        if group not in self._bank_counts:
            self._bank_counts[group] = {     # an attention lookup's read: no banks
                (m.name, p): 0 if (m.name, p) in self.shape.lookups else
                len(reachable_banks(m, p, self.bank_layout(m, group).words))
                for m in self.netlist.memories if m.write_ports for p in range(len(m.read_ports))}
        return self._bank_counts[group]

    def port_key_heads(self, key, group=None) -> int:
        group = self.shape.group if group is None else group
        return -(-self.banks_of(group)[key] // self.bank_layout(self.shape.mems[key[0]], group).per_key_head)

    def port_counts(self, sched, group=None, regs=None) -> tuple[list[int], dict]:
        """(DeltaNet key heads per layer, {read: its key heads in each of its layers}), each key
        head with up to `group` value heads: layer 0's state chunks (the one-row inputs and
        write-port fields share key heads, the double-buffered registers theirs, a tail chunk one
        of its own) and the register chunks read later (``late_registers``), then per read port
        its banks, as many to a key head as `group` holds words (``bank_layout``); a read that
        spans several layers fills each of them up to the target's key heads, the last taking the
        rest (the reads in one layer first, then the spanning ones by name)."""
        group = self.shape.group if group is None else group
        proto, layers, tail_lags = self.proto, self.shape.layers, self.shape.tail_lags
        heads = [0] * layers
        late = self.late_regs if regs is None else regs
        heads[0] = sum(-(-n // group) for n in (len(proto.inputs) + len(self.shape.write_chunks),
                                                 len(proto.registers) - len(tail_lags) - len(late))) + len(tail_lags)
        for layer in sorted(set(late.values())):
            heads[layer] += -(-sum(1 for v in late.values() if v == layer) // group)
        counts = {}
        for key in sorted(sched.read_layer, key=lambda k: (len(sched.read_layers(k)) > 1, k)):
            if key in self.shape.lookups:
                continue
            where = [min(layer, layers - 1) for layer in sched.read_layers(key)]
            left, mine = self.port_key_heads(key, group), []
            for i, layer in enumerate(where):
                n = left if i == len(where) - 1 or self.cap is None else min(left, max(0, self.cap - heads[layer]))
                heads[layer] += n
                mine.append(n)
                left -= n
            counts[key] = mine
        return heads, counts

    def heads_of(self, sched, group=None, regs=None) -> list[int]:
        """DeltaNet key heads per layer (``port_counts``)."""
        return self.port_counts(sched, group, regs)[0]


@dataclass
class _Reads:
    """Step 3's result: the probe schedule and where state is read; the layer types and value heads
    per key head as they end up (a design's own model: DeltaNet only where state is read, the
    cheapest group); key heads per layer."""
    probe: Schedule
    read_after: dict
    read_span: dict
    reg_layer: dict
    types: tuple
    group: int
    key_heads: list
    nk: int


def _place_reads(netlist: Netlist, proto: TraceProtocol, shape: _Shape, mh: _MemoryHeads) -> _Reads:
    """Step 3: where the memory reads go (it does not depend on the widths: one schedule on unbounded
    ones), balanced over the DeltaNet layers; on a target, reads spread over several layers and
    registers move out of layer 0 where its key heads do not suffice (``spread_reads``,
    ``late_registers``). A ROM's attention lookup (``shape.lookups``) makes its layer a
    full-attention layer: where DeltaNet state is read in the same layer, the lookup waits for the
    next one (pinned with ``read_after``) and the reads are placed again."""
    pins: dict = {}
    while True:
        mh.late_regs.clear()
        reads = _place_reads_once(netlist, proto, shape, mh, pins)
        probe = reads.probe
        fixed = {0} | set(mh.late_regs.values())
        banked = {key: probe.read_layers(key) for key in probe.read_layer if key not in shape.lookups}
        clash = {key: layer for key, layer in probe.read_layer.items() if key in shape.lookups
                 and (layer in fixed or any(layer in where for where in banked.values()))}
        if not clash:
            return reads
        # first move the DeltaNet reads out of the lookups' layers (a read whose data is needed late
        # loses nothing), else the lookups wait a layer
        moved = {key: max(set(where) & set(clash.values())) + 1 for key, where in banked.items()
                 if set(where) & set(clash.values())}
        if not set(clash.values()) & fixed and moved:
            try:
                mh.late_regs.clear()
                _place_reads_once(netlist, proto, shape, mh, {**pins, **moved})
            except ScheduleError:
                pass
            else:
                pins.update(moved)
                continue
        for key, layer in clash.items():
            if layer + 1 >= shape.layers:
                raise ScheduleError(f"the attention lookup of {key[0]} (read port {key[1]}) finds no layer "
                                    f"without DeltaNet reads in {shape.layers} layers; use more layers or "
                                    f"DeltaNet banks for it")
            pins[key] = layer + 1


def _place_reads_once(netlist: Netlist, proto: TraceProtocol, shape: _Shape, mh: _MemoryHeads,
                      pins: dict) -> _Reads:
    target, layers, types, dk, dv = shape.target, shape.layers, shape.types, shape.dk, shape.dv
    probe_target = Target(1 << 30, 1 << 30, types, 1, 1, dk, dv, 1, 1, 16,
                          name=target.name if target else f"of {layers} layers")
    probe = schedule(netlist, probe_target, read_after=pins or None)
    probe, read_after = balance_reads(netlist, probe, probe_target, mh.heads_of, mh.banks_of(),
                                      None if target is None else {i for i, t in enumerate(types) if t == LINEAR},
                                      pins=pins)
    read_span: dict = {}
    reg_layer: dict = {}
    if target is not None:
        # reads spread first (layer 0's overflow is the registers'), then registers move to the
        # layers left with room, then reads spread again where those filled a layer
        probe, read_span = spread_reads(netlist, probe, probe_target, mh.heads_of, mh.port_key_heads, read_after,
                                        target.linear_num_key_heads)
        mh.late_regs.update(late_registers(netlist, proto, probe, probe_target, mh.heads_of, read_after,
                                           target.linear_num_key_heads, {j for _, j in shape.tail_lags}, read_span))
        reg_layer = {n: layer for j, layer in mh.late_regs.items() for n in proto.registers[j].bits}
        if reg_layer:
            probe = schedule(netlist, probe_target, read_after=read_after, read_span=read_span, reg_layer=reg_layer)
            probe, read_span = spread_reads(netlist, probe, probe_target, mh.heads_of, mh.port_key_heads, read_after,
                                            target.linear_num_key_heads, reg_layer, read_span)
    group = shape.group
    looked = {layer for key, layer in probe.read_layer.items() if key in shape.lookups}
    if target is None:                        # DeltaNet only where state is read
        used = {0} | {layer for key, layer in probe.read_layer.items() if key not in shape.lookups}
        types = tuple(LINEAR if i in used else FULL for i in range(layers))
    else:                                     # a lookup's layer is full attention
        types = tuple(FULL if i in looked else t for i, t in enumerate(types))
    if target is None:
        # Qwen3.5's head counts are global: the value heads per key head that cost the fewest
        # DeltaNet weights per residual channel (2 nk dk + nv (3 dv + 2)), banks sharing key heads
        def cost(g):
            nk_g = max(1, max(mh.heads_of(probe, g)))
            return (2 * nk_g * dk + nk_g * g * (3 * dv + 2), g)
        group = min((shape.word_heads << k for k in range(7)), key=cost)
    key_heads = mh.heads_of(probe, group)
    return _Reads(probe, read_after, read_span, reg_layer, types, group, key_heads, max(1, max(key_heads)))


@dataclass
class _Residual:
    """Step 4's result: the residual stream's pairs (the logic's, reused as nets die, and the
    control fields'), the layout the gadgets are planned in and the checkpoint's."""
    pairs: dict
    resets: list
    lifetimes: dict
    live: list
    names: dict
    emit_chunks: list
    branches: list
    mem_proto: dict
    d_of_q: dict
    needed: int
    hidden: int
    layout: ResidualLayout
    model_layout: ResidualLayout

    def P(self, name, i=0):
        return self.layout.pair(self.names[name][i])


def _residual(netlist: Netlist, proto: TraceProtocol, shape: _Shape, reads: _Reads, s: CompileSettings) -> _Residual:
    """Step 4: a pair of channels per live net of the logic (reused once a net is dead), then the
    extra pairs: token value, write enables and rows of the layer-0 heads, read parity, commit flag,
    the gathered write-port fields, emit one-hot, emit parity, emitted value."""
    chunk_bits, layers = s.chunk_bits, shape.layers
    mem_proto = {p.memory: p for p in proto.ports}
    d_of_q = {q: d for r in netlist.registers for q, d in zip(r.q, r.d)}
    emit_chunks = list(proto.generated)
    kept = {d_of_q[n] if kind == REG else n for kind, idx in emit_chunks
            for n in proto.chunks_of(kind)[idx].bits}
    kept |= {g.gate for g in proto.groups if g.gate >= 0}   # read by the last FFN: which token follows a branch
    pairs, resets = allocate_pairs_reusing(netlist, reads.probe, kept)
    lifetimes = pair_lifetimes(netlist, reads.probe, kept)
    live = live_pairs(lifetimes, layers)

    base = max(pairs.values(), default=-1) + 1
    names = {}

    def extra(name, count):
        start = base + sum(len(v) for v in names.values())
        names[name] = tuple(range(start, start + count))

    extra("tv", chunk_bits)
    extra("we_in", len(proto.inputs))
    extra("we_reg", len(proto.registers))
    extra("we_tail", len(shape.tail_lags))
    extra("regpar", 2)
    extra("we_w", len(shape.write_chunks))
    extra("rp", 2)
    extra("commit", 1)
    for kind, j in shape.write_chunks:
        extra(f"wf:{kind}:{j}", len(proto.chunks_of(kind)[j].bits))
    extra("emit", len(emit_chunks))
    branches = _branch_sets(proto)
    extra("emitbr", sum(len(b) for b in branches))  # a branch's candidates, one slot each
    extra("ep", 1)
    extra("ev", chunk_bits)
    for mem in shape.lookup_mems:         # a lookup's key fields (``_lookup_key_neurons``)
        port = mem_proto[mem]
        extra(f"rk:{mem}:flag", 1)
        extra(f"rk:{mem}:addr", port.addr_width)
        extra(f"rk:{mem}:data", port.data_width)
    n_pairs = base + sum(len(v) for v in names.values())
    signed = s.bits == "signed"
    # The gadgets are planned in pairs; a signed checkpoint folds them (netlist2tf.weights.signed), so its
    # hidden size is the signed one and the pair layout only numbers the channels.
    needed = hidden = ResidualLayout.channels_needed(n_pairs, signed)
    if shape.target is not None:
        hidden = max(hidden, shape.target.hidden_size)   # report the need, build with the target's
    model_layout = ResidualLayout.build(hidden, n_pairs, signed)
    layout = ResidualLayout.build(ResidualLayout.channels_needed(n_pairs), n_pairs) if signed else model_layout
    return _Residual(pairs, resets, lifetimes, live, names, emit_chunks, branches, mem_proto, d_of_q, needed,
                     hidden, layout, model_layout)


def _ffn_neurons(netlist: Netlist, proto: TraceProtocol, shape: _Shape, reads: _Reads, res: _Residual):
    """Step 5: every layer's FFN neurons and who owns them: the logic (``lower_logic``), the pair
    resets, then the emit selection in the last layer's FFN."""
    layers, layout, pairs, d_of_q, P = shape.layers, res.layout, res.pairs, res.d_of_q, res.P
    owners: list = [[] for _ in range(layers)]
    neurons = lower_logic(netlist, reads.probe, layout, pairs, owners)
    for mem in shape.lookup_mems:
        keys = _lookup_key_neurons(proto, res, mem)
        owners[0].append((f"(lookup keys of {mem})", len(neurons[0]), len(neurons[0]) + len(keys)))
        neurons[0] = neurons[0] + keys
    for layer, nets in enumerate(res.resets):
        if nets:
            owners[layer].append(("(pair resets)", len(neurons[layer]), len(neurons[layer]) + len(nets)))
        neurons[layer] += reset_neurons(nets, layout, pairs)
    select: list[Neuron] = []
    for e, (kind, idx) in enumerate(res.emit_chunks):
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
    # A token followed by gated groups is a branch: its embedding sets one slot per candidate chunk
    # (the first group whose gate is 1, else the first ungated chunk after them); each candidate's
    # neurons select its chunk's bits and its emit pair under its gate literals, and flip the emit
    # parity for a register chunk among output or write chunks (those carry the frame's parity).
    # A fold group's gate is the OR of its bits: "off" subtracts them, "on" is a threshold over
    # them (two neurons), dropped for the chunk's own bits, each of which implies it.
    slot = 0
    for cands in res.branches:
        mixed = len({k == REG for (k, _), _ in cands}) > 1
        for (chunk_kind, conds) in cands:
            br = P("emitbr", slot)[0]
            slot += 1
            terms = _condition_terms(proto, layout, pairs, conds)
            if terms is None:                     # a candidate that is never emitted
                continue
            ands, minus, ors = terms
            chunk = proto.chunks_of(chunk_kind[0])[chunk_kind[1]]
            for i, net in enumerate(chunk.bits):
                net, ev = (d_of_q[net] if chunk_kind[0] == REG else net), P("ev", i)
                outs = ((ev[0], 1), (ev[1], -1))
                if net == CONST1:
                    select += _when((br,) + ands, minus, ors, outs)
                elif net not in (CONST0, CONSTX):
                    bit = layout.pair(pairs[net])[0]
                    select += _when((br,) + ands + (bit,), minus, None if ors and bit in ors else ors, outs)
            e = P("emit", res.emit_chunks.index(chunk_kind))
            select += _when((br,) + ands, minus, ors, ((e[0], 1), (e[1], -1)))
            if mixed and chunk_kind[0] == REG:
                ep = P("ep")
                select += _when((br,) + ands + (ep[1],), minus, ors, ((ep[0], 1), (ep[1], -1)))
                select += _when((br,) + ands + (ep[0],), minus, ors, ((ep[0], -1), (ep[1], 1)))
    if select:
        owners[layers - 1].append(("(token selection)", len(neurons[layers - 1]), len(neurons[layers - 1]) + len(select)))
    neurons[layers - 1] = neurons[layers - 1] + select
    return neurons, owners


def _write_fields(proto, res: _Residual, mem) -> tuple[list, list, list]:
    """(enable pair, address pairs, data pairs) of ``mem``'s write port as layer 0 gathers them."""
    wp = res.mem_proto[mem]

    def field_pairs(kind, idxs):
        return [res.P(f"wf:{kind}:{j}", i) for j in idxs for i in range(len(proto.chunks_of(kind)[j].bits))]
    ma = field_pairs(MA, wp.ma)                   # [en, addr bits..., the packed data bits]
    return ma[0], ma[1:1 + wp.addr_width], ma[1 + wp.addr_width:] + field_pairs(MD, wp.md)


def _lookup_key_neurons(proto, res: _Residual, mem) -> list[Neuron]:
    """Layer 0's FFN neurons that make a ROM lookup's keys (``gadgets.rom_lookup``): at a position
    whose gathered write fields are committed with the port enabled (the prompt's groups that write
    the ROM's words; ``TraceProtocol.initial_tokens`` disables the port after the last one), the
    flag, the address bits and the word's bits; 0 everywhere else. Each is one AND (a threshold of 2
    or 3 bits)."""
    en, addr, data = _write_fields(proto, res, mem)
    commit = res.P("commit")[0]

    def gated(lit, out):
        return Neuron(((lit, 1), (en[0], 1), (commit, 1)), -2, ((out[0], 1), (out[1], -1)))
    flag = res.P(f"rk:{mem}:flag")
    out = [Neuron(((en[0], 1), (commit, 1)), -1, ((flag[0], 1), (flag[1], -1)))]
    for i, (one_ch, _) in enumerate(addr):
        out.append(gated(one_ch, res.P(f"rk:{mem}:addr", i)))
    for j, (bit, _) in enumerate(data):
        out.append(gated(bit, res.P(f"rk:{mem}:data", j)))
    return out


@dataclass(frozen=True)
class LookupHead:
    """One q head of a full-attention layer reading a ROM by ``gadgets.rom_lookup.configure_rom_lookup``
    (``plan``; the channels as that function takes them, in the pair layout)."""
    layer: int
    head: int
    plan: object                    # gadgets.rom_lookup.RomLookupPlan
    query: tuple                    # per address bit: (channel of 1, channel of 0), or the constant 0/1
    key_flag: tuple[int, int]
    key_bits: tuple                 # per address bit: the gated key bit's channel, or None
    values: tuple[int, ...]
    out_pairs: tuple[tuple[int, int], ...]
    holds: str = ""


@dataclass(frozen=True)
class _Lookups:
    """Step 5a's result: the lookup heads and the attention shapes they need (q heads, KV heads,
    head_dim; q heads used per layer)."""
    heads: tuple
    num_heads: int = 1
    num_kv_heads: int = 1
    head_dim: int = 16
    per_layer: tuple = ()


def _plan_lookups(netlist: Netlist, proto: TraceProtocol, shape: _Shape, reads: _Reads, res: _Residual,
                  roms=()) -> _Lookups:
    """Step 5a: each ROM lookup read (``shape.lookups``) as q heads of its layer's attention: per
    layer one KV head per ROM and slice of ``head_dim / 2`` word bits (mirrored value dims), the
    ROM's read ports in that layer as the q heads of its KV group; every lookup planned for the most
    address bits of any (q_norm/k_norm and the plan are shared). A standalone model takes the first
    head_dim of ``LOOKUP_HEAD_DIMS`` that holds them, a target its own (ScheduleError if it cannot)."""
    from netlist2tf.gadgets import RomLookupError, plan_rom_lookup

    reads_at = sorted((layer, key) for key, layer in reads.probe.read_layer.items() if key in shape.lookups)
    if not reads_at:
        return _Lookups(())
    mems, target, layout, pairs = shape.mems, shape.target, res.layout, res.pairs
    bits = max(max(len(mems[m].read_ports[p].addr), res.mem_proto[m].addr_width) for _, (m, p) in reads_at)
    dims = (target.head_dim,) if target is not None else LOOKUP_HEAD_DIMS
    plan, why = None, []
    for hd in dims:
        rotary = int(hd * (target.partial_rotary_factor if target is not None else 0.25))
        try:
            plan = plan_rom_lookup(hd, rotary, bits)
            break
        except RomLookupError as exc:
            why.append(str(exc))
    if plan is None:
        raise ScheduleError(f"the ROM lookups ({bits} address bits) fit no attention head: " + "; ".join(why))
    hd = plan.head_dim
    piece = hd // 2
    by_layer: dict = {}
    for layer, (m, p) in reads_at:
        by_layer.setdefault(layer, {}).setdefault(m, []).append(p)
    nkv = max(sum(-(-mems[m].width // piece) for m in ms) for ms in by_layer.values())
    group = max(len(ps) for ms in by_layer.values() for ps in ms.values())
    if target is not None:
        if nkv > target.num_key_value_heads or group > target.num_attention_heads // target.num_key_value_heads:
            raise ScheduleError(
                f"the ROM lookups need {nkv} KV heads of {group} q heads in a layer, the target {target.name} "
                f"has {target.num_key_value_heads} of {target.num_attention_heads // target.num_key_value_heads}")
        group = target.num_attention_heads // target.num_key_value_heads
    heads, per_layer = [], [0] * shape.layers
    for layer, ms in sorted(by_layer.items()):
        kv = 0
        for m in sorted(ms):
            wp, mm = res.mem_proto[m], mems[m]
            flag = res.P(f"rk:{m}:flag")
            key_bits = tuple(res.P(f"rk:{m}:addr", i)[0] for i in range(wp.addr_width))
            for lo in range(0, mm.width, piece):
                for q, port in enumerate(ms[m]):
                    rp = mm.read_ports[port]
                    query = tuple(1 if n == CONST1 else 0 if n in (CONST0, CONSTX) else layout.pair(pairs[n])
                                  for n in rp.addr)
                    span = range(lo, min(lo + piece, mm.width))
                    heads.append(LookupHead(
                        layer, kv * group + q, plan, query, flag, key_bits,
                        tuple(res.P(f"rk:{m}:data", j)[0] for j in span),
                        tuple(layout.pair(pairs[rp.data[j]]) for j in span),
                        holds=f"{'ROM ' if m in roms else ''}{m} read port {port}: bits {span[0]}-{span[-1]} of its "
                              f"{mm.size} words (KV head {kv})"))
                    per_layer[layer] += 1
                kv += 1
    return _Lookups(tuple(heads), nkv * group, nkv, hd, tuple(per_layer))


def _fit(netlist: Netlist, shape: _Shape, reads: _Reads, res: _Residual, neurons,
         looks: _Lookups = _Lookups(())) -> tuple[Target, int]:
    """Step 6: (the model's shapes, its FFN width): the design's own, or the target's after checking
    every number against it (ScheduleError listing each one that does not fit)."""
    layers, target, key_heads, group = shape.layers, shape.target, reads.key_heads, reads.group
    intermediate = max(8, max(len(n) for n in neurons))
    if target is None:
        return Target(res.hidden, intermediate, reads.types, reads.nk, reads.nk * group, shape.dk, shape.dv,
                      looks.num_heads, looks.num_kv_heads, looks.head_dim, name=f"standalone-{layers}"), intermediate
    target = replace(target, layer_types=reads.types)
    problems = target.fits(hidden_channels=res.needed, neurons_per_layer=[len(n) for n in neurons],
                           deltanet_heads_per_layer=[h * group for h in key_heads],
                           attention_heads_per_layer=list(looks.per_layer))
    probe = reads.probe
    crowded = sorted(f"{m}.{p}" for (m, p) in probe.read_layer
                     if any(key_heads[i] > target.linear_num_key_heads for i in probe.read_layers((m, p))))
    if problems and crowded:
        problems.append(f"the banks of memory read(s) {', '.join(crowded)} spread over as many DeltaNet "
                        f"layers as {layers} layers leave; with more layers they spread further (try "
                        f"--layers N, e.g. `cpu fit --layers N` for the CPU)")
    if problems:
        raise ScheduleError(f"{netlist.top} does not fit the target {target.name} ({target.source}):\n  - "
                            + "\n  - ".join(problems))
    return target, intermediate


def _condition_terms(proto, layout, pairs, conds):
    """A branch candidate's conditions as (channels that must be 1, channels that must be 0, the
    channels of which one must be 1 or None): a gate net's pair side; a fold group's bits (off: all
    0; on: any 1)."""
    ands, minus, ors = [], [], None
    for g, on in conds:
        if proto.groups[g].kind == "fold":
            bits = tuple(layout.pair(pairs[n])[0] for n in proto.fold_bits(g))
            if on:
                ors = bits
            else:
                minus += bits
        elif proto.groups[g].gate in (CONST0, CONSTX, CONST1):
            # a constant gate (a preloaded ROM's write port is never enabled): the condition always
            # or never holds
            if on != (proto.groups[g].gate == CONST1):
                return None
        else:
            ands.append(layout.pair(pairs[proto.groups[g].gate])[0 if on else 1])
    return tuple(ands), tuple(minus), ors


def _when(ands, minus, ors, outs) -> list[Neuron]:
    """Neurons adding ``outs`` (channel, weight) exactly when every channel of ``ands`` is 1, every
    one of ``minus`` 0 and (``ors`` not None) one of ``ors`` 1: one relu of the AND, or a threshold
    step (two) with the AND's literals weighted over the OR's count."""
    if ors is None:
        return [Neuron(tuple((c, 1) for c in ands) + tuple((c, -1) for c in minus), -(len(ands) - 1), outs)]
    w = len(ors)
    if not w:
        return []                    # an OR of constant-0 bits: never
    ins = tuple((c, w) for c in ands) + tuple((c, -w) for c in minus) + tuple((c, 1) for c in ors)
    plus, neg = (next(c for c, x in outs if x > 0), next(c for c, x in outs if x < 0))
    return threshold_gate(ins, w * len(ands) + 1, (plus, neg))


def _plan_heads(proto, layout, names, pairs, sched, mems, mem_proto, write_chunks, group, nk, slots, layers,
                net_name=str, layout_of=None, late_regs=None, counts_of=None, lookups=frozenset()):
    """Every DeltaNet value head: layer 0's (and the register chunks ``late_regs`` reads later),
    then the memory banks' (in the order the writer fills them; key heads numbered per layer as
    they are taken)."""
    late_regs = late_regs or {}
    one = layout.one
    never = (layout.pair(names["commit"][0])[0], layout.pair(names["commit"][0])[1])   # never both 1
    next_key = [0] * layers
    heads = []

    def P(name, i=0):
        return layout.pair(names[name][i])

    def bits_of(c):       # a register chunk's bits by their signals' names (its own are Yosys's slices)
        return _bit_names([net_name(n) for n in c.bits] if c.kind == REG else c.names)

    def key_head(layer):
        if next_key[layer] >= nk:
            raise AssertionError(f"layer {layer}: more key heads than planned")
        next_key[layer] += 1
        return next_key[layer] - 1

    # Layer 0: one-chunk value heads, `group` to a key head; each written only by its own token
    # (write enable), in row 0 (inputs, write-port fields: they share key heads) or in the row of
    # the token's parity (registers: the double buffer), read in row 0 / the position's read parity.
    open_heads = {}                  # rows -> [key head, value heads taken]

    def layer0(chunks, enable, rows_w, rows_r, outs, clear=lambda k: None, enable_of=lambda k, c: k, what="",
               layer_of=lambda c: 0):
        for k, c in enumerate(chunks):
            at = layer_of(c)
            slot = open_heads.get((at, rows_w, rows_r))
            if slot is None or slot[1] == group:
                slot = open_heads[(at, rows_w, rows_r)] = [key_head(at), 0]
            heads.append(HeadPlan(at, slot[0] * group + slot[1], rows_w, rows_r,
                                  tuple(P("tv", i) for i in range(len(c.bits))), tuple(outs(k, c)),
                                  P(enable, enable_of(k, c))[0], clear(k),
                                  holds=f"{what} {c.kind.upper()} chunk {c.index}: {bits_of(c)}"))
            slot[1] += 1

    # A folded data chunk's field is cleared by its port's first chunk (written as 0 there), so a
    # frame that skips it commits 0.
    folded = {g.chunks[0]: proto.port(g.members[0]) for g in proto.groups if g.kind == "fold"}

    def clear(k):
        port = folded.get(write_chunks[k])
        return None if port is None else P("we_w", write_chunks.index((MA, port.ma[0])))[0]

    layer0(proto.inputs, "we_in", ((one,),), ((one,),), lambda k, c: [layout.pair(pairs[n]) for n in c.bits],
           what="input")
    tail = proto.tail_lags()
    layer0([c for c in proto.registers if (REG, c.index) not in tail], "we_reg",
           ((P("regpar", 0)[0],), (P("regpar", 1)[0],)), ((P("rp", 0)[0],), (P("rp", 1)[0],)),
           lambda k, c: [layout.pair(pairs[n]) for n in c.bits], enable_of=lambda k, c: c.index,
           what="registers (2 rows: the frame parity),", layer_of=lambda c: late_regs.get(c.index, 0))
    # A tail chunk: one row, written at the frame's last token from the chunk's own token `lag`
    # positions back (its enable and value through the conv), read everywhere; a frame without the
    # chunk writes nothing (the key there is 0), so the row keeps the last value emitted.
    for t, ((_, j), lag) in enumerate(sorted(tail.items())):
        c = proto.registers[j]
        heads.append(HeadPlan(0, key_head(0) * group, ((P("we_tail", t)[0],),), ((one,),),
                              tuple(P("tv", i) for i in range(len(c.bits))),
                              tuple(layout.pair(pairs[n]) for n in c.bits), None, None, lag,
                              holds=f"tail group (1 row, written {lag} tokens back) REG chunk {c.index}: "
                                    f"{bits_of(c)}"))
    layer0([proto.chunks_of(kind)[j] for kind, j in write_chunks], "we_w", ((one,),), ((one,),),
           lambda k, c: [P(f"wf:{write_chunks[k][0]}:{write_chunks[k][1]}", i) for i in range(len(c.bits))], clear,
           what="write-port field (gathered for the commit),")

    def field_pairs(kind, idxs):
        return [P(f"wf:{kind}:{j}", i) for j in idxs for i in range(len(proto.chunks_of(kind)[j].bits))]

    # Memory read ports: banks of `slots` words, addressed by the read port's address bits (decoded
    # in the head) and written at the commit token from the gathered fields of the memory's write
    # port. A key head holds `spread` banks side by side in its value heads when the banks' rows are
    # the address's low bits: the key matches the row, the bank's high bits are the heads' selects;
    # or one bank interleaved over `inter` value heads: the low bits are the selects, the rest the
    # row. A read spanning several DeltaNet layers takes its key heads from each in turn.
    for (mem, port), layer in sorted(sched.read_layer.items()):
        if (mem, port) in lookups:
            continue                                  # an attention lookup's read: no DeltaNet banks
        mm, wp = mems[mem], mem_proto[mem]
        rp = mm.read_ports[port]
        ma = field_pairs(MA, wp.ma)                   # [en, addr bits..., the packed data bits]
        md = ma[1 + wp.addr_width:] + field_pairs(MD, wp.md)          # the word's bits
        piece = sched.target.linear_value_head_dim // 4
        word_heads = -(-mm.width // piece)
        bl = layout_of(mm)
        reach = reachable_banks(mm, port, bl.words)
        spread = bl.per_key_head if len(reach) > 1 else 1
        inter_bits = bl.interleave.bit_length() - 1
        row_bits = slots.bit_length() - 1 if spread > 1 else max(len(rp.addr), wp.addr_width)
        where = sched.read_layers((mem, port))
        take = [l for l, n in zip(where, counts_of((mem, port))) for _ in range(n)]

        addr_pairs = [None if n in (CONST0, CONST1, CONSTX) else layout.pair(pairs[n]) for n in rp.addr]

        def read_lits(a, bits):
            lits = []
            for i in bits:
                bit = (a >> i) & 1
                if addr_pairs[i] is None:
                    if int(rp.addr[i] == CONST1) != bit:
                        return list(never)
                else:
                    lits.append(addr_pairs[i][0 if bit else 1])
            return lits

        def write_lits(a, bits):
            return tuple(ma[1 + i][0 if (a >> i) & 1 else 1] for i in bits if i < wp.addr_width)

        low = range(min(row_bits, len(rp.addr)))
        high = range(row_bits, len(rp.addr))
        for k, at in enumerate(range(0, len(reach), spread)):
            layer = take[k]
            kh = key_head(layer)
            for s_i, bank in enumerate(reach[at:at + spread]):
                words = range(bank * bl.words, min(mm.size, (bank + 1) * bl.words))
                for sel in range(bl.interleave):
                    if inter_bits:      # rows: the address without its low bits; selects: the low bits
                        rows = range(words[0] >> inter_bits, ((words[-1]) >> inter_bits) + 1)
                        reads = [tuple(read_lits(r << inter_bits, range(inter_bits, len(rp.addr)))) or (one,)
                                 for r in rows]
                        writes = [(ma[0][0],) + write_lits(r << inter_bits, range(inter_bits, wp.addr_width))
                                  + (P("commit")[0],) for r in rows]
                        rsel = tuple(read_lits(sel, range(min(inter_bits, len(rp.addr)))))
                        wsel = write_lits(sel, range(inter_bits))
                        held = (f"words {words[0]}-{words[-1]} with address % {bl.interleave} == {sel}")
                    else:
                        reads = [tuple(read_lits(a, low)) or (one,) for a in words]
                        writes = [(ma[0][0],) + write_lits(a, range(min(row_bits, wp.addr_width))) + (P("commit")[0],)
                                  for a in words]
                        rsel = wsel = ()
                        if spread > 1:
                            rsel = tuple(read_lits(words[0], high))
                            wsel = write_lits(words[0], range(row_bits, wp.addr_width))
                        held = f"words {words[0]}-{words[-1]}"
                    for v, lo in enumerate(range(0, mm.width, piece)):
                        bits = range(lo, min(lo + piece, mm.width))
                        heads.append(HeadPlan(layer, kh * group + (s_i + sel) * word_heads + v, tuple(writes),
                                              tuple(reads), tuple(md[i] for i in bits),
                                              tuple(layout.pair(pairs[rp.data[i]]) for i in bits),
                                              write_select=wsel, read_select=rsel,
                                              holds=f"{mem} read port {port}: bank {bank} ({held}), "
                                                    f"bits {bits[0]}-{bits[-1]}"))
    return tuple(heads)


def _bit_names(names) -> str:
    """A chunk's bit names, runs of one signal's consecutive bits shortened: "pc_lo[0:4], m_busy"."""
    out = []                                     # [signal, first bit, last bit] or [name, None, None]
    for n in names:
        m = re.fullmatch(r"(.*)\[(\d+)\]", n)
        if m and out and out[-1][0] == m.group(1) and out[-1][2] == int(m.group(2)) - 1:
            out[-1][2] += 1
        elif m:
            out.append([m.group(1), int(m.group(2)), int(m.group(2))])
        else:
            out.append([n, None, None])
    return ", ".join(s if lo is None else f"{s}[{lo}]" if lo == hi else f"{s}[{lo}:{hi + 1}]" for s, lo, hi in out)


def _branch_sets(proto) -> list:
    """The distinct candidate lists of the branch tokens (``protocol.successors`` with more than
    one entry): after the last input (``first_chunks``), then after each chunk in frame order."""
    sets = []
    for cands in [proto.first_chunks()] + [proto.successors(k) for k in proto.generated]:
        if len(cands) > 1 and tuple(cands) not in sets:
            sets.append(tuple(cands))
    return sets


def _plan_tokens(proto, names, emit_chunks, write_chunks, layout, branches):
    """(embedding, LM head): per token, the pairs its residual vector sets and the channels its
    LM-head row counts (the score of token T is the number of its fields matching EMIT/EP/EV, so the
    right token wins by at least 1). Every token of one (kind, chunk, parity) shares all but its
    value's bits: that part is worked out once per block of ``2**chunk_bits`` tokens."""
    chunk_bits = proto.chunk_bits
    per = 1 << chunk_bits
    commit_kind = emit_chunks[-1]
    tail = {k: t for t, k in enumerate(sorted(proto.tail_lags()))}    # a tail chunk -> its we_tail index
    folds = {}
    for g in proto.groups:
        if g.kind == "fold":
            folds.setdefault((MA, proto.port(g.members[0]).ma[0]), []).append(g.chunks[0])
    slots, first = {}, 0
    for cands in branches:
        slots[tuple(cands)] = first
        first += len(cands)
    # per value: its bits on the TV pairs (the embedding) and the EV channels its LM-head row counts
    tv = [{name: (value >> i) & 1 for i, name in enumerate(names["tv"][:chunk_bits])} for value in range(per)]
    ev = [layout.pair(names["ev"][i]) for i in range(chunk_bits)]
    ev = [tuple(hi if (value >> i) & 1 else lo for i, (hi, lo) in enumerate(ev)) for value in range(per)]
    ep = layout.pair(names["ep"][0])
    embedding, lm_head = [], []
    for start in range(0, proto.vocab_size, per):
        f = proto.field(start)                  # the block's kind, chunk and parity (value 0)
        common = {}
        if f.kind == IN:
            common[names["we_in"][f.chunk]] = 1
        elif f.kind == REG and (REG, f.chunk) in tail:
            common[names["we_tail"][tail[(REG, f.chunk)]]] = 1
        elif f.kind == REG:
            common[names["we_reg"][f.chunk]] = 1
            common[names["regpar"][f.parity]] = 1
        elif f.kind in (MA, MD):
            common[names["we_w"][write_chunks.index((f.kind, f.chunk))]] = 1
            for chunk in folds.get((f.kind, f.chunk), ()):   # a port's first chunk clears its folded ones
                common[names["we_w"][write_chunks.index(chunk)]] = 1
        if (f.kind, f.chunk) == commit_kind:
            common[names["commit"][0]] = 1
        common[names["rp"][proto.read_parity(f)]] = 1
        nxt = proto.next_chunks(f)
        if nxt is not None and len(nxt) > 1:          # a branch: every candidate's slot, decided by gates
            first = slots[tuple(((k, j), c) for k, j, _, c in nxt)]
            for i in range(len(nxt)):
                common[names["emitbr"][first + i]] = 1
            parities = {p for _, _, p, _ in nxt}
            common[names["ep"][0]] = nxt[0][2] if len(parities) == 1 else next(p for k, _, p, _ in nxt if k != REG)
        elif nxt is not None:
            common[names["emit"][emit_chunks.index(nxt[0][:2])]] = 1
            common[names["ep"][0]] = nxt[0][2]
        if f.kind != IN:
            head = (layout.pair(names["emit"][emit_chunks.index((f.kind, f.chunk))])[0], ep[0] if f.parity else ep[1])
        embedding += [{**tv[value], **common} for value in range(per)]
        # an input token is never generated: its row is empty (scores 0, below any real match)
        lm_head += [()] * per if f.kind == IN else [head + ev[value] for value in range(per)]
    return tuple(embedding), tuple(lm_head)
