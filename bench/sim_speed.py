"""Simulator speed: cycles/s of the netlist simulator (one instance, and batched) against Amaranth's
own simulator on the same design and the same inputs, in the same run. Prints a table; asserts
nothing (speed is measured here, never in a timed test).

    .venv/bin/python bench/sim_speed.py [--cycles N] [--batch B] [--flow word|gate]
"""

import argparse
import time

from hdl.examples import EXAMPLES
from netlist2tf.frontend import synthesize
from netlist2tf.netlist import parse_netlist
from netlist2tf.frontend import run_amaranth
from netlist2tf.sim import RandomStimulus, Simulator, TableStimulus


def best_of(n, fn):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--flow", default="word", choices=("word", "gate", "lut"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n, B = args.cycles, args.batch
    print(f"{n} cycles, batch {B}, {args.flow}-level netlists, best of {args.repeat}")
    print(f"{'design':<32}{'cells':>7}{'amaranth c/s':>14}{'ours B=1 c/s':>14}{'ratio':>8}"
          f"{f'ours B={B} c/s':>16}{'ratio':>9}  engine")
    for design in EXAMPLES:
        nl = parse_netlist(synthesize(design, args.flow).json_text)
        inputs = Simulator(nl, batch=B).run(n, RandomStimulus(seed=1)).inputs
        lane0 = {k: v[:, 0] for k, v in inputs.items()}
        outputs = [p.name for p in nl.outputs]
        t_ref = best_of(args.repeat, lambda: run_amaranth(design, lane0, n, outputs))
        t_one = best_of(args.repeat, lambda: Simulator(nl).run(n, TableStimulus(lane0)))
        batched = Simulator(nl, batch=B)
        t_many = best_of(args.repeat, lambda: Simulator(nl, batch=B).run(n, TableStimulus(inputs)))
        ref_cps, one_cps, many_cps = n / t_ref, n / t_one, n * B / t_many
        print(f"{design.split(':')[1]:<32}{len(nl.cells):>7}{ref_cps:>14,.0f}{one_cps:>14,.0f}"
              f"{one_cps / ref_cps:>7.1f}x{many_cps:>16,.0f}{many_cps / ref_cps:>8.1f}x  {batched.mode}")


if __name__ == "__main__":
    main()
