"""The host side of the compiled CPU: ``cpu.model_engine.TraceDecoder`` rebuilds every retirement
record from the tokens the model emits (6 output chunks a cycle, the pc register's tokens and the
write-port tokens), without a model.

The trace decoded here is the netlist simulator's run of the compiled netlist (the core with only
``MODEL_OUTPUTS`` kept), turned into tokens by ``netlist2tf.run.verify.expected_tokens``: exactly what a
correct model generates (tests/cpu/test_model_engine.py proves the model generates it). Oracle:
unicorn's console, halt and records; the full-port netlist engine is compared with unicorn too, so a
difference is the decoder's (or the pruning's), not the core's.
"""

from dataclasses import replace

import numpy as np
import pytest

from netlist2tf.common.errors import Netlist2TFError
from netlist2tf.netlist.graph import keep_outputs
from netlist2tf.sim.simulator import TableStimulus
from netlist2tf.run.verify import expected_tokens

from cpu.fuzz import random_program
from cpu.isa_tests import ISA_TESTS, TRAP_TESTS, hazard_programs, ram_needed
from cpu.model_engine import MODEL_OUTPUTS, MODEL_RAM_SIZE, TraceDecoder, compiled_netlist, decode_trace, model_protocol
from cpu.netlist_engine import run_netlist_batch
from cpu.unicorn_ref import run_unicorn

RAM = MODEL_RAM_SIZE


@pytest.fixture(scope="module")
def compiled(build_dir):
    nl = compiled_netlist(RAM, build_dir)
    proto = model_protocol(nl)
    inits = {f"reg:{r.name}": r.init for r in nl.registers}
    return nl, proto, inits


def decoded_runs(compiled, images, max_steps=1_000_000):
    """Decode the compiled netlist's token trace of each image (one batch)."""
    nl, proto, inits = compiled
    full = run_netlist_batch(images, RAM, max_steps=max_steps)
    cycles = max(r.cycles for r in full) + 1
    stim = TableStimulus({"rst": np.zeros(cycles, dtype=np.uint64)})
    mems = [{"ram": img.words()} for img in images]
    rows, _, frames = expected_tokens(proto, nl, inits, cycles, len(images), 0, mems, stimulus=stim)
    return full, [decode_trace(proto, TraceDecoder(nl, inits, mem, max_steps), rows[i], frames[i])
                  for i, mem in enumerate(mems)]


def check(compiled, images, max_steps=1_000_000):
    full, decoded = decoded_runs(compiled, images, max_steps)
    for img, f, d in zip(images, full, decoded):
        ref = run_unicorn(img, ram_size=RAM, max_steps=max_steps)
        assert (f.console, f.halt, f.records) == (ref.console, ref.halt, ref.records)
        assert d.console == ref.console
        assert d.halt == ref.halt
        assert len(d.records) == len(ref.records)
        for k, (got, want) in enumerate(zip(d.records, ref.records)):
            assert got == want, f"record {k}"
        assert d.instructions == ref.instructions
    return decoded


def test_the_frame(compiled):
    """The frame (docs/design/cpu-model.md 2): no token is emitted in every frame but the last: the pc's
    low 4 word bits, m_busy, halted, pc_oob and m_pend (1); the halt's kind and cause (1) in the
    halting frame, a division's state while it runs (13: remainder, quotient, divisor, count and
    signs), a MULH's carry in its first frame (3), the trap conditions and the report flag once
    halted (2), the pc's bits above the RAM once the pc is outside it (2 with 64 KiB), a register's
    write group when one is written (enable, the register and the value's low 2 bits: 1) or the RAM's
    when a word is stored (enable, the word's address and its low bit: 2), each followed by the word's higher
    bits in chunks of 8 up to the one of its highest 1 (folded: 1 each), the pc's other RAM-word bits
    (2 with 64 KiB, the tail group) when they may change, right before the last token: 1 token for a sequential
    step that writes nothing, 35 at most (no cycle writes both memories). The gates (halt,
    pc_mid_emit) are not emitted: a group's presence is its gate."""
    nl, proto, _ = compiled
    assert [p.name for p in nl.outputs] == list(MODEL_OUTPUTS)
    # what the RAM's size sets: the pc's bits above it (18 with 16 KiB, 16 with 64 KiB: 3 or 2
    # tokens) and how many of a stored word's low bits fill the address tokens (3 or 1)
    pc_hi = -(-(32 - (RAM - 1).bit_length()) // 8)
    low = 16 - 1 - (RAM // 4 - 1).bit_length()
    mid = -(-((RAM // 4 - 1).bit_length() - 4) // 8)           # the tail group: the pc's word bits above 4
    assert (pc_hi, low, mid) == {16384: (3, 3, 1), 65536: (2, 1, 2)}.get(RAM, (pc_hi, low, mid))
    assert [(g.kind, g.name, len(g.chunks), g.hold, g.tail) for g in proto.groups] == [
        ("out", "halt", 1, "", False), ("reg", "m_busy", 13, "", False), ("reg", "m_pend", 3, "", False),
        ("reg", "halted", 2, "", False), ("reg", "pc_oob", pc_hi, "", False),
        ("write", "regs", 1, "", False),
        ("fold", "regs.data[2:]", 1, "", False), ("fold", "regs.data[10:]", 1, "", False),
        ("fold", "regs.data[18:]", 1, "", False), ("fold", "regs.data[26:]", 1, "", False),
        ("write", "ram", 2, "", False),
        ("fold", f"ram.data[{low}:]", 1, "", False), ("fold", f"ram.data[{low + 8}:]", 1, "", False),
        ("fold", f"ram.data[{low + 16}:]", 1, "", False), ("fold", f"ram.data[{low + 24}:]", 1, "", False),
        ("reg", "pc_mid_emit", mid, "", True)]
    assert [p.packed for p in proto.ports] == [2, low]
    n = 19 + pc_hi + mid                                        # 23 register chunks with 16 KiB, 23 with 64
    assert len(proto.outputs) == 1 and len(proto.registers) == n
    assert len(proto.generated) == 31 + pc_hi + mid and len(proto.frame_kinds(False)) == 1
    # pc_mid's chunks, then the last ungated register chunk; each tail chunk a fixed lag before the end
    assert proto.generated[-1 - mid:] == [("reg", j) for j in range(n - 1 - mid, n)]
    assert proto.tail_lags() == {("reg", n - 1 - mid + i): mid - i for i in range(mid)}


def test_hazards(compiled):
    decoded = check(compiled, list(hazard_programs().values()))
    assert [d.halt.exit_code for d in decoded] == [12, 0x12347878 + 0x78, 3, 77]   # hand-checked


# the M extension's long programs but one multiply and one divide under -m slow (~50 s here; the netlist
# engine runs them all in the default suite: tests/cpu/test_cases.py); of the instructions whose frames
# have the same shape as another's (a register-register or immediate ALU result, a taken or not-taken
# branch, a Zba shift-add) one or two stay in the default suite, the others go to -m slow (~45 s)
_SLOW_ISA = {"mulh", "mulhsu", "mulhu", "divu", "rem", "remu",
             "and", "andi", "or", "ori", "xor", "xori", "sll", "slli", "slt", "slti", "sltiu", "srl", "srli",
             "bge", "bgeu", "blt", "bne", "sh2add", "sh3add"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW_ISA else n
                                  for n in sorted(ISA_TESTS)])
def test_isa_programs(compiled, name):
    """Every instruction's self-checking program (loads and stores of each width, console, M)."""
    img = ISA_TESTS[name]()
    if ram_needed(img) > RAM:
        pytest.skip(f"{name} needs {ram_needed(img)} bytes of RAM, the model has {RAM}")
    (d,) = check(compiled, [img])
    assert d.halt.exit_code == 0 or name == "ebreak"


def test_traps(compiled):
    """Each trap's halt (cause, pc) and the records before it."""
    cases = [TRAP_TESTS[n]() for n in sorted(TRAP_TESTS)]
    check(compiled, [c.image for c in cases])


def test_fuzzed(compiled):
    """Full-size fuzzed programs (all registers, loads/stores over the data area, M, traps)."""
    check(compiled, [random_program(seed, 40, RAM) for seed in range(24)])


def test_step_limit(compiled):
    (d,) = check(compiled, [random_program(7, 40, RAM)], max_steps=5)
    assert len(d.records) == 5


def test_console_program(compiled):
    from cpu.elf import load_elf
    from cpu.programs import PROGRAMS_BY_NAME
    from cpu.toolchain import compile_c

    prog = PROGRAMS_BY_NAME["hello"]
    (d,) = check(compiled, [load_elf(compile_c(prog.path, ram_size=RAM), ram_size=RAM)])
    assert d.console == prog.expected_output


def test_decoder_needs_the_pc_register(compiled):
    nl, _, inits = compiled
    bare = keep_outputs(nl, [])
    with pytest.raises(Netlist2TFError, match="no register named pc_lo"):
        TraceDecoder(replace(bare, signals=()), inits, {})
    with pytest.raises(Netlist2TFError, match="no register named m_count"):
        TraceDecoder(replace(bare, signals=tuple(s for s in bare.signals if s.name != "m_count")), inits, {})
