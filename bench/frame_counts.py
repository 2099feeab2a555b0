"""Counts on unicorn's traces of the program table that priced the CPU's frame (docs/design/cpu-model.md 2
and 4): how often the pc's middle bits (the tail group pc_mid) may change, and how many register
writes packing saves a token on. Prints the counts; no model, ~1 minute.

* transfers (next pc != pc + 4), and how many of them stay in their 16-word block (pc_mid_emit is 1
  for them too: an exact gate would skip those), and sequential steps from a block's last word;
* register writes, and those of a value < 4, or in [256, 1,024), [2**16, 2**18), [2**24, 2**26): one
  token fewer each with the value's low 2 bits packed into the address token.
"""

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpu.model_engine import MODEL_RAM_SIZE  # noqa: E402
from cpu.programs import table_images  # noqa: E402
from cpu.unicorn_ref import run_unicorn  # noqa: E402


def main():
    n = Counter()
    for prog, img in table_images(MODEL_RAM_SIZE):
        if img is None:
            continue
        for r in run_unicorn(img, ram_size=MODEL_RAM_SIZE).records:
            n["instructions"] += 1
            if r.next_pc != r.pc + 4:
                n["transfers"] += 1
                n["transfers within their 16-word block"] += (r.pc >> 6) == (r.next_pc >> 6)
            elif (r.pc >> 2) % 16 == 15:
                n["sequential steps from a block's last word"] += 1
            if r.rd:
                n["register writes"] += 1
                v = r.rd_wdata
                n["register writes one token shorter packed"] += v < 4 or any(
                    lo <= v < hi for lo, hi in ((256, 1024), (1 << 16, 1 << 18), (1 << 24, 1 << 26)))
    for k, v in n.items():
        print(f"{k:45s} {v:9,d}")


if __name__ == "__main__":
    main()
