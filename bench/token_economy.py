"""The token economy the compiler finds by itself (``netlist2tf compile --economy auto``, the default),
against none and against the CPU's hand-written groups, all in one run on this machine.

1. Every example design (hdl/examples, and the serial multiplier and gated machine of the tests): the
   groups the search found and z3 proved (and refuted), its time, and the generated tokens per cycle,
   mean and worst, before (no group) and after, over the search's own simulated run on random inputs.
2. The CPU compiled WITHOUT its hand-written groups (cpu/model_engine.py GATED, GATED_WRITES, HELD,
   FOLDED_WRITES): what the search finds for it, then generated tokens per instruction on the program
   table (each program run on the netlist simulator from its image to its halt, every frame priced by
   each protocol; instructions counted by unicorn) for six frames: no group, the groups found, the
   groups found beside the one output group a host must promise (halt_kind and halt_cause read only
   when halt is 1: the search never makes an output group), the same two searched on one program's
   run (``--use-program``, default hello: ``compile --economy-memory``'s way) instead of random
   inputs, and the hand-written ones. ``--programs`` picks a subset, ``--skip-cpu`` leaves the CPU out.

Asserts nothing; prints tables. Exactness of the compiled designs is what the tests check
(tests/compile/test_economy.py); this prints the figures.

    .venv/bin/python bench/token_economy.py [--programs hi,hello,sieve] [--skip-cpu]
"""

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DESIGNS = ("hdl.examples.counter:Counter", "hdl.examples.lfsr:LFSR", "hdl.examples.multiplier:PipelinedMultiplier",
           "hdl.examples.fifo:FIFO", "hdl.examples.regfile:RegisterFile", "hdl.examples.alu:ALU",
           "tests/designs/unusual.py:SerialMultiplier", "tests/designs/unusual.py:GatedMachine")


def economy_of(netlist, settings, run=None):
    """(the driver's Economy found afresh, seconds): no cache, so the time is the search's own.
    ``run``: the design's own use to search on (``driver.EconomyRun``), else random inputs."""
    import tempfile

    from netlist2tf.driver import find_economy

    with tempfile.TemporaryDirectory() as build:
        t0 = time.perf_counter()
        eco = find_economy(netlist, settings, build=build, run=run)
        return eco, time.perf_counter() - t0


def designs_table():
    from netlist2tf.compile import CompileSettings
    from netlist2tf.frontend import synthesize
    from netlist2tf.netlist import parse_netlist

    print(f"{'design':<44} {'cells':>5} {'search s':>8} {'tokens/cycle before':>20} {'after':>14}  groups found "
          f"(z3-refuted)")
    for design in DESIGNS:
        result = synthesize(design, flow="macro")
        netlist = parse_netlist(result.json_text, str(result.json_path))
        eco, took = economy_of(netlist, CompileSettings())
        groups = "; ".join(f"{g['kind']} {g['gate']}" + (f": {','.join(g['members'])}" if g["kind"] in ("reg", "tail") else "")
                           for g in eco.groups) or "none"
        print(f"{design:<44} {len(netlist.cells):>5} {took:>8.1f} {eco.before.mean:>11.2f} (worst {eco.before.worst:>2}) "
              f"{eco.after.mean:>5.2f} (worst {eco.after.worst:>2})  {groups} ({len(eco.refuted)})", flush=True)


USE_CYCLES = 2048       # cycles of the program run the search is given (its first 2,048 cycles)


def cpu_table(names, use_program="hello"):
    from cpu.model_engine import MODEL_RAM_SIZE, compiled_netlist, model_settings
    from cpu.programs import table_images
    from cpu.unicorn_ref import run_unicorn
    from netlist2tf.compile import frame_lengths, protocol_of, simulate
    from netlist2tf.sim import TableStimulus

    netlist = compiled_netlist(MODEL_RAM_SIZE)
    hand = model_settings()
    bare = dataclasses.replace(hand, gated=(), gated_writes=(), held=(), folded_writes=())
    eco, took = economy_of(netlist, bare)
    print(f"\nThe CPU ({len(netlist.cells)} cells, 64 KiB) without its hand-written groups: the search took {took:.1f} s, "
          f"{eco.before.mean:.2f} -> {eco.after.mean:.2f} generated tokens per cycle on its random run")
    for g in eco.groups:
        print(f"  found {g['kind']:<5} {g['gate']:<9} {','.join(g['members']) if g['kind'] in ('reg', 'tail') else '':<40} {g['proof']}")
    for r in eco.refuted:
        print(f"  refuted {r['gate']}: {','.join(r['members'])} ({r['counterexample'][:100]}...)")
    # the one group the search cannot make: an output group is the host's promise (it reads halt_kind
    # and halt_cause only in the cycle that reports a halt), not the design's
    promise = dataclasses.replace(bare, gated=tuple(g for g in hand.gated if g[0] == "halt"))
    eco2, took2 = economy_of(netlist, promise)
    print(f"\nWith the host's one promise written by hand (--gated halt:halt_kind,halt_cause): {took2:.1f} s, "
          f"{eco2.before.mean:.2f} -> {eco2.after.mean:.2f}; found: " +
          "; ".join(f"{g['kind']} {g['gate']}" + (f": {','.join(g['members'])}" if g["kind"] in ("reg", "tail") else "")
                    for g in eco2.groups))
    # the same two searches on a program's run instead of random inputs (--economy-stimulus/--economy-memory)
    from netlist2tf.driver import EconomyRun

    image = next(img for p, img in table_images(MODEL_RAM_SIZE) if p.name == use_program)
    use = EconomyRun.of(None, USE_CYCLES, {"ram": image.words()})
    eco3, took3 = economy_of(netlist, bare, use)
    eco4, took4 = economy_of(netlist, promise, use)
    for what, e, t in (("without the promise", eco3, took3), ("with the promise", eco4, took4)):
        print(f"Searched on {use_program}.c's run ({USE_CYCLES} cycles), {what}: {t:.1f} s, {e.before.mean:.2f} -> "
              f"{e.after.mean:.2f} on that run; found: " +
              "; ".join(f"{g['kind']} {g['gate']}" + (f": {','.join(g['members'])}" if g["kind"] in ("reg", "tail") else "")
                        for g in e.groups))
    programs = [(p, img) for p, img in table_images(MODEL_RAM_SIZE) if img is not None and (not names or p.name in names)]
    frames = {"no group": bare, "found": eco.settings, "promise+found": eco2.settings,
              f"on {use_program}": eco3.settings, f"promise+{use_program}": eco4.settings, "hand-written": hand}
    protocols = {k: protocol_of(netlist, s) for k, s in frames.items()}
    halt = next(p.bits[0] for p in netlist.outputs if p.name == "halt")
    insns = [len(run_unicorn(img, ram_size=MODEL_RAM_SIZE).records) for _, img in programs]
    # every program at once, one batch row each, until the longest halts (a row's count ends at its halt)
    cycles = max(insns) + max(insns) // 8 + 64
    t0 = time.perf_counter()
    run = simulate(netlist, batch=len(programs), cycles=cycles, extra_nets=(halt,), samples_at=(),
                   memories=[{"ram": img.words()} for _, img in programs],
                   stimulus=TableStimulus({"rst": np.zeros(1, dtype=np.uint64)}))
    print(f"\n(netlist simulator: {cycles:,} cycles x {len(programs)} programs in {time.perf_counter() - t0:.0f} s)")
    halted = run.values[halt].reshape(cycles, len(programs))
    ends = [int(np.argmax(halted[:, row])) + 1 if halted[:, row].any() else None for row in range(len(programs))]
    lengths = {k: frame_lengths(proto, run).reshape(cycles, len(programs)) for k, proto in protocols.items()}
    print(f"{'program':<11} {'instructions':>12} {'cycles':>8} " + " ".join(f"{k:>14}" for k in frames))
    totals, insns_total = {k: 0 for k in frames}, 0
    for row, ((prog, _), n) in enumerate(zip(programs, insns)):
        if ends[row] is None:
            print(f"{prog.name:<11} did not halt in {cycles:,} cycles")
            continue
        counts = {k: int(lengths[k][:ends[row], row].sum()) for k in frames}
        for k in frames:
            totals[k] += counts[k]
        insns_total += n
        print(f"{prog.name:<11} {n:>12,} {ends[row]:>8,} " + " ".join(f"{counts[k] / n:>14.2f}" for k in frames), flush=True)
    print(f"{'table':<11} {insns_total:>12,} {'':>8} " + " ".join(f"{totals[k] / insns_total:>14.2f}" for k in frames))


def main(argv=None):
    from netlist2tf.common import drop_kernel_notes

    drop_kernel_notes()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", default="", help="comma-separated table programs for the CPU (default: all)")
    ap.add_argument("--skip-cpu", action="store_true", help="the example designs only")
    ap.add_argument("--use-program", default="hello",
                    help="the table program whose run the CPU's economy is also searched on (default hello)")
    args = ap.parse_args(argv)
    designs_table()
    if not args.skip_cpu:
        cpu_table([n for n in args.programs.split(",") if n], args.use_program)
    return 0


if __name__ == "__main__":
    sys.exit(main())
