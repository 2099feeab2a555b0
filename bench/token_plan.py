"""Tokens per instruction of the compiled CPU now, and projected for each step of the plan to 3 or
fewer (docs/design/cpu-model.md 4), from the instruction mix of the program table measured on unicorn.

The first column is exact: the model's frame today (15 generated tokens per cycle; 28 in the 17 busy
cycles of an M instruction, 18 cycles each), as bench/model_speed.py counts it from the netlist
simulator and the tests confirm frame by frame. Every other column is a projection: a token count
per instruction that each step's frame would have, applied to the measured mix. The steps are
cumulative, in the plan's order:

  S1 gate outputs        OUT 3 -> 1 token (retire, console, halt); mem_word/lane (2 tokens) on loads only
  S2 fold the state      `why` gated by halting; m_busy, halted, reported ride in the OUT token: REG 6 -> 4
  S3 gate the write      the write group (enable, 13 address bits, 32 data bits: 6 tokens) only when a
                         register or RAM word is written
  S4 pc as an increment  the pc's 4 tokens only after a taken branch or jump
  S5 single-cycle M      an M instruction costs what an ALU instruction does
  S6 fold small values   a register write is its register token plus the value's bytes up to the
                         highest non-zero one (1-4); a store its 2 address tokens plus the bytes stored
  S7 short pc            2 tokens of word address (12 bits: 16 KiB of RAM) after a taken transfer; a
                         target outside the RAM traps, and only then is the full pc emitted
  S8 rd in the status    the destination register's 5 bits ride in the status token with 3 flags
                         (retire, taken: pc follows, other: a gated group of the rare fields follows)
  S9 signed folding      a value's bytes counted as the shortest sign-extended form (-1 is one byte)
  S10 12-bit tokens      every chunk 12 bits instead of 8 (the vocabulary: ~11 chunk kinds x 2 parities
                         x 4,096 = ~90 k tokens, an LM head of ~215 M parameters at hidden 2,392): the
                         status token also holds a load's or store's byte lane; a pc, a word address
                         one token; a value ceil(its shortest sign-extended width / 12) tokens

    .venv/bin/python bench/token_plan.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpu.machine import CONSOLE_ADDR, is_m_instruction  # noqa: E402
from cpu.model_engine import M_CYCLES, MODEL_RAM_SIZE  # noqa: E402
from cpu.programs import table_images  # noqa: E402
from cpu.unicorn_ref import run_unicorn  # noqa: E402

RAM = MODEL_RAM_SIZE
NOW_CYCLE, NOW_BUSY = 15, 28          # generated tokens per cycle, and per busy M cycle (compile.json)
STEPS = ("now", "S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9", "S10")


def value_bytes(v: int) -> int:
    """Bytes up to the highest non-zero one (at least 1)."""
    return max(1, (v.bit_length() + 7) // 8)


def signed_width(v: int) -> int:
    """Bits of the shortest two's-complement form that sign-extends to the 32-bit ``v``."""
    v = v - (1 << 32) if v >> 31 else v
    return next(k for k in range(1, 33) if -(1 << (k - 1)) <= v < (1 << (k - 1)))


def signed_bytes(v: int) -> int:
    """Bytes of the shortest two's-complement form that sign-extends to the 32-bit ``v``."""
    return -(-signed_width(v) // 8)


def costs(r) -> list:
    """Generated tokens of one retired instruction under each step (cumulative)."""
    m = is_m_instruction(r.insn)
    load = r.mem_rmask != 0
    store = r.mem_wmask != 0 and r.mem_addr != CONSOLE_ADDR
    write = r.rd != 0 or store
    taken = r.next_pc != (r.pc + 4) & 0xFFFFFFFF
    now = NOW_CYCLE + (NOW_BUSY * (M_CYCLES - 1) if m else 0)
    s1 = now - 2 + (2 if load else 0) - (0 if not m else 2 * (M_CYCLES - 1))
    s2 = s1 - 2 * (M_CYCLES if m else 1)
    cycles = M_CYCLES if m else 1
    # per cycle from S3 on: OUT 1 (+2 on loads), pc 4, write 6 when writing; busy M cycles add the
    # M state (13 tokens) and write nothing
    s3 = cycles * (1 + 4) + (2 if load else 0) + (6 if write else 0) + (13 * (M_CYCLES - 1) if m else 0)
    s4 = s3 - 4 * cycles + (4 if taken else 0)
    s5 = 1 + (4 if taken else 0) + (2 if load else 0) + (6 if write else 0)
    if r.rd:
        data = 1 + value_bytes(r.rd_wdata)
    elif store:
        data = 2 + bin(r.mem_wmask).count("1")
    else:
        data = 0
    s6 = 1 + (4 if taken else 0) + (2 if load else 0) + data
    s7 = s6 - (2 if taken else 0)
    s8 = s7 - (1 if r.rd else 0)
    s9 = s8 - (value_bytes(r.rd_wdata) - signed_bytes(r.rd_wdata) if r.rd else 0)
    B = 12
    s10 = 1 + (1 if taken else 0) + (1 if load else 0)
    if r.rd:
        s10 += -(-signed_width(r.rd_wdata) // B)
    elif store:
        s10 += 1 + -(-8 * bin(r.mem_wmask).count("1") // B)
    return [now, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10]


def main():
    print(f"{'program':11s} {'instr':>7s} {'load':>5s} {'store':>5s} {'taken':>5s} {'M':>5s} {'<256':>5s} "
          + " ".join(f"{s:>5s}" for s in STEPS))
    total = [0] * len(STEPS)
    mix_all = [0] * 5
    n_all = 0
    for prog, img in table_images(RAM):
        if img is None:
            print(f"{prog.name:11s} does not fit the model's {RAM // 1024} KiB of RAM")
            continue
        recs = run_unicorn(img, ram_size=RAM).records
        n = len(recs)
        sums = [0] * len(STEPS)
        for r in recs:
            for i, c in enumerate(costs(r)):
                sums[i] += c
        mix = (sum(r.mem_rmask != 0 for r in recs), sum(r.mem_wmask != 0 for r in recs),
               sum(r.next_pc != (r.pc + 4) & 0xFFFFFFFF for r in recs), sum(is_m_instruction(r.insn) for r in recs),
               sum(0 < r.rd and r.rd_wdata < 256 for r in recs))
        print(f"{prog.name:11s} {n:7,d} " + " ".join(f"{100 * k / n:4.0f}%" for k in mix) + " "
              + " ".join(f"{s / n:5.1f}" for s in sums))
        total = [a + b for a, b in zip(total, sums)]
        mix_all = [a + b for a, b in zip(mix_all, mix)]
        n_all += n
    print(f"{'table':11s} {n_all:7,d} " + " ".join(f"{100 * k / n_all:4.0f}%" for k in mix_all) + " "
          + " ".join(f"{s / n_all:5.1f}" for s in total))
    print("columns: share of loads, stores, taken branches/jumps, M instructions, register writes of a value "
          "< 256 (of all instructions); then tokens per instruction now (exact, +1 halt cycle not counted) and after each step "
          "(projected; see the docstring)")


if __name__ == "__main__":
    main()
