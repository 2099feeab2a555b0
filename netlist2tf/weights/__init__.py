"""Stage 4, weights: a ``ModelPlan`` written into a Qwen3.5 model's tensors with the gadgets (FFN
threshold neurons, DeltaNet memories, the residual layout), and the signed one-channel-per-bit form."""

from netlist2tf.common.lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'assemble': ('Compiled', 'assemble_state', 'model_of', 'state_shapes', 'write_weights'),
    'signed': ('LM_HEAD', 'READERS', 'bits_layout_of', 'unfold_state'),
})
