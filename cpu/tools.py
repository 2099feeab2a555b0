"""Tools a language model calls, run as firmware on the RV32IM+Zba machine (docs/design/tools.md).

``calc``: cpu/firmware/calc.c, exact integer arithmetic (+ - * / % ^, parentheses, any length, Python's
semantics). ``python``: MicroPython (cpu/micropython.py), a script run from the booted snapshot; it
needs ``micropython.RAM_SIZE`` bytes of RAM, so a chat declares it only over a CPU with that much. The
argument is the program's input (``machine.with_input``: bytes placed in RAM after
the program, read through its stdin), and its console output is the answer. ``run_tool`` runs one call
on any engine: unicorn, the netlist simulator, or the compiled CPU inside a checkpoint (the compiled
model alone or merged in front of a Qwen3.5 base), and never raises for what the call itself gets
wrong: a bad expression, a program that does not halt, an input longer than the RAM takes all come
back as an ``error: ...`` text, which a chat returns to the model as the tool's response.
"""

import time
from dataclasses import dataclass
from pathlib import Path

from netlist2tf.common import Netlist2TFError

from .machine import Halt, InputTooLong, with_input

FIRMWARE_DIR = Path(__file__).resolve().parent / "firmware"


@dataclass(frozen=True)
class Tool:
    """A tool: its firmware and the declaration a chat template shows the model (OpenAI / Hugging
    Face function format, which Qwen3.5's template renders into its system prompt)."""
    name: str
    source: Path | None       # the C firmware; None: MicroPython's firmware (cpu/micropython.py)
    parameter: str            # the one parameter whose value is the program's input
    description: str
    parameter_description: str
    max_steps: int = 2_000_000     # run_tool's default budget
    chat_max_steps: int = 100_000  # a chat call's default budget (cpu/chat.py; --tool-max-steps)

    def min_ram(self) -> int:
        """The least RAM the tool's firmware runs in."""
        if self.source is None:
            from .micropython import RAM_SIZE
            return RAM_SIZE
        return 4096

    def declaration(self) -> dict:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": {"type": "object",
                           "properties": {self.parameter: {"type": "string",
                                                           "description": self.parameter_description}},
                           "required": [self.parameter]}}}


CALC = Tool(
    "calc", FIRMWARE_DIR / "calc.c", "expression",
    "Exact integer arithmetic of any length, computed by a RISC-V CPU inside this model: + - * / % ^ and "
    "parentheses; / is floor division and % its remainder (Python's // and %), ^ the power. Use it for "
    "every calculation with long numbers.",
    "an integer expression, for example (123456789 * 987654321 - 5) / 7 ^ 2",
)
PYTHON = Tool(
    "python", None, "code",
    "Run a Python script on MicroPython on a RISC-V CPU inside this model and return what it prints "
    "(an uncaught exception returns its traceback). Integers of any size, floats, strings, lists, dicts, "
    "sets, classes, generators and exceptions work; there are no files, no network, no imports beyond sys. "
    "Print every result you need.",
    "the Python source, for example: print(sum(i * i for i in range(100)))",
    max_steps=50_000_000,
    chat_max_steps=50_000_000,
)
TOOLS = {CALC.name: CALC, PYTHON.name: PYTHON}


MAX_OUTPUT = 4096           # bytes of a call's console output the model is told; the rest is left out


@dataclass
class ToolRun:
    """One tool call's run. ``output``: what the model is told (the console text, or ``error: ...``);
    ``ok``: the firmware exited with 0. The counts are the machine's (0 where it did not run)."""
    tool: str
    output: str
    ok: bool
    engine: str
    instructions: int = 0
    tokens: int = 0                 # generated trace tokens (model engine)
    seconds: float = 0.0
    halt: Halt | None = None


def tool_image(tool: Tool, ram_size: int, compiler=None):
    """The firmware's memory image for ``ram_size`` bytes of RAM (compiled once, cached in build/cpu/;
    MicroPython's: its booted snapshot, build/micropython/)."""
    if tool.source is None:
        from . import micropython
        firmware = micropython.build_firmware(ram_size, micropython.heap_for(ram_size), compiler=compiler)
        return micropython.booted_image(firmware).image
    from .elf import load_elf
    from .toolchain import compile_c
    return load_elf(compile_c(tool.source, ram_size=ram_size, compiler=compiler), ram_size=ram_size)


def run_tool(tool: Tool | str, argument: str, engine: str = "unicorn", ram_size: int | None = None,
             max_steps: int | None = None, checkpoint=None, executor: str = "fast", dtype=None,
             compiler=None, log=None, time_limit: float | None = None) -> ToolRun:
    """Run ``tool`` with ``argument`` as its input on ``engine`` ("unicorn", "netlist" or "model";
    ``checkpoint``/``executor``/``dtype`` as for ``cpu run --engine model``). ``ram_size``: default the
    merged checkpoint's RAM for the model engine, else the machine's 64 KiB. ``max_steps``: the instructions
    the call may run (default the tool's ``max_steps``); ``time_limit``: the seconds of wall-clock
    time it may run (None: no limit), counted from the program's first cycle (loading the model or
    building the netlist is before). A call stopped by either is an ``error: ...`` output that says
    which (``halt.kind``: ``Halt.STEP_LIMIT`` or ``Halt.TIME_LIMIT``)."""
    from .engines import ENGINES, default_ram_size

    tool = TOOLS[tool] if isinstance(tool, str) else tool
    ram_size = ram_size or default_ram_size(engine, checkpoint)
    max_steps = max_steps or tool.max_steps
    data = argument.encode("utf-8")
    if ram_size < tool.min_ram():
        return ToolRun(tool.name, f"error: {tool.name} needs {tool.min_ram():,} bytes of RAM; this CPU has "
                                  f"{ram_size:,}", False, engine)
    try:
        image = with_input(tool_image(tool, ram_size, compiler), data, ram_size)
    except InputTooLong as exc:
        return ToolRun(tool.name, f"error: the {tool.parameter} is too long for the machine ({exc})", False, engine)
    t0 = time.perf_counter()
    if engine == "model":
        import torch

        from .model_engine import run_model_batch
        (result,) = run_model_batch([image], ram_size, max_steps, False, dtype=dtype or torch.float32,
                                    checkpoint=checkpoint, executor=executor, log=log, time_limit=time_limit)
    elif engine == "unicorn":
        from .unicorn_ref import run_unicorn
        result = run_unicorn(image, ram_size, max_steps, False, time_limit=time_limit)
    elif engine == "netlist":
        from .netlist_engine import run_netlist
        result = run_netlist(image, ram_size, max_steps, False, time_limit=time_limit)
    else:
        raise Netlist2TFError(f"unknown engine {engine!r}; available: {', '.join(ENGINES)}")
    seconds = time.perf_counter() - t0
    console = result.console
    text = console[:MAX_OUTPUT].decode("utf-8", errors="replace")
    if len(console) > MAX_OUTPUT:
        text += f"\n... (the output was {len(console):,} bytes; the first {MAX_OUTPUT:,} are shown)"
    halt = result.halt
    if halt.kind == Halt.EXIT:
        output, ok = text.rstrip("\n"), halt.exit_code == 0
        if not ok and tool.source is None and not output:
            output = f"error: the script exited with status {halt.exit_code & 0xFF}"
    elif halt.kind == Halt.STEP_LIMIT:
        output, ok = (f"error: {tool.name} did not finish within {max_steps:,} instructions "
                      f"(the call is too expensive; split it into smaller ones)"), False
    elif halt.kind == Halt.TIME_LIMIT:
        output, ok = (f"error: the {tool.name} call stopped after {time_limit:g} s ({result.instructions:,} "
                      f"instructions), its time limit (the call is too expensive; split it into smaller ones)"), False
    else:
        output, ok = f"error: {tool.name} stopped: {halt.describe()}", False
    return ToolRun(tool.name, output, ok, engine, result.instructions, getattr(result, "tokens", 0), seconds, halt)
