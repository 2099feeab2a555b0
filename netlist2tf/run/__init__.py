"""Running a checkpoint: the one opener (standalone or merged; the fast executor or stock transformers),
the trace host that feeds inputs and reads outputs cycle by cycle, the check against the simulator
(token by token or teacher-forced), and the fast executor (the same weights computed sparsely in C)."""

from netlist2tf.common.lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'executor': ('FastInexact', 'FastUnsupported'),
    'host': ('Frame', 'RunStopped', 'run_model'),
    'opener': ('fast_trace', 'load_fast_checkpoint', 'open_checkpoint'),
    'verify': ('expected_tokens', 'memory_needed', 'verify_model', 'verify_teacher_forced'),
})
