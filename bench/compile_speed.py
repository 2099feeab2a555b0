"""How long the compiler takes, stage by stage: the z3 proofs, scheduling and planning, writing the weights,
writing the checkpoint, for the CPU (hdl/rv32 with the model engine's settings, 64 KiB), the example
designs and the day-one user designs of bench/user_designs.py and bench/pwm.v, from a warm synthesis
cache (Yosys is not timed). Prints one row per design and the sha256 of the checkpoint's
model.safetensors, so two versions of the compiler can be compared for speed and for byte-identical
weights. Asserts nothing.

    .venv/bin/python bench/compile_speed.py                       # the CPU and every example design
    .venv/bin/python bench/compile_speed.py --designs cpu         # one: cpu, counter, lfsr, multiplier, ...
    .venv/bin/python bench/compile_speed.py --designs user --whole 3

``--whole N``: instead, the whole command a user types (``netlist2tf compile DESIGN --out DIR --force``
with the compiler's defaults; the CPU with the model engine's flags), run N times after a warm-up in
a fresh process each, from a warm synthesis cache: min and median wall seconds and the generated
tokens per cycle the compile prints ("user": every user design; "examples": every example).
``--fresh-plans`` empties the plan cache before each run (a rebuild after an edit plans again; without
it, the runs after the warm-up reuse the plan, as a rebuild of an unchanged netlist does).

To time another checkout of the compiler with this script: ``PYTHONPATH=OTHER .venv/bin/python
bench/compile_speed.py`` from that checkout's root (the script uses only public entry points).
"""

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

EXAMPLES = {"counter": ("hdl.examples.counter:Counter", 4), "lfsr": ("hdl.examples.lfsr:LFSR", 4),
            "multiplier": ("hdl.examples.multiplier:PipelinedMultiplier", 8), "fifo": ("hdl.examples.fifo:FIFO", 7),
            "regfile": ("hdl.examples.regfile:RegisterFile", 3), "alu": ("hdl.examples.alu:ALU", 11)}
USER = {"uart": ("bench/user_designs.py:UartTx", 11), "crc32": ("bench/user_designs.py:Crc32", 11),
        "gcd": ("bench/user_designs.py:Gcd", 11), "acccpu": ("bench/user_designs.py:AccumulatorCpu", 11),
        "bytelane": ("bench/user_designs.py:ByteLaneRam", 11), "acc96": ("bench/user_designs.py:Acc96", 11),
        "regarray": ("bench/user_designs.py:RegArray", 11), "wide1k": ("bench/user_designs.py:Wide1k", 11),
        "pwm": ("bench/pwm.v", 11)}
EXAMPLES.update(USER)
# the model engine's CPU as a user compiles it from the command line (docs/results.md "Compiling")
CPU_ARGS = ["hdl.rv32:Core(ram_size=65536, mul=True, div=True, zba=True, reset_pc=0)", "--flow", "macro6",
            "--layers", "11", "--chunk-bits", "8", "--head-dim", "256", "--keep-outputs",
            "halt,halt_kind,halt_cause,pc_mid_emit", "--gated", "m_busy:m_hi,m_lo,m_op,m_count,m_sa,m_sb",
            "--gated", "m_pend:m_x", "--gated", "halted:why,reported", "--gated", "pc_oob:pc_hi", "--gated",
            "halt:halt_kind,halt_cause", "--held", "pc_mid_emit::pc_mid", "--gated-writes", "ram,regs",
            "--folded-writes", "ram,regs", "--economy", "off"]
STAGES = ("proving", "scheduling", "writing the weights", "writing the checkpoint")


def compile_timed(design: str):
    """(cells, {stage: seconds}, sha256 of model.safetensors) of one compile into a temporary folder."""
    from netlist2tf.compile import CompileSettings
    from netlist2tf.driver import compile_netlist
    from netlist2tf.frontend import synthesize
    from netlist2tf.netlist import parse_netlist

    if design == "cpu":
        from cpu.model_engine import FLOW, MODEL_RAM_SIZE, model_settings
        from cpu.netlist_engine import core_design

        name, flow, settings = core_design(MODEL_RAM_SIZE), FLOW, model_settings()
    else:
        name, layers = EXAMPLES[design]
        flow, settings = "macro", CompileSettings(layers=layers)
    result = synthesize(name, flow=flow)
    netlist = parse_netlist(result.json_text, str(result.json_path))
    times, current = {}, [None, time.perf_counter()]

    def step(what):
        now = time.perf_counter()
        if current[0] is not None:
            times[current[0]] = times.get(current[0], 0.0) + now - current[1]
        current[:] = [next((s for s in STAGES if what.startswith(s)), what), now]

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ckpt"
        compile_netlist(netlist, settings, log=lambda m: None, step=step, out=out, netlist_json=result.json_text,
                        record={"design": name, "flow": flow, **settings.record()})
        step("done")
        digest = hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    return len(netlist.cells), times, digest


def whole_timed(design: str, runs: int, fresh_plans: bool = False):
    """(sorted wall seconds of ``runs`` whole commands after one warm-up, the tokens per cycle it printed);
    ``fresh_plans``: the plan cache (BUILD/plans/) emptied before each run, as after an edit."""
    import re
    import shutil
    import subprocess

    from netlist2tf.common import build_dir

    args = CPU_ARGS if design == "cpu" else [EXAMPLES[design][0]]
    walls, err = [], ""
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs + 1):
            if fresh_plans:
                shutil.rmtree(build_dir() / "plans", ignore_errors=True)
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "netlist2tf.cli", "compile", *args, "--out",
                                   str(Path(tmp) / "ckpt"), "--force"], capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"compile_speed: {design} failed: {done.stderr.strip().splitlines()[-1]}")
            if i:
                walls.append(time.perf_counter() - t0)
            err = done.stderr
    tokens = next((m.group(0) for m in re.finditer(r"[\d.]+ -> [\d.]+ generated tokens per cycle", err)),
                  next((m.group(0) for m in re.finditer(r"\d+ tokens per cycle \(\d+ generated\)", err)), ""))
    return sorted(walls), tokens


def main(argv=None):
    from netlist2tf.common import drop_kernel_notes

    drop_kernel_notes()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--designs", default="cpu," + ",".join(EXAMPLES),
                    help="comma-separated: cpu, user, examples and/or " + ", ".join(EXAMPLES))
    ap.add_argument("--whole", type=int, metavar="N", help="time the whole command N times (see above)")
    ap.add_argument("--fresh-plans", action="store_true",
                    help="with --whole: empty the plan cache (BUILD/plans/) before each run, as an edit would")
    args = ap.parse_args(argv)
    groups = {"user": list(USER), "examples": [d for d in EXAMPLES if d not in USER]}
    names = [n for d in args.designs.split(",") if d for n in groups.get(d, [d])]
    bad = [d for d in names if d != "cpu" and d not in EXAMPLES]
    if bad:
        print(f"compile_speed: unknown design {bad[0]!r}; choose from cpu, {', '.join(EXAMPLES)}", file=sys.stderr)
        return 2
    if args.whole:
        import statistics

        print(f"{'design':<11} {'min s':>7} {'median s':>9}  tokens per cycle")
        for d in names:
            walls, tokens = whole_timed(d, args.whole, args.fresh_plans)
            print(f"{d:<11} {walls[0]:>7.2f} {statistics.median(walls):>9.2f}  {tokens}", flush=True)
        return 0
    print(f"{'design':<11} {'cells':>6} " + " ".join(f"{s[:12]:>12}" for s in STAGES) + f" {'total s':>8}  weights sha256")
    for d in names:
        cells, times, digest = compile_timed(d)
        print(f"{d:<11} {cells:>6} " + " ".join(f"{times.get(s, 0.0):>12.1f}" for s in STAGES) +
              f" {sum(times.values()):>8.1f}  {digest[:16]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
