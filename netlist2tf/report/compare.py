"""What an HDL edit changed, from two layer reports (``netlist2tf report DESIGN --compare OLD.json``).

``compare_reports(old, new)`` lists the totals that differ (layers, hidden size, parameters, tokens
per cycle, logic depth, ...), per layer the FFN neurons, DeltaNet heads, logic bits in use and
signals that differ, whether the critical path changed (as HDL signals), and the signals added,
removed, moved (their set of layers changed) or resized (their FFN neurons changed). Signals are
matched by name, not by source line: an edit shifts the lines below it, not the names.

The rebuild loop (``old_report`` / ``attach_comparison``, used by ``netlist2tf report`` and ``cpu
report``): with ``--compare OLD`` the comparison is against OLD; without it, a report folder that
already holds a report of the same design is compared with what replaces it ("since the last
build"), and a report that did not change gets no comparison, so rebuilding the same HDL writes the
same bytes.
"""

import json
from pathlib import Path

from netlist2tf.common import Netlist2TFError

_TOTALS = ("layers", "hidden_size", "intermediate_size", "logic_depth")
_TOTALS_INNER = ("parameters", "tokens_per_cycle", "generated_tokens_per_cycle", "vocab_size", "residual_pairs",
                 "cells", "cells_in_ffn")
_PER_LAYER = ("ffn_neurons", "deltanet_heads", "live_pairs", "cells", "units")


def load_report(path) -> dict:
    """A report.json written by ``netlist2tf report`` (this schema version), or one clear error."""
    from netlist2tf.report.build import SCHEMA_VERSION

    path = Path(path)
    if path.is_dir():
        path = path / "report.json"
    from netlist2tf.common import read_text

    if not path.exists():
        raise Netlist2TFError(f"--compare {path}: no such file; give the report.json of an earlier "
                              f"`netlist2tf report` (or its folder)")
    try:
        report = json.loads(read_text(path, f"--compare {path}"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Netlist2TFError(f"--compare {path}: not a readable JSON file ({exc}); give the report.json of "
                              f"an earlier `netlist2tf report`")
    if not isinstance(report, dict) or report.get("schema") != "netlist2tf-layer-report":
        raise Netlist2TFError(f"--compare {path}: not a netlist2tf layer report (no \"schema\": "
                              f"\"netlist2tf-layer-report\"); give the report.json of `netlist2tf report`")
    if report.get("schema_version") != SCHEMA_VERSION:
        raise Netlist2TFError(f"--compare {path}: a report of schema version {report.get('schema_version')!r}; "
                              f"this netlist2tf reads version {SCHEMA_VERSION}: write the old report again with "
                              f"this version (`netlist2tf report` on the old HDL)")
    from netlist2tf.report.build import validate_report
    import jsonschema
    try:
        validate_report(report)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top)"
        raise Netlist2TFError(f"--compare {path}: does not match the report schema at {where}: {exc.message}; "
                              f"write it again with `netlist2tf report`")
    return report


def _signal_layers(report: dict) -> dict:
    """{signal: (sorted layers, FFN neurons)} of the logic signals."""
    out = {}
    for s in report["signals"]:
        layers = sorted(int(k) for k in s["layers"])
        neurons = sum(b - a for v in s["layers"].values() for a, b in v["neurons"])
        out[s["signal"]] = (layers, neurons)
    return out


def compare_reports(old: dict, new: dict, old_file: str = "") -> dict:
    """The differences between two reports (module docstring) as a JSON-able dict."""
    totals = {}
    for k in _TOTALS:
        if old.get(k) != new.get(k):
            totals[k] = {"old": old.get(k), "new": new.get(k)}
    for k in _TOTALS_INNER:
        a, b = old["totals"].get(k), new["totals"].get(k)
        if a != b:
            totals[k] = {"old": a, "new": b}
    per_layer = []
    olds = {p["layer"]: p for p in old["per_layer"]}
    for p in new["per_layer"]:
        q = olds.get(p["layer"])
        for k in _PER_LAYER:
            if q is None or q.get(k) != p.get(k):
                per_layer.append({"layer": p["layer"], "field": k, "old": None if q is None else q.get(k), "new": p.get(k)})
        if q is not None and sorted({s["signal"] for s in q["signals"]}) != sorted({s["signal"] for s in p["signals"]}):
            a, b = {s["signal"] for s in q["signals"]}, {s["signal"] for s in p["signals"]}
            per_layer.append({"layer": p["layer"], "field": "signals",
                              "old": sorted(a - b), "new": sorted(b - a)})
    for layer in sorted(set(olds) - {p["layer"] for p in new["per_layer"]}):
        per_layer.append({"layer": layer, "field": "layer", "old": "present", "new": None})
    a, b = _signal_layers(old), _signal_layers(new)
    changed = [{"signal": s, "old_layers": a[s][0], "new_layers": b[s][0], "old_neurons": a[s][1],
                "new_neurons": b[s][1]} for s in sorted(set(a) & set(b)) if a[s] != b[s]]
    path_a = [p["signal"] for p in old["critical_path"]]
    path_b = [p["signal"] for p in new["critical_path"]]
    added, removed = sorted(set(b) - set(a)), sorted(set(a) - set(b))
    parts = [f"{k} {v['old']} -> {v['new']}" for k, v in totals.items()]
    summary = (", ".join(parts) if parts else "no total changed") + \
        f"; {len(added)} signal(s) added, {len(removed)} removed, {len(changed)} moved or resized; " \
        f"critical path {'changed' if path_a != path_b else 'unchanged'}"
    return {"old_file": str(old_file), "old_design": old["design"], "new_design": new["design"],
            "summary": summary, "totals": totals, "per_layer": per_layer,
            "critical_path": {"changed": path_a != path_b, "old": path_a, "new": path_b,
                              "old_depth": old["logic_depth"], "new_depth": new["logic_depth"]},
            "signals": {"added": added, "removed": removed, "changed": changed}}


def compare_text(c: dict) -> str:
    """The comparison as the lines ``netlist2tf report --compare`` prints."""
    lines = [f"compared with {c['old_file']} ({c['old_design']}): {c['summary']}"]
    for k, v in c["totals"].items():
        lines.append(f"  {k}: {v['old']} -> {v['new']}")
    for d in c["per_layer"]:
        if d["field"] == "signals":
            lines.append(f"  layer {d['layer']} signals: -{', '.join(d['old']) or 'none'} "
                         f"+{', '.join(d['new']) or 'none'}")
        else:
            lines.append(f"  layer {d['layer']} {d['field']}: {d['old']} -> {d['new']}")
    if c["critical_path"]["changed"]:
        lines.append(f"  critical path (depth {c['critical_path']['old_depth']} -> {c['critical_path']['new_depth']}): "
                     f"{' > '.join(str(s) for s in c['critical_path']['new'])}")
    for s in c["signals"]["added"]:
        lines.append(f"  + {s}")
    for s in c["signals"]["removed"]:
        lines.append(f"  - {s}")
    for m in c["signals"]["changed"]:
        lines.append(f"  ~ {m['signal']}: layers {m['old_layers']} -> {m['new_layers']}, FFN neurons "
                     f"{m['old_neurons']} -> {m['new_neurons']}")
    return "\n".join(lines)


def old_report(compare, out_folder, design: str) -> tuple[dict | None, str]:
    """(the report to compare with, its name): ``compare`` (--compare, read or one clear error), or
    else the report already in ``out_folder`` when it is one of this version for ``design`` (the
    last build; anything else there is ignored: the folder checks decide whether it may be replaced)."""
    if compare:
        return load_report(compare), str(compare)
    previous = Path(out_folder) / "report.json"
    if not previous.is_file():
        return None, ""
    try:
        report = load_report(previous)
    except Netlist2TFError:
        return None, ""
    return (report, f"the last build ({previous})") if report.get("design") == design else (None, "")


def attach_comparison(report: dict, old: dict | None, old_name: str, explicit: bool) -> str | None:
    """Put the comparison with ``old`` into ``report`` and return its text; for the last build
    (``explicit`` False) nothing when nothing changed (the report then equals it byte for byte)."""
    if old is None:
        return None
    same = {k: v for k, v in old.items() if k != "compare"} == json.loads(json.dumps(report))
    if same and not explicit:
        return f"unchanged since {old_name}"
    report["compare"] = compare_reports(old, report, old_name)
    return compare_text(report["compare"])
