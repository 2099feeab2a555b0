"""Compiled-model figures of the example designs: the compiler's default flow (``macro``: adders and
comparisons as threshold-circuit macros, residual pairs reused) against the plain 4-LUT flow in the
same run, each at its fewest layers (logic depth + 1). Per design: depth, hidden size, FFN neurons,
tokens per cycle, parameters and non-zeros, and the teacher-forced verification speed (tokens/s of
the macro model checked against the netlist simulator). Prints a table; asserts nothing.

    .venv/bin/python bench/compile_figures.py [--designs counter,alu] [--cycles 20] [--no-lut]
"""

import argparse
import time

import torch

from netlist2tf.driver import compile_netlist
from netlist2tf.frontend import synthesize
from netlist2tf.ir import parse_netlist
from netlist2tf.plan import CompileSettings, standalone_layer_types
from netlist2tf.schedule import schedule
from netlist2tf.target import Target
from netlist2tf.verify import verify_teacher_forced

DESIGNS = {"counter": "hdl.examples.counter:Counter", "lfsr": "hdl.examples.lfsr:LFSR",
           "multiplier": "hdl.examples.multiplier:PipelinedMultiplier", "fifo": "hdl.examples.fifo:FIFO",
           "regfile": "hdl.examples.regfile:RegisterFile", "alu": "hdl.examples.alu:ALU"}


def compile_at_depth(design: str, flow: str):
    nl = parse_netlist(synthesize(design, flow, "build").json_text)
    probe = schedule(nl, Target(1 << 30, 1 << 30, standalone_layer_types(80), 1, 1, 64, 64, 1, 1, 16, name="probe"))
    layers = max(3, probe.depth + 1)
    t0 = time.perf_counter()
    compiled = compile_netlist(nl, CompileSettings(layers=layers))
    return nl, compiled, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--designs", default=",".join(DESIGNS))
    ap.add_argument("--cycles", type=int, default=20, help="teacher-forced cycles timed per design")
    ap.add_argument("--no-lut", action="store_true", help="skip the LUT-flow comparison")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for key in args.designs.split(","):
        design = DESIGNS[key]
        for flow in ("macro",) if args.no_lut else ("macro", "lut"):
            nl, c, secs = compile_at_depth(design, flow)
            s = c.stats
            speed = ""
            if flow == "macro" and args.cycles:
                t0 = time.perf_counter()
                div, checked = verify_teacher_forced(c.model, c.protocol, nl, c.initial_registers,
                                                     args.cycles, 1, 0, c.initial_memory)
                dt = time.perf_counter() - t0
                speed = "DIVERGED" if div else f"{args.cycles * c.protocol.tokens_per_cycle / dt:,.0f}"
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
