"""The CPU checkpoint's layer report (build/cpu-model/<hash>/report/report.json), checked against
independent sources: the synthesized netlist (every cell once), the checkpoint's own weights (a
signal's FFN rows write exactly its channels; the margins recomputed from gate_proj), and a real HDL
edit (the core without Zba) through ``--compare``."""

import json
from pathlib import Path

import pytest
from safetensors import safe_open

from cpu.model_engine import FLOW, MODEL_RAM_SIZE, build_checkpoint, core_design
from netlist2tf.frontend.synth import synthesize
from hdl.rv32 import core as core_module
from netlist2tf.gadgets.layout import ResidualLayout
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.report.build import validate_report
from tests.report.test_report import margins_from_weights

pytestmark = pytest.mark.xdist_group("cpu-model")
BUILD = Path(__file__).resolve().parents[2] / "build"


@pytest.fixture(scope="module")
def built():
    folder = build_checkpoint(MODEL_RAM_SIZE, build_dir=BUILD)
    return folder, json.loads((folder / "report" / "report.json").read_text())


def _weights(folder: Path):
    files = sorted(folder.glob("*.safetensors"))
    out = {}
    for f in files:
        with safe_open(str(f), "pt") as st:
            for k in st.keys():
                if ".mlp." in k:
                    out[k] = st.get_tensor(k)
    return out


def test_every_cell_of_the_cpu_appears_once(built):
    folder, report = built
    validate_report(report)
    nl = parse_netlist(synthesize(core_design(MODEL_RAM_SIZE), flow=FLOW, build_dir=BUILD).json_text)
    names = [c["cell"] for c in report["cells"]]
    assert sorted(names) == sorted(c.name for c in nl.cells) and len(set(names)) == len(names)
    # every FFN unit of every layer belongs to one cell; rows of one layer never overlap
    for p in report["per_layer"]:
        spans = sorted(tuple(u["neurons"]) for c in report["cells"] for u in c["units"]
                       if c["place"] == "ffn" and u["layer"] == p["layer"] and u["neurons"][1] > u["neurons"][0])
        spans += [tuple(o["neurons"]) for o in p["other_neurons"]]
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        assert sum(b - a for a, b in spans) == p["ffn_neurons"]          # every row is someone's
    # abc's LUTs are named: every cell has a signal or a source line, most from the pre-abc gates
    assert all(c["signal"] or c["src"] for c in report["cells"])
    assert sum(c["attributed_by"] in ("equal", "complement") for c in report["cells"]) > 300
    csv_rows = (folder / "report" / "assignment.csv").read_text().splitlines()
    assert len(csv_rows) == 1 + len(nl.cells)


def test_a_signal_found_by_name_lives_in_the_rows_and_channels_the_weights_say(built):
    """``next_pc`` (hdl/rv32/core.py) is found by name; each of its FFN row ranges in the checkpoint
    reads something (gate_proj) and writes only channels the report gives the signal (down_proj),
    and every channel it is said to be written in that layer's FFN is written by those rows."""
    folder, report = built
    (sig,) = [s for s in report["signals"] if s["signal"] == "next_pc"]
    assert sig["kind"] == "logic" and any(src.startswith("hdl/rv32/core.py:") for src in sig["src"])
    w = _weights(folder)
    assert sig["layers"]
    for layer, where in sig["layers"].items():
        gate = w[f"model.layers.{layer}.mlp.gate_proj.weight"]
        down = w[f"model.layers.{layer}.mlp.down_proj.weight"]
        written = {ch for c in sig["channels"] if c["written"] == {"layer": int(layer), "part": "ffn"}
                   for ch in c["channels"]}
        rows = [r for a, b in where["neurons"] for r in range(a, b)]
        assert rows and all(gate[r].abs().sum() > 0 for r in rows)
        out = {int(ch) for r in rows for ch in down[:, r].nonzero().flatten().tolist()}
        assert out and out <= written, sorted(out - written)[:10]
        assert written <= out


def test_channels_are_shared_only_by_bits_that_are_never_alive_together(built):
    """The report's channels, with when each bit is written and freed: two bits that share a residual
    channel live in disjoint times (mixer l = 2l, FFN l = 2l + 1; never freed = to the end), and the
    most bits alive at once after any layer's FFN is that layer's ``live_pairs``."""
    _, report = built
    def t(x, end=10 ** 9):
        return end if x is None else 2 * x["layer"] + (x["part"] == "ffn")
    by_channel: dict = {}
    for s in report["signals"]:
        for c in s["channels"]:
            for ch in c["channels"]:
                by_channel.setdefault(ch, []).append((t(c["written"], None), t(c["freed"]), c["bit"]))
    assert len(by_channel) > 500
    for ch, spans in by_channel.items():
        spans.sort()
        for (a0, a1, x), (b0, b1, y) in zip(spans, spans[1:]):
            assert a1 <= b0, f"channel {ch}: {x} [{a0}, {a1}) and {y} [{b0}, {b1})"
    spans = [sp for v in by_channel.values() for sp in v]
    for p in report["per_layer"]:
        alive = max(sum(1 for a, b, _ in spans if a <= t < b) for t in (2 * p["layer"], 2 * p["layer"] + 1))
        assert alive == p["live_pairs"], p["layer"]


def test_the_margins_are_the_weights(built):
    folder, report = built
    w = _weights(folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg = cfg.get("text_config", cfg)
    layout = ResidualLayout.build(cfg["hidden_size"], report["totals"]["residual_pairs"], signed=True)
    for p in report["per_layer"]:
        gate = w[f"model.layers.{p['layer']}.mlp.gate_proj.weight"]
        assert (p["max_abs_preactivation"], p["max_relu_input"], p["smallest_margin"]) == \
            margins_from_weights(gate, layout), p["layer"]
        assert p["bf16_exact"] == (p["max_relu_input"] <= 256)


@pytest.mark.slow       # a second report of the whole CPU; tests/report keeps --compare in the default suite
def test_compare_the_core_without_zba(built, tmp_path, capsys):
    """A real edit: ``cpu report --no-zba --compare`` against the checkpoint's report (the core with Zba:
    sh1add/sh2add/sh3add). The comparison lists fewer FFN neurons and parameters, names the signals
    that changed, and the Zba lines of the HDL lose their cells."""
    from cpu import cli as cpu_cli
    from netlist2tf.report.compare import compare_reports, compare_text

    folder, old = built
    out = tmp_path / "nozba"
    assert cpu_cli.main(["report", "--no-zba", "--out", str(out), "--compare", str(folder / "report")]) == 0
    printed = capsys.readouterr().out
    new = json.loads((out / "report.json").read_text())
    validate_report(new)
    assert "zba=False" in new["design"] and new["compare"]["old_design"] == old["design"]
    c = compare_reports(old, {k: v for k, v in new.items() if k != "compare"}, str(folder / "report"))
    assert c == new["compare"] and compare_text(c) == printed.strip()
    # the Zba lines of hdl/rv32/core.py (is_zba, zba_res: found by reading the file) have cells in
    # FFN rows before and none after: the attribution sees the edit where it was made
    lines = Path(core_module.__file__).read_text().splitlines()
    zba = {f"hdl/rv32/core.py:{i + 1}" for i, ln in enumerate(lines)
           if ln.lstrip().startswith(("is_zba = ", "zba_res = "))}
    zba |= {f"hdl/rv32/core.py:{int(s.split(':')[1]) + 1}" for s in zba if "is_zba" in lines[int(s.split(':')[1]) - 1]}
    assert len(zba) == 3
    assert any(e["src"] in zba and e["place"] == "ffn" for e in old["cells"])
    assert not any(e["src"] in zba for e in new["cells"])
    # the totals and per-layer neurons the comparison lists are the two reports' own differences
    assert c["totals"]["parameters"] == {"old": old["totals"]["parameters"], "new": new["totals"]["parameters"]}
    # less logic: fewer cells, residual bits and FFN neurons in all (the dense size follows the widest
    # layer, which the balancer and abc's remapping move either way: 289.7 M -> 290.0 M once)
    assert new["totals"]["cells"] < old["totals"]["cells"]
    assert new["totals"]["residual_pairs"] < old["totals"]["residual_pairs"]
    want = [(p["layer"], q["ffn_neurons"], p["ffn_neurons"]) for p, q in zip(new["per_layer"], old["per_layer"])
            if p["ffn_neurons"] != q["ffn_neurons"]]
    assert [(d["layer"], d["old"], d["new"]) for d in c["per_layer"] if d["field"] == "ffn_neurons"] == want
    assert sum(p["ffn_neurons"] for p in new["per_layer"]) < sum(p["ffn_neurons"] for p in old["per_layer"])
    (rd,) = [m for m in c["signals"]["changed"] if m["signal"] == "rd_value"]   # the result mux loses Zba
    assert rd["new_neurons"] < rd["old_neurons"]
    assert "~ rd_value:" in printed and "parameters:" in printed
