"""The networkx view of a netlist: who drives each net and who reads it.

``netlist_graph`` builds a ``DiGraph`` whose nodes are ports, cells, registers and memory ports and
whose edges run from a net's driver to each of its readers (attribute keys: ``nodes``). The scheduler
levelises it; the validator finds combinational loops in it; the simulator orders its cells by it.
"""

from dataclasses import dataclass, replace

import networkx as nx

from netlist2tf.netlist import nodes as N
from netlist2tf.common import Netlist2TFError
from netlist2tf.netlist.ir import CONST0, CONST1, CONSTX, Netlist


@dataclass(frozen=True, slots=True)
class Drivers:
    """``of[net] = (node id, bit offset)``; ``conflicts`` lists (net, first driver, second driver)."""
    of: dict
    conflicts: tuple


def driver_items(netlist: Netlist):
    """Yield (node id, attrs, driven signal) for everything that drives nets, in a fixed order."""
    for p in netlist.inputs:
        yield f"in:{p.name}", {N.KIND: N.NODE_INPUT, N.OBJ: p, N.SRC: "", N.COMBINATIONAL: False}, p.bits
    for r in netlist.registers:
        yield f"reg:{r.name}", {N.KIND: N.NODE_REGISTER, N.OBJ: r, N.SRC: r.src,
                                N.COMBINATIONAL: False}, r.q
    for m in netlist.memories:
        for i, rp in enumerate(m.read_ports):
            yield f"memrd:{m.name}:{i}", {N.KIND: N.NODE_MEMORY_READ, N.OBJ: (m, i), N.SRC: m.src,
                                          N.COMBINATIONAL: not rp.clocked}, rp.data
    for c in netlist.cells:
        for _, sig in c.outputs:
            yield f"cell:{c.name}", {N.KIND: N.NODE_CELL, N.OBJ: c, N.SRC: c.src,
                                     N.COMBINATIONAL: True}, sig


def reader_items(netlist: Netlist):
    """Yield (node id, attrs, read signal) for everything that reads nets, in a fixed order."""
    for p in netlist.outputs:
        yield f"out:{p.name}", {N.KIND: N.NODE_OUTPUT, N.OBJ: p, N.SRC: "", N.COMBINATIONAL: False}, p.bits
    for r in netlist.registers:
        ctl = tuple(n for n in (r.enable, r.srst, r.arst) if n is not None)
        yield f"reg:{r.name}", {}, r.d + ctl
    for m in netlist.memories:
        for i, rp in enumerate(m.read_ports):
            yield f"memrd:{m.name}:{i}", {}, rp.addr + ((rp.enable, rp.srst, rp.arst) if rp.clocked else ())
        for i, wp in enumerate(m.write_ports):
            yield f"memwr:{m.name}:{i}", {N.KIND: N.NODE_MEMORY_WRITE, N.OBJ: (m, i), N.SRC: m.src,
                                          N.COMBINATIONAL: False}, wp.addr + wp.data + wp.enable
    for c in netlist.cells:
        for _, sig in c.inputs:
            yield f"cell:{c.name}", {}, sig


def find_drivers(netlist: Netlist) -> Drivers:
    """Map each driven net to its (single) driver; collect nets with more than one."""
    of, conflicts = {}, []
    for node, _, sig in driver_items(netlist):
        for offset, n in enumerate(sig):
            if n in (CONST0, CONST1, CONSTX):
                continue
            if n in of and of[n][0] != node:
                conflicts.append((n, of[n][0], node))
            else:
                of.setdefault(n, (node, offset))
    return Drivers(of, tuple(conflicts))


def netlist_graph(netlist: Netlist, drivers: Drivers | None = None) -> nx.DiGraph:
    """The driver -> reader graph of ``netlist`` (see ``nodes`` for its keys)."""
    drivers = drivers or find_drivers(netlist)
    g = nx.DiGraph()
    for node, attrs, _ in driver_items(netlist):
        g.add_node(node, **attrs)
    nets = {}                    # (driver, reader) -> its nets in order, as dict keys: linear in a wide bus
    for node, attrs, sig in reader_items(netlist):
        if attrs:
            g.add_node(node, **attrs)
        for n in sig:
            if n in drivers.of:
                src = drivers.of[n][0]
                if (src, node) not in nets:
                    nets[src, node] = {}
                    g.add_edge(src, node)
                nets[src, node][n] = None
    for edge, ns in nets.items():
        g.edges[edge][N.NETS] = tuple(ns)
    return g


def combinational_order(g: nx.DiGraph) -> list[str]:
    """Combinational nodes in an evaluation order (drivers first); deterministic.

    Raises networkx.NetworkXUnfeasible if they form a loop (the validator reports loops first).
    """
    comb = g.subgraph(n for n, d in g.nodes(data=True) if d.get(N.COMBINATIONAL))
    return list(nx.lexicographical_topological_sort(comb))


def combinational_loops(g: nx.DiGraph) -> list[list[str]]:
    """Every group of combinational nodes that feed back into themselves within one cycle."""
    comb = g.subgraph(n for n, d in g.nodes(data=True) if d.get(N.COMBINATIONAL))
    loops = []
    for scc in nx.strongly_connected_components(comb):
        if len(scc) > 1 or any(comb.has_edge(n, n) for n in scc):
            loops.append(sorted(scc))
    return sorted(loops)


def keep_outputs(netlist: Netlist, names) -> Netlist:
    """``netlist`` with only the output ports ``names`` (in the design's order) and without the
    combinational cells nothing else reads any more.

    State is kept whole: every register and memory stays, with the logic feeding their inputs, so
    the design's cycle-by-cycle behaviour is unchanged; only the logic that computed the dropped
    outputs goes. The compiler then emits tokens for the kept outputs alone (a host that can decode
    the rest from the trace needs fewer tokens per cycle). Removing cells never deepens the logic.

    Raises Netlist2TFError naming an output the design does not have."""
    names = list(names)
    have = [p.name for p in netlist.outputs]
    unknown = [n for n in names if n not in have]
    if unknown:
        raise Netlist2TFError(f"{netlist.top} has no output {', '.join(map(repr, unknown))} (its outputs: "
                              f"{', '.join(have)})")
    keep = set(names)
    ports = tuple(p for p in netlist.ports if p.direction == "input" or p.name in keep)
    trimmed = replace(netlist, ports=ports)
    g = netlist_graph(trimmed)
    sinks = [n for n in g if not n.startswith(("cell:", "in:"))]   # outputs, registers, memory ports
    live, todo = set(sinks), list(sinks)      # every node some sink depends on: one walk back from all
    while todo:
        for p in g.predecessors(todo.pop()):
            if p not in live:
                live.add(p)
                todo.append(p)
    return replace(trimmed, cells=tuple(c for c in netlist.cells if f"cell:{c.name}" in live))
