"""The layer-assignment report: where every cell, signal, register and memory of a design went.

``build_report(plan, ...)`` turns a ``ModelPlan`` (never the weights) into one JSON-able dict whose
layout is ``schema.json`` beside this module (``SCHEMA_VERSION``; docs/design/report.md says what each field means):

* ``cells``: every cell of the synthesized netlist exactly once, with the HDL signal and source line
  it comes from (``attribution.py``: abc's LUTs are matched by function to the gates Yosys had before
  mapping, which still carry ``src``) and where it went: the FFN rows of one or more layers
  (``ffn``), inside another cell's truth table (``folded``: the scheduler's collapse), or nowhere
  (``removed``: it drove only outputs the model does not emit, or nothing);
* ``signals``: the same by HDL signal (bits grouped): layers, FFN rows, residual channels with the
  times they are written and freed, the DeltaNet heads and token chunks that carry a register's bits:
  what the page's search box looks through;
* ``per_layer``: FFN neurons and DeltaNet heads used against capacity, the signals computed there
  with their rows, what every value head holds, residual bits in use, and margins measured on the
  neurons' weights: the largest ReLU input (bias plus positive weights: bfloat16 holds every integer
  up to 256, so a layer at most 256 is bfloat16-exact by this bound) and the smallest distance of a
  reachable pre-activation from the threshold 0 (over every 0/1 value of the bits a neuron reads:
  its weights' subset sums, so a bound over more inputs than the design can produce);
* ``tokens`` (which chunk carries which bits, gated or not), ``memories`` (how each was lowered and
  why), the ``critical_path`` in HDL names, ``totals``, and after ``--compare`` a ``compare`` section.

``write_report`` writes report.json, assignment.csv (one row per cell) and report.html
(``report_page.py``). Deterministic: the same design gives byte-identical files.
"""

import csv
import io
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

from netlist2tf.gadgets import BF16_LIMIT
from netlist2tf.netlist import CONST0, CONST1, CONSTX, Netlist
from netlist2tf.compile import ModelPlan

SCHEMA_VERSION = 1
SCHEMA_FILE = Path(__file__).with_name("schema.json")


def short_src(src: str) -> str:
    """A ``src`` attribute's first location outside installed libraries as ``path:line``, the path
    relative to the working folder when it lies inside it (so reports built in two clones read the same)."""
    locations = [s for s in str(src or "").split("|") if s]
    # the design's own line rather than a library's (Amaranth's memory.py, _ir.py)
    first = next((s for s in locations if "site-packages" not in s), locations[0] if locations else "")
    if not first:
        return ""
    path, sep, rest = first.partition(":")
    try:
        rel = Path(path).resolve().relative_to(Path.cwd().resolve())
        path = str(rel)
    except (ValueError, OSError):
        pass
    line = rest.split(".")[0] if rest else ""
    return f"{path}:{line}" if sep and line else path


def signal_of_bit(name: str) -> str:
    """The signal a bit name belongs to: ``rd_value[5]`` -> ``rd_value``; ``m_lo[3] (next value)`` ->
    ``m_lo (next value)``."""
    return re.sub(r"\[\d+\](?=( \(|$))", "", name)


def neuron_margin(neuron, layout) -> tuple[int | None, int, int]:
    """(the smallest |pre-activation| other than 0, the smallest and the largest pre-activation) of
    a pair-space neuron over every 0/1 value of the bits it reads (a bit's two channels carry b and
    1 - b; the constant channel 1, an anchor its value). Exact: the reachable values are the subset
    sums of the bits' weight differences, kept as a bitset. None: no value but 0 is reachable."""
    anchors = dict(layout.anchors)
    const = neuron.bias
    per_bit: dict = defaultdict(lambda: [0, 0])           # pair -> [weight if b = 1, weight if b = 0]
    for ch, w in neuron.inputs:
        if ch == layout.one:
            const += w
        elif ch in anchors:
            const += w * anchors[ch]
        else:
            p, side = divmod(ch - layout.first_pair, 2)
            per_bit[p][side] += w
    low = const + sum(min(w1, w0) for w1, w0 in per_bit.values())
    reach = 1
    for w1, w0 in per_bit.values():
        if w1 != w0:
            reach |= reach << abs(w1 - w0)
    values = [low + i for i, c in enumerate(bin(reach)[:1:-1]) if c == "1"]
    nonzero = [abs(v) for v in values if v != 0]
    return (min(nonzero) if nonzero else None), values[0], values[-1]


def _layer_margins(neurons, layout) -> tuple[int, int, int | None, int | None]:
    """(largest |pre-activation|, largest ReLU input, smallest margin, the row that has it) of a layer."""
    big = pos = 0
    best, row = None, None
    for j, n in enumerate(neurons):
        m, lo, hi = neuron_margin(n, layout)
        big = max(big, abs(lo), abs(hi))
        pos = max(pos, hi)
        if m is not None and (best is None or m < best):
            best, row = m, j
    return big, pos, best, row


def _time(t: int | None) -> dict | None:
    """A pair-lifetime time (mixer l = 2l, FFN l = 2l + 1) as {layer, part}."""
    if t is None:
        return None
    return {"layer": t // 2, "part": "ffn" if t % 2 else "mixer"}


def build_report(plan: ModelPlan, nonzero: int | None = None, design: str | None = None,
                 synth=None, netlist: Netlist | None = None, economy: dict | None = None) -> dict:
    """The report of a model plan as a JSON-able dict (module docstring). ``nonzero``: the written
    weights' non-zero count, where they exist; ``design``: the name to show (the DESIGN argument;
    the netlist's top module otherwise); ``synth``: the ``frontend.SynthResult`` the plan's netlist
    came from (for the HDL attribution of abc's LUTs; without it a cell names only its own ``src``);
    ``netlist``: the whole synthesized netlist, when the plan kept only some outputs (its other
    cells are listed as removed); ``economy``: what the compiler's own search found (``driver.Economy.record``:
    every group found, its gate and proof, the groups z3 refuted, the frame cost before and after)."""
    from netlist2tf.report.attribution import attribute

    kept_nl, sched, stats = plan.netlist, plan.schedule, plan.stats
    full = netlist or kept_nl
    target = sched.target
    L = target.num_layers
    cells = {c.name: c for c in full.cells}
    kept_cells = {c.name for c in kept_nl.cells}
    premap = synth.premap_text() if synth is not None else None
    text = synth.json_text if synth is not None else None
    attr = attribute(premap, text) if text is not None else {}

    def who(cell_name: str) -> dict:
        a = attr.get(cell_name)
        c = cells.get(cell_name)
        own = short_src(c.src) if c is not None else ""
        if a is None:
            outs = [str(full.nets[n]) for _, sig in c.outputs for n in sig] if c is not None else []
            named = [o for o in outs if not o.startswith("$")]
            return {"signal": named[0] if named else None, "src": own, "attributed_by": "cell" if own else "none"}
        return {"signal": a["signal"], "src": short_src(a["src"]) or own, "attributed_by": a["how"]}

    # FFN rows per unit (lower_logic's order), and the rows of the pair resets / token selection
    rows: dict = {}
    special: list = [[] for _ in range(L)]
    for layer, owned in enumerate(plan.neuron_owners):
        for unit, first, end in owned:
            if unit.startswith("("):
                special[layer].append({"what": unit.strip("()"), "neurons": [first, end]})
            else:
                rows[unit] = (layer, first, end)
    model_layout = plan.model_layout or plan.layout

    def channels_of(net: int) -> list[int]:
        p = plan.pairs[net]
        return [model_layout.bit(p)] if model_layout.signed else list(model_layout.pair(p))

    def channel_entry(net: int) -> dict | None:
        if net in (CONST0, CONST1, CONSTX) or net not in plan.pairs:
            return None
        w, f = plan.lifetimes.get(net, (None, None))
        return {"bit": sched.net_name(kept_nl, net), "channels": channels_of(net), "written": _time(w), "freed": _time(f)}

    # units by cell (a macro spans layers: OWNER@LAYER), and what became of every cell
    units_of: dict = defaultdict(list)
    for unit in sched.cell_layer:
        units_of[sched.unit_cell[unit]].append(unit)
    readers: dict = defaultdict(list)                      # net -> kept cells reading it
    for c in kept_nl.cells:
        for _, sig in c.inputs:
            for n in sig:
                readers[n].append(c.name)

    def unit_entry(unit: str) -> dict:
        layer, first, end = rows.get(unit, (sched.cell_layer[unit], 0, 0))
        return {"unit": unit, "layer": layer, "neurons": [first, end]}

    def folded_into(name: str) -> list[str]:
        """The scheduled units whose truth tables absorbed cell ``name`` (through folded readers)."""
        seen, todo, found = {name}, [name], set()
        while todo:
            c = cells[todo.pop()]
            for _, sig in c.outputs:
                for n in sig:
                    for r in readers.get(n, ()):
                        if units_of.get(r):
                            found.update(units_of[r])
                        elif r not in seen:
                            seen.add(r)
                            todo.append(r)
        return sorted(found, key=lambda u: (sched.cell_layer[u], u))

    cell_rows = []
    for name in sorted(cells):
        c = cells[name]
        entry = {"cell": name, "type": c.type, **who(name)}
        if units_of.get(name):
            entry["place"] = "ffn"
            entry["units"] = [unit_entry(u) for u in sorted(units_of[name], key=lambda u: (sched.cell_layer[u], u))]
        elif name in kept_cells:
            into = folded_into(name)
            entry["place"] = "folded" if into else "removed"
            entry["units"] = [unit_entry(u) for u in into]
            entry["why"] = ("its function is part of these units' truth tables (the scheduler's collapse)"
                            if into else "nothing the model computes reads it")
        else:
            entry["place"] = "removed"
            entry["units"] = []
            entry["why"] = "it drives only outputs the model does not emit (keep_outputs)"
        cell_rows.append(entry)
    cell_of = {e["cell"]: e for e in cell_rows}

    # ROM read decoders are units without a cell: named by the memory
    mem_src = {m.name: short_src(m.src) for m in kept_nl.memories}

    def unit_who(unit: str) -> dict:
        owner = sched.unit_cell[unit]
        if owner.startswith("memrd:"):
            mem, port = owner[len("memrd:"):].rsplit(":", 1)
            return {"signal": f"{mem} (read port {port})", "src": mem_src.get(mem, ""), "attributed_by": "memory"}
        e = cell_of[owner]
        return {"signal": e["signal"], "src": e["src"], "attributed_by": e["attributed_by"]}

    # signals: every unit's outputs, every source bit (registers, inputs, memory reads)
    sigs: dict = {}

    def sig(name: str | None, src: str) -> dict:
        key = signal_of_bit(name) if name else f"(unnamed logic at {src or 'no source'})"
        s = sigs.get(key)
        if s is None:
            s = sigs[key] = {"signal": key, "kind": "logic", "src": [], "bits": set(), "cells": 0,
                             "layers": {}, "by_line": {}, "channels": [], "heads": [], "tokens": []}
        if src and src not in s["src"]:
            s["src"].append(src)
        if name and name != key:
            s["bits"].add(name)
        return s

    per_layer_signals: list = [defaultdict(lambda: {"units": 0, "neurons": []}) for _ in range(L)]
    for unit in sorted(sched.cell_layer, key=lambda u: (sched.cell_layer[u], u)):
        w = unit_who(unit)
        s = sig(w["signal"], w["src"])
        layer, first, end = rows.get(unit, (sched.cell_layer[unit], 0, 0))
        lay = s["layers"].setdefault(str(layer), {"units": 0, "neurons": []})
        lay["units"] += 1
        if end > first:
            lay["neurons"].append([first, end])
        line = s["by_line"].setdefault(w["src"] or "(no source)", {}).setdefault(str(layer), [])
        if end > first:
            line.append([first, end])
        pl = per_layer_signals[layer][(s["signal"], w["src"])]
        pl["units"] += 1
        if end > first:
            pl["neurons"].append([first, end])
        for f in sched.functions[unit]:
            ch = channel_entry(f.out)
            if ch is not None:
                s["channels"].append(ch)
    for e in cell_rows:
        if e["place"] != "removed" and e["signal"] and signal_of_bit(e["signal"]) in sigs:
            sigs[signal_of_bit(e["signal"])]["cells"] += 1
    # source bits: registers (layer 0's mixer), inputs, memory read data
    reg_of_q = {q: r for r in kept_nl.registers for q in r.q}
    net_sig = {}
    for ns in kept_nl.signals:
        for n in ns.bits:
            net_sig.setdefault(n, ns)
    for net in sorted(plan.pairs):
        if net in reg_of_q or any(net in p.bits for p in kept_nl.inputs):
            bit = str(kept_nl.nets[net])
            ns = net_sig.get(net)
            s = sig(bit, short_src(ns.src) if ns is not None else "")
            s["kind"] = "register" if net in reg_of_q else "input"
            ch = channel_entry(net)
            if ch is not None:
                s["channels"].append(ch)
    for m in kept_nl.memories:
        for port, rp in enumerate(m.read_ports):
            if (m.name, port) in sched.read_layer:
                s = sig(f"{m.name} (read port {port})", mem_src.get(m.name, ""))
                s["kind"] = "memory read"
                for n in rp.data:
                    ch = channel_entry(n)
                    if ch is not None:
                        s["channels"].append(ch)
    # what the DeltaNet heads and the tokens carry, by the bits' signal names
    heads_out = []
    for h in plan.heads:
        bank = re.match(r"(\S+) read port (\d+): ", h.holds)
        named = []
        for name in sorted({f"{bank.group(1)} (read port {bank.group(2)})"} if bank else _names_in(h.holds)):
            if name in sigs:
                sigs[name]["heads"].append({"layer": h.layer, "head": h.head})
                named.append({"signal": name, "src": sigs[name]["src"][0] if sigs[name]["src"] else ""})
        heads_out.append({"layer": h.layer, "head": h.head, "holds": h.holds, "signals": named})
    tokens = _tokens(plan)
    for t in tokens:
        for name in {signal_of_bit(b) for b in t["bits"]}:
            if name in sigs:
                sigs[name]["tokens"].append(t["chunk"])
    signals = []
    for key in sorted(sigs):
        s = sigs[key]
        s["bits"] = sorted(s["bits"], key=_bit_order)
        s["channels"] = sorted(s["channels"], key=lambda c: _bit_order(c["bit"]))
        s["tokens"] = sorted(set(s["tokens"]), key=_chunk_order)
        for lay in s["layers"].values():
            lay["neurons"] = _merge_ranges(lay["neurons"])
        s["by_line"] = {src: {k: _merge_ranges(v) for k, v in sorted(by.items(), key=lambda kv: int(kv[0]))}
                        for src, by in sorted(s["by_line"].items(), key=lambda kv: _line_order(kv[0]))}
        signals.append(s)

    # per layer
    live = stats["live_pairs_per_layer"]
    layers = []
    for i in range(L):
        units = [u for u, layer in sched.cell_layer.items() if layer == i]
        big, positive, margin, margin_row = _layer_margins(plan.neurons[i], plan.layout)
        here = [{"signal": k[0], "src": k[1], "units": v["units"], "neurons": _merge_ranges(v["neurons"])}
                for k, v in sorted(per_layer_signals[i].items())]
        groups = Counter((s["src"] or "(no source)") for s in here for _ in range(s["units"]))
        layers.append({
            "layer": i, "type": target.layer_types[i],
            "ffn_neurons": stats["neurons_per_layer"][i], "ffn_capacity": target.intermediate_size,
            "deltanet_heads": stats["deltanet_heads"][i], "deltanet_capacity": target.linear_num_value_heads,
            "memory_reads": sorted(f"{m}.{p}" for (m, p) in sched.read_layer if i in sched.read_layers((m, p))),
            "deltanet_value_heads": [{k: v for k, v in h.items() if k != "layer"} for h in heads_out
                                     if h["layer"] == i],
            **({"attention_heads": [{"head": h.head, "holds": h.holds} for h in plan.lookups if h.layer == i]}
               if any(h.layer == i for h in plan.lookups) else {}),
            "cells": len({sched.unit_cell[u] for u in units}), "units": len(units),
            "cells_by_source": dict(sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))),
            "signals": here, "other_neurons": special[i],
            "live_pairs": live[i], "max_abs_preactivation": big, "max_relu_input": positive,
            "bf16_exact": positive <= BF16_LIMIT, "smallest_margin": margin,
            "smallest_margin_at": _row_owner(plan, i, margin_row, unit_who) if margin_row is not None else None,
        })

    return {
        "schema": "netlist2tf-layer-report", "schema_version": SCHEMA_VERSION,
        "design": design or kept_nl.top, "layers": L, "hidden_size": stats["hidden_size"],
        "intermediate_size": stats["intermediate_size"], "logic_depth": sched.depth,
        "attribution": "premap" if premap is not None else ("cells" if text is not None else "none"),
        "memories": memory_lowering(plan),
        "critical_path": _critical_path(plan, unit_who, short_src),
        "per_layer": layers,
        "signals": signals,
        "cells": cell_rows,
        "tokens": tokens,
        **({"economy": economy} if economy is not None else {}),
        "control_fields": _control_fields(plan, model_layout),
        "totals": {"parameters": stats["parameters"], "nonzero": nonzero,
                   "tokens_per_cycle": stats["tokens_per_cycle"],
                   "generated_tokens_per_cycle": stats["generated_tokens_per_cycle"],
                   "vocab_size": stats["vocab_size"], "residual_pairs": plan.layout.n_pairs,
                   "residual_bits": "signed" if model_layout.signed else "pairs",
                   "cells": len(cells), "cells_in_ffn": sum(e["place"] == "ffn" for e in cell_rows),
                   "cells_folded": sum(e["place"] == "folded" for e in cell_rows),
                   "cells_removed": sum(e["place"] == "removed" for e in cell_rows),
                   "cells_attributed": sum(e["signal"] is not None or bool(e["src"]) for e in cell_rows)},
    }


def _names_in(holds: str) -> set[str]:
    """The signal names in a head's ``holds`` text ("... chunk 3: m_lo[1:9], m_hi[0]")."""
    _, _, bits = holds.rpartition(": ")
    return {re.sub(r"\[[\d:]+\]$", "", b.strip()) for b in bits.split(", ") if b.strip()}


def _bit_order(name: str):
    m = re.fullmatch(r"(.*)\[(\d+)\](.*)", name)
    return (m.group(1), int(m.group(2)), m.group(3)) if m else (name, -1, "")


def _line_order(src: str):
    path, _, line = src.rpartition(":")
    return (path, int(line)) if line.isdigit() else (src, 0)


def _chunk_order(chunk: str):
    m = re.fullmatch(r"([A-Z]+)(\d+)", chunk)
    return (m.group(1), int(m.group(2))) if m else (chunk, 0)


def _merge_ranges(ranges) -> list:
    out = []
    for a, b in sorted(ranges):
        if out and out[-1][1] == a:
            out[-1][1] = b
        else:
            out.append([a, b])
    return out


def _row_owner(plan: ModelPlan, layer: int, row: int, unit_who) -> dict:
    for unit, first, end in plan.neuron_owners[layer]:
        if first <= row < end:
            if unit.startswith("("):
                return {"row": row, "unit": unit, "signal": None}
            return {"row": row, "unit": unit, "signal": unit_who(unit)["signal"]}
    return {"row": row, "unit": None, "signal": None}


def _tokens(plan: ModelPlan) -> list[dict]:
    """Every chunk of the frame: its name (I/O/R/MA/MD and index), the bits it carries by signal
    name, and when it is emitted (every cycle, or only while its group's gate is 1)."""
    proto = plan.protocol
    net = plan.netlist.nets
    out = []
    order = [("in", c.index) for c in proto.inputs] + list(proto.generated)
    for kind, idx in order:
        c = proto.chunks_of(kind)[idx]
        bits = [str(net[n]) if kind == "reg" and n not in (CONST0, CONST1, CONSTX) else nm
                for n, nm in zip(c.bits, c.names)]
        g = proto.group_of((kind, idx))
        group = proto.groups[g] if g is not None else None
        when = "every cycle" if kind != "in" and group is None else "given by the host" if kind == "in" else (
            f"only while {group.name} is 1" if group.kind in ("out", "reg") else
            f"only when {group.name} is written" if group.kind == "write" else
            f"only when a bit of {group.name} is 1")
        out.append({"chunk": f"{kind.upper()}{idx}", "kind": kind, "bits": bits, "generated": kind != "in",
                    "group": group.name if group else None, "emitted": when})
    return out


def _control_fields(plan: ModelPlan, model_layout) -> list[dict]:
    """The compiler's own residual fields (token value, write enables, emit one-hot, ...) and their
    channels."""
    out = []
    for name, pairs in plan.fields.items():
        if not pairs:
            continue
        chans = [model_layout.bit(p) if model_layout.signed else model_layout.pair(p)[0] for p in pairs]
        out.append({"field": name, "bits": len(pairs), "first_channel": min(chans), "last_channel": max(chans)})
    return out


def _critical_path(plan: ModelPlan, unit_who, src_of) -> list[dict]:
    """The deepest chain of the schedule, each step named by its HDL signal and line."""
    sched = plan.schedule
    nl = plan.netlist
    unit_of_net = {f.out: u for u, fns in sched.functions.items() for f in fns}
    mem_src = {m.name: m.src for m in nl.memories}
    steps = []
    for (what, level), (node, net) in zip(sched.critical_path, sched.critical_nodes or
                                          [(None, None)] * len(sched.critical_path)):
        step = {"level": level, "node": what, "net": sched.net_name(nl, net) if net is not None else None}
        unit = unit_of_net.get(net)
        if unit is not None:
            w = unit_who(unit)
            step.update(signal=w["signal"], src=w["src"], layer=sched.cell_layer[unit], unit=unit)
        elif node is not None and node.startswith("memrd:"):
            mem, port = node[len("memrd:"):].rsplit(":", 1)
            step.update(signal=f"{mem} (read port {port})", src=src_of(mem_src.get(mem, "")),
                        layer=sched.read_layer.get((mem, int(port))), unit=None)
        else:                                # a register or input: its signal's declaration
            named = next((ns for ns in nl.signals if net in ns.bits), None)
            step.update(signal=signal_of_bit(step["net"]) if step["net"] else None,
                        src=src_of(named.src) if named is not None else "", layer=None, unit=None)
        steps.append(step)
    return steps


def memory_lowering(plan: ModelPlan) -> list[dict]:
    """How each memory of the design became part of the model, and why: a read-only memory's read
    ports as FFN decoders (``rom.py``: flat or split, the layers and neurons measured from the
    schedule), a written one as DeltaNet banks (per read port: layer, key heads), an XOR bank of a
    memory with several write ports (``multiport.py``) named with its origin."""
    from netlist2tf.compile import memory_capacity_slots, reachable_banks
    from netlist2tf.compile import FLAT_MAX_WORDS, rom_shape, rom_words
    from netlist2tf.compile import unit_cost
    from netlist2tf.compile import ROM_WAYS

    sched = plan.schedule
    slots = memory_capacity_slots(sched.target.linear_key_head_dim)
    preloaded = set(plan.settings.preloaded_roms or ())
    choice = plan.stats.get("roms")
    if choice:                      # roms=auto: both ways planned, the one with fewer parameters kept
        ways = "; ".join(f"{w}: {choice[f'{w}_parameters']:,} parameters" if f"{w}_parameters" in choice
                         else f"{w}: does not fit ({choice[f'{w}_failed']})" for w in ROM_WAYS)
        chosen = f" (--roms auto, every ROM planned every way, the fewest parameters kept: {ways})"
    else:
        chosen = f" (--roms {plan.settings.roms})"
    group = sched.target.linear_num_value_heads // sched.target.linear_num_key_heads

    def key_heads(mem, port) -> int:          # the port's banks' key heads, counted in the plan
        return len({(h.layer, h.head // group) for h in plan.heads if h.holds.startswith(f"{mem} read port {port}:")})

    out = []
    for m in plan.netlist.memories:
        entry = {"memory": m.name, "words": m.size, "width": m.width, "src": m.src,
                 "write_ports": len(m.write_ports), "read_ports": []}
        bank = re.fullmatch(r"(.*)\$bank(\d+)", m.name)
        if bank:
            entry["origin"] = (f"XOR bank {bank.group(2)} of memory {bank.group(1)}, which has several write "
                               f"ports (multiport.py): written by its port {bank.group(2)} alone, read as "
                               f"the XOR of the banks")
        looked = m.name in plan.settings.lookup_roms
        if m.name in preloaded:
            entry["write_ports"] = 0
            entry["origin"] = ("read-only memory, read by attention lookups over the words the prompt writes"
                               if looked else "read-only memory, preloaded into DeltaNet banks by the prompt") + chosen
        for port in range(len(m.read_ports)):
            promised = f"{m.name}:{port}" in plan.settings.lookup_ports
            if (looked or promised) and (m.name, port) in sched.read_layer:
                heads = [h for h in plan.lookups
                         if h.holds.removeprefix("ROM ").startswith(f"{m.name} read port {port}:")]
                lp = heads[0].plan
                lead = min(lp.leads()["match_over_non_key"], lp.leads()["non_key_over_nearest_miss"])
                what = (f"--lookup-ports {m.name}:{port}: the port reads the words as the prompt wrote them (a "
                        f"promise that it never reads a word written later: the host keeps it)" if promised else
                        f"the prompt writes its {len(plan.initial_memory.get(m.name, {}))} non-zero words once "
                        f"each (then disables the port)")
                entry["read_ports"].append({
                    "port": port, "lowered_as": "attention lookup over the prompt",
                    "layers": list(sched.read_layers((m.name, port))),
                    "attention_heads": [h.head for h in heads],
                    "why": f"{what}, each a key of {lp.bits} address bits; q head(s) {[h.head for h in heads]} of "
                           f"the full-attention layer read the word at the port's address, exactly (unique keys: "
                           f"the match leads every other position by {lead:g} in float32 and bfloat16 at any "
                           f"length; no DeltaNet heads, no FFN decoder)" + ("" if promised else chosen)})
            elif m.name in preloaded and (m.name, port) in sched.read_layer:
                banks = len(reachable_banks(m, port, slots))
                words = len(plan.initial_memory.get(m.name, {}))
                entry["read_ports"].append({
                    "port": port, "lowered_as": "DeltaNet banks preloaded by the prompt",
                    "layers": list(sched.read_layers((m.name, port))), "key_heads": key_heads(m.name, port),
                    "why": f"{banks} bank(s) of {slots} words in {key_heads(m.name, port)} key head(s) whose value "
                           f"heads hold the words' bits; the prompt writes its {words} non-zero words through a port that "
                           f"no frame emits (0 tokens per cycle, no FFN neurons)" + chosen})
            elif not m.write_ports:
                shape = rom_shape(m, port)
                units = [u for u in sched.cell_layer if sched.unit_cell[u] == f"memrd:{m.name}:{port}"]
                n = len(rom_words(m, port)[1])
                why = (f"{n} addressable words <= {FLAT_MAX_WORDS:,}: one decoder ReLU per word in one layer"
                       if shape == "flat" else
                       f"{n} addressable words > {FLAT_MAX_WORDS:,}: two half-address decoders, then the words")
                entry["read_ports"].append({
                    "port": port, "lowered_as": f"FFN decoder ({shape})",
                    "layers": sorted({sched.cell_layer[u] for u in units}),
                    "neurons": sum(unit_cost(sched.functions[u]) for u in units),
                    "why": why + "; a read-only memory needs no state, so no DeltaNet heads and no tokens"
                           + chosen})
            elif (m.name, port) in sched.read_layer:
                banks = len(reachable_banks(m, port, slots))
                entry["read_ports"].append({
                    "port": port, "lowered_as": "DeltaNet banks", "layers": list(sched.read_layers((m.name, port))),
                    "key_heads": key_heads(m.name, port),
                    "why": f"written memory: {banks} bank(s) of {slots} words in {key_heads(m.name, port)} key "
                           f"head(s) whose value heads hold the words' bits, written at the frame's last token"
                           + (f"; the banks spread over {len(sched.read_layers((m.name, port)))} DeltaNet layers "
                              f"(the target's layers hold too few heads for them in one)"
                              if len(sched.read_layers((m.name, port))) > 1 else "")})
        out.append(entry)
    return out


def validate_report(report: dict) -> None:
    """Check ``report`` against ``schema.json`` (beside this module) (jsonschema); raises jsonschema's
    ValidationError naming the first field that does not match."""
    import jsonschema

    jsonschema.validate(report, json.loads(SCHEMA_FILE.read_text()))


def assignment_csv(report: dict) -> str:
    """One row per netlist cell: where it went (the ``cells`` table, flattened: a cell over several
    layers has its units joined with ';')."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["cell", "type", "signal", "src", "attributed_by", "place", "layers", "neurons", "units", "why"])
    for e in report["cells"]:
        w.writerow([e["cell"], e["type"], e["signal"] or "", e["src"], e["attributed_by"], e["place"],
                    ";".join(str(u["layer"]) for u in e["units"]),
                    ";".join(f"{u['layer']}:{u['neurons'][0]}-{u['neurons'][1]}" for u in e["units"]),
                    ";".join(u["unit"] for u in e["units"]), e.get("why", "")])
    return buf.getvalue()


def write_report(report: dict, folder, force: bool = False) -> tuple[Path, Path]:
    """Write ``report.json``, ``assignment.csv`` and ``report.html`` (plots inlined) as the folder
    ``folder`` (replaced atomically; a folder that is not one of ours is refused unless ``force``)."""
    from netlist2tf.common import write_folder

    folder = Path(folder)
    write_folder(folder, lambda tmp: _write_report_files(report, tmp), "report", force)
    return folder / "report.json", folder / "report.html"


def _write_report_files(report: dict, folder: Path) -> None:
    from netlist2tf.report.page import render_page

    (folder / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    (folder / "assignment.csv").write_text(assignment_csv(report))
    (folder / "report.html").write_text(render_page(report))
