"""The CPU compiled into a Qwen3.5 checkpoint (cpu/model_engine.py), run by stock transformers.

Oracles: unicorn (console, halt, every retirement record) and, for teacher forcing, the netlist
simulator's whole token trace (every generated token; the netlist simulator itself is checked
against unicorn record by record in test_engines_agree.py and here again per program).

The checkpoint (~500 M parameters) is built once into build/cpu-model/ (cached by the hash of its
inputs) and every model test runs in one xdist group. CI runs a representative subset: the hazard
programs generated in float32 with the prompt prefilled (batch 4) and in bfloat16 token by token
(batch 8), the sample program ``hi``, and two compact fuzzed programs teacher-forced.
``--model-fuzz N`` (e.g. 100) checks N compact fuzzed programs by batched generation;
``-m slow`` adds the program table's remaining programs, teacher-forced.
"""

from pathlib import Path

import numpy as np
import pytest
import torch

from cpu import asm
from cpu.asm import A0, A7, add, addi, jal, jalr, lbu, lui, lw, sb, sw

EBREAK = asm.ebreak()
from cpu.fuzz import random_program
from cpu.machine import Image
from cpu.model_engine import MODEL_RAM_SIZE, load_model, run_model_batch
from cpu.netlist_engine import run_netlist_batch
from cpu.unicorn_ref import run_unicorn

pytestmark = pytest.mark.xdist_group("cpu-model")
RAM = MODEL_RAM_SIZE
BUILD = Path(__file__).resolve().parents[2] / "build"


def _exit():
    return asm.li(A7, 93) + [asm.ecall()]


def hazard_programs() -> dict:
    """Hazards on purpose: each reads state in the same cycle as it changes it."""
    progs = {}
    # jalr x1, 0(x1): the target comes from the OLD x1, the link value is the new one
    w = [asm.auipc(1, 0), addi(1, 1, 16), jalr(1, 1, 0), EBREAK, add(A0, 1, 0)] + _exit()
    progs["jalr_x1_x1"] = w
    # store then load the same word, sub-word stores merged into the word the load reads
    w = asm.li(5, 0x300) + asm.li(6, 0x12345678) + [sw(6, 5, 0), lw(7, 5, 0), sb(7, 5, 1), lw(8, 5, 0),
                                                    lbu(9, 5, 1), add(A0, 8, 9)] + _exit()
    progs["store_then_load"] = w
    # writes to x0 are dropped: results read back as 0
    w = [addi(0, 0, 5), lui(0, 0x12345), jal(0, 8), EBREAK, add(A0, 0, 0), addi(A0, A0, 3)] + _exit()
    progs["writes_to_x0"] = w
    # a store into the word after the current instruction: the new word is what runs next
    new = addi(A0, 0, 77)
    w = asm.li(6, new)
    w += [asm.auipc(5, 0), sw(6, 5, 8), EBREAK] + _exit()      # the sw patches the ebreak after it
    progs["store_into_next_word"] = w
    return {k: Image.from_words(v) for k, v in progs.items()}


@pytest.fixture(scope="module")
def model():
    return load_model(RAM, build_dir=BUILD)


def _same(results, refs):
    for r, ref in zip(results, refs):
        assert r.console == ref.console
        assert r.halt == ref.halt
        assert r.records == ref.records


def test_hazards_generated_fp32_prefill(model):
    images = list(hazard_programs().values())
    refs = [run_unicorn(img, ram_size=RAM) for img in images]
    assert [r.halt.exit_code for r in refs] == [12, 0x12347878 + 0x78, 3, 77]   # hand-checked
    _same(run_model_batch(images, RAM, build_dir=BUILD), refs)


def test_hazards_generated_bf16_token_by_token_batch8(model):
    """bfloat16, the prompt fed one token per call (the recurrent DeltaNet path), batch 8 (each
    hazard twice, in different rows)."""
    images = list(hazard_programs().values()) * 2
    refs = [run_unicorn(img, ram_size=RAM) for img in images]
    _same(run_model_batch(images, RAM, dtype=torch.bfloat16, prefill=False, build_dir=BUILD), refs)


def test_sample_program_hi(model):
    """The README's sample, generated: console, exit code and every record equal unicorn's."""
    from cpu.elf import load_elf
    from cpu.programs import PROGRAMS_BY_NAME
    from cpu.toolchain import compile_c

    prog = PROGRAMS_BY_NAME["hi"]
    img = load_elf(compile_c(prog.path, ram_size=RAM), ram_size=RAM)
    ref = run_unicorn(img, ram_size=RAM)
    (res,) = run_model_batch([img], RAM, build_dir=BUILD)
    assert res.console == prog.expected_output and res.halt.exit_code == prog.expected_exit
    _same([res], [ref])
    assert res.tokens == 66 * res.cycles


def _teacher_forced(model, images, dtype=torch.float32):
    """Every generated token of the netlist simulator's trace is the model's greedy choice."""
    from netlist2tf.sim import TableStimulus
    from netlist2tf.verify import verify_teacher_forced

    m, protocol, netlist, inits, meta, _ = model
    net = run_netlist_batch(images, RAM)
    refs = [run_unicorn(img, ram_size=RAM) for img in images]
    for n, ref in zip(net, refs):
        assert (n.records, n.console, n.halt) == (ref.records, ref.console, ref.halt)
    cycles = max(n.cycles for n in net) + 1
    stim = TableStimulus({"rst": np.zeros(cycles, dtype=np.uint64)})
    div, checked = verify_teacher_forced(m.to(dtype), protocol, netlist, inits, cycles, len(images), 0,
                                         [{"ram": img.words()} for img in images], stimulus=stim)
    m.to(torch.float32)
    assert div is None, str(div)
    return checked


def test_fuzzed_subset_teacher_forced(model):
    images = [random_program(seed, 12, RAM, compact=True) for seed in (1, 2)]
    assert _teacher_forced(model, images) > 0


def test_fuzzed_generated(request, model):
    """``--model-fuzz N`` compact fuzzed programs (seeds 1000..), generated in batches of 10."""
    n = request.config.getoption("--model-fuzz")
    if not n:
        pytest.skip("pass --model-fuzz N to run N fuzzed programs on the model")
    for start in range(0, n, 10):
        images = [random_program(1000 + s, 12, RAM, compact=True) for s in range(start, min(n, start + 10))]
        refs = [run_unicorn(img, ram_size=RAM) for img in images]
        _same(run_model_batch(images, RAM, build_dir=BUILD), refs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hello", "fibonacci", "sieve", "quicksort", "crc32", "matmul", "strings",
                                  "recursion", "longlong", "muldiv", "tokenizer"])      # libc needs > 16 KiB
def test_program_table_teacher_forced(model, name):
    """The program table (16 KiB RAM) on the model, teacher-forced against the netlist simulator
    (hours per program at ~70 tokens/s: run selectively, e.g. -k hello)."""
    from cpu.elf import load_elf
    from cpu.programs import PROGRAMS_BY_NAME
    from cpu.toolchain import compile_c

    img = load_elf(compile_c(PROGRAMS_BY_NAME[name].path, ram_size=RAM), ram_size=RAM)
    assert _teacher_forced(model, [img]) > 0
