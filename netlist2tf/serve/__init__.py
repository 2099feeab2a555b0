"""Serving: a checkpoint in the engines people serve Qwen3.5 with. The GGUF export for llama.cpp
(``gguf``), llama.cpp as a trace model the hosts drive (``llama``), and any OpenAI-compatible server as
one (``client``)."""

from netlist2tf.common.lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'client': ('ServerError', 'ServerTrace'),
    'gguf': ('cached_gguf', 'export_gguf', 'gguf_refusal', 'token_names'),
    'llama': ('LlamaTrace', 'llama_available'),
})
