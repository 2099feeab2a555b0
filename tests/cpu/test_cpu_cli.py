"""The ``cpu`` command line: output, exit statuses, trace files, pluggable engines."""

import subprocess
import sys
from pathlib import Path

import pytest

from cpu import cli
from cpu.machine import Halt, RunResult
from cpu.programs import PROGRAMS_BY_NAME

SIEVE = PROGRAMS_BY_NAME["sieve"]


ENGINES = pytest.mark.parametrize("engine", ["unicorn", "netlist"])


@ENGINES
def test_run_c_program(capsysbinary, engine):
    status = cli.main(["run", str(SIEVE.path), "--engine", engine])
    out, err = capsysbinary.readouterr()
    assert status == SIEVE.expected_exit == 47
    assert out == SIEVE.expected_output
    assert b"instructions/s" in err and b"exit code 47" in err


def test_run_elf_and_trace(tmp_path, capsysbinary):
    from cpu.toolchain import compile_c
    elf = compile_c(PROGRAMS_BY_NAME["hello"].path, out_elf=tmp_path / "hello.elf")
    trace = tmp_path / "trace.txt"
    assert cli.main(["run", str(elf), "--trace", str(trace)]) == 0
    out, err = capsysbinary.readouterr()
    assert out == PROGRAMS_BY_NAME["hello"].expected_output
    lines = trace.read_text().splitlines()
    count = int(err.decode().split("unicorn: ")[1].split(" instructions")[0])
    assert len(lines) == count > 1000
    assert lines[0].startswith("pc=00000000 insn=")


def _write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text('#include "runtime.h"\n' + body)
    return path


@ENGINES
def test_trap_status(tmp_path, capsys, engine):
    src = _write(tmp_path, "fault.c", "int main(void) { volatile int *p = (int *)0x20000; return *p; }\n")
    assert cli.main(["run", str(src), "--engine", engine]) == cli.EXIT_TRAP == 3
    assert "trap: load access fault at pc 0x" in capsys.readouterr().err
    src = _write(tmp_path, "illegal.c", 'int main(void) { __asm__ volatile(".word 0"); return 0; }\n')
    assert cli.main(["run", str(src), "--engine", engine]) == 3
    assert "trap: illegal instruction at pc 0x" in capsys.readouterr().err
    src = _write(tmp_path, "misaligned.c", "int main(void) { static int b[2]; int x; "
                 '__asm__ volatile("lw %0, 1(%1)" : "=r"(x) : "r"(b)); return x; }\n')
    assert cli.main(["run", str(src), "--engine", engine]) == 3
    assert "trap: load address misaligned at pc 0x" in capsys.readouterr().err


@ENGINES
def test_step_limit_status(capsys, engine):
    assert cli.main(["run", str(SIEVE.path), "--max-steps", "100", "--engine", engine]) == cli.EXIT_STEP_LIMIT == 4
    assert "stopped after the step limit" in capsys.readouterr().err


@ENGINES
def test_ebreak_and_exit_codes(tmp_path, capsys, engine):
    src = _write(tmp_path, "brk.c", "int main(void) { ebreak(5); }\n")
    assert cli.main(["run", str(src), "--engine", engine]) == 5
    assert "ebreak" in capsys.readouterr().err
    src = _write(tmp_path, "big.c", "int main(void) { exit(0x1234); }\n")
    assert cli.main(["run", str(src), "--engine", engine]) == 0x34


def test_input_errors(tmp_path, capsys):
    assert cli.main(["run", str(tmp_path / "missing.c")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.elf"
    bad.write_bytes(b"not an elf at all")
    assert cli.main(["run", str(bad)]) == 2
    assert "not an ELF" in capsys.readouterr().err
    src = _write(tmp_path, "syntax.c", "int main(void) { return 1 +; }\n")
    assert cli.main(["run", str(src)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cpu: error:") and "syntax.c" in err and "error" in err
    assert cli.main(["run", str(SIEVE.path), "--engine", "nope"]) == 2
    assert "unknown engine" in capsys.readouterr().err


def test_pluggable_engine(monkeypatch, capsysbinary):
    calls = []

    def fake(image, ram_size, max_steps, trace):
        calls.append((image.entry, ram_size, max_steps, trace))
        return RunResult(console=b"fake\n", halt=Halt(Halt.EXIT, 0, exit_code=7), instructions=1, cycles=3,
                         seconds=0.5)
    monkeypatch.setitem(cli.ENGINES, "fake", fake)
    assert cli.main(["run", str(SIEVE.path), "--engine", "fake", "--max-steps", "99", "--ram-size", "65536"]) == 7
    out, err = capsysbinary.readouterr()
    assert out == b"fake\n" and b"3 cycles" in err
    assert calls == [(0, 65536, 99, False)]


def test_check_and_programs(capsys):
    assert cli.main(["check", "hello", "crc32"]) == 0
    out = capsys.readouterr().out
    assert "2/2 programs passed" in out
    assert cli.main(["programs"]) == 0
    assert "tokenizer" in capsys.readouterr().out


def test_console_script_entry_point():
    proc = subprocess.run([sys.executable, "-c", "import sys; from cpu.cli import main; sys.exit(main())",
                           "run", str(PROGRAMS_BY_NAME["crc32"].path)], capture_output=True, timeout=120)
    assert proc.returncode == PROGRAMS_BY_NAME["crc32"].expected_exit
    assert proc.stdout == PROGRAMS_BY_NAME["crc32"].expected_output


def test_model_options(monkeypatch, capsysbinary, tmp_path):
    """--dtype/--batch/--plain/--token-by-token/--teacher-forced/--threads belong to the model engine;
    its default decoding is speculative, --plain and --token-by-token generate plainly; the model
    engine links programs for its 64 KiB RAM and reports tokens, tokens per instruction, tokens/s and
    how the tokens were produced (engine faked here: tests/cpu/test_model_engine.py runs the real one)."""
    assert cli.main(["run", str(SIEVE.path), "--dtype", "bfloat16"]) == 2
    assert b"options of --engine model" in capsysbinary.readouterr().err
    calls = []

    def fake(image, ram_size, max_steps, trace, dtype="float32", batch=1, prefill=True, decoding="speculative",
             threads=None, checkpoint=None, executor="stock", text_prefix=0):
        calls.append((ram_size, dtype, batch, prefill, decoding, threads))
        assert checkpoint is None or checkpoint == str(tmp_path)
        r = RunResult(console=b"hi\n", halt=Halt(Halt.EXIT, 0, exit_code=10), instructions=4, cycles=5,
                      seconds=2.0)
        r.tokens, r.prompt_tokens, r.batch, r.checkpoint = 330, 40, batch, "build/cpu-model/x"
        r.decoding = decoding
        return r
    monkeypatch.setitem(cli.ENGINES, "model", fake)
    hi = Path(cli.__file__).parent / "programs" / "hi.c"
    assert cli.main(["run", str(hi), "--engine", "model", "--dtype", "bfloat16", "--batch", "2",
                     "--token-by-token"]) == 10
    out, err = capsysbinary.readouterr()
    assert out == b"hi\n"
    assert calls == [(65536, "bfloat16", 2, False, "plain", None)]
    assert b"330 generated tokens (40 prompt tokens), 82.5 tokens/instruction, 330.0 tokens/s" in err
    assert b"(batch 2, bfloat16, plain generation, token by token)" in err
    assert b"layer report build/cpu-model/x/report/report.html" in err
    assert cli.main(["run", str(hi), "--engine", "model"]) == 10
    default = cli.model_dtype(None)[0]             # what this machine runs fastest (netlist2tf.common.hardware)
    assert calls[-1] == (65536, default, 1, True, "speculative", None)
    assert b"speculative decoding: every token drafted" in capsysbinary.readouterr().err
    assert cli.main(["run", str(hi), "--engine", "model", "--plain"]) == 10
    assert calls[-1] == (65536, default, 1, True, "plain", None)
    assert b"plain generation, prompt prefilled" in capsysbinary.readouterr().err
    assert cli.main(["run", str(hi), "--engine", "model", "--teacher-forced", "--threads", "2",
                     "--dtype", "float32"]) == 10
    assert calls[-1] == (65536, "float32", 1, True, "teacher-forced", 2)
    assert b"(batch 1, float32, teacher-forced: every generated token checked" in capsysbinary.readouterr().err
    assert cli.main(["run", str(hi), "--engine", "model", "--checkpoint", str(tmp_path)]) == 10
    capsysbinary.readouterr()
    n = len(calls)
    for argv, message in ((["--plain", "--teacher-forced"], b"cannot be combined with --plain"),
                          (["--plain", "--threads", "2"], b"plain generation runs on one thread"),
                          (["--token-by-token", "--threads", "2"], b"plain generation runs on one thread"),
                          (["--checkpoint", str(tmp_path / "nowhere")], b"no such folder")):
        assert cli.main(["run", str(hi), "--engine", "model", *argv]) == 2
        assert message in capsysbinary.readouterr().err
    assert len(calls) == n


def test_model_damaged_cache_is_rebuilt(monkeypatch, tmp_path, build_dir):
    """A damaged cached checkpoint (here: compile.json cut short) is our own cache entry: the engine
    says so in one line, deletes it and builds it again (here build_checkpoint's second call hands
    back a good checkpoint: a small design's, compiled for real), instead of stopping."""
    from cpu import model_engine
    from netlist2tf.compile.plan import CompileSettings
    from netlist2tf.driver import compile_netlist
    from netlist2tf.checkpoint.emit import emit_checkpoint
    from netlist2tf.frontend.synth import synthesize
    from netlist2tf.netlist.ir import parse_netlist

    damaged = tmp_path / "cpu-model" / "0123456789abcdef"
    damaged.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "netlist.json", "trace_protocol.json"):
        (damaged / name).write_text("{}")
    (damaged / "compile.json").write_text('{"format": ')
    result = synthesize("hdl.examples.counter:Counter", "macro", build_dir)
    good = emit_checkpoint(compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=4), prove=False), result.json_text, tmp_path / "good")
    handed = iter([damaged, good])
    monkeypatch.setattr(model_engine, "build_checkpoint", lambda *a, **k: next(handed))
    monkeypatch.setattr(model_engine, "_LOADED", {})
    said = []
    *loaded, folder = model_engine.load_model(log=said.append)
    assert folder == good and not damaged.exists()
    assert len(said) == 1 and f"cached checkpoint {damaged} is damaged" in said[0]
    assert "compile.json is not JSON" in said[0] and "rebuilding it" in said[0]


def test_model_checkpoint_must_be_the_cpu(monkeypatch, tmp_path, capsys):
    """``--checkpoint`` with a folder that is not the compiled CPU (another design, another RAM size)
    is one error naming the folder, its design and the fix; nothing is loaded."""
    import json

    from cpu import model_engine

    monkeypatch.setattr(model_engine, "_LOADED", {})
    hi = Path(cli.__file__).parent / "programs" / "hi.c"
    (tmp_path / "compile.json").write_text(json.dumps({"settings": {"design": "hdl.examples.counter:Counter"}}))
    assert cli.main(["run", str(hi), "--engine", "model", "--checkpoint", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path} is not the compiled CPU with 65,536 bytes of RAM" in err
    assert "hdl.examples.counter:Counter" in err and "netlist2tf merge" in err
    assert cli.main(["run", str(hi), "--checkpoint", str(tmp_path)]) == 2
    assert "options of --engine model" in capsys.readouterr().err
    # --text-prefix: a merged checkpoint's option; an unmerged folder or none is refused before loading
    assert cli.main(["run", str(hi), "--text-prefix", "5"]) == 2
    assert "options of --engine model" in capsys.readouterr().err
    assert cli.main(["run", str(hi), "--engine", "model", "--text-prefix", "5"]) == 2
    assert "give the merged checkpoint with --checkpoint" in capsys.readouterr().err
    assert cli.main(["run", str(hi), "--engine", "model", "--checkpoint", str(tmp_path), "--text-prefix", "5"]) == 2
    assert f"{tmp_path} is not a merged checkpoint" in capsys.readouterr().err
    assert model_engine._LOADED == {}


def test_checkpoint_cache_keeps_one_per_ram_size(tmp_path):
    """A rebuilt CPU checkpoint replaces stale ones of the same design (RAM size) only; other RAM
    sizes' checkpoints and emit's temporary folders stay."""
    import json

    from cpu.model_engine import core_design, evict_stale

    def entry(name, design):
        d = tmp_path / name
        d.mkdir()
        if design is not None:
            (d / "compile.json").write_text(json.dumps({"settings": {"design": design}}))
        return d

    small, big = core_design(16384), core_design(32768)
    new = entry("a" * 16, small)
    stale = entry("b" * 16, small)
    other = entry("c" * 16, big)
    broken = entry("d" * 16, None)
    tmp = entry(".tmp-emit-123", small)
    evict_stale(tmp_path, new.name, small)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([new.name, other.name, tmp.name])
    assert not stale.exists() and not broken.exists()


def test_two_builders_of_one_checkpoint_take_turns(monkeypatch, tmp_path):
    """Two processes asking for the CPU checkpoint at once (two test workers, two ``cpu run``):
    while one holds the key's lock the other waits, says so, and then uses the folder the first
    finished instead of compiling it again over the first one's half-written report (the race that
    broke a CI run); a stale entry whose lock is held is not evicted."""
    import threading
    import time

    from cpu import model_engine
    from netlist2tf.common.outputs import cache_lock

    compiled = []

    def compile_into(folder, *a):
        compiled.append(folder)
        return folder
    monkeypatch.setattr(model_engine, "_compile_into", compile_into)
    monkeypatch.setattr(model_engine, "_BUILT", {})
    said = []
    key_folder = {}

    def ask():
        key_folder["got"] = model_engine.build_checkpoint(build_dir=tmp_path, log=said.append)

    # the key is only known inside build_checkpoint: learn it from a first call, then undo it
    ask()
    folder = compiled.pop()
    monkeypatch.setattr(model_engine, "_BUILT", {})
    lock = folder.parent / f".{folder.name}.lock"
    with cache_lock(lock):
        waiter = threading.Thread(target=ask)
        waiter.start()
        t0 = time.monotonic()
        while not any("another process is compiling the CPU" in m for m in said) and time.monotonic() - t0 < 60:
            time.sleep(0.01)
        waiter.join(0.5)
        assert waiter.is_alive() and not compiled, "it compiled while another process held the lock"
        assert any("waiting for it" in m for m in said)
        (folder / "report").mkdir(parents=True)          # the other process finishes the entry
        (folder / "compile.json").write_text("{}")
        (folder / "report" / "report.html").write_text("")
    waiter.join(60)
    assert not waiter.is_alive() and key_folder["got"] == folder and compiled == []

    stale = folder.parent / "0123456789abcdef"
    stale.mkdir()
    with cache_lock(folder.parent / ".0123456789abcdef.lock"):
        model_engine.evict_stale(folder.parent, folder.name, model_engine.core_design(model_engine.MODEL_RAM_SIZE))
        assert stale.exists()
    model_engine.evict_stale(folder.parent, folder.name, model_engine.core_design(model_engine.MODEL_RAM_SIZE))
    assert not stale.exists()


@pytest.mark.slow          # plans the CPU onto the 4B shapes: ~3 minutes
def test_fit_names_the_numbers_that_do_not_fit(capsys):
    """`cpu fit qwen3.5-4b --ram-size 16384 --layers 11`: the CPU's 16 KiB of RAM is 4,096 words, and its fetch and load ports
    also reach the 32 register words; a DeltaNet key head of Qwen3.5's (key dim 128: 127 rows) with
    the 4B's 2 value heads holds an interleaved bank of 254 words, so each port needs 4,128 / 254 ->
    17 key heads, 34 value heads where one layer of the 4B has 32 (hand-derived). In 11 layers the
    reads cannot spread over a second layer (the logic after them would be too deep): the command
    names the layers, the numbers and the reads, and exits 1."""
    import re

    assert cli.main(["fit", "qwen3.5-4b", "--ram-size", "16384", "--layers", "11"]) == 1
    out = capsys.readouterr().out
    assert "Qwen/Qwen3.5-4B, 16 KiB: does not fit 11 layers of its shapes" in out
    needs = [int(n) for n in re.findall(r"layer \d+ needs (\d+) DeltaNet value heads, the target has 32 per layer", out)]
    assert needs and max(needs) == 34, out
    assert "the banks of memory read(s) ram.0, ram.1 spread over as many DeltaNet layers as 11 layers leave" in out


@pytest.mark.slow          # plans the CPU onto the 4B shapes in 18 layers: ~5 minutes
def test_64k_fits_the_4b_in_18_layers(capsys):
    """`cpu fit --ram-size 65536 --layers 18 qwen3.5-4b` fits: 16,384 + 32 words a port are 65
    interleaved banks of 254, 16 key heads a layer: 5 DeltaNet layers a port (hand-derived). Every
    compiled layer but the last is DeltaNet (issue 47), so the fetch (pc ready at layer 1) takes layers
    1-5 with no attention layer between them (22 layers and 1, 2, 4, 5, 6 with the base's pattern)."""
    import re

    assert cli.main(["fit", "qwen3.5-4b", "--ram-size", "65536", "--layers", "18"]) == 0
    out = capsys.readouterr().out
    assert "Qwen/Qwen3.5-4B, 64 KiB, 18 layers:" in out
    assert "ram.0 read over layers [1, 2, 3, 4, 5]" in out, out
    load = re.search(r"ram\.1 read over layers \[([\d, ]+)\]", out)
    assert load and len(load.group(1).split(",")) == 5, out
    row = next(line for line in out.splitlines() if line.startswith("Qwen/Qwen3.5-4B  64 KiB"))
    assert "32 of 32 (17 layers)" in row and "0 of 16 (1 layer)" in row, row


@pytest.mark.parametrize("threshold", [11, 12, 13, 17, 30, 64, None])
def test_fewest_layers_search(monkeypatch, threshold):
    """`cpu fit`'s search: with a plan that fits from THRESHOLD layers on (None: never, as for a
    residual too narrow at any depth), ``fewest_layers`` returns THRESHOLD (or None with the
    planner's sentences) and plans few counts: 11, the 64-layer probe, then galloping and bisecting."""
    from cpu import model_engine

    planned = []

    def fake_fit(target, ram_size, build_dir, layers, netlist, fetch="deltanet"):
        planned.append(layers)
        ok = threshold is not None and layers >= threshold
        return ({"layers": layers}, "") if ok else (None, f"  - {layers} layers do not fit")

    monkeypatch.setattr(model_engine, "fit", fake_fit)
    monkeypatch.setattr(model_engine, "fit_netlist", lambda ram_size, build_dir: None)
    layers, demand, problems = model_engine.fewest_layers("qwen3.5-4b", 16384)
    assert layers == threshold
    if threshold is None:
        assert demand is None and problems == "  - 64 layers do not fit" and planned == [11, 64]
    else:
        assert demand == {"layers": threshold} and problems == ""
        assert len(planned) <= 2 + 2 * 6, planned
        # the answer is proved minimal by a plan one layer below it (or it is the start)
        assert threshold == 11 or threshold - 1 in planned, planned


def test_a_checkpoint_says_its_ram_size(tmp_path):
    """`--checkpoint` without `--ram-size` links programs for the RAM the checkpoint's CPU was
    compiled with (its compile.json's design); a folder that does not say gives the default."""
    import json

    from cpu import model_engine
    from cpu.cli import default_ram_size

    for ram in (16384, 65536):
        folder = tmp_path / str(ram)
        folder.mkdir()
        (folder / "compile.json").write_text(json.dumps({"settings": {"design": model_engine.core_design(ram)}}))
        assert model_engine.checkpoint_ram_size(folder) == ram
        assert default_ram_size("model", folder) == ram
        assert default_ram_size("unicorn", folder) == 65536
    other = tmp_path / "other"
    other.mkdir()
    (other / "compile.json").write_text(json.dumps({"settings": {"design": "hdl.examples.fifo:FIFO"}}))
    assert model_engine.checkpoint_ram_size(other) is None and model_engine.checkpoint_ram_size(tmp_path) is None
    assert default_ram_size("model", other) == model_engine.MODEL_RAM_SIZE
