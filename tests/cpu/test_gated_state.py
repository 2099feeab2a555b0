"""The promise behind the model's gated register groups (``cpu.model_engine.GATED``): the compiled
CPU emits the divider's registers (m_hi, m_lo, m_op, m_count, m_sa, m_sb: 13 register tokens) only in
frames after which ``m_busy`` is 1, a MULH's carry (m_x: 3) only in frames after which ``m_pend`` is 1,
and the latched trap conditions and the halt-report flag (``why``, ``reported``) only in frames after
which ``halted`` is 1, so in a cycle that starts with the gate at 0 the model holds stale values for
the group. That is exact only if those values do not matter in
such a cycle. Checked here on the core's full netlist: the netlist simulator overwrites each group
with random bits at the start of every cycle whose gate is 0, and every record, console byte and
halt still equals unicorn's; every token the model emits is unchanged; and z3 proves it for every
state."""

import numpy as np
import pytest

from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.sim.simulator import Simulator

from cpu.fuzz import random_program
from cpu.isa_tests import ISA_TESTS, hazard_programs
from cpu.machine import Halt, Retire
from cpu.model_engine import FLOW, GATED, GATED_WRITES, HELD, MODEL_RAM_SIZE, model_protocol
from cpu.netlist_engine import RETIRE_FIELDS, core_design, halt_from_port
from cpu.unicorn_ref import run_unicorn

RAM = MODEL_RAM_SIZE


@pytest.fixture(scope="module")
def core(build_dir):
    return parse_netlist(synthesize(core_design(RAM), FLOW, build_dir).json_text)


def register_groups(nl):
    """[(gate register state name, [the group's register state names])] of ``GATED``'s register
    groups on ``nl`` (the registers are 1-bit slices after Yosys)."""
    sigs = {s.name: s.bits for s in nl.signals}
    reg_of = {n: f"reg:{r.name}" for r in nl.registers for n in r.q}
    out = []
    for gate, members in GATED:
        if all(m in sigs and any(n in reg_of for n in sigs[m]) for m in members):   # a register group
            out.append((reg_of[sigs[gate][0]], sorted({reg_of[n] for m in members for n in sigs[m] if n in reg_of})))
    return out


def held_groups(nl, tail: bool = False):
    """[(gate output, [the group's register state names])] of ``HELD`` on ``nl``: the double-buffered
    ones (a dirty bit), or with ``tail`` the tail group (no dirty bit: one row)."""
    sigs = {s.name: s.bits for s in nl.signals}
    reg_of = {n: f"reg:{r.name}" for r in nl.registers for n in r.q}
    return [(gate, sorted({reg_of[n] for m in members for n in sigs[m] if n in reg_of}))
            for gate, dirty, members in HELD if bool(dirty) != tail]


class Scrambler:
    """What the model holds, on the simulator: each gated register group overwritten with random
    bits when its gate register is 0 (stale values), and each held group read from its own model of
    the two double-buffer rows (cycle k reads row k % 2, a cycle whose gate is 1 writes the other;
    the prompt writes row 0, row 1 starts at 0), the tail group from its one row (written by a
    cycle whose gate is 1), as the model's DeltaNet heads hold them."""

    def __init__(self, nl, seed: int | None):
        self.groups = register_groups(nl)
        # 1-bit slices: m_hi, m_lo, m_op, m_count, m_sa, m_sb; m_x; why (its exit bit is read by nothing:
        # Yosys drops it), reported; pc_hi (the pc's bits above the RAM: 18 with 16 KiB, 16 with 64 KiB)
        assert [len(g) for _, g in self.groups] == [103, 18, 10, 32 - (RAM - 1).bit_length()]
        self.held = held_groups(nl)
        assert self.held == []                                        # no double-buffered group
        self.tail = held_groups(nl, tail=True)
        assert [len(g) for _, g in self.tail] == [(RAM // 4 - 1).bit_length() - 4]   # pc_mid: 8 bits with 16 KiB
        self.rows = self.tail_rows = None
        self.rng = np.random.default_rng(seed) if seed is not None else None
        self.count = self.held_skips = self.tail_skips = 0

    def __call__(self, sim, k: int = 0):
        """Before cycle ``k``: scramble each group whose gate is 0, read each held group from its row
        (if a seed was given)."""
        if self.rng is None:
            return
        state = sim.state()
        if self.rows is None:
            self.rows = [[{n: state[n] for n in g} for _, g in self.held], [{n: 0 for n in g} for _, g in self.held]]
            self.tail_rows = [{n: state[n] for n in g} for _, g in self.tail]
        for row in self.rows[k % 2] + self.tail_rows:
            sim.set_state(row)
        for gate, group in self.groups:
            if state[gate] == 0:
                sim.set_state({n: int(b) for n, b in zip(group, self.rng.integers(0, 2, len(group)))})
                self.count += 1

    def after(self, sim, out, k: int):
        """After cycle ``k``: a held group whose gate was 1 is written into row (k + 1) % 2."""
        if self.rng is None:
            return
        state = sim.state()
        for i, (gate, group) in enumerate(self.held):
            if out[gate]:
                self.rows[(k + 1) % 2][i] = {n: state[n] for n in group}
            else:
                self.held_skips += 1
        for i, (gate, group) in enumerate(self.tail):
            if out[gate]:
                self.tail_rows[i] = {n: state[n] for n in group}
            else:
                self.tail_skips += 1


def run_scrambled(nl, image, seed: int, limit: int = 200_000):
    """The netlist simulator's run with the gated group randomized whenever the gate register is 0."""
    scramble = Scrambler(nl, seed)
    sim = Simulator(nl)
    sim.load_memory("ram", image.words())
    records, console = [], bytearray()
    for k in range(limit):
        scramble(sim, k)
        out = sim.step({"rst": 0})
        scramble.after(sim, out, k)
        if out["rvfi_valid"]:
            records.append(Retire(**{f: int(out["rvfi_" + f]) for f in RETIRE_FIELDS}))
        if out["console_valid"]:
            console.append(int(out["console_data"]))
        if out["halt"]:
            return records, bytes(console), halt_from_port(lambda n: int(out[n])), scramble.count
    return records, bytes(console), Halt(Halt.STEP_LIMIT, 0), scramble.count


def _check(nl, images):
    for seed, img in enumerate(images):
        ref = run_unicorn(img, ram_size=RAM)
        records, console, halt, scrambled = run_scrambled(nl, img, seed)
        assert scrambled > 0
        assert (console, halt) == (ref.console, ref.halt)
        assert records == ref.records


def test_hazards_and_m_instructions(core):
    names = ["mul", "mulh", "mulhsu", "mulhu", "div", "divu", "rem", "remu"]
    _check(core, list(hazard_programs().values()) + [ISA_TESTS[n]() for n in names])


def test_fuzzed(core):
    _check(core, [random_program(seed, 40, RAM) for seed in range(16)])


def test_hello(core):
    from cpu.elf import load_elf
    from cpu.programs import PROGRAMS_BY_NAME
    from cpu.toolchain import compile_c

    _check(core, [load_elf(compile_c(PROGRAMS_BY_NAME["hello"].path, ram_size=RAM), ram_size=RAM)])


def emitted_tokens(nl, proto, image, seed: int | None, limit: int = 100_000):
    """Per cycle, the tokens the compiled model emits (``protocol.generated_tokens``: every emitted
    output, the write group when it writes, the ungated registers' next values and each register
    group when its gate is 1), from the compiled netlist; with ``seed``, each register group is
    overwritten with random bits at the start of every cycle whose gate is 0 (what the model holds
    then: stale values)."""
    import dataclasses

    from netlist2tf.netlist.ir import Port
    from netlist2tf.compile.protocol import MA, MD, OUT

    probes = [(kind, c.index) for kind in (OUT, MA, MD) for c in proto.chunks_of(kind)]
    extra = tuple(Port(f"__chunk_{kind}_{j}", "output", proto.chunks_of(kind)[j].bits, False) for kind, j in probes)
    extra += tuple(Port(f"__gate_{i}", "output", (g.gate,), False) for i, g in enumerate(proto.groups))
    sim = Simulator(dataclasses.replace(nl, ports=nl.ports + extra))
    sim.load_memory("ram", image.words())
    scramble = Scrambler(nl, seed)
    trace = []
    for k in range(limit):
        scramble(sim, k)
        out = sim.step({"rst": 0})
        scramble.after(sim, out, k)
        regs = {n: v for n, v in sim.state().items() if n.startswith("reg:")}
        trace.append(proto.generated_tokens(k, {kj: int(out[f"__chunk_{kj[0]}_{kj[1]}"]) for kj in probes}, regs,
                                            [bool(out[f"__gate_{i}"]) for i in range(len(proto.groups))]))
        if out["halt"]:
            break
    return trace


# every token, not only the records: under -m slow (suite time: the M instructions ~60 s, the fuzzed
# program and hello.c ~16 s each on this 2-core machine); the default suite checks the records of the M
# instructions with scrambled state (test_hazards_and_m_instructions above)
@pytest.mark.slow
@pytest.mark.parametrize("which", ["m-instructions", "fuzzed", "hello"])
def test_every_emitted_token_ignores_the_stale_group(which, build_dir):
    """Stricter than the records: every token the model emits (a disabled write's data too) is the
    same with the M state scrambled in idle cycles. (An M instruction's start cycle once put the stale
    product on the write port's data: harmless, as the write is disabled, but not the simulator's
    token.)"""
    from cpu.model_engine import compiled_netlist

    nl = compiled_netlist(RAM, build_dir)
    proto = model_protocol(nl)
    if which == "m-instructions":
        images = [ISA_TESTS[n]() for n in ("mul", "mulh", "mulhsu", "mulhu", "div", "rem")]
    elif which == "fuzzed":
        images = [random_program(seed, 40, RAM) for seed in range(8)]
    else:
        from cpu.elf import load_elf
        from cpu.programs import PROGRAMS_BY_NAME
        from cpu.toolchain import compile_c
        images = [load_elf(compile_c(PROGRAMS_BY_NAME["hello"].path, ram_size=RAM), ram_size=RAM)]
    for seed, img in enumerate(images):
        clean, scrambled = emitted_tokens(nl, proto, img, None), emitted_tokens(nl, proto, img, seed)
        assert len(clean) == len(scrambled)
        for k, (a, b) in enumerate(zip(clean, scrambled)):
            assert a == b, f"cycle {k}"


@pytest.mark.slow          # ~80 s: every build of the CPU proves these groups (the compile's z3 proofs), and a
                           # wrong gate's refutation is tested on small designs (tests/compile/test_economy.py)
def test_gated_groups_proved_for_every_state(core, prover_matches_simulator):
    """The promise proved rather than sampled (netlist2tf.netlist.formal, z3): for every state and memory
    content, any rst, and each register group whose gate is 0, the outputs the model emits (the
    halt's kind and cause only in the halting cycle, the held groups' gates), the other
    registers' next values, the RAM write port when it writes and, when a gate's next value is 1,
    its group's next values do not depend on the groups. Then by induction over the cycles no run can
    tell the model's stale values from the true ones. The prover reads the core as the simulator runs
    it (random states, every RAM word random); a group with the pc in it, the pc's high bits gated by
    halting, the trap conditions gated by the divider and the MULH carry gated by the divider instead
    are refuted."""
    from netlist2tf.netlist.formal import prove_groups

    regs = {g[0]: g for g in GATED if g[0] in ("m_busy", "m_pend", "halted", "pc_oob")}
    outs = [g for g in GATED if g[0] == "halt"]
    assert len(regs) + len(outs) == len(GATED)
    assert prove_groups(core, list(regs.values()), outs, GATED_WRITES) is None

    def with_(gate, members, drop=()):
        """The register groups with ``members`` added to ``gate``'s group and ``drop`` left out."""
        return [(g, m + (members if g == gate else ())) for g, m in regs.values() if g not in drop]

    cex = prove_groups(core, with_("m_busy", ("pc_lo",)), outs, GATED_WRITES, {"rst": 0})
    assert cex is not None and "output rvfi_pc" in cex.what
    # the pc's bits above the RAM gated by halting instead: the cycle that stops holds them
    cex = prove_groups(core, with_("halted", regs["pc_oob"][1], drop=("pc_oob",)), outs, GATED_WRITES, {"rst": 0})
    assert cex is not None and any("pc_hi" in w or "rvfi_pc" in w for w in cex.what), cex
    cex = prove_groups(core, with_("m_busy", regs["halted"][1], drop=("halted",)), outs, GATED_WRITES)
    assert cex is not None and any("halt" in w or "why" in w for w in cex.what), cex
    # a MULH's carry gated by the divider's flag: its second cycle reads it with m_busy at 0 (z3
    # reports the register write with 16 KiB, m_x's own next value, now in m_busy's group, with 64 KiB)
    cex = prove_groups(core, with_("m_busy", regs["m_pend"][1], drop=("m_pend",)), outs, GATED_WRITES, {"rst": 0})
    assert cex is not None and any("rd" in w or "regs" in w or "m_x" in w for w in cex.what), cex
    prover_matches_simulator(core, 5, 7, {"rst": 0}, dense=True)


def test_tail_group_proved_for_every_state(core):
    """The tail group's promise (netlist2tf.netlist.formal.prove_held without a dirty bit): pc_mid changes
    only in a cycle whose pc_mid_emit is 1 (one row: nothing else). Gated by the halt output
    instead, or with pc_lo in it (it changes every step), it is refuted."""
    from netlist2tf.netlist.formal import prove_held

    ((tail_gate, no_dirty, tail_members),) = HELD
    assert no_dirty == "" and prove_held(core, tail_gate, "", tail_members) is None
    cex = prove_held(core, "halt", "", tail_members)
    assert cex is not None and "the group changes in a cycle where halt is 0" in cex.what, cex
    cex = prove_held(core, tail_gate, "", tail_members + ("pc_lo",))
    assert cex is not None and "the group changes in a cycle where pc_mid_emit is 0" in cex.what, cex
