"""Which HDL signal and source line every cell of a compiled netlist comes from.

abc maps the compile flows' gates to LUTs and drops their ``src`` attributes and most wire names, so
in the netlist the compiler takes, ~90 % of the CPU's cells are ``$abc$...`` LUTs with no source. The
report therefore also asks Yosys for the gate-level netlist just before abc (``yosys.premap_script``,
``SynthResult.premap_text``), where
every gate still carries the ``src`` of the word-level cell techmap made it from and the HDL's wires
still have their names. Both netlists compute from the same boundary (registers, memories, the
word-level cells kept as macros, the ports: abc leaves those cells and their names alone), so the
attribution is recovered by function, not by name:

1. both netlists are simulated on the same random values of every boundary output (256 patterns,
   64-bit words; a boundary output is keyed by its cell's name, port and bit, or the input port's);
2. a LUT that computes the same function as a gate of the pre-abc netlist (or its complement) takes
   that gate's wire name (an HDL signal's bit where a named wire holds it) and ``src``
   ("equal": the LUT *is* that signal bit);
3. a kept cell (adder, shift, multiplier, ...) has its own ``src``, and its output wire's name;
4. every other cell (a LUT whose function abc made up: part of a signal's logic) takes the
   attribution of the nearest cells that read it, breadth first ("feeds"), or of the register,
   memory port or output port it drives.

256 random patterns cannot prove two functions equal; a false match would need two different
functions of the same boundary bits to agree on all 256 (for functions that differ on a fraction p
of the inputs, the chance is (1 - p)^256). The attribution only names things; nothing is compiled
from it.
"""

import json
from collections import defaultdict, deque

import numpy as np

WORDS = 4                          # 4 x 64 random patterns
_MASK = np.uint64(0xFFFF_FFFF_FFFF_FFFF)

# Yosys's internal gates (simcells.v): inputs and the function on 64-bit words.
_GATES = {
    "$_BUF_": ("A",), "$_NOT_": ("A",), "$_AND_": ("A", "B"), "$_NAND_": ("A", "B"), "$_OR_": ("A", "B"),
    "$_NOR_": ("A", "B"), "$_XOR_": ("A", "B"), "$_XNOR_": ("A", "B"), "$_ANDNOT_": ("A", "B"),
    "$_ORNOT_": ("A", "B"), "$_MUX_": ("A", "B", "S"), "$_NMUX_": ("A", "B", "S"),
    "$_AOI3_": ("A", "B", "C"), "$_OAI3_": ("A", "B", "C"), "$_AOI4_": ("A", "B", "C", "D"),
    "$_OAI4_": ("A", "B", "C", "D"),
}


def _gate(t: str, v: list):
    a = v[0]
    if t == "$_BUF_":
        return a
    if t == "$_NOT_":
        return ~a
    b = v[1]
    if t in ("$_AND_", "$_NAND_"):
        r = a & b
    elif t in ("$_OR_", "$_NOR_"):
        r = a | b
    elif t in ("$_XOR_", "$_XNOR_"):
        r = a ^ b
    elif t == "$_ANDNOT_":
        return a & ~b
    elif t == "$_ORNOT_":
        return a | ~b
    elif t in ("$_MUX_", "$_NMUX_"):
        r = (a & ~v[2]) | (b & v[2])
    elif t == "$_AOI3_":
        return ~((a & b) | v[2])
    elif t == "$_OAI3_":
        return ~((a | b) & v[2])
    elif t == "$_AOI4_":
        return ~((a & b) | (v[2] & v[3]))
    else:                                            # $_OAI4_
        return ~((a | b) & (v[2] | v[3]))
    return ~r if t in ("$_NAND_", "$_NOR_", "$_XNOR_", "$_NMUX_") else r


def _lut(cell: dict, v: list):
    table = int(cell["parameters"]["LUT"], 2) if isinstance(cell["parameters"]["LUT"], str) \
        else int(cell["parameters"]["LUT"])
    out = np.zeros(WORDS, np.uint64)
    for m in range(1 << len(v)):
        if (table >> m) & 1:
            term = np.full(WORDS, _MASK)
            for j, x in enumerate(v):
                term &= x if (m >> j) & 1 else ~x
            out |= term
    return out


def _top(text: str) -> dict:
    mods = json.loads(text)["modules"]
    tops = [m for m, d in mods.items() if str(d.get("attributes", {}).get("top", "0")).strip("0")]
    return mods[tops[0] if tops else sorted(mods)[0]]


class _Sim:
    """One netlist evaluated on random boundary values (``comb``: the cell types computed here; every
    other cell's outputs, and the input ports, are boundary sources)."""

    def __init__(self, mod: dict, comb, values: dict, rng):
        self.mod, self.comb, self.values, self.rng = mod, comb, values, rng
        self.driver = {}
        for cname, c in mod["cells"].items():
            for port, bits in c["connections"].items():
                if c.get("port_directions", {}).get(port) == "output":
                    for i, b in enumerate(bits):
                        self.driver[b] = (cname, port, i)
        for pname, p in mod["ports"].items():
            if p["direction"] == "input":
                for i, b in enumerate(p["bits"]):
                    self.driver[b] = (f"port:{pname}", "", i)
        self.val: dict = {}

    def _source(self, key):
        if key not in self.values:
            self.values[key] = self.rng.integers(0, 2 ** 64, size=WORDS, dtype=np.uint64)
        return self.values[key]

    def _inputs(self, c: dict) -> list:
        if c["type"] == "$lut":
            return list(c["connections"]["A"])
        return [c["connections"][p][0] for p in _GATES[c["type"]]]

    def get(self, bit):
        """The value of ``bit`` (iterative: gate chains are deeper than Python's recursion)."""
        stack = [bit]
        while stack:
            b = stack[-1]
            if b in self.val or isinstance(b, str):
                stack.pop()
                continue
            d = self.driver.get(b)
            cell = self.mod["cells"].get(d[0]) if d else None
            if cell is None or cell["type"] not in self.comb:
                self.val[b] = self._source(d if d else ("undriven", "", b))
                stack.pop()
                continue
            ins = self._inputs(cell)
            todo = [x for x in ins if not isinstance(x, str) and x not in self.val]
            if todo:
                stack.extend(todo)
                continue
            v = [self._const(x) if isinstance(x, str) else self.val[x] for x in ins]
            self.val[b] = _lut(cell, v) if cell["type"] == "$lut" else _gate(cell["type"], v)
            stack.pop()
        return self._const(bit) if isinstance(bit, str) else self.val[bit]

    @staticmethod
    def _const(b: str):
        return np.full(WORDS, _MASK) if b == "1" else np.zeros(WORDS, np.uint64)


def _names(mod: dict) -> dict:
    """{bit: (signal bit name, src)} over the module's visible wires (the first by name)."""
    out = {}
    for name in sorted(mod["netnames"]):
        w = mod["netnames"][name]
        if w.get("hide_name"):
            continue
        bits = w["bits"]
        for i, b in enumerate(bits):
            if not isinstance(b, str) and b not in out:
                out[b] = (name if len(bits) == 1 else f"{name}[{i}]", str(w.get("attributes", {}).get("src", "")))
    return out


def _src(attrs: dict) -> str:
    return str(attrs.get("src", "")).split("|")[0]


def attribute(premap_text: str | None, netlist_text: str, seed: int = 0) -> dict:
    """{cell name: {"signal": HDL signal bit or None, "src": "file:line" or "", "how": "equal" |
    "complement" | "cell" | "feeds", "via": the cell or sink it was taken from (feeds)}} for every cell
    of ``netlist_text`` (the compile flow's netlist), from ``premap_text`` (module docstring; None: a
    netlist without one, e.g. the word flow's, where only steps 3 and 4 apply)."""
    post = _top(netlist_text)
    pre = _top(premap_text) if premap_text is not None else {"cells": {}, "netnames": {}, "ports": {}}
    rng = np.random.default_rng(seed)
    values: dict = {}
    gates = set(_GATES)
    ps = _Sim(pre, gates, values, rng)
    qs = _Sim(post, {"$lut"}, values, rng)
    pre_names, post_names = _names(pre), _names(post)

    # the pre-abc gates by function: prefer a bit with a visible name, then one with a src
    by_sig: dict = {}
    for cname in sorted(pre["cells"]):
        c = pre["cells"][cname]
        if c["type"] not in gates:
            continue
        b = c["connections"]["Y"][0]
        named = b in pre_names
        entry = (0 if named else 1 if _src(c.get("attributes", {})) else 2, cname, b)
        v = ps.get(b)
        for key, how in ((v.tobytes(), "equal"), ((~v).tobytes(), "complement")):
            if key not in by_sig or entry < by_sig[key][0]:
                by_sig[key] = (entry, how)

    out: dict = {}
    readers = defaultdict(list)                    # post bit -> cells reading it
    for cname in sorted(post["cells"]):
        c = post["cells"][cname]
        dirs = c.get("port_directions", {})
        for port, bits in c["connections"].items():
            if dirs.get(port) == "input":
                for b in bits:
                    if not isinstance(b, str):
                        readers[b].append(cname)
        outs = [b for p, bits in c["connections"].items() if dirs.get(p) == "output" for b in bits
                if not isinstance(b, str)]
        if c["type"] == "$lut":
            hit = by_sig.get(qs.get(outs[0]).tobytes()) if outs else None
            if hit is not None:
                (_, gname, gbit), how = hit
                sig, wsrc = pre_names.get(gbit, (None, ""))
                out[cname] = {"signal": sig, "src": _src(pre["cells"][gname].get("attributes", {})) or wsrc,
                              "how": how}
                if out[cname]["signal"] is None and not out[cname]["src"]:
                    del out[cname]
        elif c["type"].startswith("$_DFF") or c["type"] in ("$dff", "$mem_v2"):
            continue                               # registers and memories: the IR names them
        else:
            src = _src(c.get("attributes", {}))
            named = [post_names[b] for b in outs if b in post_names]
            if not named and cname in pre["cells"]:   # the same kept cell before abc: its wires' names
                pc = pre["cells"][cname]
                named = [pre_names[b] for p, bits in pc["connections"].items()
                         if pc.get("port_directions", {}).get(p) == "output" for b in bits if b in pre_names]
            sig = named[0][0] if named else None
            if sig or src:
                out[cname] = {"signal": sig, "src": src or (named[0][1] if named else ""), "how": "cell"}

    # sinks: a register's D bit (the register's name), a memory port, an output port
    sink: dict = {}
    for cname in sorted(post["cells"]):
        c = post["cells"][cname]
        if c["type"].startswith("$_DFF") or c["type"] == "$dff":
            q = c["connections"]["Q"][0]
            name, wsrc = post_names.get(q, (cname, ""))
            for b in c["connections"]["D"]:
                if not isinstance(b, str):
                    sink.setdefault(b, {"signal": f"{name} (next value)", "src": wsrc or _src(c["attributes"])})
        elif c["type"] == "$mem_v2":
            mem = str(c["parameters"].get("MEMID", cname)).lstrip("\\")
            for port, bits in c["connections"].items():
                if c.get("port_directions", {}).get(port) == "input":
                    for b in bits:
                        if not isinstance(b, str):
                            sink.setdefault(b, {"signal": f"{mem}.{port}", "src": _src(c["attributes"])})
    for pname in sorted(post["ports"]):
        p = post["ports"][pname]
        if p["direction"] == "output":
            for i, b in enumerate(p["bits"]):
                if not isinstance(b, str):
                    sink.setdefault(b, {"signal": pname if len(p["bits"]) == 1 else f"{pname}[{i}]",
                                        "src": str(post["netnames"].get(pname, {}).get("attributes", {})
                                                   .get("src", ""))})

    # everything else: the nearest attributed reader (breadth first) or sink
    outputs_of = {}
    for cname, c in post["cells"].items():
        dirs = c.get("port_directions", {})
        outputs_of[cname] = [b for p, bits in c["connections"].items() if dirs.get(p) == "output"
                             for b in bits if not isinstance(b, str)]
    def nearest(cname, accept):
        """Breadth first through the cells reading ``cname``'s outputs: the first sink, or the first
        reader whose attribution ``accept`` takes, as (signal, src, via); None if neither."""
        seen, queue = {cname}, deque([cname])
        while queue:
            for b in outputs_of[queue.popleft()]:
                if b in sink:
                    return sink[b]["signal"], sink[b]["src"], sink[b]["signal"]
                for r in readers[b]:
                    if r in out and accept(out[r]):
                        return out[r]["signal"], out[r]["src"], r
                    if r not in seen and not post["cells"][r]["type"].startswith("$_DFF"):
                        seen.add(r)
                        queue.append(r)
        return None

    for cname in sorted(post["cells"]):
        c = post["cells"][cname]
        if cname in out or c["type"].startswith("$_DFF") or c["type"] in ("$dff", "$mem_v2"):
            continue
        found = nearest(cname, lambda a: a["how"] != "feeds")
        if found is not None:
            out[cname] = {"signal": found[0], "src": found[1], "via": found[2], "how": "feeds"}

    # a cell matched by function or kept whole whose own wire has no visible name (an expression
    # inside a larger one): its line stays its own, its signal is the nearest named one it feeds
    for cname in sorted(out):
        if out[cname]["signal"] is None:
            found = nearest(cname, lambda a: a["signal"] is not None)
            out[cname]["signal"] = found[0] if found else None
    return out
