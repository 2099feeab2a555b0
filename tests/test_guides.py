"""The user guides' commands still run as written (docs/guide/*.md).

A guide writes each command on a ``$ `` line of a ```console block, and Python in ```python blocks.
Every command must name a real command and parse with its real options (``netlist2tf``'s and
``cpu``'s own parsers, the Makefile's targets); the blocks a test cannot run (a user's own checkpoint,
minutes of work) carry the comment ``<!-- not run by the tests: WHY -->`` on the line before them,
and every other block is run here, in order, in a fresh folder (the guides' relative paths:
``cpu/programs/`` is there, ``build/`` is the folder's own): each command exiting with status 0, each
Python block run by a fresh interpreter without an error.
"""

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDES = sorted((ROOT / "docs" / "guide").glob("*.md"))
SKIP = re.compile(r"<!-- not run by the tests: (.+?) -->")


@dataclass
class Command:
    guide: str
    line: int
    argv: list
    skipped: str | None          # why the tests do not run it (None: they do)

    def __str__(self):
        return f"{self.guide}:{self.line}: {shlex.join(self.argv)}"


def blocks(path: Path) -> list:
    """(kind, first line number, lines, why not run or None) of every console and python block."""
    lines = path.read_text().splitlines()
    found, current = [], None
    for i, line in enumerate(lines):
        if current is None and line.strip() in ("```console", "```python"):
            m = SKIP.search(lines[i - 1]) if i else None
            current = (line.strip()[3:], i + 2, [], m.group(1) if m else None)
        elif current is not None and line.strip() == "```":
            found.append(current)
            current = None
        elif current is not None:
            current[2].append(line)
    return found


def commands(path: Path) -> list:
    return [Command(path.name, first + k, shlex.split(line[2:]), reason)
            for kind, first, lines, reason in blocks(path) if kind == "console"
            for k, line in enumerate(lines) if line.startswith("$ ")]


ALL = [c for g in GUIDES for c in commands(g)]


def test_the_guides_are_there_and_hold_commands():
    names = {g.name for g in GUIDES}
    assert {"compile-your-design.md", "run-c-on-the-cpu.md", "merge-into-qwen.md", "chat-with-tools.md",
            "serve-it.md"} <= names
    for g in GUIDES:
        if g.name != "README.md":
            assert commands(g), f"{g.name} shows no command"


def _parser(prog):
    if prog == "netlist2tf":
        from netlist2tf.cli import build_parser
    else:
        from cpu.cli import build_parser
    return build_parser()


def _make_targets() -> set:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


@pytest.mark.parametrize("command", ALL, ids=[f"{c.guide}:{c.line}" for c in ALL])
def test_every_command_parses(command):
    prog, *args = command.argv
    assert prog in ("netlist2tf", "cpu", "make"), f"{command}: not one of our commands"
    if prog == "make":
        assert set(args) <= _make_targets(), f"{command}: no such make target"
        return
    try:
        _parser(prog).parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"{command}: {prog} refuses these arguments (exit status {exc.code})")


def _runnable(guide: Path) -> list:
    return [b for b in blocks(guide) if b[3] is None]


@pytest.mark.parametrize("guide", [g for g in GUIDES if _runnable(g)], ids=lambda g: g.stem)
def test_the_guide_runs(guide, tmp_path, monkeypatch, capsys):
    from cpu import cli as cpu_cli
    from netlist2tf import cli as n2t_cli

    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "programs").symlink_to(ROOT / "cpu" / "programs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NETLIST2TF_BUILD_DIR", str(ROOT / "build"))    # the caches (synthesis, C toolchain)
    for kind, first, lines, _ in _runnable(guide):
        if kind == "python":
            proc = subprocess.run([sys.executable, "-c", "\n".join(lines)], cwd=tmp_path, capture_output=True,
                                  text=True, timeout=600)
            assert proc.returncode == 0, f"{guide.name}:{first}: the Python block fails\n{proc.stderr[-2000:]}"
            continue
        for k, line in enumerate(lines):
            if not line.startswith("$ "):
                continue
            command = Command(guide.name, first + k, shlex.split(line[2:]), None)
            prog, *args = command.argv
            assert prog != "make", f"{command}: make runs the whole project; mark it not run"
            status = (n2t_cli if prog == "netlist2tf" else cpu_cli).main(args)
            out = capsys.readouterr()
            assert status == 0, f"{command}: exit status {status}\n{out.err[-2000:]}"
