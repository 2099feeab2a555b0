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


def write_vcd(path, sim, trace, instance: int = 0):
    """Write the named signals of ``trace`` (instance ``instance`` of a batch) to ``path``.

    The file is deterministic: no wall-clock date, signals in the netlist's order.
    """
    top = sim.netlist.top
    with open(path, "w") as f:
        w = VCDWriter(f, timescale="1 ns", date="(netlist2tf)", version="netlist2tf")
        clock_vars = [w.register_var([top], p.name, "wire", size=1, init=0) for p in sim.clock_ports]
        variables = []
        seen = {p.name for p in sim.clock_ports}
        for s in sim.signals:
            if s.name in seen:
                continue
            seen.add(s.name)
            scope, name = _scope_and_name(top, s.name)
            variables.append((w.register_var(scope, name, "wire", size=len(s.bits)), trace.signals[s.name]))
        for k in range(trace.cycles):
            t = k * PERIOD
            for cv in clock_vars:
                w.change(cv, t, 1)
            for var, values in variables:
                w.change(var, t, int(values[k, instance]))
            for cv in clock_vars:
                w.change(cv, t + PERIOD // 2, 0)
        w.close(trace.cycles * PERIOD)
