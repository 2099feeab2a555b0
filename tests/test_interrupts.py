"""Ctrl-C in the middle of every kind of write leaves the previous output byte for byte.

Each case runs a command once to make an output, then runs it again with other inputs (so the new
output would differ) in a child process whose writer stops half-way: a file's writer after its first
``write`` call, a folder's writer after the folder is filled but before it is swapped in. The test
waits for the child to reach that point, sends SIGINT, and checks: exit status 130, one line saying
the run was interrupted and that nothing half-written was kept, no traceback, the previous output
byte-identical, nothing left beside it. A named pipe, which cannot be replaced whole, is the one
destination that receives part of the output, and the message says so.
"""

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The child: the command line, with the writers made to stop half-way and say so (a marker file).
_CHILD = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)   # even if the test's process ignores SIGINT
import netlist2tf.common.outputs as outputs
marker = os.environ["NETLIST2TF_TEST_MARKER"]

def stop_here():
    open(marker, "w").close()
    time.sleep(60)                 # the SIGINT lands here

plain_write = outputs._Named.write
def write(self, data):
    n = plain_write(self, data)
    self.flush()
    if not os.path.exists(marker):
        stop_here()
    return n
outputs._Named.write = write

plain_folder = outputs.write_folder
def write_folder(folder, write, kind, force=False, **kw):
    def write_then_stop(tmp):
        write(tmp)
        stop_here()
    return plain_folder(folder, write_then_stop, kind, force, **kw)
outputs.write_folder = write_folder

prog, argv = sys.argv[1], sys.argv[2:]
if prog == "cpu":
    from cpu import cli
else:
    from netlist2tf import cli
sys.exit(cli.main(argv))
"""


def _snapshot(path: Path) -> dict:
    if path.is_dir():
        return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(path.rglob("*")) if p.is_file()}
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}


def _interrupt(prog, argv, marker: Path, env) -> tuple[int, str]:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, prog, *argv], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not marker.exists() and proc.poll() is None and time.monotonic() - t0 < 300:
        time.sleep(0.01)
    assert marker.exists(), f"the child never reached the write: {proc.communicate()}"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


HELLO = "#include <stdio.h>\nint main(void){ puts(\"%s\"); return 0; }\n"

# (id, program, first argv, second argv (its output would differ), output path relative to tmp)
CASES = [
    ("checkpoint", "netlist2tf", ["compile", "hdl.examples.counter:Counter", "--layers", "4", "--out", "{tmp}/out"],
     ["compile", "hdl.examples.counter:Counter", "--layers", "5", "--out", "{tmp}/out"], "out"),
    ("report", "netlist2tf", ["report", "hdl.examples.counter:Counter", "--layers", "4", "--out", "{tmp}/out"],
     ["report", "hdl.examples.counter:Counter", "--layers", "5", "--out", "{tmp}/out"], "out"),
    ("vcd", "netlist2tf", ["sim", "hdl.examples.counter:Counter", "--cycles", "3000", "--vcd", "{tmp}/out"],
     ["sim", "hdl.examples.counter:Counter", "--cycles", "3000", "--seed", "1", "--vcd", "{tmp}/out"], "out"),
    ("outputs", "netlist2tf", ["sim", "hdl.examples.counter:Counter", "--cycles", "3000", "--outputs", "{tmp}/out"],
     ["sim", "hdl.examples.counter:Counter", "--cycles", "3000", "--seed", "1", "--outputs", "{tmp}/out"], "out"),
    ("netlist", "netlist2tf", ["synth", "hdl.examples.counter:Counter", "-o", "{tmp}/out"],
     ["synth", "hdl.examples.fifo:FIFO", "-o", "{tmp}/out"], "out"),
    ("trace", "cpu", ["run", "{tmp}/a.c", "--trace", "{tmp}/out"], ["run", "{tmp}/b.c", "--trace", "{tmp}/out"], "out"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_sigint_during_a_write_keeps_the_previous_output(case, tmp_path, build_dir):
    name, prog, first, second, out = case
    (tmp_path / "a.c").write_text(HELLO % "first")
    (tmp_path / "b.c").write_text(HELLO % "second, a longer program output")
    env = dict(os.environ, NETLIST2TF_BUILD_DIR=str(build_dir), NETLIST2TF_TEST_MARKER=str(tmp_path / "marker"))
    fmt = [a.format(tmp=tmp_path) for a in first]
    done = subprocess.run([sys.executable, "-m", f"{'cpu' if prog == 'cpu' else 'netlist2tf'}.cli", *fmt],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    before = _snapshot(tmp_path / out)
    rc, err = _interrupt(prog, [a.format(tmp=tmp_path) for a in second], tmp_path / "marker", env)
    assert rc == 130, err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"{prog}: interrupted (SIGINT); nothing half-written was kept"), err
    assert _snapshot(tmp_path / out) == before, "the previous output changed"
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".") or p.name.endswith((".tmp", ".new")))
    assert not left, f"left beside the output: {left}"
    # and the same command, uninterrupted, does replace it (the second output differs from the first)
    done = subprocess.run([sys.executable, "-m", f"{'cpu' if prog == 'cpu' else 'netlist2tf'}.cli",
                           *[a.format(tmp=tmp_path) for a in second]], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _snapshot(tmp_path / out) != before


def test_sigint_while_streaming_into_a_pipe_says_so(tmp_path, build_dir):
    """A named pipe is written into as the output is made: an interrupted run has sent part of it,
    and the message names the pipe instead of claiming nothing was written."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    got = []

    def read():
        with open(pipe, "rb") as f:
            got.append(f.read())
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    env = dict(os.environ, NETLIST2TF_BUILD_DIR=str(build_dir), NETLIST2TF_TEST_MARKER=str(tmp_path / "marker"))
    rc, err = _interrupt("netlist2tf", ["sim", "hdl.examples.counter:Counter", "--cycles", "50", "--outputs", str(pipe)],
                         tmp_path / "marker", env)
    reader.join(timeout=30)
    assert rc == 130, err
    last = err.strip().splitlines()[-1]
    assert f"{pipe} received output as it was made" in last, err
    assert got and got[0].startswith(b'{"count": '), got
    assert pipe.is_fifo()
