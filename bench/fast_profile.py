"""Where a program's time goes on the fast executor: the C kernel (``generate``) against the host's
Python per frame (decoding the frame, the retirement records), on the model engine's default CPU
checkpoint (built or found in build/cpu-model/).

    .venv/bin/python bench/fast_profile.py [PROGRAM.c ...] [--python-profile]

Per program: instructions, generated tokens, seconds of the run (the model loaded and the kernel's
image derived by a first run beforehand, untimed), the kernel's seconds and share, instructions/s and
tokens/s. ``--python-profile``: also the host side's heaviest Python functions (cProfile, one more run).

For the kernel's own split by function, run this under perf with the kernel compiled without inlining
(``cc -O2 -fPIC -shared -ffp-contract=off -fno-inline -g``, the same flags as
``netlist2tf/run/executor.py`` otherwise, over the cached ``build/fast/step-*.so``; put the cached file
back afterwards): ``perf record -F 499 -- .venv/bin/python bench/fast_profile.py cpu/programs/hello.c``,
then ``perf report --no-children --sort symbol``.
"""

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("programs", nargs="*", default=[str(ROOT / "cpu" / "programs" / "hello.c")])
    ap.add_argument("--python-profile", action="store_true", help="also cProfile the host's Python")
    args = ap.parse_args()

    from cpu.cli import load_program
    from cpu.model_engine import MODEL_RAM_SIZE, load_model, run_model_batch

    model = load_model(executor="fast", log=lambda m: None)[0]
    inner, spent = model.generate, [0.0]

    def timed(*a):
        t = time.perf_counter()
        out = inner(*a)
        spent[0] += time.perf_counter() - t
        return out

    print(f"the fast executor on the default CPU checkpoint ({MODEL_RAM_SIZE // 1024} KiB of RAM), one thread")
    print(f"{'program':14s} {'instr':>8s} {'tokens':>8s} {'tok/instr':>9s} {'seconds':>8s} {'kernel s':>8s} "
          f"{'kernel':>7s} {'instr/s':>8s} {'tokens/s':>9s}")
    for prog in args.programs:
        img = load_program(prog, ram_size=MODEL_RAM_SIZE)
        run_model_batch([img], executor="fast", log=lambda m: None)         # the image derived, caches warm
        spent[0] = 0.0
        model.generate = timed
        try:
            t0 = time.perf_counter()
            (r,) = run_model_batch([img], executor="fast", log=lambda m: None)
            total = time.perf_counter() - t0
        finally:
            del model.generate
        print(f"{Path(prog).name:14s} {r.instructions:8,d} {r.tokens:8,d} {r.tokens / r.instructions:9.2f} "
              f"{total:8.2f} {spent[0]:8.2f} {spent[0] / total:7.0%} {r.instructions / total:8.0f} "
              f"{r.tokens / total:9.0f}")
        if args.python_profile:
            prof = cProfile.Profile()
            prof.runcall(run_model_batch, [img], executor="fast", log=lambda m: None)
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
            print(out.getvalue())


if __name__ == "__main__":
    main()
