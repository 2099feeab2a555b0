"""The trace protocol: the tokens of one clock cycle (a frame) and the host's encoder/decoder.

A token carries a *field*: (kind, chunk, parity, value) with ``chunk_bits`` bits of value.

* ``IN`` chunks hold the cycle's input values; the host inserts them at the start of the frame.
* ``OUT`` chunks hold the cycle's output values; the model generates them.
* ``REG`` chunks hold the registers' values for the NEXT cycle; the model generates them after the
  outputs. The initial register values are a frame of REG tokens in the prompt.
* ``MA``/``MD``: the design's memory write ports, generated last, port after port: the MA chunks
  (bit 0 = write enable, then the address) and the MD chunks of the data. Every write of the frame
  commits at the frame's last token (the last MD chunk of the last port): the model gathers the
  fields of every port there (each chunk is kept in a one-row DeltaNet head of layer 0), so every
  earlier position of the frame reads the memories as they were at the start of the cycle. The
  prompt holds, per non-zero initial word of a memory, that memory's port group followed by the
  later ports' groups disabled (so it too ends on the commit token); the largest memory's port comes
  last, which makes that just the memory's own group.

*Gated groups* (``from_netlist(groups=...)``, docs/design/compiler.md 2) are chunks emitted only in the
frames whose gate net is 1; a group is

* ``out``: output ports (packed on their own chunks after the ungated outputs), gated by a 1-bit
  output outside every group (this cycle's value): the host promises not to need them otherwise.
  The gate port itself is not emitted: its value is whether the group's chunks are in the frame;
* ``reg``: registers (packed on their own, first among the registers), gated by a 1-bit register's
  next value: the design promises that their values do not matter in a cycle that starts with that
  register at 0 (the model then holds stale values for them; ``netlist2tf.netlist.formal`` proves it);
* ``reg`` *held* (``hold`` names a dirty register): registers that change rarely but are read,
  gated by a 1-bit output (not emitted either): the design promises that a cycle with the gate at 0
  leaves them unchanged and follows a cycle that left them unchanged, so the double-buffer row the
  next frame reads (written two frames before) holds their value (``netlist2tf.netlist.formal.prove_held``:
  gate 0 implies no change and the dirty register at 0; the dirty register's next value 0 implies
  no change);
* ``reg`` *tail* (a held group without a dirty register, ``tail``): registers that change rarely
  but are read, gated by a 1-bit output (not emitted): stored in ONE row of layer 0 (no double
  buffer) that the frame's last token writes, through the conv's lag from the group's token, so no
  position of the frame sees the new value before the frame ends and a skipped frame leaves the
  value the next frame needs. The promise is one property: gate 0 implies no change
  (``prove_held`` without a dirty bit). The group comes right before the ungated chunks that end
  the frame (at most one tail group: its chunks' distance to the frame's end is then fixed);
* ``write``: a memory's write port group (its MA and MD chunks), gated by its write enable: a frame
  that writes nothing emits none of it. Then the ports come before the ungated registers, whose
  last chunk commits the writes: a skipped group leaves the gathered fields of the last group
  emitted, already committed, so committing them again rewrites a word with its own value;
* ``fold``: one data chunk of a memory's write port after its first (``folded_writes``), emitted
  only when the word has a 1 in that chunk or above it (no gate net: ``fold_bits`` are those bits,
  and the model computes their OR in the select neurons of the last FFN). The port's first chunk
  clears the folded chunks' gathered fields, so a skipped one commits as 0: exact by construction,
  nothing to prove. A fold group is *nested*: it is skipped whenever the group before it in the
  port (the previous fold, or the port's write group) is, so a small word costs its address and its
  bytes up to the highest non-zero one. A folded port's last address chunk carries the word's low
  bits in its room after the address (``WritePort.packed``); then its first data chunk folds too (a
  word below 2**packed costs the address chunks alone). The ports then come before the ungated
  registers too.

The frame is: ungated OUT chunks, OUT groups, REG groups, then the ungated REG chunks and the write
ports (the ports first when any is gated), a tail group right before the ungated REG chunks. The model emits, after a token, the first following
chunk whose group's gate is 1 (or that is ungated); the frame's last chunk is never gated.

Parity (docs/design/compiler.md 2): frame k reads register row ``k % 2`` and writes row ``(k + 1) % 2``.
IN and OUT tokens of frame k carry ``k % 2``, REG tokens of frame k carry ``(k + 1) % 2`` (the row they
write); the prompt's initial REG tokens carry 0. Token id layout: for each kind in (IN, OUT, REG), for
each chunk, for each parity, the 2**chunk_bits values: ``id = base(kind, chunk, parity) + value``.
"""

import dataclasses
import json
from dataclasses import dataclass

from netlist2tf.common import Netlist2TFError
from netlist2tf.netlist import CONST0, CONST1, CONSTX, Netlist

IN, OUT, REG, MA, MD = "in", "out", "reg", "ma", "md"
PROTOCOL_FORMAT = 6              # trace_protocol.json: bumped when its meaning changes (4: output gates unemitted; 5: folded writes; 6: tail groups)
KINDS = (IN, OUT, REG, MA, MD)


class TraceError(Netlist2TFError):
    """A generated trace that does not follow the protocol (wrong kind, chunk or parity)."""


@dataclass(frozen=True, slots=True)
class Field:
    kind: str
    chunk: int
    parity: int
    value: int


@dataclass(frozen=True, slots=True)
class Chunk:
    """``bits[i]`` is the (netlist) net carried by bit i of the chunk's value."""
    kind: str
    index: int
    bits: tuple[int, ...]
    names: tuple[str, ...]       # e.g. "count[3]", for decoding and reports


@dataclass(frozen=True, slots=True)
class WritePort:
    """A memory's write port in the frame: its MA chunk indices (enable, address) and MD chunk
    indices (data), and the widths. ``packed``: the word's low bits carried in the last MA chunk's
    room after the address (a folded port's: protocol "fold"); the MD chunks hold the rest.
    ``lookup``: a ROM read by attention lookups over the prompt (``gadgets.rom_lookup``): its keys must
    be unique, so the prompt disables the port after its last word (no later commit offers it again)."""
    memory: str
    ma: tuple[int, ...]
    md: tuple[int, ...]
    addr_width: int
    data_width: int
    packed: int = 0
    lookup: bool = False


@dataclass(frozen=True, slots=True)
class Group:
    """Chunks emitted only in frames whose ``gate`` net is 1 (module docstring): ``kind`` is "out",
    "reg", "write" or "fold"; ``name`` the gate's signal (out/reg), the memory (write) or the folded
    data bits ("MEM.data[LO:]", fold); ``members`` the output ports, register state names
    ("reg:NAME") or the memory; ``chunks`` (kind, index) in frame order; ``hold``: for a held group
    (kind "reg"), its dirty register's name ("" otherwise): then ``name`` is its gate, a 1-bit
    output port, and the promise is "unchanged while skipped"; ``tail``: a held group without a
    dirty register, kept in one row written at the frame's end (gate an output too). A fold group
    has no gate net (``gate`` -1): ``TraceProtocol.fold_bits`` are the nets whose OR gates it."""
    kind: str
    name: str
    gate: int
    members: tuple[str, ...]
    chunks: tuple[tuple[str, int], ...]
    hold: str = ""
    tail: bool = False

    @property
    def gate_is_output(self) -> bool:
        """The gate is an output port, not emitted: its value is the group's presence."""
        return self.kind == OUT or bool(self.hold) or self.tail


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """A gated group as ``from_netlist`` takes it: ``kind`` "out" (``members``: output port names,
    ``gate``: the net of a 1-bit output outside every group), "reg" (``members``: register output
    nets, ``gate``: a 1-bit register's next value), "write" (``members``: (memory name,), ``gate``:
    its write enable net) or "fold" (``members``: (memory name,), ``gate`` -1: every data chunk of
    the memory's port after the first becomes a fold group); ``name`` labels it. ``hold`` (a "reg"
    group): the dirty register of a held group, whose ``gate`` is then a 1-bit output's net and
    ``name`` that output; ``tail``: a held group without a dirty register (module docstring)."""
    kind: str
    name: str
    gate: int
    members: tuple
    hold: str = ""
    tail: bool = False


def _ports_first(groups) -> bool:
    """Whether the write ports come before the ungated registers (a gated or folded port: the last
    register chunk then ends the frame and commits the writes)."""
    return any(g.kind in ("write", "fold") for g in groups)


def _parents(groups: tuple) -> tuple:
    """Per group, the group whose absence implies its own (a fold group's: the previous fold of its
    port, or the port's write group), else None; computed once per protocol (``_tables``)."""
    out = []
    for k, g in enumerate(groups):
        out.append(None if g.kind != "fold" else
                   next((j for j in range(k - 1, -1, -1)
                         if groups[j].kind in ("fold", "write") and groups[j].members == g.members), None))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class TraceProtocol:
    chunk_bits: int
    inputs: tuple[Chunk, ...]
    outputs: tuple[Chunk, ...]
    registers: tuple[Chunk, ...]
    input_ports: tuple[tuple[str, int], ...]     # (name, width) in chunk order
    output_ports: tuple[tuple[str, tuple[int, ...]], ...]   # (name, its nets; constants 0/1/2)
    register_names: tuple[tuple[str, int], ...]  # (state name "reg:NAME", width), in chunk order
    mem_addr: tuple[Chunk, ...] = ()             # the MA chunks of every write port, port after port
    mem_data: tuple[Chunk, ...] = ()             # the MD chunks, likewise
    ports: tuple["WritePort", ...] = ()          # which MA/MD chunks belong to which memory
    groups: tuple[Group, ...] = ()               # gated groups, in frame order
    # the frame's generated chunks in order (``generated``), computed once: the planner asks for
    # them per vocabulary token
    _generated: tuple = dataclasses.field(init=False, repr=False, compare=False)
    # what every frame's decoding asks, computed once: each group's parent (``_parent``), the group
    # of each gated chunk (``group_of``), the kinds' token ranges (``fields``), the register segments
    _tables: dict = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_generated", tuple(self._order(self.groups)))
        per, spans, offset = 1 << self.chunk_bits, [], 0
        for k in KINDS:
            span = 2 * len(self.chunks_of(k)) * per
            spans.append((k, offset, offset + span))
            offset += span
        group_at = {}
        for i, g in enumerate(self.groups):
            for k in g.chunks:
                group_at.setdefault(tuple(k), i)
        object.__setattr__(self, "_tables", {"parents": _parents(self.groups), "group_at": group_at,
                                             "spans": tuple(spans), "segments": self._segments_of()})

    @property
    def memories(self) -> tuple[str, ...]:
        return tuple(p.memory for p in self.ports)

    @staticmethod
    def from_netlist(netlist: Netlist, clock_nets=frozenset(), chunk_bits: int = 8,
                     groups=()) -> "TraceProtocol":
        """``groups``: ``GroupSpec``s (resolved by ``netlist2tf.compile.plan.resolve_groups``)."""
        def chunks(kind, items, first=0):
            flat = [(n, f"{name}[{i}]" if len(sig) > 1 else name) for name, sig in items
                    for i, n in enumerate(sig)]
            return tuple(Chunk(kind, first + j, tuple(n for n, _ in flat[s:s + chunk_bits]),
                               tuple(nm for _, nm in flat[s:s + chunk_bits]))
                         for j, s in enumerate(range(0, len(flat), chunk_bits)))
        def cut(kind, flat, first):
            """(net, name) pairs cut into chunks of ``kind`` numbered from ``first``."""
            return [Chunk(kind, first + j, tuple(n for n, _ in flat[s:s + chunk_bits]),
                          tuple(nm for _, nm in flat[s:s + chunk_bits]))
                    for j, s in enumerate(range(0, len(flat), chunk_bits))]
        groups = tuple(groups or ())
        ins = [(p.name, p.bits) for p in netlist.inputs if not set(p.bits) & set(clock_nets)]
        # Output chunks carry each distinct non-constant output net once (outputs often share nets,
        # and constant bits need no token); the host rebuilds every port from them. The nets of the
        # outputs outside every group come first, then each output group's own.
        out_groups = [g for g in groups if g.kind == "out"]
        port_names = {p.name for p in netlist.outputs}
        grouped_out = {}
        for g in out_groups:
            for name in g.members:
                if name not in port_names:
                    raise Netlist2TFError(f"gated group {g.name}: {name!r} is not an output of {netlist.top}")
                if name in grouped_out:
                    raise Netlist2TFError(f"output {name} is in two gated groups ({grouped_out[name]}, {g.name})")
                grouped_out[name] = g.name
        # An output group's gate port is not emitted: the host reads its value off the frame (1 where
        # the group's chunks are there), so its bit would be redundant.
        gate_ports = {g.name for g in groups if g.kind == "out" or (g.kind == "reg" and (g.hold or g.tail))}
        if sum(g.tail for g in groups) > 1:
            raise Netlist2TFError(f"held groups {', '.join(g.name for g in groups if g.tail)} have no dirty bit: "
                                  f"at most one such (tail) group fits a frame's end; give the others a dirty bit")
        for name in sorted(gate_ports & set(grouped_out)):
            raise Netlist2TFError(f"output {name} gates a group and is in the gated group {grouped_out[name]}: a "
                                  f"gate's value is the presence of its group, it cannot be skipped itself")
        seen = {}
        for p in netlist.outputs:
            if p.name not in grouped_out and p.name not in gate_ports:
                for n in p.bits:
                    if n not in (CONST0, CONST1, CONSTX) and n not in seen:
                        seen[n] = str(netlist.nets[n])
        out_chunks = chunks(OUT, [(name, (n,)) for n, name in seen.items()])
        group_chunks = {}
        for g in out_groups:
            own = {}
            for p in netlist.outputs:
                if p.name in g.members:
                    for n in p.bits:
                        if n not in (CONST0, CONST1, CONSTX) and n not in seen and n not in own and \
                            n not in {h.gate for h in groups if h.name in gate_ports}:
                            own[n] = str(netlist.nets[n])
            if not own:
                raise Netlist2TFError(f"gated group {g.name}: its outputs have no bits of their own to skip")
            seen.update(own)
            made = chunks(OUT, [(name, (n,)) for n, name in own.items()], len(out_chunks))
            group_chunks[g.name] = tuple((OUT, c.index) for c in made)
            out_chunks += made
        # Registers: each register group packed on its own (group order), then the others.
        regs = [(f"reg:{r.name}", r.q) for r in netlist.registers]
        # (a tail group packed last: its chunks come last among the groups' in the frame too)
        reg_groups = sorted((g for g in groups if g.kind == "reg"), key=lambda g: g.tail)
        reg_chunks, ordered, taken = (), [], set()
        for g in reg_groups:
            members = set(g.members)
            mine = [r for r in regs if set(r[1]) <= members]
            if not mine or {n for _, q in mine for n in q} != members:
                raise Netlist2TFError(f"gated group {g.name}: a gated group must be whole registers (their output nets)")
            if taken & members:
                raise Netlist2TFError(f"gated group {g.name}: a register is in two gated groups")
            taken |= members
            made = chunks(REG, mine, len(reg_chunks))
            group_chunks[g.name] = tuple((REG, c.index) for c in made)
            reg_chunks += made
            ordered += mine
        rest = [r for r in regs if not set(r[1]) & taken]
        if reg_groups and not rest:
            raise Netlist2TFError("a gated group needs at least one register outside it")
        reg_chunks += chunks(REG, rest, len(reg_chunks))
        ordered += rest
        if not regs and not seen:
            raise Netlist2TFError(f"{netlist.top} has no registers and no non-constant outputs: the "
                                  f"model would have nothing to generate")
        ma, md, ports = [], [], []
        # the largest memory last (typically the one a program image fills): its prompt groups then
        # end on the commit token by themselves
        for m in sorted(netlist.memories, key=lambda m: (m.size * m.width, m.name)):
            if len(m.write_ports) > 1 or (m.write_ports and len(set(m.write_ports[0].enable)) != 1):
                what = (f"has {len(m.write_ports)} write ports" if len(m.write_ports) > 1 else
                        "has per-bit write enables")
                raise Netlist2TFError(f"memory {m.name} {what}; the model writes whole words through one "
                                      f"port per memory, and the compile flows (lut, macro, macro6) rewrite "
                                      f"such a memory into that form (netlist2tf/frontend/multiport.py): give the "
                                      f"netlist of one of them (`netlist2tf synth DESIGN --flow macro`)")
            if not m.write_ports:
                continue
            wp = m.write_ports[0]
            if m.offset:
                raise Netlist2TFError(f"memory {m.name} starts at address {m.offset}, not 0")
            # a folded port's last address chunk is filled up with the word's low bits (packed), so
            # a small word folds into fewer tokens (a register write of a value < 4: one token)
            folded = any(g.kind == "fold" and tuple(g.members) == (m.name,) for g in groups)
            room = -(-(1 + len(wp.addr)) // chunk_bits) * chunk_bits - 1 - len(wp.addr)
            packed = min(room, len(wp.data)) if folded else 0
            names = [f"{m.name}.data[{i}]" if len(wp.data) > 1 else f"{m.name}.data" for i in range(len(wp.data))]
            a = cut(MA, [(wp.enable[0], f"{m.name}.en")] +
                    [(n, f"{m.name}.addr[{i}]" if len(wp.addr) > 1 else f"{m.name}.addr") for i, n in enumerate(wp.addr)] +
                    list(zip(wp.data[:packed], names[:packed])), len(ma))
            d = cut(MD, list(zip(wp.data[packed:], names[packed:])), len(md))
            ports.append(WritePort(m.name, tuple(c.index for c in a), tuple(c.index for c in d),
                                   len(wp.addr), len(wp.data), packed))
            ma += a
            md += d
        folds = {}                      # memory -> its folded MD chunk indices
        for g in groups:
            if g.kind in ("write", "fold"):
                what = "gated writes" if g.kind == "write" else "folded writes"
                port = next((p for p in ports if p.memory == g.members[0]), None)
                if port is None:
                    raise Netlist2TFError(f"{what}: {g.members[0]!r} is not a written memory of {netlist.top}")
                if not rest:
                    raise Netlist2TFError(f"{what} need a register outside every gated group: its last "
                                          f"chunk ends the frame and commits the writes")
            if g.kind == "fold":
                # every data chunk folds (after the first when no data bit is packed with the address),
                # except below a constant-1 bit (its OR is 1)
                first = 0 if port.packed else 1
                for k, j in enumerate(port.md):
                    if CONST1 in md[j].bits:
                        first = k + 1
                folds[port.memory] = port.md[first:]
            elif g.kind not in ("out", "reg", "write"):
                raise ValueError(g.kind)
        for g in groups:
            if g.kind == "write":
                port = next(p for p in ports if p.memory == g.members[0])
                group_chunks[g.name] = tuple((MA, j) for j in port.ma) + \
                    tuple((MD, j) for j in port.md if j not in folds.get(port.memory, ()))
        made = tuple(Group(g.kind, g.name, g.gate, tuple(g.members) if g.kind != "reg" else
                           tuple(name for name, q in ordered if set(q) <= set(g.members)), group_chunks[g.name],
                           g.hold, g.tail)
                     for g in groups if g.kind != "fold")
        for p in ports:
            for j in folds.get(p.memory, ()):
                lo = p.packed + p.md.index(j) * chunk_bits
                made += (Group("fold", f"{p.memory}.data[{lo}:]", -1, (p.memory,), ((MD, j),)),)
        proto = TraceProtocol(chunk_bits, chunks(IN, ins), out_chunks, reg_chunks,
                              tuple((n, len(s)) for n, s in ins),
                              tuple((p.name, p.bits) for p in netlist.outputs),
                              tuple((n, len(s)) for n, s in ordered), tuple(ma), tuple(md), tuple(ports), ())
        order = {k: i for i, k in enumerate(proto._order(made))}
        made = tuple(sorted(made, key=lambda g: order[g.chunks[0]]))
        proto = dataclasses.replace(proto, groups=made)
        if proto.group_of(proto.generated[-1]) is not None:
            raise Netlist2TFError("the frame's last chunk is in a gated group; it must always be emitted")
        return proto

    # -- token ids -----------------------------------------------------------------------------
    def chunks_of(self, kind: str) -> tuple[Chunk, ...]:
        return {IN: self.inputs, OUT: self.outputs, REG: self.registers, MA: self.mem_addr,
                MD: self.mem_data}[kind]

    def _order(self, groups) -> list[tuple[str, int]]:
        """The frame's generated chunks, in order, for these groups."""
        gated = {k for g in groups for k in g.chunks}
        tail = [k for g in groups if g.tail for k in g.chunks]
        out = [(OUT, c.index) for c in self.outputs]
        regs = [(REG, c.index) for c in self.registers]
        reg_grouped = [k for k in regs if k in gated and k not in tail]
        reg_rest = [k for k in regs if k not in gated]
        writes = []
        for p in self.ports:
            writes += [(MA, j) for j in p.ma] + [(MD, j) for j in p.md]
        if _ports_first(groups):
            return out + reg_grouped + writes + tail + reg_rest
        return out + reg_grouped + tail + reg_rest + writes

    def tail_lags(self) -> dict:
        """{(REG, chunk): lag} for the tail group's chunks: how many tokens after it the frame ends
        (every chunk after a tail group is ungated, so the distance is the same in every frame)."""
        gen = self.generated
        return {k: len(gen) - 1 - gen.index(k) for g in self.groups if g.tail for k in g.chunks}

    def fold_bits(self, group: int) -> tuple[int, ...]:
        """The nets whose OR gates fold group ``group``: the port's data bits from its chunk up
        (constant 0 bits left out)."""
        g = self.groups[group]
        port = self.port(g.members[0])
        first = port.md.index(g.chunks[0][1])
        return tuple(n for j in port.md[first:] for n in self.mem_data[j].bits if n not in (CONST0, CONSTX))

    def _parent(self, group: int) -> int | None:
        """The group whose absence implies group ``group``'s (``_parents``)."""
        return self._tables["parents"][group]

    def gate_probe(self, group: int) -> tuple[int, ...]:
        """The nets a simulator reads for group ``group``'s gate: the gate net, or a fold group's
        bits (its gate is 1 when any is 1); ``presence`` turns their values into the frame's groups."""
        return self.fold_bits(group) if self.groups[group].kind == "fold" else (self.groups[group].gate,)

    def presence(self, gate_values) -> tuple[bool, ...]:
        """Which groups a frame holds, from each group's ``gate_probe`` value: a group whose gate is
        1, and for a fold group also its parent (``_parent``) present."""
        out = []
        for k, v in enumerate(self._gates([bool(v) for v in gate_values])):
            parent = self._parent(k)
            out.append(v and (parent is None or out[parent]))
        return tuple(out)

    @property
    def generated(self) -> list[tuple[str, int]]:
        """(kind, chunk) of the generated tokens of a frame, in order (every group's chunks included)."""
        return list(self._generated)

    def group_of(self, kind_chunk) -> int | None:
        """Index in ``groups`` of the group holding chunk ``(kind, index)``; None if ungated."""
        return self._tables["group_at"].get(tuple(kind_chunk))

    def frame_kinds(self, gates=True) -> list[tuple[str, int]]:
        """(kind, chunk) of a frame's generated tokens: ``gates`` one bool per group (or one bool for
        all of them)."""
        gates = self.presence(self._gates(gates))
        skip = {k for g, on in zip(self.groups, gates) if not on for k in g.chunks}
        return [k for k in self.generated if k not in skip]

    def _gates(self, gates) -> tuple[bool, ...]:
        if isinstance(gates, bool) or gates is None:
            return (gates is not False,) * len(self.groups)
        gates = tuple(bool(g) for g in gates)
        if len(gates) != len(self.groups):
            raise ValueError(f"{len(gates)} gate values for {len(self.groups)} groups")
        return gates

    def successors(self, kind_chunk) -> list[tuple[tuple[str, int], tuple[tuple[int, bool], ...]]]:
        """What may follow chunk ``(kind, index)`` within its frame: [(chunk, conditions)], each
        condition (group index, gate value); the first group chunks whose gates say so, then the
        first ungated chunk (with every group before it off). A group nested under one that is off
        (a fold group: ``_parent``) is absent with it and adds no condition. [] after the frame's
        last chunk."""
        gen = self.generated
        i = gen.index(tuple(kind_chunk))
        mine = self.group_of(gen[i])
        if mine is not None and gen[i] != self.groups[mine].chunks[-1]:
            return [(gen[i + 1], ())]                 # inside a group: its next chunk
        return self._candidates(i + 1)

    def _candidates(self, j: int) -> list[tuple[tuple[str, int], tuple[tuple[int, bool], ...]]]:
        gen = self.generated
        out, off, absent = [], [], set()
        while j < len(gen):
            g = self.group_of(gen[j])
            if g is None:
                out.append((gen[j], tuple(off)))
                return out
            if self._parent(g) in absent:
                absent.add(g)
            else:
                out.append((gen[j], tuple(off) + ((g, True),)))
                off.append((g, False))
                absent.add(g)
            j += len(self.groups[g].chunks)
        return []

    def first_chunks(self) -> list[tuple[tuple[str, int], tuple[tuple[int, bool], ...]]]:
        """What may begin a frame (as ``successors``)."""
        return self._candidates(0)

    def _base(self, kind: str, chunk: int, parity: int) -> int:
        for k, lo, _ in self._tables["spans"]:
            if k == kind:
                return lo + ((2 * chunk + parity) << self.chunk_bits)
        raise ValueError(kind)

    def token(self, f: Field) -> int:
        return self._base(f.kind, f.chunk, f.parity) + f.value

    def fields(self, tokens) -> list[Field]:
        """``field`` of each token, the kinds' token ranges computed once (a frame's decoding)."""
        per = 1 << self.chunk_bits
        spans = self._tables["spans"]
        offset = spans[-1][2]
        out = []
        for token in tokens:
            for k, lo, hi in spans:
                if lo <= token < hi:
                    rel = token - lo
                    out.append(Field(k, rel // (2 * per), (rel // per) % 2, rel % per))
                    break
            else:
                raise TraceError(f"token {token} is outside the trace vocabulary (0..{offset - 1})")
        return out

    def field(self, token: int) -> Field:
        return self.fields([token])[0]

    @property
    def tokens_per_cycle(self) -> int:
        return len(self.inputs) + len(self.generated)

    @property
    def vocab_size(self) -> int:
        return 2 * (1 << self.chunk_bits) * sum(len(self.chunks_of(k)) for k in KINDS)

    # -- what follows what ---------------------------------------------------------------------
    @staticmethod
    def parity_of(kind: str, frame_parity: int) -> int:
        """The parity a token of ``kind`` carries in a frame of parity ``frame_parity``."""
        return 1 - frame_parity if kind == REG else frame_parity

    def _frame_parity(self, f: Field) -> int:
        return 1 - f.parity if f.kind == REG else f.parity

    def _is_frame_end(self, f: Field) -> bool:
        return f.kind != IN and (f.kind, f.chunk) == self.generated[-1]

    def next_chunks(self, f: Field) -> list[tuple[str, int, int, tuple]] | None:
        """What the model must emit after reading token field ``f``: [(kind, chunk, parity,
        conditions)] (one entry, or several decided by gates: ``successors``); None where the host
        inserts the next token (inside the inputs, and at a frame end when there are inputs)."""
        p = self._frame_parity(f)
        if f.kind == IN:
            if f.chunk < len(self.inputs) - 1:
                return None
            return [(k, j, self.parity_of(k, p), c) for (k, j), c in self.first_chunks()]
        nxt = self.successors((f.kind, f.chunk))
        if nxt:
            return [(k, j, self.parity_of(k, p), c) for (k, j), c in nxt]
        if self.inputs:
            return None
        return [(k, j, self.parity_of(k, 1 - p), c) for (k, j), c in self.first_chunks()]

    def next_field_kind(self, f: Field) -> tuple[str, int, int] | None:
        """(kind, chunk, parity) the model must emit after ``f`` where no gate decides it (None where
        the host inserts the next token); raises ValueError at a token followed by a gated group."""
        nxt = self.next_chunks(f)
        if nxt is None:
            return None
        if len(nxt) != 1:
            raise ValueError(f"{f.kind} chunk {f.chunk} is followed by a gated group: see next_chunks")
        return nxt[0][:3]

    def read_parity(self, f: Field) -> int:
        """Which register row the position of an input token ``f`` reads: its frame's parity, or the
        next frame's after the frame's last token."""
        p = self._frame_parity(f)
        return 1 - p if self._is_frame_end(f) else p

    # -- host side -----------------------------------------------------------------------------
    def _pack(self, chunks, values: dict, names) -> list[int]:
        # the values' bits one after another (each cut to its width), cut into chunks of chunk_bits
        acc, pos = 0, 0
        for name, width in names:
            acc |= (int(values.get(name, 0)) & ((1 << width) - 1)) << pos
            pos += width
        mask = (1 << self.chunk_bits) - 1
        return [(acc >> s) & mask for s in range(0, pos, self.chunk_bits)]

    def _commit_tail(self, frame_parity: int, registers: dict) -> list[int]:
        """After a prompt write group when the ports come before the registers: the frame's last
        chunk (an ungated register's), which commits the write (its value rewritten unchanged)."""
        if not _ports_first(self.groups):
            return []
        kind, j = self.generated[-1]
        return [self.token(Field(kind, j, self.parity_of(kind, frame_parity), self._pack_registers(registers)[j]))]

    def initial_tokens(self, registers: dict, memory: dict | None = None) -> list[int]:
        """The prompt (a frame of parity 1 that ends with every write committed): REG tokens of
        parity 0 with ``registers`` (state name -> value), then per non-zero word of each memory in
        ``memory`` ({memory name: {address: word}}) its port group and the later ports' groups
        disabled (and the commit chunk when the ports are gated); with no initial words, the last
        port's group disabled. After the last word of a ``lookup`` port, that port's group disabled
        (and the later ports'), so that no later commit offers its last word as a key again."""
        toks = [self.token(Field(REG, j, 0, v))
                for j, v in enumerate(self._pack_registers(registers))]
        memory = memory or {}
        unknown = sorted(set(memory) - set(self.memories))
        if unknown:
            raise Netlist2TFError(f"initial contents for {', '.join(unknown)}, which the design does "
                                  f"not write (written memories: {', '.join(self.memories) or 'none'})")
        tail = self._commit_tail(1, registers)
        groups = 0
        for i, p in enumerate(self.ports):
            for addr, word in sorted(memory.get(p.memory, {}).items()):
                if word:
                    toks += self.write_tokens(p.memory, addr, word, frame_parity=1)
                    for later in self.ports[i + 1:]:
                        toks += self.write_tokens(later.memory, None, 0, frame_parity=1)
                    toks += tail
                    groups += 1
            if p.lookup and any(memory.get(p.memory, {}).values()):
                for port in self.ports[i:]:
                    toks += self.write_tokens(port.memory, None, 0, frame_parity=1)
                toks += tail
        if self.ports and not groups:      # end on the commit token: the last port's group, disabled
            toks += self.write_tokens(self.ports[-1].memory, None, 0, frame_parity=1) + tail
        return toks

    def initial_prompts(self, registers: dict, memories: list) -> list[list[int]]:
        """One prompt per batch row (``memories[row]`` as for ``initial_tokens``), padded to one
        length with disabled groups of the last write port (each ends on the commit token and
        writes nothing), so rows with different memory images run in one batch."""
        prompts = [self.initial_tokens(registers, m) for m in memories]
        longest = max(len(p) for p in prompts)
        if self.ports:
            pad = self.write_tokens(self.ports[-1].memory, None, 0, frame_parity=1) + \
                self._commit_tail(1, registers)
            for p in prompts:
                if (longest - len(p)) % len(pad):
                    raise Netlist2TFError(
                        f"the batch rows' prompts cannot be padded to one length with disabled "
                        f"{self.ports[-1].memory} groups: initial contents of a memory other than the "
                        f"last written one ({self.ports[-1].memory}) make groups of other lengths; "
                        f"run such rows in separate batches")
                p += pad * ((longest - len(p)) // len(pad))
        elif any(len(p) != longest for p in prompts):
            raise AssertionError("prompts without write ports differ in length")
        return prompts

    def write_tokens(self, memory: str, addr, word: int, frame_parity: int) -> list[int]:
        """The group of ``memory``'s port writing ``word`` at ``addr`` (``None``: disabled), every data
        chunk included (folded ones too: the port's first chunk clears them and each writes its
        value, so a prompt's groups all have one length)."""
        p = self.port(memory)
        if addr is not None and not 0 <= addr < (1 << p.addr_width):
            raise Netlist2TFError(f"address {addr} is outside memory {memory} ({p.addr_width}-bit addresses)")
        low = word & ((1 << p.packed) - 1)
        ma = self._pack([self.mem_addr[j] for j in p.ma],
                        {"ma": (0 if addr is None else 1 | (addr << 1)) | low << (1 + p.addr_width)},
                        [("ma", 1 + p.addr_width + p.packed)])
        md = self._pack([self.mem_data[j] for j in p.md], {"md": word >> p.packed}, [("md", p.data_width - p.packed)])
        return [self.token(Field(MA, j, frame_parity, v)) for j, v in zip(p.ma, ma)] + \
            [self.token(Field(MD, j, frame_parity, v)) for j, v in zip(p.md, md)]

    def port(self, memory: str) -> "WritePort":
        for p in self.ports:
            if p.memory == memory:
                return p
        raise Netlist2TFError(f"memory {memory!r} has no write port in this protocol "
                              f"(ports: {', '.join(self.memories) or 'none'})")

    def input_tokens(self, cycle: int, inputs: dict) -> list[int]:
        return [self.token(Field(IN, j, cycle % 2, v))
                for j, v in enumerate(self._pack(self.inputs, inputs, self.input_ports))]

    def generated_tokens(self, cycle: int, chunk_values: dict, registers: dict, gates=True) -> list[int]:
        """The generated tokens of frame ``cycle`` (the inverse of ``decode_frame``): OUT, MA and MD
        chunk values from ``chunk_values`` ({(kind, chunk index): value}), REG chunks packed from
        ``registers`` (state name -> next value); a group only if its entry of ``gates`` is true."""
        regs = self._pack_registers(registers)
        return [self.token(Field(kind, j, self.parity_of(kind, cycle % 2),
                                 regs[j] if kind == REG else chunk_values[(kind, j)]))
                for kind, j in self.frame_kinds(gates)]

    def present_groups(self, tokens: list[int]) -> tuple[bool, ...]:
        """Which groups a frame's generated tokens hold (by the chunks they name)."""
        have = {(f.kind, f.chunk) for f in self.fields(tokens)}
        return tuple(g.chunks[0] in have for g in self.groups)

    def decode_frame(self, cycle: int, tokens: list[int]) -> tuple[dict, dict]:
        """The generated tokens of frame ``cycle`` -> ({output: value}, {register: next value}): the
        outputs and registers whose chunks the frame holds (a skipped group's are absent); the
        memory write tokens are checked for their place in the frame, not decoded (see
        ``decode_writes``).

        Raises TraceError naming the first token that breaks the protocol."""
        gen = self.generated
        full, short = len(gen), len(gen) - sum(len(g.chunks) for g in self.groups)
        if not short <= len(tokens) <= full:
            raise TraceError(f"cycle {cycle}: {len(tokens)} generated tokens, the protocol has {full}"
                             + (f" ({short} without its gated groups)" if self.groups else ""))
        fields = self.fields(tokens)
        pos, values, present = 0, {}, {}
        i = 0
        while i < len(gen):
            g = self.group_of(gen[i])
            span = self.groups[g].chunks if g is not None else (gen[i],)
            here = fields[pos] if pos < len(fields) else None
            if g is not None and (here is None or (here.kind, here.chunk) != span[0]):
                present[g] = 0
                i += len(span)                     # the group is skipped in this frame
                continue
            if g is not None:
                present[g] = 1
            for kind, j in span:
                want = (kind, j, self.parity_of(kind, cycle % 2))
                if pos >= len(fields):
                    raise TraceError(f"cycle {cycle}: the frame ends after {len(fields)} generated tokens; "
                                     f"expected {kind} chunk {j} next")
                f = fields[pos]
                if (f.kind, f.chunk, f.parity) != want:
                    raise TraceError(f"cycle {cycle}, token {pos}: got {f.kind} chunk {f.chunk} parity "
                                     f"{f.parity}, expected {want[0]} chunk {want[1]} parity {want[2]}")
                values[(kind, j)] = f.value
                pos += 1
            i += len(span)
        if pos != len(fields):
            raise TraceError(f"cycle {cycle}: {len(fields)} generated tokens, the frame ended after {pos}")
        for k in present:
            parent = self._parent(k)
            if present[k] and parent is not None and not present.get(parent):
                raise TraceError(f"cycle {cycle}: the frame holds {self.groups[k].name} without "
                                 f"{self.groups[parent].name}, which it is nested under")
        net_value = {CONST0: 0, CONST1: 1, CONSTX: 0}
        for k, g in enumerate(self.groups):
            if g.gate_is_output:
                net_value[g.gate] = present[k]          # an output gate (not emitted): its presence
        for c in self.outputs:
            if (OUT, c.index) in values:
                net_value.update({n: (values[(OUT, c.index)] >> i) & 1 for i, n in enumerate(c.bits)})
        outputs = {name: sum(net_value[n] << i for i, n in enumerate(nets)) for name, nets in self.output_ports
                   if all(n in net_value for n in nets)}
        registers = {}
        for names, idxs in self._register_segments():
            if all((REG, j) in values for j in idxs):
                registers.update(self._unpack([values[(REG, j)] for j in idxs], names))
        return outputs, registers

    def _register_segments(self) -> list[tuple[list, list]]:
        """[(register names, their REG chunk indices)]: each register group, then the others."""
        return self._tables["segments"]

    def _segments_of(self) -> list[tuple[list, list]]:
        names = list(self.register_names)
        segs, k = [], 0
        for g in self.groups:
            if g.kind == "reg":
                mine = names[k:k + len(g.members)]
                segs.append((mine, [j for _, j in g.chunks]))
                k += len(g.members)
        first = sum(len(idx) for _, idx in segs)
        segs.append((names[k:], list(range(first, len(self.registers)))))
        return segs

    def _pack_registers(self, registers: dict) -> list[int]:
        """REG chunk values of ``registers``: each register group packed on its own, then the rest."""
        out = []
        for names, _ in self._register_segments():
            out += self._pack(None, registers, names)
        return out

    def decode_writes(self, tokens: list[int]) -> dict:
        """The memory writes of a frame's generated tokens (already checked by ``decode_frame``):
        {memory: (address, word)}, address None where the port's group is disabled or skipped; a
        skipped fold chunk is 0."""
        values = {(f.kind, f.chunk): f.value for f in self.fields(tokens)}
        writes = {}
        for p in self.ports:
            if (MA, p.ma[0]) not in values:
                writes[p.memory] = (None, 0)
                continue
            ma = self._unpack([values[(MA, j)] for j in p.ma], [("en", 1), ("addr", p.addr_width), ("low", p.packed)])
            md = self._unpack([values.get((MD, j), 0) for j in p.md], [("data", p.data_width - p.packed)])
            writes[p.memory] = (ma["addr"] if ma["en"] else None, ma["low"] | md["data"] << p.packed)
        return writes

    def _unpack(self, chunk_values, names) -> dict:
        # each chunk's low chunk_bits bits one after another, cut into the names' widths
        mask, acc = (1 << self.chunk_bits) - 1, 0
        for k, v in enumerate(chunk_values):
            acc |= (v & mask) << (k * self.chunk_bits)
        out, pos = {}, 0
        for name, width in names:
            out[name] = (acc >> pos) & ((1 << width) - 1)
            pos += width
        return out

    def to_json(self, signals: dict | None = None) -> str:
        """The trace protocol as the checkpoint's ``trace_protocol.json`` (deterministic): everything
        ``from_json`` needs to rebuild it (so a checkpoint's host, ``verify`` and the CPU engine read
        the protocol from this one file), plus a readable summary. ``signals``: register state name
        -> the design's signal name, recorded beside each register for readers."""
        def chunk(k, c):
            return {"chunk": c.index, "bits": list(c.names), "nets": list(c.bits),
                    "first_token": [self._base(k, c.index, 0), self._base(k, c.index, 1)]}
        doc = {"protocol_format": PROTOCOL_FORMAT, "chunk_bits": self.chunk_bits, "vocab_size": self.vocab_size,
               "tokens_per_cycle": self.tokens_per_cycle,
               "generated_tokens_per_cycle": len(self.generated),
               "kinds": {k: [chunk(k, c) for c in self.chunks_of(k)] for k in KINDS},
               "input_ports": [[n, w] for n, w in self.input_ports],
               "output_ports": [[n, list(bits)] for n, bits in self.output_ports],
               "registers": [{"state": n, "width": w, "signal": (signals or {}).get(n, n[4:] if n.startswith("reg:") else n)}
                             for n, w in self.register_names],
               "write_ports": [{"memory": p.memory, "ma": list(p.ma), "md": list(p.md),
                                "addr_width": p.addr_width, "data_width": p.data_width,
                                **({"packed": p.packed} if p.packed else {}),
                                **({"lookup": True} if p.lookup else {})} for p in self.ports],
               "groups": [{"kind": g.kind, "name": g.name, "gate_net": g.gate, "members": list(g.members),
                           "chunks": [list(k) for k in g.chunks], **({"hold": g.hold} if g.hold else {}),
                           **({"tail": True} if g.tail else {})}
                          for g in self.groups],
               "frame_order": [list(k) for k in self.generated],
               "frame": "IN chunks (host), then the generated chunks of frame_order; a group's chunks "
                        "only when its gate net is 1; token id = first_token[parity] + value; parity "
                        "per docs/design/compiler.md 2"}
        return json.dumps(doc, indent=1, sort_keys=True) + "\n"

    @staticmethod
    def from_json(text: str, origin: str = "trace_protocol.json") -> "TraceProtocol":
        """The protocol written by ``to_json``. Raises Netlist2TFError naming ``origin`` when the text
        is not such a file (malformed, another format, inconsistent token numbering)."""
        try:
            doc = json.loads(text)
            if doc.get("protocol_format") != PROTOCOL_FORMAT:
                raise Netlist2TFError(f"{origin} is protocol format {doc.get('protocol_format')!r}, this "
                                      f"netlist2tf reads {PROTOCOL_FORMAT}; recompile the checkpoint")
            cb = int(doc["chunk_bits"])

            def chunks(kind):
                out = []
                for j, c in enumerate(doc["kinds"][kind]):
                    if c["chunk"] != j or len(c["nets"]) != len(c["bits"]):
                        raise ValueError(f"chunk {j} of {kind}")
                    out.append(Chunk(kind, j, tuple(int(n) for n in c["nets"]), tuple(str(b) for b in c["bits"])))
                return tuple(out)
            proto = TraceProtocol(
                cb, chunks(IN), chunks(OUT), chunks(REG),
                tuple((str(n), int(w)) for n, w in doc["input_ports"]),
                tuple((str(n), tuple(int(b) for b in bits)) for n, bits in doc["output_ports"]),
                tuple((str(r["state"]), int(r["width"])) for r in doc["registers"]),
                chunks(MA), chunks(MD),
                tuple(WritePort(str(p["memory"]), tuple(p["ma"]), tuple(p["md"]), int(p["addr_width"]),
                                int(p["data_width"]), int(p.get("packed", 0)), bool(p.get("lookup", False)))
                      for p in doc["write_ports"]),
                tuple(Group(str(g["kind"]), str(g["name"]), int(g["gate_net"]),
                            tuple(str(m) for m in g["members"]),
                            tuple((str(k), int(j)) for k, j in g["chunks"]), str(g.get("hold", "")),
                            bool(g.get("tail", False)))
                      for g in doc["groups"]))
            consistent = (proto.vocab_size == doc["vocab_size"] and proto.tokens_per_cycle == doc["tokens_per_cycle"]
                          and [list(k) for k in proto.generated] == doc["frame_order"]
                          and all(c["first_token"] == [proto._base(k, c["chunk"], 0), proto._base(k, c["chunk"], 1)]
                                  for k in KINDS for c in doc["kinds"][k]))
        except Netlist2TFError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            raise Netlist2TFError(f"{origin} is not a netlist2tf trace protocol ({type(exc).__name__}: {exc}); "
                                  f"recompile the checkpoint")
        if not consistent:
            raise Netlist2TFError(f"{origin}: its token numbering (vocab_size, tokens_per_cycle, first_token) "
                                  f"does not follow from its chunks; the file was edited: recompile the checkpoint")
        return proto
