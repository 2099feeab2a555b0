"""The scheduler: place every cell, register and memory read of a netlist on the target's layers.

Levels (see docs/design/compiler.md 1): the *level* of a net is the first layer whose FFN can read it.

* design inputs, register outputs and synchronous memory read data: level 0 (their state is read by
  layer 0's mixer, before layer 0's FFN);
* an asynchronous memory read whose address has level a is decoded to a one-hot address by layer a's
  FFN and done by the mixer of the first DeltaNet layer >= a + 1; its data has that layer's level;
* a combinational cell whose inputs have at most level l is computed by layer l's FFN; its outputs have
  level l + 1.

The last layer's FFN selects which state/output chunk the next token carries, so every design output
and every register input must have level <= layers - 1. Each output bit of a cell becomes FFN neurons
through its truth table (``logic.cell_bit_functions``): the cheaper of one neuron per true minterm and
one constant neuron plus one per false minterm.

When the design is too deep, a second pass *collapses* LUT chains: a plain cell's output bit whose
deepest inputs come from other plain cells takes those cells' functions into its own truth table
(``compose``) while the result depends on at most ``max_inputs`` bits and costs at most
``COLLAPSE_MAX_NEURONS`` neurons, so it moves up a level. Only bits later than the first pass's
required levels allow are collapsed (``required_levels``: the fewest extra neurons); if that is not
enough, every bit that can move up does. Yosys's LUT mapper (abc) sees a macro's
outputs as primary inputs with arrival time 0 and may put a late signal at the bottom of a LUT tree;
the collapse repairs that with the real levels. Cells nothing reads any more are dropped.

The result, a ``Schedule``, is data with a one-line-per-slot ``dump()`` and a separate ``verify``.
"""

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass, replace

import networkx as nx

from netlist2tf.netlist import nodes as N
from netlist2tf.common import Netlist2TFError
from netlist2tf.netlist import find_drivers, netlist_graph
from netlist2tf.netlist import CONST0, CONST1, CONSTX, Netlist
from netlist2tf.compile.logic import BitFunction, cell_bit_functions
from netlist2tf.compile.macros import MACRO_CELLS, MUL_CELLS, disjoint_cubes, expand
from netlist2tf.compile.rom import expand_rom, rom_shape
from netlist2tf.compile.target import LINEAR, Target
from netlist2tf.netlist import check_netlist


class ScheduleError(Netlist2TFError):
    """The design does not fit the target; the message names the critical path and the numbers."""


COLLAPSE_MAX_NEURONS = 64       # a collapsed bit function may cost at most this many FFN neurons
BALANCE_PASSES = 4              # _balance passes at most (each moves units later only)


def compose(f: BitFunction, net: int, g: BitFunction, max_inputs: int) -> BitFunction | None:
    """``f`` with its input ``net`` replaced by ``g`` (the function computing ``net``), over the
    bits it then really depends on; None if that is more than ``max_inputs`` bits. (Remembered: the
    scheduler's passes compose the same pairs again.)"""
    key = (f.support, f.table, net, g.support, g.table, max_inputs)
    if key not in _COMPOSED:
        if len(_COMPOSED) > 1 << 16:
            _COMPOSED.clear()
        _COMPOSED[key] = _compose(f.support, f.table, net, g.support, g.table, max_inputs)
    done = _COMPOSED[key]
    return None if done is None else BitFunction(f.out, *done)


_COMPOSED: dict = {}


def _table_bits(table: int, inputs: int):
    """The truth table ``table`` of ``inputs`` bits as an array of its 2**inputs values (0/1)."""
    import numpy as np

    n = 1 << inputs
    raw = np.frombuffer(table.to_bytes((n + 7) // 8, "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:n].astype(np.int64)


def _compose(f_support, f_table, net, g_support, g_table, max_inputs):
    """``compose`` on plain values, every pattern at once (numpy): (support, table) or None."""
    import numpy as np

    support = [n for n in f_support if n != net] + [n for n in g_support if n not in f_support]
    if len(support) > 16:
        return None
    pos = {n: i for i, n in enumerate(support)}
    k = len(support)
    p = np.arange(1 << k, dtype=np.int64)
    gp = np.zeros_like(p)
    for i, n in enumerate(g_support):
        gp |= ((p >> pos[n]) & 1) << i
    gv = _table_bits(g_table, len(g_support))[gp]
    fp = np.zeros_like(p)
    for i, n in enumerate(f_support):
        fp |= (gv if n == net else (p >> pos[n]) & 1) << i
    values = _table_bits(f_table, len(f_support))[fp]
    keep = [i for i in range(k) if bool(np.any(values != values[p ^ (1 << i)]))]
    if len(keep) > max_inputs:
        return None
    q = np.arange(1 << len(keep), dtype=np.int64)
    at = np.zeros_like(q)
    for j, i in enumerate(keep):
        at |= ((q >> j) & 1) << i
    reduced = values[at].astype(np.uint8)
    packed = np.packbits(reduced, bitorder="little").tobytes()
    return tuple(support[i] for i in keep), int.from_bytes(packed, "little")


def unit_cost(fns) -> int:
    """FFN neurons for a unit's functions (a cell's, or a macro's in one layer): the truth tables'
    costs summed, and the distinct ReLUs of its threshold functions (``lower.lower_logic`` merges
    equal neurons: a counter's bits share theirs)."""
    relus = {(terms, bias) for f in fns if not isinstance(f, BitFunction) for terms, bias, _ in f.relus()}
    return len(relus) + sum(neuron_cost(f) for f in fns if isinstance(f, BitFunction))


def neuron_cost(f) -> int:
    """FFN neurons for one output bit: for a truth table, its true minterms or 1 + its false
    minterms if that is fewer; for a macro's threshold function, two per step (fewer at the ends)."""
    if not isinstance(f, BitFunction):
        return f.cost
    ones = f.minterms
    zeros = (1 << len(f.support)) - ones
    return min(ones, 1 + zeros)


@dataclass(frozen=True, slots=True)
class Schedule:
    """Where everything goes. ``level[net]`` as defined above. Logic is placed in *units*: a plain
    cell is one unit (named like the cell); a macro cell (``macros.py``) is one unit per layer its
    threshold circuit spans, named ``CELL@LAYER``. ``cell_layer[unit]`` is a unit's FFN layer,
    ``functions[unit]`` its bit functions, ``unit_cell[unit]`` its cell; ``net_names`` names the
    macros' internal nets. ``read_layer[(memory, port)]`` the mixer layer of an asynchronous memory
    read (its data is ready there); a read whose banks span several DeltaNet layers
    (``schedule(read_span=)``) starts in ``read_first[(memory, port)]`` (its address must be ready
    there) and ends in ``read_layer``: ``read_layers(key)``; ``neurons[layer]`` FFN neurons used per layer; ``critical_path`` the chain of (node,
    level) that reaches the deepest required bit (``critical_nodes``: the same steps as (node, net))."""
    target: Target
    level: dict
    cell_layer: dict
    read_layer: dict
    functions: dict
    neurons: tuple
    critical_path: tuple
    depth: int
    unit_cell: dict
    net_names: dict
    critical_nodes: tuple = ()      # per critical_path step: (the graph node that computes it or None, its net)
    read_first: tuple = ()          # ((memory, port), first layer) of each read that spans layers

    def first_read_layer(self, key) -> int:
        """The first mixer layer of read ``key``'s banks (its address must be ready there)."""
        return dict(self.read_first).get(key, self.read_layer[key])

    def read_layers(self, key) -> tuple[int, ...]:
        """The DeltaNet layers holding read ``key``'s banks, first to last (one for most reads)."""
        first, last = self.first_read_layer(key), self.read_layer[key]
        types = self.target.layer_types
        return tuple(i for i in range(first, last + 1) if i >= len(types) or types[i] == LINEAR) or (last,)

    def net_name(self, netlist: Netlist, n: int) -> str:
        return self.net_names[n] if n in self.net_names else str(netlist.nets[n])

    def unit_origin(self, netlist: Netlist, unit: str, cells: dict | None = None) -> tuple[str, str]:
        """(what made a unit: its cell's type, with ``(macro)`` for a macro's slice, or a ROM read's
        decoder; its HDL source). ``cells``: {name: cell} of ``netlist``, when the caller has it."""
        owner = self.unit_cell[unit]
        if owner.startswith("memrd:"):
            mem, port = owner[len("memrd:"):].rsplit(":", 1)
            m = next(m for m in netlist.memories if m.name == mem)
            return f"ROM read ({rom_shape(m, int(port))} decoder)", m.src
        c = (cells or {c.name: c for c in netlist.cells})[owner]
        return c.type + (" (macro)" if c.type in MACRO_CELLS else ""), c.src

    def dump(self, netlist: Netlist) -> str:
        """One line per slot, by layer: ``L3 ffn[12] <- $and (src)`` / ``L1 mix <- read mem.0``."""
        lines = [f"schedule: {self.depth} levels on {self.target.num_layers} layers; FFN neurons per "
                 f"layer {list(self.neurons)}"]
        by_layer: dict = {}
        for (mem, port) in self.read_layer:
            for layer in self.read_layers((mem, port)):
                by_layer.setdefault(layer, []).append(f"L{layer} mix <- read {mem} port {port}")
        cells = {c.name: c for c in netlist.cells}
        offsets = [0] * self.target.num_layers
        for name in sorted(self.cell_layer, key=lambda n: (self.cell_layer[n], n)):
            layer = self.cell_layer[name]
            cost = unit_cost(self.functions[name])
            kind, src = self.unit_origin(netlist, name, cells)
            by_layer.setdefault(layer, []).append(
                f"L{layer} ffn[{offsets[layer]}:{offsets[layer] + cost}] <- {kind} {name}"
                + (f" @ {src}" if src else ""))
            offsets[layer] += cost
        for layer in sorted(by_layer):
            lines += by_layer[layer]
        return "\n".join(lines) + "\n"


def _required_nets(netlist: Netlist) -> list[tuple[int, str]]:
    """Nets that must be ready for the last layer: outputs, register inputs/controls, memory ports."""
    req = []
    for p in netlist.outputs:
        req += [(n, f"output {p.name}") for n in p.bits]
    for r in netlist.registers:
        ctl = tuple(n for n in (r.enable, r.srst, r.arst) if n is not None)
        req += [(n, f"register {netlist.sig_str(r.q)}") for n in r.d + ctl]
    for m in netlist.memories:
        for i, wp in enumerate(m.write_ports):
            req += [(n, f"memory {m.name} write port {i}") for n in wp.addr + wp.data + wp.enable]
        for i, rp in enumerate(m.read_ports):
            if rp.clocked:
                req += [(n, f"memory {m.name} read port {i}") for n in rp.addr + (rp.enable, rp.srst)]
    return [(n, what) for n, what in req if n not in (CONST0, CONST1, CONSTX)]


def schedule(netlist: Netlist, target: Target, max_inputs: int = 8, read_after: dict | None = None,
             read_span: dict | None = None, reg_layer: dict | None = None) -> Schedule:
    """Levelise ``netlist`` onto ``target``. Raises ScheduleError (too deep / too wide, with the
    critical path and the numbers) or UnsupportedDesignError (a cell too wide for FFN neurons).
    ``read_after``: {(memory, read port): the earliest layer its read may be in} (a read goes to
    the first DeltaNet layer from there at which its address is ready; ``plan.balance_reads``).
    ``read_span``: {(memory, read port): k}: the read's banks spread over k consecutive DeltaNet
    layers from there (a target whose layers hold too few heads for them; ``plan.spread_reads``):
    its data is ready after the last one. ``reg_layer``: {register output net: the DeltaNet layer
    that reads it} for register chunks read after layer 0 (``plan.late_registers``; level = that
    layer instead of 0)."""
    pins = dict(read_after or {})
    extra = {"read_span": dict(read_span or {}), "reg_layer": dict(reg_layer or {})}
    memo = _memo(netlist)
    key = ("schedule", id(netlist), max_inputs, target.num_layers, tuple(target.layer_types),
           *(tuple(sorted(d.items(), key=repr)) for d in (pins, extra["read_span"], extra["reg_layer"])))
    if key in memo:
        sched, problems = replace(memo[key][0], target=target), list(memo[key][1])
    else:
        def graph():
            check_netlist(netlist)
            return netlist_graph(netlist), find_drivers(netlist)
        g, drivers = _remembered(memo, ("graph", id(netlist)), graph)
        sched, problems = _levelise(netlist, target, max_inputs, g, drivers, collapse=None, read_after=pins,
                                    **extra)
        if sched.depth > target.num_layers - 1:
            required = required_levels(netlist, sched)
            sched, problems = _levelise(netlist, target, max_inputs, g, drivers, collapse=required,
                                        read_after=pins, **extra)
            if sched.depth > target.num_layers - 1:
                sched, problems = _levelise(netlist, target, max_inputs, g, drivers, collapse={},
                                            read_after=pins, **extra)
        memo[key] = (sched, tuple(problems))
    problems += _width_problems(sched.neurons, target)
    if problems:
        raise ScheduleError(f"{netlist.top} does not fit the target {target.name}:\n  - "
                            + "\n  - ".join(problems))
    return sched


_SHARED: contextvars.ContextVar = contextvars.ContextVar("netlist2tf_schedules", default=None)


@contextmanager
def shared_schedules():
    """Inside it, ``schedule`` of the same netlist object with the same layers, layer types and pins
    as an earlier call gives that call's schedule again instead of levelising anew (the planner
    schedules once on unbounded widths to place the reads, then on the target: the levels, units
    and balancing do not depend on the widths, which are checked against each call's target), and
    a netlist's graph, its cells' bit functions and its macros' expansions are made once for all the
    schedules the planner tries. The memo ends with the outermost block, so a change to a module
    constant between compiles is seen."""
    token = _SHARED.set({}) if _SHARED.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _SHARED.reset(token)


def _memo(netlist) -> dict:
    """The active ``shared_schedules`` memo (a throwaway dict outside one), with ``netlist`` held in
    it: its entries are keyed by the netlist's id, which stays its own while the memo lives."""
    memo = _SHARED.get()
    if memo is None:
        return {}
    held = memo.setdefault("netlists", {})
    if held.setdefault(id(netlist), netlist) is not netlist:
        raise AssertionError("a netlist id reused while the schedule memo holds it")
    return memo


def _remembered(memo: dict, key, make):
    """``memo[key]``, made by ``make()`` the first time."""
    if key not in memo:
        memo[key] = make()
    return memo[key]


def _width_problems(neurons, target: Target) -> list[str]:
    """The layers whose FFN neurons exceed the target's intermediate size."""
    return [f"layer {layer} needs {count} FFN neurons, the target has {target.intermediate_size} "
            f"(intermediate_size)" for layer, count in enumerate(neurons) if count > target.intermediate_size]


def required_levels(netlist: Netlist, sched: "Schedule") -> dict:
    """{net: the latest level it may have} for the design to fit ``sched``'s layers, from the
    required nets (level <= layers - 1) backwards through ``sched``'s units and memory reads."""
    L = sched.target.num_layers
    req = {n: L - 1 for n, _ in _required_nets(netlist)}
    mems = {m.name: m for m in netlist.memories}
    events = [(2 * layer + 1, "unit", u) for u, layer in sched.cell_layer.items()]
    events += [(2 * layer, "read", key) for key, layer in sched.read_layer.items()]
    for t, kind, key in sorted(events, key=lambda e: (-e[0], e[1], str(e[2]))):
        layer_of = t // 2
        if kind == "unit":
            fns = sched.functions[key]
            latest = min(req.get(f.out, L - 1) for f in fns) - 1        # the unit's latest layer
            ins = [n for f in fns for n in f.support]
        else:
            rp = mems[key[0]].read_ports[key[1]]
            # a spanning read's address is needed from its first layer
            latest = min(req.get(n, L - 1) for n in rp.data) - 1 - (layer_of - sched.first_read_layer(key))
            ins = list(rp.addr)
        for n in ins:
            req[n] = min(req.get(n, L - 1), latest)
    return req


def _collapse(f: BitFunction, net_level, producer: dict, max_inputs: int, limit: int) -> BitFunction:
    """Compose ``f`` with the plain-cell functions of its deepest inputs while its level is above
    ``limit``, that lowers it and the result stays within ``max_inputs`` bits and
    ``COLLAPSE_MAX_NEURONS`` neurons."""
    while True:
        lvl = max((net_level(n) for n in f.support), default=0)
        deep = [n for n in f.support if net_level(n) == lvl]
        if lvl + 1 <= limit or lvl == 0 or not all(n in producer for n in deep):
            return f
        cand = f
        for n in deep:
            cand = compose(cand, n, producer[n], max_inputs)
            if cand is None:
                return f
        if neuron_cost(cand) > COLLAPSE_MAX_NEURONS:
            return f
        f = cand


def _shannon(f: BitFunction, net_level, producer: dict, max_inputs: int, limit: int | None, next_net: int):
    """A bit that is still later than ``limit`` after collapsing, because its one deepest input x
    comes from a plain cell g whose composition with it has too many inputs (abc put a late signal
    at the bottom of a LUT tree it could not see was late): split it on x (Shannon), f = x ? f1 :
    f0, where f0 and f1 are new bits of its other, earlier inputs, and f becomes ``g ? f1 : f0`` over
    g's inputs and the two halves, a level after the later of them. (The final write-back mux of
    the CPU's one-cycle multiplier: the product enters the last level.) Returns (the new f, the
    halves' functions, the next free net) or None when that does not make it early enough."""
    if limit is None or not f.support:
        return None
    lvl = max(net_level(n) for n in f.support)
    if lvl + 1 <= limit:
        return None
    deep = [n for n in f.support if net_level(n) == lvl]
    if len(deep) != 1 or deep[0] not in producer:
        return None
    x = deep[0]
    g = producer[x]
    rest = [n for n in f.support if n != x]
    xi = f.support.index(x)
    halves, nets = [], []
    for v in (0, 1):              # f restricted to x = v, over the other inputs
        table = 0
        for q in range(1 << len(rest)):
            lo, hi = q & ((1 << xi) - 1), q >> xi
            table |= ((f.table >> (lo | (v << xi) | (hi << (xi + 1)))) & 1) << q
        if table in (0, (1 << (1 << len(rest))) - 1):
            nets.append(CONST1 if table else CONST0)
            continue
        h = BitFunction(next_net, tuple(rest), table)
        next_net += 1
        halves.append(h)
        nets.append(h.out)
    half_level = max((net_level(n) for n in rest), default=0) + 1
    if max(max((net_level(n) for n in g.support), default=0), half_level if halves else 0) + 1 > limit:
        return None
    # the new f: (g's inputs, then the non-constant halves) -> g ? f1 : f0
    support = list(g.support) + [n for n in nets if n not in (CONST0, CONST1)]
    if len(support) > max_inputs:
        return None
    pos = {n: i for i, n in enumerate(support)}
    table = 0
    for p in range(1 << len(support)):
        gv = (g.table >> sum(((p >> pos[n]) & 1) << i for i, n in enumerate(g.support))) & 1
        n = nets[gv]
        table |= (1 if n == CONST1 else 0 if n == CONST0 else (p >> pos[n]) & 1) << p
    new = BitFunction(f.out, tuple(support), table)
    if neuron_cost(new) + sum(neuron_cost(h) for h in halves) > COLLAPSE_MAX_NEURONS:
        return None
    return new, halves, next_net


def _absorbable(cell, producer: dict, net_level) -> dict:
    """{operand bit: cubes} of a multiplier cell: its operand bits that a small plain cell computes
    a level after that cell's inputs (an operand masked by an enable, a 2:1 mux of operands), as
    ``macros.disjoint_cubes``; the macro builds their partial products from the cell's inputs."""
    if cell.type not in MUL_CELLS:
        return {}
    products, _ = cell.products_and_addends()
    out = {}
    for a, b, _, _ in products:
        for n in tuple(a) + tuple(b):
            f = producer.get(n)
            if f is None or n in out or not f.support:
                continue
            if net_level(n) <= max(net_level(x) for x in f.support):
                continue
            cubes = disjoint_cubes(f)
            if cubes is not None:
                out[n] = cubes
    return out


def _levelise(netlist, target, max_inputs, g, drivers, collapse: dict | None, read_after: dict | None = None,
              read_span: dict | None = None, reg_layer: dict | None = None):
    """(Schedule, the problems that keep it from fitting ``target``). ``collapse``: None, or the
    latest level of each net ({net: level}; a net not in it: as early as possible) above which its
    bit function is collapsed."""
    L = target.num_layers
    level: dict[int, int] = {}
    why: dict[int, tuple] = {}        # net -> (node id, predecessor net or None)
    memo = _memo(netlist)

    def net_level(n):
        if n in level:
            return level[n]
        return 0 if n in (CONST0, CONST1, CONSTX) or n not in drivers.of else level[n]

    for node, data in g.nodes(data=True):
        if data[N.KIND] in (N.NODE_INPUT, N.NODE_REGISTER) or (
                data[N.KIND] == N.NODE_MEMORY_READ and not data[N.COMBINATIONAL]):
            obj = data[N.OBJ]
            sig = (obj.bits if data[N.KIND] == N.NODE_INPUT else obj.q if data[N.KIND] == N.NODE_REGISTER
                   else obj[0].read_ports[obj[1]].data)
            for n in sig:
                level[n] = (reg_layer or {}).get(n, 0) if data[N.KIND] == N.NODE_REGISTER else 0
                why[n] = (node, None)

    # Nets a mixer produces (inputs and registers in layer 0, memory reads): a read whose address
    # has one at its deepest level must wait for the next mixer; an address the FFNs produced is
    # decoded by the memory head itself (gadgets/deltanet_memory.py, decoded addresses), in the
    # mixer right after the FFN that made it.
    mixer_nets = set(level)
    cell_layer, read_layer, functions, unit_cell, net_names = {}, {}, {}, {}, {}
    read_first = {}
    used = _read_nets(netlist)
    producer: dict[int, BitFunction] = {}      # net -> the plain-cell bit function computing it
    next_net = len(netlist.nets)
    comb = g.subgraph(n for n, d in g.nodes(data=True) if d.get(N.COMBINATIONAL))

    def place_in_slices(fns, names, node, owner):
        """A macro's (or a ROM read's) functions: each in the first layer where its inputs are
        ready, one unit ``OWNER@LAYER`` per layer they span."""
        net_names.update(names)
        for f in fns:
            deepest = max(f.support, key=net_level, default=None)
            layer = net_level(deepest) if deepest is not None else 0
            unit = f"{owner}@{layer}"
            functions.setdefault(unit, []).append(f)
            cell_layer[unit] = layer
            unit_cell[unit] = owner
            level[f.out] = layer + 1
            why[f.out] = (node, deepest)

    for node in nx.lexicographical_topological_sort(comb):
        data = g.nodes[node]
        if data[N.KIND] == N.NODE_CELL and data[N.OBJ].type in MACRO_CELLS:
            # A macro: each threshold function goes to the first layer where its inputs are ready.
            cell = data[N.OBJ]
            absorb = _absorbable(cell, producer, net_level) if collapse is not None else None
            key = ("expand", id(netlist), cell.name, next_net, None if absorb is None else repr(sorted(absorb.items())))
            fns, names, next_net = _remembered(memo, key, lambda: expand(cell, next_net, used, absorb))
            place_in_slices(fns, names, node, cell.name)
            continue
        if data[N.KIND] == N.NODE_CELL:
            cell = data[N.OBJ]
            unit_cell[cell.name] = cell.name
            fns = list(_remembered(memo, ("bits", id(netlist), cell.name, max_inputs),
                                   lambda: cell_bit_functions(cell, max_inputs)))
            if collapse is not None:
                fns = [_collapse(f, net_level, producer, max_inputs, collapse.get(f.out, 0)) for f in fns]
                split = []
                for k, f in enumerate(fns):
                    got = _shannon(f, net_level, producer, max_inputs, collapse.get(f.out), next_net)
                    if got is not None:
                        fns[k], halves, next_net = got
                        split += halves
                        for h in halves:
                            net_names[h.out] = f"{cell.name}.{netlist.nets[f.out]}|{h.out}"
                place_in_slices(split, {}, node, cell.name)
                producer.update((h.out, h) for h in split)
                producer.update((f.out, f) for f in fns)
            functions[cell.name] = fns
            layer = 0
            for f in fns:
                deepest = max(f.support, key=net_level, default=None)
                lvl = net_level(deepest) if deepest is not None else 0
                layer = max(layer, lvl)
            cell_layer[cell.name] = layer
            for f in fns:
                deepest = max(f.support, key=net_level, default=None)
                level[f.out] = layer + 1
                why[f.out] = (node, deepest)
        elif not data[N.OBJ][0].write_ports:
            # A ROM's read: a function of the address (rom.py), placed like a macro's functions.
            fns, names, next_net = expand_rom(*data[N.OBJ], next_net)
            place_in_slices(fns, names, node, node)
        else:  # asynchronous memory read
            mem, port = data[N.OBJ]
            rp = mem.read_ports[port]
            a = max((net_level(n) for n in rp.addr), default=0)
            deepest = max(rp.addr, key=net_level)
            from_mixer = any(n in mixer_nets and net_level(n) == a for n in rp.addr)
            first = max(1, a + 1 if from_mixer else a, (read_after or {}).get((mem.name, port), 0))
            linear = [i for i in range(first, L) if target.layer_types[i] == LINEAR]
            k = (read_span or {}).get((mem.name, port), 1)
            if len(linear) >= k:
                layer = linear[k - 1]
                if k > 1:
                    read_first[(mem.name, port)] = linear[0]
            else:
                layer = max(first, L)          # no DeltaNet layer left: reported below as too deep
            read_layer[(mem.name, port)] = layer
            for n in rp.data:
                level[n] = layer
                why[n] = (node, deepest)
                mixer_nets.add(n)

    required = _required_nets(netlist)
    if collapse is not None:
        _drop_unread(netlist, cell_layer, functions, unit_cell, read_layer, required)
    depth = max((net_level(n) for n, _ in required), default=0)
    # Critical path: follow the deepest predecessor from the deepest required net.
    path, nodes = [], []
    if required:
        n, what = max(required, key=lambda t: (net_level(t[0]), t[1]))
        path.append((what, net_level(n)))
        nodes.append((None, n))
        while n in why:
            node, prev = why[n]
            src = g.nodes[node][N.SRC]
            name = net_names[n] if n in net_names else str(netlist.nets[n])
            path.append((f"{node} -> {name}" + (f" @ {src}" if src else ""), net_level(n)))
            nodes.append((node, n))
            if prev is None:
                break
            n = prev
    path, nodes = tuple(reversed(path)), tuple(reversed(nodes))

    cost = {u: unit_cost(functions[u]) for u in cell_layer}     # a unit's functions do not change here
    if depth <= L - 1:
        for _ in range(BALANCE_PASSES):         # a later pass can move what an earlier one freed
            if not _balance(netlist, L, level, cell_layer, functions, unit_cell, read_layer, required, cost,
                            read_first):
                break

    neurons = [0] * max(L, 1)
    for name, layer in cell_layer.items():
        if layer < L:
            neurons[layer] += cost[name]
    problems = []
    if depth > L - 1:
        chain = "\n    ".join(f"level {lvl}: {what}" for what, lvl in path)
        problems.append(f"the logic is {depth} levels deep but {L} layers allow {L - 1} (the last "
                        f"layer's FFN selects the token to emit); critical path:\n    {chain}\n"
                        f"  use --layers {depth + 1} or shorten this path (add a pipeline register "
                        f"on it)")
    return Schedule(target, level, cell_layer, read_layer, functions, tuple(neurons), path, depth,
                    unit_cell, net_names, nodes, tuple(sorted(read_first.items()))), problems


def _balance(netlist, L, level, cell_layer, functions, unit_cell, read_layer, required, cost, read_first=None):
    """Even out the FFN widths: the model's intermediate size is the widest layer's neuron count,
    and every layer pays for it. A unit (a plain cell, or one layer's slice of a macro) may run in
    any layer from its earliest (as soon as its inputs are ready) to one before its earliest reader
    (a unit's layer, the macro's next slice's too; a memory read's mixer layer; L - 1 for what must
    be ready at the end). Units are visited from the deepest down, so their readers are final, and
    each goes to the least loaded
    layer of its window, the earliest on ties (short-lived pairs). Only later moves: depth and the
    critical path do not change. Deterministic. ``cost``: each unit's FFN neurons (``unit_cost``).
    Returns whether a unit moved."""
    reader_units: dict[int, list] = {}
    for unit in cell_layer:
        for f in functions[unit]:
            for n in f.support:
                reader_units.setdefault(n, []).append(unit)
    fixed: dict[int, int] = {}
    mems = {m.name: m for m in netlist.memories}
    for (mem, port), layer in read_layer.items():
        layer = (read_first or {}).get((mem, port), layer)       # a spanning read's first layer
        for n in mems[mem].read_ports[port].addr:
            fixed[n] = min(fixed.get(n, L), layer)
    for n, _ in required:
        fixed[n] = min(fixed.get(n, L), L - 1)
    moved = False
    load = [0] * L
    for u, layer in cell_layer.items():
        if layer < L:
            load[layer] += cost[u]
    for u in sorted(cell_layer, key=lambda u: (-cell_layer[u], u)):
        cur = cell_layer[u]
        first_reader = min([fixed.get(f.out, L) for f in functions[u]] +
                           [cell_layer[r] for f in functions[u] for r in reader_units.get(f.out, ())])
        latest = min(first_reader - 1, L - 2)
        if latest <= cur:
            continue
        best = min(range(cur, latest + 1), key=lambda t: (load[t] + (0 if t == cur else cost[u]), t))
        if best != cur:
            load[cur] -= cost[u]
            load[best] += cost[u]
            cell_layer[u] = best
            moved = True
            for f in functions[u]:
                level[f.out] = best + 1
    return moved


def _drop_unread(netlist, cell_layer, functions, unit_cell, read_layer, required):
    """Remove the plain cells whose outputs nothing reads any more (after collapsing), latest first
    so that their own inputs' cells may follow."""
    mems = {m.name: m for m in netlist.memories}
    readers: dict[int, int] = {}
    for unit in cell_layer:
        for f in functions[unit]:
            for n in f.support:
                readers[n] = readers.get(n, 0) + 1
    pinned = {n for n, _ in required}
    pinned |= {n for (mem, port) in read_layer for n in mems[mem].read_ports[port].addr}
    for unit in sorted((u for u in cell_layer if unit_cell[u] == u), key=lambda u: (-cell_layer[u], u)):
        if any(readers.get(f.out, 0) or f.out in pinned for f in functions[unit]):
            continue
        for f in functions[unit]:
            for n in f.support:
                readers[n] -= 1
        del cell_layer[unit], functions[unit], unit_cell[unit]


def _read_nets(netlist: Netlist) -> set:
    """Every net something reads: cell inputs, register and memory ports, design outputs."""
    used = {n for c in netlist.cells for _, sig in c.inputs for n in sig}
    used |= {n for p in netlist.outputs for n in p.bits}
    for r in netlist.registers:
        used |= set(r.d) | {n for n in (r.enable, r.srst, r.arst) if n is not None}
    for m in netlist.memories:
        for wp in m.write_ports:
            used |= set(wp.addr) | set(wp.data) | set(wp.enable)
        for rp in m.read_ports:
            used |= set(rp.addr) | {n for n in (rp.enable, rp.srst) if n is not None}
    return used


def verify(netlist: Netlist, sched: Schedule) -> list[str]:
    """Check a schedule without changing it; returns the violations (empty when consistent)."""
    bad = []
    L = sched.target.num_layers
    placed = set(sched.unit_cell.values())
    # what the schedule reads: units' inputs, memory read addresses, the required nets (a cell
    # collapsed into all of its readers is no longer needed)
    mems = {m.name: m for m in netlist.memories}
    needed = {n for fns in sched.functions.values() for f in fns for n in f.support}
    needed |= {n for (mem, port) in sched.read_layer for n in mems[mem].read_ports[port].addr}
    needed |= {n for n, _ in _required_nets(netlist)}
    for c in netlist.cells:
        if c.name not in placed and any(n in needed for _, sig in c.outputs for n in sig):
            bad.append(f"cell {c.name} is not scheduled")
    produced = {}
    for unit, layer in sched.cell_layer.items():
        for f in sched.functions[unit]:
            for n in f.support:
                if sched.level.get(n, 0) > layer:
                    bad.append(f"{unit} in layer {layer} reads net {sched.net_name(netlist, n)} of level "
                               f"{sched.level[n]}")
            if sched.level.get(f.out) != layer + 1:
                bad.append(f"{unit}: output {sched.net_name(netlist, f.out)} should have level {layer + 1}")
            produced[f.out] = unit
    for c in netlist.cells:
        if c.name in placed:
            for n in (n for _, sig in c.outputs for n in sig):
                if n in needed and n not in produced:
                    bad.append(f"cell {c.name}: output {netlist.nets[n]} is read but computed nowhere")
    mixer_made = {n for m in netlist.memories for rp in m.read_ports for n in rp.data}
    mixer_made |= {n for r in netlist.registers for n in r.q} | {n for p in netlist.inputs for n in p.bits}
    for (mem, port), last in sched.read_layer.items():
        for layer in sched.read_layers((mem, port)):
            if layer >= L or sched.target.layer_types[layer] != LINEAR:
                bad.append(f"memory {mem} read port {port} in layer {layer}, which is not a DeltaNet layer")
        layer = sched.first_read_layer((mem, port))
        for n in mems[mem].read_ports[port].addr:
            lvl = sched.level.get(n, 0)
            if lvl > layer or (lvl == layer and n in mixer_made) or layer < 1:
                bad.append(f"memory {mem} read port {port} in layer {layer} reads address net "
                           f"{netlist.nets[n] if n > 2 else n} of level {lvl} before it is ready")
    for n, what in _required_nets(netlist):
        if sched.level.get(n, 0) > L - 1:
            bad.append(f"{what} is ready only at level {sched.level[n]}")
    return bad
