"""Run programs on the CPU's netlist: hdl/rv32 synthesized by Yosys, simulated by netlist2tf.sim.simulator.

The program image is loaded into the netlist's ``ram`` memory before the first cycle (the simulator's
state, which is the netlist engine's business; the model engine will load programs as prompt tokens
instead). Then the core runs cycle by cycle; the retirement port gives one ``Retire`` record per
retired instruction, the console port the output bytes, the halt port the reason it stopped.
"""

import time

import numpy as np

from netlist2tf.common import Netlist2TFError


from .machine import DEFAULT_RAM_SIZE, Halt, Image, Retire, RunResult

_HALT_KINDS = {0: Halt.EXIT, 1: Halt.EBREAK, 2: Halt.TRAP}
RETIRE_FIELDS = ("pc", "insn", "next_pc", "rd", "rd_wdata", "mem_addr", "mem_rmask", "mem_rdata",
                  "mem_wmask", "mem_wdata")


def core_design(ram_size: int = DEFAULT_RAM_SIZE, reset_pc: int = 0, mul=True, div=True, zba=True) -> str:
    """The DESIGN string of the core with these parameters (the synthesis cache keys on it)."""
    return f"hdl.rv32:Core(ram_size={ram_size}, mul={mul}, div={div}, zba={zba}, reset_pc={reset_pc})"


_NETLISTS: dict = {}


# Making the core's netlist costs memory and time in proportion to its RAM: Amaranth writes the RAM's
# initial contents into the RTLIL bit by bit. Measured on the 2-core machine (cpu run hi.c --engine
# netlist, peak RSS): 64 KiB 197 MB, 1 MiB 1,143 MB and 17-20 s, i.e. about 1,010 bytes and 15 us
# per byte of RAM.
SYNTH_BYTES_PER_RAM_BYTE = 1010
SYNTH_SECONDS_PER_MIB = 15


def core_netlist(ram_size=DEFAULT_RAM_SIZE, reset_pc=0, flow="word", build_dir=None):
    """The parsed netlist of the core (synthesized once per process and cached on disk). A RAM whose
    netlist the machine's memory cannot hold is refused before any work; a large one says how long
    it takes."""
    key = (ram_size, reset_pc, flow, str(build_dir))  # None: the default build folder
    if key not in _NETLISTS:
        from netlist2tf.common import available_memory, gigabytes

        need, avail = SYNTH_BYTES_PER_RAM_BYTE * ram_size + 150_000_000, available_memory()
        if avail is not None and need > 0.8 * avail:
            most = (int(0.8 * avail) - 150_000_000) // SYNTH_BYTES_PER_RAM_BYTE
            most = 1 << max(12, most.bit_length() - 1) if most > 0 else 0
            raise Netlist2TFError(f"--ram-size {ram_size:#x}: the netlist engine's core with {ram_size:,} bytes of RAM "
                                  f"needs about {gigabytes(need)} of memory to build (its RAM's contents are written "
                                  f"out bit by bit), more than the {gigabytes(avail)} available; give a smaller "
                                  f"--ram-size ({most:#x} at most here), or run it on --engine unicorn")
        if ram_size >= 1 << 20:
            import sys
            print(f"cpu: netlist: building the core with {ram_size >> 20} MiB of RAM needs about {gigabytes(need)} of "
                  f"memory and minutes of time ({SYNTH_SECONDS_PER_MIB} s a MiB where measured, a 2-core machine)",
                  file=sys.stderr)
        from netlist2tf.frontend import synthesize
        from netlist2tf.netlist import parse_netlist

        result = synthesize(core_design(ram_size, reset_pc), flow=flow, build_dir=build_dir)
        _NETLISTS[key] = parse_netlist(result.json_text, str(result.json_path))
    return _NETLISTS[key]


def check_image(image: Image, ram_size: int):
    for addr, data in image.segments:
        if addr < 0 or addr + len(data) > ram_size:
            raise Netlist2TFError(f"program segment at {addr:#x} ({len(data)} bytes) does not fit in "
                                  f"{ram_size} bytes of RAM; use a larger --ram-size")


def run_netlist(image: Image, ram_size: int = DEFAULT_RAM_SIZE, max_steps: int = 1_000_000,
                trace: bool = True, flow: str = "word", build_dir=None, time_limit: float | None = None) -> RunResult:
    """Run ``image`` on the core's netlist until it halts or retires ``max_steps`` instructions."""
    return run_netlist_batch([image], ram_size, max_steps, trace, flow, build_dir, time_limit)[0]


def run_netlist_batch(images: list, ram_size: int = DEFAULT_RAM_SIZE, max_steps: int = 1_000_000,
                      trace: bool = True, flow: str = "word", build_dir=None, time_limit: float | None = None) -> list:
    """Run several programs at once, one batch instance each (vectorised); one RunResult each.

    All images must share one entry point (the core's reset pc). ``time_limit``: seconds of wall-clock
    time from the first cycle (the core's netlist is built before); past it, a program stops at its
    next instruction with ``Halt.TIME_LIMIT`` (that instruction does not retire).
    """
    entries = {img.entry for img in images}
    if len(entries) != 1:
        raise Netlist2TFError("a batch of programs must share one entry point")
    for img in images:
        check_image(img, ram_size)
    netlist = core_netlist(ram_size, entries.pop(), flow, build_dir)
    B = len(images)
    from netlist2tf.sim import Simulator

    sim = Simulator(netlist, batch=B)
    for lane, img in enumerate(images):
        sim.load_memory("ram", img.words(), instance=None if B == 1 else lane)

    idx = {p.name: i for i, p in enumerate(sim.output_ports)}
    if B == 1:
        return [_run_single(sim, idx, max_steps, trace, time_limit)]

    records = [[] for _ in range(B)]
    console = [bytearray() for _ in range(B)]
    halts: list = [None] * B
    retired = np.zeros(B, dtype=np.int64)
    cycles = np.zeros(B, dtype=np.int64)
    live = np.ones(B, dtype=bool)
    fields = [(f, idx["rvfi_" + f]) for f in RETIRE_FIELDS]
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + time_limit
    late = False
    # An M instruction takes M_CYCLES cycles; bound the cycles so a wedged core cannot hang the run.
    from hdl.rv32.core import M_CYCLES

    for _ in range(M_CYCLES * (max_steps + 1) + 1):
        out = sim.step_values()
        valid = out[idx["rvfi_valid"]].astype(bool) & live
        cycles += live
        # At most max_steps instructions retire; the next one to retire stops the lane uncounted.
        # Past the time limit, the next one to retire stops it the same way.
        late = late or (deadline is not None and time.perf_counter() >= deadline)
        over = valid & ((retired >= max_steps) | late)
        if over.any():
            for lane in np.nonzero(over)[0]:
                kind = Halt.STEP_LIMIT if retired[lane] >= max_steps else Halt.TIME_LIMIT
                halts[lane] = Halt(kind, int(out[idx["rvfi_pc"]][lane]))
            live &= ~over
            valid &= ~over
        if trace and valid.any():
            lanes = np.nonzero(valid)[0]
            cols = [(f, out[i][lanes].tolist()) for f, i in fields]
            for j, lane in enumerate(lanes.tolist()):
                records[lane].append(Retire(**{f: col[j] for f, col in cols}))
        retired += valid
        con = out[idx["console_valid"]].astype(bool) & live
        if con.any():
            data = out[idx["console_data"]]
            for lane in np.nonzero(con)[0]:
                console[lane].append(int(data[lane]))
        halt = out[idx["halt"]].astype(bool) & live
        if halt.any():
            for lane in np.nonzero(halt)[0]:
                halts[lane] = halt_from_port(lambda name: int(out[idx[name]][lane]))
            live &= ~halt
        if not live.any():
            break
    seconds = time.perf_counter() - t0
    return [RunResult(bytes(console[i]), halts[i] or Halt(Halt.STEP_LIMIT, 0), records[i],
                      int(retired[i]), int(cycles[i]), seconds) for i in range(B)]


def halt_from_port(get) -> Halt:
    """The Halt the core's halt port describes; ``get(name)`` reads an output of the halting cycle."""
    kind = _HALT_KINDS[get("halt_kind")]
    if kind == Halt.TRAP:
        return Halt(kind, get("rvfi_pc"), 0, get("halt_cause"))
    return Halt(kind, get("rvfi_pc"), get("halt_code"))


def _run_single(sim, idx, max_steps, trace, time_limit=None) -> RunResult:
    """The batch-1 loop on plain ints (the common case of `cpu run`)."""
    from hdl.rv32.core import M_CYCLES

    i_valid, i_con, i_data, i_halt = idx["rvfi_valid"], idx["console_valid"], idx["console_data"], idx["halt"]
    i_fields = [idx["rvfi_" + f] for f in RETIRE_FIELDS]
    records, console = [], bytearray()
    retired = cycles = 0
    halt = None
    step = sim.step_values
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + time_limit
    i_pc = idx["rvfi_pc"]
    while cycles < M_CYCLES * (max_steps + 1) + 1:
        out = step()
        cycles += 1
        if out[i_valid]:
            if retired == max_steps:     # at most max_steps retire; this one is not counted
                halt = Halt(Halt.STEP_LIMIT, int(out[i_pc]))
                break
            if deadline is not None and time.perf_counter() >= deadline:     # nor past the time limit
                halt = Halt(Halt.TIME_LIMIT, int(out[i_pc]))
                break
            retired += 1
            if trace:
                records.append(Retire(*[int(out[i]) for i in i_fields]))
        if out[i_con]:
            console.append(int(out[i_data]))
        if out[i_halt]:
            halt = halt_from_port(lambda name: int(out[idx[name]]))
            break
    return RunResult(bytes(console), halt or Halt(Halt.STEP_LIMIT, 0), records, retired, cycles,
                     time.perf_counter() - t0)
