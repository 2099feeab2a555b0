"""Sums of shifted products fused into one multiply-add cell.

Yosys's ``alumacc`` merges ``a * b + c * d + e`` into one ``$macc_v2`` cell, which the compiler
builds as one threshold multiplier (``macros.expand_mul``: partial products, counter levels, one
adder): about 6 levels for 32 x 32. But ``wreduce`` first strips constant zero low bits from an
operand, so ``a * b + c * (d << 16)`` becomes ``a * b + ((c * d) << 16)``: the inner product a
cell of its own whose output is a shifted *addend* of the outer one, and the two cells chained
cost two adders' depth (12 levels instead of 6). This pass (run on the compile flows' Yosys JSON
by ``frontend.synthesize``, like ``multiport.py``) undoes that: a ``$mul`` or ``$macc_v2`` cell
whose output is read only as an addend of one other ``$macc_v2``, as the addend's bits above k
constant zeros, becomes products and addends of that cell, each operand shifted by k (k constant
zero low bits, which cost no partial products).

The value is unchanged: the addend is ``2**k * (S mod 2**m)`` (S the inner cell's exact sum, m the
bits the addend takes), the fused terms add ``2**k * S``; the two agree modulo the outer cell's
``2**W`` when ``k + m >= W`` or when S's range (from its operands' widths and signedness) fits in m
bits as the addend reads them (unsigned: ``0 <= S < 2**m``; signed: ``-2**(m-1) <= S < 2**(m-1)``).
Otherwise the cells stay as they are. Checked against Python's integers on random operands through
the netlist simulator (tests/compile/test_multiplier.py).
"""

import json

_CONSTS = ("0", "1", "x", "z")
MACC_TYPES = ("$mul", "$macc_v2")


def _bits(v) -> str:
    return v if isinstance(v, str) else format(int(v), "b")


def _field(v, i: int, width: int) -> int:
    """Field i (``width`` bits, field 0 the least significant) of a Yosys bit-string parameter."""
    s = _bits(v).translate(str.maketrans("xz", "00")) or "0"
    return int(s, 2) >> (i * width) & ((1 << width) - 1)


def _terms(cell: dict):
    """(products, addends) of a ``$mul``/``$macc_v2`` JSON cell: products as (A bits, B bits,
    signed, negated), addends as (C bits, signed, negated) -- ``ir.Cell.products_and_addends``'s
    reading of the same parameters."""
    p, conn = cell.get("parameters", {}), cell["connections"]
    if cell["type"] == "$mul":
        signed = bool(_field(p.get("A_SIGNED", 0), 0, 1) and _field(p.get("B_SIGNED", 0), 0, 1))
        return [(list(conn["A"]), list(conn["B"]), signed, False)], []
    products, addends = [], []
    A, B, C = (list(conn.get(k, [])) for k in "ABC")
    ai = bi = ci = 0
    for i in range(_field(p.get("NPRODUCTS", 0), 0, 32)):
        aw, bw = _field(p["A_WIDTHS"], i, 16), _field(p["B_WIDTHS"], i, 16)
        signed = bool(_field(p.get("A_SIGNED", 0), i, 1) and _field(p.get("B_SIGNED", 0), i, 1))
        products.append((A[ai:ai + aw], B[bi:bi + bw], signed, bool(_field(p.get("PRODUCT_NEGATED", 0), i, 1))))
        ai, bi = ai + aw, bi + bw
    for j in range(_field(p.get("NADDENDS", 0), 0, 32)):
        cw = _field(p["C_WIDTHS"], j, 16)
        addends.append((C[ci:ci + cw], bool(_field(p.get("C_SIGNED", 0), j, 1)),
                        bool(_field(p.get("ADDEND_NEGATED", 0), j, 1))))
        ci += cw
    return products, addends


def _range(bits: list, signed: bool) -> tuple[int, int]:
    n = len(bits)
    if n == 0:
        return 0, 0
    return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed else (0, (1 << n) - 1)


def _sum_range(products, addends) -> tuple[int, int]:
    """The range of a cell's exact (unwrapped) sum, from its operands' widths and signedness."""
    lo = hi = 0
    for a, b, signed, neg in products:
        (a0, a1), (b0, b1) = _range(a, signed), _range(b, signed)
        corners = [x * y for x in (a0, a1) for y in (b0, b1)]
        p0, p1 = min(corners), max(corners)
        lo, hi = (lo - p1, hi - p0) if neg else (lo + p0, hi + p1)
    for c, signed, neg in addends:
        c0, c1 = _range(c, signed)
        lo, hi = (lo - c1, hi - c0) if neg else (lo + c0, hi + c1)
    return lo, hi


def _params(products, addends, y_width: int) -> tuple[dict, dict]:
    """A ``$macc_v2`` cell's parameters and input connections for these terms."""
    def word(values, width):
        return "".join(format(v, f"0{width}b") for v in reversed(values)) or "0"

    def flags(values):
        return "".join("1" if v else "0" for v in reversed(values)) or "0"

    params = {
        "NPRODUCTS": format(len(products), "032b"), "NADDENDS": format(len(addends), "032b"),
        "A_WIDTHS": word([len(a) for a, _, _, _ in products], 16),
        "B_WIDTHS": word([len(b) for _, b, _, _ in products], 16),
        "A_SIGNED": flags([s for _, _, s, _ in products]), "B_SIGNED": flags([s for _, _, s, _ in products]),
        "PRODUCT_NEGATED": flags([n for _, _, _, n in products]),
        "C_WIDTHS": word([len(c) for c, _, _ in addends], 16),
        "C_SIGNED": flags([s for _, s, _ in addends]), "ADDEND_NEGATED": flags([n for _, _, n in addends]),
        "Y_WIDTH": format(y_width, "032b"),
    }
    conns = {"A": [x for a, _, _, _ in products for x in a], "B": [x for _, b, _, _ in products for x in b],
             "C": [x for c, _, _ in addends for x in c]}
    return params, conns


def _readers(mod: dict) -> dict:
    """{bit: [(cell name or None for a module port, port name)]} for every bit read in ``mod``."""
    readers: dict = {}
    for name, c in mod["cells"].items():
        dirs = c.get("port_directions", {})
        for port, sig in c.get("connections", {}).items():
            if dirs.get(port, "input") != "output":
                for x in sig:
                    if isinstance(x, int):
                        readers.setdefault(x, []).append((name, port))
    for pname, p in mod.get("ports", {}).items():
        if p.get("direction") != "input":
            for x in p.get("bits", []):
                if isinstance(x, int):
                    readers.setdefault(x, []).append((None, pname))
    return readers


def _fuse_one(mod: dict) -> bool:
    """Fuse one inner cell into its reader; True if one was fused."""
    cells = mod["cells"]
    readers = _readers(mod)
    for inner_name in sorted(cells):
        inner = cells[inner_name]
        if inner.get("type") not in MACC_TYPES:
            continue
        Y = inner["connections"]["Y"]
        users = {u for x in Y if isinstance(x, int) for u in readers.get(x, [])}
        if len(users) != 1:
            continue
        outer_name, port = next(iter(users))
        if outer_name is None or outer_name == inner_name or port != "C" or cells[outer_name].get("type") != "$macc_v2":
            continue
        outer = cells[outer_name]
        products, addends = _terms(outer)
        W = _field(outer["parameters"]["Y_WIDTH"], 0, 32)
        s_lo, s_hi = _sum_range(*_terms(inner))
        y_set = {x for x in Y if isinstance(x, int)}
        for j, (c, signed, neg) in enumerate(addends):
            if not any(x in y_set for x in c):
                continue
            k = 0
            while k < len(c) and c[k] == "0":
                k += 1
            m = len(c) - k
            if c[k:] != Y[:m] or m == 0:
                break                           # the addend is not the inner cell's low bits above zeros
            lo, hi = (-(1 << (m - 1)), (1 << (m - 1)) - 1) if signed else (0, (1 << m) - 1)
            if not (k + m >= W or lo <= s_lo and s_hi <= hi):
                break
            if sum(1 for cc, _, _ in addends if any(x in y_set for x in cc)) != 1:
                break
            in_products, in_addends = _terms(inner)
            zeros = ["0"] * k
            new_products = products + [(zeros + a, b, s, n ^ neg) for a, b, s, n in in_products]
            new_addends = addends[:j] + addends[j + 1:] + [(zeros + cc, s, n ^ neg) for cc, s, n in in_addends]
            params, conns = _params(new_products, new_addends, W)
            outer["parameters"] = params
            outer["connections"] = {**conns, "Y": outer["connections"]["Y"]}
            outer["port_directions"] = {"A": "input", "B": "input", "C": "input", "Y": "output"}
            del cells[inner_name]
            return True
    return False


def fuse_maccs(text: str) -> str:
    """The Yosys JSON ``text`` with every fusable multiply-add chain fused (module docstring);
    ``text`` itself, byte for byte, when there is none."""
    doc = json.loads(text)
    changed = False
    for mod in doc.get("modules", {}).values():
        if not isinstance(mod, dict) or not isinstance(mod.get("cells"), dict):
            continue
        while _fuse_one(mod):
            changed = True
    return json.dumps(doc, indent=1) + "\n" if changed else text   # Yosys's order kept (ports in the design's order)
