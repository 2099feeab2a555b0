"""Example Amaranth designs used to exercise netlist2tf.

Each entry of :data:`EXAMPLES` is a design spec of the form ``"module.path:ClassName"``.
Every class is an :class:`amaranth.lib.wiring.Component` whose constructor arguments all
have defaults (so ``ClassName()`` works), and every design uses only the default ``sync``
clock domain (positive-edge clock, synchronous reset; Amaranth adds ``clk`` and ``rst``).
"""

EXAMPLES = (
    "hdl.examples.counter:Counter",
    "hdl.examples.alu:ALU",
    "hdl.examples.fifo:FIFO",
    "hdl.examples.lfsr:LFSR",
    "hdl.examples.multiplier:PipelinedMultiplier",
    "hdl.examples.regfile:RegisterFile",
)
