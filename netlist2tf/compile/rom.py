"""Read-only memories (lookup tables) as FFN logic: a ROM read port is a function of its address bits.

A memory with no write port (Amaranth's ``Memory(init=...)`` with only read ports, or a large
``m.Switch`` of constants that Yosys's ``proc_rom`` turns into one) holds nothing that changes, so it
needs no DeltaNet state: each of its read ports is a combinational function of the address, computed
by the FFN of the layer where the address is ready (a synchronous read port is a register after the
asynchronous read: the LUT flows' ``memory_nordff``). Two shapes, the cheaper chosen per port:

* **flat** (one FFN layer): a decoder neuron per address value that some data bit needs,
  ``[addr == a] = relu(sum of the address literals matching a - (k - 1))`` (0 or 1, one ReLU), and
  data bit j the sum of the decoders of the words whose bit j is 1 (or 1 minus those whose bit j is
  0, when fewer): the down-projection writes every bit from the shared decoders. Neurons: the address
  values used, at most 2**k for k address bits.
* **split** (two layers): the address cut into a low and a high half, a one-hot decoder of each
  (2**l + 2**h neurons, their outputs internal nets), then data bit j as
  ``sum_u [hi == u and lo in S(u, j)]`` (one ReLU per high value and data bit, ``S`` the low
  values whose word has bit j set). Chosen when the flat decoder would need more than
  ``FLAT_MAX_WORDS`` neurons: 2**l + 2**h + 2**h * width grows as the square root of the size.

Every pre-activation is at most 1 (exact in bfloat16). The read semantics are the simulator's: the
word at ``addr - offset``, 0 outside the memory, an ``x`` address bit as 0.
"""

from netlist2tf.netlist import CONST0, CONST1, CONSTX, Memory
from netlist2tf.compile.builder import Builder, Step, ThresholdFunction

#: The largest flat decoder (neurons in one layer); beyond it a read port is split.
FLAT_MAX_WORDS = 2048


class _Name:
    """What ``Builder`` needs of a cell: a name for the internal nets."""

    def __init__(self, name: str):
        self.name = name


def rom_words(mem: Memory, port: int) -> tuple[list[int], list[int]]:
    """(the address bits that vary, the word read for each of their 2**k values): the port's
    constant address bits fixed, out-of-range addresses 0."""
    addr = mem.read_ports[port].addr
    var = [i for i, n in enumerate(addr) if n not in (CONST0, CONST1, CONSTX)]
    fixed = sum(1 << i for i, n in enumerate(addr) if n == CONST1)
    words = []
    for v in range(1 << len(var)):
        a = fixed | sum(((v >> j) & 1) << i for j, i in enumerate(var))
        idx = a - mem.offset
        words.append(mem.init[idx] if 0 <= idx < mem.size else 0)
    return var, words


def rom_shape(mem: Memory, port: int) -> str:
    """``flat`` or ``split`` (see the module docstring), what ``expand_rom`` builds for the port."""
    k = sum(n not in (CONST0, CONST1, CONSTX) for n in mem.read_ports[port].addr)
    return "flat" if (1 << k) <= FLAT_MAX_WORDS else "split"


def _minterm(b: Builder, lits, value: int):
    """``[lits == value]``: every literal matching its bit of ``value`` (one ReLU)."""
    return b.step([(n, not (value >> j) & 1, 1) for j, n in enumerate(lits)], len(lits))


def expand_rom(mem: Memory, port: int, next_net: int) -> tuple[list[ThresholdFunction], dict, int]:
    """The threshold functions of ROM read port ``port`` (its data bits, in dependency order),
    {internal net: name}, the next free net."""
    rp = mem.read_ports[port]
    var, words = rom_words(mem, port)
    lits = [rp.addr[i] for i in var]
    b = Builder(next_net, _Name(f"{mem.name}.rd{port}"))
    width = len(rp.data)
    if rom_shape(mem, port) == "flat":
        for j, out in enumerate(rp.data):
            ones = [v for v, w in enumerate(words) if (w >> j) & 1]
            zeros = [v for v, w in enumerate(words) if not (w >> j) & 1]
            if len(ones) <= len(zeros) + 1:
                steps = [_minterm(b, lits, v) for v in ones]
            else:                              # 1 - the decoders of the words with a 0 there
                steps = [b.step((), 0)] + [_negated(_minterm(b, lits, v)) for v in zeros]
            b.emit(out, steps)
        return b.functions, b.names, b.next_net
    lo_n = len(lits) // 2
    lo, hi = lits[:lo_n], lits[lo_n:]
    dec_lo = [b.emit(b.new_net(f"lo{v}"), [_minterm(b, lo, v)]) for v in range(1 << len(lo))]
    dec_hi = [b.emit(b.new_net(f"hi{u}"), [_minterm(b, hi, u)]) for u in range(1 << len(hi))]
    for j, out in enumerate(rp.data):
        steps = []
        for u, h in enumerate(dec_hi):
            row = [(words[u << lo_n | v] >> j) & 1 for v in range(1 << lo_n)]
            ones = [dec_lo[v] for v, bit in enumerate(row) if bit]
            zeros = [dec_lo[v] for v, bit in enumerate(row) if not bit]
            if not ones:
                continue
            if not zeros:
                steps.append(b.step([(h, False, 1)], 1))
            elif len(ones) <= len(zeros):
                steps.append(b.step([(h, False, 1)] + [(n, False, 1) for n in ones], 2))
            else:                              # hi == u, minus hi == u with a low value whose bit is 0
                steps += [b.step([(h, False, 1)], 1),
                          _negated(b.step([(h, False, 1)] + [(n, False, 1) for n in zeros], 2))]
        b.emit(out, steps)
    assert len(b.functions) == len(dec_lo) + len(dec_hi) + width
    return b.functions, b.names, b.next_net


def _negated(s: Step) -> Step:
    """The step ``s`` subtracted instead of added."""
    return Step(s.terms, s.theta, -s.sign)


def preload(netlist, names):
    """``netlist`` with each read-only memory of ``names`` given a write port that is never enabled
    (address, data and enable all constant 0): the model then holds the ROM as a written memory,
    DeltaNet banks read in one layer, whose words the prompt writes through that port's group (the
    initial contents, as for a RAM) and which no frame emits (the group is gated by its constant-0
    enable: 0 tokens per cycle). No FFN neurons; the prompt grows by a port group per non-zero word.
    Memories that already have a write port are left as they are, so applying it twice is the same
    as once. The simulator runs the netlist as synthesized: the port never writes."""
    from dataclasses import replace

    from netlist2tf.common import UnsupportedDesignError
    from netlist2tf.netlist import WritePort
    from netlist2tf.netlist import Problem

    names = set(names)
    if not names:
        return netlist
    known = {m.name for m in netlist.memories if not m.write_ports}
    clocks = sorted({r.clock for r in netlist.registers})
    mems = []
    for m in netlist.memories:
        if m.name in names and not m.write_ports:
            if not clocks:
                raise UnsupportedDesignError([Problem(
                    f"read-only memory {m.name}", m.src,
                    "a ROM preloaded into DeltaNet heads is written by the prompt through a clocked port, "
                    "and this design has no clock: compile it with --roms ffn")])
            m = replace(m, write_ports=(WritePort(addr=(CONST0,) * m.abits, data=(CONST0,) * m.width,
                                                  enable=(CONST0,) * m.width, clocked=True,
                                                  clock=clocks[0], priority_over=()),))
        mems.append(m)
    missing = names - known - {m.name for m in netlist.memories}
    if missing:
        from netlist2tf.common import Netlist2TFError
        raise Netlist2TFError(f"preloaded ROMs: {', '.join(sorted(missing))} not a memory of {netlist.top} "
                              f"(read-only memories: {', '.join(sorted(known)) or 'none'})")
    return replace(netlist, memories=tuple(mems))
