"""How long the compiler takes, stage by stage: the z3 proofs, scheduling and planning, writing the weights,
writing the checkpoint, for the CPU (hdl/rv32 with the model engine's settings, 64 KiB) and the example
designs, from a warm synthesis cache (Yosys is not timed). Prints one row per design and the sha256 of the
checkpoint's model.safetensors, so two versions of the compiler can be compared for speed and for
byte-identical weights. Asserts nothing.

    .venv/bin/python bench/compile_speed.py                       # the CPU and every example design
    .venv/bin/python bench/compile_speed.py --designs cpu         # one: cpu, counter, lfsr, multiplier, ...

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


def main(argv=None):
    from netlist2tf.common import drop_kernel_notes

    drop_kernel_notes()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--designs", default="cpu," + ",".join(EXAMPLES),
                    help="comma-separated: cpu and/or " + ", ".join(EXAMPLES))
    args = ap.parse_args(argv)
    names = [d for d in args.designs.split(",") if d]
    bad = [d for d in names if d != "cpu" and d not in EXAMPLES]
    if bad:
        print(f"compile_speed: unknown design {bad[0]!r}; choose from cpu, {', '.join(EXAMPLES)}", file=sys.stderr)
        return 2
    print(f"{'design':<11} {'cells':>6} " + " ".join(f"{s[:12]:>12}" for s in STAGES) + f" {'total s':>8}  weights sha256")
    for d in names:
        cells, times, digest = compile_timed(d)
        print(f"{d:<11} {cells:>6} " + " ".join(f"{times.get(s, 0.0):>12.1f}" for s in STAGES) +
              f" {sum(times.values()):>8.1f}  {digest[:16]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
