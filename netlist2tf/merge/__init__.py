"""Merging: a compiled checkpoint's layers in front of a Qwen3.5 checkpoint (text-only or multimodal)
without changing the base's weights; reading a merged checkpoint back; the embedded default base (a
small random Qwen3.5 that this package creates)."""

from netlist2tf.common.lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'base': ('default_base', 'make_base', 'make_geometry_base'),
    'merge': ('MERGED_SEALED', 'merge_checkpoints', 'merged_layout'),
    'read': ('MergedTrace', 'is_merged', 'load_merged', 'text_prefix_tokens'),
})
