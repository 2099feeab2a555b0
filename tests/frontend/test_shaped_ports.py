"""Ports of ``ShapeCastable`` shapes (enums, structs with signed members and unions, arrays, nested):
``sim --compare-amaranth`` drives and samples their raw bits, as the netlist's plain bit-vector ports
(tests/designs/shaped_ports.py)."""

import pytest

from netlist2tf import cli
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.frontend.reference import run_amaranth
from netlist2tf.sim.simulator import Simulator

DESIGNS = "tests/designs/shaped_ports.py"
AGREES = "Amaranth's simulator agrees on every output in every cycle (200 cycles x 2 instance(s))"


@pytest.mark.parametrize("name", ["EnumPorts", "StructPorts", "ArrayPorts", "PlainShaped"])
def test_compare_amaranth_agrees(name, build_dir, capsys):
    rc = cli.main(["sim", f"{DESIGNS}:{name}", "--cycles", "200", "--batch", "2", "--seed", "3",
                   "--compare-amaranth", "--build-dir", str(build_dir)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert AGREES in captured.err
    assert "MISMATCH" not in captured.out


# Inputs and outputs as raw bit patterns, worked out by hand from the designs' docstrings.
# Pixel: x signed(6) in bits 0-5, y in 6-9, flags in 10-12 (parts.lo bit 10, parts.hi bits 11-12).
# ArrayLayout(signed(4), 4): element i in bits 4i..4i+3; Pair: a bits 0-1, b (signed(3)) bits 2-4.
HAND = {
    "EnumPorts": (
        # op 3 is no member of Op; dir 3 is Dir.DOWN (-1)
        {"op": [0, 1, 2, 3], "dir": [0, 1, 3, 0], "a": [5, 5, 200, 9], "b": [3, 7, 200, 1]},
        {"y": [8, 254, 0, 9],             # 5+3, 5-7 mod 256, 200^200, a
         "last_op": [0, 0, 1, 2],         # registered op (reset 0)
         "trend": [1, 3, 0, 1],           # UP, DOWN, STAY, UP
         "step": [5, 6, 199, 9]}),        # a + dir: 5+0, 5+1, 200-1, 9+0
    "StructPorts": (
        # cycle 0: x=-3, y=5, flags=0b110, dx=2; cycle 1: x=31, y=15, flags=7, dx=-4; cycle 2: zeros
        {"p": [61 | 5 << 6 | 6 << 10, 31 | 15 << 6 | 7 << 10, 0], "dx": [2, 4, 0]},
        {"wide_x": [0xFA, 62, 0],         # -6 in 8 bits, 62, 0
         "neg": [1, 0, 0],
         # cycle 1: x=-3+2=-1, y=5^3=6, flags=7; cycle 2: x=31-4=27, y=15^3=12, flags=(7+1)%8=0
         "q": [0, 63 | 6 << 6 | 7 << 10, 27 | 12 << 6]}),
    "ArrayPorts": (
        # v: [-8, 7, -1, 2], [1, 2, 3, -5], [-8, -8, -8, -8]
        {"v": [8 | 7 << 4 | 15 << 8 | 2 << 12, 1 | 2 << 4 | 3 << 8 | 11 << 12, 0x8888], "sel": [0, 3, 1]},
        {"picked": [8, 11, 8],            # -8, -5, -8 in 4 bits
         "total": [0, 1, 32],             # 0, 1, -32 in 6 bits
         # registered -v[3-i]: [-2, 1, -7, 8 -> -8], then [5, -3, -2, -1]
         "rev": [0, 14 | 1 << 4 | 9 << 8 | 8 << 12, 5 | 13 << 4 | 14 << 8 | 15 << 12],
         # pair i = (v[i][:2], v[i] >> 1): (0, -4) (3, 3); (1, 0) (2, 1); (0, -4) (0, -4)
         "pairs": [16 | 15 << 5, 1 | 6 << 5, 16 | 16 << 5]}),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_reference_and_netlist_give_the_hand_computed_bits(name, build_dir):
    """run_amaranth returns raw bit patterns (not enum members or struct constants, negative
    members masked), and so does the netlist simulator: both equal values worked out by hand."""
    inputs, expected = HAND[name]
    cycles = len(next(iter(inputs.values())))
    ref = run_amaranth(f"{DESIGNS}:{name}", inputs, cycles, list(expected))
    assert {n: [int(x) for x in v] for n, v in ref.items()} == expected
    sim = Simulator(parse_netlist(synthesize(f"{DESIGNS}:{name}", build_dir=build_dir).json_text))
    got = {n: [] for n in expected}
    for k in range(cycles):
        out = sim.step({n: v[k] for n, v in inputs.items()})
        for n in expected:
            got[n].append(int(out[n]))
    assert got == expected


def test_compare_amaranth_reports_a_wrong_output(build_dir, capsys, monkeypatch):
    """A reference that differs in one bit of one cycle's struct output is reported, exit status 1."""
    import netlist2tf.frontend as reference       # the stage's face: what the CLI calls

    real = reference.run_amaranth

    def off_by_one_bit(*args, **kwargs):
        out = real(*args, **kwargs)
        out["q"][7] ^= 1 << 12              # the struct's top bit (flags.parts.hi's high bit)
        return out

    monkeypatch.setattr(reference, "run_amaranth", off_by_one_bit)
    rc = cli.main(["sim", f"{DESIGNS}:StructPorts", "--cycles", "20", "--compare-amaranth",
                   "--build-dir", str(build_dir)])
    captured = capsys.readouterr()
    assert rc == 1
    assert "MISMATCH instance 0 cycle 7 output q" in captured.out
    assert "agrees" not in captured.err
