"""Verify a compiled model against the netlist simulator, cycle by cycle.

The same seeded random inputs (a different stream per batch row) drive the simulator and the model
(stock ``transformers`` modules, greedy decoding, the model's own cache); every output and every
register value of every cycle must be equal. The first difference is reported with its cycle, row and
values.
"""

from dataclasses import dataclass

from .host import run_model
from .sim import RandomStimulus, Simulator


@dataclass
class Divergence:
    cycle: int
    row: int
    what: str        # "output NAME" or "register NAME"
    model: int
    simulator: int

    def __str__(self):
        return (f"cycle {self.cycle}, batch row {self.row}: {self.what} is {self.model:#x} in the model "
                f"but {self.simulator:#x} in the netlist simulator")


def verify_model(model, protocol, netlist, initial_registers: dict, cycles: int, batch: int = 1,
                 seed: int = 0, prefill: bool = True, initial_memory: dict | None = None):
    """Run both; return (the first Divergence or None, the ModelRun)."""
    # The simulator's run, recorded per row: the inputs it got, its outputs, its state after each edge.
    sim = Simulator(netlist, batch=batch)
    stim = RandomStimulus(seed)
    inputs = [[{} for _ in range(cycles)] for _ in range(batch)]
    outputs = [[{} for _ in range(cycles)] for _ in range(batch)]
    regs = [[{} for _ in range(cycles)] for _ in range(batch)]
    for k in range(cycles):
        vals = stim.values(k, sim)
        out = sim.step(vals)
        state = sim.state()
        for row in range(batch):
            pick = (lambda v: int(v) if batch == 1 else int(v[row]))
            inputs[row][k] = {n: int(v[0]) if batch == 1 else int(v[row]) for n, v in vals.items()}
            outputs[row][k] = {n: pick(v) for n, v in out.items()}
            regs[row][k] = {n: pick(v) for n, v in state.items() if n.startswith("reg:")}
    run = run_model(model, protocol, initial_registers, inputs, cycles, prefill=prefill,
                    initial_memory=initial_memory)
    for k in range(cycles):
        for row in range(batch):
            for n, v in outputs[row][k].items():
                if run.outputs[row][k][n] != v:
                    return Divergence(k, row, f"output {n}", run.outputs[row][k][n], v), run
            for n, v in regs[row][k].items():
                if run.registers[row][k][n] != v:
                    return Divergence(k, row, f"register {n[4:]}", run.registers[row][k][n], v), run
    return None, run
