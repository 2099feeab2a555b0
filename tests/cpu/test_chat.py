"""The chat loop (cpu/chat.py, `cpu chat`): the assistant's Qwen3.5 tool calls run the calc
firmware, every answer equals Python's exact result, the responses are in the template's format and
tokenized by the base's tokenizer; bad calls come back as errors and the conversation goes on."""

import re
import shutil

import pytest

from cpu.chat import TOOL_MAX_STEPS, TOOL_TIME_LIMIT, Chat, parse_tool_calls
from cpu.tools import TOOLS
from cpu.machine import Halt
from netlist2tf.common.errors import Netlist2TFError
from netlist2tf.merge.qwen_text import write_text_tokenizer

from test_calc import _cases          # tests/cpu is on sys.path (rootdir conftest, prepend import mode)


def _call(expr, name="calc", param="expression"):
    return f"I will compute it.\n\n<tool_call>\n<function={name}>\n<parameter={param}>\n{expr}\n</parameter>\n</function>\n</tool_call>"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The embedded default base's tokenizer and chat template (netlist2tf.merge.qwen_text, as make_base
    writes them for its 1,024-token vocabulary)."""
    d = tmp_path_factory.mktemp("base")
    write_text_tokenizer(d, 1024)
    return d


def test_parse_tool_calls():
    content, (call,) = parse_tool_calls(_call("2 ^ 100"))
    assert content == "I will compute it." and (call.name, call.arguments, call.error) == ("calc", {"expression": "2 ^ 100"}, None)
    _, calls = parse_tool_calls("<tool_call>\n<function=calc>\n<parameter=expression>\n1\n</parameter>\n</function>\n</tool_call>\n"
                                "<tool_call>\n<function=calc>\n<parameter=expression>\nmulti\nline\n</parameter>\n</function>\n</tool_call>")
    assert [c.arguments["expression"] for c in calls] == ["1", "multi\nline"]
    assert parse_tool_calls("no call here") == ("no call here", [])
    for bad in ("<tool_call>\n<function=calc>\n", "<tool_call>{\"name\": \"calc\"}</tool_call>",
                "<tool_call>\n<function=calc>\nstray text\n</function>\n</tool_call>"):
        (c,) = parse_tool_calls(bad)[1]
        assert c.error, bad


def test_scripted_chat_of_200_long_integer_calls(base):
    """200 random expressions up to 60 digits: each tool response equals Python's value, in the
    template's <tool_response> format, and the whole conversation round-trips through the tokenizer."""
    cases = _cases(200, 7)
    replies = iter([x for text, _ in cases for x in (_call(text), "The answer is above.")])
    chat = Chat(base, assistant=lambda messages, prompt: next(replies), engine="unicorn")
    for text, value in cases:
        chat.send(f"What is {text}?")
        assert chat.messages[-2] == {"role": "tool", "name": "calc", "content": str(value)}
    assert len(chat.runs) == 200 and all(r.ok for r in chat.runs)
    prompt = chat.prompt()
    text, value = cases[-1]
    assert f"<|im_start|>user\n<tool_response>\n{value}\n</tool_response><|im_end|>\n" in prompt
    assert f"<tool_call>\n<function=calc>\n<parameter=expression>\n{text}\n</parameter>\n</function>\n</tool_call><|im_end|>" in prompt
    assert prompt.startswith("<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n")
    ids = chat.tokenizer(prompt, add_special_tokens=False).input_ids
    tok = chat.tokenizer
    assert tok.decode(ids) == prompt and tok.convert_tokens_to_ids("<tool_response>") in ids
    assert max(ids) < 1024                      # the base's vocabulary: no trace tokens in the text


@pytest.mark.parametrize("reply, error", [
    (_call("12 +* 3"), "error: expected a number or '(' at position 5 ('*')"),
    (_call("1 / (2 - 2)"), "error: division by zero"),
    (_call("1+" * 40000 + "1"), "error: the expression is too long for the machine"),   # 80 KB: more than the RAM
    (_call("7 ^ 5000 % 10"), "error: result too large"),
    (_call("9" * 1200 + " + 1"), "error: result too large"),
    (_call("2", name="shell"), "error: unknown tool 'shell'; the tools are calc, python"),
    (_call("2", param="expr"), "error: unknown parameter(s) expr; calc takes 'expression'"),
    ("<tool_call>\n<function=calc>\n<parameter=expression>\n1\n", "error: a <tool_call> without its </tool_call>"),
    ("<tool_call>{\"name\": \"calc\", \"arguments\": {\"expression\": \"1\"}}</tool_call>", "error: the tool call is not one"),
])
def test_bad_calls_come_back_as_errors(base, reply, error):
    replies = iter([reply, "Sorry.", _call("6 * 7"), "42."])
    chat = Chat(base, assistant=lambda messages, prompt: next(replies), engine="unicorn")
    assert chat.send("compute") == "Sorry."
    assert chat.messages[-2]["role"] == "tool" and chat.messages[-2]["content"].startswith(error), chat.messages[-2]
    assert chat.send("and 6 * 7?") == "42." and chat.messages[-2]["content"] == "42"   # the conversation goes on


def test_python_calls_and_their_errors(base):
    """The python tool in a scripted chat (calls on unicorn): a script's output, then a syntax error, an
    uncaught exception, a script past its step budget and one that prints too much, each the tool's
    response (MicroPython's own messages; CPython's wording differs), and the conversation goes on."""
    calls = [
        ("print(sum(i * i for i in range(100)), 2 ** 100)", "328350 1267650600228229401496703205376"),
        ("print(1 +)", "Traceback (most recent call last):\n  File \"<stdin>\", line 1\nSyntaxError: invalid syntax"),
        ("d = {}\nprint(d['k'])", "Traceback (most recent call last):\n  File \"<stdin>\", line 2, in <module>\n"
                                   "KeyError: k"),
        ("while True:\n    pass", "error: python did not finish within 2,000,000 instructions (the call is too "
                                   "expensive; split it into smaller ones); raise --tool-max-steps to let it run longer"),
        ("for i in range(100):\n    print('%03d' % i * 30)", "000" * 30 + "\n" + "001" * 30 + "\n"),
    ]
    replies = iter([r for code, _ in calls for r in (_call(code, name="python", param="code"), "ok")])
    chat = Chat(base, assistant=lambda messages, prompt: next(replies), engine="unicorn", max_steps=2_000_000)
    assert "python" in chat.available() and any(t["function"]["name"] == "python" for t in chat.tools)
    for (code, answer), run_index in zip(calls, range(len(calls))):
        assert chat.send("run it") == "ok"
        got = chat.messages[-2]["content"]
        assert chat.messages[-2]["role"] == "tool"
        if answer.endswith("\n"):          # too much output: the start, then how much was left out
            assert got.startswith(answer) and len(got) < 5000 and got.endswith("(the output was 9,100 bytes; "
                                                                                "the first 4,096 are shown)"), got[-200:]
        else:
            assert got == answer, got
    assert [r.ok for r in chat.runs] == [True, False, False, False, True]


def test_step_budget(base):
    replies = iter([_call("3^3000 % 7"), "ok"])
    chat = Chat(base, assistant=lambda messages, prompt: next(replies), engine="unicorn", max_steps=5_000)
    chat.send("big")
    assert chat.messages[-2]["content"] == ("error: calc did not finish within 5,000 instructions (the call is "
                                            "too expensive; split it into smaller ones); raise --tool-max-steps "
                                            "to let it run longer")
    assert chat.runs[-1].halt.kind == Halt.STEP_LIMIT and chat.runs[-1].instructions == 5_000


def test_default_limits(base):
    """A tool call may run 60 s and 100,000 instructions by default (cpu/chat.py: about 100 s of the fast
    executor here); 10^1199 % 7 needs 391,740 and is stopped, 10^190 % 7 is within both."""
    replies = iter([_call("10^1199 % 7"), "ok", _call("10^190 % 7"), "ok"])
    chat = Chat(base, assistant=lambda messages, prompt: next(replies), engine="unicorn")
    assert (chat.time_limit, chat.max_steps) == (TOOL_TIME_LIMIT, None) and TOOL_MAX_STEPS == 100_000
    assert TOOLS["calc"].chat_max_steps == 100_000 and TOOLS["python"].chat_max_steps == 50_000_000
    chat.send("big")
    assert chat.messages[-2]["content"] == ("error: calc did not finish within 100,000 instructions (the call is "
                                            "too expensive; split it into smaller ones); raise --tool-max-steps "
                                            "to let it run longer")
    chat.send("smaller")
    assert chat.messages[-2]["content"] == str(10 ** 190 % 7)
    for bad in ({"time_limit": 0}, {"time_limit": -1.0}, {"max_steps": 0}):
        with pytest.raises(Netlist2TFError, match="tool call's"):
            Chat(base, assistant=lambda messages, prompt: "", engine="unicorn", **bad)


FULL = 1_007_988         # the instructions of 3^2000/3^1000 (unicorn): ~2.5 s on unicorn, ~40 s on the netlist


def _time_limited(run, seconds):
    """The instructions a call stopped by its time limit ran, from its response (checked against the run)."""
    m = re.fullmatch(rf"error: the calc call stopped after {re.escape(f'{seconds:g}')} s "
                     r"\(([\d,]+) instructions\), its time limit \(the call is too expensive; split it into "
                     r"smaller ones\); raise --tool-time-limit to let it run longer", run.output)
    assert m and not run.ok and run.halt.kind == Halt.TIME_LIMIT, run.output
    assert int(m.group(1).replace(",", "")) == run.instructions
    return run.instructions


@pytest.mark.parametrize("engine", ["unicorn", "netlist"])
def test_time_limit(base, engine):
    """A call past its wall-clock limit is stopped in the middle of its run (it ran part of 3^2000/3^1000's
    instructions), and the response says so and how to raise it; the conversation goes on, and a call
    within the limits is exact (Python's value)."""
    replies = iter([_call("3^2000/3^1000"), "ok", _call("3^200 / 7^50"), "done"])
    chat = Chat(base, assistant=lambda messages, prompt: next(replies), engine=engine, time_limit=0.3,
                max_steps=10 ** 8)
    chat.send("big")
    assert 0 < _time_limited(chat.runs[-1], 0.3) < FULL
    assert chat.messages[-2]["content"] == chat.runs[-1].output
    chat.time_limit = 60
    chat.send("smaller")
    assert chat.messages[-2]["content"] == str(3 ** 200 // 7 ** 50)
    if engine == "unicorn":         # the same call with time for it: exact
        replies = iter([_call("3^2000/3^1000"), "ok"])
        chat.time_limit, chat.max_steps = None, 2_000_000
        chat.send("big again")
        assert chat.messages[-2]["content"] == str(3 ** 1000) and chat.runs[-1].instructions == FULL


@pytest.mark.xdist_group("cpu-model")
def test_chat_on_the_merged_cpu(merged_cpu, tmp_path, capsys):
    """The CPU merged in front of the embedded default base: the tool calls run in the merged
    checkpoint's compiled layers (fast exact executor), and the answers equal Python's; the same
    through `cpu chat --assistant`. (More calls on the model: test_model_runs_fifty_calc_expressions_like_unicorn
    and test_200_long_integer_calls_on_the_merged_cpu, slow.)"""
    out = merged_cpu[0]
    cases = _cases(1, 11, max_digits=20)
    replies = iter([x for text, _ in cases for x in (_call(text), "Done.")])
    chat = Chat(out, assistant=lambda messages, prompt: next(replies))
    for text, value in cases:
        chat.send(f"What is {text}?")
        assert chat.messages[-2]["content"] == str(value)
    assert all(r.engine == "model" and r.tokens > 1000 for r in chat.runs)
    # a call past its time limit is stopped in the model's run (~1,000 instructions/s), and says so
    replies = iter([_call("3^2000/3^1000"), "ok"])
    chat.time_limit = 1.5
    chat.send("big")
    assert 0 < _time_limited(chat.runs[-1], 1.5) < FULL and chat.runs[-1].seconds < 10
    script = tmp_path / "script.txt"
    script.write_text(_call("2^64 - 1") + "\n---\nIt is 18446744073709551615.\n")
    capsys.readouterr()
    from cpu import cli as cpu_cli
    assert cpu_cli.main(["chat", str(out), "--assistant", str(script), "-m", "What is 2^64 - 1?"]) == 0
    printed = capsys.readouterr()
    assert "tool calc: 18446744073709551615\n" in printed.out and "assistant: It is" in printed.out
    assert "trace tokens" in printed.err


@pytest.mark.slow          # the 256 KiB CPU (built once, ~20 minutes) merged; each call minutes of generation
def test_python_calls_on_the_merged_256k_cpu(tmp_path_factory):
    """The python tool through the model: the 256 KiB CPU merged in front of the embedded default base,
    scripted calls run in the merged checkpoint's compiled layers (fast exact executor): a script's
    output, a syntax error, an uncaught exception and a script past the step budget all come back as
    the tool's response, each equal to the same call on unicorn."""
    from cpu.model_engine import build_checkpoint
    from netlist2tf import cli as n2t
    from pathlib import Path

    build = Path(__file__).resolve().parents[2] / "build"
    out = tmp_path_factory.mktemp("chatpy") / "m"
    calls = ["print(6 * 7)", "print(1 +)", "print(1 / 0)", "while True:\n    pass"]      # 39,860, 20,716, ~33,000, -
    try:
        assert n2t.main(["merge", str(build_checkpoint(262144, build_dir=build)), "--build-dir", str(build),
                         "--out", str(out)]) == 0
        answers = {}
        for engine in ("unicorn", "model"):
            replies = iter([r for code in calls for r in (_call(code, name="python", param="code"), "ok")])
            chat = Chat(out, assistant=lambda messages, prompt: next(replies), engine=engine, time_limit=None,
                        max_steps=60_000)
            assert set(chat.available()) == {"calc", "python"}
            for _ in calls:
                chat.send("run it")
            answers[engine] = [(r.output, r.ok, r.instructions) for r in chat.runs]
            assert [r.output.splitlines()[-1] for r in chat.runs[:3]] == ["42", "SyntaxError: invalid syntax",
                                                                        "ZeroDivisionError: divide by zero"]
            assert [r.ok for r in chat.runs] == [True, False, False, False]
            assert chat.runs[-1].halt.kind == Halt.STEP_LIMIT and chat.runs[-1].instructions == 60_000
        assert answers["model"] == answers["unicorn"]
        print(f"python calls through the merged model: {answers['model']}")
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


@pytest.mark.slow          # 200 calls on the merged model: long (see the docstring)
def test_200_long_integer_calls_on_the_merged_cpu(tmp_path_factory):
    """The scripted chat of 200 random expressions up to 60 digits on the CPU merged in front of
    the embedded default base: every call runs in the merged checkpoint's compiled layers (the
    fast exact executor), and every tool response equals Python's exact result. Run to the end on
    2026-12-05 (this 2-core machine): passed in 24:45, 1,403,871 instructions, 6,730,988 trace
    tokens, ~1,060 cycles/s; an expression with 60-digit products or quotients takes 32,000-68,000
    cycles (30-60 s)."""
    from cpu.model_engine import build_checkpoint
    from netlist2tf import cli as n2t
    from pathlib import Path

    build = Path(__file__).resolve().parents[2] / "build"
    out = tmp_path_factory.mktemp("chat200") / "m"
    try:
        assert n2t.main(["merge", str(build_checkpoint(build_dir=build)), "--build-dir", str(build), "--out", str(out)]) == 0
        cases = _cases(200, 7)
        replies = iter([x for text, _ in cases for x in (_call(text), "The answer is above.")])
        # the longest call takes ~68,000 cycles (about a minute): no time limit, the exact answers are tested
        chat = Chat(out, assistant=lambda messages, prompt: next(replies), time_limit=None)
        for text, value in cases:
            chat.send(f"What is {text}?")
            assert chat.messages[-2] == {"role": "tool", "name": "calc", "content": str(value)}, text
        assert len(chat.runs) == 200 and all(r.ok and r.engine == "model" for r in chat.runs)
        print(f"200 calls: {sum(r.instructions for r in chat.runs):,} instructions, "
              f"{sum(r.tokens for r in chat.runs):,} trace tokens, {sum(r.seconds for r in chat.runs):.0f} s")
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)
