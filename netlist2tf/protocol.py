"""The trace protocol: the tokens of one clock cycle (a frame) and the host's encoder/decoder.

A token carries a *field*: (kind, chunk, parity, value) with ``chunk_bits`` bits of value.

* ``IN`` chunks hold the cycle's input values; the host inserts them at the start of the frame.
* ``OUT`` chunks hold the cycle's output values; the model generates them.
* ``REG`` chunks hold the registers' values for the NEXT cycle; the model generates them after the
  outputs. The initial register values are a frame of REG tokens in the prompt.

Parity (docs/COMPILER.md 2): frame k reads register row ``k % 2`` and writes row ``(k + 1) % 2``.
IN and OUT tokens of frame k carry ``k % 2``, REG tokens of frame k carry ``(k + 1) % 2`` (the row they
write); the prompt's initial REG tokens carry 0. Token id layout: for each kind in (IN, OUT, REG), for
each chunk, for each parity, the 2**chunk_bits values: ``id = base(kind, chunk, parity) + value``.
"""

import json
from dataclasses import dataclass

from .errors import Netlist2TFError
from .ir import Netlist

IN, OUT, REG = "in", "out", "reg"
KINDS = (IN, OUT, REG)


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
    output_ports: tuple[tuple[str, int], ...]
    register_names: tuple[tuple[str, int], ...]  # (state name "reg:NAME", width)

    @staticmethod
    def from_netlist(netlist: Netlist, clock_nets=frozenset(), chunk_bits: int = 8) -> "TraceProtocol":
        def chunks(kind, items):
            flat = [(n, f"{name}[{i}]") for name, sig in items for i, n in enumerate(sig)]
            return tuple(Chunk(kind, j, tuple(n for n, _ in flat[s:s + chunk_bits]),
                               tuple(nm for _, nm in flat[s:s + chunk_bits]))
                         for j, s in enumerate(range(0, len(flat), chunk_bits)))
        ins = [(p.name, p.bits) for p in netlist.inputs if not set(p.bits) & set(clock_nets)]
        outs = [(p.name, p.bits) for p in netlist.outputs]
        regs = [(f"reg:{r.name}", r.q) for r in netlist.registers]
        if not regs and not outs:
            raise Netlist2TFError(f"{netlist.top} has neither outputs nor registers: nothing to compile")
        return TraceProtocol(chunk_bits, chunks(IN, ins), chunks(OUT, outs), chunks(REG, regs),
                             tuple((n, len(s)) for n, s in ins), tuple((n, len(s)) for n, s in outs),
                             tuple((n, len(s)) for n, s in regs))

    # -- token ids -----------------------------------------------------------------------------
    def chunks_of(self, kind: str) -> tuple[Chunk, ...]:
        return {IN: self.inputs, OUT: self.outputs, REG: self.registers}[kind]

    def _base(self, kind: str, chunk: int, parity: int) -> int:
        per = 1 << self.chunk_bits
        offset = 0
        for k in KINDS:
            if k == kind:
                return offset + (2 * chunk + parity) * per
            offset += 2 * len(self.chunks_of(k)) * per
        raise ValueError(kind)

    @property
    def vocab_size(self) -> int:
        return 2 * (1 << self.chunk_bits) * (len(self.inputs) + len(self.outputs) + len(self.registers))

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
        return len(self.inputs) + len(self.outputs) + len(self.registers)

    # -- what follows what ---------------------------------------------------------------------
    def next_field_kind(self, f: Field) -> tuple[str, int, int] | None:
        """(kind, chunk, parity) the model must emit after reading token field ``f``; None where the
        host inserts the next token (inside the inputs, and at a frame end when there are inputs)."""
        if f.kind == IN:
            if f.chunk < len(self.inputs) - 1:
                return None
            return (OUT, 0, f.parity) if self.outputs else (REG, 0, 1 - f.parity)
        if f.kind == OUT:
            if f.chunk < len(self.outputs) - 1:
                return (OUT, f.chunk + 1, f.parity)
            return (REG, 0, 1 - f.parity) if self.registers else self._frame_start(1 - f.parity)
        if f.chunk < len(self.registers) - 1:
            return (REG, f.chunk + 1, f.parity)
        return self._frame_start(f.parity)

    def _frame_start(self, parity: int):
        if self.inputs:
            return None
        return (OUT, 0, parity) if self.outputs else (REG, 0, 1 - parity)

    def read_parity(self, f: Field) -> int:
        """Which register row the position of an input token ``f`` reads."""
        if f.kind == REG and f.chunk < len(self.registers) - 1:
            return 1 - f.parity
        return f.parity

    # -- host side -----------------------------------------------------------------------------
    def _pack(self, chunks, values: dict, names) -> list[int]:
        flat = []
        for name, width in names:
            v = int(values.get(name, 0))
            flat += [(v >> i) & 1 for i in range(width)]
        return [sum(b << i for i, b in enumerate(flat[s:s + self.chunk_bits]))
                for s in range(0, len(flat), self.chunk_bits)]

    def initial_tokens(self, registers: dict) -> list[int]:
        """The prompt's register frame: REG tokens of parity 0 with ``registers`` (state name -> value)."""
        return [self.token(Field(REG, j, 0, v))
                for j, v in enumerate(self._pack(self.registers, registers, self.register_names))]

    def input_tokens(self, cycle: int, inputs: dict) -> list[int]:
        return [self.token(Field(IN, j, cycle % 2, v))
                for j, v in enumerate(self._pack(self.inputs, inputs, self.input_ports))]

    def decode_frame(self, cycle: int, tokens: list[int]) -> tuple[dict, dict]:
        """The generated tokens of frame ``cycle`` -> ({output: value}, {register: next value}).

        Raises TraceError naming the first token that breaks the protocol."""
        expect = [(OUT, j, cycle % 2) for j in range(len(self.outputs))] + \
                 [(REG, j, (cycle + 1) % 2) for j in range(len(self.registers))]
        if len(tokens) != len(expect):
            raise TraceError(f"cycle {cycle}: {len(tokens)} generated tokens, the protocol has {len(expect)}")
        values = []
        for pos, (tok, want) in enumerate(zip(tokens, expect)):
            f = self.field(tok)
            if (f.kind, f.chunk, f.parity) != want:
                raise TraceError(f"cycle {cycle}, token {pos}: got {f.kind} chunk {f.chunk} parity "
                                 f"{f.parity}, expected {want[0]} chunk {want[1]} parity {want[2]}")
            values.append(f.value)
        return (self._unpack(values[:len(self.outputs)], self.output_ports),
                self._unpack(values[len(self.outputs):], self.register_names))

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
