"""A compiled checkpoint used the way a stock ``transformers`` user uses it (docs/design/transformers.md):
``AutoTokenizer`` and ``AutoModelForCausalLM`` from the folder, prompts built from token names,
``model.generate()`` frame by frame (stopping by the generation config's eos tokens), the generated
names parsed back into values, against the netlist simulator (the oracle). The helpers under "user
side" use nothing of netlist2tf: they are the code of docs/design/transformers.md."""

import json
import re

import pytest
import torch

from netlist2tf.checkpoint import hf
from netlist2tf.compile.plan import CompileSettings
from netlist2tf.driver import compile_netlist
from netlist2tf.checkpoint.emit import emit_checkpoint
from netlist2tf.frontend.synth import synthesize
from netlist2tf.netlist.ir import parse_netlist
from netlist2tf.sim.simulator import Simulator

# (design, layers: the fewest it fits in, as in test_compile_e2e.py)
COUNTER = ("hdl.examples.counter:Counter", 4)
FIFO = ("hdl.examples.fifo:FIFO", 7)


def _add_hf_files(folder, protocol, netlist):
    """What emit_checkpoint is to write itself: the tokenizer and the generation settings (only if
    it has not)."""
    from transformers import GenerationConfig

    if not (folder / "tokenizer.json").is_file():
        hf.write_tokenizer(protocol, folder, netlist)
    config = GenerationConfig.from_pretrained(folder)
    if config.eos_token_id is None and protocol.inputs:
        config.update(**hf.generation_settings(protocol))
        config.save_pretrained(folder)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, build_dir):
    """(design, layers) -> (folder, compiled, netlist), compiled once per module."""
    made = {}

    def get(design):
        if design not in made:
            result = synthesize(design[0], "macro", build_dir)
            netlist = parse_netlist(result.json_text)
            compiled = compile_netlist(netlist, CompileSettings(layers=design[1]), prove=False)
            folder = emit_checkpoint(compiled, result.json_text,
                                     tmp_path_factory.mktemp("hf") / design[0].split(":")[1])
            _add_hf_files(folder, compiled.protocol, netlist)
            made[design] = folder, compiled, netlist
        return made[design]
    return get


# -- user side: only transformers and the token names (docs/design/transformers.md) -------------------

TOKEN = re.compile(r"<(\w+):(.+)=0x([0-9a-f]+)\|p([01])>")


def parse(name):
    """'<reg:count[0:8]=0x3c|p1>' -> ('reg', 'count[0:8]', 60, 1)"""
    kind, label, value, parity = TOKEN.fullmatch(name).groups()
    return kind, label, int(value, 16), int(parity)


def segments(label):
    """'load+load_value[0:7]' -> [('load', 0, 1), ('load_value', 0, 7)]: (signal, lo, hi), LSB first."""
    out = []
    for part in label.split("+"):
        m = re.fullmatch(r"(.*)\[(\d+)(?::(\d+))?\]", part)
        out.append((part, 0, 1) if m is None else (m[1], int(m[2]), int(m[3] or int(m[2]) + 1)))
    return out


def pack(label, signals):
    """The chunk value of ``label`` from {signal: value}."""
    value, pos = 0, 0
    for name, lo, hi in segments(label):
        for bit in range(lo, hi):
            value |= ((signals.get(name, 0) >> bit) & 1) << pos
            pos += 1
    return value


def unpack(label, value, signals):
    """Adds the chunk value's bits into {signal: value}."""
    pos = 0
    for name, lo, hi in segments(label):
        for bit in range(lo, hi):
            signals[name] = signals.get(name, 0) | (((value >> pos) & 1) << bit)
            pos += 1


def run_cycles(folder, prompt, inputs_per_cycle):
    """Stock transformers (docs/design/transformers.md, line for line): per cycle, the IN tokens of its
    inputs, then generate() to the frame's end; yields {kind: {signal: value}} per cycle (``out``: the
    cycle's outputs, ``reg``: the next register values, ``ma``/``md``: the memory write)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)            # exactly config.vocab_size names
    model = AutoModelForCausalLM.from_pretrained(folder)   # generation_config: greedy, stops at a frame's end

    names = {parse(name): name for name in tok.get_vocab()}      # (kind, label, value, parity) -> name
    in_labels = sorted({label for kind, label, _, _ in names if kind == "in"},
                       key=lambda label: tok.convert_tokens_to_ids(names["in", label, 0, 0]))

    ids = tok(prompt, return_tensors="pt").input_ids
    for cycle, inputs in enumerate(inputs_per_cycle):
        frame_in = " ".join(names["in", label, pack(label, inputs), cycle % 2] for label in in_labels)
        ids = torch.cat([ids, tok(frame_in, return_tensors="pt").input_ids], dim=1)
        out = model.generate(ids, attention_mask=torch.ones_like(ids))      # stops at the frame's end
        frame = tok.decode(out[0, ids.shape[1]:])
        ids = out
        values = {}
        for name in frame.split():
            kind, label, value, parity = parse(name)
            unpack(label, value, values.setdefault(kind, {}))
            assert parity == (1 - cycle % 2 if kind == "reg" else cycle % 2), name
        yield values


# -- the tests ---------------------------------------------------------------------------------

def _simulate(netlist, initial_registers, inputs_per_cycle):
    """The oracle: per cycle ({output: value}, {register signal: next value}) from the netlist
    simulator; the next state is read per register output net (the design's names for it)."""
    sim = Simulator(netlist)
    sim.set_state({k: v for k, v in initial_registers.items() if k in sim.state_names})
    names = {p.name for p in netlist.ports} | {s.name for s in netlist.signals}
    for inputs in inputs_per_cycle:
        out = sim.step({p.name: inputs.get(p.name, 0) for p in sim.input_ports})
        regs, state = {}, sim.state()
        for r in netlist.registers:
            value = state[f"reg:{r.name}"]
            for i, q in enumerate(r.q):
                net = netlist.nets[q]
                name, bit = (net.base, net.bit or 0) if net.base in names or "\\" in net.base else (r.name, i)
                regs[name] = regs.get(name, 0) | (((int(value) >> i) & 1) << bit)
        yield {k: int(v) for k, v in out.items()}, regs


COUNTER_INPUTS = [dict(en=1), dict(en=1), dict(load=1, load_value=0xfd), dict(en=1), dict(en=1),
                  dict(en=1), dict(en=0), dict(en=1, load=1, load_value=0x3c), dict(rst=1, en=1),
                  dict(en=1), dict(en=1, load_value=0x55)]


def test_counter_by_stock_generate_equals_simulator(checkpoint):
    folder, compiled, netlist = checkpoint(COUNTER)
    proto = compiled.protocol
    names = hf.token_names(proto, netlist)
    prompt = " ".join(names[t] for t in proto.initial_tokens(compiled.initial_registers, compiled.initial_memory))
    assert prompt == "<reg:count[0:8]=0x00|p0>"          # the initial frame docs/design/transformers.md types
    assert (folder / "prompt.txt").read_text() == prompt + "\n"      # and the folder holds it
    got = list(run_cycles(folder, prompt, COUNTER_INPUTS))
    want = list(_simulate(netlist, compiled.initial_registers, COUNTER_INPUTS))
    assert [g["out"] for g in got] == [w[0] for w in want]
    assert [g["reg"] for g in got] == [w[1] for w in want]
    counts = [g["out"]["count"] for g in got]
    assert counts == [0, 1, 2, 0xfd, 0xfe, 0xff, 0, 0, 0x3c, 0, 1]     # load, wrap, hold, reset
    assert [g["out"]["wrap"] for g in got] == [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
    assert [g["reg"]["count"] for g in got] == counts[1:] + [2]


FIFO_INPUTS = [dict(w_en=1, w_data=0x11), dict(w_en=1, w_data=0x22), dict(w_en=1, r_en=1, w_data=0x33),
               dict(r_en=1), dict(), dict(r_en=1), dict(w_en=1, w_data=0xa5), dict(r_en=1),
               dict(r_en=1), dict(w_en=1, w_data=0x5a, rst=1), dict(r_en=1)]


def test_fifo_by_stock_generate_equals_simulator(checkpoint):
    """A memory: the prompt ends on a (disabled) write group, every frame carries MA/MD tokens."""
    folder, compiled, netlist = checkpoint(FIFO)
    proto = compiled.protocol
    names = hf.token_names(proto, netlist)
    prompt = " ".join(names[t] for t in proto.initial_tokens(compiled.initial_registers, compiled.initial_memory))
    assert prompt.split()[-2:] == ["<ma:storage.en+storage.addr[0:4]=0x00|p1>", "<md:storage.data[0:8]=0x00|p1>"]
    assert (folder / "prompt.txt").read_text() == prompt + "\n"
    got = list(run_cycles(folder, prompt, FIFO_INPUTS))
    want = list(_simulate(netlist, compiled.initial_registers, FIFO_INPUTS))
    assert [g["out"] for g in got] == [w[0] for w in want]
    assert [g["reg"] for g in got] == [w[1] for w in want]
    # the writes the model generated: enabled exactly when a word is accepted
    assert [g["ma"]["storage.en"] for g in got] == [1, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0]
    assert [g["md"]["storage.data"] for g in got if g["ma"]["storage.en"]] == [0x11, 0x22, 0x33, 0xa5, 0x5a]
    # the words read (r_en while r_rdy) are the words written, in order; the reset empties it
    assert [g["out"]["r_data"] for g, i in zip(got, FIFO_INPUTS) if i.get("r_en") and g["out"]["r_rdy"]] \
        == [0x11, 0x22, 0x33, 0xa5]
    assert [g["out"]["level"] for g in got] == [0, 1, 2, 2, 1, 1, 0, 1, 0, 0, 0]


@pytest.mark.parametrize("design", [COUNTER, FIFO])
def test_tokenizer_has_exactly_the_model_vocabulary_and_round_trips(design, checkpoint):
    from transformers import AutoConfig, AutoTokenizer

    folder, compiled, netlist = checkpoint(design)
    proto = compiled.protocol
    tok = AutoTokenizer.from_pretrained(folder)
    assert len(tok) == tok.vocab_size == proto.vocab_size == AutoConfig.from_pretrained(folder).vocab_size
    assert tok.all_special_ids == []
    names = hf.token_names(proto, netlist)
    assert len(set(names)) == len(names) and not any(re.search(r"\s", n) for n in names)
    assert all(TOKEN.fullmatch(n) for n in names)
    ids = list(range(proto.vocab_size))
    assert tok.convert_ids_to_tokens(ids) == names
    assert tok.convert_tokens_to_ids(names) == ids
    text = tok.decode(ids)
    assert text == " ".join(names) and tok(text).input_ids == ids
    for t in (0, proto.vocab_size - 1, 777 % proto.vocab_size):     # name fields equal protocol fields
        f, (kind, label, value, parity) = proto.field(t), parse(names[t])
        assert (kind, value, parity) == (f.kind, f.value, f.parity)
        assert label == hf.chunk_labels(proto, netlist)[f.kind, f.chunk]
    with pytest.raises(Exception, match="WordLevel"):                 # no unk token: a typo raises
        tok("<reg:nope=0x00|p0>")


def test_generation_config_stops_at_the_frame_end(checkpoint):
    from transformers import AutoModelForCausalLM, GenerationConfig

    folder, compiled, netlist = checkpoint(COUNTER)
    proto = compiled.protocol
    model = AutoModelForCausalLM.from_pretrained(folder)
    prompt = proto.initial_tokens(compiled.initial_registers) + proto.input_tokens(0, {"en": 1})
    out = model.generate(torch.tensor([prompt]), max_new_tokens=10 * len(proto.generated))
    assert out.shape[1] == len(prompt) + len(proto.generated)      # the eos tokens stopped it
    assert proto.decode_frame(0, out[0, len(prompt):].tolist())[0]["count"] == 0

    folder, compiled, _ = checkpoint(FIFO)
    proto = compiled.protocol
    config = GenerationConfig.from_pretrained(folder)
    last = proto.generated[-1]
    assert sorted(config.eos_token_id) == hf.frame_end_ids(proto)
    assert {(f.kind, f.chunk) for f in map(proto.field, config.eos_token_id)} == {last}
    assert len(config.eos_token_id) == 2 << proto.chunk_bits
    assert config.pad_token_id in config.eos_token_id and config.bos_token_id is None
    assert config.max_new_tokens == len(proto.generated) and config.do_sample is False
    # a design without inputs: no eos (frames follow each other), unless asked for
    free = dict(hf.generation_settings(proto), eos_token_id=None)
    assert hf.generation_settings(proto, stop_at_frame_end=False) == free


def test_design_without_inputs_runs_cycles_in_one_generate_call(tmp_path, build_dir):
    """No inputs: the generation config has no eos (frames follow each other with no user tokens), so
    one stock generate() call runs as many cycles as ``max_new_tokens`` holds frames."""
    from pathlib import Path

    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    result = synthesize(f"{Path(__file__).parent.parent}/designs/free_running.v", "macro", build_dir)
    netlist = parse_netlist(result.json_text)
    compiled = compile_netlist(netlist, CompileSettings(layers=4), prove=False)
    folder = emit_checkpoint(compiled, result.json_text, tmp_path / "free")
    _add_hf_files(folder, compiled.protocol, netlist)
    assert GenerationConfig.from_pretrained(folder).eos_token_id is None
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    names = hf.token_names(compiled.protocol, netlist)
    prompt = " ".join(names[t] for t in compiled.protocol.initial_tokens(compiled.initial_registers,
                                                                         compiled.initial_memory))
    # the register c drives the port count: the port's name wins (ports first, then public names)
    assert prompt.split() == ["<reg:count[0:8]=0x05|p0>", "<ma:mem.en+mem.addr[0:4]=0x00|p1>",
                              "<md:mem.data[0:8]=0x00|p1>"]
    ids = tok(prompt, return_tensors="pt").input_ids
    per_frame = model.generation_config.max_new_tokens
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4 * per_frame)
    frames = tok.decode(out[0, ids.shape[1]:]).split()
    counts = []
    for k in range(4):
        values = {}
        for name in frames[k * per_frame:(k + 1) * per_frame]:
            kind, label, value, _ = parse(name)
            unpack(label, value, values.setdefault(kind, {}))
        counts.append(values["out"]["count"])
        assert values["reg"]["count"] == (5 * values["out"]["count"] + 3) % 256
    assert counts == [5, 28, 143, 206]          # x -> 5x + 3 mod 256 from 5


def test_register_tokens_carry_the_designs_signal_names(checkpoint):
    _, compiled, netlist = checkpoint(COUNTER)
    regs = hf.readable_register_names(netlist)
    assert all(r.name.startswith("$auto$") for r in netlist.registers)    # the macro flow's cells
    assert sorted(regs.values()) == [f"count[{i}]" for i in range(8)]
    labels = hf.chunk_labels(compiled.protocol, netlist)
    assert labels == {("in", 0): "load+load_value[0:7]", ("in", 1): "load_value[7]+rst+en",
                      ("out", 0): "count[0:8]", ("out", 1): "wrap", ("reg", 0): "count[0:8]"}
    # without the netlist the registers' own names
    assert hf.chunk_labels(compiled.protocol)["reg", 0].startswith("$auto$ff.cc:")
    _, fifo, fifo_nl = checkpoint(FIFO)
    fifo_regs = hf.readable_register_names(fifo_nl)
    assert len(set(fifo_regs.values())) == len(fifo_regs)
    assert {"r_ptr[0]", "w_ptr[4]"} <= set(fifo_regs.values())
    assert not any(v.startswith("$auto$") for v in fifo_regs.values())
    assert {hf.chunk_labels(fifo.protocol, fifo_nl)[k, c.index] for k in ("ma", "md")
            for c in fifo.protocol.chunks_of(k)} == {"storage.en+storage.addr[0:4]", "storage.data[0:8]"}


def test_readable_names_whole_signals_and_collisions():
    """A multi-bit register that is its whole signal is the bare name; a part of one a slice; two
    registers of one name get ~2."""
    import dataclasses

    from netlist2tf.netlist.ir import NamedSignal, Net, Netlist, Register

    nets = (Net(0, "1'b0", None), Net(1, "1'b1", None), Net(2, "1'bx", None),
            *(Net(3 + i, "pc", i) for i in range(4)), Net(7, "flag", None), Net(8, "$auto$x", None),
            Net(9, "$auto$x", None))
    signals = (NamedSignal("pc", (3, 4, 5, 6), ""), NamedSignal("flag", (7,), ""))
    regs = (Register("$a", (0,) * 4, (3, 4, 5, 6), 0, True, 0), Register("$b", (0,), (7,), 0, True, 0),
            Register("$c", (0, 0), (8, 9), 0, True, 0))
    nl = Netlist("top", nets, (), (), regs, (), signals)
    assert hf.readable_register_names(nl) == {"$a": "pc", "$b": "flag", "$c": "$c"}
    split = dataclasses.replace(nl, registers=(Register("$a", (0, 0), (3, 4), 0, True, 0),
                                               Register("$b", (0, 0), (5, 6), 0, True, 0)))
    assert hf.readable_register_names(split) == {"$a": "pc[0:2]", "$b": "pc[2:4]"}
    twice = dataclasses.replace(nl, nets=nets[:8] + (Net(8, "flag", None), Net(9, "flag", None)),
                                signals=signals + (NamedSignal("flag", (8, 9), ""),),
                                registers=(Register("$b", (0,), (7,), 0, True, 0),
                                           Register("$d", (0,), (8,), 0, True, 0)))
    assert hf.readable_register_names(twice) == {"$b": "flag", "$d": "flag~2"}


def test_tokenizer_files_are_byte_identical(tmp_path, checkpoint):
    _, compiled, netlist = checkpoint(FIFO)
    files = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        files.append([p.read_bytes() for p in hf.write_tokenizer(compiled.protocol, tmp_path / name, netlist)])
    assert files[0] == files[1]
    config = json.loads(files[0][1])
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast" and config["eos_token"] is None
    assert len(json.loads(files[0][0])["model"]["vocab"]) == compiled.protocol.vocab_size


def test_the_readme_example_runs_as_written(tmp_path, build_dir, capsys):
    """The README's "Using a compiled checkpoint with transformers alone" block, executed as it is
    (only its folder replaced by a fresh compile of the counter): it prints three frames whose counts
    and next counts are the simulator's."""
    from pathlib import Path

    from netlist2tf import cli

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Using a compiled checkpoint with transformers alone", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    folder = tmp_path / "counter-model"
    assert cli.main(["compile", "hdl.examples.counter:Counter", "--layers", "4", "--out", str(folder),
                     "--build-dir", str(build_dir)]) == 0
    assert 'folder = "build/counter-model"' in code
    capsys.readouterr()
    exec(compile(code.replace('folder = "build/counter-model"', f'folder = "{folder}"'), "README.md", "exec"), {})
    printed = capsys.readouterr().out.split("\n")[:3]
    netlist = parse_netlist(synthesize(COUNTER[0], "macro", build_dir).json_text)
    want = list(_simulate(netlist, {}, [dict(en=1)] * 3))
    for cycle, (line, (outs, regs)) in enumerate(zip(printed, want)):
        values = {}
        for name in line.split():
            kind, label, value, parity = parse(name)
            unpack(label, value, values.setdefault(kind, {}))
        assert values["out"] == outs and values["reg"] == regs, (cycle, line)
    assert [v[0]["count"] for v in want] == [0, 1, 2]
