"""The layer-assignment report: numbers cross-checked against the schedule and the model's weights,
and byte-identical output for the same design."""

import html
import json
import re
import shutil

import pytest

from netlist2tf import cli
from netlist2tf.compile.plan import CompileSettings
from netlist2tf.driver import compile_netlist
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.report.build import build_report, validate_report, write_report


def margins_from_weights(gate, layout) -> tuple[int, int, int | None]:
    """(largest |pre-activation|, largest one, smallest |pre-activation| other than 0) of a signed
    checkpoint's FFN (``gate``: gate_proj.weight = 128 x the pre-activation's weights), over every
    +-1 value of the bit channels a row reads (the constant channel 1, an anchor its value): the
    reachable values enumerated as a set, in halves (a signed weight may be a half). Independent of
    the report's subset sums over pair-space neurons."""
    from fractions import Fraction
    anchors = dict(layout.anchors)
    big = pos = 0
    small = None
    for row in (gate.double() / 128):
        nz = row.nonzero().flatten().tolist()
        if not nz:
            continue
        c = Fraction(0)
        values = {Fraction(0)}
        for ch in nz:
            w = Fraction(row[ch].item())
            if ch == layout.one:
                c += w
            elif ch in anchors:
                c += w * anchors[ch]
            else:
                values = {v + w for v in values} | {v - w for v in values}
        values = {v + c for v in values}
        big = max(big, max(abs(v) for v in values))
        pos = max(pos, max(values))
        nonzero = [abs(v) for v in values if v]
        if nonzero:
            small = min(nonzero) if small is None else min(small, min(nonzero))
    as_int = lambda x: int(x) if x is not None and x == int(x) else x
    return as_int(big), as_int(pos), as_int(small)


def test_report_numbers_and_determinism(tmp_path, build_dir, capsys):
    nl = parse_netlist(synthesize("hdl.examples.fifo:FIFO", "lut", build_dir).json_text)
    compiled = compile_netlist(nl, CompileSettings(layers=8, bits="pairs"), prove=False)
    report = build_report(compiled.plan, compiled.stats["nonzero"])      # the plan, not the weights
    per = report["per_layer"]
    assert len(per) == 8 and report["logic_depth"] == compiled.schedule.depth == 6
    # the signed checkpoint (the default) computes the same pre-activations: its margins, recomputed
    # from its weights over every +-1 value of the channels each row reads, are the report's
    signed = compile_netlist(nl, CompileSettings(layers=8), prove=False)
    assert build_report(signed.plan)["per_layer"] == per
    for p, layer in zip(per, signed.model.model.layers):
        assert (p["max_abs_preactivation"], p["max_relu_input"], p["smallest_margin"]) == \
            margins_from_weights(layer.mlp.gate_proj.weight, signed.plan.model_layout)
    for p, layer in zip(per, compiled.model.model.layers):
        gate = layer.mlp.gate_proj.weight
        assert p["ffn_neurons"] == int((gate.abs().sum(dim=1) > 0).sum())
        assert p["max_abs_preactivation"] <= 256 and p["bf16_exact"]
        assert p["smallest_margin"] == (1 if p["ffn_neurons"] else None)      # integer weights reach 0 and +-1
    # pairs in use per layer: the most held at once, so the largest is what the allocation needed
    assert max(p["live_pairs"] for p in per) == max(compiled.plan.pairs.values()) + 1
    assert all(0 < p["live_pairs"] <= report["totals"]["residual_pairs"] for p in per)
    assert report["totals"]["parameters"] == sum(t.numel() for t in compiled.model.parameters())
    # layer 0: 2 input chunks, 2 register chunks and the write port's 2 chunks (gathered there)
    assert per[0]["deltanet_heads"] == 6 and per[1]["memory_reads"] == ["storage.0"]
    # what the heads hold (hand-checked against the FIFO: 2 input, 2 register, 2 write-port chunks in
    # layer 0; its 16 x 8 storage as one bank read in layer 1)
    holds = [h["holds"] for h in per[0]["deltanet_value_heads"]]
    assert len(holds) == 6 and sum(h.startswith("input") for h in holds) == 2
    assert sum(h.startswith("registers") for h in holds) == 2 and sum(h.startswith("write-port") for h in holds) == 2
    assert [h["holds"] for h in per[1]["deltanet_value_heads"]][0].startswith("storage read port 0: bank 0 (words 0-")
    # a register's head names the signal and the line that declares it (read from the HDL file here)
    from pathlib import Path
    import hdl.examples.fifo as fifo
    line = next(i + 1 for i, ln in enumerate(Path(fifo.__file__).read_text().splitlines())
                if ln.lstrip().startswith("r_ptr = Signal"))
    (head,) = [h for h in per[0]["deltanet_value_heads"] if "r_ptr" in h["holds"]]
    assert {"signal": "r_ptr", "src": f"hdl/examples/fifo.py:{line}"} in head["signals"]
    assert sum(p["cells"] for p in per) == len(nl.cells)
    validate_report(report)
    assert sorted(c["cell"] for c in report["cells"]) == sorted(c.name for c in nl.cells)
    levels = [step["level"] for step in report["critical_path"]]
    assert levels == sorted(levels) and levels[-1] == 6
    assert report["totals"]["tokens_per_cycle"] == 8

    a, b = tmp_path / "a", tmp_path / "b"
    write_report(report, a)
    write_report(build_report(compile_netlist(nl, CompileSettings(layers=8, bits="pairs"), prove=False).plan, compiled.stats["nonzero"]), b)
    for name in ("report.json", "report.html", "assignment.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert json.loads((a / "report.json").read_text())["design"] == "top"     # no name given: the netlist's
    assert cli.main(["report", "hdl.examples.counter:Counter", "--out", str(tmp_path / "c"),
                     "--build-dir", str(build_dir)]) == 0
    assert json.loads((tmp_path / "c" / "report.json").read_text())["design"] == "hdl.examples.counter:Counter"
    assert "<h1>hdl.examples.counter:Counter: layer assignment</h1>" in (tmp_path / "c" / "report.html").read_text()
    assert "<img alt=\"per-layer plots\" src=\"data:image/png;base64," in (tmp_path / "c" / "report.html").read_text()


def test_report_says_how_each_memory_was_lowered(build_dir):
    """A ROM's read ports: FFN decoders, flat up to rom.FLAT_MAX_WORDS words, with the neurons the
    decoder really has (one per word plus the constant-word fix-ups: at least 16 for 16 words, no
    DeltaNet head); a memory of three write ports: three XOR banks, each named with its origin and
    read through DeltaNet banks in the layer the schedule put the read."""
    from netlist2tf.compile.plan import CompileSettings, plan_model
    from pathlib import Path
    designs = Path(__file__).parent.parent / "designs"
    plan = plan_model(parse_netlist(synthesize(f"{designs}/constructs.py:Rom16x8", "macro", build_dir).json_text),
                      CompileSettings(layers=4))
    (rom,) = build_report(plan)["memories"]
    assert rom["write_ports"] == 0 and rom["src"].endswith("constructs.py:29")   # the Memory(...) line
    (port,) = rom["read_ports"]
    assert port["lowered_as"] == "FFN decoder (flat)" and port["layers"] == [0] and 16 <= port["neurons"] <= 17
    assert plan.stats["deltanet_heads"][1:] == [0] * 3          # no head reads it
    plan = plan_model(parse_netlist(synthesize(f"{designs}/constructs.py:ThreeWritePorts", "macro",
                                               build_dir).json_text), CompileSettings(layers=11))
    mems = build_report(plan)["memories"]
    assert [m["memory"] for m in mems] == ["mem$bank0", "mem$bank1", "mem$bank2"]
    for q, m in enumerate(mems):
        assert m["origin"].startswith(f"XOR bank {q} of memory mem") and m["write_ports"] == 1
        for r in m["read_ports"]:
            assert r["lowered_as"] == "DeltaNet banks" and r["layers"] == [plan.schedule.read_layer[(m["memory"], r["port"])]]


def test_report_says_which_way_a_rom_was_held_and_why(build_dir):
    """``--roms auto`` (the default) plans a ROM both ways and the report gives both parameter counts
    with the choice; ``--roms deltanet`` reports the preloaded banks (16 words: one bank, one key
    head) and the non-zero words the prompt writes (counted from the table Amaranth was given)."""
    from pathlib import Path

    from netlist2tf.compile.plan import CompileSettings, plan_model
    from tests.designs.constructs import _table
    designs = Path(__file__).parent.parent / "designs"
    nl = parse_netlist(synthesize(f"{designs}/constructs.py:Rom16x8", "macro", build_dir).json_text)
    auto = plan_model(nl, CompileSettings(layers=4))
    (port,) = build_report(auto)["memories"][0]["read_ports"]
    rec = auto.stats["roms"]
    assert f"ffn: {rec['ffn_parameters']:,} parameters" in port["why"]
    assert f"deltanet: {rec['deltanet_parameters']:,} parameters" in port["why"]
    assert port["lowered_as"] == ("FFN decoder (flat)" if rec["chosen"] == "ffn" else "DeltaNet banks preloaded by the prompt")
    pre = plan_model(nl, CompileSettings(layers=4, roms="deltanet"))
    (rom,) = build_report(pre)["memories"]
    assert rom["write_ports"] == 0 and "preloaded" in rom["origin"] and "--roms deltanet" in rom["origin"]
    (port,) = rom["read_ports"]
    words = sum(1 for w in _table(16, 8, 1) if w)
    assert port["lowered_as"] == "DeltaNet banks preloaded by the prompt" and port["key_heads"] == 1
    assert port["layers"] == [pre.schedule.read_layer[("rom", 0)]]
    assert f"its {words} non-zero words" in port["why"]
    assert f"attention: {rec['attention_parameters']:,} parameters" in build_report(auto)["memories"][0][
        "read_ports"][0]["why"]
    # --roms attention: the port is a q head of its (full-attention) layer, listed in that layer too
    look = plan_model(nl, CompileSettings(layers=4, roms="attention"))
    report = build_report(look)
    validate_report(report)
    (rom,) = report["memories"]
    assert rom["write_ports"] == 0 and "attention lookups" in rom["origin"] and "--roms attention" in rom["origin"]
    (port,) = rom["read_ports"]
    layer = look.schedule.read_layer[("rom", 0)]
    assert port["lowered_as"] == "attention lookup over the prompt" and port["layers"] == [layer]
    assert port["attention_heads"] == [0] and f"its {words} non-zero words" in port["why"]
    per = report["per_layer"][layer]
    assert per["type"] == "full_attention" and per["deltanet_heads"] == 0
    assert [h["holds"] for h in per["attention_heads"]] == ["ROM rom read port 0: bits 0-7 of its 16 words (KV head 0)"]
    assert not any("attention_heads" in p for p in report["per_layer"] if p["layer"] != layer)


def test_compare_lists_what_an_edit_changed(tmp_path, build_dir, capsys):
    """``report --compare``: the counter at 8 and 12 bits. The old report's per-layer neurons and the
    new one's, read from each report, differ where the comparison says; the count signal grows; a
    missing, malformed or foreign old report is one clear error (exit 2) before any work."""
    from netlist2tf.report.compare import compare_reports

    old, new = tmp_path / "old", tmp_path / "new"
    assert cli.main(["report", "hdl.examples.counter:Counter(width=8)", "--layers", "4", "--out", str(old),
                     "--build-dir", str(build_dir)]) == 0
    assert cli.main(["report", "hdl.examples.counter:Counter(width=12)", "--layers", "4", "--out", str(new),
                     "--build-dir", str(build_dir), "--compare", str(old / "report.json")]) == 0
    printed = capsys.readouterr().out
    a, b = (json.loads((f / "report.json").read_text()) for f in (old, new))
    c = b["compare"]
    assert c == compare_reports(a, {k: v for k, v in b.items() if k != "compare"}, str(old / "report.json"))
    want = [(p["layer"], q["ffn_neurons"], p["ffn_neurons"]) for p, q in zip(b["per_layer"], a["per_layer"])
            if p["ffn_neurons"] != q["ffn_neurons"]]
    assert want and [(d["layer"], d["old"], d["new"]) for d in c["per_layer"] if d["field"] == "ffn_neurons"] == want
    (count,) = [m for m in c["signals"]["changed"] if m["signal"] == "count (next value)"]
    assert count["new_neurons"] > count["old_neurons"]
    assert "count (next value)" in printed and "Changed since" in (new / "report.html").read_text()
    for bad, says in ((tmp_path / "none.json", "no such file"), (new / "assignment.csv", "not a readable JSON"),
                      (tmp_path / "mine.json", "not a netlist2tf layer report")):
        if bad.name == "mine.json":
            bad.write_text('{"design": "x"}')
        assert cli.main(["report", "hdl.examples.counter:Counter", "--layers", "4", "--out", str(tmp_path / "x"),
                         "--build-dir", str(build_dir), "--compare", str(bad)]) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "x").exists()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium; "
                                              ".ci/run installs it)")
def test_the_page_in_headless_chromium(tmp_path, build_dir):
    """The HTML page rendered by a real browser: its script runs without an error, and the search
    (``?q=`` pre-fills the box, as typing does) leaves exactly the signals whose name or line match."""
    folder = tmp_path / "r"
    assert cli.main(["report", "hdl.examples.fifo:FIFO", "--layers", "8", "--out", str(folder),
                     "--build-dir", str(build_dir)]) == 0
    report = json.loads((folder / "report.json").read_text())
    name = "r_ptr (next value)"
    want = [s["signal"] for s in report["signals"]
            if "r_ptr" in " ".join([s["signal"], *s["src"], *s["bits"]]).lower()]
    assert name in want and len(want) < len(report["signals"])
    dom, log = _render(folder / "report.html", "r_ptr", tmp_path)
    assert 'data-ready="1"' in dom, log[-2000:]
    assert re.search(r'<pre id="errors"></pre>', dom) and "Uncaught" not in log
    shown = re.findall(r'<tr data-k="[^"]*">\s*<td><b>([^<]*)</b>', dom)
    assert [html.unescape(s) for s in shown] == want
    assert f'data-shown="{len(want)}"' in dom
    dom, _ = _render(folder / "report.html", "", tmp_path)
    assert len(re.findall(r'<tr data-k="[^"]*">', dom)) == len(report["signals"])


def _render(page, query: str, tmp_path):
    """(the DOM after the page's script ran, Chromium's log) for ``page?q=query``."""
    import subprocess
    url = page.resolve().as_uri() + (f"?q={query}" if query else "")
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / ('chrome' + query)}", "--enable-logging=stderr", "--v=0",
                           "--dump-dom", url], capture_output=True, text=True, timeout=120)
    return proc.stdout, proc.stderr


_EDITED = '''
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Acc(wiring.Component):
    def __init__(self):
        super().__init__({"x": In(WIDTH), "y": Out(WIDTH)})

    def elaborate(self, platform):
        m = Module()
        acc = Signal(WIDTH)
        m.d.sync += acc.eq(acc + self.x)
        m.d.comb += self.y.eq(acc)
        return m
'''


def test_rebuilding_an_edited_design_says_what_changed_since_the_last_build(tmp_path, build_dir, capsys):
    """The rebuild loop without --compare: the same folder, the same design. Unchanged HDL writes the
    same bytes and says so; after an edit (the accumulator 6 -> 10 bits) the report compares itself
    with the one it replaces, and the grown signals are listed."""
    design_file = tmp_path / "acc.py"
    design_file.write_text("WIDTH = 6\n" + _EDITED)
    design, out = f"{design_file}:Acc", tmp_path / "r"
    argv = ["report", design, "--layers", "4", "--out", str(out), "--build-dir", str(build_dir)]
    assert cli.main(argv) == 0
    first = {f: (out / f).read_bytes() for f in ("report.json", "report.html", "assignment.csv")}
    capsys.readouterr()
    assert cli.main(argv) == 0
    assert "unchanged since the last build" in capsys.readouterr().out
    assert {f: (out / f).read_bytes() for f in first} == first
    old = json.loads(first["report.json"])
    design_file.write_text("WIDTH = 10\n" + _EDITED)
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    new = json.loads((out / "report.json").read_text())
    assert new["compare"]["old_file"].startswith("the last build") and "compare" not in old
    grown = {m["signal"]: m for m in new["compare"]["signals"]["changed"]}
    # the register acc drives the output y directly: Yosys keeps one wire for both, named y
    acc = grown["y (next value)"]
    assert acc["new_neurons"] > acc["old_neurons"]
    assert new["totals"]["residual_pairs"] > old["totals"]["residual_pairs"]
    assert new["compare"]["totals"]["residual_pairs"] == {"old": old["totals"]["residual_pairs"],
                                                         "new": new["totals"]["residual_pairs"]}
    assert "~ y (next value)" in printed
