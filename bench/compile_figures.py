"""Compiled-model figures of the example designs: the compiler's default flow (``macro``: adders and
comparisons as threshold-circuit macros, residual pairs reused) against the plain 4-LUT flow in the
same run, each at its fewest layers (logic depth + 1). Per design: depth, hidden size, FFN neurons,
tokens per cycle, parameters and non-zeros, and the teacher-forced verification speed (tokens/s of
the macro model checked against the netlist simulator). Prints a table; asserts nothing.

    .venv/bin/python bench/compile_figures.py [--designs counter,alu] [--cycles 20] [--no-lut]
    .venv/bin/python bench/compile_figures.py --macros     # the arithmetic macros alone, ~2 min

``--macros`` prints, per arithmetic macro (adder, multipliers, multiply-add, the dividers: quotient and
remainder, truncated and floored, unsigned and signed) and width 4, 8, 16, 32, the threshold
circuit's depth (FFN levels) and neurons (each level's equal neurons merged, as the compiler lowers
them), built straight from ``netlist2tf.compile.macros`` / ``netlist2tf.compile.divider`` on a one-cell netlist; a
divider wider than the one-layer macro takes (8 bits, 9 signed) is the long division in base 16 and
is marked so.
"""

import argparse
import time

import torch

from netlist2tf.driver import compile_netlist
from netlist2tf.netlist import Cell
from netlist2tf.compile import fits as divider_fits
from netlist2tf.compile import DIV_CELLS, expand
from netlist2tf.frontend import synthesize
from netlist2tf.netlist import parse_netlist
from netlist2tf.compile import CompileSettings, standalone_layer_types
from netlist2tf.compile import unit_cost
from netlist2tf.compile.schedule import schedule
from netlist2tf.compile import Target
from netlist2tf.run import verify_teacher_forced

DESIGNS = {"counter": "hdl.examples.counter:Counter", "lfsr": "hdl.examples.lfsr:LFSR",
           "multiplier": "hdl.examples.multiplier:PipelinedMultiplier", "fifo": "hdl.examples.fifo:FIFO",
           "regfile": "hdl.examples.regfile:RegisterFile", "alu": "hdl.examples.alu:ALU",
           # issue 22's constructs: ROMs, several write ports, per-bit enables
           "rom16x8": "tests/designs/constructs.py:Rom16x8", "rom1024x16": "tests/designs/constructs.py:Rom1024x16",
           "caserom": "tests/designs/constructs.py:CaseRom", "twowrite": "tests/designs/unusual.py:TwoWritePorts",
           "threewrite": "tests/designs/constructs.py:ThreeWritePorts",
           "byteenable": "tests/designs/constructs.py:ByteEnableRam",
           # the ROMs held the other way (--roms deltanet: DeltaNet banks the prompt preloads)
           "rom16x8-deltanet": "tests/designs/constructs.py:Rom16x8",
           "rom1024x16-deltanet": "tests/designs/constructs.py:Rom1024x16"}


def compile_at_depth(design: str, flow: str, roms: str = "auto"):
    nl = parse_netlist(synthesize(design, flow, "build").json_text)
    probe = schedule(nl, Target(1 << 30, 1 << 30, standalone_layer_types(80), 1, 1, 64, 64, 1, 1, 16, name="probe"))
    layers = max(3, probe.depth + 1)
    t0 = time.perf_counter()
    compiled = compile_netlist(nl, CompileSettings(layers=layers, roms=roms))
    return nl, compiled, time.perf_counter() - t0


def macro_figures(cell: Cell, first_net: int) -> tuple[int, int]:
    """(depth, neurons) of one macro cell with every output bit used: each function at the level
    after its deepest input (the cell's inputs at level 0), neurons merged per level."""
    outs = {n for _, sig in cell.outputs for n in sig}
    fns, _, _ = expand(cell, first_net, outs)
    level, by_level = {}, {}
    for f in fns:
        level[f.out] = 1 + max((level.get(n, 0) for n in f.support), default=0)
        by_level.setdefault(level[f.out], []).append(f)
    return max(level.values()), sum(unit_cost(v) for v in by_level.values())


def macro_table() -> None:
    def cell(kind, w, signed=False):
        a, b = tuple(range(3, 3 + w)), tuple(range(3 + w, 3 + 2 * w))
        if kind == "add":
            y = tuple(range(3 + 2 * w, 4 + 3 * w))
            return Cell("add", "$alu", (("A_SIGNED", 0), ("A_WIDTH", w), ("B_SIGNED", 0), ("B_WIDTH", w),
                                        ("Y_WIDTH", w + 1)), (("A", a), ("B", b), ("BI", (0,)), ("CI", (0,))),
                        (("Y", y),), ""), 4 + 3 * w
        yw = w if kind == "mul-low" else 2 * w
        y = tuple(range(3 + 2 * w, 3 + 2 * w + yw))
        if kind == "mac":          # a * b + c, c as wide as the product
            c = tuple(range(3 + 2 * w + yw, 3 + 2 * w + 2 * yw))
            return Cell("mac", "$macc_v2", (("ADDEND_NEGATED", 0), ("A_SIGNED", 0), ("A_WIDTHS", w), ("B_SIGNED", 0),
                                            ("B_WIDTHS", w), ("C_SIGNED", 0), ("C_WIDTHS", yw), ("NADDENDS", 1),
                                            ("NPRODUCTS", 1), ("PRODUCT_NEGATED", 0), ("Y_WIDTH", yw)),
                        (("A", a), ("B", b), ("C", c)), (("Y", y),), ""), 3 + 2 * w + 2 * yw
        return Cell("mul", "$mul", (("A_SIGNED", int(signed)), ("A_WIDTH", w), ("B_SIGNED", int(signed)),
                                    ("B_WIDTH", w), ("Y_WIDTH", yw)), (("A", a), ("B", b)), (("Y", y),), ""), \
            3 + 2 * w + yw

    def div(kind, w, signed):
        a, b, y = (tuple(range(3 + k * w, 3 + (k + 1) * w)) for k in range(3))
        return Cell(kind, kind, (("A_SIGNED", int(signed)), ("A_WIDTH", w), ("B_SIGNED", int(signed)),
                                 ("B_WIDTH", w), ("Y_WIDTH", w)), (("A", a), ("B", b)), (("Y", y),), ""), 3 + 3 * w

    def figures(kind, w, signed):
        if kind in DIV_CELLS:
            c = div(kind, w, signed)
            return (*macro_figures(*c), "one layer" if divider_fits(c[0]) else "long division")
        return macro_figures(*cell(kind, w, signed))

    kinds = [("adder a + b (w + 1 bits)", "add", False), ("multiplier w x w -> 2w", "mul", False),
             ("signed multiplier w x w -> 2w", "mul", True), ("multiplier w x w -> w (low half)", "mul-low", False),
             ("multiply-add a * b + c -> 2w", "mac", False),
             ("quotient a / b ($div)", "$div", False), ("signed quotient ($div)", "$div", True),
             ("remainder a % b ($mod)", "$mod", False), ("signed remainder ($mod)", "$mod", True),
             ("floored signed quotient ($divfloor)", "$divfloor", True),
             ("floored signed remainder ($modfloor)", "$modfloor", True)]
    widths = (4, 8, 16, 32)
    print("| macro | " + " | ".join(f"w = {w}: levels, neurons" for w in widths) + " |")
    print("| --- |" + " ---: |" * len(widths))
    for title, kind, signed in kinds:
        got = [figures(kind, w, signed) for w in widths]
        print(f"| {title} | " + " | ".join(f"{f[0]}, {f[1]:,}" + (" (long division)" if f[2:] == ("long division",) else "")
                                          for f in got) + " |", flush=True)
    print("\n(a divider: the one-layer thermometer macro up to 8 bits (9 signed), long division in base 16 "
          "above (netlist2tf/compile/divider.py))")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--designs", default=",".join(DESIGNS))
    ap.add_argument("--cycles", type=int, default=20, help="teacher-forced cycles timed per design")
    ap.add_argument("--no-lut", action="store_true", help="skip the LUT-flow comparison")
    ap.add_argument("--macros", action="store_true", help="only the arithmetic macros' depth and neurons")
    args = ap.parse_args()
    if args.macros:
        macro_table()
        return
    torch.set_num_threads(1)
    rows = []
    for key in args.designs.split(","):
        design = DESIGNS[key]
        for flow in ("macro",) if args.no_lut else ("macro", "lut"):
            nl, c, secs = compile_at_depth(design, flow, "deltanet" if key.endswith("-deltanet") else "auto")
            s = c.stats
            speed = ""
            if flow == "macro" and args.cycles:
                t0 = time.perf_counter()
                div, checked = verify_teacher_forced(c.model, c.protocol, nl, c.initial_registers,
                                                     args.cycles, 1, 0, c.initial_memory)
                dt = time.perf_counter() - t0
                speed = "DIVERGED" if div else f"{args.cycles * s['tokens_per_cycle'] / dt:,.0f}"
            rows.append((key, flow, s["depth"], s["layers"], s["hidden_size"], max(s["neurons_per_layer"]),
                         sum(s["neurons_per_layer"]), f"{s['tokens_per_cycle']} ({s['generated_tokens_per_cycle']})",
                         f"{s['parameters'] / 1e6:.2f} M", f"{s['nonzero'] / 1e6:.2f} M", f"{secs:.1f}", speed))
            print(" | ".join(str(v) for v in rows[-1]), flush=True)
    head = ("design", "flow", "depth", "layers", "hidden", "max neurons/layer", "neurons", "tokens/cycle (gen)",
            "parameters", "non-zero", "compile s", "verify tok/s")
    print("\n| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
    for r in rows:
        print("| " + " | ".join(str(v) for v in r) + " |")


if __name__ == "__main__":
    main()
