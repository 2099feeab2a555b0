"""Cost of the calc tool (cpu/firmware/calc.c): instructions per product of two n-digit numbers on
unicorn, and, with --model, generated trace tokens and wall time on the compiled CPU (the fast exact
executor, one core) beside unicorn in the same run. Prints a table; the operands are seeded.

    .venv/bin/python bench/calc_cost.py [--model] [--checkpoint MERGED]
"""
import argparse
import random

from cpu.tools import CALC, run_tool


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", action="store_true", help="also run each product on the compiled CPU")
    ap.add_argument("--checkpoint", default=None, help="a merged checkpoint to run instead of the compiled CPU")
    ap.add_argument("--digits", default="10,20,40")
    args = ap.parse_args()
    rng = random.Random(0)
    print("digits  instructions  unicorn s  " + ("trace tokens  tokens/instr  model s  model instr/s" if args.model else ""))
    for d in map(int, args.digits.split(",")):
        a, b = rng.randrange(10 ** (d - 1), 10 ** d), rng.randrange(10 ** (d - 1), 10 ** d)
        ref = run_tool(CALC, f"{a} * {b}", "unicorn", ram_size=16384)
        assert ref.output == str(a * b)
        line = f"{d:6d}  {ref.instructions:12,d}  {ref.seconds:9.3f}"
        if args.model:
            run = run_tool(CALC, f"{a} * {b}", "model", ram_size=16384, checkpoint=args.checkpoint, executor="fast")
            assert run.output == str(a * b) and run.instructions == ref.instructions, run.output
            line += (f"  {run.tokens:12,d}  {run.tokens / run.instructions:12.2f}  {run.seconds:7.1f}"
                     f"  {run.instructions / run.seconds:13.1f}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
