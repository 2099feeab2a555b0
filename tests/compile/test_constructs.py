"""Issue 22: constructs beyond the examples, each first simulated against Amaranth's simulator, then
compiled and verified against the netlist simulator with stock transformers (float32 and bfloat16,
batch 4, 1,000 cycles teacher-forced). ROMs: a 16 x 8 table, a 1,024 x 16 one read asynchronously and
synchronously, a `m.Switch` of constants that Yosys turns into a ROM; the decoders themselves are
checked against the tables exhaustively, flat and split."""

from pathlib import Path

import pytest
import torch

from netlist2tf.compile import rom
from netlist2tf.compile.plan import CompileSettings
from netlist2tf.driver import compile_netlist
from netlist2tf.checkpoint.emit import emit_checkpoint, load_checkpoint
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.frontend.reference import run_amaranth
from netlist2tf.sim.simulator import RandomStimulus, Simulator
from netlist2tf.run.verify import verify_teacher_forced

DESIGNS = Path(__file__).parent.parent / "designs"
ROMS = ["Rom16x8", "Rom1024x16", "CaseRom"]


def _netlist(design, build_dir, flow="macro"):
    return parse_netlist(synthesize(f"{DESIGNS}/constructs.py:{design}", flow, build_dir).json_text)


@pytest.mark.parametrize("design", ROMS)
def test_rom_designs_simulate_like_amaranth(design, build_dir):
    """The netlist simulator (the compiled model's oracle) against Amaranth's, on the word-level
    netlist (the ROM as a memory) and the compiler's (a synchronous read moved out by memory_nordff).
    Without resets for the synchronous read: Amaranth's simulator clears a read port's data on the
    domain's reset, but the RTLIL it writes gives the port no reset (RD_SRST 0), so in the netlist, what
    the compiler takes, a disabled port holds its word through a reset."""
    for flow in ("word", "macro"):
        nl = _netlist(design, build_dir, flow)
        assert [m for m in nl.memories if not m.write_ports], "Yosys kept no ROM"
        resets = 0 if design == "Rom1024x16" else 1 / 16
        trace = Simulator(nl, batch=2).run(500, RandomStimulus(seed=5, reset_probability=resets))
        for lane in range(2):
            ref = run_amaranth(f"{DESIGNS}/constructs.py:{design}",
                               {n: v[:, lane] for n, v in trace.inputs.items()}, 500,
                               [p.name for p in nl.outputs])
            for p in nl.outputs:
                assert [int(x) for x in trace.outputs[p.name][:, lane]] == [int(x) for x in ref[p.name]], \
                    (flow, lane, p.name)


@pytest.mark.parametrize("flat_max", [pytest.param(rom.FLAT_MAX_WORDS, marks=pytest.mark.slow), 16])
def test_decoders_equal_the_table(flat_max, build_dir, monkeypatch):
    """Every address of every ROM port, evaluated on the decoder's threshold functions, gives the
    table's word (the init Amaranth was given, independently of the simulator)."""
    from tests.designs.constructs import _table
    monkeypatch.setattr(rom, "FLAT_MAX_WORDS", flat_max)
    tables = {"Rom16x8": _table(16, 8, 1), "Rom1024x16": _table(1024, 16, 7), "CaseRom": _table(64, 12, 3)}
    for design, table in tables.items():
        (m,) = _netlist(design, build_dir).memories
        for port, rp in enumerate(m.read_ports):
            fns, _, _ = rom.expand_rom(m, port, 10 ** 6)
            shape = rom.rom_shape(m, port)
            assert shape == ("flat" if len(table) <= flat_max else "split")
            for a in range(1 << len(rp.addr)):
                bits = {n: (a >> i) & 1 for i, n in enumerate(rp.addr)}
                for f in fns:                 # dependency order: a split decoder's halves first
                    bits[f.out] = f.value(bits)
                    assert bits[f.out] in (0, 1)
                word = sum(bits[n] << j for j, n in enumerate(rp.data))
                assert word == (table[a] if a < len(table) else 0), (design, shape, a)


def _compile(design, build_dir, layers, tmp_path, roms="auto"):
    nl = _netlist(design, build_dir)
    compiled = compile_netlist(nl, CompileSettings(layers=layers, roms=roms), prove=False)
    return emit_checkpoint(compiled, synthesize(f"{DESIGNS}/constructs.py:{design}", "macro", build_dir).json_text,
                           tmp_path / design), compiled


# the 1,024-word ROM's models take 2-3 minutes each on 2 cores: slow; the default suite splits the
# 16-word ROM's decoder instead (FLAT_MAX_WORDS below its size) to run the split layout on a model
@pytest.mark.parametrize("design, layers, split", [
    ("Rom16x8", 4, False), ("Rom16x8", 4, True), ("CaseRom", 3, False),
    pytest.param("Rom1024x16", 4, False, marks=pytest.mark.slow),
    pytest.param("Rom1024x16", 4, True, marks=pytest.mark.slow)])
def test_rom_models_teacher_forced(design, layers, split, build_dir, tmp_path, monkeypatch):
    if split:
        monkeypatch.setattr(rom, "FLAT_MAX_WORDS", 4 if design == "Rom16x8" else 64)
    folder, compiled = _compile(design, build_dir, layers, tmp_path, roms="ffn")
    sched = compiled.plan.schedule
    units = [u for u in sched.cell_layer if sched.unit_cell[u].startswith("memrd:")]
    assert units, "the ROM was not lowered as FFN logic"
    # flat: one FFN layer per ROM read; split: the two decoders, then the words
    assert {sched.cell_layer[u] for u in units} == ({0, 1} if split else {0})
    assert not sched.read_layer                       # no DeltaNet read: the ROM holds no state
    for dtype in (torch.float32, torch.bfloat16):
        model, protocol, netlist, inits, meta = load_checkpoint(folder, dtype)
        div, checked = verify_teacher_forced(model, protocol, netlist, inits, 1000, 4, 0,
                                             meta["initial_memory"], window=512)
        assert div is None, str(div)
        assert checked == 1000 * 4 * len(protocol.generated)


@pytest.mark.parametrize("design, layers, cycles", [
    ("Rom16x8", 4, 300), pytest.param("Rom1024x16", 4, 1000, marks=pytest.mark.slow)])
def test_preloaded_rom_models_teacher_forced(design, layers, cycles, build_dir, tmp_path):
    """``--roms deltanet``: the ROM is held in DeltaNet banks that the prompt writes (its initial
    words, through a port no frame emits): no FFN decoder, each read port one DeltaNet read, no
    write tokens in any frame (the tokens checked per cycle are the gate-off frame's), and the
    model equal to the simulator in both dtypes."""
    folder, compiled = _compile(design, build_dir, layers, tmp_path, roms="deltanet")
    plan, sched, nports, per_cycle = _written_by_the_prompt(design, build_dir, compiled)
    assert sorted(p for (m, p) in sched.read_layer if m == "rom") == list(range(nports))
    for dtype in (torch.float32, torch.bfloat16):
        _teacher_forced(folder, dtype, cycles, per_cycle)


def _written_by_the_prompt(design, build_dir, compiled):
    """(plan, schedule, read ports, generated tokens a cycle) of a ROM the prompt writes (deltanet or
    attention), checked: no FFN decoder, no write token in any frame (the tokens a cycle are the
    gate-off frame's), and the prompt's words are the table's non-zero ones."""
    plan = compiled.plan
    sched = plan.schedule
    assert plan.settings.preloaded_roms == ("rom",)
    assert not [u for u in sched.cell_layer if sched.unit_cell[u].startswith("memrd:")], "an FFN decoder was built"
    per_cycle = compiled.stats["generated_tokens_per_cycle"]
    assert per_cycle == len(plan.protocol.frame_kinds(False)) < len(plan.protocol.generated)
    table = {"Rom16x8": _table_of(16, 8, 1), "Rom1024x16": _table_of(1024, 16, 7)}[design]
    assert plan.initial_memory["rom"] == {a: w for a, w in enumerate(table) if w}    # what the prompt writes
    return plan, sched, len(_netlist(design, build_dir).memories[0].read_ports), per_cycle


def _teacher_forced(folder, dtype, cycles, per_cycle):
    """The checkpoint in ``dtype`` teacher-forced against the simulator, ``cycles`` x 4 rows; the
    loaded tuple."""
    model, protocol, netlist, inits, meta = load_checkpoint(folder, dtype)
    div, checked = verify_teacher_forced(model, protocol, netlist, inits, cycles, 4, 0,
                                         meta["initial_memory"], window=512)
    assert div is None, str(div)
    assert checked == cycles * 4 * per_cycle
    return model, protocol, netlist, inits, meta


@pytest.mark.parametrize("design, layers, cycles", [
    ("Rom16x8", 4, 200), pytest.param("Rom1024x16", 4, 300, marks=pytest.mark.slow)])
def test_attention_rom_models(design, layers, cycles, build_dir, tmp_path):
    """``--roms attention``: the prompt writes the ROM's words once each, then disables its port;
    each read port is a q head of a full-attention layer whose keys are those words' addresses
    (gadgets/rom_lookup.py): no FFN decoder, no DeltaNet bank, no write token in any frame, and the
    model equal to the simulator, teacher-forced (batch 4) and generated (batch 2), both dtypes."""
    from netlist2tf.run.verify import verify_model
    folder, compiled = _compile(design, build_dir, layers, tmp_path, roms="attention")
    plan, sched, nports, per_cycle = _written_by_the_prompt(design, build_dir, compiled)
    assert plan.settings.lookup_roms == ("rom",)
    assert not [h for h in plan.heads if h.holds.startswith("rom ")], "a DeltaNet bank holds the ROM"
    looked = {sched.read_layer[("rom", p)] for p in range(nports)}
    assert {plan.target.layer_types[layer] for layer in looked} == {"full_attention"}
    assert sorted(h.head for h in plan.lookups) == list(range(nports))   # one KV head, a q head per port
    # the prompt: one enabled group per non-zero word, then the port disabled before anything else commits
    prompt = plan.protocol.initial_tokens(plan.initial_registers, plan.initial_memory)
    port = plan.protocol.port("rom")
    firsts = [f.value & 1 for f in plan.protocol.fields(prompt) if f.kind == "ma" and f.chunk == port.ma[0]]
    assert firsts == [1] * len(plan.initial_memory["rom"]) + [0]
    for dtype in (torch.float32, torch.bfloat16):
        model, protocol, netlist, inits, meta = _teacher_forced(folder, dtype, cycles, per_cycle)
        div, _ = verify_model(model, protocol, netlist, inits, 60, 2, 1, True, initial_memory=meta["initial_memory"])
        assert div is None, str(div)


def _table_of(n, width, seed):
    from tests.designs.constructs import _table
    return _table(n, width, seed)


def test_roms_auto_keeps_the_plan_with_fewer_parameters(build_dir):
    """``--roms auto`` plans every way and keeps the smallest model: for the 1,024 x 16 table at 4
    layers the two flat decoders (2,048 neurons in one layer) against 32 preloaded banks and the
    longer vocabulary of a write port's tokens, and against attention lookups (a q head per port,
    and every full-attention layer of the model at the lookups' shapes); the figures it records are
    those of the plans made on their own. A design without a clock cannot be preloaded: auto falls back to FFN, and
    ``deltanet`` asked for is one error naming the ROM and the fix."""
    from netlist2tf.common.errors import UnsupportedDesignError
    from netlist2tf.compile.plan import CompileSettings, plan_model
    nl = _netlist("Rom1024x16", build_dir)
    ways = {w: plan_model(nl, CompileSettings(layers=4, roms=w)) for w in ("auto", "ffn", "deltanet", "attention")}
    assert ways["ffn"].settings.preloaded_roms == () and ways["deltanet"].settings.preloaded_roms == ("rom",)
    assert ways["attention"].settings.lookup_roms == ("rom",) and not ways["deltanet"].settings.lookup_roms
    rec = ways["auto"].stats["roms"]
    for w in ("ffn", "deltanet", "attention"):
        assert rec[f"{w}_parameters"] == ways[w].stats["parameters"]
    best = min(("ffn", "deltanet", "attention"), key=lambda w: ways[w].stats["parameters"])
    assert rec["chosen"] == best and ways["auto"].stats["parameters"] == ways[best].stats["parameters"]
    assert ways["auto"].settings.preloaded_roms == ways[best].settings.preloaded_roms
    case = _netlist("CaseRom", build_dir)
    auto = plan_model(case, CompileSettings(layers=3))
    assert auto.stats["roms"]["chosen"] == "ffn" and "no clock" in auto.stats["roms"]["deltanet_failed"]
    with pytest.raises(UnsupportedDesignError) as err:
        plan_model(case, CompileSettings(layers=3, roms="deltanet"))
    assert "read-only memory" in str(err.value) and "--roms ffn" in str(err.value)


def test_alu_fits_11_layers(build_dir):
    """The example ALU (every Amaranth operator, 8-bit division and remainder signed and unsigned)
    plans into 11 layers: its dividers are one-layer macros (divider.py), not Yosys's subtract-and-
    compare chains (19 layers before them). Compiled and run on the model: the slow
    tests/run/test_compile_e2e.py::test_alu_in_11_layers_teacher_forced."""
    from netlist2tf.compile.macros import DIV_CELLS
    from netlist2tf.compile.plan import CompileSettings, plan_model
    nl = parse_netlist(synthesize("hdl.examples.alu:ALU", "macro", build_dir).json_text)
    dividers = [c for c in nl.cells if c.type in DIV_CELLS]
    assert len(dividers) >= 4
    plan = plan_model(nl, CompileSettings(layers=11))
    assert plan.stats["depth"] <= 10
    sched = plan.schedule
    for c in dividers:                  # each divider's quotient in one layer (its remainder after)
        layers = {sched.cell_layer[u] for u in sched.cell_layer if sched.unit_cell[u] == c.name}
        assert layers and len(layers) <= 5, (c.name, layers)
