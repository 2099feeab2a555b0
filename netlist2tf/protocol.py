"""The trace protocol: the tokens of one clock cycle (a frame) and the host's encoder/decoder.

A token carries a *field*: (kind, chunk, parity, value) with ``chunk_bits`` bits of value.

* ``IN`` chunks hold the cycle's input values; the host inserts them at the start of the frame.
* ``OUT`` chunks hold the cycle's output values; the model generates them.
* ``REG`` chunks hold the registers' values for the NEXT cycle; the model generates them after the
  outputs. The initial register values are a frame of REG tokens in the prompt.
* ``MA``/``MD``: the design's memory write port, generated last: one MA token (bit 0 = write enable,
  then the address) and the MD chunks of the data. The memory head writes at the last MD token only
  (it takes the address and data from the earlier tokens through its conv taps), so every position
  of the frame but the last reads the memory as it was at the start of the cycle. The prompt holds
  one (MA, MD...) group per non-zero initial word (or one disabled group).

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
class TraceProtocol:
    chunk_bits: int
    inputs: tuple[Chunk, ...]
    outputs: tuple[Chunk, ...]
    registers: tuple[Chunk, ...]
    input_ports: tuple[tuple[str, int], ...]     # (name, width) in chunk order
    output_ports: tuple[tuple[str, tuple[int, ...]], ...]   # (name, its nets; constants 0/1/2)
    register_names: tuple[tuple[str, int], ...]  # (state name "reg:NAME", width)
    mem_addr: tuple[Chunk, ...] = ()             # () or (the MA chunk: enable net, address nets)
    mem_data: tuple[Chunk, ...] = ()             # the MD chunks
    memory: str = ""                             # the written memory's name

    @staticmethod
    def from_netlist(netlist: Netlist, clock_nets=frozenset(), chunk_bits: int = 8) -> "TraceProtocol":
        def chunks(kind, items):
            flat = [(n, f"{name}[{i}]" if len(sig) > 1 else name) for name, sig in items
                    for i, n in enumerate(sig)]
            return tuple(Chunk(kind, j, tuple(n for n, _ in flat[s:s + chunk_bits]),
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
        if not regs and not outs:
            raise Netlist2TFError(f"{netlist.top} has no registers and no non-constant outputs: the "
                                  f"model would have nothing to generate")
        ports = [(m, wp) for m in netlist.memories for wp in m.write_ports]
        if len(ports) > 1:
            raise Netlist2TFError(f"{netlist.top} has {len(ports)} memory write ports; the compiler "
                                  f"commits one write per cycle so far (docs/COMPILER.md 2)")
        ma, md, mem = (), (), ""
        if ports:
            m, wp = ports[0]
            if len(set(wp.enable)) != 1:
                raise Netlist2TFError(f"memory {m.name}: per-bit write enables are not supported by "
                                      f"the compiler yet; write whole words")
            if m.offset:
                raise Netlist2TFError(f"memory {m.name} starts at address {m.offset}, not 0")
            if 1 + len(wp.addr) > chunk_bits:
                raise Netlist2TFError(f"memory {m.name}: a {len(wp.addr)}-bit address and its enable do "
                                      f"not fit a {chunk_bits}-bit token; raise --chunk-bits")
            ma = chunks(MA, [("en", wp.enable[:1]), ("addr", wp.addr)])
            md = chunks(MD, [("data", wp.data)])
            if len(md) > 3:
                raise Netlist2TFError(f"memory {m.name}: {len(wp.data)}-bit words need {len(md)} data "
                                      f"tokens, at most 3 reach the write through the conv taps")
            mem = m.name
        return TraceProtocol(chunk_bits, chunks(IN, ins), chunks(OUT, outs), chunks(REG, regs),
                             tuple((n, len(s)) for n, s in ins),
                             tuple((p.name, p.bits) for p in netlist.outputs),
                             tuple((n, len(s)) for n, s in regs), ma, md, mem)

    # -- token ids -----------------------------------------------------------------------------
    def chunks_of(self, kind: str) -> tuple[Chunk, ...]:
        return {IN: self.inputs, OUT: self.outputs, REG: self.registers, MA: self.mem_addr,
                MD: self.mem_data}[kind]

    @property
    def generated(self) -> list[tuple[str, int]]:
        """(kind, chunk) of the generated tokens of a frame, in order."""
        return [(k, c.index) for k in (OUT, REG, MA, MD) for c in self.chunks_of(k)]

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

    def field(self, token: int) -> Field:
        if not 0 <= token < self.vocab_size:
            raise TraceError(f"token {token} is outside the trace vocabulary (0..{self.vocab_size - 1})")
        per = 1 << self.chunk_bits
        offset = 0
        for k in KINDS:
            span = 2 * len(self.chunks_of(k)) * per
            if token < offset + span:
                rel = token - offset
                return Field(k, rel // (2 * per), (rel // per) % 2, rel % per)
            offset += span
        raise AssertionError("unreachable")

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
        parity 0 with ``registers`` (state name -> value), then one write group per non-zero word of
        ``memory`` ({address: word}), or one disabled group."""
        toks = [self.token(Field(REG, j, 0, v))
                for j, v in enumerate(self._pack(self.registers, registers, self.register_names))]
        if self.mem_addr:
            words = [(a, w) for a, w in sorted((memory or {}).items()) if w] or [(None, 0)]
            for addr, word in words:
                toks += self.write_tokens(addr, word, frame_parity=1)
        return toks

    def write_tokens(self, addr, word: int, frame_parity: int) -> list[int]:
        """An (MA, MD...) group writing ``word`` at ``addr`` (``None``: a disabled write)."""
        ma = 0 if addr is None else 1 | (addr << 1)
        data = self._pack(self.mem_data, {"data": word}, [("data", sum(len(c.bits) for c in self.mem_data))])
        return [self.token(Field(MA, 0, frame_parity, ma))] + \
            [self.token(Field(MD, j, frame_parity, v)) for j, v in enumerate(data)]

    def input_tokens(self, cycle: int, inputs: dict) -> list[int]:
        return [self.token(Field(IN, j, cycle % 2, v))
                for j, v in enumerate(self._pack(self.inputs, inputs, self.input_ports))]

    def generated_tokens(self, cycle: int, chunk_values: dict, registers: dict) -> list[int]:
        """The generated tokens of frame ``cycle`` (the inverse of ``decode_frame``): OUT, MA and MD
        chunk values from ``chunk_values`` ({(kind, chunk index): value}), REG chunks packed from
        ``registers`` (state name -> next value)."""
        regs = self._pack(self.registers, registers, self.register_names)
        return [self.token(Field(kind, j, self.parity_of(kind, cycle % 2),
                                 regs[j] if kind == REG else chunk_values[(kind, j)]))
                for kind, j in self.generated]

    def decode_frame(self, cycle: int, tokens: list[int]) -> tuple[dict, dict]:
        """The generated tokens of frame ``cycle`` -> ({output: value}, {register: next value});
        the memory write tokens are checked for their place in the frame, not decoded.

        Raises TraceError naming the first token that breaks the protocol."""
        expect = [(k, j, self.parity_of(k, cycle % 2)) for k, j in self.generated]
        if len(tokens) != len(expect):
            raise TraceError(f"cycle {cycle}: {len(tokens)} generated tokens, the protocol has {len(expect)}")
        values = []
        for pos, (tok, want) in enumerate(zip(tokens, expect)):
            f = self.field(tok)
            if (f.kind, f.chunk, f.parity) != want:
                raise TraceError(f"cycle {cycle}, token {pos}: got {f.kind} chunk {f.chunk} parity "
                                 f"{f.parity}, expected {want[0]} chunk {want[1]} parity {want[2]}")
            values.append(f.value)
        n_out, n_reg = len(self.outputs), len(self.registers)
        bits = [(v >> i) & 1 for v in values[:n_out] for i in range(self.chunk_bits)]
        net_value = {n: b for n, b in zip((n for c in self.outputs for n in c.bits), bits)}
        net_value.update({CONST0: 0, CONST1: 1, CONSTX: 0})
        outputs = {name: sum(net_value[n] << i for i, n in enumerate(nets)) for name, nets in self.output_ports}
        return outputs, self._unpack(values[n_out:n_out + n_reg], self.register_names)

    def _unpack(self, chunk_values, names) -> dict:
        bits = [(v >> i) & 1 for v in chunk_values for i in range(self.chunk_bits)]
        out, pos = {}, 0
        for name, width in names:
            out[name] = sum(b << i for i, b in enumerate(bits[pos:pos + width]))
            pos += width
        return out

    def to_json(self) -> str:
        """The trace vocabulary for the checkpoint folder (deterministic)."""
        doc = {"chunk_bits": self.chunk_bits, "vocab_size": self.vocab_size,
               "tokens_per_cycle": self.tokens_per_cycle,
               "kinds": {k: [{"chunk": c.index, "bits": list(c.names),
                              "first_token": [self._base(k, c.index, 0), self._base(k, c.index, 1)]}
                             for c in self.chunks_of(k)] for k in KINDS},
               "frame": "IN chunks (host), OUT chunks, REG chunks (generated); parity per docs/COMPILER.md"}
        return json.dumps(doc, indent=1, sort_keys=True) + "\n"
