"""The layer-assignment report: numbers cross-checked against the schedule and the model's weights,
and byte-identical output for the same design."""

import json

from netlist2tf import cli
from netlist2tf.assemble import assemble
from netlist2tf.frontend import synthesize
from netlist2tf.ir import parse_netlist
from netlist2tf.report import build_report, write_report


def test_report_numbers_and_determinism(tmp_path, build_dir, capsys):
    nl = parse_netlist(synthesize("hdl.examples.fifo:FIFO", "lut", build_dir).json_text)
    compiled = assemble(nl, layers=8, bits="pairs")
    report = build_report(compiled.plan, compiled.stats["nonzero"])      # the plan, not the weights
    per = report["per_layer"]
    assert len(per) == 8 and report["logic_depth"] == compiled.schedule.depth == 6
    # the signed checkpoint (the default) computes the same pre-activations: its largest ReLU input
    # (bias plus |weights| over +-1 inputs) is the report's, its row sums of |weights| a bound no looser
    signed = assemble(nl, layers=8)
    assert build_report(signed.plan)["per_layer"] == per
    for p, layer in zip(per, signed.model.model.layers):
        rows = layer.mlp.gate_proj.weight.double() / 128
        one = signed.layout.one
        bits = rows.clone()
        bits[:, one] = 0
        top = rows[:, one] + bits.abs().sum(dim=1)
        assert p["max_relu_input"] == (int(top.max().item()) if p["ffn_neurons"] else 0)
        assert int(rows.abs().sum(dim=1).max().item()) <= p["max_abs_preactivation"]
    # the plan's numbers equal what the written pair weights say: neurons per layer are the non-zero
    # rows of each layer's gate projection, the pre-activation bound the largest row sum of |weights|
    for p, layer in zip(per, compiled.model.model.layers):
        gate = layer.mlp.gate_proj.weight
        assert p["ffn_neurons"] == int((gate.abs().sum(dim=1) > 0).sum())
        assert p["max_abs_preactivation"] == int((gate.abs().sum(dim=1) / 128).max().item())
        assert p["max_abs_preactivation"] <= 256 and p["bf16_exact"]
        # the largest ReLU input: the constant channel's weight (the bias) plus the other positive ones
        rows = gate / 128
        one = compiled.plan.layout.one
        pos = rows[:, one] + rows.clamp(min=0).sum(dim=1) - rows[:, one].clamp(min=0)
        assert p["max_relu_input"] == (int(pos.max().item()) if p["ffn_neurons"] else 0)
        assert p["smallest_margin"] == (1.0 if p["ffn_neurons"] else None)
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
    assert sum(p["cells"] for p in per) == len(nl.cells)
    levels = [step["level"] for step in report["critical_path"]]
    assert levels == sorted(levels) and levels[-1] == 6
    assert report["totals"]["tokens_per_cycle"] == 8

    a, b = tmp_path / "a", tmp_path / "b"
    write_report(report, a)
    write_report(build_report(assemble(nl, layers=8, bits="pairs").plan, compiled.stats["nonzero"]), b)
    for name in ("report.json", "report.html"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert json.loads((a / "report.json").read_text())["design"] == "top"     # no name given: the netlist's
    assert cli.main(["report", "hdl.examples.counter:Counter", "--out", str(tmp_path / "c"),
                     "--build-dir", str(build_dir)]) == 0
    assert json.loads((tmp_path / "c" / "report.json").read_text())["design"] == "hdl.examples.counter:Counter"
    assert "Layer assignment of hdl.examples.counter:Counter" in (tmp_path / "c" / "report.html").read_text()
    assert "<img alt=\"per-layer plots\" src=\"data:image/png;base64," in (tmp_path / "c" / "report.html").read_text()


def test_report_says_how_each_memory_was_lowered(build_dir):
    """A ROM's read ports: FFN decoders, flat up to rom.FLAT_MAX_WORDS words, with the neurons the
    decoder really has (one per word plus the constant-word fix-ups: at least 16 for 16 words, no
    DeltaNet head); a memory of three write ports: three XOR banks, each named with its origin and
    read through DeltaNet banks in the layer the schedule put the read."""
    from netlist2tf.plan import CompileSettings, plan_model
    from pathlib import Path
    designs = Path(__file__).parent / "designs"
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

    from netlist2tf.plan import CompileSettings, plan_model
    from tests.designs.constructs import _table
    designs = Path(__file__).parent / "designs"
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
