"""Waveforms: write a simulation ``Trace`` as a VCD file (pyvcd) for GTKWave and friends.

Timing convention: one clock period is 10 time units (``1 ns`` each). The clock rises at 10*k, when
cycle k begins; every signal then holds its cycle-k value until 10*(k+1). The clock falls at 10*k+5.
Signal names with dots (``sub.signal``) become nested scopes under the top module's scope.
"""

import re

from vcd import VCDWriter

PERIOD = 10


def _scope_and_name(top: str, name: str):
    parts = name.split(".")
    clean = [re.sub(r"[^A-Za-z0-9_$\[\]:]", "_", p) or "_" for p in parts]
    return [top, *clean[:-1]], clean[-1]


class VCDStream:
    """A waveform written as the simulation goes: ``add(trace)`` appends the cycles of each piece of
    a run (``Simulator.run`` called again and again, with ``record_signals``), ``close()`` ends it.
    The whole run's file is byte-identical to ``write_vcd`` of one trace of all its cycles.

    The file is deterministic: no wall-clock date, signals in the netlist's order."""

    def __init__(self, f, sim, instance: int = 0):
        top = sim.netlist.top
        self.instance, self.cycles = instance, 0
        self.writer = w = VCDWriter(f, timescale="1 ns", date="(netlist2tf)", version="netlist2tf")
        self.clock_vars = [w.register_var([top], p.name, "wire", size=1, init=0) for p in sim.clock_ports]
        self.variables = []
        seen = {p.name for p in sim.clock_ports}
        for s in sim.signals:
            if s.name in seen:
                continue
            seen.add(s.name)
            scope, name = _scope_and_name(top, s.name)
            self.variables.append((w.register_var(scope, name, "wire", size=len(s.bits)), s.name))

    def add(self, trace) -> None:
        w, instance = self.writer, self.instance
        columns = [(var, trace.signals[name]) for var, name in self.variables]
        for k in range(trace.cycles):
            t = (self.cycles + k) * PERIOD
            for cv in self.clock_vars:
                w.change(cv, t, 1)
            for var, values in columns:
                w.change(var, t, int(values[k, instance]))
            for cv in self.clock_vars:
                w.change(cv, t + PERIOD // 2, 0)
        self.cycles += trace.cycles

    def close(self) -> None:
        self.writer.close(self.cycles * PERIOD)


def write_vcd(path, sim, trace, instance: int = 0):
    """Write the named signals of ``trace`` (instance ``instance`` of a batch) to ``path``: beside it,
    then renamed over it (``netlist2tf.common.outputs.file_writer``: an interruption leaves the old file;
    a device or a pipe is written into)."""
    from netlist2tf.common import file_writer

    with file_writer(path, option="--vcd") as f:
        stream = VCDStream(f, sim, instance)
        stream.add(trace)
        stream.close()
