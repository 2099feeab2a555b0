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

A *gated* register group (``from_netlist(gated=...)``) is emitted only in the frames whose gate net
is 1 (its REG chunks come first among the registers, packed on their own); in the other frames the
model skips from the token before the group to the first ungated register chunk. The design promises
that the group's values do not matter in a cycle after a frame that skipped them (e.g. a multiplier's
operands while it is idle); tests check that promise by simulation (docs/COMPILER.md 2).

Parity (docs/COMPILER.md 2): frame k reads register row ``k % 2`` and writes row ``(k + 1) % 2``.
IN and OUT tokens of frame k carry ``k % 2``, REG tokens of frame k carry ``(k + 1) % 2`` (the row they
write); the prompt's initial REG tokens carry 0. Token id layout: for each kind in (IN, OUT, REG), for
each chunk, for each parity, the 2**chunk_bits values: ``id = base(kind, chunk, parity) + value``.
"""

import json
from dataclasses import dataclass

from .errors import Netlist2TFError
from .ir import CONST0, CONST1, CONSTX, Netlist

IN, OUT, REG, MA, MD = "in", "out", "reg", "ma", "md"
PROTOCOL_FORMAT = 2              # trace_protocol.json: bumped when its meaning changes
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
    indices (data), and the widths."""
    memory: str
    ma: tuple[int, ...]
    md: tuple[int, ...]
    addr_width: int
    data_width: int


@dataclass(frozen=True, slots=True)
class TraceProtocol:
    chunk_bits: int
    inputs: tuple[Chunk, ...]
    outputs: tuple[Chunk, ...]
    registers: tuple[Chunk, ...]
    input_ports: tuple[tuple[str, int], ...]     # (name, width) in chunk order
    output_ports: tuple[tuple[str, tuple[int, ...]], ...]   # (name, its nets; constants 0/1/2)
    register_names: tuple[tuple[str, int], ...]  # (state name "reg:NAME", width)
    mem_addr: tuple[Chunk, ...] = ()             # the MA chunks of every write port, port after port
    mem_data: tuple[Chunk, ...] = ()             # the MD chunks, likewise
    ports: tuple["WritePort", ...] = ()          # which MA/MD chunks belong to which memory
    gated: tuple[int, ...] = ()                  # REG chunks emitted only when the gate net is 1
    gate: int | None = None                      # that net (a register's next value, typically)

    @property
    def memories(self) -> tuple[str, ...]:
        return tuple(p.memory for p in self.ports)

    @staticmethod
    def from_netlist(netlist: Netlist, clock_nets=frozenset(), chunk_bits: int = 8,
                     gated: tuple | None = None) -> "TraceProtocol":
        """``gated``: None, or (gate net, register output nets of the gated group)."""
        def chunks(kind, items, first=0):
            flat = [(n, f"{name}[{i}]" if len(sig) > 1 else name) for name, sig in items
                    for i, n in enumerate(sig)]
            return tuple(Chunk(kind, first + j, tuple(n for n, _ in flat[s:s + chunk_bits]),
                               tuple(nm for _, nm in flat[s:s + chunk_bits]))
                         for j, s in enumerate(range(0, len(flat), chunk_bits)))
        ins = [(p.name, p.bits) for p in netlist.inputs if not set(p.bits) & set(clock_nets)]
        # Output chunks carry each distinct non-constant output net once (outputs often share nets,
        # and constant bits need no token); the host rebuilds every port from them.
        seen = {}
        for p in netlist.outputs:
            for n in p.bits:
                if n not in (CONST0, CONST1, CONSTX) and n not in seen:
                    seen[n] = str(netlist.nets[n])
        outs = [(name, (n,)) for n, name in seen.items()]
        regs = [(f"reg:{r.name}", r.q) for r in netlist.registers]
        gate, group = (None, set()) if gated is None else (gated[0], set(gated[1]))
        in_group = [r for r in regs if set(r[1]) <= group] if gated is not None else []
        if gated is not None:
            if not in_group or {n for _, q in in_group for n in q} != group:
                raise Netlist2TFError("a gated group must be whole registers (their output nets)")
            if len(in_group) == len(regs):
                raise Netlist2TFError("a gated group needs at least one register outside it")
            regs = in_group + [r for r in regs if not set(r[1]) <= group]
        if not regs and not outs:
            raise Netlist2TFError(f"{netlist.top} has no registers and no non-constant outputs: the "
                                  f"model would have nothing to generate")
        ma, md, ports = [], [], []
        # the largest memory last (typically the one a program image fills): its prompt groups then
        # end on the commit token by themselves
        for m in sorted(netlist.memories, key=lambda m: (m.size * m.width, m.name)):
            if len(m.write_ports) > 1:
                raise Netlist2TFError(f"memory {m.name} has {len(m.write_ports)} write ports; the "
                                      f"compiler takes one write port per memory")
            if not m.write_ports:
                continue
            wp = m.write_ports[0]
            if len(set(wp.enable)) != 1:
                raise Netlist2TFError(f"memory {m.name}: per-bit write enables are not supported by "
                                      f"the compiler; write whole words (merge the bytes in the design)")
            if m.offset:
                raise Netlist2TFError(f"memory {m.name} starts at address {m.offset}, not 0")
            a = [Chunk(MA, len(ma) + c.index, c.bits, c.names)
                 for c in chunks(MA, [(f"{m.name}.en", wp.enable[:1]), (f"{m.name}.addr", wp.addr)])]
            d = [Chunk(MD, len(md) + c.index, c.bits, c.names) for c in chunks(MD, [(f"{m.name}.data", wp.data)])]
            ports.append(WritePort(m.name, tuple(c.index for c in a), tuple(c.index for c in d),
                                   len(wp.addr), len(wp.data)))
            ma += a
            md += d
        reg_chunks = chunks(REG, in_group)
        reg_chunks += chunks(REG, regs[len(in_group):], len(reg_chunks))
        return TraceProtocol(chunk_bits, chunks(IN, ins), chunks(OUT, outs), reg_chunks,
                             tuple((n, len(s)) for n, s in ins),
                             tuple((p.name, p.bits) for p in netlist.outputs),
                             tuple((n, len(s)) for n, s in regs), tuple(ma), tuple(md), tuple(ports),
                             tuple(range(len(chunks(REG, in_group)))) if gated is not None else (), gate)

    # -- token ids -----------------------------------------------------------------------------
    def chunks_of(self, kind: str) -> tuple[Chunk, ...]:
        return {IN: self.inputs, OUT: self.outputs, REG: self.registers, MA: self.mem_addr,
                MD: self.mem_data}[kind]

    def frame_kinds(self, gate: bool = True) -> list[tuple[str, int]]:
        """(kind, chunk) of a frame's generated tokens when the gate is ``gate``."""
        skip = set() if gate else {(REG, j) for j in self.gated}
        return [k for k in self.generated if k not in skip]

    @property
    def generated(self) -> list[tuple[str, int]]:
        """(kind, chunk) of the generated tokens of a frame, in order (gated chunks included)."""
        out = [(k, c.index) for k in (OUT, REG) for c in self.chunks_of(k)]
        for p in self.ports:
            out += [(MA, j) for j in p.ma] + [(MD, j) for j in p.md]
        return out

    def port(self, memory: str) -> "WritePort":
        for p in self.ports:
            if p.memory == memory:
                return p
        raise Netlist2TFError(f"memory {memory!r} has no write port in this protocol "
                              f"(ports: {', '.join(self.memories) or 'none'})")

    def _base(self, kind: str, chunk: int, parity: int) -> int:
        per = 1 << self.chunk_bits
        offset = 0
        for k in KINDS:
            if k == kind:
                return offset + (2 * chunk + parity) * per
            offset += 2 * len(self.chunks_of(k)) * per
        raise ValueError(kind)

    def token(self, f: Field) -> int:
        return self._base(f.kind, f.chunk, f.parity) + f.value

    def fields(self, tokens) -> list[Field]:
        """``field`` of each token, the kinds' token ranges computed once (a frame's decoding)."""
        per = 1 << self.chunk_bits
        spans, offset = [], 0
        for k in KINDS:
            span = 2 * len(self.chunks_of(k)) * per
            spans.append((k, offset, offset + span))
            offset += span
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

    def next_field_kind(self, f: Field) -> tuple[str, int, int] | None:
        """(kind, chunk, parity) the model must emit after reading token field ``f``; None where the
        host inserts the next token (inside the inputs, and at a frame end when there are inputs)."""
        p = self._frame_parity(f)
        gen = self.generated
        if f.kind == IN:
            if f.chunk < len(self.inputs) - 1:
                return None
            return (*gen[0], self.parity_of(gen[0][0], p))
        i = gen.index((f.kind, f.chunk))
        if i < len(gen) - 1:
            return (*gen[i + 1], self.parity_of(gen[i + 1][0], p))
        if self.inputs:
            return None
        return (*gen[0], self.parity_of(gen[0][0], 1 - p))

    def read_parity(self, f: Field) -> int:
        """Which register row the position of an input token ``f`` reads: its frame's parity, or the
        next frame's after the frame's last token."""
        p = self._frame_parity(f)
        return 1 - p if self._is_frame_end(f) else p

    # -- host side -----------------------------------------------------------------------------
    def _pack(self, chunks, values: dict, names) -> list[int]:
        flat = []
        for name, width in names:
            v = int(values.get(name, 0))
            flat += [(v >> i) & 1 for i in range(width)]
        return [sum(b << i for i, b in enumerate(flat[s:s + self.chunk_bits]))
                for s in range(0, len(flat), self.chunk_bits)]

    def initial_tokens(self, registers: dict, memory: dict | None = None) -> list[int]:
        """The prompt (a frame of parity 1 that ends with every write committed): REG tokens of
        parity 0 with ``registers`` (state name -> value), then per non-zero word of each memory in
        ``memory`` ({memory name: {address: word}}) its port group and the later ports' groups
        disabled; with no initial words, the last port's group disabled."""
        toks = [self.token(Field(REG, j, 0, v))
                for j, v in enumerate(self._pack_registers(registers))]
        memory = memory or {}
        unknown = sorted(set(memory) - set(self.memories))
        if unknown:
            raise Netlist2TFError(f"initial contents for {', '.join(unknown)}, which the design does "
                                  f"not write (written memories: {', '.join(self.memories) or 'none'})")
        groups = 0
        for i, p in enumerate(self.ports):
            for addr, word in sorted(memory.get(p.memory, {}).items()):
                if word:
                    toks += self.write_tokens(p.memory, addr, word, frame_parity=1)
                    for later in self.ports[i + 1:]:
                        toks += self.write_tokens(later.memory, None, 0, frame_parity=1)
                    groups += 1
        if self.ports and not groups:      # end on the commit token: the last port's group, disabled
            toks += self.write_tokens(self.ports[-1].memory, None, 0, frame_parity=1)
        return toks

    def initial_prompts(self, registers: dict, memories: list) -> list[list[int]]:
        """One prompt per batch row (``memories[row]`` as for ``initial_tokens``), padded to one
        length with disabled groups of the last write port (each ends on the commit token and
        writes nothing), so rows with different memory images run in one batch."""
        prompts = [self.initial_tokens(registers, m) for m in memories]
        longest = max(len(p) for p in prompts)
        if self.ports:
            pad = self.write_tokens(self.ports[-1].memory, None, 0, frame_parity=1)
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
        """The group of ``memory``'s port writing ``word`` at ``addr`` (``None``: disabled)."""
        p = self.port(memory)
        if addr is not None and not 0 <= addr < (1 << p.addr_width):
            raise Netlist2TFError(f"address {addr} is outside memory {memory} ({p.addr_width}-bit addresses)")
        ma = self._pack([self.mem_addr[j] for j in p.ma], {"ma": 0 if addr is None else 1 | (addr << 1)},
                        [("ma", 1 + p.addr_width)])
        md = self._pack([self.mem_data[j] for j in p.md], {"md": word}, [("md", p.data_width)])
        return [self.token(Field(MA, j, frame_parity, v)) for j, v in zip(p.ma, ma)] + \
            [self.token(Field(MD, j, frame_parity, v)) for j, v in zip(p.md, md)]

    def input_tokens(self, cycle: int, inputs: dict) -> list[int]:
        return [self.token(Field(IN, j, cycle % 2, v))
                for j, v in enumerate(self._pack(self.inputs, inputs, self.input_ports))]

    def generated_tokens(self, cycle: int, chunk_values: dict, registers: dict, gate: bool = True) -> list[int]:
        """The generated tokens of frame ``cycle`` (the inverse of ``decode_frame``): OUT, MA and MD
        chunk values from ``chunk_values`` ({(kind, chunk index): value}), REG chunks packed from
        ``registers`` (state name -> next value); the gated group only if ``gate``."""
        regs = self._pack_registers(registers)
        return [self.token(Field(kind, j, self.parity_of(kind, cycle % 2),
                                 regs[j] if kind == REG else chunk_values[(kind, j)]))
                for kind, j in self.frame_kinds(gate)]

    def decode_frame(self, cycle: int, tokens: list[int]) -> tuple[dict, dict]:
        """The generated tokens of frame ``cycle`` -> ({output: value}, {register: next value});
        the memory write tokens are checked for their place in the frame, not decoded (see
        ``decode_writes``). A frame without the gated group has no values for its registers.

        Raises TraceError naming the first token that breaks the protocol."""
        full, short = len(self.generated), len(self.generated) - len(self.gated)
        if len(tokens) not in (full, short):
            raise TraceError(f"cycle {cycle}: {len(tokens)} generated tokens, the protocol has {full}"
                             + (f" (or {short} without the gated registers)" if self.gated else ""))
        gate = len(tokens) == full
        expect = [(k, j, self.parity_of(k, cycle % 2)) for k, j in self.frame_kinds(gate)]
        values = []
        for pos, (f, want) in enumerate(zip(self.fields(tokens), expect)):
            if (f.kind, f.chunk, f.parity) != want:
                raise TraceError(f"cycle {cycle}, token {pos}: got {f.kind} chunk {f.chunk} parity "
                                 f"{f.parity}, expected {want[0]} chunk {want[1]} parity {want[2]}")
            values.append(f.value)
        n_out, n_reg = len(self.outputs), len(self.registers) - (0 if gate else len(self.gated))
        bits = [(v >> i) & 1 for v in values[:n_out] for i in range(self.chunk_bits)]
        net_value = {n: b for n, b in zip((n for c in self.outputs for n in c.bits), bits)}
        net_value.update({CONST0: 0, CONST1: 1, CONSTX: 0})
        outputs = {name: sum(net_value[n] << i for i, n in enumerate(nets)) for name, nets in self.output_ports}
        k, g = self._gated_registers(), len(self.gated)
        regs = values[n_out:n_out + n_reg]
        registers = self._unpack(regs[g:] if gate else regs, self.register_names[k:])
        if gate:
            registers.update(self._unpack(regs[:g], self.register_names[:k]))
        return outputs, registers

    def _pack_registers(self, registers: dict) -> list[int]:
        """REG chunk values of ``registers``: the gated group packed on its own, then the rest."""
        k = self._gated_registers()
        return self._pack(None, registers, self.register_names[:k]) + \
            self._pack(None, registers, self.register_names[k:])

    def _gated_registers(self) -> int:
        """How many of ``register_names`` (the first ones) make up the gated group."""
        bits, k = sum(len(self.registers[j].bits) for j in self.gated), 0
        while bits > 0:
            bits -= self.register_names[k][1]
            k += 1
        return k

    def decode_writes(self, tokens: list[int]) -> dict:
        """The memory writes of a frame's generated tokens (already checked by ``decode_frame``):
        {memory: (address, word)}, address None where the port's group is disabled."""
        values = {(f.kind, f.chunk): f.value for f in self.fields(tokens)}
        writes = {}
        for p in self.ports:
            ma = self._unpack([values[(MA, j)] for j in p.ma], [("en", 1), ("addr", p.addr_width)])
            md = self._unpack([values[(MD, j)] for j in p.md], [("data", p.data_width)])
            writes[p.memory] = (ma["addr"] if ma["en"] else None, md["data"])
        return writes

    def _unpack(self, chunk_values, names) -> dict:
        bits = [(v >> i) & 1 for v in chunk_values for i in range(self.chunk_bits)]
        out, pos = {}, 0
        for name, width in names:
            out[name] = sum(b << i for i, b in enumerate(bits[pos:pos + width]))
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
                                "addr_width": p.addr_width, "data_width": p.data_width} for p in self.ports],
               "gated_reg_chunks": list(self.gated), "gate_net": self.gate,
               "frame": "IN chunks (host), OUT chunks, REG chunks, then per write port MA and MD "
                        "chunks (generated); token id = first_token[parity] + value; parity per "
                        "docs/COMPILER.md 2"}
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
                                int(p["data_width"])) for p in doc["write_ports"]),
                tuple(int(j) for j in doc["gated_reg_chunks"]),
                None if doc["gate_net"] is None else int(doc["gate_net"]))
            consistent = (proto.vocab_size == doc["vocab_size"] and proto.tokens_per_cycle == doc["tokens_per_cycle"]
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
