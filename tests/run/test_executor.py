"""The fast executor's start-up path (netlist2tf.run.executor and .opener): the kernel image cached per checkpoint and
the cached trace side. Oracles: stock transformers' forward (the same generated frames), torch's own
rsqrt(mean + eps) for the norm factor the kernel now computes in C, and the files as written (a damaged
cache file is never trusted: derived again)."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from netlist2tf.checkpoint.emit import emit_checkpoint, load_checkpoint, read_checkpoint
from netlist2tf.compile.settings import CompileSettings
from netlist2tf.driver import compile_netlist
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.run import executor, opener
from netlist2tf.run.host import run_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fifo(tmp_path_factory, build_dir):
    """The FIFO example (memories, gated protocol) as a checkpoint."""
    result = synthesize("hdl.examples.fifo:FIFO", "macro", build_dir)
    folder = tmp_path_factory.mktemp("executor") / "FIFO"
    return emit_checkpoint(compile_netlist(parse_netlist(result.json_text), CompileSettings(layers=7), prove=False),
                           result.json_text, folder)


@pytest.fixture
def own_build(tmp_path, monkeypatch):
    """A build folder of this test's own (images, trace sides, the kernel library)."""
    monkeypatch.setenv("NETLIST2TF_BUILD_DIR", str(tmp_path / "build"))
    executor._LIBS.clear()
    yield tmp_path / "build"
    executor._LIBS.clear()


def _run(model, folder, cycles=30):
    protocol, netlist, meta = read_checkpoint(folder)
    rng = random.Random(7)
    inputs = [[{name: rng.getrandbits(width) for name, width in protocol.input_ports} for _ in range(cycles)]
              for _ in range(2)]
    run = run_model(model, protocol, meta["initial_registers"], inputs, cycles, initial_memory=meta["initial_memory"])
    return run.tokens, run.outputs, run.registers


def test_mean_rsqrt_in_c_is_torchs():
    """step.c's n2t_mean_rsqrt(s, n, eps) against torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    on float32 vectors x whose squares sum exactly to s (integers, halves and quarters of the sizes
    the compiler writes, zeros among them), for the hidden and value-head sizes of our geometries."""
    lib = executor.library("step")
    if lib is None:
        pytest.skip("no C compiler here: the kernel (and this function) is not used")
    executor._bind(lib)
    rng = np.random.default_rng(11)
    checked = 0
    for n in (1, 3, 32, 64, 128, 256, 1024, 1768, 2048, 2560, 4096, 5120):
        for eps in (1e-6, 1e-5):
            for trial in range(60):
                scale = rng.choice([0.25, 0.5, 1.0, 4.0, 128.0])
                x = (rng.integers(-8, 9, n) * (rng.random(n) < rng.random())).astype(np.float32) * np.float32(scale)
                s = float(np.sum(x.astype(np.float64) ** 2))
                want = torch.rsqrt(torch.from_numpy(x).view(1, 1, n).pow(2).mean(-1, keepdim=True) + eps)
                got = np.float32(lib.n2t_mean_rsqrt(s, n, eps))
                assert got.tobytes() == want.numpy().reshape(-1)[0].tobytes(), (n, eps, s)
                checked += 1
    assert checked == 12 * 2 * 60


def test_a_second_run_maps_the_image_without_torch(fifo, own_build):
    """The first open derives the image (torch, FastModel) and saves it; a second process opens the
    cached image and runs the same frames with neither torch nor transformers imported; both equal
    stock transformers' generation."""
    stock = load_checkpoint(fifo)[0]
    want = _run(stock, fifo)
    first = opener.load_fast_checkpoint(fifo)[0]
    assert first.fast is not None and first.generates
    assert _run(first, fifo) == want
    images = list((own_build / "fast" / "images").glob("*.img"))
    assert len(images) == 1
    code = f"""
import json, random, sys
from netlist2tf.checkpoint import read_checkpoint
from netlist2tf.run import load_fast_checkpoint
from netlist2tf.run.host import run_model
model, protocol, netlist, inits, meta = load_fast_checkpoint({str(fifo)!r})
assert model.fast is None, "derived again instead of read from the image"
rng = random.Random(7)
inputs = [[{{name: rng.getrandbits(width) for name, width in protocol.input_ports}} for _ in range(30)] for _ in range(2)]
run = run_model(model, protocol, inits, inputs, 30, initial_memory=meta["initial_memory"])
print(json.dumps([run.tokens, sorted(m for m in ("torch", "transformers") if m in sys.modules)]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "NETLIST2TF_BUILD_DIR": str(own_build)})
    assert out.returncode == 0, out.stderr
    tokens, imported = json.loads(out.stdout)
    assert tokens == want[0]
    assert imported == []


def test_the_image_is_deterministic(fifo, own_build):
    opener.load_fast_checkpoint(fifo)
    (image,) = (own_build / "fast" / "images").glob("*.img")
    before = image.read_bytes()
    image.unlink()
    opener.load_fast_checkpoint(fifo)
    assert image.read_bytes() == before


@pytest.mark.parametrize("damage", ["truncated", "a weight changed", "a row index out of range", "garbage"])
def test_a_damaged_image_is_derived_again(fifo, own_build, damage, capfd):
    """A cut-short file, a changed weight (the data's sha256), an index that would send the kernel
    outside an array (the bounds check, with the sha256 made to match), a file of garbage: each is
    refused with one line, derived again from the checkpoint, and the run equals stock's."""
    want = _run(load_checkpoint(fifo)[0], fifo)
    opener.load_fast_checkpoint(fifo)
    (path,) = (own_build / "fast" / "images").glob("*.img")
    image = executor.Image.load(path)
    arrays = {k: np.array(v) for k, v in image.arrays.items()}
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:-100])
    elif damage == "a weight changed":
        raw = bytearray(path.read_bytes())
        n = int.from_bytes(raw[8:16], "little")
        head = json.loads(raw[16:16 + n])
        start = -(-(16 + n) // 64) * 64
        at = start + head["table"][image.spec["layers"][0]["gate_up"]["val"]]["offset"]
        raw[at + 2] ^= 0x40                                    # the first weight's mantissa
        path.write_bytes(bytes(raw))
    elif damage == "a row index out of range":
        name = image.spec["layers"][0]["gate_up"]["row"]
        arrays[name][0] = image.spec["layers"][0]["gate_up"]["rows"] + 5
        executor.Image(image.spec, arrays).save(path)          # a consistent sha256, a bad index
    else:
        path.write_bytes(b"N2TFIMG\0" + os.urandom(1000))
    del image
    capfd.readouterr()
    trace = opener.load_fast_checkpoint(fifo)[0]
    assert "unreadable" in capfd.readouterr().err
    assert trace.fast is not None                              # derived again
    assert _run(trace, fifo) == want
    assert executor.Image.load(path).spec["V"] > 0             # and saved whole again


def test_the_trace_side_cache_keeps_every_check(fifo, own_build, tmp_path):
    """read_checkpoint's trace side comes from the cache on a second call, equal to the first; a
    garbage cache file is derived again; an edited netlist.json is still refused (the seal is
    checked before the cache is looked at)."""
    import shutil

    from netlist2tf.common import Netlist2TFError

    first = read_checkpoint(fifo)
    (cached,) = (own_build / "trace-side").glob("*.pickle")
    second = read_checkpoint(fifo)
    assert second[0] == first[0] and second[1] == first[1]
    cached.write_bytes(b"not a pickle")
    third = read_checkpoint(fifo)
    assert third[0] == first[0]
    copy = tmp_path / "copy"
    shutil.copytree(fifo, copy)
    text = (copy / "netlist.json").read_text()
    (copy / "netlist.json").write_text(text.replace('"FIFO"', '"FIFX"', 1) if '"FIFO"' in text else text + " ")
    with pytest.raises(Netlist2TFError, match="netlist.json changed after the checkpoint was written"):
        read_checkpoint(copy)


def test_old_images_are_pruned(fifo, own_build):
    """The image cache keeps the most recently used IMAGE_CACHE_FILES images."""
    folder = own_build / "fast" / "images"
    folder.mkdir(parents=True)
    for i in range(executor.IMAGE_CACHE_FILES + 3):
        (folder / f"old{i}.img").write_bytes(b"x")
        os.utime(folder / f"old{i}.img", (1_000_000 + i, 1_000_000 + i))
    opener.load_fast_checkpoint(fifo)
    left = sorted(p.name for p in folder.glob("*.img"))
    assert len(left) == executor.IMAGE_CACHE_FILES
    assert "old0.img" not in left and f"old{executor.IMAGE_CACHE_FILES + 2}.img" in left
