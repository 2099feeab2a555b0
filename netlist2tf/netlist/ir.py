"""The netlist IR: a Yosys JSON netlist parsed once into frozen, typed records.

Nothing past this module sees a raw Yosys dict. Conventions:

* A *net* is one bit. Nets are numbered densely; ``CONST0``/``CONST1``/``CONSTX`` (0, 1, 2) are the
  constant nets, so a signal is always just a tuple of net numbers (``Sig``, least significant first).
  ``x`` (and ``z``) bits simulate as 0.
* Every flip-flop kind ($dff, $sdffe, $adff, $_DFFE_PP_, $_SDFF_PN0_, ...) becomes one ``Register``
  with optional enable, synchronous reset and asynchronous reset, each with its polarity.
* Every ``$mem_v2`` becomes a ``Memory`` with typed read and write ports.
* Everything else is a ``Cell`` (its type string kept as Yosys spells it); ``validate`` decides which
  types the later stages accept. ``$scopeinfo`` cells carry only hierarchy names and are dropped.

Names are deterministic: ports keep Yosys's order; cells, registers and memories are sorted by name;
each net is named after the best Yosys netname that contains it (a port, then the shortest public
name, then hidden names), so the same JSON always gives the same IR and the same ``dump()``.
"""

import dataclasses
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from netlist2tf.common import Netlist2TFError, NetlistFormatError

CONST0, CONST1, CONSTX = 0, 1, 2
Sig = tuple[int, ...]


def _bits_to_int(bits: str) -> int:
    """A Yosys constant string (MSB first, may hold x/z) -> int, with x and z read as 0."""
    return int(bits.translate(str.maketrans("xzXZ", "0000")) or "0", 2)


@dataclass(frozen=True, slots=True)
class Net:
    """One bit: ``base[bit]`` (or just ``base`` for a one-bit wire)."""
    index: int
    base: str
    bit: int | None

    def __str__(self):
        return self.base if self.bit is None else f"{self.base}[{self.bit}]"


@dataclass(frozen=True, slots=True)
class Port:
    name: str
    direction: str  # "input" or "output"
    bits: Sig
    signed: bool

    def __post_init__(self):
        if self.direction not in ("input", "output"):
            raise NetlistFormatError(f"port {self.name}: direction {self.direction!r} is not supported "
                                     f"(inout ports need tristate logic, which has no cycle semantics)")

    @property
    def width(self):
        return len(self.bits)


@dataclass(frozen=True, slots=True)
class Cell:
    """A combinational (or not yet accepted) cell, e.g. ``$add`` or ``$_AND_``."""
    name: str
    type: str
    params: tuple[tuple[str, int | str], ...]
    inputs: tuple[tuple[str, Sig], ...]
    outputs: tuple[tuple[str, Sig], ...]
    src: str

    def param(self, name: str, default=None):
        for k, v in self.params:
            if k == name:
                return v
        if default is None:
            raise NetlistFormatError(f"cell {self.name} ({self.type}) has no parameter {name}")
        return default

    def port(self, name: str) -> Sig:
        for k, v in self.inputs + self.outputs:
            if k == name:
                return v
        raise NetlistFormatError(f"cell {self.name} ({self.type}) has no port {name}")

    def products_and_addends(self):
        """A ``$mul`` or ``$macc_v2`` cell as ``(products, addends)``: ``Y`` is the sum, modulo
        ``2**Y_WIDTH``, of ``+-A_i * B_i`` over ``products`` ``(A_i, B_i, signed, negated)`` and
        ``+-C_j`` over ``addends`` ``(C_j, signed, negated)``, every operand first extended to
        ``Y_WIDTH`` bits (sign-extended when signed), as Yosys's simlib defines them (a ``$mul`` is
        signed only when both operands are; ``$macc_v2``'s per-product ``A_SIGNED``/``B_SIGNED`` bits
        are equal by RTLIL invariant)."""
        def bit(value, i):
            return int(value) >> i & 1 if isinstance(value, int) else 0

        if self.type == "$mul":
            signed = bool(self.param("A_SIGNED", 0)) and bool(self.param("B_SIGNED", 0))
            return [(self.port("A"), self.port("B"), signed, False)], []
        if self.type != "$macc_v2":
            raise ValueError(f"{self.type} is not a multiplier cell")
        products, addends = [], []
        A, B, C = (dict(self.inputs).get(k, ()) for k in "ABC")
        ai = bi = ci = 0
        for i in range(int(self.param("NPRODUCTS", 0))):
            aw = int(self.param("A_WIDTHS")) >> (16 * i) & 0xFFFF
            bw = int(self.param("B_WIDTHS")) >> (16 * i) & 0xFFFF
            signed = bool(bit(self.param("A_SIGNED", 0), i) and bit(self.param("B_SIGNED", 0), i))
            products.append((A[ai:ai + aw], B[bi:bi + bw], signed, bool(bit(self.param("PRODUCT_NEGATED", 0), i))))
            ai, bi = ai + aw, bi + bw
        for j in range(int(self.param("NADDENDS", 0))):
            cw = int(self.param("C_WIDTHS")) >> (16 * j) & 0xFFFF
            addends.append((C[ci:ci + cw], bool(bit(self.param("C_SIGNED", 0), j)),
                            bool(bit(self.param("ADDEND_NEGATED", 0), j))))
            ci += cw
        return products, addends

    def has_port(self, name: str) -> bool:
        return any(k == name for k, _ in self.inputs + self.outputs)


@dataclass(frozen=True, slots=True)
class Register:
    """A group of flip-flops sharing clock, enable and resets: ``q <= d`` on the clock edge.

    Next value: if ``srst`` is active (and, when ``ce_over_srst``, ``enable`` too) -> ``srst_value``;
    else if ``enable`` is inactive -> ``q``; else ``d``. While ``arst`` is active, ``q`` reads
    ``arst_value`` at once and the edge loads ``arst_value``. ``None`` means "no such control".
    """
    name: str
    d: Sig
    q: Sig
    clock: int
    clock_posedge: bool
    init: int
    enable: int | None = None
    enable_high: bool = True
    srst: int | None = None
    srst_high: bool = True
    srst_value: int = 0
    ce_over_srst: bool = False
    arst: int | None = None
    arst_high: bool = True
    arst_value: int = 0
    src: str = ""
    cell_type: str = "$dff"

    def __post_init__(self):
        if len(self.d) != len(self.q):
            raise NetlistFormatError(f"register {self.name}: D has {len(self.d)} bits, Q {len(self.q)}")

    @property
    def width(self):
        return len(self.q)


@dataclass(frozen=True, slots=True)
class ReadPort:
    """A memory read port. Unclocked: ``data = mem[addr]`` combinationally (before this cycle's
    writes). Clocked: on the edge, if ``enable``, ``data <= mem[addr]``, seeing the new value of
    write ports listed in ``transparent_for``; ``srst`` (sync) / ``arst`` (async) reset the data."""
    addr: Sig
    data: Sig
    clocked: bool
    clock: int
    enable: int
    srst: int
    srst_value: int
    arst: int
    arst_value: int
    init_value: int
    ce_over_srst: bool
    transparent_for: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class WritePort:
    """A clocked memory write port with a per-bit enable (``enable`` has the memory's width).
    Ports are applied in index order; ``priority_over`` lists the lower ports this one overrides."""
    addr: Sig
    data: Sig
    enable: Sig
    clocked: bool
    clock: int
    priority_over: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Memory:
    name: str
    width: int
    size: int
    offset: int
    abits: int
    init: tuple[int, ...]
    read_ports: tuple[ReadPort, ...]
    write_ports: tuple[WritePort, ...]
    src: str
    wide: bool = False  # a wide (multi-word) port exists; validate rejects it

    def __post_init__(self):
        if len(self.init) != self.size:
            raise NetlistFormatError(f"memory {self.name}: {len(self.init)} init words for size {self.size}")
        for p in self.read_ports:
            if len(p.data) != self.width:
                raise NetlistFormatError(f"memory {self.name}: read port width {len(p.data)} != {self.width}")
        for p in self.write_ports:
            if len(p.data) != self.width or len(p.enable) != self.width:
                raise NetlistFormatError(f"memory {self.name}: write port width != {self.width}")


@dataclass(frozen=True, slots=True)
class NamedSignal:
    """A public wire of the design (for waveforms and debugging): its name, bits and source."""
    name: str
    bits: Sig
    src: str


@dataclass(frozen=True, slots=True)
class Netlist:
    top: str
    nets: tuple[Net, ...]
    ports: tuple[Port, ...]
    cells: tuple[Cell, ...]
    registers: tuple[Register, ...]
    memories: tuple[Memory, ...]
    signals: tuple[NamedSignal, ...]

    @property
    def inputs(self) -> tuple[Port, ...]:
        return tuple(p for p in self.ports if p.direction == "input")

    @property
    def outputs(self) -> tuple[Port, ...]:
        return tuple(p for p in self.ports if p.direction == "output")

    def sig_str(self, sig: Sig) -> str:
        """A readable name for a signal: ``a[7:0]``, ``{b[3:0], 1'b0}``, ..."""
        parts = []  # (base, hi, lo) or const strings, MSB first at the end
        runs: list[list] = []
        for n in sig:
            if n in (CONST0, CONST1, CONSTX):
                ch = "01x"[n]
                if runs and runs[-1][0] == "const":
                    runs[-1][1] = ch + runs[-1][1]
                else:
                    runs.append(["const", ch])
                continue
            net = self.nets[n]
            if (runs and runs[-1][0] == "net" and runs[-1][1] == net.base and net.bit is not None
                    and runs[-1][3] is not None and runs[-1][3] + 1 == net.bit):
                runs[-1][3] = net.bit
            else:
                runs.append(["net", net.base, net.bit, net.bit])
        for r in reversed(runs):
            if r[0] == "const":
                parts.append(f"{len(r[1])}'b{r[1]}")
            elif r[2] is None:
                parts.append(r[1])
            elif r[2] == r[3]:
                parts.append(f"{r[1]}[{r[2]}]")
            else:
                parts.append(f"{r[1]}[{r[3]}:{r[2]}]")
        return parts[0] if len(parts) == 1 else "{" + ", ".join(parts) + "}"

    def dump(self) -> str:
        """One line per port, register, memory and cell; deterministic (golden tests compare it)."""
        s = self.sig_str
        lines = [f"netlist {self.top}: {len(self.nets) - 3} nets, {len(self.cells)} cells, "
                 f"{len(self.registers)} registers, {len(self.memories)} memories"]
        for p in self.ports:
            lines.append(f"{p.direction:6} {p.name}: {p.width}{' signed' if p.signed else ''}")
        for r in self.registers:
            ctl = []
            if r.enable is not None:
                ctl.append(f"en={'' if r.enable_high else '!'}{s((r.enable,))}")
            if r.srst is not None:
                ctl.append(f"srst={'' if r.srst_high else '!'}{s((r.srst,))}->{r.srst_value:#x}"
                           + (" ce_over_srst" if r.ce_over_srst else ""))
            if r.arst is not None:
                ctl.append(f"arst={'' if r.arst_high else '!'}{s((r.arst,))}->{r.arst_value:#x}")
            lines.append(f"reg    {s(r.q)} <= {s(r.d)} init={r.init:#x} {' '.join(ctl)}"
                         f" ({r.cell_type} {r.name} @ {r.src})".replace("  ", " "))
        for m in self.memories:
            lines.append(f"mem    {m.name}: {m.size}x{m.width} offset={m.offset} @ {m.src}")
            for i, rp in enumerate(m.read_ports):
                kind = "sync" if rp.clocked else "async"
                lines.append(f"  rd{i} {kind} {s(rp.data)} = [{s(rp.addr)}]"
                             + (f" en={s((rp.enable,))} transparent_for={list(rp.transparent_for)}"
                                if rp.clocked else ""))
            for i, wp in enumerate(m.write_ports):
                lines.append(f"  wr{i} [{s(wp.addr)}] <= {s(wp.data)} en={s(wp.enable)}")
        for c in self.cells:
            params = " ".join(f"{k}={v}" for k, v in c.params)
            ins = " ".join(f"{k}={s(v)}" for k, v in c.inputs)
            outs = " ".join(f"{s(v)}" for k, v in c.outputs)
            lines.append(f"cell   {outs} = {c.type}({ins}){' ' + params if params else ''} @ {c.src}")
        return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# Parsing Yosys JSON
# ----------------------------------------------------------------------------------------------

_FINE_FF = re.compile(r"^\$_(DFF|DFFE|SDFF|SDFFE|SDFFCE)_([NP01]+)_$")
# letters after the kind: C = clock polarity, R/V = reset polarity/value, E = enable polarity
_FINE_FF_LAYOUT = {("DFF", 1): "C", ("DFF", 3): "CRV", ("DFFE", 2): "CE", ("DFFE", 4): "CRVE",
                   ("SDFF", 3): "CRV", ("SDFFE", 4): "CRVE", ("SDFFCE", 4): "CRVE"}
_WORD_FF = {"$dff", "$dffe", "$sdff", "$sdffe", "$sdffce", "$adff", "$adffe"}
_DROPPED = {"$scopeinfo"}

# The shape of a Yosys ``write_json`` netlist, checked with the jsonschema library before reading:
# bits are net numbers or "0"/"1"/"x"/"z"; parameters are integers, bit strings, or (for string
# parameters) other text, but the numeric ones (widths, sizes, counts, polarities, signedness) must be
# integers or bit strings.
_BITS = {"type": "array", "items": {"anyOf": [{"type": "integer", "minimum": 0},
                                              {"enum": ["0", "1", "x", "z"]}]}}
_NUMBER = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^[01xz]+$"}]}
_NUMERIC_PARAMS = ("^(.*_WIDTH|WIDTH|SIZE|ABITS|OFFSET|RD_PORTS|WR_PORTS|.*_POLARITY|.*_SIGNED|"
                   "DEPTH|.*_VALUE|INIT|LUT|RD_CLK_ENABLE|WR_CLK_ENABLE|RD_TRANSPARENCY_MASK|"
                   "WR_PRIORITY_MASK|RD_CE_OVER_SRST|RD_COLLISION_X_MASK|RD_WIDE_CONTINUATION|"
                   "WR_WIDE_CONTINUATION|TABLE)$")
YOSYS_JSON_SCHEMA = {
    "type": "object",
    "required": ["modules"],
    "properties": {"modules": {"type": "object", "additionalProperties": {
        "type": "object",
        "properties": {
            "attributes": {"type": "object"},
            "ports": {"type": "object", "additionalProperties": {
                "type": "object", "required": ["direction", "bits"],
                "properties": {"direction": {"enum": ["input", "output", "inout"]}, "bits": _BITS}}},
            "cells": {"type": "object", "additionalProperties": {
                "type": "object", "required": ["type", "connections"],
                "properties": {
                    "type": {"type": "string", "minLength": 1},
                    "parameters": {"type": "object", "patternProperties": {_NUMERIC_PARAMS: _NUMBER},
                                   "additionalProperties": {"type": ["string", "integer"]}},
                    "port_directions": {"type": "object", "additionalProperties": {
                        "enum": ["input", "output", "inout"]}},
                    "connections": {"type": "object", "additionalProperties": _BITS},
                    "attributes": {"type": "object"}}}},
            "netnames": {"type": "object", "additionalProperties": {
                "type": "object", "required": ["bits"], "properties": {"bits": _BITS}}},
            "memories": {"type": "object"}}}}}}


def _check_schema(doc, origin: str) -> None:
    """Raise NetlistFormatError listing (up to 5) places where ``doc`` breaks YOSYS_JSON_SCHEMA."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(YOSYS_JSON_SCHEMA).iter_errors(doc), key=lambda e: list(map(str, e.path)))
    if errors:
        where = ["/".join(str(p) for p in e.path) or "(top level)" for e in errors[:5]]
        lines = [f"{w}: {_schema_message(e)}" for w, e in zip(where, errors)]
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise NetlistFormatError(f"{origin} is not a Yosys JSON netlist: {'; '.join(lines)}{more}; write it "
                                 f"with Yosys's write_json (or `netlist2tf synth -o FILE`)")


def _schema_message(e) -> str:
    if e.schema == _BITS["items"]:
        return f"bad bit {e.instance!r} (a bit is a net number or \"0\", \"1\", \"x\", \"z\")"
    if e.schema == _NUMBER:
        return f"{e.instance!r} is not a number (Yosys writes numeric parameters as binary strings)"
    return e.message[:160]


# ports every cell of a type must connect (beyond those named by its X_WIDTH parameters)
_REQUIRED_PORTS = {"$mux": "ABSY", "$pmux": "ABSY", "$bmux": "ASY", "$bwmux": "ABSY", "$demux": "ASY",
                   "$lut": "AY", "$sop": "AY", "$_NOT_": "AY", "$_BUF_": "AY", "$_MUX_": "ABSY",
                   "$_NMUX_": "ABSY", "$_AOI3_": "ABCY", "$_OAI3_": "ABCY", "$_AOI4_": "ABCDY",
                   "$_OAI4_": "ABCDY", **{f"$_{g}_": "ABY" for g in ("AND", "NAND", "OR", "NOR", "XOR",
                                                                    "XNOR", "ANDNOT", "ORNOT")}}
# cells whose WIDTH parameter is the width of these ports
_WIDTH_PORTS = {"$mux": "ABY", "$pmux": "AY", "$bmux": "Y", "$bwmux": "ABSY", "$lut": "A", "$sop": "A"}


def _check_cell_widths(cname, ctype, params, conns, r) -> None:
    """The cell's connections exist and have the widths its parameters say."""
    for port in _REQUIRED_PORTS.get(ctype, ""):
        if port not in conns:
            r.fail(f"cell {cname} ({ctype}) has no connection for its port {port}")
    for key, value in params.items():
        if key.endswith("_WIDTH") and isinstance(value, int):
            port = key[:-len("_WIDTH")]
            if port in ("A", "B", "Y", "S", "C", "D") and ctype.startswith("$") and not ctype.startswith("$_"):
                if port not in conns:
                    r.fail(f"cell {cname} ({ctype}) has no connection for its port {port} ({key} = {value})")
                if len(conns[port]) != value:
                    r.fail(f"cell {cname} ({ctype}): {key} is {value} but port {port} has {len(conns[port])} bits")
    width = params.get("WIDTH")
    if isinstance(width, int):
        ports = _WIDTH_PORTS.get(ctype, "DQ" if ctype in _WORD_FF else "")
        for port in ports:
            if port in conns and len(conns[port]) != width:
                r.fail(f"cell {cname} ({ctype}): WIDTH is {width} but port {port} has {len(conns[port])} bits")
        if ctype == "$pmux" and "S_WIDTH" in params and "B" in conns and len(conns["B"]) != width * params["S_WIDTH"]:
            r.fail(f"cell {cname} ($pmux): port B has {len(conns['B'])} bits, not WIDTH x S_WIDTH")


class _Reader:
    """Parses one JSON text; keeps the net numbering while it works."""

    def __init__(self, text: str, origin: str):
        self.origin = origin
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise NetlistFormatError(f"{origin} is not valid JSON: {exc.msg} at line {exc.lineno} "
                                     f"column {exc.colno}; write it again with Yosys's write_json (or "
                                     f"`netlist2tf synth -o FILE`)")
        self.doc = doc
        self.net_of_bit: dict[int, int] = {}
        self.bit_order: list[int] = []

    def fail(self, what: str):
        raise NetlistFormatError(f"{self.origin}: {what}; expected a Yosys `write_json` netlist "
                                 f"(write one with `netlist2tf synth -o FILE`)")

    def module(self):
        doc = self.doc
        if not isinstance(doc, dict) or not isinstance(doc.get("modules"), dict):
            self.fail('no "modules" object at the top level')
        mods = {k: v for k, v in doc["modules"].items() if isinstance(v, dict)
                and not str(v.get("attributes", {}).get("blackbox", "0")).strip("0") == "1"
                and "blackbox" not in v.get("attributes", {})}
        if not mods:
            self.fail("no modules in the netlist")
        tops = [k for k, v in mods.items() if _bits_to_int(str(v.get("attributes", {}).get("top", "0"))) == 1]
        if len(tops) == 1:
            name = tops[0]
        elif len(mods) == 1:
            name = next(iter(mods))
        else:
            self.fail(f"{len(mods)} modules and no unique top ({', '.join(sorted(mods))}); "
                      f"the netlist must be flattened to one top module")
        return name, mods[name]

    def bit(self, b, where: str) -> int:
        if isinstance(b, str):
            if b == "0":
                return CONST0
            if b == "1":
                return CONST1
            if b in ("x", "z"):
                return CONSTX
            self.fail(f"{where}: bad constant bit {b!r}")
        if not isinstance(b, int) or isinstance(b, bool) or b < 0:
            self.fail(f"{where}: bad bit reference {b!r}")
        if b not in self.net_of_bit:
            self.net_of_bit[b] = 3 + len(self.bit_order)
            self.bit_order.append(b)
        return self.net_of_bit[b]

    def sig(self, bits, where: str) -> Sig:
        if not isinstance(bits, list):
            self.fail(f"{where}: bits must be a list")
        return tuple(self.bit(b, where) for b in bits)


def _param(raw, where, reader):
    if isinstance(raw, int):
        return raw
    if not isinstance(raw, str):
        reader.fail(f"{where}: bad parameter value {raw!r}")
    if raw and set(raw) <= set("01xz"):
        return raw if set(raw) & set("xz") else int(raw, 2)
    return raw.rstrip(" ")  # Yosys pads strings that look like bit strings with a space


@functools.lru_cache(maxsize=1)
def _own_text() -> bytes:
    """This file's text (it holds the schema), read once per process."""
    return Path(__file__).read_bytes()


def _schema_passed(text: str, record: bool = False) -> bool:
    """Whether ``text`` passed the schema check before (a marker under BUILD/schema/ named by the sha256
    of the text and of this file, which holds the schema); ``record``: say it did. A rebuild of an
    unchanged design then skips the check (a second of a large netlist's compile)."""
    import hashlib

    from netlist2tf.common import build_dir, prune_cache, write_file

    key = hashlib.sha256(text.encode() + b"\0" + _own_text()).hexdigest()[:32]
    path = build_dir() / "schema" / f"{key}.ok"
    if not record:
        return path.is_file()
    try:
        write_file(path, "", "the schema cache")
        prune_cache(path.parent, ".ok", 256)
    except (OSError, Netlist2TFError):
        pass
    return True


def parse_netlist(text: str, origin: str = "netlist JSON", schema: bool = True) -> Netlist:
    """Parse Yosys JSON text into a ``Netlist``.

    ``origin`` names the text's file in error messages. Raises NetlistFormatError on malformed input.
    Does not judge whether the design is supported: that is ``validate.check_netlist``. ``schema``:
    check the text against Yosys's JSON schema first (a second; skipped for a checkpoint's
    netlist.json whose sha256 matched its seal: the text this package checked and wrote, and for a
    text that passed before: ``_schema_passed``).
    """
    r = _Reader(text, origin)
    if schema and not _schema_passed(text):
        _check_schema(r.doc, origin)
        _schema_passed(text, record=True)
    top, mod = r.module()
    for key in ("ports", "cells", "netnames"):
        if not isinstance(mod.get(key, {}), dict):
            r.fail(f"module {top}: {key!r} must be an object")

    ports = []
    for pname, p in mod.get("ports", {}).items():
        if not isinstance(p, dict) or "direction" not in p or "bits" not in p:
            r.fail(f"port {pname}: needs direction and bits")
        signed = p.get("signed", 0)
        ports.append(Port(pname, p["direction"], r.sig(p["bits"], f"port {pname}"),
                          bool(signed if isinstance(signed, int) else _bits_to_int(str(signed)))))

    netnames = mod.get("netnames", {})
    parsed_names = []
    for nname in sorted(netnames):
        nn = netnames[nname]
        if not isinstance(nn, dict) or "bits" not in nn:
            r.fail(f"netname {nname}: needs bits")
        attrs = nn.get("attributes", {}) or {}
        parsed_names.append((nname, r.sig(nn["bits"], f"netname {nname}"),
                             bool(nn.get("hide_name", 0)), attrs))

    raw_cells = mod.get("cells", {})
    cells, registers, memories = [], [], []
    for cname in sorted(raw_cells):
        c = raw_cells[cname]
        if not isinstance(c, dict) or "type" not in c or not isinstance(c.get("connections"), dict):
            r.fail(f"cell {cname}: needs a type and connections")
        ctype = c["type"]
        if ctype in _DROPPED:
            continue
        params = {k: _param(v, f"cell {cname} parameter {k}", r) for k, v in (c.get("parameters") or {}).items()}
        conns = {k: r.sig(v, f"cell {cname} port {k}") for k, v in c["connections"].items()}
        _check_cell_widths(cname, ctype, params, conns, r)
        dirs = c.get("port_directions", {}) or {}
        src = str((c.get("attributes") or {}).get("src", ""))
        if ctype in _WORD_FF or _FINE_FF.match(ctype):
            registers.append(_register(cname, ctype, params, conns, src, r))
        elif ctype == "$mem_v2":
            memories.append(_memory(cname, params, conns, src, r))
        else:
            ins = tuple(sorted((k, v) for k, v in conns.items() if dirs.get(k, "input") == "input"))
            outs = tuple(sorted((k, v) for k, v in conns.items() if dirs.get(k) == "output"))
            cells.append(Cell(cname, ctype, tuple(sorted(params.items())), ins, outs, src))

    # Registers in natural order of their names (Yosys numbers the slices of a register it splits:
    # slice$93 before slice$100 keeps the bits of a signal in order in the trace's chunks).
    registers.sort(key=lambda reg: [(0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", reg.name)])

    # Net names: ports first, then public names (shortest first), then hidden ones.
    best: dict[int, tuple] = {}
    for rank, p in enumerate(ports):
        for i, n in enumerate(p.bits):
            best.setdefault(n, (0, rank, p.name, i if p.width > 1 else None))
    for nname, sig, hidden, _ in sorted(parsed_names, key=lambda t: (t[2], len(t[0]), t[0])):
        for i, n in enumerate(sig):
            best.setdefault(n, (1 + hidden, 0, nname, i if len(sig) > 1 else None))
    nets = [Net(CONST0, "1'b0", None), Net(CONST1, "1'b1", None), Net(CONSTX, "1'bx", None)]
    for idx, b in enumerate(r.bit_order, start=3):
        _, _, base, bit = best.get(idx, (9, 0, f"$bit{b}", None))
        nets.append(Net(idx, base, bit))

    # Register init values live on the Q wires' "init" attributes.
    init_of_net: dict[int, int] = {}
    for nname, sig, hidden, attrs in parsed_names:
        init = attrs.get("init")
        if isinstance(init, str) and set(init) <= set("01xz") and init:
            bits = init[::-1]
            for i, n in enumerate(sig):
                if i < len(bits) and bits[i] == "1":
                    init_of_net[n] = 1
                elif i < len(bits):
                    init_of_net.setdefault(n, 0)
        elif isinstance(init, int):
            for i, n in enumerate(sig):
                init_of_net[n] = (init >> i) & 1
    registers = [_with_init(reg, init_of_net) for reg in registers]

    signals = tuple(NamedSignal(nname, sig, str(attrs.get("src", "")))
                    for nname, sig, hidden, attrs in parsed_names if not hidden)
    return Netlist(top, tuple(nets), tuple(ports), tuple(cells), tuple(registers),
                   tuple(memories), signals)


def _with_init(reg: Register, init_of_net: dict[int, int]) -> Register:
    init = sum(init_of_net.get(n, 0) << i for i, n in enumerate(reg.q))
    if init == reg.init:
        return reg
    return dataclasses.replace(reg, init=init)


def _one(conns, port, where, reader) -> int:
    sig = conns.get(port)
    if sig is None or len(sig) != 1:
        reader.fail(f"{where}: port {port} must be one bit")
    return sig[0]


def _register(name, ctype, params, conns, src, r) -> Register:
    where = f"cell {name} ({ctype})"
    for port in ("D", "Q"):
        if port not in conns:
            r.fail(f"{where}: missing port {port}")
    if ctype in _WORD_FF:
        def p(key, default=0):
            v = params.get(key, default)
            return _bits_to_int(v) if isinstance(v, str) else v
        kw = dict(clock=_one(conns, "CLK", where, r), clock_posedge=bool(p("CLK_POLARITY", 1)))
        if ctype in ("$dffe", "$sdffe", "$sdffce", "$adffe"):
            kw.update(enable=_one(conns, "EN", where, r), enable_high=bool(p("EN_POLARITY", 1)))
        if ctype in ("$sdff", "$sdffe", "$sdffce"):
            kw.update(srst=_one(conns, "SRST", where, r), srst_high=bool(p("SRST_POLARITY", 1)),
                      srst_value=p("SRST_VALUE"), ce_over_srst=ctype == "$sdffce")
        if ctype in ("$adff", "$adffe"):
            kw.update(arst=_one(conns, "ARST", where, r), arst_high=bool(p("ARST_POLARITY", 1)),
                      arst_value=p("ARST_VALUE"))
    else:
        kind, letters = _FINE_FF.match(ctype).groups()
        layout = _FINE_FF_LAYOUT.get((kind, len(letters)))
        if layout is None:
            r.fail(f"{where}: unknown flip-flop cell type")
        f = dict(zip(layout, letters))
        kw = dict(clock=_one(conns, "C", where, r), clock_posedge=f["C"] == "P")
        if "E" in f:
            kw.update(enable=_one(conns, "E", where, r), enable_high=f["E"] == "P")
        if "R" in f:
            high, value = f["R"] == "P", int(f["V"])
            if kind.startswith("S"):
                kw.update(srst=_one(conns, "R", where, r), srst_high=high, srst_value=value,
                          ce_over_srst=kind == "SDFFCE")
            else:
                kw.update(arst=_one(conns, "R", where, r), arst_high=high, arst_value=value)
    return Register(name=name, d=conns["D"], q=conns["Q"], init=0, src=src, cell_type=ctype, **kw)


def _memory(name, params, conns, src, r) -> Memory:
    where = f"memory {name}"

    def p(key):
        if key not in params:
            r.fail(f"{where}: missing parameter {key}")
        return params[key]

    def bits_of(key, n):
        """A per-port bit-string parameter -> list of n ints (index 0 = port 0)."""
        v = params.get(key, 0)
        s = v if isinstance(v, str) else format(v, "b")
        s = s.zfill(n)[-n:] if n else ""
        return [1 if ch == "1" else 0 for ch in reversed(s)]

    def words_of(key, n, width):
        v = params.get(key, 0)
        s = v if isinstance(v, str) else format(v, "b")
        s = s.zfill(n * width)
        vals = []
        for i in range(n):
            chunk = s[len(s) - (i + 1) * width: len(s) - i * width] if width else ""
            vals.append(_bits_to_int(chunk) if chunk else 0)
        return vals

    width, size, abits = int(p("WIDTH")), int(p("SIZE")), int(p("ABITS"))
    offset = int(params.get("OFFSET", 0)) if not isinstance(params.get("OFFSET", 0), str) else 0
    nrd, nwr = int(p("RD_PORTS")), int(p("WR_PORTS"))
    for port in ("RD_CLK", "RD_EN", "RD_ARST", "RD_SRST", "RD_ADDR", "RD_DATA",
                 "WR_CLK", "WR_EN", "WR_ADDR", "WR_DATA"):
        if port not in conns:
            r.fail(f"{where}: missing port {port}")
    init = words_of("INIT", size, width)
    rd_clk_en, rd_ce_over = bits_of("RD_CLK_ENABLE", nrd), bits_of("RD_CE_OVER_SRST", nrd)
    rd_wide, wr_wide = bits_of("RD_WIDE_CONTINUATION", nrd), bits_of("WR_WIDE_CONTINUATION", nwr)
    transp = bits_of("RD_TRANSPARENCY_MASK", nrd * nwr)
    prio = bits_of("WR_PRIORITY_MASK", nwr * nwr)
    wr_clk_en = bits_of("WR_CLK_ENABLE", nwr)
    srst_vals = words_of("RD_SRST_VALUE", nrd, width)
    arst_vals = words_of("RD_ARST_VALUE", nrd, width)
    init_vals = words_of("RD_INIT_VALUE", nrd, width)
    if (len(conns["RD_ADDR"]) != nrd * abits or len(conns["RD_DATA"]) != nrd * width
            or len(conns["WR_ADDR"]) != nwr * abits or len(conns["WR_DATA"]) != nwr * width
            or len(conns["WR_EN"]) != nwr * width or len(conns["RD_EN"]) != nrd):
        r.fail(f"{where}: port widths do not match RD_PORTS/WR_PORTS/ABITS/WIDTH")

    def sl(port, i, w):
        return conns[port][i * w:(i + 1) * w]

    rports = tuple(ReadPort(
        addr=sl("RD_ADDR", i, abits), data=sl("RD_DATA", i, width), clocked=bool(rd_clk_en[i]),
        clock=conns["RD_CLK"][i], enable=conns["RD_EN"][i], srst=conns["RD_SRST"][i],
        srst_value=srst_vals[i], arst=conns["RD_ARST"][i], arst_value=arst_vals[i],
        init_value=init_vals[i], ce_over_srst=bool(rd_ce_over[i]),
        transparent_for=tuple(j for j in range(nwr) if transp[i * nwr + j])) for i in range(nrd))
    wports = tuple(WritePort(
        addr=sl("WR_ADDR", i, abits), data=sl("WR_DATA", i, width), enable=sl("WR_EN", i, width),
        clocked=bool(wr_clk_en[i]), clock=conns["WR_CLK"][i],
        priority_over=tuple(j for j in range(nwr) if prio[i * nwr + j])) for i in range(nwr))
    memid = params.get("MEMID", name)
    memid = memid.lstrip("\\") if isinstance(memid, str) else name
    return Memory(memid, width, size, offset, abits, tuple(init), rports, wports, src,
                  wide=any(rd_wide) or any(wr_wide))


def load_netlist(path) -> Netlist:
    """Read and parse a Yosys JSON file. Raises NetlistFormatError (also for unreadable files)."""
    from netlist2tf.common import Netlist2TFError
    from netlist2tf.common import read_text

    try:
        text = read_text(path, f"netlist {path}")
    except Netlist2TFError as exc:
        raise NetlistFormatError(f"cannot read {exc}") from None
    return parse_netlist(text, str(path))
