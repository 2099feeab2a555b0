"""Pipelined signed/unsigned multiplier built from half-width partial products."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


__all__ = ["PipelinedMultiplier"]


class PipelinedMultiplier(wiring.Component):
    """Pipelined ``width`` x ``width`` -> ``2*width`` multiplier with a signed mode.

    Each operand is first extended to a ``width + 1``-bit signed value (sign-extended when
    ``signed_mode`` is high, zero-extended otherwise), then split into an unsigned low half
    ``L`` (``width // 2`` bits) and a signed high part ``H``, so that
    ``a * b = Ha*Hb << 2h  +  (Ha*Lb + La*Hb) << h  +  La*Lb`` (``h = width // 2``).
    The low ``2*width`` bits of that sum are the product in both modes.

    The computation is three steps:

    1. the four partial products ``La*Lb``, ``La*Hb``, ``Ha*Lb``, ``Ha*Hb``;
    2. the cross sum ``La*Hb + Ha*Lb``;
    3. the final shifted sum, truncated to ``2*width`` bits.

    With ``stages >= 3`` a register follows each step and ``stages - 3`` extra output registers
    are added; with ``stages == 2`` steps 2 and 3 share one stage; with ``stages == 1`` the
    whole product is computed combinationally into one register. Either way ``p`` (and
    ``valid_out``) appear exactly ``stages`` clock cycles after ``a``/``b``/``signed_mode``
    (and ``valid_in``) were presented. Reset clears ``valid_out`` and all pipeline registers.

    ``width`` must be in 2..31 (so every intermediate value is at most 64 bits).

    Ports
    -----
    a, b : In(width)
        Operands (unsigned bits; interpreted as two's complement when ``signed_mode``).
    valid_in : In(1)
        Marks the operands as valid; delayed alongside the data.
    signed_mode : In(1)
        1: multiply ``a`` and ``b`` as signed; 0: as unsigned.
    p : Out(2 * width)
        Product bits (two's complement in signed mode), ``stages`` cycles later.
    valid_out : Out(1)
        ``valid_in`` delayed by ``stages`` cycles.
    """

    def __init__(self, width=8, stages=3):
        if not 2 <= width <= 31:
            raise ValueError("width must be in 2..31")
        if stages < 1:
            raise ValueError("stages must be at least 1")
        self.width = width
        self.stages = stages
        super().__init__({
            "a":           In(width),
            "b":           In(width),
            "valid_in":    In(1),
            "signed_mode": In(1),
            "p":           Out(2 * width),
            "valid_out":   Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        w = self.width
        h = w // 2
        pw = 2 * w

        # Register boundaries after steps 1, 2, 3 (True = registered).
        if self.stages >= 3:
            regs = (True, True, True)
        elif self.stages == 2:
            regs = (True, False, True)
        else:
            regs = (False, False, True)

        def stage(m, value, registered, name):
            sig = Signal(value.shape(), name=name)
            if registered:
                m.d.sync += sig.eq(value)
            else:
                m.d.comb += sig.eq(value)
            return sig

        def extend(x):
            # width+1 bit signed operand: sign- or zero-extended depending on signed_mode.
            return Cat(x, Mux(self.signed_mode, x[-1], 0)).as_signed()

        a_ext = extend(self.a)
        b_ext = extend(self.b)
        la, ha = a_ext[:h], a_ext[h:].as_signed()
        lb, hb = b_ext[:h], b_ext[h:].as_signed()

        # Step 1: partial products.
        ll = stage(m, la * lb, regs[0], "pp_ll")   # unsigned(2h)
        lh = stage(m, la * hb, regs[0], "pp_lh")   # signed
        hl = stage(m, ha * lb, regs[0], "pp_hl")   # signed
        hh = stage(m, ha * hb, regs[0], "pp_hh")   # signed

        # Step 2: cross sum (ll and hh are carried along).
        cross = stage(m, lh + hl, regs[1], "cross")
        ll2 = stage(m, ll, regs[1], "pp_ll_2")
        hh2 = stage(m, hh, regs[1], "pp_hh_2")

        # Step 3: final sum modulo 2**(2*width); every term is shifted into place and
        # sign-extended or truncated to exactly 2*width bits first (Cat does not sign-extend).
        def place(value, shift):
            bits = Cat(Const(0, shift), value)
            if len(bits) < pw:
                bits = Cat(bits, value[-1].replicate(pw - len(bits)))
            return bits[:pw]

        t_hh = place(hh2, 2 * h)
        t_cross = place(cross, h)
        t_sum = (t_hh + t_cross)[:pw]
        prod = stage(m, (t_sum + ll2)[:pw], regs[2], "prod")

        valid = self.valid_in
        for i in range(sum(regs)):
            valid = stage(m, valid, True, f"valid_{i}")

        for i in range(self.stages - 3):
            prod = stage(m, prod, True, f"prod_dly_{i}")
            valid = stage(m, valid, True, f"valid_dly_{i}")

        m.d.comb += [
            self.p.eq(prod),
            self.valid_out.eq(valid),
        ]

        return m
