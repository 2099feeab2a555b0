"""CPU speed: instructions/s of the netlist simulator running the RV32 core (one instance, and a
batch of instances running the same program) against Amaranth's simulator of the same core and
against unicorn, on the same programs in the same run; and cycles per instruction.

    .venv/bin/python bench/cpu_speed.py [--batch B] [--programs NAME ...]

Prints a table; asserts nothing.
"""

import argparse
import time

import numpy as np

from cpu.elf import load_elf
from cpu.machine import DEFAULT_RAM_SIZE
from cpu.netlist_engine import core_design, core_netlist, run_netlist, run_netlist_batch
from cpu.programs import PROGRAMS
from cpu.toolchain import compile_c
from cpu.unicorn_ref import run_unicorn
from hdl.rv32 import Core
from netlist2tf.frontend import run_amaranth


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--programs", nargs="*", default=["fibonacci", "crc32", "quicksort"])
    ap.add_argument("--amaranth-cycles", type=int, default=3000,
                    help="Amaranth is slow: time it on this many cycles of each program")
    args = ap.parse_args()
    table = {p.name: p for p in PROGRAMS}
    core_netlist(DEFAULT_RAM_SIZE)  # synthesize outside the timings
    print(f"{'program':<14}{'instrs':>9}{'CPI':>6}{'unicorn i/s':>13}{'netlist B=1':>13}"
          f"{'no trace':>11}{f'B={args.batch} i/s':>13}{'amaranth i/s':>14}{'B=1/amaranth':>14}")
    for name in args.programs:
        image = load_elf(compile_c(table[name].path))
        uni = run_unicorn(image)
        t0 = time.perf_counter()
        run_unicorn(image, trace=False)
        uni_ips = uni.instructions / (time.perf_counter() - t0)
        one = run_netlist(image)
        notrace = run_netlist(image, trace=False)
        batch = run_netlist_batch([image] * args.batch, trace=False)
        batch_ips = sum(r.instructions for r in batch) / batch[0].seconds
        n = args.amaranth_cycles
        t0 = time.perf_counter()
        run_amaranth(core_design(), {"rst": np.zeros(n, dtype=np.uint64)}, n, ["rvfi_valid"],
                     dut=Core(init=[image.words().get(i, 0) for i in range(max(image.words()) + 1)]))
        am_cps = n / (time.perf_counter() - t0)
        cpi = one.cycles / one.instructions
        am_ips = am_cps / cpi
        print(f"{name:<14}{one.instructions:>9}{cpi:>6.2f}{uni_ips:>13,.0f}"
              f"{one.instructions / one.seconds:>13,.0f}{notrace.instructions / notrace.seconds:>11,.0f}"
              f"{batch_ips:>13,.0f}{am_ips:>14,.0f}{one.instructions / one.seconds / am_ips:>13.1f}x")


if __name__ == "__main__":
    main()
