"""The VCD written by the simulator opens with pyvcd's reader and holds the simulated values."""

from vcd.reader import TokenKind, tokenize

from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.sim.simulator import RandomStimulus, Simulator
from netlist2tf.sim.waveform import PERIOD


def _read_vcd(path):
    """{(scope, name): {time: value}} and the declared sizes, via pyvcd's tokenizer."""
    ids, sizes, changes, scope, t = {}, {}, {}, [], 0
    with open(path, "rb") as f:
        for tok in tokenize(f):
            if tok.kind is TokenKind.SCOPE:
                scope.append(tok.scope.ident)
            elif tok.kind is TokenKind.UPSCOPE:
                scope.pop()
            elif tok.kind is TokenKind.VAR:
                key = (".".join(scope), tok.var.reference)
                ids.setdefault(tok.var.id_code, []).append(key)
                sizes[key] = tok.var.size
                changes[key] = {}
            elif tok.kind is TokenKind.CHANGE_TIME:
                t = tok.data
            elif tok.kind in (TokenKind.CHANGE_SCALAR, TokenKind.CHANGE_VECTOR):
                val = tok.data.value if tok.kind is TokenKind.CHANGE_VECTOR else tok.data.value
                v = int(val) if not isinstance(val, str) else int(val.replace("x", "0"), 2 if len(val) > 1 else 10)
                for key in ids[tok.data.id_code]:
                    changes[key][t] = v
    return changes, sizes


def _value_at(changes: dict, t: int) -> int:
    return changes[max(k for k in changes if k <= t)]


def test_vcd_holds_the_simulated_values(tmp_path, build_dir):
    nl = parse_netlist(synthesize("hdl.examples.fifo:FIFO", build_dir=build_dir).json_text)
    path = tmp_path / "fifo.vcd"
    cycles = 300
    trace = Simulator(nl).run(cycles, RandomStimulus(seed=5), vcd=path)
    changes, sizes = _read_vcd(path)
    ports = {p.name: p for p in nl.ports}
    for name in ["w_data", "w_en", "r_en", "rst", "r_data", "r_rdy", "w_rdy", "level"]:
        key = ("top", name)
        assert sizes[key] == ports[name].width
        values = trace.inputs.get(name, trace.outputs.get(name))
        assert [_value_at(changes[key], k * PERIOD) for k in range(cycles)] == [int(v) for v in values[:, 0]]
    # The clock rises at the start of every cycle and falls half-way.
    clk = changes[("top", "clk")]
    assert all(clk[k * PERIOD] == 1 and clk[k * PERIOD + PERIOD // 2] == 0 for k in range(cycles))
    # Sanity of the comparison itself: the data output takes many values.
    assert len({int(v) for v in trace.outputs["r_data"][:, 0]}) > 20


def test_vcd_is_deterministic_and_shows_one_batch_instance(tmp_path, build_dir):
    nl = parse_netlist(synthesize("hdl.examples.counter:Counter", build_dir=build_dir).json_text)
    a, b = tmp_path / "a.vcd", tmp_path / "b.vcd"
    trace = Simulator(nl, batch=4).run(100, RandomStimulus(seed=1), vcd=a, vcd_instance=2)
    Simulator(nl, batch=4).run(100, RandomStimulus(seed=1), vcd=b, vcd_instance=2)
    assert a.read_bytes() == b.read_bytes()
    changes, _ = _read_vcd(a)
    assert [_value_at(changes[("top", "count")], k * PERIOD) for k in range(100)] == \
        [int(v) for v in trace.outputs["count"][:, 2]]
