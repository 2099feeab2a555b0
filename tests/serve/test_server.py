"""An OpenAI-compatible server as the engine: llama-cpp-python's server (``python -m llama_cpp.server``,
llama.cpp behind ``/v1/completions``) serving a checkpoint's GGUF export, driven by
``netlist2tf.serve.ServerTrace`` through the text of its token names. Oracle: the netlist simulator.
That server prints at most 32 bytes of a token's text (llama-cpp-python's detokenizer): the counter's
generated names fit, the FIFO's do not, which the client must say instead of misreading."""

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from netlist2tf.run import open_checkpoint, verify_model
from netlist2tf.serve import export_gguf

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (`make test` installs it)")
pytest.importorskip("uvicorn", reason="llama-cpp-python's server is not installed (`make test` installs it)")

pytestmark = pytest.mark.xdist_group("llama")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(fifo, counter, tmp_path_factory):
    """{"compiled" | "merged": URL}: one llama-cpp-python server per checkpoint's GGUF (float32 cache, no
    flash attention), stopped at the end."""
    root = tmp_path_factory.mktemp("served")
    procs, urls = [], {}
    try:
        for name, folder in (("compiled", counter[0]), ("merged", counter[1]), ("fifo", fifo[0])):
            path = root / f"{name}.gguf"
            export_gguf(folder, path)
            port = _free_port()
            log = open(root / f"{name}.log", "w")
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--n_ctx", "8192", "--type_k", "0",
                 "--type_v", "0", "--flash_attn", "false", "--n_threads", "1", "--n_threads_batch", "1",
                 "--host", "127.0.0.1", "--port", str(port),
                 "--verbose", "false"], stdout=log, stderr=subprocess.STDOUT))
            urls[name] = f"http://127.0.0.1:{port}"
        for name, url in urls.items():
            for _ in range(240):
                try:
                    urllib.request.urlopen(url + "/v1/models", timeout=2).read()
                    break
                except OSError:
                    time.sleep(0.25)
            else:
                raise RuntimeError(f"the {name} server did not start: {(root / f'{name}.log').read_text()[-2000:]}")
        yield urls
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)


def test_the_served_compiled_and_merged_counter_equal_the_simulator(counter, served):
    for key, folder in (("compiled", counter[0]), ("merged", counter[1])):
        opened = open_checkpoint(folder, executor=served[key])
        assert opened.executor == "server"
        div, _ = verify_model(opened.model, opened.protocol, opened.netlist, opened.initial_registers, 15, 2, 0,
                              initial_memory=opened.meta["initial_memory"])
        assert div is None, (key, div)
        assert opened.model.model.requests if hasattr(opened.model, "offset") else opened.model.requests


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "netlist2tf.cli", *map(str, args)], capture_output=True, text=True)


def test_verify_server_from_the_command_line(counter, fifo, served):
    r = _cli("verify", counter[0], "--server", served["compiled"], "--cycles", "10", "--batch", "1")
    assert r.returncode == 0, r.stderr
    assert "server executor" in r.stderr
    # the FIFO's generated names are longer than llama-cpp-python's server prints: said, not misread
    r = _cli("verify", fifo[0], "--server", served["fifo"], "--cycles", "5")
    assert r.returncode == 2 and "32 bytes" in r.stderr and "Traceback" not in r.stderr
    r = _cli("verify", counter[0], "--server", served["compiled"], "--teacher-forced")
    assert r.returncode == 2 and "by generation" in r.stderr and "Traceback" not in r.stderr
    r = _cli("verify", counter[0], "--server", f"http://127.0.0.1:{_free_port()}", "--cycles", "2")
    assert r.returncode == 2 and "cannot reach a server" in r.stderr and "Traceback" not in r.stderr
    r = _cli("verify", counter[0], "--server", "localhost:1", "--cycles", "2")
    assert r.returncode == 2 and "http://HOST:PORT" in r.stderr
