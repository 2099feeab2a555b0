"""Instructions per second of a calc tool call (cpu/tools.py run_tool) on each engine, for choosing the
chat's default step budget beside its wall-clock limit (cpu/chat.py TOOL_MAX_STEPS, TOOL_TIME_LIMIT).
Seeded calls of the kinds a chat makes (a product, a quotient, a power's remainder, random nested
expressions up to 60 digits as tests/cpu/test_chat.py sends); each engine's answer is checked against
unicorn's. The model engine's first call loads the model (not counted: run_tool's time starts at the
program's first cycle, ``seconds`` includes the prompt). Prints one line per call and each engine's
total rate.

    .venv/bin/python bench/tool_rate.py [--engines unicorn,model] [--executor fast|stock] [--checkpoint MERGED]
"""
import argparse
import random
import sys
from pathlib import Path

from cpu.tools import CALC, run_tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cpu"))


def calls():
    from test_calc import _cases     # the random expressions of the calc and chat tests
    rng = random.Random(0)
    a, b = rng.randrange(10 ** 29, 10 ** 30), rng.randrange(10 ** 29, 10 ** 30)
    return [f"{a} * {b}", f"({a} * {b} + 7) / {b // 10 ** 15}", "3^300 % 1000007"] + [t for t, _ in _cases(3, 7)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default="unicorn,model", help="comma-separated: unicorn, netlist, model")
    ap.add_argument("--executor", default="fast", choices=("fast", "stock"))
    ap.add_argument("--checkpoint", default=None, help="a merged checkpoint to run instead of the compiled CPU")
    args = ap.parse_args()
    exprs = calls()
    ref = {e: run_tool(CALC, e, "unicorn", ram_size=16384) for e in exprs}
    for engine in args.engines.split(","):
        if engine == "model":   # load the model (and build it, the first time) outside the timings
            run_tool(CALC, "1", "model", ram_size=16384, checkpoint=args.checkpoint, executor=args.executor)
        total_i = total_s = 0
        for e in exprs:
            run = run_tool(CALC, e, engine, ram_size=16384, checkpoint=args.checkpoint, executor=args.executor,
                           max_steps=10 ** 9, log=lambda m: None)
            assert (run.output, run.instructions) == (ref[e].output, ref[e].instructions), (engine, e, run.output)
            total_i, total_s = total_i + run.instructions, total_s + run.seconds
            print(f"{engine:8s} {run.instructions:8,d} instructions {run.seconds:8.2f} s "
                  f"{run.instructions / run.seconds:10,.0f} instr/s  {e[:50]}", flush=True)
        print(f"{engine:8s} total {total_i:,d} instructions in {total_s:.1f} s: {total_i / total_s:,.0f} instr/s"
              + (f" ({args.executor} executor)" if engine == "model" else ""), flush=True)


if __name__ == "__main__":
    main()
