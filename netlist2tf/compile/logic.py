"""Cells as truth tables: what each output bit of a combinational cell computes, from which input bits.

The simulator is the one definition of every cell's semantics, so truth tables are obtained by
simulating the cell alone on all 2**k patterns of its input bits at once (one batch lane per pattern),
then dropping the inputs an output bit does not depend on. The lowering turns a table into FFN neurons
(one per true minterm), which is why the input count is capped: a cell whose output bit depends on
more than ``max_inputs`` bits must be broken up (``--flow lut`` maps everything to 4-input LUTs).
"""

from dataclasses import dataclass

import numpy as np

from netlist2tf.common import UnsupportedDesignError
from netlist2tf.netlist import CONST0, CONST1, CONSTX, Cell, Net, Netlist, Port
from netlist2tf.netlist import Problem

MAX_INPUTS = 8


@dataclass(frozen=True, slots=True)
class BitFunction:
    """``out`` = f(support), with bit p of ``table`` = f at the pattern p (support[0] = LSB)."""
    out: int
    support: tuple[int, ...]
    table: int

    @property
    def minterms(self) -> int:
        return bin(self.table).count("1")


def lone_cell_netlist(cell: Cell, inputs, outputs) -> Netlist:
    """A netlist of ``cell`` alone with the given (name, nets) input and output ports, to simulate
    the cell by itself (the simulator is the one definition of every cell's semantics)."""
    sigs = [sig for _, sig in inputs + outputs] + [sig for _, sig in cell.inputs + cell.outputs]
    top = max([n for sig in sigs for n in sig] + [CONSTX]) + 1
    ports = tuple(Port(name, "input", sig, False) for name, sig in inputs) + \
        tuple(Port(name, "output", sig, False) for name, sig in outputs)
    return Netlist(cell.name, tuple(Net(i, f"n{i}", None) for i in range(top)), ports, (cell,), (), (), ())


def _compact(cell: Cell, inputs, outputs):
    """``cell`` and its ports with the nets renumbered densely after the constants (a lone cell's
    netlist then has as many nets as the cell uses, not as many as the whole design): the same
    function of the same port names."""
    import dataclasses

    ids = {n: n for n in (CONST0, CONST1, CONSTX)}
    for sig in [sig for _, sig in inputs + outputs] + [sig for _, sig in cell.inputs + cell.outputs]:
        for n in sig:
            if n not in ids:
                ids[n] = CONSTX + 1 + len(ids) - 3
    renumber = lambda ports: [(name, tuple(ids[n] for n in sig)) for name, sig in ports]  # noqa: E731
    return (dataclasses.replace(cell, inputs=tuple(renumber(cell.inputs)), outputs=tuple(renumber(cell.outputs))),
            renumber(inputs), renumber(outputs))


_TABLES: dict = {}       # a cell's shape (type, parameters, its ports over dense nets) -> its bit functions


def cell_bit_functions(cell: Cell, max_inputs: int = MAX_INPUTS) -> list[BitFunction]:
    """The function of every output bit of ``cell`` (a combinational cell of a validated netlist).

    Raises UnsupportedDesignError naming the cell if an output depends on more than ``max_inputs`` bits.
    Cells of the same shape (type, parameters, and ports wired alike once their nets are numbered
    densely: the sorted input bits first) have the same functions over the same input positions: each
    shape is simulated once per process.
    """
    inputs = sorted({n for _, sig in cell.inputs for n in sig if n not in (CONST0, CONST1, CONSTX)})
    outputs = [n for _, sig in cell.outputs for n in sig]
    k = len(inputs)   # a wide cell may still be narrow per output bit: checked per bit below
    ins = [(f"i{n}", (n,)) for n in inputs]
    outs = [(f"o{j}", (n,)) for j, n in enumerate(outputs)]
    if k > 16:
        raise UnsupportedDesignError([Problem(
            f"cell {cell.name} ({cell.type})", cell.src,
            f"it has {k} input bits; the compiler maps cells of at most {max_inputs} input bits per "
            f"output to FFN neurons: synthesize with --flow lut")])
    lone, lone_ins, lone_outs = _compact(cell, ins, outs)
    key = (cell.type, cell.params, lone.inputs, lone.outputs, max_inputs)
    if key not in _TABLES:
        _TABLES[key] = _simulate(lone, lone_ins, lone_outs, k, max_inputs, cell)
    return [BitFunction(outputs[j], tuple(inputs[i] for i in support), table) for j, support, table in _TABLES[key]]


def _simulate(lone: Cell, ins, outs, k: int, max_inputs: int, cell: Cell) -> list:
    """[(output index, support as input positions, table)] of the cell ``lone`` (``cell`` names it in
    errors), simulated on all 2**k patterns of its inputs at once."""
    from netlist2tf.sim import Simulator

    sim = Simulator(lone_cell_netlist(lone, ins, outs), batch=max(2, 1 << k))
    patterns = np.arange(1 << k, dtype=np.uint64)
    if len(patterns) < 2:
        patterns = np.zeros(2, dtype=np.uint64)
    values = {name: (patterns >> np.uint64(j)) & np.uint64(1) for j, (name, _) in enumerate(ins)}
    out = sim.step(values)
    result = []
    for j in range(len(outs)):
        column = [int(v) for v in out[outs[j][0]][:1 << k]]
        support = [i for i in range(k)
                   if any(column[p] != column[p ^ (1 << i)] for p in range(1 << k))]
        if len(support) > max_inputs:
            raise UnsupportedDesignError([Problem(
                f"cell {cell.name} ({cell.type}) output bit {j}", cell.src,
                f"it depends on {len(support)} input bits; the compiler maps at most {max_inputs} "
                f"per bit to FFN neurons: synthesize with --flow lut")])
        table = 0
        for p in range(1 << len(support)):
            full = sum(((p >> s) & 1) << i for s, i in enumerate(support))
            table |= column[full] << p
        result.append((j, tuple(support), table))
    return result
