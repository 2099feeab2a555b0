"""The netlist validator: collects EVERY unsupported construct, then raises one error listing them.

Separate from the parser (``ir``) on purpose: parsing says "this is a well-formed Yosys netlist",
validation says "the simulator and compiler accept it". It never modifies the netlist.
"""

import json
import re
from dataclasses import dataclass

from netlist2tf.netlist import nodes as N
from netlist2tf.common import UnsupportedDesignError
from netlist2tf.netlist.graph import combinational_loops, find_drivers, netlist_graph
from netlist2tf.netlist.ir import CONST0, Netlist

#: What to do about a simulation-only Verilog construct ($display, $finish, an immediate assertion, ...):
#: ``read_verilog`` defines the macro SYNTHESIS (its ``help`` says so), so a guard keeps it for simulators.
SIM_ONLY_VERILOG_FIX = ("remove it, or put it between `ifndef SYNTHESIS and `endif "
                        "(Yosys defines SYNTHESIS when it reads Verilog)")

#: Word-level combinational cells (Yosys ``simlib.v`` semantics).
WORD_CELLS = frozenset({
    "$not", "$pos", "$buf", "$neg", "$and", "$or", "$xor", "$xnor",
    "$reduce_and", "$reduce_or", "$reduce_xor", "$reduce_xnor", "$reduce_bool",
    "$logic_not", "$logic_and", "$logic_or",
    "$shl", "$shr", "$sshl", "$sshr", "$shift", "$shiftx",
    "$lt", "$le", "$eq", "$ne", "$eqx", "$nex", "$ge", "$gt",
    "$add", "$sub", "$mul", "$macc_v2", "$div", "$mod", "$divfloor", "$modfloor", "$pow",
    "$mux", "$pmux", "$bmux", "$demux", "$bwmux", "$bweqx",
    "$lut", "$sop", "$concat", "$slice", "$alu", "$fa", "$lcu",
})
#: Gate-level combinational cells (Yosys ``simcells.v``).
GATE_CELLS = frozenset({
    "$_BUF_", "$_NOT_", "$_AND_", "$_NAND_", "$_OR_", "$_NOR_", "$_XOR_", "$_XNOR_",
    "$_ANDNOT_", "$_ORNOT_", "$_MUX_", "$_NMUX_", "$_AOI3_", "$_OAI3_", "$_AOI4_", "$_OAI4_",
    "$_MUX4_", "$_MUX8_", "$_MUX16_",
})
SUPPORTED_CELLS = WORD_CELLS | GATE_CELLS

_LATCH_FIX = ("latches are not supported: assign the signal in every branch of m.d.comb logic, "
              "or make it a register (m.d.sync)")
_ASYNC_FIX = ("asynchronous set/clear/load is not supported (only a plain asynchronous reset is); "
              "use a synchronous reset")
_FORMAL_FIX = ("Print/Assert/Assume/Cover cells are not supported; remove them (or build them only "
               "when `platform` is a simulator)")


@dataclass(frozen=True, slots=True, order=True)
class Problem:
    """One unsupported thing: what it is, where in the source, and what to do about it."""
    what: str
    src: str
    fix: str

    def __str__(self):
        return f"{self.what}{' at ' + self.src if self.src else ''}: {self.fix}"


def _cell_problem(ctype: str) -> str | None:
    if ctype in SUPPORTED_CELLS:
        return None
    if "LATCH" in ctype or ctype in ("$dlatch", "$adlatch", "$dlatchsr", "$sr") or ctype.startswith("$_SR_"):
        return _LATCH_FIX
    if ctype in ("$dffsr", "$dffsre", "$aldff", "$aldffe") or ctype.startswith(("$_DFFSR", "$_ALDFF")):
        return _ASYNC_FIX
    if ctype in ("$print", "$check", "$assert", "$assume", "$cover", "$live", "$fair"):
        return _FORMAL_FIX
    if ctype in ("$memrd", "$memrd_v2", "$memwr", "$memwr_v2", "$meminit", "$meminit_v2", "$mem"):
        return ("memory cells were not collected into $mem_v2; run Yosys `memory -nomap` "
                "(the `netlist2tf synth` flows do)")
    if ctype in ("$ff", "$_FF_"):
        return "global-clock flip-flops ($ff) are not supported; clock registers from the sync domain"
    if ctype in ("$tribuf", "$_TBUF_"):
        return "tristate buffers are not supported; use separate input and output ports"
    if ctype.startswith("$"):
        return (f"cell type {ctype} is not supported by the simulator; synthesize with the `word` "
                f"or `gate` flow of `netlist2tf synth`")
    return (f"{ctype} is an unresolved submodule or blackbox; flatten the design and give every "
            f"module's source to Yosys")


def find_problems(netlist: Netlist) -> list[Problem]:
    """Every unsupported construct in ``netlist``, sorted; empty if the netlist is accepted."""
    problems = []
    for c in netlist.cells:
        fix = _cell_problem(c.type)
        if fix:
            problems.append(Problem(f"cell {c.name} ({c.type})", c.src, fix))

    # One clock: every register and clocked memory port on the same net and edge.
    clocked = [(r.clock, r.clock_posedge, f"register {netlist.sig_str(r.q)}", r.src)
               for r in netlist.registers]
    for m in netlist.memories:
        if m.wide:
            problems.append(Problem(f"memory {m.name}", m.src,
                                    "wide memory ports are not supported; synthesize with "
                                    "`memory -nowiden` (the netlist2tf flows do)"))
        for i, rp in enumerate(m.read_ports):
            if rp.clocked:
                clocked.append((rp.clock, True, f"memory {m.name} read port {i}", m.src))
                if rp.arst not in (CONST0,):
                    problems.append(Problem(f"memory {m.name} read port {i}", m.src,
                                            "asynchronous reset of a memory read port is not "
                                            "supported; use a synchronous reset"))
        for i, wp in enumerate(m.write_ports):
            if not wp.clocked:
                problems.append(Problem(f"memory {m.name} write port {i}", m.src,
                                        "asynchronous (unclocked) memory writes are latches; "
                                        "write memories from the sync domain"))
            else:
                clocked.append((wp.clock, True, f"memory {m.name} write port {i}", m.src))
    domains = sorted({(clk, edge) for clk, edge, _, _ in clocked})
    if len(domains) > 1:
        for clk, edge in domains:
            users = [(what, src) for c, e, what, src in clocked if (c, e) == (clk, edge)]
            what, src = users[0]
            more = f" and {len(users) - 1} more" if len(users) > 1 else ""
            problems.append(Problem(
                f"clock {netlist.sig_str((clk,))} ({'pos' if edge else 'neg'}edge) drives {what}{more}",
                src, f"the design has {len(domains)} clocks/edges but netlist2tf supports one clock "
                     f"domain; move all logic into the `sync` domain (posedge)"))

    drivers = find_drivers(netlist)
    for clk, _ in domains:
        if clk in drivers.of and not drivers.of[clk][0].startswith("in:"):
            problems.append(Problem(f"clock {netlist.sig_str((clk,))}", "",
                                    f"the clock is driven by logic ({drivers.of[clk][0]}); gated or "
                                    f"derived clocks are not supported: use a clock enable instead"))
    for n, first, second in drivers.conflicts:
        problems.append(Problem(f"net {netlist.nets[n]}", "",
                                f"driven by both {first} and {second}; a net needs exactly one driver"))

    g = netlist_graph(netlist, drivers)
    for loop in combinational_loops(g):
        srcs = sorted({g.nodes[n][N.SRC] for n in loop if g.nodes[n][N.SRC]})
        names = ", ".join(loop[:8]) + (f" (+{len(loop) - 8} more)" if len(loop) > 8 else "")
        problems.append(Problem(f"combinational loop through {names}", "; ".join(srcs[:6]),
                                "a signal depends on itself within one cycle; break the loop with "
                                "a register (m.d.sync)"))
    return sorted(problems)


#: Cells that only a simulator or a prover acts on: Verilog's $display/$write/$strobe (Yosys's
#: ``$print``) and assertions, Amaranth's Print/Assert/Assume/Cover.
SIM_ONLY_CELLS = ("$print", "$check", "$assert", "$assume", "$cover", "$live", "$fair")
_SIM_ONLY_TYPE = re.compile(r'"type":\s*"\$(?:print|check|assert|assume|cover|live|fair)"')
_SRC_LOC = re.compile(r"^(?P<file>.+?)(?::(?P<line>\d+)(?:\.\d+)?(?:-\d+(?:\.\d+)?)?)?$")


class SimulationOnlyError(UnsupportedDesignError):
    """A design with simulation-only constructs ($display, Print, Assert, ...): one line naming the
    first one's source file and line, the construct and the fix."""

    def __init__(self, problems, message: str):
        super().__init__(problems)
        self.args = (message,)


def check_simulation_only(json_text: str, display_names: dict[str, str] | None = None) -> None:
    """Raise SimulationOnlyError if the Yosys JSON netlist ``json_text`` has simulation-only cells.

    Checked on the raw JSON, before parsing: such a cell is not hardware whatever its parameters (an
    untriggered ``$print``, e.g. from an ``initial`` or ``always @*`` block, has an empty
    TRG_POLARITY that the netlist reader would blame on the JSON file). ``display_names`` maps the
    file names Yosys read (``design.v``) to the user's paths. Cheap when there are none.
    """
    if not _SIM_ONLY_TYPE.search(json_text):
        return
    modules = json.loads(json_text).get("modules") or {}
    found = {}
    for module in modules.values():
        for name, cell in (module.get("cells") or {}).items():
            ctype = cell.get("type")
            if ctype not in SIM_ONLY_CELLS:
                continue
            src = str((cell.get("attributes") or {}).get("src", "")).split("|")[0]
            m = _SRC_LOC.match(src)
            file, line = (m["file"], int(m["line"])) if m and m["line"] else (src, 0)
            shown = (display_names or {}).get(file, file)
            verilog = file.endswith((".v", ".sv"))
            # Yosys names a Verilog task's cell after it ($display$design.v:4$2); Amaranth's cells
            # are numbered, their flavour a parameter
            task = re.match(r"^(\$[a-z]+)\$", name)
            flavor = str((cell.get("parameters") or {}).get("FLAVOR", "")).lower()
            if ctype == "$print":
                what = (f"{task[1]} is a simulation-only system task" if verilog and task else
                        f"{'Print' if file.endswith('.py') else 'a $print cell'} is simulation-only")
            else:
                kind = flavor or (task[1] if task else ctype).lstrip("$")
                what = (f"the {kind} statement is simulation-only" if verilog else
                        f"{kind.capitalize()} is simulation-only")
            if verilog:
                fix = SIM_ONLY_VERILOG_FIX
            else:
                fix = ("remove it (a design class can take a constructor argument that leaves it out, "
                       "e.g. DESIGN:Class(debug=False))")
            where = f"{shown}:{line}" if shown and line else shown
            found.setdefault((shown, line, what),
                             (where, what, fix, Problem(f"cell {name} ({ctype})", where, fix)))
    entries = [found[k] for k in sorted(found)]
    where, what, fix, _ = entries[0]
    more = ""
    if len(entries) > 1:
        others = [e[0] or e[1] for e in entries[1:4]]
        more = (f" (and {len(entries) - 1} more: {', '.join(others)}{', ...' if len(entries) > 4 else ''})")
    raise SimulationOnlyError([e[3] for e in entries],
                              f"{where + ': ' if where else ''}{what}, not hardware; {fix}{more}")


def check_netlist(netlist: Netlist) -> Netlist:
    """Return ``netlist`` unchanged if it is accepted; else raise UnsupportedDesignError."""
    problems = find_problems(netlist)
    if problems:
        raise UnsupportedDesignError(problems)
    return netlist

