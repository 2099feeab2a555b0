"""Nothing unbounded: long simulations stream in pieces of bounded memory (and the pieces change no
byte), endless inputs are cut at the room the program has, wide signals simulate in seconds, and an
output given as one of the command's own descriptors is written into."""

import json
import os
import stat
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from netlist2tf import cli

ROOT = Path(__file__).resolve().parent.parent


def _sim(tmp_path, build_dir, name, *extra):
    argv = ["sim", "hdl.examples.fifo:FIFO", "--cycles", "3000", "--seed", "4", "--batch", "3",
            "--vcd", str(tmp_path / f"{name}.vcd"), "--outputs", str(tmp_path / f"{name}.jsonl"),
            "--build-dir", str(build_dir), *extra]
    assert cli.main(argv) == 0
    return (tmp_path / f"{name}.vcd").read_bytes(), (tmp_path / f"{name}.jsonl").read_bytes()


def test_a_simulation_in_pieces_writes_the_same_bytes(tmp_path, build_dir, monkeypatch, capsys):
    """The CLI runs long simulations in pieces of SIM_PIECE_BYTES; pieces of a few cycles give the
    same waveform and outputs as one piece, and as the library's one-trace writer."""
    from netlist2tf.frontend.synth import synthesize
    from netlist2tf.netlist.ir import parse_netlist
    from netlist2tf.sim.simulator import RandomStimulus, Simulator

    whole = _sim(tmp_path, build_dir, "whole")
    monkeypatch.setattr(cli, "SIM_PIECE_BYTES", 4096)          # a handful of cycles a piece
    pieces = _sim(tmp_path, build_dir, "pieces")
    assert pieces == whole
    nl = parse_netlist(synthesize("hdl.examples.fifo:FIFO", "word", build_dir).json_text)
    sim = Simulator(nl, batch=3)
    trace = sim.run(3000, RandomStimulus(4), vcd=tmp_path / "api.vcd")
    assert (tmp_path / "api.vcd").read_bytes() == whole[0]
    rows = [json.loads(line) for line in whole[1].decode().splitlines()]
    assert len(rows) == 3000
    assert all(rows[k][n] == [int(x) for x in v[k]] for k in (0, 1234, 2999) for n, v in trace.outputs.items())


def test_a_long_simulation_holds_flat_memory(tmp_path, build_dir, monkeypatch, capsys):
    """Four times the cycles, about the same peak of Python memory: nothing grows with --cycles."""
    monkeypatch.setattr(cli, "SIM_PIECE_BYTES", 1 << 16)
    argv = ["sim", "hdl.examples.counter:Counter", "--seed", "1", "--outputs", str(tmp_path / "o.jsonl"),
            "--build-dir", str(build_dir)]
    assert cli.main(argv + ["--cycles", "10"]) == 0           # synthesis and imports outside the measure
    peaks = []
    for cycles in (2_500, 10_000):
        tracemalloc.start()
        assert cli.main(argv + ["--cycles", str(cycles), "--force"]) == 0
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 10_000
    assert peaks[1] < 1.5 * peaks[0] + (1 << 20), peaks


WIDE = """from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Wide(wiring.Component):
    d: In(8)
    q: Out(8)

    def elaborate(self, platform):
        m = Module()
        r = Signal({width})
        m.d.sync += r.eq(Cat(self.d, r[:-8]))
        m.d.comb += self.q.eq(r[-8:])
        return m
"""


def test_a_signal_of_sixteen_thousand_bits_simulates(tmp_path, build_dir, capsys):
    """A 16,000-bit shift register (its constants have more than Python's 4,300 decimal digits; its
    connections made the driver graph quadratic: 60,000 bits took 200 s): q is the input of 2,000
    cycles before (Python's own arithmetic as the oracle)."""
    (tmp_path / "wide.py").write_text(WIDE.format(width=16000))
    stim = tmp_path / "s.jsonl"
    ds = [(k * 37 + 11) % 256 for k in range(2005)]
    stim.write_text("".join(json.dumps({"d": d}) + "\n" for d in ds))
    out = tmp_path / "o.jsonl"
    assert cli.main(["sim", f"{tmp_path}/wide.py:Wide", "--cycles", "2005", "--stimulus", str(stim),
                     "--outputs", str(out), "--build-dir", str(build_dir)]) == 0
    q = [json.loads(line)["q"] for line in out.read_text().splitlines()]
    assert q == [0] * 2000 + ds[:5]


def test_endless_standard_input_is_cut_at_the_programs_room(tmp_path, build_dir):
    """`cpu run --input -` with an endless standard input (a private /dev/zero node): one error
    naming the room, in seconds, not a machine out of memory."""
    zero = tmp_path / "zero"
    try:
        os.mknod(zero, 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("making a device node needs root")
    (tmp_path / "x.c").write_text("int main(void){return 0;}\n")
    env = dict(os.environ, NETLIST2TF_BUILD_DIR=str(build_dir))
    with open(zero, "rb") as stdin:
        done = subprocess.run([sys.executable, "-m", "cpu.cli", "run", str(tmp_path / "x.c"), "--input", "-"],
                              stdin=stdin, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "standard input is longer than" in done.stderr and "the room the program's RAM has" in done.stderr and "Traceback" not in done.stderr


def test_an_output_on_a_descriptor_is_written_into(tmp_path, build_dir):
    """`--outputs /dev/fd/3` (a private pipe passed as descriptor 3, as a shell's `3>` would): the
    outputs arrive on the pipe; nothing is renamed."""
    r, w = os.pipe()
    env = dict(os.environ, NETLIST2TF_BUILD_DIR=str(build_dir))
    proc = subprocess.Popen([sys.executable, "-m", "netlist2tf.cli", "sim", "hdl.examples.counter:Counter", "--cycles",
                             "4", "--outputs", f"/dev/fd/{w}"], pass_fds=(w,), cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, text=True)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    rows = [json.loads(line) for line in data.decode().splitlines()]
    assert len(rows) == 4 and set(rows[0]) == {"count", "wrap"}


def test_a_folder_the_disk_cannot_hold_is_refused_before_it_is_written(tmp_path):
    """write_folder with a size the disk has no room for stops before writing anything (the old
    folder stays, nothing is left beside it); a size that fits is written."""
    import shutil

    from netlist2tf.common.outputs import OutputError, write_folder

    def write(tmp):
        (tmp / "compile.json").write_text('{"format": 1, "chunk_bits": 8}')
    write_folder(tmp_path / "ck", write, "checkpoint", size=1000)
    before = (tmp_path / "ck" / "compile.json").read_bytes()
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(OutputError, match="free some space"):
        write_folder(tmp_path / "ck", lambda tmp: pytest.fail("written"), "checkpoint", size=free + (1 << 30))
    assert (tmp_path / "ck" / "compile.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]


def test_a_model_the_memory_cannot_hold_is_refused_before_its_weights(tmp_path, build_dir, monkeypatch, capsys):
    """compile refuses, with the parameters and the memory named, a model whose writing would take more
    memory than there is (a 16-bit ALU needs 34 layers and 3.7 G parameters: 45 GB; here the machine
    is made to look small instead), and leaves no output; with the memory there, the same compile
    runs."""
    import netlist2tf.common as common

    out = tmp_path / "ckpt"
    monkeypatch.setattr(common, "available_memory", lambda: 64 << 20)
    argv = ["compile", "hdl.examples.counter:Counter", "--layers", "4", "--out", str(out),
            "--build-dir", str(build_dir), "--economy", "off"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "parameters (4 layers" in err and "of memory, more than the" in err and "fewer layers" in err
    assert err.count("\n") == 1 and not out.exists()
    monkeypatch.setattr(common, "available_memory", lambda: 64 << 30)
    assert cli.main(argv) == 0 and (out / "model.safetensors").is_file()
