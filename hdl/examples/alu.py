"""Operator-coverage ALU: every Amaranth operator on unsigned, signed and mixed operands."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Shape
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


__all__ = ["ALU"]


OP_WIDTH = 5


def _alu_exprs(a, b, shamt, op):
    """Return ``{port_name: expression}`` for all per-operator outputs.

    ``a`` and ``b`` are unsigned ``width``-bit values; ``as_``/``bs`` are the same bits
    reinterpreted as signed. Called twice: once on constants (to derive port shapes) and once on
    the real ports (to build the logic), so port shapes always equal expression shapes.
    """
    width = len(a)
    half = width // 2
    as_ = a.as_signed()
    bs = b.as_signed()
    nshamt = len(shamt)
    e = {}

    # Arithmetic.
    e["add_u"] = a + b
    e["add_s"] = as_ + bs
    e["add_mix"] = a + bs                      # unsigned + signed -> signed(width + 2)
    e["sub_u"] = a - b                         # note: signed(width + 1) even for unsigned operands
    e["sub_s"] = as_ - bs
    e["mul_u"] = a * b                         # unsigned(2 * width)
    e["mul_s"] = as_ * bs                      # signed(2 * width)
    e["mul_mix"] = a * bs                      # signed(2 * width)
    e["div_u"] = a // b                        # floor division; x // 0 == 0
    e["div_s"] = as_ // bs                     # floor (rounds toward -inf); signed(width + 1)
    e["div_mix"] = a // bs
    e["mod_u"] = a % b                         # floor modulo; x % 0 == 0
    e["mod_s"] = as_ % bs                      # result has the sign of the divisor
    e["mod_mix"] = as_ % b
    e["neg_u"] = -a                            # signed(width + 1)
    e["neg_s"] = -as_                          # signed(width + 1)
    e["pos_s"] = +as_
    e["abs_u"] = abs(a)
    e["abs_s"] = abs(as_)                      # unsigned(width); abs(-2**(w-1)) == 2**(w-1)

    # Operators with a Python int on the left (__rsub__, __rmul__, __rfloordiv__, __rmod__,
    # __rlshift__, __rrshift__, __radd__, __rand__, __ror__, __rxor__).
    e["rsub"] = 5 - a
    e["rmul"] = 3 * bs
    e["rdiv"] = 200 // b
    e["rmod"] = 200 % b
    e["onehot"] = 1 << shamt                   # decoder: unsigned(2 ** len(shamt))
    e["rshr"] = 0x80 >> shamt
    e["rbit"] = Cat(1 + a[0], 1 & b[0], 0 | a[1], 1 ^ b[1])

    # Bitwise.
    e["not_u"] = ~a
    e["not_s"] = ~as_
    e["and_u"] = a & b
    e["or_u"] = a | b
    e["xor_u"] = a ^ b
    e["and_s"] = as_ & bs
    e["or_s"] = as_ | bs
    e["xor_s"] = as_ ^ bs
    e["and_mix"] = a & bs                      # signed(width + 1)
    # Value.implies() is deprecated in Amaranth 0.5 (DeprecationWarning); spell it out instead.
    e["impl"] = Cat(~a[0] | b[0], ~a[:2] | b[:2])

    # Shifts and rotates by a variable amount.
    e["shl_u"] = a << shamt                    # unsigned(width + 2**len(shamt) - 1)
    e["shl_s"] = as_ << shamt
    e["shr_u"] = a >> shamt                    # logical
    e["shr_s"] = as_ >> shamt                  # arithmetic
    # Amaranth has no variable-amount rotate; build it from Cat and >>.
    # rotr(a, s) = (a:a) >> s; rotl(a, s) = rotr(a, (-s) mod width). width is a power of two,
    # so (-s) mod width is just the low bits of -s.
    e["rotr_v"] = (Cat(a, a) >> shamt)[:width]
    e["rotl_v"] = (Cat(a, a) >> (-shamt)[:nshamt])[:width]

    # Shifts and rotates by a constant amount.
    e["sll_c"] = a.shift_left(3)
    e["srl_c"] = a.shift_right(2)
    e["sla_c"] = as_.shift_left(3)
    e["sra_c"] = as_.shift_right(2)            # arithmetic; signed(width - 2)
    e["rol_c"] = a.rotate_left(3)
    e["ror_c"] = a.rotate_right(2)
    e["rol_neg"] = a.rotate_left(-1)           # same as rotate_right(1)
    # `<<`/`>>` with an int amount is NOT shift_left/shift_right: the int becomes a constant
    # shift amount, so `a << 2` is unsigned(width + 2**2 - 1).
    e["shl_i"] = a << 2
    e["shr_i"] = as_ >> 1

    # Comparisons: (==, !=, <, <=, >, >=) packed LSB first.
    e["cmp_u"] = Cat(a == b, a != b, a < b, a <= b, a > b, a >= b)
    e["cmp_s"] = Cat(as_ == bs, as_ != bs, as_ < bs, as_ <= bs, as_ > bs, as_ >= bs)
    e["cmp_mix"] = Cat(a == bs, a != bs, a < bs, a <= bs, a > bs, a >= bs)

    # Reductions: (any, all, xor, bool) packed LSB first.
    e["red_u"] = Cat(a.any(), a.all(), a.xor(), a.bool())
    e["red_s"] = Cat(bs.any(), bs.all(), bs.xor(), bs.bool())

    # Reinterpretation.
    e["cast_s"] = a.as_signed()
    e["cast_u"] = (as_ - bs).as_unsigned()

    # Multiplexers.
    e["mux"] = Mux(op[0], a, bs)               # mixed signedness -> signed(width + 1)
    e["mux_s"] = Mux(a > b, as_, bs)
    e["arr"] = Array([a, b, ~a, a ^ b])[shamt[:2]]

    # Variable part selects. Out-of-range bits read as 0, even for a signed value (bsel_s).
    e["bsel_u"] = a.bit_select(shamt, half)
    e["bsel_s"] = as_.bit_select(shamt, half)
    e["wsel"] = Cat(a, b).word_select(shamt[:2], half)
    e["wsel_oob"] = a.word_select(shamt, 3)    # last word partial, high indices out of range

    # Concatenation, replication, slicing.
    e["cat"] = Cat(a[:half], b[half:], op[0])
    e["rep"] = Cat(a[:2].replicate(3), b[-1].replicate(2))
    e["slc"] = Cat(a[1:-1], as_[2:], b[-2:], a[-1])
    e["rev"] = a[::-1]
    e["evn"] = Cat(a[::2], b[1::2])

    # Pattern matching (don't-care bits, multiple patterns, int patterns on signed values).
    e["match"] = Cat(
        a.matches("1" + "-" * (width - 2) + "0"),
        op.matches(0, 3, "1-1-0"),
        bs.matches(-1, -2),
        b.matches("-" * (width - 1) + "1", "0" * width),
    )
    return e


class ALU(wiring.Component):
    """Operator-coverage ALU (mostly combinational, with one registered output).

    Every operator Amaranth offers is applied to the inputs and exposed on its own output port:
    ``*_u`` ports use ``a``/``b`` as unsigned, ``*_s`` ports use them reinterpreted as signed
    (``a.as_signed()``), and ``*_mix`` ports mix an unsigned with a signed operand. Each port's
    shape is exactly the shape Amaranth infers for its expression (see ``_alu_exprs``).

    ``width`` must be a power of two between 4 and 32; the shift amount is ``log2(width)`` bits.

    Inputs
    ------
    a, b : In(width)
        Operands.
    shamt : In(log2(width))
        Variable shift/rotate amount, also the variable offset for ``bit_select``/
        ``word_select`` and the index into an ``Array``.
    op : In(5)
        Operation selector for ``result``/``acc``.

    Outputs (besides the per-operator ports)
    -------------------------------------------
    result : Out(2 * width)
        Combinational: ``m.Switch(op)`` selects one of the per-operator results (signed results
        are sign-extended). op: 0 add_u, 1 add_s, 2 sub_u, 3 sub_s, 4 mul_u, 5 mul_s, 6 div_u,
        7 div_s, 8 mod_u, 9 mod_s, 10 neg_s, 11 not_u, 12 and_u, 13 or_u, 14 xor_u, 15 shl_u,
        16 shr_u, 17 shr_s, 18 rotl_v, 19 rotr_v, 20/21 Cat(cmp_u, cmp_s), 22 abs_s,
        31 zero; 24-30 (pattern ``11---``): odd -> Cat(bsel_u, wsel, rev), even -> Cat(arr, rep);
        anything else (23) -> Default: Cat(rol_c, sra_c).
    acc : Out(2 * width)
        Registered (``sync``): loads ``result`` every cycle, except when ``op == 31`` where it
        holds; cleared by reset.

    Per-operator outputs: add_u add_s add_mix sub_u sub_s mul_u mul_s mul_mix div_u div_s
    div_mix mod_u mod_s mod_mix neg_u neg_s pos_s abs_u abs_s rsub rmul rdiv rmod onehot rshr
    rbit not_u not_s and_u or_u xor_u and_s or_s xor_s and_mix impl shl_u shl_s shr_u shr_s
    rotr_v rotl_v sll_c srl_c sla_c sra_c rol_c ror_c rol_neg shl_i shr_i cmp_u cmp_s cmp_mix
    red_u red_s cast_s cast_u mux mux_s arr bsel_u bsel_s wsel wsel_oob cat rep slc rev evn
    match. Comparisons are packed LSB-first as (==, !=, <, <=, >, >=); reductions as
    (any, all, xor, bool).
    """

    def __init__(self, width=8):
        if width < 4 or width > 32 or width & (width - 1):
            raise ValueError("width must be a power of two between 4 and 32")
        self.width = width
        self.shamt_width = (width - 1).bit_length()
        shapes = {
            name: Shape.cast(expr.shape())
            for name, expr in _alu_exprs(Const(0, width), Const(0, width),
                                         Const(0, self.shamt_width), Const(0, OP_WIDTH)).items()
        }
        self._out_names = tuple(shapes)
        members = {
            "a":     In(width),
            "b":     In(width),
            "shamt": In(self.shamt_width),
            "op":    In(OP_WIDTH),
        }
        members.update({name: Out(shape) for name, shape in shapes.items()})
        members["result"] = Out(2 * width)
        members["acc"] = Out(2 * width)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()

        exprs = _alu_exprs(self.a, self.b, self.shamt, self.op)
        for name in self._out_names:
            m.d.comb += getattr(self, name).eq(exprs[name])

        res = self.result
        with m.Switch(self.op):
            for code, name in enumerate(["add_u", "add_s", "sub_u", "sub_s", "mul_u", "mul_s",
                                         "div_u", "div_s", "mod_u", "mod_s", "neg_s", "not_u",
                                         "and_u", "or_u", "xor_u", "shl_u", "shr_u", "shr_s",
                                         "rotl_v", "rotr_v"]):
                with m.Case(code):
                    m.d.comb += res.eq(getattr(self, name))
            with m.Case(20, 21):
                m.d.comb += res.eq(Cat(self.cmp_u, self.cmp_s))
            with m.Case(22):
                m.d.comb += res.eq(self.abs_s)
            with m.Case(31):                        # must precede the overlapping "11---"
                m.d.comb += res.eq(0)
            with m.Case("11---"):
                with m.If(self.op[0]):
                    m.d.comb += res.eq(Cat(self.bsel_u, self.wsel, self.rev))
                with m.Else():
                    m.d.comb += res.eq(Cat(self.arr, self.rep))
            with m.Default():
                m.d.comb += res.eq(Cat(self.rol_c, self.sra_c))

        with m.If(self.op != 31):
            m.d.sync += self.acc.eq(res)

        return m
