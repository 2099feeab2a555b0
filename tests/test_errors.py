"""Bad input gets one clear error naming the culprit and the fix (messages pinned)."""

import json
import re
from pathlib import Path

import pytest

from netlist2tf import cli
from netlist2tf.common.errors import (DesignElaborationError, DesignNotFoundError, NetlistFormatError,
                               UnsupportedDesignError, YosysError)
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import load_netlist, parse_netlist
from netlist2tf.sim.simulator import Simulator
from netlist2tf.netlist.validate import check_netlist

DESIGNS = Path(__file__).parent / "designs"
BAD = f"{DESIGNS}/bad_designs.py"


def test_design_file_that_does_not_exist(build_dir):
    with pytest.raises(DesignNotFoundError, match=re.escape(
            "design file nonexistent/cpu.py does not exist (design 'nonexistent/cpu.py:Core'); "
            "give an existing .py file or an importable module path")):
        synthesize("nonexistent/cpu.py:Core", build_dir=build_dir)


def test_module_that_does_not_exist(build_dir):
    with pytest.raises(DesignNotFoundError, match=re.escape("no module named 'no.such.module' "
                                                            "(design 'no.such.module:X')")):
        synthesize("no.such.module:X", build_dir=build_dir)


def test_class_that_does_not_exist(build_dir):
    with pytest.raises(DesignNotFoundError, match=r"bad_designs.py has no class 'Missing' .*"
                                                  r"classes there: .*NotHardware, RaisesInElaborate"):
        synthesize(f"{BAD}:Missing", build_dir=build_dir)


def test_design_without_class_part(build_dir):
    with pytest.raises(DesignNotFoundError, match=re.escape(
            "design 'hdl.examples.counter' has no class part; write module.path:Class")):
        synthesize("hdl.examples.counter", build_dir=build_dir)


def test_class_that_is_not_elaboratable(build_dir):
    with pytest.raises(DesignElaborationError, match=re.escape(
            "built a NotHardware, which is not an Amaranth Elaboratable; the design class must "
            "subclass amaranth.lib.wiring.Component or amaranth.hdl.Elaboratable")):
        synthesize(f"{BAD}:NotHardware", build_dir=build_dir)


def test_hdl_that_raises_during_elaboration(build_dir):
    with pytest.raises(DesignElaborationError, match=re.escape(
            f"elaborating {BAD}:RaisesInElaborate raised ValueError: width must be even at "
            f"{BAD}:18")):
        synthesize(f"{BAD}:RaisesInElaborate", build_dir=build_dir)


def test_constructor_arguments_missing(build_dir):
    with pytest.raises(DesignElaborationError, match=r"missing 1 required positional argument: "
                                                     r"'width'; give constructor arguments in the design name"):
        synthesize(f"{BAD}:NeedsArgument", build_dir=build_dir)


def test_two_clock_domains(build_dir):
    nl = parse_netlist(synthesize(f"{DESIGNS}/two_clocks.py:TwoClocks", build_dir=build_dir).json_text)
    with pytest.raises(UnsupportedDesignError) as info:
        Simulator(nl)
    msg = str(info.value)
    assert msg.startswith("the design uses 2 unsupported construct(s):")
    assert re.search(r"clock clk \(posedge\) drives register x\[3:0\] at .*two_clocks.py:\d+: the "
                     r"design has 2 clocks/edges but netlist2tf supports one clock domain", msg)
    assert re.search(r"clock fast_clk \(posedge\) drives register y\[3:0\] at .*two_clocks.py:\d+", msg)


def test_latch(build_dir):
    nl = parse_netlist(synthesize(f"{DESIGNS}/latch.v", build_dir=build_dir).json_text)
    with pytest.raises(UnsupportedDesignError, match=re.escape(
            "($dlatch) at design.v:3.3-3.27: latches are not supported: assign the signal in every "
            "branch of m.d.comb logic, or make it a register (m.d.sync)")):
        check_netlist(nl)


def test_yosys_error_names_the_file(build_dir):
    with pytest.raises(YosysError, match=re.escape(
            f"Yosys failed (exit 1):\n{DESIGNS}/syntax_error.v:2: ERROR: syntax error, unexpected ';'")):
        synthesize(f"{DESIGNS}/syntax_error.v", build_dir=build_dir)


@pytest.mark.parametrize("text, message", [
    ('{"modules": {"top": {"ports": ', "is not valid JSON: Expecting value at line 1 column 31"),
    ('[1, 2]', "is not a Yosys JSON netlist: (top level): [1, 2] is not of type 'object'"),
    ('{"cells": {}}', "(top level): 'modules' is a required property"),
    ('{"modules": {}}', "no modules in the netlist"),
    ('{"modules": {"a": {}, "b": {}}}', "2 modules and no unique top (a, b)"),
    ('{"modules": {"top": {"ports": {"a": {"direction": "input", "bits": ["q"]}}}}}',
     "modules/top/ports/a/bits/0: bad bit 'q' (a bit is a net number or"),
    ('{"modules": {"top": {"cells": {"c": {"type": "$and"}}}}}',
     "modules/top/cells/c: 'connections' is a required property"),
    ('{"modules": {"top": {"cells": {"c": {"type": "$and", "connections": {"A": [2.5]}}}}}}',
     "modules/top/cells/c/connections/A/0: bad bit 2.5"),
    ('{"modules": {"top": {"cells": {"c": {"type": "$and", "parameters": {"A_WIDTH": "wide"}, '
     '"connections": {}}}}}}', "modules/top/cells/c/parameters/A_WIDTH: 'wide' is not a number"),
])
def test_malformed_json(tmp_path, text, message):
    path = tmp_path / "netlist.json"
    path.write_text(text)
    with pytest.raises(NetlistFormatError, match=re.escape(message)):
        load_netlist(path)


def _module(cells, ports=None):
    ports = ports or {"a": {"direction": "input", "bits": [2]}, "y": {"direction": "output", "bits": [3]}}
    return json.dumps({"modules": {"top": {"attributes": {"top": "1"}, "ports": ports, "cells": cells,
                                           "netnames": {}}}})


def _gate(kind, a, y, src):
    return {"type": kind, "attributes": {"src": src}, "port_directions": {"A": "input", "B": "input", "Y": "output"},
            "connections": {"A": [a], "B": [a], "Y": [y]}}


def test_validator_lists_every_problem_at_once():
    cells = {
        "loop1": _gate("$_AND_", 4, 5, "loop.py:1"), "loop2": _gate("$_OR_", 5, 4, "loop.py:2"),
        "mystery": _gate("$frobnicate", 2, 3, "odd.py:7"),
        "again": _gate("$_XOR_", 2, 3, "dup.py:9"),
        "print": {"type": "$print", "attributes": {"src": "dbg.py:3"}, "port_directions": {},
                  "connections": {}},
    }
    nl = parse_netlist(_module(cells))
    with pytest.raises(UnsupportedDesignError) as info:
        check_netlist(nl)
    msg = str(info.value)
    assert msg.startswith("the design uses 4 unsupported construct(s):")
    assert ("cell mystery ($frobnicate) at odd.py:7: cell type $frobnicate is not supported by the "
            "simulator; synthesize with the `word` or `gate` flow") in msg
    assert "cell print ($print) at dbg.py:3: Print/Assert/Assume/Cover cells are not supported" in msg
    assert "combinational loop through cell:loop1, cell:loop2 at loop.py:1; loop.py:2" in msg
    assert re.search(r"net y: driven by both cell:\w+ and cell:\w+; a net needs exactly one driver", msg)


def test_cli_prints_one_line_error_and_exit_status_2(capsys, build_dir):
    rc = cli.main(["sim", "nonexistent/cpu.py:Core", "--cycles", "5", "--build-dir", str(build_dir)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("netlist2tf: error: design file nonexistent/cpu.py does not exist")
    assert "Traceback" not in err


def test_stimulus_errors(tmp_path, build_dir):
    from netlist2tf.common.errors import StimulusError
    from netlist2tf.sim.simulator import FileStimulus

    nl = parse_netlist(synthesize("hdl.examples.counter:Counter", build_dir=build_dir).json_text)
    sim = Simulator(nl)
    with pytest.raises(StimulusError, match=re.escape(
            "unknown input 'enable'; the design's inputs are: ")):
        sim.step({"enable": 1})
    with pytest.raises(StimulusError, match=re.escape("input 'load_value': value 256 does not fit in 8 bits")):
        sim.step({"load_value": 256})
    with pytest.raises(StimulusError, match=re.escape("'clk' is the clock; the simulator drives it")):
        sim.step({"clk": 1})
    bad = tmp_path / "stim.jsonl"
    bad.write_text('{"en": 1}\n{"en": 1, "load": 2}\n')
    with pytest.raises(StimulusError, match=re.escape(f"{bad}:2: input 'load': value 2 does not fit in 1 bits")):
        Simulator(nl).run(5, FileStimulus(bad))
    bad.write_text('{"en": 1}\nnot json\n')
    with pytest.raises(StimulusError, match=re.escape(f"{bad}:2: not JSON")):
        FileStimulus(bad)
