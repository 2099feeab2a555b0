"""Long-integer arithmetic in NUPA's style (add, subtract, multiply, floor-divide, modulo of 5-60 digit
integers), answered by a merged checkpoint with and without its CPU (the calc tool), accuracy per task
and digit length.

    .venv/bin/python bench/nupa.py MERGED [--per-cell 5] [--digits 5,20,40,60] [--engine model|unicorn]
    .venv/bin/python bench/nupa.py MERGED --scripted          # the embedded default: see below

With real weights (a CPU merged in front of a Qwen3.5 checkpoint) each question is asked twice in a
fresh chat: with the tool declared (the model decides to call it; its final answer is read) and without
(the same question, no tools). An answer counts when the last integer in the reply equals Python's value.

``--scripted`` is for the embedded random base, which cannot decide anything: the assistant's reply is
the tool call itself, so the run checks that every tool answer (the firmware inside the merged model's
compiled layers) is exact; the no-tool column is not measured then.
"""
import argparse
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpu.chat import Chat  # noqa: E402

TASKS = {"add": ("+", lambda a, b: a + b), "sub": ("-", lambda a, b: a - b), "mul": ("*", lambda a, b: a * b),
         "div": ("/", lambda a, b: a // b), "mod": ("%", lambda a, b: a % b)}
WORDS = {"add": "the sum", "sub": "the difference", "mul": "the product", "div": "the floor quotient",
         "mod": "the remainder"}


def problems(per_cell, digit_lengths, seed=0):
    rng = random.Random(seed)
    for task, (op, fn) in TASKS.items():
        for d in digit_lengths:
            for _ in range(per_cell):
                a = rng.randrange(10 ** (d - 1), 10 ** d)
                b = rng.randrange(10 ** (max(d // 2, 1) - 1), 10 ** max(d // 2, 1)) if task in ("div", "mod") else \
                    rng.randrange(10 ** (d - 1), 10 ** d)
                yield task, d, f"{a} {op} {b}", fn(a, b), f"What is {WORDS[task]} {a} {op} {b}? Answer with the number."


def last_integer(text):
    found = re.findall(r"-?\d+", text.replace(",", ""))
    return int(found[-1]) if found else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--per-cell", type=int, default=5)
    ap.add_argument("--digits", default="5,20,40,60")
    ap.add_argument("--engine", default="model", choices=("model", "unicorn", "netlist"))
    ap.add_argument("--scripted", action="store_true")
    args = ap.parse_args()
    lengths = [int(x) for x in args.digits.split(",")]
    score = {}
    t0 = time.perf_counter()
    script = []                      # --scripted: the replies of the current question
    chat = Chat(args.checkpoint, assistant=(lambda m, p: script.pop(0)) if args.scripted else None, engine=args.engine)
    bare = None if args.scripted else Chat(args.checkpoint, engine=args.engine, use_tools=False)
    for task, d, expr, value, question in problems(args.per_cell, lengths):
        chat.reset()
        without = None
        if args.scripted:
            script[:] = [f"<tool_call>\n<function=calc>\n<parameter=expression>\n{expr}\n</parameter>\n"
                         f"</function>\n</tool_call>", "done"]
            chat.send(question)
            with_tool = chat.runs[-1].output == str(value)
        else:
            with_tool = last_integer(chat.send(question)) == value
            bare.reset()
            without = last_integer(bare.send(question)) == value
        cell = score.setdefault((task, d), [0, 0, 0])
        cell[0] += 1
        cell[1] += bool(with_tool)
        cell[2] += bool(without)
    print(f"{'task':5s} {'digits':>6s} {'n':>3s} {'with calc':>10s} {'without':>8s}")
    for (task, d), (n, w, wo) in score.items():
        print(f"{task:5s} {d:6d} {n:3d} {100 * w / n:9.1f}% " + (f"{100 * wo / n:7.1f}%" if not args.scripted else "       -"))
    total = sum(c[0] for c in score.values())
    print(f"{total} questions, {time.perf_counter() - t0:.1f} s ({args.engine}"
          f"{', scripted tool calls' if args.scripted else ''})")
    return 0 if not args.scripted or all(c[1] == c[0] for c in score.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
