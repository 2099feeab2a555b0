"""The layer report as one self-contained HTML page (``render_page``): the design's name, plots with
their numbers written on them, a search box over every signal (type a name or a source line; the
matching signals' layers, FFN rows, channels, heads and tokens stay), the per-layer tables, what the
DeltaNet heads hold, the frame's tokens, the memories, the critical path and, after ``--compare``,
what changed. The search needs no server: the rows are in the page, a few lines of script hide the
ones that do not match (``?q=NAME`` in the address pre-fills it). Deterministic: the plot is a PNG
without a timestamp, every table is sorted."""

import base64
import html
import io

from netlist2tf.gadgets import BF16_LIMIT


def _e(x) -> str:
    return html.escape(str(x))


def _ranges(ranges) -> str:
    return ", ".join(f"{a}-{b - 1}" if b - a > 1 else f"{a}" for a, b in ranges)


def _channels(chs: list) -> str:
    """A signal's channels as runs: "812-819 (L3 FFN -> L5 FFN)"."""
    def when(t):
        return f"L{t['layer']} {t['part'].upper() if t['part'] == 'ffn' else t['part']}" if t else "end"
    groups: list = []
    for c in chs:
        key = (when(c["written"]), when(c["freed"]))
        first = c["channels"][0]
        if groups and groups[-1][0] == key and groups[-1][2] + 1 == first:
            groups[-1][2] = first
        else:
            groups.append([key, first, first])
    return "; ".join(f"{a}" + (f"-{b}" if b != a else "") + f" ({k[0]} &rarr; {k[1]})" for k, a, b in groups)


def plot_png(report: dict) -> bytes:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per = report["per_layer"]
    xs = [p["layer"] for p in per]
    fig, axes = plt.subplots(2, 2, figsize=(13, 7))
    axes = axes.flatten()

    def bars(ax, values, cap, title, color, cap_label):
        b = ax.bar(xs, values, color=color)
        ax.bar_label(b, labels=[str(v) for v in values], fontsize=7, rotation=90, padding=2)
        if cap is not None:
            ax.axhline(cap, color="k", ls="--", lw=1, label=cap_label)
            ax.legend(loc="lower center", fontsize=7)
        ax.set(title=title, xlabel="layer")
        ax.set_xticks(xs)
        ax.margins(y=0.25)
    bars(axes[0], [p["ffn_neurons"] for p in per], per[0]["ffn_capacity"], "FFN neurons per layer", "tab:blue",
         f"intermediate size {per[0]['ffn_capacity']}")
    bars(axes[1], [p["deltanet_heads"] for p in per], per[0]["deltanet_capacity"], "DeltaNet value heads per layer",
         "tab:green", f"value heads {per[0]['deltanet_capacity']}")
    bars(axes[2], [p["live_pairs"] for p in per], report["totals"]["residual_pairs"],
         "logic bits in the residual", "tab:orange", f"all bits {report['totals']['residual_pairs']}")
    bars(axes[3], [p["max_relu_input"] for p in per], BF16_LIMIT, "largest ReLU input (margin 1: integers)",
         "tab:purple", f"bfloat16-exact up to {BF16_LIMIT}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def occupancy_png(report: dict) -> bytes:
    """The residual channels over the model's steps (mixer and FFN of each layer): which channel holds
    which kind of bit when, from the signals' channels and their written/freed times."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap

    kinds = {"register": 1, "input": 2, "memory read": 3, "logic": 4}
    steps = 2 * report["layers"]
    chans = [ch for s in report["signals"] for c in s["channels"] for ch in c["channels"]]
    grid = np.zeros((max(chans, default=0) + 1, steps), dtype=np.int8)
    for s in report["signals"]:
        for c in s["channels"]:
            w = c["written"]
            f = c["freed"]
            a = 2 * w["layer"] + (w["part"] == "ffn") if w else 0
            b = 2 * f["layer"] + (f["part"] == "ffn") if f else steps
            for ch in c["channels"]:
                grid[ch, a:b] = kinds[s["kind"]]
    fig, ax = plt.subplots(figsize=(13, 3.6))
    cmap = ListedColormap(["#ffffff", "tab:green", "tab:olive", "tab:cyan", "tab:blue"])
    ax.imshow(grid.T, aspect="auto", interpolation="nearest", cmap=cmap, vmin=0, vmax=4, origin="lower")
    ax.set_yticks(range(0, steps, 2), [f"L{i} mixer" for i in range(report["layers"])], fontsize=7)
    ax.set(xlabel="residual channel", title="which channel holds a bit at each step (green: registers, olive: "
           "inputs, cyan: memory reads, blue: logic; white: free)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


_SCRIPT = """
<script>
(function () {
  var errors = [];
  window.addEventListener('error', function (ev) { errors.push(String(ev.message)); show(); });
  function show() { document.getElementById('errors').textContent = errors.join('\\n'); }
  var box = document.getElementById('search');
  var rows = Array.prototype.slice.call(document.querySelectorAll('#signals tbody tr'));
  var count = document.getElementById('count');
  function filter() {
    var q = box.value.trim().toLowerCase();
    var n = 0;
    rows.forEach(function (r) {
      var hit = !q || r.getAttribute('data-k').indexOf(q) >= 0;
      r.hidden = !hit;
      if (hit) { n += 1; }
    });
    count.textContent = n + ' of ' + rows.length + ' signals';
    count.setAttribute('data-shown', String(n));
  }
  box.addEventListener('input', filter);
  var q = new URLSearchParams(window.location.search).get('q');
  if (q) { box.value = q; }
  filter();
  document.getElementById('status').setAttribute('data-ready', '1');
})();
</script>
"""


def render_page(report: dict) -> str:
    t = report["totals"]
    png = base64.b64encode(plot_png(report)).decode()
    occupancy = base64.b64encode(occupancy_png(report)).decode()
    design = _e(report["design"])
    nonzero = f"{t['nonzero']:,} non-zero" if t["nonzero"] is not None else "weights not written: no non-zero count"
    bits = ("one channel of +-1 each in the checkpoint, planned as pairs" if t["residual_bits"] == "signed"
            else "as channel pairs (b, 1 - b)")

    sig_rows = []
    for s in report["signals"]:
        layers = sorted(s["layers"].items(), key=lambda kv: int(kv[0]))
        rows = sum(b - a for _, v in layers for a, b in v["neurons"])
        where = ", ".join(f"L{k}" for k, _ in layers) or "-"
        per_layer = "".join(f"<li>L{k}: {v['units']} unit(s)" + (f", rows {_ranges(v['neurons'])}" if v["neurons"] else "")
                            + "</li>" for k, v in layers)
        per_line = "".join(f"<li>{_e(src)}: " + "; ".join(f"L{k} rows {_ranges(r) or '-'}" for k, r in by.items())
                           + "</li>" for src, by in s["by_line"].items())
        more = (f"<details><summary>{len(s['channels'])} bit(s) in the residual</summary>{_channels(s['channels'])}</details>"
                if s["channels"] else "-")
        detail = (f"<details><summary>{where}: {rows:,} FFN rows</summary><ul>{per_layer}</ul>"
                  + (f"by source line:<ul>{per_line}</ul>" if per_line else "") + "</details>") if layers else "-"
        heads = ", ".join(f"L{h['layer']} head {h['head']}" for h in s["heads"])
        key = " ".join([s["signal"], *s["src"], *s["bits"]]).lower()
        sig_rows.append(
            f"<tr data-k=\"{_e(key)}\"><td><b>{_e(s['signal'])}</b></td><td>{_e(s['kind'])}</td>"
            f"<td>{_e(', '.join(s['src']))}</td><td>{detail}</td><td>{more}</td>"
            f"<td>{_e(heads)}</td><td>{_e(', '.join(s['tokens']))}</td></tr>")

    layer_rows = "".join(
        f"<tr><td>{p['layer']}</td><td>{p['type']}</td><td>{p['ffn_neurons']}/{p['ffn_capacity']}</td>"
        f"<td>{p['deltanet_heads']}/{p['deltanet_capacity']}</td><td>{_e(', '.join(p['memory_reads']))}</td>"
        f"<td>{p['cells']}</td><td>{len(p['signals'])}</td><td>{p['live_pairs']}</td><td>{p['max_relu_input']}"
        f"{'' if p['bf16_exact'] else f' (over {BF16_LIMIT}: not bfloat16-exact by this bound)'}</td>"
        f"<td>{p['smallest_margin'] if p['smallest_margin'] is not None else '-'}"
        + (f" (row {p['smallest_margin_at']['row']}: {_e(p['smallest_margin_at']['signal'] or p['smallest_margin_at']['unit'])})"
           if p["smallest_margin_at"] else "") + "</td></tr>"
        for p in report["per_layer"])

    details = []
    for p in report["per_layer"]:
        items = "".join(f"<li><b>{_e(s['signal'])}</b> <i>{_e(s['src'])}</i>: rows {_ranges(s['neurons']) or '-'}"
                        f" ({s['units']} unit(s))</li>" for s in p["signals"])
        items += "".join(f"<li><i>{_e(o['what'])}</i>: rows {_ranges([o['neurons']])}</li>" for o in p["other_neurons"])
        heads = "".join(f"<li>head {h['head']}: {_e(h['holds'])}"
                        + (f" <i>({_e(', '.join(x['src'] for x in h['signals'] if x['src']))})</i>"
                           if any(x["src"] for x in h["signals"]) else "") + "</li>"
                        for h in p["deltanet_value_heads"])
        looks = "".join(f"<li>q head {h['head']}: {_e(h['holds'])}</li>" for h in p.get("attention_heads", ()))
        details.append(
            f"<details><summary>layer {p['layer']} ({p['type']}): {len(p['signals'])} signals, "
            f"{p['ffn_neurons']} FFN neurons, {len(p['deltanet_value_heads'])} value heads"
            + (f", {len(p['attention_heads'])} attention heads" if looks else "") + "</summary>"
            f"<h4>FFN rows</h4><ul>{items or '<li>none</li>'}</ul>"
            + (f"<h4>DeltaNet value heads</h4><ul>{heads}</ul>" if heads else "")
            + (f"<h4>Attention heads (ROM lookups over the prompt)</h4><ul>{looks}</ul>" if looks else "")
            + "</details>")

    tokens = "".join(f"<tr><td>{_e(k['chunk'])}</td><td>{_e(k['emitted'])}</td><td>{_e(', '.join(k['bits']))}</td></tr>"
                     for k in report["tokens"])
    mems = "".join(
        f"<tr><td>{_e(m['memory'])}</td><td>{m['words']} x {m['width']}</td><td>{m['write_ports']}</td>"
        f"<td>{_e(m.get('origin', ''))}</td><td>{_e(m['src'])}</td><td><ul>"
        + "".join(f"<li>read port {r['port']}: {_e(r['lowered_as'])} in layer(s) "
                  f"{', '.join(map(str, r['layers']))}: {_e(r['why'])}</li>" for r in m["read_ports"])
        + "</ul></td></tr>" for m in report["memories"])
    mems = (f"<h2>Memories</h2><table><tr><th>memory</th><th>words x bits</th><th>write ports</th><th>origin</th>"
            f"<th>source</th><th>how its reads are computed, and why</th></tr>{mems}</table>") if mems else ""
    path = "".join(f"<tr><td>{p['level']}</td><td>{'' if p['layer'] is None else p['layer']}</td>"
                   f"<td>{_e(p['signal'] or '')}</td><td>{_e(p['src'])}</td><td>{_e(p['net'] or '')}</td></tr>"
                   for p in report["critical_path"])
    compare = _compare_html(report["compare"]) if report.get("compare") else ""
    economy = _economy_html(report["economy"]) if report.get("economy") else ""
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>{design}: layer assignment (netlist2tf)</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:110em}}table{{border-collapse:collapse;margin:0.5em 0}}
td,th{{border:1px solid #ccc;padding:3px 6px;font-size:13px;vertical-align:top}}th{{background:#f3f3f3}}
#search{{font-size:16px;width:30em;padding:4px}}#errors{{color:#b00}}details{{margin:0.3em 0}}
.added{{color:#070}}.removed{{color:#b00}}</style></head><body>
<h1>{design}: layer assignment</h1>
<p>{report['layers']} layers, hidden size {report['hidden_size']}, FFN intermediate size {report['intermediate_size']},
logic depth {report['logic_depth']}. {t['parameters']:,} parameters ({nonzero}), vocabulary {t['vocab_size']},
{t['tokens_per_cycle']} tokens per cycle ({t['generated_tokens_per_cycle']} generated), {t['residual_pairs']} residual bits
({bits}). {t['cells']} netlist cells: {t['cells_in_ffn']} in FFN rows, {t['cells_folded']} folded into
other cells' rows, {t['cells_removed']} removed; {t['cells_attributed']} named with an HDL signal or line
(attribution: {_e(report['attribution'])}). The same data: report.json (schema version {report['schema_version']}),
assignment.csv (one row per cell).</p>
<pre id="errors"></pre><span id="status"></span>
{compare}
<img alt="per-layer plots" src="data:image/png;base64,{png}">
<img alt="residual channels over the layers" src="data:image/png;base64,{occupancy}">
<h2>Find a signal</h2>
<p><input id="search" type="search" placeholder="signal name or source line, e.g. pc or core.py:170"
 aria-label="find a signal"> <span id="count"></span></p>
<table id="signals"><thead><tr><th>signal</th><th>kind</th><th>source</th><th>layers and FFN rows</th>
<th>residual channels (written &rarr; freed)</th><th>DeltaNet heads</th><th>tokens</th></tr></thead>
<tbody>{''.join(sig_rows)}</tbody></table>
<h2>Per layer</h2><table><tr><th>layer</th><th>type</th><th>FFN neurons</th><th>DeltaNet value heads</th>
<th>memory reads</th><th>cells</th><th>signals</th><th>logic bits in use</th><th>largest ReLU input</th>
<th>smallest margin</th></tr>{layer_rows}</table>
<p>Largest ReLU input: the most a neuron's pre-activation reaches over every 0/1 value of the bits it reads
(bfloat16 holds integers up to {BF16_LIMIT} exactly). Smallest margin: the smallest distance of a reachable
pre-activation from the threshold 0, over the same values (both computed from this plan's weights). Logic bits in
use: the design's bits held in the layer (the token, emit and write-port fields come on top).</p>
{''.join(details)}
<h2>Tokens of a frame</h2><table><tr><th>chunk</th><th>emitted</th><th>bits</th></tr>{tokens}</table>
{economy}
{mems}
<h2>Critical path</h2><table><tr><th>level</th><th>layer</th><th>signal</th><th>source</th><th>net</th></tr>{path}</table>
{_SCRIPT}</body></html>
"""


def _economy_html(e: dict) -> str:
    """The token economy the compiler found (``--economy auto``): its groups and the frame cost."""
    b, a = e["frame_cost_before"], e["frame_cost_after"]
    def share(g):
        return "" if g.get("share") is None else f"{100 * g['share']:.1f} %"
    rows = "".join(f"<tr><td>{_e(g['kind'])}</td><td>{_e(g['gate'])}</td><td>{_e(', '.join(g['members']))}</td>"
                   f"<td>{share(g)}</td><td>{_e(g['proof'])}</td></tr>" for g in e["groups"])
    refuted = "".join(f"<li><b>{_e(r['gate'])}</b>: {_e(', '.join(r['members']))}: {_e(r['counterexample'])}</li>"
                      for r in e["refuted"])
    return (f"<h2>Token economy (found by the compiler)</h2><p>Generated tokens per cycle over a simulated run of "
            f"{b['frames']:,} frames on random inputs: {b['generated_mean']} on average (worst {b['generated_worst']}) "
            f"with the hand-written groups only, {a['generated_mean']} (worst {a['generated_worst']}) with the groups "
            f"found; {a['input_tokens']} input token(s) per cycle on top.</p>"
            + (f"<table><tr><th>kind</th><th>gate</th><th>members</th><th>frames that emit it</th><th>proof</th></tr>"
               f"{rows}</table>" if rows else "<p>No group found.</p>")
            + (f"<p>Refuted by z3, not used:</p><ul>{refuted}</ul>" if refuted else ""))


def _compare_html(c: dict) -> str:
    rows = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v['old'])}</td><td>{_e(v['new'])}</td></tr>"
                   for k, v in c["totals"].items())
    layers = "".join(f"<tr><td>{d['layer']}</td><td>{_e(d['field'])}</td><td>{_e(d['old'])}</td><td>{_e(d['new'])}</td></tr>"
                     for d in c["per_layer"])
    moved = "".join(f"<li>{_e(m['signal'])}: layers {_e(m['old_layers'])} &rarr; {_e(m['new_layers'])}, "
                    f"neurons {m['old_neurons']} &rarr; {m['new_neurons']}</li>" for m in c["signals"]["changed"])
    added = "".join(f"<li class=added>{_e(s)}</li>" for s in c["signals"]["added"])
    removed = "".join(f"<li class=removed>{_e(s)}</li>" for s in c["signals"]["removed"])
    return (f"<h2>Changed since {_e(c['old_design'])} ({_e(c['old_file'])})</h2>"
            f"<p>{_e(c['summary'])}</p>"
            f"<table><tr><th>total</th><th>before</th><th>now</th></tr>{rows}</table>"
            f"<table><tr><th>layer</th><th>what</th><th>before</th><th>now</th></tr>{layers}</table>"
            f"<p>Critical path: {'changed' if c['critical_path']['changed'] else 'unchanged'}</p>"
            f"<h3>Signals added</h3><ul>{added or '<li>none</li>'}</ul><h3>Signals removed</h3>"
            f"<ul>{removed or '<li>none</li>'}</ul><h3>Signals moved or resized</h3><ul>{moved or '<li>none</li>'}</ul>")
