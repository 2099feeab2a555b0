"""The CPU's instruction fetch as an attention lookup over the words the prompt wrote (``cpu build|fit
--fetch attention``; docs/design/compiler.md section 5a): planned, built and run against unicorn.

Oracles: unicorn (console, halt, every retirement record) and the netlist simulator's token trace
(teacher forcing). A program that runs code it wrote (the hazard program ``store_into_next_word``)
runs on unicorn and is refused on this model with one clear error, before any token is checked."""

from pathlib import Path

import pytest
import torch

from cpu.isa_tests import hazard_programs
from cpu.machine import Halt
from cpu.model_engine import FETCH_PORT, check_model_batch, fit_netlist, load_model, model_settings
from cpu.unicorn_ref import run_unicorn
from netlist2tf.common import Netlist2TFError

RAM = 16 * 1024
BUILD = Path(__file__).resolve().parents[2] / "build"


def test_fetch_lookup_plan():
    """The 64 KiB CPU plans into 11 layers with its fetch in layer 1, now full attention: one q head
    reads ``ram`` port 0, no DeltaNet bank holds that port, the load keeps its banks; fewer
    parameters than with the fetch's banks (the same plan otherwise: the same depth)."""
    from netlist2tf.compile import plan_model

    netlist = fit_netlist(64 * 1024, BUILD)
    banks = plan_model(netlist, model_settings())
    look = plan_model(netlist, model_settings("attention"))
    assert look.settings.lookup_ports == (FETCH_PORT,)
    assert look.schedule.read_layer[("ram", 0)] == banks.schedule.read_layer[("ram", 0)] == 1
    assert look.target.layer_types[1] == "full_attention" and banks.target.layer_types[1] == "linear_attention"
    assert [(h.layer, h.head) for h in look.lookups] == [(1, 0)]
    assert look.lookups[0].holds.startswith("ram read port 0: bits 0-31")
    assert not [h for h in look.heads if h.holds.startswith("ram read port 0:")]
    assert [h for h in look.heads if h.holds.startswith("ram read port 1:")]
    assert look.schedule.depth == banks.schedule.depth and look.stats["layers"] == 11
    assert look.stats["parameters"] < banks.stats["parameters"]
    assert look.protocol.port("ram").lookup and not banks.protocol.port("ram").lookup
    with pytest.raises(Netlist2TFError, match="fetch 'cache'"):
        model_settings("cache")


@pytest.mark.slow       # builds a 16 KiB CPU of its own (~2 minutes) and checks it on stock transformers
def test_fetch_lookup_runs_like_unicorn():
    from cpu.elf import load_elf
    from cpu.programs import PROGRAMS_BY_NAME
    from cpu.toolchain import compile_c

    model, protocol, netlist, inits, meta, folder = load_model(RAM, build_dir=BUILD, fetch="attention")
    assert meta["lookup_ports"] == [FETCH_PORT]
    hazards = hazard_programs()
    hi = load_elf(compile_c(PROGRAMS_BY_NAME["hi"].path, ram_size=RAM), ram_size=RAM)
    images = [hi] + [img for name, img in hazards.items() if name != "store_into_next_word"]
    for dtype in (torch.float32, torch.bfloat16):
        results = check_model_batch(images, RAM, dtype=dtype, checkpoint=folder)
        for r, img in zip(results, images):
            ref = run_unicorn(img, ram_size=RAM)
            assert (r.console, r.halt, r.records) == (ref.console, ref.halt, ref.records)
    smc = hazards["store_into_next_word"]
    ref = run_unicorn(smc, ram_size=RAM).halt
    assert ref.kind == Halt.EXIT and ref.exit_code == 77          # unicorn runs the word it wrote
    with pytest.raises(Netlist2TFError, match="which it stored to after it was loaded"):
        check_model_batch([smc], RAM, checkpoint=folder)
