"""Stage 1, the frontend: an Amaranth design (``module:Class``) or a Yosys JSON file through Yosys into
a netlist (the synthesis flows, word-level cells kept for the macros, multiply-add fusion, memories
with several write ports split), and Amaranth's own simulator as a reference."""

from netlist2tf.common.lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'reference': ('run_amaranth',),
    'synth': ('synthesize',),
})
