"""Lowering: a schedule -> residual channels and FFN neurons per layer.

Every net a layer reads or writes gets a bit pair of the residual layout (``allocate_pairs``); every
cell output bit becomes the neurons of its truth table in the FFN of the cell's layer
(``lower_logic``). The mixers that read state (memories, registers) and the token selection of the last
layer are lowered by their own gadgets; this module covers the combinational logic between them.

Pairs are not reused yet: a pair holds one net from the layer that writes it to the end of the pass,
so the hidden size grows with the number of nets. (Reuse needs the last reader's layer to reset the
pair to (0, 1); ``schedule`` already knows every net's last reader.)
"""

from .gadgets.ffn_threshold import Neuron, boolean_function
from .gadgets.layout import ResidualLayout
from .ir import CONST0, CONST1, CONSTX, Netlist
from .logic import BitFunction
from .schedule import Schedule, neuron_cost


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


def lower_logic(netlist: Netlist, sched: Schedule, layout: ResidualLayout, pairs: dict[int, int]) -> list[list[Neuron]]:
    """FFN neurons of every layer (index = layer) for the scheduled combinational cells."""
    layers: list[list[Neuron]] = [[] for _ in range(sched.target.num_layers)]
    for name in sorted(sched.cell_layer, key=lambda c: (sched.cell_layer[c], c)):
        for f in sched.functions[name]:
            layers[sched.cell_layer[name]] += bit_neurons(f, layout, pairs)
    return layers
