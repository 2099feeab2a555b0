"""Run a design on Amaranth's own simulator (``amaranth.sim``), the independent oracle for ours.

Given the per-cycle input values of a netlist simulation (a ``Trace``), drive the same values into
the Amaranth design and sample every output in every cycle, with the same cycle semantics as
``sim.Simulator``: inputs set, everything settled, outputs sampled, then the clock edge.
"""

import warnings

import numpy as np

from netlist2tf.common import DesignElaborationError
from netlist2tf.frontend.synth import load_design


def _port_signals(dut, design: str) -> dict:
    """Netlist port name -> the Amaranth port's raw bits (a ``Value``), named as ``rtlil.convert``
    names them.

    A port of a ``ShapeCastable`` shape (a ``lib.enum`` enum, a ``lib.data`` struct, union or array,
    nested or with signed members) is a ``ValueCastable`` view; the netlist port is its bits as one
    plain vector (``rtlil.convert`` takes ``as_value()``), so the testbench drives and samples
    ``Value.cast(view)``: integers in, integers out, no enum members or struct constants.
    """
    from amaranth.hdl import Value
    from amaranth.lib import wiring

    if isinstance(dut, wiring.Component):
        return {"__".join(str(part) for part in path): Value.cast(value)
                for path, _, value in dut.signature.flatten(dut)}
    from netlist2tf.frontend.synth import design_ports
    return {sig.name: sig for sig in design_ports(dut, design)}


def run_amaranth(design: str, inputs: dict, cycles: int, outputs: list[str] | None = None,
                 clock: str = "clk", dut=None) -> dict:
    """Simulate ``design`` with Amaranth for ``cycles`` cycles.

    ``inputs`` maps input port names to sequences of per-cycle values (e.g. ``trace.inputs[name][:,
    lane]``). ``clock`` is the netlist's clock port: when the design declares it as a port of its
    own (a design that builds its ``sync`` domain itself, e.g. with an asynchronous reset), the
    testbench toggles that port; otherwise Amaranth's implicit ``sync`` domain is clocked and ``rst``
    drives its reset. Returns {output name: array of shape (cycles,)}, each value masked to the
    port's width (two's complement for signed ports).
    """
    from amaranth.hdl import ClockDomain, Module
    from amaranth.sim import Simulator

    dut = dut if dut is not None else load_design(design)
    signals = _port_signals(dut, design)
    manual_clock = clock in signals
    top = Module()
    top.submodules.dut = dut
    if not manual_clock:
        top.domains.sync = cd = ClockDomain("sync")
    drive = []
    for name, vals in inputs.items():
        if name in signals:
            drive.append((signals[name], list(vals)))
        elif name == "rst" and not manual_clock:
            drive.append((cd.rst, list(vals)))
        else:
            raise DesignElaborationError(f"the netlist's input {name!r} has no matching port on the "
                                         f"Amaranth design {design!r}")
    out_names = outputs if outputs is not None else [
        n for n, s in signals.items() if n not in inputs and n != clock]
    sampled = {n: [] for n in out_names}
    widths = {n: len(signals[n]) for n in out_names}
    # Netlist values are bit patterns; a signed Amaranth value wants the two's-complement number.
    drive = [(sig, [int(v) - ((int(v) >> (len(sig) - 1)) & 1 << len(sig)) if sig.shape().signed else int(v)
                    for v in vals]) for sig, vals in drive]

    async def testbench(ctx):
        for k in range(cycles):
            for sig, vals in drive:
                ctx.set(sig, vals[k])
            for n in out_names:
                sampled[n].append(ctx.get(signals[n]))
            if manual_clock:
                ctx.set(signals[clock], 1)
                ctx.set(signals[clock], 0)
            else:
                await ctx.tick()

    sim = Simulator(top)
    if not manual_clock:
        sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim.run()
    out = {}
    for n, vals in sampled.items():
        m = (1 << widths[n]) - 1
        dtype = object if widths[n] > 64 else np.uint64
        out[n] = np.array([int(v) & m for v in vals], dtype=dtype)
    return out
