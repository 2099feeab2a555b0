"""The token economy the compiler finds by itself (netlist2tf.compile.economy, driver.find_economy,
``compile --economy auto``, the default).

Oracles: z3's counterexample replayed on the netlist simulator (the two states it names give different
outputs there); the netlist simulator's own token trace (run.verify.expected_tokens) for the frame
cost; and, for every design whose frame the search shortened, the compiled checkpoint run by stock
transformers against the netlist simulator, generated and teacher-forced, float32 and bfloat16."""

import json
import re

import numpy as np
import pytest

from netlist2tf import cli
from netlist2tf.compile import CompileSettings, frame_lengths, protocol_of, simulate
from netlist2tf.driver import find_economy
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.formal import prove_groups
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.sim import RandomStimulus, Simulator

HIDDEN = "tests/designs/unusual.py:Hidden"


def _netlist(design, build_dir):
    return parse_netlist(synthesize(design, "macro", build_dir).json_text)


def test_a_wrong_gate_is_refuted_with_a_counterexample_and_not_used(build_dir, tmp_path):
    """Hidden's r looks gated by g on random inputs (the key that shows it is never drawn): the
    search proposes it, z3 refutes it with a state whose key is that value, and nothing uses it."""
    nl = _netlist(HIDDEN, build_dir)
    lines = []
    eco = find_economy(nl, CompileSettings(), log=lines.append, build=tmp_path)
    assert [(r["gate"], r["members"]) for r in eco.refuted] == [("g", ["r"])]
    assert "output y" in eco.refuted[0]["counterexample"]
    assert not [g for g in eco.groups if g["kind"] == "reg"] and eco.settings.gated == ()
    assert any("refuted by z3" in line and "not used" in line for line in lines)
    # the counterexample is real: its two states, run on the simulator, give different outputs
    cex = prove_groups(nl, [("g", ("r",))])
    g_bit = next(sig.bits[0] for sig in nl.signals if sig.name == "g")
    g_reg = next(f"reg:{r.name}" for r in nl.registers if g_bit in r.q)
    outs = []
    for regs, ins, _ in cex.states:
        sim = Simulator(nl)
        sim.set_state({k: v for k, v in regs.items() if k in sim.state_names})
        outs.append(sim.step({k: v for k, v in ins.items() if k in {p.name for p in sim.input_ports}})["y"])
        assert ins["key"] == 0xC0FFEE42 and regs[g_reg] == 0
    assert outs[0] != outs[1]


def test_frame_cost_counts_the_simulators_tokens(build_dir):
    """frame_lengths against the netlist simulator's own token trace (verify.expected_tokens) on
    the same random inputs, for a frame with a register group, a gated write and no group."""
    from netlist2tf.run.verify import expected_tokens

    nl = _netlist("tests/designs/unusual.py:GatedMachine", build_dir)
    inits = {f"reg:{r.name}": r.init for r in nl.registers}
    for settings in (CompileSettings(), CompileSettings(gated_writes=("mem",)),
                     CompileSettings(gated=(("busy", ("acc", "mcand", "mult", "count")),), gated_writes=("mem",))):
        proto = protocol_of(nl, settings)
        run = simulate(nl, batch=1, cycles=200, samples_at=(), memories=[{}], stimulus=RandomStimulus(7))
        rows, generated, frames = expected_tokens(proto, nl, inits, 200, 1, seed=7)
        starts = [pos for _, pos in frames[0]] + [len(rows[0])]
        want = [sum(generated[0][a:b]) for a, b in zip(starts, starts[1:])]
        assert list(frame_lengths(proto, run)) == want
    assert len(set(want)) > 1                    # the gated frame really varies


@pytest.mark.parametrize("design,layers,kinds", [
    # register groups (~50 s here): under -m slow; test_compile_e2e.py compiles gated registers by hand
    pytest.param("tests/designs/unusual.py:SerialMultiplier", 8, {"reg"}, marks=pytest.mark.slow),
    # both kinds at once (~80 s on this 2-core machine): the two rows around it cover each kind
    pytest.param("tests/designs/unusual.py:GatedMachine", 8, {"reg", "write"}, marks=pytest.mark.slow),
    ("hdl.examples.regfile:RegisterFile", 4, {"write", "fold"}),
])
def test_found_groups_compile_exactly(design, layers, kinds, tmp_path, build_dir, capsys):
    """A design compiled with the groups it found: compile.json records them, the report lists
    them, and stock transformers equals the netlist simulator, generated and teacher-forced, in
    float32 and bfloat16."""
    out = tmp_path / "ckpt"
    assert cli.main(["compile", design, "--layers", str(layers), "--out", str(out), "--build-dir", str(build_dir)]) == 0
    err = capsys.readouterr().err
    assert "token economy:" in err and "generated tokens per cycle" in err
    meta = json.loads((out / "compile.json").read_text())
    eco = meta["settings"]["economy"] if "settings" in meta else meta["economy"]
    assert {g["kind"] for g in eco["groups"]} == kinds
    assert eco["frame_cost_after"]["generated_mean"] < eco["frame_cost_before"]["generated_mean"]
    for dtype in ("float32", "bfloat16"):
        assert cli.main(["verify", str(out), "--cycles", "60", "--batch", "2", "--dtype", dtype]) == 0
        assert cli.main(["verify", str(out), "--cycles", "300", "--batch", "2", "--dtype", dtype, "--teacher-forced"]) == 0
    assert capsys.readouterr().err.count("equals the netlist simulator on every output and register") == 4


def test_economy_off_hand_groups_win_and_the_search_is_deterministic(build_dir, tmp_path, capsys):
    nl = _netlist("tests/designs/unusual.py:GatedMachine", build_dir)
    hand = CompileSettings(gated=(("busy", ("acc", "mcand")),))
    a = find_economy(nl, hand, build=tmp_path / "a")
    b = find_economy(nl, hand, build=tmp_path / "b")
    assert a.record() == b.record()                                 # same inputs, same groups (fresh caches)
    assert a.settings.gated[0] == ("busy", ("acc", "mcand"))
    named = [m for _, ms in a.settings.gated for m in ms] + [g for g, _ in a.settings.gated]
    assert len(named) == len(set(named))                            # the search left the hand-written names alone
    lines = []
    find_economy(nl, hand, log=lines.append, build=tmp_path / "a")
    assert any("reused" in line for line in lines)
    out = tmp_path / "off"
    assert cli.main(["report", "tests/designs/unusual.py:GatedMachine", "--layers", "8", "--economy", "off",
                     "--out", str(out), "--build-dir", str(build_dir)]) == 0
    assert "economy" not in json.loads((out / "report.json").read_text())
    assert "token economy" not in capsys.readouterr().err
    out = tmp_path / "auto"
    assert cli.main(["report", "tests/designs/unusual.py:GatedMachine", "--layers", "8", "--out", str(out),
                     "--build-dir", str(build_dir)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert [g["gate"] for g in report["economy"]["groups"]] == ["mem.en", "busy"]
    assert "Token economy (found by the compiler)" in (out / "report.html").read_text()
    assert np.isclose(report["economy"]["frame_cost_before"]["generated_mean"], 15.0)


def _gm_stimulus(path, cycles=200):
    """GatedMachine's inputs as its user drives it: a multiplication started every 12 cycles (never
    while busy), stores every 5th cycle."""
    path.write_text("".join(json.dumps({"start": int(k % 12 == 0), "a": (k * 7) % 256, "b": (k * 13) % 256,
                                        "store": int(k % 5 == 0)}) + "\n" for k in range(cycles)))
    return path


def test_a_run_of_the_designs_own_use_prices_the_frames(build_dir, tmp_path, capsys):
    """--economy-stimulus: the frame cost before and after is the netlist simulator's token count on
    that run (frame_lengths over a simulation of the same file: the oracle of the test above), the
    groups are proved as ever, and the cache tells the run apart from the random one."""
    from netlist2tf.driver import EconomyRun
    from netlist2tf.sim import FileStimulus

    nl = _netlist("tests/designs/unusual.py:GatedMachine", build_dir)
    stim = _gm_stimulus(tmp_path / "use.jsonl")
    use = EconomyRun.of(stim, 200)
    eco = find_economy(nl, CompileSettings(), build=tmp_path / "b", run=use)
    random = find_economy(nl, CompileSettings(), build=tmp_path / "b")
    assert eco.record() != random.record()                      # not the random run's, cached apart
    run = simulate(nl, batch=1, cycles=200, samples_at=(), memories=[{}], stimulus=FileStimulus(str(stim)))
    for settings, cost in ((CompileSettings(), eco.before), (eco.settings, eco.after)):
        lengths = frame_lengths(protocol_of(nl, settings), run)
        assert np.isclose(cost.mean, lengths.mean()) and cost.worst == lengths.max()
    assert eco.after.mean < eco.before.mean
    for g in eco.groups:
        if g["kind"] == "reg":
            assert prove_groups(nl, [(g["gate"], tuple(g["members"]))], [], ("mem",)) is None
    out = tmp_path / "ckpt"
    assert cli.main(["compile", "tests/designs/unusual.py:GatedMachine", "--layers", "8", "--out", str(out),
                     "--economy-stimulus", str(stim), "--economy-cycles", "200", "--build-dir", str(build_dir)]) == 0
    assert f"{eco.before.mean:.2f} -> {eco.after.mean:.2f} generated tokens per cycle" in capsys.readouterr().err
    assert json.loads((out / "compile.json").read_text())["settings"]["economy"] == eco.record()


@pytest.mark.parametrize("args, message", [
    (["--economy-stimulus", "MISSING"], "--economy-stimulus .*missing.jsonl: no such file"),
    (["--economy", "off", "--economy-stimulus", "MISSING"], "--economy-stimulus and --economy-memory search the "
                                                            "token economy: not with --economy off"),
    (["--economy-memory", "nope=F"], "the design has no memory 'nope' \\(its memories: mem\\)"),
    (["--economy-memory", "mem"], "write MEMORY=FILE"),
    (["--economy-memory", "mem=WORDS.json"], "address 99 or its word does not fit memory mem"),
    (["--economy-cycles", "0", "--economy-memory", "mem=WORDS.json"], "give at least 1 cycle"),
])
def test_economy_run_refusals(args, message, build_dir, tmp_path, capsys):
    (tmp_path / "WORDS.json").write_text('{"99": 1}')
    args = [a.replace("MISSING", str(tmp_path / "missing.jsonl")).replace("WORDS.json", str(tmp_path / "WORDS.json"))
            for a in args]
    assert cli.main(["compile", "tests/designs/unusual.py:GatedMachine", "--layers", "8", "--out",
                     str(tmp_path / "out"), "--build-dir", str(build_dir), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert re.search(message, err), err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_cpus_groups_found_on_a_programs_run_are_the_hand_written_ones(tmp_path):
    """The CPU compiled without its hand-written groups but with the host's one promise (halt_kind and
    halt_cause read only while halt is 1), searched on hello.c's run from its image: the groups found
    are exactly the model engine's hand-written ones (~100 s)."""
    import dataclasses

    from cpu.model_engine import MODEL_RAM_SIZE, compiled_netlist, model_settings
    from cpu.programs import table_images
    from netlist2tf.driver import EconomyRun

    nl = compiled_netlist(MODEL_RAM_SIZE)
    hand = model_settings()
    promise = dataclasses.replace(hand, gated=tuple(g for g in hand.gated if g[0] == "halt"), gated_writes=(),
                                  held=(), folded_writes=())
    image = next(img for p, img in table_images(MODEL_RAM_SIZE) if p.name == "hello")
    eco = find_economy(nl, promise, build=tmp_path, run=EconomyRun.of(None, 2048, {"ram": image.words()}))
    key = lambda gated: {(g, tuple(sorted(m))) for g, m in gated}          # noqa: E731
    assert key(eco.settings.gated) == key(hand.gated)
    assert set(eco.settings.gated_writes) == set(hand.gated_writes)
    assert set(eco.settings.folded_writes) == set(hand.folded_writes)
    assert {(g, tuple(sorted(m))) for g, _, m in eco.settings.held} == {(g, tuple(sorted(m))) for g, _, m in hand.held}
