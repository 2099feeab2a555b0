"""Simulation-only constructs ($display and friends in Verilog, Print/Assert in Amaranth): one error
line that names the user's file and line, the construct and the fix, exit status 2 (not a complaint
about the synthesis cache's JSON file)."""

import pytest

from netlist2tf import cli

HEAD = "module top(input clk, input a, output reg y);\n"


def _synth_error(path, build, capsys):
    rc = cli.main(["synth", str(path), "--build-dir", str(build)])
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert rc == 2, captured.err
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err and not captured.out
    assert str(build) not in lines[0] and "write_json" not in lines[0] and ".json" not in lines[0]
    return lines[0]


@pytest.mark.parametrize("body, line, construct", [
    # a clocked $display (a triggered $print cell): the validator's old message named design.v
    ("  always @(posedge clk) begin\n    y <= a;\n    $display(\"hi\");\n  end\n", 4, "$display"),
    # untriggered $print cells (empty TRG_POLARITY): the netlist reader blamed the cached JSON file
    ("  always @(posedge clk) y <= a;\n  always @* begin\n    $write(\"a=%d\", a);\n  end\n", 4, "$write"),
    ("  always @(posedge clk) y <= a;\n  initial $display(\"start\");\n", 3, "$display"),
    # Yosys refuses $finish outside an initial block itself
    ("  always @(posedge clk) begin\n    y <= a;\n    if (a) $finish;\n  end\n", 4, "$finish"),
])
def test_verilog_system_task_is_one_line_naming_file_and_line(tmp_path, capsys, body, line, construct):
    path = tmp_path / "top.v"
    path.write_text(HEAD + body + "endmodule\n")
    build = tmp_path / "build"
    msg = _synth_error(path, build, capsys)
    assert msg.startswith(f"netlist2tf: error: {path}:{line}: {construct} is a simulation-only system task")
    assert "`ifndef SYNTHESIS" in msg
    assert "design.v" not in msg
    # the same message when the netlist comes from the cache
    assert _synth_error(path, build, capsys) == msg


def test_the_suggested_guard_works(tmp_path, capsys):
    path = tmp_path / "top.v"
    path.write_text(HEAD + "  always @(posedge clk) begin\n    y <= a;\n`ifndef SYNTHESIS\n"
                    "    $display(\"hi\");\n    if (a) $finish;\n`endif\n  end\nendmodule\n")
    rc = cli.main(["synth", str(path), "--build-dir", str(tmp_path / "build")])
    assert rc == 0, capsys.readouterr().err


def test_several_are_counted_on_the_same_line(tmp_path, capsys):
    path = tmp_path / "top.v"
    path.write_text(HEAD + "  always @(posedge clk) begin\n    y <= a;\n    $display(\"a\");\n  end\n"
                    "  always @(posedge clk) $write(\"b\");\n  always @* $display(\"c\");\nendmodule\n")
    msg = _synth_error(path, tmp_path / "build", capsys)
    assert msg.startswith(f"netlist2tf: error: {path}:4: $display is a simulation-only system task")
    assert msg.endswith(f"(and 2 more: {path}:6, {path}:7)")


def test_amaranth_print_and_assert(tmp_path, capsys):
    path = tmp_path / "dbg.py"
    path.write_text("from amaranth import Assert, Module, Print\n"
                    "from amaranth.lib import wiring\n"
                    "from amaranth.lib.wiring import In, Out\n"
                    "class Dbg(wiring.Component):\n"
                    "    a: In(4)\n"
                    "    y: Out(4)\n"
                    "    def elaborate(self, platform):\n"
                    "        m = Module()\n"
                    "        m.d.sync += self.y.eq(self.a)\n"
                    "        m.d.comb += Print(\"a\", self.a)\n"
                    "        m.d.sync += Assert(self.a != 15)\n"
                    "        return m\n")
    rc = cli.main(["sim", f"{path}:Dbg", "--cycles", "5", "--build-dir", str(tmp_path / "build")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert f"{path}:10: Print is simulation-only, not hardware; remove it" in err
    assert err.rstrip().endswith(f"(and 1 more: {path}:11)")
