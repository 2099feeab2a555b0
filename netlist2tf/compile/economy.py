"""The token economy the compiler finds by itself: which groups of a design's frame can be skipped,
and what a frame costs (docs/design/compiler.md 2, "Groups found automatically").

A frame emits every register every cycle unless a gated group says otherwise (protocol.py). For
any design, ``search`` proposes, from one simulated run on random stimulus (``Run``):

* each written memory's write group, gated by its write enable (a frame that writes nothing skips
  the port's tokens; exact by construction, protocol.py "write");
* each such port's data folded to the word's highest non-zero chunk (protocol.py "fold": exact by
  construction), where the run says that saves tokens;
* register groups gated by a 1-bit register's next value (protocol.py "reg"): the registers whose
  values did not matter, in any sampled state where the gate register was 0, to anything the model
  emits (an output, a memory write, another register's next value), nor to their own next value
  when the gate's next value was 1. States are sampled from the run (reachable ones) and drawn
  uniformly (any state, as z3 sees them); one register is perturbed per lane of a wide batch.
  These are candidates only: the driver proves each group with z3 and keeps only what is proved.

Groups are chosen greedily by the generated tokens they save over the run (``frame_cost``, with
the protocol each choice gives: packing a group on its own chunks can cost more than it saves).
``frame_cost`` is also what the compiler reports: generated tokens per cycle, mean and worst.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from netlist2tf.common import Netlist2TFError
from netlist2tf.netlist import CONST0, CONST1, CONSTX, Netlist, Port
from netlist2tf.compile.plan import resolve_groups
from netlist2tf.compile.protocol import TraceProtocol
from netlist2tf.compile.settings import CompileSettings

MIN_ZERO_SAMPLES = 16          # a gate seen at 0 in fewer sampled states is not trusted as a candidate
LANES = 2048                   # about how many lanes one perturbation step simulates


@dataclass(frozen=True)
class Unit:
    """A register signal the search can name: ``states`` its registers' indices in the simulator's
    state, ``nets`` their output nets, ``width`` its bits."""
    name: str
    states: tuple[int, ...]
    nets: tuple[int, ...]
    width: int


@dataclass(frozen=True)
class FrameCost:
    """Generated tokens per frame over a simulated run (``frames`` = cycles x batch rows), and
    the host's input tokens per frame (fixed)."""
    frames: int
    mean: float
    worst: int
    best: int
    inputs: int

    def record(self) -> dict:
        return {"frames": self.frames, "generated_mean": round(self.mean, 3), "generated_worst": self.worst,
                "generated_best": self.best, "input_tokens": self.inputs}

    def __str__(self):
        return f"{self.mean:.2f} generated tokens per cycle (worst {self.worst}, best {self.best})"


@dataclass
class Run:
    """One simulated run on random stimulus: ``values[net]`` is each frame's value of every net a
    group's gate may read (1-bit registers' D nets, write enables, write data, 1-bit outputs),
    flattened over cycles x rows; ``units`` the nameable register signals; ``samples`` the states
    taken for the perturbation test: (state arrays, memory arrays, inputs) per sampled cycle."""
    netlist: Netlist
    cycles: int
    batch: int
    values: dict
    units: list
    samples: list
    state_names: tuple


def register_units(netlist: Netlist, state_names) -> list[Unit]:
    """The register signals a group can name (all their bits register outputs, constants or
    undriven; no ``$`` in the name), each register in at most one, in netlist order."""
    index = {name: k for k, name in enumerate(state_names)}
    reg_of_q = {n: r for r in netlist.registers for n in r.q}
    driven = {n for c in netlist.cells for _, sig in c.outputs for n in sig} | \
        {n for m in netlist.memories for rp in m.read_ports for n in rp.data} | \
        {n for p in netlist.inputs for n in p.bits}
    taken, units = set(), []
    for s in netlist.signals:
        if "$" in s.name or s.name.startswith("__"):
            continue
        nets = [n for n in s.bits if n not in (CONST0, CONST1, CONSTX)]
        regs = {reg_of_q[n].name: reg_of_q[n] for n in nets if n in reg_of_q}
        if not regs or any(n not in reg_of_q and n in driven for n in nets):
            continue
        if any(not set(r.q) <= set(nets) for r in regs.values()) or set(regs) & taken:
            continue
        taken |= set(regs)
        q = tuple(n for r in regs.values() for n in r.q)
        units.append(Unit(s.name, tuple(index[f"reg:{r}"] for r in regs), q, len(q)))
    return units


def _probe_ports(nets) -> tuple[Port, ...]:
    """Extra output ports carrying ``nets``, 64 at most each (the simulator stays in its numpy mode)."""
    nets = list(nets)
    return tuple(Port(f"__economy_{k}", "output", tuple(nets[i:i + 64]), False)
                 for k, i in enumerate(range(0, len(nets), 64)))


def _gate_nets(netlist: Netlist, units, extra=()) -> list[int]:
    """Every net a group's gate may read: 1-bit units' D nets, every write port's enable and data,
    1-bit output ports, and ``extra``."""
    d_of_q = {q: d for r in netlist.registers for q, d in zip(r.q, r.d)}
    nets = [d_of_q[u.nets[0]] for u in units if u.width == 1]
    for m in netlist.memories:
        for wp in m.write_ports:
            nets += [wp.enable[0], *wp.data]
    nets += [p.bits[0] for p in netlist.outputs if len(p.bits) == 1]
    nets += list(extra)
    return list(dict.fromkeys(n for n in nets if n not in (CONST0, CONST1, CONSTX)))


def simulate(netlist: Netlist, seed: int = 0, batch: int = 32, cycles: int = 128, extra_nets=(),
             samples_at=(0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89), memories=None, stimulus=None) -> Run:
    """Run ``netlist`` (the model's: only the kept outputs) for ``cycles`` cycles on ``batch`` rows
    of random inputs (``sim.RandomStimulus``: resets now and then), half the rows with their
    written memories filled at random, recording every gate net per frame and the whole state at
    the cycles ``samples_at``. ``memories``: instead, each row's initial memory words ({memory:
    words}, one per row); ``stimulus``: a ``sim`` stimulus instead of the random one (a program's
    run: ``bench/token_economy.py``)."""
    from netlist2tf.sim import RandomStimulus, Simulator

    probe_sim = Simulator(netlist, batch=1)          # its state names, to name the units
    units = register_units(netlist, probe_sim.state_names)
    nets = _gate_nets(netlist, units, extra_nets)
    ports = _probe_ports(nets)
    sim = Simulator(dataclasses.replace(netlist, ports=netlist.ports + ports), batch=batch)
    rng = np.random.default_rng(seed)
    if memories is not None:
        for row, words in enumerate(memories):
            for name, contents in words.items():
                sim.load_memory(name, contents, instance=row)
    else:
        for row in range(batch // 2, batch):
            for m in netlist.memories:
                if m.write_ports:
                    sim.load_memory(m.name, _random_words(rng, m.size, m.width), instance=row)
    stim = stimulus or RandomStimulus(seed)
    recorded = {p.name: [] for p in ports}
    samples, at = [], set(samples_at)
    for k in range(cycles):
        vals = stim.values(k, sim)
        if k in at:
            states, mems = sim.lane_state()
            samples.append((states, mems, {n: np.asarray(v) for n, v in vals.items()}))
        out = sim.step(vals)
        for p in ports:
            recorded[p.name].append(np.asarray(out[p.name]).reshape(-1))
    values = {}
    for p in ports:
        col = np.concatenate(recorded[p.name]) if recorded[p.name] else np.zeros(0, dtype=np.uint64)
        for i, n in enumerate(p.bits):
            values[n] = _bit(col, i).astype(bool)
    return Run(netlist, cycles, batch, values, units, samples, probe_sim.state_names)


def _bit(values, i: int):
    """Bit ``i`` of each of ``values`` (uint64, or Python ints in an object array) as 0/1."""
    v = np.asarray(values)
    if v.dtype == object:
        return np.array([(int(x) >> i) & 1 for x in v], dtype=np.uint8)
    return ((v.astype(np.uint64) >> np.uint64(i)) & np.uint64(1)).astype(np.uint8)


def _random_words(rng, size: int, width: int) -> list[int]:
    words = [0] * size
    for lo in range(0, width, 32):
        part = rng.integers(0, 1 << min(32, width - lo), size=size, dtype=np.uint64)
        words = [w | (int(p) << lo) for w, p in zip(words, part)]
    return words


def frame_cost(protocol: TraceProtocol, run: Run, mask=None) -> FrameCost:
    """The generated tokens of each frame of ``run`` under ``protocol`` (its groups' gates read from
    the run's recorded nets): mean, worst and best, and the input tokens a frame has; ``mask``: the
    frames to count (``frame_lengths``' order), default all."""
    lengths = frame_lengths(protocol, run)
    if mask is not None:
        lengths = lengths[np.asarray(mask, dtype=bool)]
    if not len(lengths):
        return FrameCost(0, 0.0, 0, 0, len(protocol.inputs))
    return FrameCost(len(lengths), float(lengths.mean()), int(lengths.max()), int(lengths.min()), len(protocol.inputs))


def frame_lengths(protocol: TraceProtocol, run: Run):
    """Each frame's generated tokens under ``protocol``, frames in the run's order (cycle by cycle,
    the rows of a cycle together)."""
    frames = run.cycles * run.batch
    gates = []
    for i in range(len(protocol.groups)):
        probe = protocol.gate_probe(i)
        missing = [n for n in probe if n not in run.values]
        if missing:
            raise Netlist2TFError(f"frame cost: group {protocol.groups[i].name}'s gate net {missing[0]} was not "
                                  f"recorded by the run")
        gates.append(np.any([run.values[n] for n in probe], axis=0) if probe else np.zeros(frames, dtype=bool))
    if not gates:
        return np.full(frames, len(protocol.frame_kinds(True)), dtype=np.int64)
    rows, inverse = np.unique(np.stack(gates, axis=1), axis=0, return_inverse=True)
    lengths = np.array([len(protocol.frame_kinds(tuple(bool(x) for x in row))) for row in rows], dtype=np.int64)
    return lengths[np.asarray(inverse).reshape(-1)]


def protocol_of(netlist: Netlist, settings: CompileSettings) -> TraceProtocol:
    """The trace protocol of ``settings``'s groups on ``netlist`` (no preloaded ROMs: those are
    chosen by the planner and gated by an enable that is never 1)."""
    return TraceProtocol.from_netlist(netlist, {r.clock for r in netlist.registers}, settings.chunk_bits,
                                      resolve_groups(netlist, settings.gated, settings.gated_writes,
                                                     settings.held, settings.folded_writes))


def _hand_names(settings: CompileSettings) -> set:
    """The signals the hand-written groups name (members and gates): the search leaves them alone."""
    names = {g for g, _ in settings.gated} | {m for _, ms in settings.gated for m in ms}
    names |= {g for g, _, _ in settings.held} | {d for _, d, _ in settings.held} | \
        {m for _, _, ms in settings.held for m in ms}
    return names


class Search:
    """The groups worth proving on ``netlist`` (the model's) beyond ``settings``' own (module
    docstring). ``gated_writes``/``folded_writes``: the memories whose writes to gate and fold
    (exact by construction); ``settings``: ``settings`` with those; ``propose(avoid)``: register
    groups ((GATE, (MEMBER, ...)), ...) to prove, chosen by the tokens they save; ``add_states``:
    more states for the perturbation test (a counterexample's: the next ``propose`` accounts for
    them); ``samples``: how many states were tested. ``use``: a run of the design's own use
    (``driver.EconomyRun``): its states are tested too, and it, not ``run``, prices the frames and
    gives each gate's share (what a group saves in real use)."""

    def __init__(self, netlist: Netlist, settings: CompileSettings, run: Run, seed: int = 0, use: Run | None = None):
        self.netlist, self.run = netlist, use or run
        self.rng = np.random.default_rng(seed + 1)
        written = [m for m in netlist.memories
                   if m.write_ports and m.write_ports[0].enable[0] not in (CONST0, CONST1, CONSTX)]
        base = settings
        writes = tuple(m.name for m in written if m.name not in settings.gated_writes)
        if writes and _registers_outside(netlist, settings):
            base = dataclasses.replace(base, gated_writes=tuple(settings.gated_writes) + writes)
        else:
            writes = ()
        # a folded port never emits more tokens than a plain one and fewer for every word with a
        # zero high chunk (typical data, unlike the run's random words): fold every gated port with
        # more than one data chunk, unless the run says it costs
        folds = []
        for m in written:
            if m.name in base.folded_writes or m.name not in base.gated_writes or \
                    len(m.write_ports[0].data) <= settings.chunk_bits:
                continue
            trial = dataclasses.replace(base, folded_writes=tuple(base.folded_writes) + (m.name,))
            if self.cost(trial) <= self.cost(base):
                base, folds = trial, folds + [m.name]
        self.settings, self.gated_writes, self.folded_writes = base, writes, tuple(folds)
        hand = _hand_names(settings)
        self.units = [u for u in self.run.units if u.name not in hand]
        # an output in a hand-written output group counts only while its gate output is 1 (the host's
        # promise, as the proof claims it)
        specs = resolve_groups(netlist, settings.gated, (), settings.held)
        self.out_gate_of = {m: g for (g, ms), spec in zip(settings.gated, specs) if spec.kind == "out" for m in ms}
        self.gates = [k for k, u in enumerate(self.units) if u.width == 1]
        n = len(self.units)
        # per gate, over the sampled states with the gate at 0: which units an output or a write
        # saw (``seen``), and which units' next values (the last column: any register outside
        # every unit) each unit moved, always (``moves``) and when the gate's next value was 1
        # (``moves_on``)
        self.seen = np.zeros((len(self.gates), n), dtype=bool)
        self.moves = np.zeros((len(self.gates), n, n + 1), dtype=bool)
        self.moves_on = np.zeros((len(self.gates), n, n + 1), dtype=bool)
        self.zeros = np.zeros(len(self.gates), dtype=int)
        # tail groups (protocol.py "tail"): per 1-bit output of the design, the units that changed
        # in a sampled cycle with that output at 0
        taken = {g for g, _, _ in settings.held} | {g for g, _ in settings.gated}
        self.out_gates = [p for p in netlist.outputs if len(p.bits) == 1 and p.name not in taken
                          and p.bits[0] not in (CONST0, CONST1, CONSTX)]
        self.moved_while_off = np.zeros((len(self.out_gates), n), dtype=bool)
        self.off_samples = np.zeros(len(self.out_gates), dtype=int)
        self.has_tail = any(d == "" for _, d, _ in settings.held)
        self.samples = 0
        self._tester = None
        d_of_q = {q: d for r in netlist.registers for q, d in zip(r.q, r.d)}
        self.rate = {self.units[k].name: float(self.run.values[d_of_q[self.units[k].nets[0]]].mean())
                     for k in self.gates}
        states, mems, inputs = [], [], []
        for r in (run, use) if use is not None else (run,):
            for st, mm, vals in (r.samples if r.state_names else ()):
                states.append(np.stack([np.asarray(x, dtype=object) for x in st], axis=1))
                mems.append([np.asarray(m, dtype=object) for m in mm])
                inputs.append({k: np.broadcast_to(np.asarray(v, dtype=object), (r.batch,)) for k, v in vals.items()})
        names = set().union(*inputs) if inputs else set()
        inputs = [{k: v.get(k, np.zeros(len(st), dtype=object)) for k in names} for v, st in zip(inputs, states)]
        if states and self.gates:
            reach = np.concatenate(states)
            widths = [_state_width(netlist, name) for name in run.state_names]
            randoms = np.array([[_random_value(self.rng, w) for w in widths] for _ in range(len(reach))], dtype=object)
            mem = [np.concatenate([m[j] for m in mems]) for j in range(len(netlist.memories))]
            ins = {k: np.concatenate([v[k] for v in inputs]) for k in inputs[0]}
            self._test(np.concatenate([reach, randoms]), [np.concatenate([m, m]) for m in mem],
                       {k: np.concatenate([v, v]) for k, v in ins.items()})

    def cost(self, settings: CompileSettings) -> float:
        return frame_cost(protocol_of(self.netlist, settings), self.run).mean

    def better(self, base: CompileSettings, trial: CompileSettings) -> bool:
        """Whether ``trial`` (``base`` and one more group) is worth it: no frame longer whatever its
        gates (the frame with every group present no longer: a group only moves registers off the
        ungated chunks, so that is the longest case), or fewer tokens on average over the run."""
        full = lambda s: len(protocol_of(self.netlist, s).frame_kinds(True))          # noqa: E731
        return full(trial) <= full(base) or self.cost(trial) < self.cost(base) - 1e-9

    def add_states(self, states, copies: int = 16) -> None:
        """Test ``states`` too ([(registers {"reg:NAME": value}, inputs {port: value}, memories
        {name: {index: word}})], e.g. ``formal.Counterexample.states``), each ``copies`` times (a
        perturbation draws its values at random)."""
        if not states or not self.gates:
            return
        names = self.run.state_names
        rows = [[regs.get(name, 0) for name in names] for regs, _, _ in states for _ in range(copies)]
        mems = []
        for m in self.netlist.memories:
            arr = np.zeros((len(rows), m.size), dtype=object)
            for i, (_, _, words) in enumerate(st for st in states for _ in range(copies)):
                for a, w in words.get(m.name, {}).items():
                    arr[i, a] = w
            mems.append(arr)
        ports = {p.name for p in self.netlist.inputs}
        inputs = {name: np.array([ins.get(name, 0) for _, ins, _ in states for _ in range(copies)], dtype=object)
                  for name in ports if any(name in ins for _, ins, _ in states)}
        self._test(np.array(rows, dtype=object), mems, inputs)

    def propose(self, avoid=frozenset()) -> tuple:
        """Register groups to prove, greedily by the generated tokens each saves over the run (an
        estimate ranks them: bits skipped x share of frames that skip them); none of ``avoid``."""
        units, rate = self.units, self.rate
        members = {}
        for gi, k in enumerate(self.gates):
            if self.zeros[gi] >= MIN_ZERO_SAMPLES and rate[units[k].name] < 1.0:
                members[k] = self.members(gi)
        chosen, used = [], set()
        base, tried = self.settings, set()
        while True:
            gates_used = {g for g, _ in chosen}
            ranked = sorted(((sum(units[u].width for u in ms if u not in used and u not in gates_used)
                              * (1 - rate[units[g].name]), units[g].name, g)
                             for g, ms in members.items() if g not in used and g not in gates_used), reverse=True)
            accepted = False
            for estimate, _, g in ranked:
                ms = tuple(u for u in members[g] if u not in used and u not in gates_used)
                group = (units[g].name, tuple(units[u].name for u in ms))
                if estimate <= 0 or not ms or group in tried or group in avoid:
                    continue
                tried.add(group)
                trial = dataclasses.replace(base, gated=tuple(base.gated) + (group,))
                try:
                    ok = self.better(base, trial)
                except Netlist2TFError:
                    continue                # e.g. every register in some group: nothing would end the frame
                if ok:
                    base = trial
                    chosen.append((g, ms))
                    used |= set(ms)
                    accepted = True
                    break
            if not accepted:
                break
        return tuple((units[g].name, tuple(units[u].name for u in ms)) for g, ms in chosen)

    def propose_tail(self, settings: CompileSettings, avoid=frozenset()):
        """A tail group to prove beside ``settings``' groups (protocol.py "tail": registers that
        change only in cycles where a 1-bit output of the design is 1, kept in one row written at
        the frame's end): (GATE OUTPUT, (MEMBER, ...)) saving the most tokens over the run, or None
        (none saves, or ``settings`` has a tail group already: a frame holds one)."""
        if self.has_tail or any(d == "" for _, d, _ in settings.held):
            return None
        grouped = {m for _, ms in settings.gated for m in ms} | {g for g, _ in settings.gated} | \
            {m for _, _, ms in settings.held for m in ms} | {d for _, d, _ in settings.held}
        best = None
        for oi, port in enumerate(self.out_gates):
            if self.off_samples[oi] < MIN_ZERO_SAMPLES or port.name in grouped:
                continue
            ms = tuple(u.name for u, moved in zip(self.units, self.moved_while_off[oi])
                       if not moved and u.name not in grouped)
            if not ms or (port.name, ms) in avoid:
                continue
            trial = dataclasses.replace(settings, held=tuple(settings.held) + ((port.name, "", ms),))
            try:
                # the tail's chunks are written from the frame's last token through the DeltaNet conv:
                # at most kernel - 1 tokens before the end (plan.py refuses the rest)
                kernel = settings.target.linear_conv_kernel_dim if settings.target is not None else 4
                if max(protocol_of(self.netlist, trial).tail_lags().values(), default=0) >= kernel:
                    continue
                c = self.cost(trial)
                ok = self.better(settings, trial)
            except Netlist2TFError:
                continue
            if ok and (best is None or c < best[0]):
                best = (c, port.name, ms)
        return None if best is None else best[1:]

    def members(self, gi: int) -> list[int]:
        """The units gate ``self.gates[gi]`` may hold as one group, by the samples: the largest set
        M (a fixed point, shrunk from every unit no output or write saw) in which each unit moved,
        in the states with the gate at 0, only units of M, and none of them when the gate's next
        value was 1 (what z3 then proves for the group: its next values are claimed only then)."""
        n = len(self.units)
        inside = np.zeros(n + 1, dtype=bool)
        inside[:n] = ~self.seen[gi]
        inside[self.gates[gi]] = False
        while True:
            keep = inside[:n] & ~np.any(self.moves[gi][:, ~inside], axis=1) & ~np.any(self.moves_on[gi][:, inside], axis=1)
            if np.array_equal(keep, inside[:n]):
                return [u for u in range(n) if keep[u]]
            inside[:n] = keep

    def _test(self, states, mems, inputs) -> None:
        """The perturbation test on base states ``states`` (rows x state, object), ``mems`` (per
        memory, rows x words), ``inputs`` ({port: row values}): one lane per (row, unit) with that
        unit drawn at random, and one lane with the row as it is; ``seen``, ``moves``, ``moves_on``,
        ``zeros`` and the tail counts updated."""
        from netlist2tf.sim import Simulator

        nl, units, n = self.netlist, self.units, len(self.units)
        per = max(1, LANES // (n + 1))
        if self._tester is None:
            ports = _probe_ports([x for m in nl.memories for wp in m.write_ports for x in (wp.enable[0], *wp.addr, *wp.data)])
            sim = Simulator(dataclasses.replace(nl, ports=nl.ports + ports), batch=per * (n + 1))
            member = np.zeros((len(self.run.state_names), n + 1), dtype=np.float32)
            member[:, n] = 1.0                  # the last column: registers outside every unit
            for u, unit in enumerate(units):
                member[list(unit.states), u] = 1.0
                member[list(unit.states), n] = 0.0
            self._tester = (sim, ports, member)
        sim, ports, member = self._tester
        known = {p.name for p in sim.input_ports}
        widths = [_state_width(nl, name) for name in self.run.state_names]
        writes = [(m.name in self.settings.gated_writes, wp) for m in nl.memories for wp in m.write_ports]
        total = len(states)
        shape = (per, n + 1)
        base_rows = np.arange(per) * (n + 1) + n
        for lo in range(0, total, per):
            idx = np.arange(lo, lo + per) % total
            take = min(per, total - lo)
            lanes = np.repeat(states[idx], n + 1, axis=0)
            for u, unit in enumerate(units):
                rows = np.arange(per) * (n + 1) + u
                for k in unit.states:
                    lanes[rows, k] = [_random_value(self.rng, widths[k]) for _ in rows]
            sim.set_lane_state([lanes[:, k] for k in range(lanes.shape[1])],
                               [np.repeat(m[idx], n + 1, axis=0) for m in mems])
            out = sim.step({name: np.repeat(v[idx], n + 1) for name, v in inputs.items() if name in known})
            nxt = sim.lane_state()[0]

            def differs(values):
                v = np.asarray(values).reshape(shape)
                return v[:, :n] != v[:, n:]
            other = np.zeros((per, n), dtype=bool)
            for p in nl.outputs:
                d = differs(out[p.name])
                if p.name in self.out_gate_of:
                    d &= (np.asarray(out[self.out_gate_of[p.name]]).reshape(shape)[:, n:] == 1)
                other |= d
            net_value = _net_reader(out, ports)
            for gated, wp in writes:
                en = net_value(wp.enable[0]).reshape(shape)
                other |= en[:, :n] != en[:, n:]
                for sig in (wp.addr, wp.data):
                    d = np.zeros((per, n), dtype=bool)
                    for net in sig:
                        d |= differs(net_value(net))
                    other |= d & (en[:, n:] == 1) if gated else d
            diff = np.stack([differs(v) for v in nxt]).astype(np.float32)      # (state, per, n)
            moved = np.einsum("spu,sv->puv", diff, member) > 0                # (per, n, n + 1)
            changed = np.stack([np.asarray(nxt[k])[base_rows][:take] != lanes[base_rows, k][:take]
                                for k in range(lanes.shape[1])]).astype(np.float32)   # (state, take)
            unit_moved = np.einsum("sp,su->pu", changed, member[:, :n]) > 0             # (take, n)
            for oi, port in enumerate(self.out_gates):
                off = np.asarray(out[port.name]).reshape(-1)[base_rows][:take] == 0
                self.off_samples[oi] += int(off.sum())
                self.moved_while_off[oi] |= np.any(unit_moved[off], axis=0)
            for gi, k in enumerate(self.gates):
                s = units[k].states[0]
                g0 = np.asarray(lanes[base_rows, s], dtype=object)[:take] == 0
                gn = np.asarray(nxt[s])[base_rows][:take] == 1
                self.zeros[gi] += int(g0.sum())
                self.seen[gi] |= np.any(other[:take][g0], axis=0)
                self.moves[gi] |= np.any(moved[:take][g0], axis=0)
                self.moves_on[gi] |= np.any(moved[:take][g0 & gn], axis=0)
        self.samples += total


def _registers_outside(netlist: Netlist, settings: CompileSettings) -> bool:
    """A register outside every hand-written group (a gated write group needs one: its last chunk
    commits the writes)."""
    grouped = {n for spec in resolve_groups(netlist, settings.gated, (), settings.held) if spec.kind == "reg"
               for n in spec.members}
    return any(n not in grouped for r in netlist.registers for n in r.q)


def _net_reader(out: dict, ports):
    where = {n: (p.name, i) for p in ports for i, n in enumerate(p.bits)}

    def value(net):
        name, i = where[net]
        return _bit(out[name], i)
    return value


def _state_width(netlist: Netlist, name: str) -> int:
    regs = {f"reg:{r.name}": r.width for r in netlist.registers}
    if name in regs:
        return regs[name]
    raise Netlist2TFError(f"token economy: state {name} is not a register (a synchronous read port); "
                          f"compile the netlist of a compile flow")


def _random_value(rng, width: int) -> int:
    v = 0
    for lo in range(0, width, 32):
        v |= int(rng.integers(0, 1 << min(32, width - lo))) << lo
    return v
