"""Gadgets: the exact building blocks the compiler lowers a schedule into, each filling the weights
of one real transformers module or its numpy arrays (``arrays``) (``ffn_threshold``: FFN neurons; ``deltanet_memory``: DeltaNet
memories; ``attention_lookup``: attention lookups; ``rom_lookup``: a ROM as attention lookups over the
prompt) on the residual layout of ``layout``."""

from netlist2tf.common.lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'arrays': ('AttentionArrays', 'DeltaNetArrays', 'MlpArrays'),
    'deltanet_memory': ('calibrate_read', 'clear_module', 'configure_memory'),
    'ffn_threshold': ('BF16_LIMIT', 'K', 'Neuron', 'boolean_function', 'configure_mlp', 'merge_neurons', 'mlp_entries',
                      'threshold_gate'),
    'layout': ('NORM_WEIGHT', 'ResidualLayout', 'SCALE'),
    'rom_lookup': ('RomLookupError', 'configure_rom_lookup', 'one_sided', 'plan_rom_lookup'),
})
