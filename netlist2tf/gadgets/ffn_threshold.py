"""FFN threshold logic: a Qwen3.5 SwiGLU MLP as a layer of exact ReLU threshold neurons.

``mlp(x) = down(silu(gate(x)) * up(x))``. For neuron j the compiler sets

    gate_j(x) = K * (sum_i w_ji * x_i + c_j * x_one)      (integer w, c; K = 128)
    up_j(x)   = x_one / K

so on an active position (``x_one == 1``, bits exact 0/1) ``silu(gate_j) * up_j == silu(K*m)/K ==
relu(m)`` EXACTLY for the integer pre-activation m: for m >= 1, ``sigmoid(128*m)`` rounds to 1.0 in
float32 (exp(-128) underflows), for m <= -1, ``sigmoid(-128*m)`` is 0 (exp(128) overflows to inf), and
silu(0) == 0 (K = 32 is not enough: silu(-32) = -4e-13). ``down`` adds integer multiples of the relu
outputs to the residual. In bfloat16 the products K*m are exact while |m| <= 256 (8 significant bits);
``configure_mlp`` checks every neuron's range for the dtype asked. On a position with ``x_one == 0``
(a text token) ``up`` is 0, so the MLP adds exactly nothing. Only the positive side of the range
is bounded: a negative pre-activation may round to a neighbouring bfloat16 value, but it stays <= -1
(rounding keeps the sign and integers up to 256 are exact), and silu of anything <= -128 is exactly 0.

Building blocks return ``Neuron`` lists:

* ``threshold_gate``: b = [sum w_i x_i >= theta] written to a pair as (+b, -b): two neurons
  (relu(m) - relu(m - 1) with m = sum - theta + 1), one when the sum cannot exceed theta;
* ``boolean_function``: any k-input function as one neuron per true minterm (each is 1 exactly on
  its input pattern and <= 0 elsewhere, so they sum to the function).
"""

from dataclasses import dataclass

from netlist2tf.common import Netlist2TFError

K = 128
BF16_LIMIT = 256          # largest positive pre-activation that is exact in a bfloat16 gate
FP32_LIMIT = 1 << 16      # K * m stays below 2**23: exact float32 integers


@dataclass(frozen=True, slots=True)
class Neuron:
    """relu(sum(w * x[ch] for ch, w in inputs) + bias), added to the residual as
    ``x[ch] += w * relu(...)`` for ``outputs``. Inputs are bit channels (0 or 1)."""
    inputs: tuple[tuple[int, int], ...]
    bias: int
    outputs: tuple[tuple[int, int], ...]

    def preactivation_range(self) -> tuple[int, int]:
        """Smallest and largest pre-activation over all 0/1 inputs."""
        lo = self.bias + sum(w for _, w in self.inputs if w < 0)
        hi = self.bias + sum(w for _, w in self.inputs if w > 0)
        return lo, hi


def threshold_gate(inputs, theta: int, out_pair: tuple[int, int]) -> list[Neuron]:
    """Neurons writing b = [sum(w * x) >= theta] to ``out_pair`` as (+b, -b)."""
    inputs = tuple((int(c), int(w)) for c, w in inputs)
    plus, minus = out_pair
    outs = ((plus, 1), (minus, -1))
    first = Neuron(inputs, 1 - theta, outs)            # relu(m), m = sum - theta + 1
    lo, hi = first.preactivation_range()
    if hi <= 0:                                       # never true: write nothing
        return []
    if lo >= 1:                                       # always true: relu(m) - relu(m - 1) == 1
        return [Neuron((), 1, outs)]
    if hi == 1:                                       # relu(m) is already the bit
        return [first]
    return [first, Neuron(inputs, -theta, ((plus, -1), (minus, 1)))]


def merge_neurons(neurons) -> list[Neuron]:
    """``neurons`` with those of equal inputs and bias as one neuron writing all their outputs (the
    same ReLU value, added to each output channel with the weights summed; exact). Outputs that
    cancel are dropped, and a neuron left with none. A macro's counter bits (``macros.expand_mul``)
    all read the same sums ``relu(V - u)``: an h-input counter is h + 1 neurons for every bit of
    its count instead of ~3h. Order: each merged neuron where its first copy was."""
    merged: dict = {}
    for n in neurons:
        key = (tuple(sorted(n.inputs)), n.bias)
        outs = merged.setdefault(key, {})
        for ch, w in n.outputs:
            outs[ch] = outs.get(ch, 0) + w
    return [Neuron(ins, bias, tuple((ch, w) for ch, w in outs.items() if w))
            for (ins, bias), outs in merged.items() if any(outs.values())]


def boolean_function(input_pairs, truth_table: int, out_pair: tuple[int, int]) -> list[Neuron]:
    """Neurons computing f(bits) for ``input_pairs`` [(b channel, 1-b channel), ...] where bit j of
    ``truth_table`` is f at the input pattern j (input 0 = least significant)."""
    k = len(input_pairs)
    if truth_table >> (1 << k):
        raise ValueError(f"truth table {truth_table:#x} has more than 2**{k} entries")
    neurons = []
    for pattern in range(1 << k):
        if (truth_table >> pattern) & 1:
            # sum of the literals that must be 1 is k exactly on this pattern; bias -(k - 1).
            ins = tuple((pair[0] if (pattern >> j) & 1 else pair[1], 1) for j, pair in enumerate(input_pairs))
            neurons.append(Neuron(ins, -(k - 1), ((out_pair[0], 1), (out_pair[1], -1))))
    return neurons


def configure_mlp(mlp, neurons, one: int, dtype=None, first: int = 0, zeroed: bool = False) -> int:
    """Write ``neurons`` into rows ``first``.. of a ``Qwen3_5MLP`` (or its ``gadgets.arrays.MlpArrays``);
    zero the rest of those rows (``zeroed``: they are zero already, a fresh state's arrays: not
    written again).

    Returns the next free row. Raises Netlist2TFError when the neurons do not fit in the MLP's
    intermediate size or a pre-activation leaves the range that is exact in ``dtype`` (a torch dtype
    or its name; bfloat16 or else float32).
    """
    import numpy as np

    from netlist2tf.gadgets.arrays import mlp_arrays

    n = len(neurons)
    with mlp_arrays(mlp) as m:
        entries = mlp_entries(neurons, one, m.gate.shape[0], dtype, first)
        if not zeroed:
            m.gate[first:first + n] = 0
            m.up[first:first + n] = 0
            m.down[:, first:first + n] = 0
        # each (row, channel) entry the sum of its terms (small integers times K: exact in any order)
        for w, (rows, cols, vals) in zip((m.gate, m.up, m.down), entries):
            if rows.size:
                np.add.at(w, (rows, cols), vals.astype(w.dtype))
    return first + n


def mlp_entries(neurons, one: int, size: int, dtype=None, first: int = 0):
    """The terms ``configure_mlp`` adds into the gate, up and down projections for ``neurons`` from
    row ``first`` of an MLP of ``size`` rows: for each, (rows, columns, values) as numpy arrays (an
    entry named twice is the sum of its terms). Raises Netlist2TFError as ``configure_mlp`` does."""
    import numpy as np

    n = len(neurons)
    bf16 = str(dtype).split(".")[-1] == "bfloat16"
    limit = BF16_LIMIT if bf16 else FP32_LIMIT
    if first + n > size:
        raise Netlist2TFError(f"{first + n} FFN neurons needed but the layer has {size} "
                              f"(intermediate_size); raise it or spread the logic over more layers")
    # the largest pre-activation of each neuron: its bias and its positive weights (integers: exact
    # in float64), checked for all at once
    ins = [(*neuron.inputs, (one, neuron.bias)) for neuron in neurons]
    g_rows = np.asarray([j for j, terms in enumerate(ins, start=first) for _ in terms], dtype=np.int64)
    g_cols = np.asarray([ch for terms in ins for ch, _ in terms], dtype=np.int64)
    weights = np.asarray([w for terms in ins for _, w in terms], dtype=np.float64)
    if n:
        is_bias = np.zeros(len(weights), dtype=bool)
        is_bias[np.cumsum([len(terms) for terms in ins]) - 1] = True
        top = np.bincount(g_rows - first, weights=np.where(is_bias | (weights > 0), weights, 0), minlength=n)
        over = np.flatnonzero(top > limit)
        if over.size:
            j = int(over[0])
            lo, hi = neurons[j].preactivation_range()
            raise Netlist2TFError(f"neuron {first + j}: pre-activation range [{lo}, {hi}] is not exact in "
                                  f"{'bfloat16' if bf16 else 'float32'} (limit {limit}); split the gate")
    up = (np.arange(first, first + n, dtype=np.int64), np.full(n, one, dtype=np.int64),
          np.full(n, 1.0 / K))
    down = (np.asarray([ch for neuron in neurons for ch, _ in neuron.outputs], dtype=np.int64),
            np.asarray([j for j, neuron in enumerate(neurons, start=first) for _ in neuron.outputs], dtype=np.int64),
            np.asarray([w for neuron in neurons for _, w in neuron.outputs], dtype=np.float64))
    return (g_rows, g_cols, K * weights), up, down
