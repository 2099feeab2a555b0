"""The weights a gadget writes, as numpy arrays: one Qwen3.5 module's parameters by their role.

The gadgets write numpy arrays, so compiling a design needs neither torch nor transformers (their
imports alone take seconds; ``netlist2tf.weights.assemble_state`` writes a checkpoint's tensors
straight from the plan). Each gadget takes one of the views below, built on a state dict's arrays
(``of_state``), or a real transformers module, adapted by the context managers here: a float32
parameter is viewed in place (numpy shares its storage), any other dtype is copied to float32 and
written back, rounded to its dtype, when the gadget returns.

Parameter names and shapes are those of transformers' ``Qwen3_5ForCausalLM``
(``netlist2tf.weights.state_shapes``; the tests compare them with a real model's state dict).
"""

import contextlib
from dataclasses import dataclass

import numpy as np

from netlist2tf.common import Netlist2TFError


@dataclass(frozen=True)
class DeltaNetArrays:
    """A ``Qwen3_5GatedDeltaNet``'s weights: ``qkv`` (in_proj_qkv), ``z``, ``b``, ``a`` (the
    in-projections), ``out`` (out_proj), ``conv`` (conv1d, (channels, 1, kernel)), ``dt_bias``,
    ``A_log``, ``norm`` (the gated norm's weight), and its sizes."""
    qkv: np.ndarray
    z: np.ndarray
    b: np.ndarray
    a: np.ndarray
    out: np.ndarray
    conv: np.ndarray
    dt_bias: np.ndarray
    A_log: np.ndarray
    norm: np.ndarray
    hidden_size: int
    head_k_dim: int
    head_v_dim: int
    num_k_heads: int
    num_v_heads: int
    conv_kernel_size: int
    norm_eps: float

    @property
    def key_dim(self) -> int:
        return self.num_k_heads * self.head_k_dim

    @classmethod
    def of_state(cls, state: dict, prefix: str, target) -> "DeltaNetArrays":
        """The mixer whose parameters are ``state[prefix + name]`` (``prefix``:
        ``model.layers.{i}.linear_attn.``), sized by ``target`` (a ``compile.Target``)."""
        p = lambda name: state[prefix + name]       # noqa: E731
        return cls(p("in_proj_qkv.weight"), p("in_proj_z.weight"), p("in_proj_b.weight"),
                   p("in_proj_a.weight"), p("out_proj.weight"), p("conv1d.weight"), p("dt_bias"),
                   p("A_log"), p("norm.weight"), target.hidden_size, target.linear_key_head_dim,
                   target.linear_value_head_dim, target.linear_num_key_heads, target.linear_num_value_heads,
                   target.linear_conv_kernel_dim, target.rms_norm_eps)


@dataclass(frozen=True)
class MlpArrays:
    """A ``Qwen3_5MLP``'s weights: gate_proj, up_proj (intermediate x hidden), down_proj."""
    gate: np.ndarray
    up: np.ndarray
    down: np.ndarray

    @classmethod
    def of_state(cls, state: dict, prefix: str) -> "MlpArrays":
        return cls(state[prefix + "gate_proj.weight"], state[prefix + "up_proj.weight"],
                   state[prefix + "down_proj.weight"])


@dataclass(frozen=True)
class AttentionArrays:
    """A ``Qwen3_5Attention``'s weights: q_proj (each head's query rows, then its output gate's),
    k_proj, v_proj, o_proj, q_norm, k_norm, and its sizes."""
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    o: np.ndarray
    q_norm: np.ndarray
    k_norm: np.ndarray
    num_heads: int
    num_kv_heads: int
    head_dim: int

    @classmethod
    def of_state(cls, state: dict, prefix: str, target) -> "AttentionArrays":
        p = lambda name: state[prefix + name]       # noqa: E731
        return cls(p("q_proj.weight"), p("k_proj.weight"), p("v_proj.weight"), p("o_proj.weight"),
                   p("q_norm.weight"), p("k_norm.weight"), target.num_attention_heads,
                   target.num_key_value_heads, target.head_dim)


@contextlib.contextmanager
def _params(named: dict):
    """{name: numpy array} of the torch parameters ``named`` for writing in place: float32 ones
    viewed, the others copied and written back on leaving."""
    import torch

    arrays, back = {}, []
    for name, p in named.items():
        t = p.detach()
        if t.dtype == torch.float32 and t.is_contiguous():
            arrays[name] = t.numpy()
        else:
            arrays[name] = t.float().numpy().copy()
            back.append((p, arrays[name]))
    try:
        yield arrays
    finally:
        with torch.no_grad():
            for p, a in back:
                p.copy_(torch.from_numpy(a).to(p.dtype))


@contextlib.contextmanager
def deltanet_arrays(module):
    """``module`` as a ``DeltaNetArrays`` (itself if it is one; a transformers
    ``Qwen3_5GatedDeltaNet`` adapted: see the module docstring)."""
    if isinstance(module, DeltaNetArrays):
        yield module
        return
    if type(module).__name__ != "Qwen3_5GatedDeltaNet":
        raise Netlist2TFError(f"the memory gadget needs a Qwen3_5GatedDeltaNet, got {type(module).__name__}")
    if module.conv1d.bias is not None:
        raise Netlist2TFError("the DeltaNet conv1d has a bias; the memory gadget needs none")
    if module.activation != "silu":
        raise Netlist2TFError(f"the DeltaNet activation is {module.activation!r}; the gadget needs silu")
    named = {"qkv": module.in_proj_qkv.weight, "z": module.in_proj_z.weight, "b": module.in_proj_b.weight,
             "a": module.in_proj_a.weight, "out": module.out_proj.weight, "conv": module.conv1d.weight,
             "dt_bias": module.dt_bias, "A_log": module.A_log, "norm": module.norm.weight}
    with _params(named) as a:
        yield DeltaNetArrays(**a, hidden_size=module.hidden_size, head_k_dim=module.head_k_dim,
                             head_v_dim=module.head_v_dim, num_k_heads=module.num_k_heads,
                             num_v_heads=module.num_v_heads, conv_kernel_size=module.conv_kernel_size,
                             norm_eps=module.norm.variance_epsilon)


@contextlib.contextmanager
def mlp_arrays(module):
    """``module`` (a ``MlpArrays`` or a transformers ``Qwen3_5MLP``) as a ``MlpArrays``."""
    if isinstance(module, MlpArrays):
        yield module
        return
    with _params({"gate": module.gate_proj.weight, "up": module.up_proj.weight,
                  "down": module.down_proj.weight}) as a:
        yield MlpArrays(**a)


@contextlib.contextmanager
def attention_arrays(module):
    """``module`` (an ``AttentionArrays`` or a transformers ``Qwen3_5Attention``) as an
    ``AttentionArrays``."""
    if isinstance(module, AttentionArrays):
        yield module
        return
    cfg = module.config
    with _params({"q": module.q_proj.weight, "k": module.k_proj.weight, "v": module.v_proj.weight,
                  "o": module.o_proj.weight, "q_norm": module.q_norm.weight,
                  "k_norm": module.k_norm.weight}) as a:
        yield AttentionArrays(**a, num_heads=cfg.num_attention_heads, num_kv_heads=cfg.num_key_value_heads,
                              head_dim=module.head_dim)
