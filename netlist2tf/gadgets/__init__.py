"""Gadgets: the exact building blocks the compiler lowers a schedule into, each filling the weights
of one real transformers module (``ffn_threshold``: FFN neurons; ``deltanet_memory``: DeltaNet
memories; ``attention_lookup``: attention lookups) on the residual layout of ``layout``."""
