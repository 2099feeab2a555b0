"""Stage 5, the checkpoint: the weights written as a Hugging Face folder that stock ``transformers`` loads
(config, safetensors, tokenizer, generation settings, the trace protocol and netlist beside them, all
sealed by sha256 in compile.json), and read back with every file checked."""

from netlist2tf.common.lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'emit': ('check_seal', 'emit_checkpoint', 'file_digest', 'load_checkpoint', 'load_hf_model', 'read_checkpoint',
             'read_meta', 'seal', 'trace_side'),
    'hf': ('token_names',),
    'weightfiles': ('INDEX', 'SINGLE', 'WeightFiles', 'checkpoint_name', 'text_name', 'write_shards'),
})
