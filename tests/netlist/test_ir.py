"""The IR: golden dumps of small designs (hand-checked against the Amaranth source) and the
networkx view's keys."""

from pathlib import Path

import networkx as nx

from netlist2tf.netlist import nodes as N
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.graph import combinational_order, netlist_graph
from netlist2tf.netlist.ir import CONST0, CONST1, parse_netlist

ROOT = str(Path(__file__).resolve().parents[2])


def _dump(design, build_dir, flow="word"):
    nl = parse_netlist(synthesize(design, flow, build_dir).json_text)
    return nl, nl.dump().replace(ROOT + "/", "")


def test_counter_dump(build_dir):
    # counter.py: count <= load ? load_value : count + 1 (when en), sync reset to 0; wrap is
    # comb: count == 255 & en & ~load.
    _, dump = _dump("hdl.examples.counter:Counter", build_dir)
    assert dump == """\
netlist top: 50 nets, 8 cells, 1 registers, 0 memories
input  load: 1
input  load_value: 8
input  clk: 1
input  rst: 1
output count: 8
output wrap: 1
input  en: 1
reg  count[7:0] <= $procmux$3_Y[7:0] init=0x0 en=$auto$simple.cc:193:make_patterns_logic$9 srst=rst->0x0 ($sdffe $auto$ff.cc:337:slice$8 @ hdl/examples/counter.py:48)
cell   $4[8:0] = $add(A=count[7:0] B=1'b1) A_SIGNED=0 A_WIDTH=8 B_SIGNED=0 B_WIDTH=1 Y_WIDTH=9 @ hdl/examples/counter.py:61
cell   $1 = $eq(A=count[7:0] B=8'b11111111) A_SIGNED=0 A_WIDTH=8 B_SIGNED=0 B_WIDTH=8 Y_WIDTH=1 @ hdl/examples/counter.py:55
cell   $2 = $and(A=$1 B=en) A_SIGNED=0 A_WIDTH=1 B_SIGNED=0 B_WIDTH=1 Y_WIDTH=1 @ hdl/examples/counter.py:56
cell   $3 = $not(A=load) A_SIGNED=0 A_WIDTH=1 Y_WIDTH=1 @ hdl/examples/counter.py:56
cell   wrap = $and(A=$2 B=$3) A_SIGNED=0 A_WIDTH=1 B_SIGNED=0 B_WIDTH=1 Y_WIDTH=1 @ hdl/examples/counter.py:56
cell   $auto$simple.cc:193:make_patterns_logic$9 = $reduce_bool(A={load, en}) A_SIGNED=0 A_WIDTH=2 Y_WIDTH=1 @ 
cell   $procmux$1_Y[7:0] = $mux(A=8'bxxxxxxxx B=$4[7:0] S=en) WIDTH=8 @ 
cell   $procmux$3_Y[7:0] = $mux(A=$procmux$1_Y[7:0] B=load_value[7:0] S=load) WIDTH=8 @ 
"""


def test_register_file_memory(build_dir):
    # regfile.py: 8 x 16 memory, init i*3+1; r1 async, r2 sync and not transparent; one write port.
    nl, dump = _dump("hdl.examples.regfile:RegisterFile", build_dir)
    assert "\n".join(line for line in dump.splitlines() if line.startswith(("mem", "  "))) == """\
mem    regs: 8x16 offset=0 @ hdl/examples/regfile.py:63
  rd0 async r1_data[15:0] = [r1_addr[2:0]]
  rd1 sync r2_data[15:0] = [r2_addr[2:0]] en=1'b1 transparent_for=[]
  wr0 [w_addr[2:0]] <= w_data[15:0] en={w_en, w_en, w_en, w_en, w_en, w_en, w_en, w_en, w_en, w_en, w_en, w_en, w_en, w_en, w_en, w_en}"""
    (mem,) = nl.memories
    assert mem.init == tuple(i * 3 + 1 for i in range(8))
    assert mem.read_ports[1].enable == CONST1 and mem.read_ports[1].srst == CONST0


def test_graph_keys_and_order(build_dir):
    #   load ─$not──────────┐
    #   count ─$eq─$and─────$and── wrap     (count is a register: a source, not combinational)
    #   en ────────┘
    nl = parse_netlist(synthesize("hdl.examples.counter:Counter", "word", build_dir).json_text)
    g = netlist_graph(nl)
    by_output = {nl.sig_str(c.outputs[0][1]): f"cell:{c.name}" for c in nl.cells}
    eq, and1, not_, wrap = by_output["$1"], by_output["$2"], by_output["$3"], by_output["wrap"]
    (reg,) = nl.registers
    assert g.nodes["in:en"][N.KIND] == N.NODE_INPUT
    assert g.nodes[f"reg:{reg.name}"][N.KIND] == N.NODE_REGISTER
    assert not g.nodes[f"reg:{reg.name}"][N.COMBINATIONAL]
    assert g.nodes[eq][N.KIND] == N.NODE_CELL and g.nodes[eq][N.COMBINATIONAL]
    assert g.nodes[eq][N.SRC].endswith("counter.py:55")
    assert set(g.predecessors(wrap)) == {and1, not_}
    assert set(g.predecessors(eq)) == {f"reg:{reg.name}"}
    assert g.has_edge(wrap, "out:wrap") and g.edges[wrap, "out:wrap"][N.NETS] == nl.outputs[1].bits
    order = combinational_order(g)
    assert order.index(eq) < order.index(and1) < order.index(wrap)
    assert all(d[N.NETS] for _, _, d in g.edges(data=True))
    assert nx.is_directed_acyclic_graph(g.subgraph(order))


def test_the_schema_check_is_remembered_only_for_the_text_that_passed(build_dir, tmp_path, monkeypatch):
    """A netlist text that passed Yosys's JSON schema once is not checked again (the check takes a
    second on a large design); any other text still is, and a malformed one is still refused."""
    import json

    import pytest

    from netlist2tf.common import NetlistFormatError
    from netlist2tf.netlist import ir

    monkeypatch.setenv("NETLIST2TF_BUILD_DIR", str(tmp_path))
    text = synthesize("hdl.examples.counter:Counter", "word", build_dir).json_text
    calls = []
    check = ir._check_schema
    monkeypatch.setattr(ir, "_check_schema", lambda doc, origin: (calls.append(origin), check(doc, origin)))
    first = parse_netlist(text, "a")
    second = parse_netlist(text, "b")
    assert calls == ["a"] and first.dump() == second.dump()
    doc = json.loads(text)
    top = next(iter(doc["modules"].values()))
    top["cells"][next(iter(top["cells"]))]["connections"] = "not an object"
    with pytest.raises(NetlistFormatError, match="connections"):
        parse_netlist(json.dumps(doc), "broken")
    assert calls == ["a", "broken"]
