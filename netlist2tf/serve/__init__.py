"""Serving: a checkpoint in the engines people serve Qwen3.5 with. The GGUF export for llama.cpp
(``gguf``), llama.cpp as a trace model the hosts drive (``llama``)."""

from netlist2tf.common.lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'gguf': ('cached_gguf', 'export_gguf', 'gguf_refusal'),
    'llama': ('LlamaTrace', 'llama_available'),
})
