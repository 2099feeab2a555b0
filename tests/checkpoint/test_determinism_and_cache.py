"""Same inputs, byte-identical outputs; and the synthesis cache redoes only what changed."""

import subprocess
import sys
import textwrap

import pytest

from hdl.examples import EXAMPLES
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.sim.simulator import Simulator


@pytest.mark.parametrize("flow", ["word", "gate"])
@pytest.mark.parametrize("design", EXAMPLES)
def test_synthesized_twice_is_byte_identical(design, flow, tmp_path):
    first = synthesize(design, flow, tmp_path / "a", use_cache=False)
    second = synthesize(design, flow, tmp_path / "b", use_cache=False)
    assert not first.cache_hit and not second.cache_hit
    assert first.json_text == second.json_text
    assert parse_netlist(first.json_text).dump() == parse_netlist(second.json_text).dump()


def test_identical_across_processes(tmp_path):
    """Separate interpreters (different hash seeds) write the same bytes."""
    outs = []
    for run in ("a", "b"):
        out = tmp_path / f"{run}.json"
        dump = subprocess.run([sys.executable, "-m", "netlist2tf.cli", "synth", "hdl.examples.alu:ALU",
                               "--build-dir", str(tmp_path / run), "-o", str(out), "--dump"],
                              capture_output=True, text=True, check=True,
                              env={"PYTHONHASHSEED": "1" if run == "a" else "2", "PATH": ""})
        outs.append((out.read_bytes(), dump.stdout))
    assert outs[0] == outs[1]
    assert outs[0][1].startswith("netlist top: ")


DESIGN = """
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

class Design(wiring.Component):
    a: In(8)
    y: Out(8)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.y.eq(self.a + {k})
        return m
"""


def test_editing_one_file_resynthesizes_only_that_design(tmp_path):
    (tmp_path / "one.py").write_text(textwrap.dedent(DESIGN.format(k=1)))
    (tmp_path / "two.py").write_text(textwrap.dedent(DESIGN.format(k=2)))
    build = tmp_path / "build"
    one, two = f"{tmp_path}/one.py:Design", f"{tmp_path}/two.py:Design"

    assert not synthesize(one, build_dir=build).cache_hit
    assert not synthesize(two, build_dir=build).cache_hit
    assert synthesize(one, build_dir=build).cache_hit
    first = synthesize(two, build_dir=build)
    assert first.cache_hit
    assert str(tmp_path / "two.py") in first.sources        # src attributes name the design file
    assert str(tmp_path / "one.py") not in first.sources

    (tmp_path / "one.py").write_text(textwrap.dedent(DESIGN.format(k=3)))
    edited = synthesize(one, build_dir=build)
    assert not edited.cache_hit                       # its source changed: Yosys ran again
    sim = Simulator(parse_netlist(edited.json_text))
    sim.step({"a": 10})
    assert sim.step()["y"] == 13                      # the new constant, not the cached one
    assert synthesize(two, build_dir=build).cache_hit  # the other design was not redone
    # A different flow is a different cache entry.
    assert not synthesize(two, "gate", build_dir=build).cache_hit
