"""The CPU compiled into a Qwen3.5 checkpoint (cpu/model_engine.py), run by stock transformers.

Oracles: unicorn (console, halt, every retirement record) and, for teacher forcing, the netlist
simulator's whole token trace (every generated token; the netlist simulator itself is checked
against unicorn record by record in test_engines_agree.py and here again per program, and the
trace decoded by the host against unicorn's records).

The checkpoint (~500 M parameters) is built once into build/cpu-model/ (cached by the hash of its
inputs) and every model test runs in one xdist group. CI runs a representative subset: the hazard
programs generated in float32 with the prompt prefilled (batch 4) and in bfloat16 token by token
(batch 8), the sample program ``hi``, and two compact fuzzed programs teacher-forced.
``--model-fuzz N`` (e.g. 100) checks N compact fuzzed programs teacher-forced, ``--model-fuzz-generated
N`` by batched generation;
``-m slow`` adds the program table's remaining programs, teacher-forced.
"""

from pathlib import Path

import numpy as np
import pytest
import torch

from cpu.fuzz import random_program
from cpu.isa_tests import hazard_programs
from cpu.model_engine import MODEL_RAM_SIZE, TraceDecoder, decode_trace, load_model, run_model_batch
from cpu.netlist_engine import run_netlist_batch
from cpu.unicorn_ref import run_unicorn

pytestmark = pytest.mark.xdist_group("cpu-model")
RAM = MODEL_RAM_SIZE
BUILD = Path(__file__).resolve().parents[2] / "build"


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
    assert res.tokens == 15 * res.cycles            # no M instruction: the M state is never emitted


def _teacher_forced(model, images, dtype=torch.float32, device="cpu", threads=1, resume=None):
    """Every generated token of the netlist simulator's trace is the model's greedy choice (``resume``:
    the check's progress file, verify_teacher_forced)."""
    from netlist2tf.sim import TableStimulus
    from netlist2tf.verify import expected_tokens, verify_teacher_forced

    m, protocol, netlist, inits, meta, _ = model
    net = run_netlist_batch(images, RAM)
    refs = [run_unicorn(img, ram_size=RAM) for img in images]
    for n, ref in zip(net, refs):
        assert (n.records, n.console, n.halt) == (ref.records, ref.console, ref.halt)
    cycles = max(n.cycles for n in net) + 1
    stim = TableStimulus({"rst": np.zeros(cycles, dtype=np.uint64)})
    div, checked = verify_teacher_forced(m.to(dtype).to(device), protocol, netlist, inits, cycles, len(images), 0,
                                         [{"ram": img.words()} for img in images], stimulus=stim,
                                         threads=threads, resume=resume)
    m.to("cpu").to(torch.float32)
    assert div is None, str(div)
    # the trace the model was just shown to generate, decoded by the host, equals unicorn's run
    mems = [{"ram": img.words()} for img in images]
    rows, _, frames = expected_tokens(protocol, netlist, inits, cycles, len(images), 0, mems, stimulus=stim)
    for row, (mem, ref) in enumerate(zip(mems, refs)):
        d = decode_trace(protocol, TraceDecoder(netlist, inits, mem), rows[row], frames[row])
        assert (d.records, d.console, d.halt) == (ref.records, ref.console, ref.halt)
    return checked


def test_fuzzed_subset_teacher_forced(model):
    images = [random_program(seed, 12, RAM, compact=True) for seed in (1, 2)]
    assert _teacher_forced(model, images) > 0


def _options(request):
    """(dtype, device, threads) of the long teacher-forced checks: --model-dtype, --model-device,
    --model-threads."""
    opt = request.config.getoption
    return getattr(torch, opt("--model-dtype")), opt("--model-device"), opt("--model-threads")


def test_fuzzed_teacher_forced(request, model):
    """``--model-fuzz N`` compact fuzzed programs (seeds 1000..), teacher-forced in batches of 10: the
    model's greedy choice at every generated position is the netlist simulator's token (so generation
    produces that trace), and the host's decoding of the trace equals unicorn's records."""
    n = request.config.getoption("--model-fuzz")
    if not n:
        pytest.skip("pass --model-fuzz N to check N fuzzed programs on the model")
    for start in range(0, n, 10):
        images = [random_program(1000 + s, 12, RAM, compact=True) for s in range(start, min(n, start + 10))]
        assert _teacher_forced(model, images, *_options(request)) > 0


def test_fuzzed_generated(request, model):
    """``--model-fuzz-generated N`` compact fuzzed programs (seeds 1000..), generated in batches of 10."""
    n = request.config.getoption("--model-fuzz-generated")
    if not n:
        pytest.skip("pass --model-fuzz-generated N to generate N fuzzed programs on the model")
    for start in range(0, n, 10):
        images = [random_program(1000 + s, 12, RAM, compact=True) for s in range(start, min(n, start + 10))]
        refs = [run_unicorn(img, ram_size=RAM) for img in images]
        _same(run_model_batch(images, RAM, build_dir=BUILD), refs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hello", "fibonacci", "sieve", "quicksort", "crc32", "matmul", "strings",
                                  "recursion", "longlong", "muldiv", "tokenizer"])      # libc needs > 16 KiB
def test_program_table_teacher_forced(request, model, name):
    """The program table (16 KiB RAM) on the model, teacher-forced against the netlist simulator
    (0.5-5 hours per program in bfloat16 on one core here, --model-dtype bfloat16; --model-threads 2
    ~1.8x faster: run selectively, e.g. -k hello). Progress is saved every 5 minutes under
    build/teacher-forced/: a run stopped part-way continues where it was when run again."""
    from cpu.elf import load_elf
    from cpu.programs import PROGRAMS_BY_NAME
    from cpu.toolchain import compile_c

    img = load_elf(compile_c(PROGRAMS_BY_NAME[name].path, ram_size=RAM), ram_size=RAM)
    dtype, device, threads = _options(request)
    # progress saved every 5 minutes: a run stopped part-way continues there (same model and trace)
    resume = BUILD / "teacher-forced" / f"{name}-{str(dtype).split('.')[-1]}-{device}.pt"
    assert _teacher_forced(model, [img], dtype, device, threads, resume) > 0


@pytest.mark.slow
def test_larger_ram_model(tmp_path_factory):
    """``--ram-size 32768``: the CPU compiled with twice the RAM (twice the fetch and load banks; ~3 min
    to compile, 583 M parameters) runs hi.c generated in bfloat16, and libc.c, the one table program
    that needs more than 16 KiB, teacher-forced for its first 200 cycles (its 5,643-word prompt
    included)."""
    from cpu.elf import load_elf
    from cpu.programs import PROGRAMS_BY_NAME
    from cpu.toolchain import compile_c
    from netlist2tf.sim import TableStimulus
    from netlist2tf.verify import verify_teacher_forced

    ram, build = 32768, tmp_path_factory.mktemp("ram32")
    hi = load_elf(compile_c(PROGRAMS_BY_NAME["hi"].path, ram_size=ram), ram_size=ram)
    (res,) = run_model_batch([hi], ram, dtype=torch.bfloat16, build_dir=build)
    _same([res], [run_unicorn(hi, ram_size=ram)])
    m, protocol, netlist, inits, meta, _ = load_model(ram, torch.bfloat16, build_dir=build)
    libc = load_elf(compile_c(PROGRAMS_BY_NAME["libc"].path, ram_size=ram), ram_size=ram)
    stim = TableStimulus({"rst": np.zeros(200, dtype=np.uint64)})
    div, checked = verify_teacher_forced(m, protocol, netlist, inits, 200, 1, 0, [{"ram": libc.words()}],
                                         stimulus=stim)
    assert div is None, str(div)
    assert checked >= 15 * 199
