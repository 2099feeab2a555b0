"""The layer-assignment report: where every cell, register and memory went, as JSON and an HTML page.

Per layer: FFN neurons and DeltaNet heads used against capacity, what each DeltaNet value head holds
(a register, input or write-port chunk's bits, a memory bank's words and bits), which design cells live there
(grouped by source location: the Amaranth ``src`` attribute, or for LUTs without one the signal they
drive), residual channel pressure (the logic's bit pairs in use in the layer, pairs reused once
their net is dead: the largest sets the hidden size), the largest pre-activation a ReLU can see
(its bias plus its positive weights: bfloat16 holds every integer up to 256 exactly, so a layer whose
largest is <= 256 is bfloat16-exact by this bound alone) and the smallest distance of any neuron's
pre-activation from its threshold (1 where every weight and bias is an integer, checked on the
weights, since the inputs are 0/1; not given otherwise); the critical path drawn through the layers; totals.
Deterministic: the same design gives byte-identical files (plots are PNGs without timestamps).
"""

import base64
import html
import io
import json
import re
from collections import Counter
from pathlib import Path

from .gadgets.ffn_threshold import BF16_LIMIT
from .ir import Netlist
from .plan import ModelPlan


def _group(netlist: Netlist, name: str, cell) -> str:
    if cell is None:                       # a ROM read's decoder (rom.py)
        mem = name[len("memrd:"):].rsplit(":", 1)[0]
        src = next(m.src for m in netlist.memories if m.name == mem)
        return re.sub(r"^.*/", "", src.split("|")[0]) if src else f"(no source) ROM {mem}"
    if cell.src:
        return re.sub(r"^.*/", "", cell.src.split("|")[0])
    outs = [str(netlist.nets[n]) for _, sig in cell.outputs for n in sig]
    base = re.sub(r"\[\d+\]$", "", outs[0]) if outs else name
    return "(no source) " + (base if not base.startswith("$") else "generated logic")


def _preactivation_bounds(neurons, one: int) -> tuple[int, int, float | None]:
    """Over 0/1 inputs, for ``neurons`` (rows of an FFN; the bias sits on the constant channel
    ``one``): the largest |pre-activation| (the sum of a row's |weights|), the largest positive one
    (its bias plus its positive weights: what a ReLU passes on), and the smallest distance of a
    pre-activation from its threshold: 1 when every weight is an integer (pre-activations are then
    integers), None when some weight is not (not measured) or there are no neurons."""
    big = pos = 0
    integer = True
    for n in neurons:
        row = Counter()
        for ch, w in n.inputs:
            row[ch] += w
        row[one] += n.bias
        big = max(big, sum(abs(w) for w in row.values()))
        pos = max(pos, row[one] + sum(w for ch, w in row.items() if ch != one and w > 0))
        integer = integer and all(w == round(w) for w in row.values())
    return big, pos, (1.0 if integer and neurons else None)


def build_report(plan: ModelPlan, nonzero: int | None = None, design: str | None = None) -> dict:
    """The report of a model plan as a JSON-able dict (see the module docstring); ``nonzero``: the
    written weights' non-zero count, where they exist (the plan has none); ``design``: the name to
    show (the DESIGN argument, "module:Class"; the netlist's top module's name otherwise)."""
    netlist, sched, stats = plan.netlist, plan.schedule, plan.stats
    target = sched.target
    cells = {c.name: c for c in netlist.cells}
    layers = []
    live = stats["live_pairs_per_layer"]
    for i in range(target.num_layers):
        groups = Counter(_group(netlist, sched.unit_cell[n], cells.get(sched.unit_cell[n]))
                         for n, layer in sched.cell_layer.items() if layer == i)
        bound, positive, margin = _preactivation_bounds(plan.neurons[i], plan.layout.one)
        layers.append({
            "layer": i, "type": target.layer_types[i],
            "ffn_neurons": stats["neurons_per_layer"][i], "ffn_capacity": target.intermediate_size,
            "deltanet_heads": stats["deltanet_heads"][i], "deltanet_capacity": target.linear_num_value_heads,
            "memory_reads": sorted(f"{m}.{p}" for (m, p), layer in sched.read_layer.items() if layer == i),
            "deltanet_value_heads": [{"head": h.head, "holds": h.holds} for h in plan.heads if h.layer == i],
            "cells": len([1 for layer in sched.cell_layer.values() if layer == i]),
            "cells_by_source": dict(sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))),
            "live_pairs": live[i], "max_abs_preactivation": bound, "max_relu_input": positive,
            "bf16_exact": positive <= BF16_LIMIT, "smallest_margin": margin,
        })
    return {
        "design": design or netlist.top, "layers": target.num_layers, "hidden_size": stats["hidden_size"],
        "memories": memory_lowering(plan),
        "intermediate_size": stats["intermediate_size"], "logic_depth": sched.depth,
        "critical_path": [{"level": lvl, "node": what} for what, lvl in sched.critical_path],
        "per_layer": layers,
        "totals": {"parameters": stats["parameters"], "nonzero": nonzero,
                   "tokens_per_cycle": stats["tokens_per_cycle"],
                   "generated_tokens_per_cycle": stats["generated_tokens_per_cycle"],
                   "vocab_size": stats["vocab_size"], "residual_pairs": plan.layout.n_pairs,
                   "residual_bits": "signed" if plan.model_layout is not None and plan.model_layout.signed
                   else "pairs"},
    }


def memory_lowering(plan: ModelPlan) -> list[dict]:
    """How each memory of the design became part of the model, and why: a read-only memory's read
    ports as FFN decoders (``rom.py``: flat or split, the layers and neurons measured from the
    schedule), a written one as DeltaNet banks (per read port: layer, key heads), an XOR bank of a
    memory with several write ports (``multiport.py``) named with its origin."""
    from .plan import memory_capacity_slots, reachable_banks
    from .rom import FLAT_MAX_WORDS, rom_shape, rom_words
    from .schedule import unit_cost

    sched = plan.schedule
    slots = memory_capacity_slots(sched.target.linear_key_head_dim)
    preloaded = set(plan.settings.preloaded_roms or ())
    choice = plan.stats.get("roms")
    if choice:                      # roms=auto: both ways planned, the one with fewer parameters kept
        ways = "; ".join(f"{w}: {choice[f'{w}_parameters']:,} parameters" if f"{w}_parameters" in choice
                         else f"{w}: does not fit ({choice[f'{w}_failed']})" for w in ("ffn", "deltanet"))
        chosen = f" (--roms auto, every ROM planned both ways: {ways})"
    else:
        chosen = f" (--roms {plan.settings.roms})"
    out = []
    for m in plan.netlist.memories:
        entry = {"memory": m.name, "words": m.size, "width": m.width, "src": m.src,
                 "write_ports": len(m.write_ports), "read_ports": []}
        bank = re.fullmatch(r"(.*)\$bank(\d+)", m.name)
        if bank:
            entry["origin"] = (f"XOR bank {bank.group(2)} of memory {bank.group(1)}, which has several write "
                               f"ports (multiport.py): written by its port {bank.group(2)} alone, read as "
                               f"the XOR of the banks")
        if m.name in preloaded:
            entry["write_ports"] = 0
            entry["origin"] = "read-only memory, preloaded into DeltaNet banks by the prompt" + chosen
        for port in range(len(m.read_ports)):
            if m.name in preloaded and (m.name, port) in sched.read_layer:
                banks = len(reachable_banks(m, port, slots))
                words = len(plan.initial_memory.get(m.name, {}))
                entry["read_ports"].append({
                    "port": port, "lowered_as": "DeltaNet banks preloaded by the prompt",
                    "layers": [sched.read_layer[(m.name, port)]], "key_heads": banks,
                    "why": f"{banks} bank(s) of {slots} words, each a key head whose value heads hold the "
                           f"words' bits; the prompt writes its {words} non-zero words through a port that "
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
                    "port": port, "lowered_as": "DeltaNet banks", "layers": [sched.read_layer[(m.name, port)]],
                    "key_heads": banks,
                    "why": f"written memory: {banks} bank(s) of {slots} words, each a key head whose value heads "
                           f"hold the words' bits, written at the frame's last token"})
        out.append(entry)
    return out


def _plot(report: dict) -> bytes:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per = report["per_layer"]
    xs = [p["layer"] for p in per]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    ax = axes[0]
    ax.bar(xs, [p["ffn_neurons"] for p in per], label="used")
    ax.axhline(per[0]["ffn_capacity"], color="k", ls="--", lw=1, label="capacity")
    ax.set(title="FFN neurons per layer", xlabel="layer")
    ax.legend(loc="upper center")
    ax = axes[1]
    ax.bar(xs, [p["live_pairs"] for p in per], color="tab:orange")
    ax.axhline(report["totals"]["residual_pairs"], color="k", ls="--", lw=1,
               label="bits in the residual" + (" (one channel each)" if report["totals"].get("residual_bits")
                                               == "signed" else " (hidden size / 2)"))
    ax.set(title="logic bit pairs in use (reused once dead)", xlabel="layer")
    ax.legend(loc="upper center")
    ax = axes[2]
    path = report["critical_path"]
    ax.plot([p["level"] for p in path], range(len(path)), "o-", color="tab:red")
    ax.set(title="critical path (level = FFN layer)", xlabel="level", ylabel="step")
    ax.set_xlim(-0.5, report["layers"] - 0.5)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def write_report(report: dict, folder, force: bool = False) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.html`` (with the plots inlined) as the folder ``folder``
    (replaced atomically; a folder that is not one of ours is refused unless ``force``)."""
    from .outputs import write_folder

    folder = Path(folder)
    write_folder(folder, lambda tmp: _write_report_files(report, tmp), force)
    return folder / "report.json", folder / "report.html"


def _write_report_files(report: dict, folder: Path) -> None:
    js = folder / "report.json"
    js.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    png = base64.b64encode(_plot(report)).decode()
    rows = "".join(
        f"<tr><td>{p['layer']}</td><td>{p['type']}</td><td>{p['ffn_neurons']}/{p['ffn_capacity']}</td>"
        f"<td>{p['deltanet_heads']}/{p['deltanet_capacity']}</td><td>{html.escape(', '.join(p['memory_reads']))}</td>"
        f"<td>{p['cells']}</td><td>{p['live_pairs']}</td><td>{p['max_relu_input']}"
        f"{'' if p['bf16_exact'] else ' (over 256: not bfloat16-exact by this bound)'}</td>"
        f"<td>{p['smallest_margin'] if p['smallest_margin'] is not None else '-'}</td>"
        f"<td>{html.escape('; '.join(f'{k}: {v}' for k, v in list(p['cells_by_source'].items())[:6]))}</td></tr>"
        for p in report["per_layer"])
    path = "".join(f"<li>level {p['level']}: {html.escape(p['node'])}</li>" for p in report["critical_path"])
    heads = "".join(
        f"<h3>layer {p['layer']}: {len(p['deltanet_value_heads'])} value heads</h3><ul>"
        + "".join(f"<li>head {h['head']}: {html.escape(h['holds'])}</li>" for h in p["deltanet_value_heads"]) + "</ul>"
        for p in report["per_layer"] if p["deltanet_value_heads"])
    mems = "".join(
        f"<tr><td>{html.escape(m['memory'])}</td><td>{m['words']} x {m['width']}</td><td>{m['write_ports']}</td>"
        f"<td>{html.escape(m.get('origin', ''))}</td><td>{html.escape(m['src'])}</td><td><ul>"
        + "".join(f"<li>read port {r['port']}: {html.escape(r['lowered_as'])} in layer(s) "
                  f"{', '.join(map(str, r['layers']))}: {html.escape(r['why'])}</li>" for r in m["read_ports"])
        + "</ul></td></tr>" for m in report["memories"])
    mems = (f"<h2>Memories</h2><table><tr><th>memory</th><th>words x bits</th><th>write ports</th><th>origin</th>"
            f"<th>source</th><th>how its reads are computed, and why</th></tr>{mems}</table>") if mems else ""
    t = report["totals"]
    nonzero = f"{t['nonzero']:,} non-zero" if t["nonzero"] is not None else "weights not written: no non-zero count"
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>netlist2tf report: {html.escape(report['design'])}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 6px;font-size:13px}}</style></head><body>
<h1>Layer assignment of {html.escape(report['design'])}</h1>
<p>{report['layers']} layers, hidden size {report['hidden_size']}, FFN intermediate size {report['intermediate_size']},
logic depth {report['logic_depth']}. {t['parameters']:,} parameters ({nonzero}), vocabulary {t['vocab_size']},
{t['tokens_per_cycle']} tokens per cycle ({t['generated_tokens_per_cycle']} generated), {t['residual_pairs']} residual bits
({'one channel of +-1 each in the checkpoint, planned as pairs' if t.get('residual_bits') == 'signed' else 'as channel pairs (b, 1 - b)'}).</p>
<img alt="per-layer plots" src="data:image/png;base64,{png}">
<h2>Per layer</h2><table><tr><th>layer</th><th>type</th><th>FFN neurons</th><th>DeltaNet heads</th><th>memory reads</th>
<th>cells</th><th>logic pairs in use</th><th>largest ReLU input</th><th>smallest margin</th><th>cells by source</th></tr>{rows}</table>
{mems}
<p>Largest ReLU input: a neuron's bias plus its positive weights (its pre-activation cannot exceed it on 0/1 inputs).
Smallest margin: the smallest distance of a neuron's pre-activation from its threshold: 1 when every weight is an integer (checked on the weights; '-' otherwise).
Both are computed from this plan's neurons; "logic pairs in use" counts the design's bit pairs held in the layer
(the token, emit and write-port fields come on top: {t['residual_pairs']} pairs in all).</p>
<h2>DeltaNet heads</h2><p>What every configured value head holds (layer 0: the state's chunks and the
gathered write-port fields; the read layers: one key head per memory bank, its value heads a word's bits).</p>{heads}
<h2>Critical path</h2><ol>{path}</ol></body></html>
"""
    (folder / "report.html").write_text(page)
