"""netlist2tf.netlist.formal: the z3 proof that a gated register group does not matter while its gate is 0.

Oracles: the netlist simulator (the prover's reading of each cell, on random concrete states, must
equal what sim.py computes), and hand-made cases (a group that is a don't-care is proved; adding a
register that an output reads while idle gives a counterexample naming that output)."""

import pytest

from netlist2tf.common.errors import Netlist2TFError
from netlist2tf.netlist.formal import prove_gated
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist

SERIAL = "tests/designs/unusual.py:SerialMultiplier"
GROUP = ["acc", "mcand", "mult", "count"]


@pytest.fixture(scope="module")
def serial(build_dir):
    return parse_netlist(synthesize(SERIAL, "macro", build_dir).json_text)


def test_serial_multiplier_group_is_proved(serial):
    assert prove_gated(serial, "busy", GROUP) is None


def test_a_group_that_matters_gives_a_counterexample(serial):
    """``p`` (the result register) is read by an output while idle: the counterexample says so, with
    the two copies' values, and those values really do give different outputs on the simulator."""
    cex = prove_gated(serial, "busy", GROUP + ["p"])
    # z3 may pick a state where p's next value differs too (busy's next 1): which extras it names
    # depends on the solver's state in the worker process, so only "output p" is required
    assert cex is not None and "output p" in cex.what and all(w.endswith(" p") or "register p" in w for w in cex.what)
    pa, pb = cex.values["p"]
    assert pa != pb and cex.values["output p"] == (pa, pb)
    assert str(cex).startswith("output p") and "differ(s) with the group's values" in str(cex)


def test_bad_arguments(serial):
    with pytest.raises(Netlist2TFError, match="no signal named nope"):
        prove_gated(serial, "busy", ["nope"])
    with pytest.raises(Netlist2TFError, match="acc must be a 1-bit register"):
        prove_gated(serial, "acc", ["mcand"])
    with pytest.raises(Netlist2TFError, match="cannot be in its own group"):
        prove_gated(serial, "busy", GROUP + ["busy"])
    with pytest.raises(Netlist2TFError, match="no input port"):
        prove_gated(serial, "busy", GROUP, {"rst_n": 0})


@pytest.mark.parametrize("design,flow", [(SERIAL, "macro"), ("hdl.examples.alu:ALU", "macro"),
                                         ("hdl.examples.alu:ALU", "word"), ("hdl.examples.fifo:FIFO", "macro")])
def test_prover_reads_cells_as_the_simulator_runs_them(design, flow, build_dir, prover_matches_simulator):
    """LUTs, $alu macros and shifts (macro flow); muxes, word-level logic, arithmetic, comparisons,
    multiplication and floor division (the ALU's word flow)."""
    nl = parse_netlist(synthesize(design, flow, build_dir).json_text)
    prover_matches_simulator(nl, 200 if flow == "word" else 30, 1)


def test_prover_reads_the_word_level_cpu_as_the_simulator_runs_it(build_dir, prover_matches_simulator):
    """The RV32 core's word flow ($mux, $pmux, $neg, $sshr, ...) on random states, every RAM word random."""
    from cpu.netlist_engine import core_design

    nl = parse_netlist(synthesize(core_design(16384), "word", build_dir).json_text)
    prover_matches_simulator(nl, 5, 2, {"rst": 0}, dense=True)


def test_groups_proved_apart_or_together(build_dir):
    """``driver.prove_groups_apart``: groups that hold only together (tests/designs/unusual.py Relay)
    are proved by its joint fallback; a group that matters gives the joint query's counterexample."""
    from netlist2tf.driver import prove_groups_apart
    from netlist2tf.netlist.formal import prove_groups

    relay = parse_netlist(synthesize("tests/designs/unusual.py:Relay", "macro", build_dir).json_text)
    a, b = ("g1", ("a",)), ("g2", ("b",))
    alone = prove_groups(relay, [a])
    assert alone is not None and "register b (next)" in alone.what
    assert prove_groups(relay, [b]) is None
    assert prove_groups_apart(relay, [a, b]) is None
    wrong = prove_groups_apart(relay, [("g1", ("b",)), ("g2", ("a",))])      # b feeds y while g2 is 1
    assert wrong is not None and wrong.what
    assert any(wrong.values[name][0] != wrong.values[name][1] for name in ("a", "b"))
