"""The CPU compiled into a Qwen3.5 checkpoint (cpu/model_engine.py), run by stock transformers.

Oracles: unicorn (console, halt, every retirement record) and, for teacher forcing, the netlist
simulator's whole token trace (every generated token; the netlist simulator itself is checked
against unicorn record by record in test_engines_agree.py, and the trace decoded by the host
against unicorn's records here).

The checkpoint (~430 M parameters) is built once into build/cpu-model/ (cached by the hash of its
inputs) and every model test runs in one xdist group. The programs, traps, hazards, ISA programs and
fuzz seeds themselves are the one case table's (tests/cpu/cases.py, run teacher-forced on this model
by tests/cpu/test_cases.py); here: the hazard programs generated in float32 with the prompt
prefilled (batch 4; in bfloat16 token by token, batch 8, with ``-m slow``), the sample program
``hi``, ``cpu run`` on ``hi`` (speculative decoding, and ``--teacher-forced``), a wrong model's
divergence and speculative decoding's fallback to plain generation on a wrong model, the merge.
``--model-fuzz N`` (e.g. 100) checks N compact fuzzed programs teacher-forced in batches,
``--model-fuzz-generated N`` by batched generation.
"""

from pathlib import Path

import numpy as np
import pytest
import torch

from cpu.fuzz import random_program
from cpu.machine import Halt
from cpu.isa_tests import hazard_programs
from cpu.model_engine import MODEL_RAM_SIZE, check_model_batch, load_model, run_model_batch
from cpu.unicorn_ref import run_unicorn
from netlist2tf.merge import text_prefix_tokens

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


@pytest.mark.slow       # the hazards stay in the default suite through tests/cpu/test_cases.py (stock and fast)
def test_hazards_generated_fp32_prefill(model):
    images = list(hazard_programs().values())
    refs = [run_unicorn(img, ram_size=RAM) for img in images]
    assert [r.halt.exit_code for r in refs] == [12, 0x12347878 + 0x78, 3, 77]   # hand-checked
    _same(run_model_batch(images, RAM, build_dir=BUILD), refs)


def test_reads_balanced_over_the_deltanet_layers(model):
    """The constant-address a7/a0 reads share layer 2 with rs1/rs2 (plan.balance_reads) instead of
    layer 1 with the fetch's banks, and the banks sit side by side, 4 to a key head of 16 value heads
    (the cheapest group: 2 nk dk + nv (3 dv + 2) = 8,192 weights per residual channel and DeltaNet
    layer, against 14,336 with 16 key heads of 4). Hand-counted with 16 value heads to a key head:
    layer 0 4 key heads (the rst input's and the 11 write-port fields' 12 one-row chunks 1, the 19
    double-buffered register chunks 2, the tail chunk's own: its write lag), layer 1 the fetch's 16
    banks of 256 words in 4, layer 2 the four one-bank register reads (each its own address) 4,
    layer 4 the load port's 16 banks in 4. With the default 64 KiB: 64 value heads to a key head
    (the same cheapest-group rule), the fetch's and the load's 64 banks 16 to a key head (4 each), the
    load in layer 5, the four register reads 4, layer 0 at most 4."""
    import json

    folder = model[-1]
    stats = json.loads((folder / "compile.json").read_text())["stats"]
    config = json.loads((folder / "config.json").read_text())
    heads = stats["deltanet_key_heads"]
    if RAM == 16384:
        assert heads == [4, 4, 4, 0, 4, 0, 0, 0, 0, 0, 0]
        assert (config["linear_num_key_heads"], config["linear_num_value_heads"]) == (4, 64)
    else:
        assert RAM == 65536 and heads[1:] == [4, 4, 0, 0, 4, 0, 0, 0, 0, 0] and heads[0] <= 4
        assert (config["linear_num_key_heads"], config["linear_num_value_heads"]) == (4, 256)


@pytest.mark.slow
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
    assert res.tokens == _hi_tokens(img, ref)


def _hi_tokens(img, ref) -> int:
    """The generated tokens of a run without M instructions, counted by hand from unicorn's records.
    The frame (docs/design/cpu-model.md 2): 1 token (the pc's low 4 word bits, m_busy, halted, pc_oob,
    m_pend), + 1 for the pc's other word bits (2 with 64 KiB) after a transfer or a step from a
    16-word block's last word, + 1 when a register is written (enable, register, the value's low 2 bits) or 2 when
    a RAM word is (enable, the word address, and as many of the word's low bits as fill the two
    8-bit tokens: 3 with 16 KiB, 1 with 64 KiB), and 1 per 8 bits above up to the word's highest 1
    (folded); the ecall's stopping cycle 3 (the latched conditions), the halt report 4 (its kind and
    cause too); no M instruction, so the M state is never emitted. The written words: a register's
    value from unicorn, a RAM word merged from unicorn's stores into the image's words here."""
    from cpu.machine import CONSOLE_ADDR
    ram_low = 16 - 1 - ((RAM // 4) - 1).bit_length()
    mid = -(-((RAM // 4 - 1).bit_length() - 4) // 8)       # the pc's other word bits: 1 token, 2 with 64 KiB
    ram, tokens = dict(img.words()), 0
    for r in ref.records:
        word = None
        if r.rd:
            word = r.rd_wdata
        elif r.mem_wmask and r.mem_addr != CONSOLE_ADDR:
            word = ram.get(r.mem_addr >> 2, 0)
            for lane in range(4):
                if r.mem_wmask >> lane & 1:
                    word = word & ~(0xFF << 8 * lane) | (r.mem_wdata >> 8 * lane & 0xFF) << 8 * lane
            ram[r.mem_addr >> 2] = word
        tokens += 1 + mid * (r.next_pc != r.pc + 4 or (r.pc >> 2) % 16 == 15)
        if word is not None:
            low = 2 if r.rd else ram_low
            tokens += (1 if r.rd else 2) + max(0, -(-(word.bit_length() - low) // 8))
    return tokens + 3 + 4


def _teacher_forced(images, dtype=torch.float32, device="cpu", threads=1, resume_dir=None):
    """Every generated token of the netlist simulator's trace is the model's greedy choice, and the
    host's decoding of that trace equals unicorn's console, halt and records (check_model_batch).
    Returns the generated tokens checked."""
    refs = [run_unicorn(img, ram_size=RAM) for img in images]
    results = check_model_batch(images, RAM, dtype=dtype, device=device, threads=threads,
                                resume_dir=resume_dir, build_dir=BUILD)
    _same(results, refs)
    return sum(r.tokens for r in results)


# ~45 s each on this 2-core machine: the default suite runs `cpu run --checkpoint` speculatively on the
# merged CPU (test_cpu_merged_in_front_of_a_qwen_model) and teacher-forced cases in tests/cpu/test_cases.py
@pytest.mark.slow
@pytest.mark.parametrize("flags", [[], ["--teacher-forced"]], ids=["speculative", "teacher-forced"])
def test_cli_speculative_and_teacher_forced(model, flags, tmp_path, capsys):
    """``cpu run --engine model`` (speculative decoding, the default) and ``--teacher-forced``: hi.c's
    output, exit code and trace file equal unicorn's, with the figures on stderr."""
    from cpu.cli import main
    from cpu.programs import PROGRAMS_BY_NAME

    from cpu.elf import load_elf
    from cpu.toolchain import compile_c

    hi = str(PROGRAMS_BY_NAME["hi"].path)
    img = load_elf(compile_c(hi, ram_size=RAM), ram_size=RAM)
    tokens = _hi_tokens(img, run_unicorn(img, ram_size=RAM))     # 91 with 16 KiB
    ref = tmp_path / "unicorn.trace"
    assert main(["run", hi, "--ram-size", str(RAM), "--trace", str(ref)]) == 10
    capsys.readouterr()
    mode = ("teacher-forced: every generated token checked" if flags else
            "speculative decoding: every token drafted by the netlist simulator was the model's greedy choice")
    ours = tmp_path / "model.trace"
    assert main(["run", hi, "--engine", "model", *flags, "--dtype", "bfloat16", "--threads", "1",
                 "--trace", str(ours)]) == 10
    out = capsys.readouterr()
    assert out.out == "hi!\n"
    assert f"{tokens} generated tokens" in out.err and f"{tokens / 28:.1f} tokens/instruction" in out.err
    assert mode in out.err
    assert ours.read_text() == ref.read_text() and len(ours.read_text().splitlines()) == 28


@pytest.mark.slow          # ~55 s: two float32 runs of the whole prompt in stock transformers
def test_speculative_falls_back_to_plain_generation(model):
    """Speculative decoding's result is the model's own greedy run even when the model departs from
    the netlist: with the LM head's rows of the write data values 0 and 1 swapped (a protocol-valid
    but wrong model: hi.c's first write, sp = 0x4000, comes out 0x4004: the first data chunk is its bits 2-9), the draft is rejected at
    cycle 0 and the run equals plain generation's, record for record, and not unicorn's."""
    from cpu.elf import load_elf
    from cpu.model_engine import run_model_speculative
    from cpu.programs import PROGRAMS_BY_NAME
    from cpu.toolchain import compile_c
    from netlist2tf.compile.protocol import MD, Field

    net, protocol = load_model(RAM, build_dir=BUILD)[:2]     # the float32 model the runs below use
    img = load_elf(compile_c(PROGRAMS_BY_NAME["hi"].path, ram_size=RAM), ram_size=RAM)
    ref = run_unicorn(img, ram_size=RAM, max_steps=6)
    head = net.lm_head.weight
    rows = [protocol.token(Field(MD, 0, parity, v)) for parity in (0, 1) for v in (0, 1)]
    saved = head.detach().clone()
    logs = []
    try:
        with torch.no_grad():
            head[rows] = saved[[rows[1], rows[0], rows[3], rows[2]]]
        (spec,) = run_model_speculative([img], RAM, 6, threads=1, build_dir=BUILD,
                                        log=logs.append)
        (plain,) = run_model_batch([img], RAM, 6, build_dir=BUILD)
    finally:
        with torch.no_grad():
            head.copy_(saved)
    assert spec.decoding.startswith("plain") and any("rejected the netlist simulator's draft" in m and
                                                     "cycle 0" in m for m in logs)
    _same([spec], [plain])
    assert spec.records[0].rd_wdata == RAM + 4 != ref.records[0].rd_wdata     # sp = the RAM's top, a bit flipped
    assert (spec.halt, spec.console) != (ref.halt, ref.console) or spec.records != ref.records


def test_teacher_forced_names_a_divergence(model):
    """A broken model (the last layer's FFN, which copies the bits of the token to emit, zeroed):
    check_model_batch raises ModelDivergence naming the cycle and token (the model is restored)."""
    from cpu.model_engine import ModelDivergence

    w = load_model(RAM, build_dir=BUILD)[0].model.layers[-1].mlp.down_proj.weight
    saved = w.detach().clone()
    try:
        with torch.no_grad():
            w.zero_()
        with pytest.raises(ModelDivergence, match=r"differs from the netlist simulator's trace: cycle 0, "
                                                  r"batch row 0: token \d+"):
            check_model_batch([random_program(1, 12, RAM, compact=True)], RAM, build_dir=BUILD)
    finally:
        with torch.no_grad():
            w.copy_(saved)


def test_run_too_long_for_memory_is_refused(model, monkeypatch):
    """A program that runs past what the token trace and attention cache can hold in the memory
    available (here: 10 MB at 1,000 bytes a position, so 5,000 instructions of the shortest frame,
    2 positions with the input token) is one clear
    error from the netlist simulator's capped run, before any model work; a program that halts
    within it runs."""
    from cpu import asm, model_engine
    from cpu.machine import Image
    from netlist2tf.common.errors import Netlist2TFError

    monkeypatch.setattr(model_engine, "_memory", lambda m: (1000, 10_000_000))
    spin = Image.from_words([asm.addi(5, 5, 1), asm.jal(0, -4)])       # never halts
    with pytest.raises(Netlist2TFError, match=r"runs past 5,000 instructions .* more than the 0\.0 GB "
                                              r"available; pass a smaller --max-steps"):
        check_model_batch([spin], RAM, build_dir=BUILD)
    (r,) = check_model_batch([spin], RAM, max_steps=20, dtype=torch.bfloat16, build_dir=BUILD)
    assert r.halt.kind == Halt.STEP_LIMIT and r.instructions == 20


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
        assert _teacher_forced(images, *_options(request)) > 0


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
def test_larger_ram_model(tmp_path_factory):
    """``--ram-size 32768``: the CPU compiled with twice the RAM (twice the fetch and load banks; ~3 min
    to compile, 583 M parameters) runs hi.c generated in bfloat16, and libc.c, the one table program
    that needs more than 16 KiB, teacher-forced for its first 200 cycles (its 5,643-word prompt
    included)."""
    from cpu.elf import load_elf
    from cpu.programs import PROGRAMS_BY_NAME
    from cpu.toolchain import compile_c
    from netlist2tf.sim.simulator import TableStimulus
    from netlist2tf.run.verify import verify_teacher_forced

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
    assert checked >= 5 * 199                     # the shortest frame: 5 generated tokens


def test_cpu_merged_in_front_of_a_qwen_model(merged_cpu, tmp_path, capsys):
    """The compiled CPU merged in front of the embedded random Qwen3.5 base (``netlist2tf merge``, the
    shared layout: hidden max(compiled, base) + the reserved channels, not the sum): ``cpu run
    --checkpoint MERGED`` runs hi.c with every drafted token the merged model's greedy choice over its
    whole vocabulary (1,024 base tokens + the trace tokens), also after 50 text tokens; output, exit
    code and every retirement record equal unicorn's (the hazards and text between frames:
    test_cpu_merged_hazards_and_text_between_frames, slow)."""
    import json
    from cpu.cli import main
    from cpu.programs import PROGRAMS_BY_NAME

    merged, printed = merged_cpu
    assert "11 compiled layers in front of 4 base layers" in printed
    hi = str(PROGRAMS_BY_NAME["hi"].path)
    ref, ours = tmp_path / "unicorn.trace", tmp_path / "merged.trace"
    assert main(["run", hi, "--ram-size", str(RAM), "--trace", str(ref)]) == 10
    assert main(["run", hi, "--engine", "model", "--checkpoint", str(merged), "--trace", str(ours)]) == 10
    out = capsys.readouterr()
    assert out.out.endswith("hi!\n") and "speculative decoding: every token drafted" in out.err
    assert ours.read_text() == ref.read_text()
    info = json.loads((merged / "merge.json").read_text())
    assert info["layout"] == "shared" and info["hidden_size"] < info["compiled"]["hidden_size"] + 256
    after = tmp_path / "after-text.trace"
    assert main(["run", hi, "--engine", "model", "--checkpoint", str(merged), "--text-prefix", "50",
                 "--trace", str(after)]) == 10
    assert capsys.readouterr().out.endswith("hi!\n") and after.read_text() == ref.read_text()


@pytest.fixture(scope="module")
def merged(merged_cpu):
    """The compiled CPU merged in front of the embedded random base (a folder)."""
    return merged_cpu[0]


@pytest.mark.slow          # ~2 minutes with the 64 KiB model: the default suite runs the merge and hi.c above
def test_cpu_merged_hazards_and_text_between_frames(merged):
    """On the merged checkpoint: the four hazard programs teacher-forced after 0 and 50 text tokens,
    and hi.c teacher-forced with text spliced between three frames (trace, text, trace)."""
    folder = merged
    from cpu.programs import PROGRAMS_BY_NAME

    hi = str(PROGRAMS_BY_NAME["hi"].path)
    images = list(hazard_programs().values())
    refs = [run_unicorn(img, ram_size=RAM) for img in images]
    for prefix in (0, 50):
        _same(check_model_batch(images, RAM, build_dir=BUILD, checkpoint=folder, text_prefix=prefix), refs)
    assert load_model(RAM, checkpoint=folder, text_prefix=50)[0].prefix == text_prefix_tokens(folder, 50)
    # trace, text, trace: hi.c teacher-forced with text before three frames' generated tokens
    from cpu.cli import load_program
    from netlist2tf.merge import MergedTrace
    from netlist2tf.sim.simulator import TableStimulus
    from netlist2tf.run.verify import expected_tokens, verify_teacher_forced

    merged, protocol, netlist, inits, meta, _ = load_model(RAM, checkpoint=folder)
    img = load_program(hi, ram_size=RAM)
    mems = [{**meta["initial_memory"], "ram": img.words()}]
    stim = TableStimulus({"rst": np.zeros(31, dtype=np.uint64)})          # hi.c halts in cycle 30
    frames = expected_tokens(protocol, netlist, inits, 31, 1, 0, mems, stimulus=stim)[2][0]
    text = text_prefix_tokens(folder, 12)
    spliced = MergedTrace(merged.model, merged.offset, merged.vocab,
                          interludes={frames[4][1]: text[:5], frames[12][1] + 1: text[5:9], frames[20][1]: text[9:]})
    div, n = verify_teacher_forced(spliced, protocol, netlist, inits, 31, 1, 0, mems, stimulus=stim)
    assert div is None and n > 90, str(div)


def test_a_cached_checkpoint_is_found_without_elaborating_the_core(model, monkeypatch, tmp_path):
    """Start-up: once a checkpoint is built, the next process finds it by its sources (the source
    index), without elaborating the core or running Yosys; a source key it has not seen (an edited
    core or compiler) takes the long road, finds the same checkpoint by its netlist, and indexes it."""
    import netlist2tf.frontend as frontend
    from cpu import model_engine

    folder = model_engine.build_checkpoint(RAM, BUILD)
    real = frontend.synthesize

    def refuse(*args, **kwargs):
        raise AssertionError("the core was elaborated and synthesized")

    monkeypatch.setattr(model_engine, "_BUILT", {})
    monkeypatch.setattr(frontend, "synthesize", refuse)
    assert model_engine.build_checkpoint(RAM, BUILD) == folder
    calls = []
    monkeypatch.setattr(frontend, "synthesize", lambda *a, **k: calls.append(a) or real(*a, **k))
    monkeypatch.setattr(model_engine, "_BUILT", {})
    monkeypatch.setattr(model_engine, "source_key", lambda settings: "f" * 24)
    index = BUILD / "cpu-model" / "by-source" / ("f" * 24)
    try:
        assert model_engine.build_checkpoint(RAM, BUILD) == folder and len(calls) == 1
        assert index.read_text().strip() == folder.name
    finally:
        index.unlink(missing_ok=True)
