"""What the compiler remembers to compile faster, checked against computing it afresh: a cell's truth
tables (one simulation per cell shape, reused for every cell of that shape on other nets) and a z3
proof of gated groups (reused only for the same netlist, groups and prover; a refuted group is never
remembered)."""

import random

import pytest

from netlist2tf.common import Netlist2TFError
from netlist2tf.compile import CompileSettings
from netlist2tf.compile import logic
from netlist2tf.driver import prove_gating
from netlist2tf.frontend import synthesize
from netlist2tf.netlist import parse_netlist


@pytest.mark.parametrize("design", ["hdl.examples.alu:ALU", "hdl.examples.fifo:FIFO"])
def test_a_shape_simulated_once_gives_every_cell_its_own_nets(design, build_dir):
    """Every cell's functions from the shared table equal a fresh simulation of that cell alone
    (the table emptied first), cells visited in a random order."""
    nl = parse_netlist(synthesize(design, "macro", build_dir).json_text)
    cells = [c for c in nl.cells if not c.type.startswith("$_DFF") and "dff" not in c.type.lower()]
    random.Random(3).shuffle(cells)
    logic._TABLES.clear()
    shared = {}
    for c in cells:
        try:
            shared[c.name] = logic.cell_bit_functions(c)
        except Netlist2TFError as exc:
            shared[c.name] = type(exc)
    reused = len(cells) - len(logic._TABLES)
    assert reused > 0                                     # the design has cells of one shape on other nets
    for c in cells:
        logic._TABLES.clear()
        try:
            fresh = logic.cell_bit_functions(c)
        except Netlist2TFError as exc:
            fresh = type(exc)
        assert shared[c.name] == fresh, c.name
    logic._TABLES.clear()


def test_a_proof_is_reused_only_for_the_same_netlist_and_groups(build_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("NETLIST2TF_BUILD_DIR", str(tmp_path / "build"))
    nl = parse_netlist(synthesize("tests/designs/unusual.py:SerialMultiplier", "macro", build_dir).json_text)
    good = CompileSettings(layers=8, gated=("busy", ["acc", "mcand", "mult", "count"]))
    logs = []
    first = prove_gating(nl, good, logs.append)
    assert "proved that the group does not matter while busy is 0" in first and "reused" not in logs[-1]
    assert len(list((tmp_path / "build" / "proofs").glob("*.json"))) == 1
    again = prove_gating(nl, good, logs.append)
    assert again == first and logs[-1].endswith("reused]")
    # another group of the same netlist is proved afresh; a wrong one is refuted every time
    other = CompileSettings(layers=8, gated=("busy", ["acc", "mcand", "mult"]))
    prove_gating(nl, other, logs.append)
    assert "reused" not in logs[-1]
    wrong = CompileSettings(layers=8, gated=("busy", ["acc", "mcand", "mult", "count", "p"]))
    for _ in range(2):
        with pytest.raises(Netlist2TFError, match="the group matters while busy is 0"):
            prove_gating(nl, wrong, logs.append)
    assert len(list((tmp_path / "build" / "proofs").glob("*.json"))) == 2


def test_a_plan_is_reused_only_for_the_same_netlist_and_settings(build_dir, tmp_path, monkeypatch):
    """``driver.planned``: a second compile of the same netlist and settings reads the kept plan
    (the planner is not called) and writes the same weights as a fresh plan; other settings, or a
    cache file that cannot be read, plan again."""
    import numpy as np

    from netlist2tf import driver
    from netlist2tf.compile import plan_model
    from netlist2tf.weights import assemble_state

    nl = parse_netlist(synthesize("hdl.examples.fifo:FIFO", "macro", build_dir).json_text)
    settings = CompileSettings(layers=7)
    calls = []
    monkeypatch.setattr(driver, "plan_model", lambda n, s: (calls.append(s), plan_model(n, s))[1])
    first = driver.planned(nl, settings, tmp_path)
    again = driver.planned(nl, settings, tmp_path)
    assert calls == [settings] and len(list((tmp_path / "plans").iterdir())) == 1
    fresh = plan_model(nl, settings)
    for plan in (first, again):
        state, _ = assemble_state(plan)
        for k, a in assemble_state(fresh)[0].items():
            assert np.array_equal(state[k], a), k
    driver.planned(nl, CompileSettings(layers=8), tmp_path)
    assert len(calls) == 2 and len(list((tmp_path / "plans").iterdir())) == 2
    for f in (tmp_path / "plans").iterdir():
        f.write_bytes(b"cut short")
    assert driver.planned(nl, settings, tmp_path).stats == fresh.stats and len(calls) == 3
