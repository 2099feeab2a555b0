"""The settings of one compile (every option of ``netlist2tf compile`` that shapes the model): a small
module of its own, so that a caller that only names the settings (the CPU's checkpoint cache key, a
checkpoint's trace side) does not load the planner."""

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from netlist2tf.common import Netlist2TFError

if TYPE_CHECKING:
    from netlist2tf.compile.target import Target

ROM_CHOICES = ("auto", "ffn", "deltanet", "attention")
BITS_CHOICES = ("signed", "pairs")


@dataclass(frozen=True)
class CompileSettings:
    """How to compile a design (every option of ``netlist2tf compile`` that shapes the model).

    ``layers``/``head_dim`` shape a standalone model (ignored with a ``target``, whose shapes are
    used exactly); ``outputs``: emit only these output ports (the logic only the others need is
    dropped); ``gated``: groups ((GATE, (MEMBER, ...)), ...) by signal name, emitted only in the
    frames where GATE is 1 (protocol.py): registers gated by a 1-bit register's next value (proved
    harmless by the driver), or output ports gated by a 1-bit output; ``gated_writes``: memories
    whose write group is emitted only when their port writes; ``held``: groups ((GATE, DIRTY,
    (REGISTER, ...)), ...) of registers that change rarely, emitted only in the frames where the
    1-bit output GATE is 1 (protocol.py "held"; the driver proves that GATE 0 means unchanged for two
    cycles, DIRTY being a 1-bit register that is 1 after a cycle that changed them; DIRTY "": a tail
    group, kept in one row that the frame's last token writes, so gate 0 need only mean unchanged
    for one cycle; at most one); ``folded_writes``:
    memories whose port's data chunks after the first are emitted only up to the word's highest
    non-zero chunk (protocol.py "fold": exact by construction). A single (GATE, (REGISTER, ...)) is
    taken as one group. ``roms``: how read-only memories are held: ``ffn`` (decoders, rom.py),
    ``deltanet`` (DeltaNet banks preloaded by the prompt, ``rom.preload``), ``attention`` (attention
    lookups over the words the prompt wrote, ``gadgets.rom_lookup``) or ``auto`` (the model with fewer
    parameters, planned every way); ``preloaded_roms``: the ROMs the prompt writes (DeltaNet banks or
    attention lookups), as ``plan_model`` resolved ``roms`` (None: not resolved yet); ``lookup_roms``:
    those of them read by attention lookups; ``lookup_ports``: read ports ("MEMORY:PORT") of written
    memories read by attention lookups over the words the prompt wrote (a promise: the port never
    reads a word written after the prompt; the caller's host keeps it, as ``cpu`` does for the
    fetch: docs/design/compiler.md section 5a). ``bits``: how the checkpoint's
    residual stream holds a bit: ``signed`` (one channel, +-1: ``netlist2tf.weights.signed``) or ``pairs``
    (two channels (b, 1 - b), as every gadget is planned)."""
    layers: int = 11
    chunk_bits: int = 8
    head_dim: int = 64
    target: "Target | None" = None
    outputs: tuple[str, ...] | None = None
    gated: tuple = ()
    gated_writes: tuple[str, ...] = ()
    held: tuple = ()
    folded_writes: tuple[str, ...] = ()
    roms: str = "auto"
    preloaded_roms: tuple[str, ...] | None = None
    bits: str = "signed"
    lookup_roms: tuple[str, ...] = ()
    lookup_ports: tuple[str, ...] = ()

    def __post_init__(self):
        if self.roms not in ROM_CHOICES:
            raise Netlist2TFError(f"roms {self.roms!r}: choose one of {', '.join(ROM_CHOICES)}")
        if self.bits not in BITS_CHOICES:
            raise Netlist2TFError(f"bits {self.bits!r}: choose one of {', '.join(BITS_CHOICES)}")
        if self.preloaded_roms is not None:
            object.__setattr__(self, "preloaded_roms", tuple(self.preloaded_roms))
        object.__setattr__(self, "lookup_roms", tuple(self.lookup_roms or ()))
        object.__setattr__(self, "lookup_ports", tuple(self.lookup_ports or ()))
        bad = [p for p in self.lookup_ports if not re.fullmatch(r".+:\d+", p)]
        if bad:
            raise Netlist2TFError(f"lookup ports {bad}: name each as MEMORY:PORT (a read port's number)")
        if set(self.lookup_roms) - set(self.preloaded_roms or ()):
            raise Netlist2TFError(f"lookup_roms {list(self.lookup_roms)} must be among the preloaded ROMs "
                                  f"{list(self.preloaded_roms or ())}")
        if self.outputs is not None:
            object.__setattr__(self, "outputs", tuple(self.outputs))
        gated = self.gated or ()
        if len(gated) == 2 and isinstance(gated[0], str) and not isinstance(gated[1], str):
            gated = (gated,)                     # one group given as (GATE, MEMBERS)
        object.__setattr__(self, "gated", tuple((str(g), tuple(str(m) for m in members)) for g, members in gated))
        object.__setattr__(self, "gated_writes", tuple(self.gated_writes or ()))
        object.__setattr__(self, "folded_writes", tuple(self.folded_writes or ()))
        object.__setattr__(self, "held", tuple((str(g), str(d), tuple(str(m) for m in members))
                                               for g, d, members in (self.held or ())))

    def record(self) -> dict:
        """The settings as compile.json records them (JSON-able; the target by name and source)."""
        return {"layers": self.layers, "chunk_bits": self.chunk_bits, "head_dim": self.head_dim,
                "keep_outputs": None if self.outputs is None else list(self.outputs),
                "gated": [[g, list(m)] for g, m in self.gated], "gated_writes": list(self.gated_writes),
                **({"held": [[g, d, list(m)] for g, d, m in self.held]} if self.held else {}),
                **({"folded_writes": list(self.folded_writes)} if self.folded_writes else {}),
                "roms": self.roms, "bits": self.bits,
                **({"preloaded_roms": list(self.preloaded_roms)} if self.preloaded_roms else {}),
                **({"lookup_roms": list(self.lookup_roms)} if self.lookup_roms else {}),
                **({"lookup_ports": list(self.lookup_ports)} if self.lookup_ports else {}),
                **({"target": {"name": self.target.name, "source": self.target.source}} if self.target else {})}
