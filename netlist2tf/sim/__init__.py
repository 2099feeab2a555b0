"""Stage 2, the golden model: a cycle-accurate simulator of the netlist (stimulus from a seed or a file,
traces) and its waveforms as VCD. Every compiled checkpoint is checked against it."""

from netlist2tf.common.lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'simulator': ('FileStimulus', 'RandomStimulus', 'Simulator', 'TableStimulus', 'Trace'),
    'waveform': ('VCDStream',),
})
