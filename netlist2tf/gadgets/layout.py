"""The residual-stream layout that makes every decoder RMSNorm an exact identity.

Qwen3.5's decoder RMSNorm computes ``x * rsqrt(mean(x**2) + 1e-6) * (1 + w)`` in float32 over the
whole hidden vector. The compiled model keeps ``mean(x**2)`` at exactly ``SCALE**2`` (64) on every
active position, so the norm multiplies by exactly ``1/SCALE`` and a norm weight of ``SCALE - 1``
(7) makes it the identity, in float32 and bfloat16 alike (1/8 and 8 are powers of two: exact):

* channel ``one`` holds the constant 1 (it also carries every neuron's bias and gates every gadget:
  on a position where it is 0, e.g. a text token of a merged model, the gadgets add nothing);
* every bit lives in a *pair* of channels ``(b, 1 - b)``, whose squares always sum to 1, whatever b
  is. A gadget's output pair starts at ``(0, 1)`` (the embedding puts it there) and the gadget adds
  ``(+b, -b)``; so writing a bit never changes ``sum(x**2)``;
* a few *anchor* channels hold integer constants (< 128, exact in bfloat16) chosen so that
  ``sum(x**2) == SCALE**2 * hidden_size`` exactly (all partial sums are integers < 2**24, exact in
  float32; the mean is then exactly 64, 64 + 1e-6 rounds back to 64 in float32, and rsqrt(64) is 1/8).

Free channels are 0. The same layout holds on every trace position of every layer, which is what the
verifier checks.

A *signed* layout (``signed=True``, what a checkpoint holds by default: ``netlist2tf.weights.signed``) keeps
each bit in ONE channel, ``s = 2b - 1`` (+-1): ``s**2`` is 1 whatever b is, so the same anchors keep
``sum(x**2) == SCALE**2 * hidden_size`` with half the channels. The compiler plans in pairs (every
gadget reads and writes ``(b, 1 - b)``) and ``signed.fold_state`` rewrites the weights: on an active
position ``b == (one + s) / 2`` and ``1 - b == (one - s) / 2`` exactly.
"""

import functools
from dataclasses import dataclass

from netlist2tf.common import Netlist2TFError

SCALE = 8                  # rsqrt(mean(x**2)) == 1/SCALE
NORM_WEIGHT = SCALE - 1    # the decoder RMSNorm multiplies by (1 + weight)
ANCHOR_MAX = 127


def _four_squares(n: int) -> tuple[int, ...] | None:
    """Integers a_i <= ANCHOR_MAX, at most four, with sum(a_i**2) == n; None if there are none."""
    limit = min(ANCHOR_MAX, int(n ** 0.5))
    for a in range(limit, -1, -1):
        r1 = n - a * a
        for b in range(min(a, int(r1 ** 0.5)), -1, -1):
            r2 = r1 - b * b
            for c in range(min(b, int(r2 ** 0.5)), -1, -1):
                r3 = r2 - c * c
                d = int(round(r3 ** 0.5))
                if d <= c and d * d == r3:
                    return tuple(v for v in (a, b, c, d) if v)
    return None


@dataclass(frozen=True, slots=True)
class ResidualLayout:
    """Channel assignment of the residual stream: ``one``, ``n_pairs`` bit pairs from
    ``first_pair``, then the anchors. ``pair(i)`` gives pair i's (b, 1-b) channel indices. With
    ``signed``, bit i is the one channel ``bit(i)`` holding 2b - 1 (``pair`` is then refused)."""
    hidden_size: int
    n_pairs: int
    one: int
    first_pair: int
    anchors: tuple[tuple[int, int], ...]    # (channel, value)
    signed: bool = False

    @property
    def width(self) -> int:
        """Channels per bit: 2 (a pair) or 1 (signed)."""
        return 1 if self.signed else 2

    @staticmethod
    def channels_needed(n_bits: int, signed: bool = False) -> int:
        """The hidden size a standalone model takes for ``n_bits`` bits: the constant, the bits, room
        for the anchors, a multiple of 8."""
        hidden = 1 + (1 if signed else 2) * n_bits
        hidden += 8 + (64 * hidden) // (127 * 127)
        return (hidden + 7) // 8 * 8

    @staticmethod
    def build(hidden_size: int, n_pairs: int, signed: bool = False) -> "ResidualLayout":
        """A layout with ``n_pairs`` bits (pairs, or single signed channels) in ``hidden_size`` channels.

        Raises Netlist2TFError if the bits, the constant and the anchors do not fit.
        """
        width = 1 if signed else 2
        remainder = SCALE * SCALE * hidden_size - n_pairs - 1
        anchors = []
        while remainder >= 3 * ANCHOR_MAX ** 2:
            anchors.append(ANCHOR_MAX)
            remainder -= ANCHOR_MAX * ANCHOR_MAX
        while True:
            # Near the top of the range a number may need a square above 127**2; every number
            # below 127**2 is a sum of four smaller squares (Lagrange), so this ends.
            rest = _four_squares(remainder) if remainder >= 0 else ()
            if rest is not None:
                break
            anchors.append(ANCHOR_MAX)
            remainder -= ANCHOR_MAX * ANCHOR_MAX
        anchors += rest
        used = 1 + width * n_pairs + len(anchors)
        if remainder < 0 or used > hidden_size:
            raise Netlist2TFError(
                f"{n_pairs} bit{' pair' if width == 2 else ''}s need {used} residual channels with the constant and "
                f"{len(anchors)} anchors, but the hidden size is {hidden_size}; raise the hidden size "
                f"to at least {used} (or reuse channels of dead signals)")
        first_anchor = 1 + width * n_pairs
        return ResidualLayout(hidden_size, n_pairs, 0, 1,
                              tuple((first_anchor + k, v) for k, v in enumerate(anchors)), signed)

    def pair(self, i: int) -> tuple[int, int]:
        if self.signed:
            raise AssertionError("a signed layout has no pairs: use bit(i)")
        if not 0 <= i < self.n_pairs:
            raise IndexError(f"pair {i} outside the layout's {self.n_pairs} pairs")
        return self.first_pair + 2 * i, self.first_pair + 2 * i + 1

    def bit(self, i: int) -> int:
        """The channel that holds bit i: its pair's b channel, or its signed channel."""
        if not 0 <= i < self.n_pairs:
            raise IndexError(f"bit {i} outside the layout's {self.n_pairs} bits")
        return self.first_pair + self.width * i

    def initial_rows(self, rows):
        """``initial(bits)`` for each ``bits`` of ``rows`` at once: a (len(rows), hidden) float32 tensor
        (the embedding of a vocabulary: ``initial_rows_array`` as a tensor)."""
        import torch

        return torch.from_numpy(self.initial_rows_array(rows))

    def initial_rows_array(self, rows):
        """``initial_rows`` as a numpy array (one Python loop over the bits, no operation per row)."""
        import numpy as np

        out = np.repeat(_base_array(self)[None, :], len(rows), axis=0)
        toks = [t for t, bits in enumerate(rows) if bits for _ in bits]
        index = [i for bits in rows if bits for i in bits]
        if not toks:
            return out
        bad = next((i for i in index if not 0 <= i < self.n_pairs), None)
        if bad is not None:
            raise IndexError(f"{'bit' if self.signed else 'pair'} {bad} outside the layout's {self.n_pairs} "
                             f"{'bits' if self.signed else 'pairs'}")
        b = np.asarray([float(v) for bits in rows if bits for v in bits.values()], dtype=np.float32)
        t = np.asarray(toks, dtype=np.int64)
        channel = self.first_pair + self.width * np.asarray(index, dtype=np.int64)
        if self.signed:
            out[t, channel] = 2 * b - 1
        else:
            out[t, channel], out[t, channel + 1] = b, 1 - b
        return out

    def initial(self, bits=None, dtype=None):
        """The residual vector of an active position (a float32 tensor, or ``dtype``): constant,
        anchors, every pair (0, 1), except the pairs given in ``bits`` ({pair index: bit}), which
        hold (b, 1 - b)."""
        import torch

        x = torch.from_numpy(_base_array(self).copy())
        if bits:
            index = torch.tensor(list(bits), dtype=torch.long)
            if int(index.min()) < 0 or int(index.max()) >= self.n_pairs:
                bad = next(i for i in bits if not 0 <= i < self.n_pairs)
                raise IndexError(f"{'bit' if self.signed else 'pair'} {bad} outside the layout's {self.n_pairs} "
                                 f"{'bits' if self.signed else 'pairs'}")
            b = torch.tensor([float(v) for v in bits.values()], dtype=torch.float32)
            channel = self.first_pair + self.width * index
            if self.signed:
                x[channel] = 2 * b - 1
            else:
                x[channel], x[channel + 1] = b, 1 - b
        return x if dtype is None else x.to(dtype)

    def read_bits(self, x, pairs) -> list[int]:
        """The bits of ``pairs`` in the residual vector ``x``; raises Netlist2TFError if a pair is not
        exactly (0, 1) or (1, 0) (an inexact or broken computation)."""
        out = []
        for i in pairs:
            if self.signed:
                s = float(x[self.bit(i)])
                if s not in (-1.0, 1.0):
                    raise Netlist2TFError(f"residual bit {i} holds {s!r}, not +-1")
                out.append(int(s > 0))
                continue
            hi, lo = (float(x[c]) for c in self.pair(i))
            if (hi, lo) not in ((0.0, 1.0), (1.0, 0.0)):
                raise Netlist2TFError(f"residual pair {i} holds ({hi!r}, {lo!r}), not a bit")
            out.append(int(hi))
        return out


@functools.lru_cache(maxsize=16)
def _base_array(layout: ResidualLayout):
    """``layout.initial()`` without bits, as a float32 numpy array: the constant, the anchors, every
    bit 0 (made once per layout; callers copy it)."""
    import numpy as np

    x = np.zeros(layout.hidden_size, dtype=np.float32)
    x[layout.one] = 1.0
    for ch, v in layout.anchors:
        x[ch] = float(v)
    if layout.signed:
        x[layout.first_pair:layout.first_pair + layout.n_pairs] = -1.0
    else:
        x[layout.first_pair + 1:layout.first_pair + 2 * layout.n_pairs:2] = 1.0
    x.setflags(write=False)
    return x

