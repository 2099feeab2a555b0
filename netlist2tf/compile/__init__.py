"""Stage 3, compiling: the netlist's cells as threshold functions (plain logic as truth tables, word-level
arithmetic as shallow macros, ROMs as lookups), scheduled onto the layers of a target geometry, and the
model planned: residual channels, FFN neurons, DeltaNet memories, and the trace protocol (the tokens a
clock cycle is written in)."""

from netlist2tf.common.lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'divider': ('fits',),
    'economy': ('FrameCost', 'Search', 'frame_cost', 'frame_lengths', 'protocol_of', 'simulate'),
    'macros': ('DIV_CELLS', 'expand'),
    'plan': ('ROM_WAYS', 'ModelPlan', 'memory_capacity_slots', 'plan_model', 'reachable_banks',
             'resolve_groups', 'standalone_layer_types', 'trace_protocol'),
    'protocol': ('Field', 'IN', 'KINDS', 'MA', 'MD', 'OUT', 'REG', 'TraceError', 'TraceProtocol'),
    'rom': ('FLAT_MAX_WORDS', 'rom_shape', 'rom_words'),
    'schedule': ('Schedule', 'unit_cost'),
    'settings': ('CompileSettings',),
    'target': ('FULL', 'LINEAR', 'Target', 'dense_breakdown', 'geometries', 'geometry_path'),
})
