"""Memories with several write ports or per-bit write enables, rewritten into memories the model
can hold: one write port each, writing whole words.

The compiled model commits a memory's write at the frame's last token, one word per DeltaNet key
head per token (docs/design/compiler.md 3), so a memory written by two ports in one cycle, or a write that
keeps some bits of the word, has no direct image. This pass (run on the compile flows' Yosys JSON by
``frontend.synthesize``) rewrites such a memory with logic around single-port memories, so that the
design's behaviour is unchanged cycle for cycle:

* **Several write ports: XOR banks** (the live-value-table-free multiport memory of LaForest and
  Steffan, FPGA 2012). A memory with P write ports becomes P banks ``MEM$bank0`` ... (each as deep
  and wide as the memory, bank 0 with its initial image, the others 0), bank p written only by port p.
  Every read of the memory at address a returns ``bank0[a] ^ bank1[a] ^ ...``; port p writes
  ``data_p ^ (the other banks at addr_p)``, read before the cycle's writes (asynchronous reads), so
  the XOR at addr_p becomes data_p. Two ports writing one address in one cycle: Yosys's simlib (and
  Amaranth's simulator, and ours) apply the ports in order, so the later one wins; here a port's
  write is dropped, bit by bit, where a later port writes the same address with that bit enabled,
  which leaves exactly the winner's bank changed.
* **Per-bit enables: read-modify-write.** A port that enables only some bits writes the whole word:
  its enabled bits' new values and, elsewhere, the bank's own word at that address (one more read),
  with the word's enable the OR of the bit enables. A memory with one write port keeps its name.

All of it is ordinary logic: ``$eq`` (address collisions) and ``$reduce_or`` (the word enable) are
threshold macros, everything else small ``$lut`` cells (at most 2 + P inputs), tagged with the
memory's ``src``. The cost is P times the memory's DeltaNet heads, one bank read per extra port (and
one for a per-bit port) and a level of logic after each read. Memories this pass cannot rewrite
(synchronous read ports, which the compile flows' ``memory_nordff`` has already turned into
registers; unclocked or wide ports; more than ``MAX_WRITE_PORTS``) are left for ``validate``/``plan``
to report, except the last, refused here with the rewrite that compiles.
"""

import json

from netlist2tf.common import UnsupportedDesignError
from netlist2tf.netlist import Problem

MAX_WRITE_PORTS = 4          # a port's collision LUT reads its enable, the later ports' and their matches
_CONSTS = ("0", "1", "x", "z")


def _int(v) -> int:
    return v if isinstance(v, int) else int(str(v).translate(str.maketrans("xz", "00")) or "0", 2)


def _flags(v, n: int) -> list[int]:
    """A per-port bit-string parameter as n ints, index 0 = port 0 (the string's last character)."""
    s = v if isinstance(v, str) else format(int(v), "b")
    s = s.zfill(n)[-n:] if n else ""
    return [1 if ch == "1" else 0 for ch in reversed(s)]


def _word_param(n: int, value: int = 0) -> str:
    return format(value, f"0{max(n, 1)}b")[-max(n, 1):]


class _Builder:
    """New bits, cells and net names in one Yosys JSON module."""

    def __init__(self, mod: dict):
        self.mod = mod
        used = [b for c in mod.get("cells", {}).values() for sig in c.get("connections", {}).values()
                for b in sig if isinstance(b, int)]
        used += [b for n in mod.get("netnames", {}).values() for b in n.get("bits", []) if isinstance(b, int)]
        used += [b for p in mod.get("ports", {}).values() for b in p.get("bits", []) if isinstance(b, int)]
        self.next = max(used, default=1) + 1
        self.cache: dict = {}

    def bits(self, n: int, name: str) -> list[int]:
        out = list(range(self.next, self.next + n))
        self.next += n
        self.mod["netnames"][name] = {"hide_name": 1, "bits": out, "attributes": {}}
        return out

    def cell(self, name: str, ctype: str, params: dict, ins: dict, outs: dict, src: str):
        if name in self.mod["cells"]:
            raise AssertionError(f"cell {name} exists")
        self.mod["cells"][name] = {
            "hide_name": 1, "type": ctype, "parameters": params, "attributes": {"src": src},
            "port_directions": {**{k: "input" for k in ins}, **{k: "output" for k in outs}},
            "connections": {**ins, **outs}}

    def lut(self, inputs: list, fn, name: str, src: str, out=None):
        """The bit ``fn(values of inputs)`` (a list of 0/1 in ``inputs`` order): a constant, an input
        itself, or a ``$lut`` cell over the distinct non-constant inputs it depends on. With ``out``
        (an existing net the design reads), a cell drives that net instead."""
        nets = []
        for x in inputs:
            if x not in _CONSTS and x not in nets:
                nets.append(x)

        def f(pattern: int, over: list) -> int:
            vals = [(1 if x == "1" else 0) if x in _CONSTS else (pattern >> over.index(x)) & 1 for x in inputs]
            return 1 if fn(vals) else 0

        for x in list(nets):             # drop the inputs the function does not depend on
            rest = [n for n in nets if n != x]
            if all(f(q, rest + [x]) == f(q | 1 << len(rest), rest + [x]) for q in range(1 << len(rest))):
                nets = rest
        table = [f(q, nets) for q in range(1 << len(nets))]
        if out is None and not nets:
            return str(table[0])
        if out is None and len(nets) == 1 and table == [0, 1]:
            return nets[0]
        key = (tuple(nets), tuple(table))
        if out is None and key in self.cache:
            return self.cache[key]
        if not nets:                     # a constant onto an existing net: a LUT of a constant input
            nets, table = ["0"], [table[0], table[0]]
        y = out if out is not None else self.bits(1, f"{name}$y")[0]
        self.cell(name, "$lut", {"WIDTH": _word_param(32, len(nets)),
                                 "LUT": "".join(str(v) for v in reversed(table))},
                  {"A": nets}, {"Y": [y]}, src)
        if out is None:
            self.cache[key] = y
        return y

    def eq(self, a: list, b: list, name: str, src: str):
        if a == b:
            return "1"
        if all(x in _CONSTS for x in a + b):
            return "1" if [x == "1" for x in a] == [x == "1" for x in b] else "0"
        (y,) = self.bits(1, f"{name}$y")
        self.cell(name, "$eq", {"A_SIGNED": _word_param(32), "A_WIDTH": _word_param(32, len(a)),
                                "B_SIGNED": _word_param(32), "B_WIDTH": _word_param(32, len(b)),
                                "Y_WIDTH": _word_param(32, 1)}, {"A": a, "B": b}, {"Y": [y]}, src)
        return y

    def any(self, bits: list, name: str, src: str):
        if "1" in bits:
            return "1"
        nets = sorted({b for b in bits if b not in _CONSTS})
        if len(nets) <= 1:
            return nets[0] if nets else "0"
        (y,) = self.bits(1, f"{name}$y")
        self.cell(name, "$reduce_or", {"A_SIGNED": _word_param(32), "A_WIDTH": _word_param(32, len(nets)),
                                       "Y_WIDTH": _word_param(32, 1)}, {"A": nets}, {"Y": [y]}, src)
        return y


def _needs_rewrite(cell: dict) -> bool:
    p, c = cell.get("parameters", {}), cell.get("connections", {})
    nwr, width = _int(p.get("WR_PORTS", 0)), _int(p.get("WIDTH", 0))
    if nwr == 0:
        return False
    if nwr > 1:
        return True
    return len(set(map(str, c.get("WR_EN", [])[:width]))) > 1


def _rewritable(cell: dict) -> bool:
    """Only the compile flows' memories: asynchronous reads, clocked narrow writes."""
    p = cell["parameters"]
    nrd, nwr = _int(p["RD_PORTS"]), _int(p["WR_PORTS"])
    return (not any(_flags(p.get("RD_CLK_ENABLE", "0"), nrd)) and all(_flags(p.get("WR_CLK_ENABLE", "1"), nwr))
            and not any(_flags(p.get("RD_WIDE_CONTINUATION", "0"), nrd))
            and not any(_flags(p.get("WR_WIDE_CONTINUATION", "0"), nwr)))


def split_write_ports(text: str) -> str:
    """The Yosys JSON ``text`` with every memory of several write ports or per-bit enables
    rewritten (module docstring); ``text`` itself, byte for byte, when there is none.

    Raises UnsupportedDesignError for a memory with more than ``MAX_WRITE_PORTS`` write ports."""
    doc = json.loads(text)
    changed = False
    for mod in doc.get("modules", {}).values():
        if not isinstance(mod, dict) or not isinstance(mod.get("cells"), dict):
            continue
        todo = [name for name, c in sorted(mod["cells"].items())
                if isinstance(c, dict) and c.get("type") == "$mem_v2" and _needs_rewrite(c) and _rewritable(c)]
        if not todo:
            continue
        mod.setdefault("netnames", {})
        b = _Builder(mod)
        for name in todo:
            _rewrite(b, name, mod["cells"].pop(name))
        changed = True
    return json.dumps(doc, indent=1, sort_keys=True) + "\n" if changed else text


def _rewrite(b: _Builder, cname: str, cell: dict):
    p, c = cell["parameters"], cell["connections"]
    src = str(cell.get("attributes", {}).get("src", ""))
    memid = str(p.get("MEMID", cname)).rstrip(" ").lstrip("\\")
    width, size, abits = _int(p["WIDTH"]), _int(p["SIZE"]), _int(p["ABITS"])
    nrd, nwr = _int(p["RD_PORTS"]), _int(p["WR_PORTS"])
    if nwr > MAX_WRITE_PORTS:
        raise UnsupportedDesignError([Problem(
            f"memory {memid} ({nwr} write ports)", src,
            f"the compiler rewrites a memory of at most {MAX_WRITE_PORTS} write ports into XOR banks; "
            f"split the memory (e.g. by address range or by port pairs) so each part has at most "
            f"{MAX_WRITE_PORTS} write ports")])

    def sl(port, i, w):
        return list(c[port][i * w:(i + 1) * w])

    ports = [(sl("WR_ADDR", i, abits), sl("WR_DATA", i, width), sl("WR_EN", i, width), c["WR_CLK"][i],
              _flags(p.get("WR_CLK_POLARITY", "1" * nwr), nwr)[i]) for i in range(nwr)]
    reads = [(sl("RD_ADDR", i, abits), sl("RD_DATA", i, width)) for i in range(nrd)]
    uniform = all(len(set(map(str, en))) == 1 for _, _, en, _, _ in ports)
    tag = f"{memid}$wr"

    # Collisions: port i's bit is dropped where a later port j writes the same address and bit.
    match = {(i, j): b.eq(ports[i][0], ports[j][0], f"{tag}{i}$eq{j}", src)
             for i in range(nwr) for j in range(i + 1, nwr)}
    kept = []                              # kept[i][bit]: port i writes this bit
    for i, (_, _, en, _, _) in enumerate(ports):
        later = list(range(i + 1, nwr))
        kept.append([b.lut([en[k]] + [ports[j][2][k] for j in later] + [match[i, j] for j in later],
                           lambda v, n=len(later): v[0] and not any(v[1 + t] and v[1 + n + t] for t in range(n)),
                           f"{tag}{i}$en{k}", src) for k in range(width)])

    # Each bank's reads: the memory's read ports, then the other ports' addresses (their XOR), then
    # its own port's address where its enables differ per bit (the word it keeps).
    nbank = nwr
    bank_names = [memid] if nbank == 1 else [f"{memid}$bank{q}" for q in range(nbank)]
    addrs = [[] for _ in range(nbank)]

    def read(q, addr):
        if tuple(addr) not in addrs[q]:
            addrs[q].append(tuple(addr))
        return addrs[q].index(tuple(addr))

    for q in range(nbank):               # one bank read per read port (not shared: its own nets)
        addrs[q] += [tuple(a) for a, _ in reads]
    side = {(q, i): read(q, ports[i][0]) for q in range(nbank) for i in range(nwr)
            if q != i or not uniform}
    data = [[list(reads[k][1]) if nbank == 1 and k < nrd else b.bits(width, f"{bank_names[q]}$rd{k}")
             for k in range(len(addrs[q]))] for q in range(nbank)]

    # The memory's reads: the XOR of the banks' words (a single bank's read is the port itself).
    if nbank > 1:
        for r, (_, out) in enumerate(reads):
            for bit in range(width):
                b.lut([data[q][r][bit] for q in range(nbank)], lambda v: sum(v) % 2,
                      f"{memid}$rd{r}$xor{bit}", src, out=out[bit])

    # Each bank's write: port q's data xor the other banks' words at its address, whole words.
    for q, (addr, wdata, _, clk, pol) in enumerate(ports):
        others = [j for j in range(nbank) if j != q]
        word, en_bits = [], kept[q]
        for bit in range(width):
            xs = [data[j][side[j, q]][bit] for j in others]
            if uniform:
                word.append(b.lut([wdata[bit]] + xs, lambda v: sum(v) % 2, f"{bank_names[q]}$wd{bit}", src))
            else:
                own = data[q][side[q, q]][bit]
                word.append(b.lut([en_bits[bit], wdata[bit]] + xs + [own],
                                  lambda v: sum(v[1:-1]) % 2 if v[0] else v[-1], f"{bank_names[q]}$wd{bit}", src))
        we = en_bits[0] if uniform else b.any(en_bits, f"{bank_names[q]}$we", src)
        n = len(addrs[q])
        init = p.get("INIT", "0") if q == 0 else _word_param(size * width)
        b.cell(bank_names[q] if nbank > 1 else cname, "$mem_v2", {
            "ABITS": p["ABITS"], "INIT": init, "MEMID": "\\" + bank_names[q], "OFFSET": p.get("OFFSET", _word_param(32)),
            "RD_ARST_VALUE": "x" * (n * width), "RD_CE_OVER_SRST": _word_param(n),
            "RD_CLK_ENABLE": _word_param(n), "RD_CLK_POLARITY": "1" * n,
            "RD_COLLISION_X_MASK": _word_param(n), "RD_INIT_VALUE": "x" * (n * width),
            "RD_PORTS": _word_param(32, n), "RD_SRST_VALUE": "x" * (n * width),
            "RD_TRANSPARENCY_MASK": _word_param(n), "RD_WIDE_CONTINUATION": _word_param(n),
            "SIZE": p["SIZE"], "WIDTH": p["WIDTH"], "WR_CLK_ENABLE": "1", "WR_CLK_POLARITY": str(pol),
            "WR_PORTS": _word_param(32, 1), "WR_PRIORITY_MASK": "0", "WR_WIDE_CONTINUATION": "0"},
            {"RD_ADDR": [x for a in addrs[q] for x in a], "RD_ARST": ["0"] * n, "RD_CLK": ["x"] * n,
             "RD_EN": ["1"] * n, "RD_SRST": ["0"] * n, "WR_ADDR": list(addr), "WR_CLK": [clk],
             "WR_DATA": word, "WR_EN": [we] * width},
            {"RD_DATA": [x for d in data[q] for x in d]}, src)
        b.mod["cells"][bank_names[q] if nbank > 1 else cname]["hide_name"] = 0

