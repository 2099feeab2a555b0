"""Lowering: a schedule -> residual channels and FFN neurons per layer.

Every net a layer reads or writes gets a bit pair of the residual layout (``allocate_pairs``); every
cell output bit becomes the neurons of its truth table in the FFN of the cell's layer
(``lower_logic``). The mixers that read state (memories, registers) and the token selection of the last
layer are lowered by their own gadgets; this module covers the combinational logic between them.

``allocate_pairs`` gives every net its own pair (simple; the tests of the lowering use it);
``allocate_pairs_reusing`` (what ``assemble`` uses) hands a pair to a new net once the old one is
dead, the old net's last reader resetting it, so the hidden size follows the most nets alive at once
rather than their total.
"""

import heapq

from netlist2tf.gadgets import Neuron, boolean_function, merge_neurons
from netlist2tf.gadgets import ResidualLayout
from netlist2tf.netlist import CONST0, CONST1, CONSTX, Netlist
from netlist2tf.compile.logic import BitFunction
from netlist2tf.compile.schedule import Schedule, neuron_cost


def allocate_pairs(netlist: Netlist, sched: Schedule) -> dict[int, int]:
    """{net: pair index} for every source bit (inputs, registers, memory reads) and every cell output,
    in a deterministic order (sources first, then by layer and cell name)."""
    pairs: dict[int, int] = {}

    def take(n):
        if n not in (CONST0, CONST1, CONSTX) and n not in pairs:
            pairs[n] = len(pairs)

    for p in netlist.inputs:
        for n in p.bits:
            take(n)
    for r in netlist.registers:
        for n in r.q:
            take(n)
    for m in netlist.memories:
        for rp in m.read_ports:
            for n in rp.data:
                take(n)
    for name in sorted(sched.cell_layer, key=lambda c: (sched.cell_layer[c], c)):
        for f in sched.functions[name]:
            take(f.out)
    return pairs


def bit_neurons(f, layout: ResidualLayout, pairs: dict[int, int]) -> list[Neuron]:
    """The neurons writing f's output bit to its pair: a macro's threshold function lowers its steps;
    a truth table the cheaper of its minterms and 1 - (not f)'s."""
    if not isinstance(f, BitFunction):
        return f.neurons(layout, pairs)
    out = layout.pair(pairs[f.out])
    ins = [layout.pair(pairs[n]) for n in f.support]
    full = (1 << (1 << len(f.support))) - 1
    if f.minterms <= neuron_cost(f):
        return boolean_function(ins, f.table, out)
    # f = 1 - (not f): a constant neuron writes (+1, -1), the complement's minterms write (-1, +1).
    return [Neuron((), 1, ((out[0], 1), (out[1], -1)))] + boolean_function(ins, full & ~f.table, (out[1], out[0]))


def lower_logic(netlist: Netlist, sched: Schedule, layout: ResidualLayout, pairs: dict[int, int],
                owners: list | None = None) -> list[list[Neuron]]:
    """FFN neurons of every layer (index = layer) for the scheduled combinational cells; ``owners``
    (a list of one list per layer), where given, receives each unit's rows as (unit, first, end)."""
    layers: list[list[Neuron]] = [[] for _ in range(sched.target.num_layers)]
    for name in sorted(sched.cell_layer, key=lambda c: (sched.cell_layer[c], c)):
        fns = sched.functions[name]
        layer = layers[sched.cell_layer[name]]
        first = len(layer)
        # a unit's threshold-function neurons merged (schedule.unit_cost counts them so)
        layer += merge_neurons(
            [n for f in fns if not isinstance(f, BitFunction) for n in bit_neurons(f, layout, pairs)])
        layer += [n for f in fns if isinstance(f, BitFunction) for n in bit_neurons(f, layout, pairs)]
        if owners is not None:
            owners[sched.cell_layer[name]].append((name, first, len(layer)))
    return layers


def _pair_lifetimes(netlist: Netlist, sched: Schedule, kept: set[int]):
    """(nets in write order, {net: write time}, {net: last reader's layer}) for the residual pairs
    (time: mixer l = 2l, FFN l = 2l + 1; ``kept`` nets read by layer L, i.e. never freed)."""
    L = sched.target.num_layers
    written: dict[int, int] = {}
    order: list[int] = []

    def write(n, t):
        if n not in (CONST0, CONST1, CONSTX) and n not in written:
            written[n] = t
            order.append(n)

    for p in netlist.inputs:
        for n in p.bits:
            write(n, 0)
    for r in netlist.registers:
        for n in r.q:                           # layer 0's mixer, or a later one (plan.late_registers)
            write(n, 2 * sched.level.get(n, 0))
    mems = {m.name: m for m in netlist.memories}
    for (mem, port) in sorted(sched.read_layer):
        for n in mems[mem].read_ports[port].data:      # from the first layer of a spanning read's banks
            write(n, 2 * sched.first_read_layer((mem, port)))
    units = sorted(sched.cell_layer, key=lambda u: (sched.cell_layer[u], u))
    for u in units:
        for f in sched.functions[u]:
            write(f.out, 2 * sched.cell_layer[u] + 1)
    last: dict[int, int] = {}
    for u in units:
        for f in sched.functions[u]:
            for n in f.support:
                last[n] = max(last.get(n, -1), sched.cell_layer[u])
    for (mem, port), layer in sched.read_layer.items():
        for n in mems[mem].read_ports[port].addr:     # read by the memory head in mixer `layer`:
            last[n] = max(last.get(n, -1), layer)      # reset by that layer's FFN at the earliest
    for n in kept:
        last[n] = L          # never freed
    return order, written, last


def _free_time(n: int, written: dict, last: dict, L: int) -> int | None:
    """When net ``n``'s pair becomes free: its last reader's FFN (2 * layer + 1), or None (never: a
    kept net, one nothing reads, or one read only by the mixer of the layer that writes it)."""
    r = last.get(n)
    return 2 * r + 1 if r is not None and r < L and 2 * r + 1 > written[n] else None


def pair_lifetimes(netlist: Netlist, sched: Schedule, kept: set[int]) -> dict[int, tuple[int, int | None]]:
    """{net: (when its pair is written, when it is freed or None)} for every net that holds a
    residual pair, in ``allocate_pairs_reusing``'s time (mixer l = 2l, FFN l = 2l + 1): the report's
    "which channels, and until when"."""
    order, written, last = _pair_lifetimes(netlist, sched, kept)
    L = sched.target.num_layers
    return {n: (written[n], _free_time(n, written, last, L)) for n in order}


def live_pairs_per_layer(netlist: Netlist, sched: Schedule, kept: set[int]) -> list[int]:
    """The logic's residual bit pairs in use in each layer: the most held at once after its mixer
    or after its FFN, by ``allocate_pairs_reusing``'s lifetimes (a net holds its pair from its
    write until its last reader's FFN; a ``kept`` net, or one nothing reads after it is written,
    to the end). The largest is the number of pairs that allocation uses (it is optimal)."""
    return live_pairs(pair_lifetimes(netlist, sched, kept), sched.target.num_layers)


def live_pairs(lifetimes: dict, layers: int) -> list[int]:
    """``live_pairs_per_layer`` from ``pair_lifetimes``'s result (a net never freed lives to the end)."""
    spans = [(w, layers * 2 + 1 if f is None else f) for w, f in lifetimes.values()]
    return [max(sum(1 for w, f in spans if w <= t < f) for t in (2 * i, 2 * i + 1)) for i in range(layers)]


def allocate_pairs_reusing(netlist: Netlist, sched: Schedule, kept: set[int]) -> tuple[dict[int, int], list[list[int]]]:
    """Like ``allocate_pairs``, but a pair is reused once its net is dead.

    Time runs mixer 0, FFN 0, mixer 1, ... (mixer l = 2l, FFN l = 2l + 1). A net is written by layer
    0's mixer (inputs, registers), by a memory read's mixer, or by its cell's FFN; it is read by the
    FFNs of the units that use it and by the mixers of the memory reads it addresses (the pair
    is then reset by that layer's FFN); ``kept`` nets (what the last
    layer emits) live to the end. The FFN of a net's last reader also resets its pair to (0, 1) with
    one neuron (relu(b) subtracted from b and added to 1 - b); from then on the pair is free for a
    net written by that FFN or any later mixer/FFN. Returns ({net: pair}, resets[layer] = nets whose
    pair that layer's FFN resets). Greedy in write order with the lowest free pair first: optimal for
    interval graphs, deterministic.
    """
    L = sched.target.num_layers
    order, written, last = _pair_lifetimes(netlist, sched, kept)
    pairs: dict[int, int] = {}
    resets: list[list[int]] = [[] for _ in range(L)]
    pending: list[tuple[int, int, int, int]] = []   # heap: (time it becomes free, pair, dead net, reset layer)
    released: list[tuple[int, int, int]] = []       # heap of free pairs: (pair, dead net, reset layer)
    next_pair = 0
    for n in sorted(order, key=lambda n: written[n]):   # stable: ties keep the deterministic order
        t = written[n]
        while pending and pending[0][0] <= t:
            heapq.heappush(released, heapq.heappop(pending)[1:])
        if released:
            pair, dead, layer = heapq.heappop(released)
            resets[layer].append(dead)                 # reset only pairs that are taken again
            pairs[n] = pair
        else:
            pairs[n] = next_pair
            next_pair += 1
        free = _free_time(n, written, last, L)
        if free is not None:
            heapq.heappush(pending, (free, pairs[n], n, last[n]))
    return pairs, resets


def reset_neurons(nets: list[int], layout: ResidualLayout, pairs: dict[int, int]) -> list[Neuron]:
    """One neuron per net: relu(b) taken from b and given to 1 - b, so the pair is (0, 1) again."""
    out = []
    for n in nets:
        b, nb = layout.pair(pairs[n])
        out.append(Neuron(((b, 1),), 0, ((b, -1), (nb, 1))))
    return out
