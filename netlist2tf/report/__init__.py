"""The layer-assignment report: where every netlist cell, register and memory went (layer, neurons,
channels, heads), traced to its HDL signal and source line, with measured margins; as JSON (checked
against its schema), an HTML page, and a comparison with the previous build."""

from netlist2tf.common.lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'build': ('build_report', 'write_report'),
    'compare': ('attach_comparison', 'old_report'),
})
