"""The one compile driver: a netlist and its ``CompileSettings`` -> a compiled model.

``compile_netlist`` runs the stages in one order for every caller (``netlist2tf compile``, the CPU
model engine, the bench scripts): keep only the outputs asked for, prove the gated group harmless
on that netlist (the one the model computes), plan (``netlist2tf.compile.plan``), write the weights
(``netlist2tf.weights.assemble.write_weights``). ``--check-fit`` and the report stop after the plan
(``plan_model``).
"""

import dataclasses
import time

from netlist2tf.common import Netlist2TFError
from netlist2tf.netlist import keep_outputs
from netlist2tf.compile import CompileSettings, plan_model


def prove_gating(netlist, settings: CompileSettings, log=None, strict: bool = False, proved=()) -> str | None:
    """Prove with z3 (``netlist2tf.netlist.formal.prove_groups``) that each gated register group of
    ``settings`` does not matter while its gate is 0, on the netlist the model computes (only
    ``settings.outputs`` kept), with the output groups and gated writes skipped as the model skips
    them. Returns a one-line summary (None without a register group). A counterexample raises
    Netlist2TFError; a netlist the prover cannot model is a warning (``log``) unless ``strict``.
    ``proved``: register groups ((GATE, MEMBERS), ...) proved alone already (``find_economy``): left
    out here (groups proved apart hold together: ``prove_groups_apart``)."""
    model_netlist = keep_outputs(netlist, settings.outputs) if settings.outputs is not None else netlist
    if proved:
        done = {(g, tuple(m)) for g, m in proved}
        settings = dataclasses.replace(settings, gated=tuple(g for g in settings.gated if (g[0], tuple(g[1])) not in done))
    cached, key = _proved_before(model_netlist, settings)
    if cached is not None:
        for msg in cached:
            (log or (lambda m: None))(f"{msg} [proved before for this same netlist, groups and prover: reused]")
        return "; ".join(cached) or None
    result, messages = _prove_gating(model_netlist, settings, log, strict)
    if not any(m.startswith("warning") for m in messages):
        _remember_proof(key, messages)
    return result


def _proof_key(model_netlist, settings: CompileSettings) -> str:
    """What a proof depends on: the netlist, the groups and the gated writes (``_cache_key``)."""
    return _cache_key(model_netlist, settings.gated, settings.held, settings.gated_writes)


def _cache_key(model_netlist, *parts) -> str:
    """A cache key of a result about ``model_netlist`` (a proof, a token economy): its repr (every
    cell, net and port), ``parts``, and the prover (netlist2tf's sources, z3's version)."""
    import hashlib
    import importlib.metadata

    from netlist2tf.common import source_digest

    h = hashlib.sha256(repr(model_netlist).encode())
    h.update(repr(parts).encode())
    h.update(f"\0{source_digest()}\0{importlib.metadata.version('z3-solver')}".encode())
    return h.hexdigest()[:24]


def _proved_before(model_netlist, settings):
    """(the messages of an earlier proof of the same key, or None; the key) from BUILD/proofs/."""
    import json

    from netlist2tf.common import build_dir

    if not (settings.gated or settings.held):
        return None, None
    key = _proof_key(model_netlist, settings)
    try:
        messages = json.loads((build_dir() / "proofs" / f"{key}.json").read_text())
        if isinstance(messages, list) and all(isinstance(m, str) for m in messages):
            return messages, key
    except (OSError, ValueError):
        pass
    return None, key


def _remember_proof(key, messages) -> None:
    import json

    from netlist2tf.common import build_dir, prune_cache, write_file

    if key is None:
        return
    folder = build_dir() / "proofs"
    try:
        write_file(folder / f"{key}.json", json.dumps(messages), "the proof cache")
    except (OSError, Netlist2TFError):
        return                      # a read-only build folder: proved again next time
    prune_cache(folder, ".json", 256)


def _prove_gating(model_netlist, settings: CompileSettings, log, strict: bool):
    """(prove_gating's summary, the messages logged)."""
    from netlist2tf.compile import resolve_groups

    kinds = [spec.kind for spec in resolve_groups(model_netlist, settings.gated, (), settings.held)]
    if not settings.gated and not settings.held:
        return None, []
    reg = [g for g, kind in zip(settings.gated, kinds) if kind == "reg"]
    out = [g for g, kind in zip(settings.gated, kinds) if kind == "out"]
    held_msgs = [_prove_held(model_netlist, h, log, strict) for h in settings.held]
    if not reg:
        return "; ".join(held_msgs) or None, held_msgs
    what = " ".join(f"{gate}:{','.join(group)}" for gate, group in reg)
    gates = reg[0][0] if len(reg) == 1 else "its gate"
    t0 = time.perf_counter()
    try:
        cex = prove_groups_apart(model_netlist, reg, out, settings.gated_writes)
    except Netlist2TFError as exc:
        if strict:
            raise
        msg = f"warning: gated group {what} is not proved ({exc}); only `netlist2tf verify` checks it"
        (log or (lambda m: None))(msg)
        return msg, [msg, *held_msgs]
    if cex is not None:
        raise Netlist2TFError(f"gated group {what}: the group matters while {gates} is 0, so the model's stale "
                              f"values would change the trace: {cex}. Leave the registers involved out of "
                              f"the group (or gate on a register that is 1 whenever they are used)")
    msg = f"gated group {what}: proved that the group does not matter while {gates} is 0 (z3, " \
          f"{time.perf_counter() - t0:.1f} s)"
    (log or (lambda m: None))(msg)
    return "; ".join([msg, *held_msgs]), [msg, *held_msgs]


def prove_groups_apart(model_netlist, reg, out=(), gated_writes=()):
    """``formal.prove_groups`` for the register groups ``reg``, one group at a time (every other
    register shared and claimed), with one query for all of them together only when a group fails
    alone. Sound: proved apart, the groups hold together too. Take two states that differ only in
    groups whose gates are 0 and walk from one to the other one group at a time; each step changes
    one group with its gate at 0, which its own proof covers, and every condition of a claim (an
    output group's gate, a write enable, a gate's next value) is an unconditional claim of every
    proof, so it holds all along the walk. Apart, n groups cost n queries; together 2**n - 1."""
    from netlist2tf.netlist import prove_groups

    if len(reg) > 1 and all(prove_groups(model_netlist, [g], out, gated_writes) is None for g in reg):
        return None
    return prove_groups(model_netlist, reg, out, gated_writes)


def _prove_held(model_netlist, held, log, strict: bool) -> str:
    """``formal.prove_held`` for one held group (GATE, DIRTY, MEMBERS) of the settings."""
    from netlist2tf.netlist import prove_held

    gate, dirty, members = held
    what = f"{gate}:{dirty}:{','.join(members)}"
    t0 = time.perf_counter()
    try:
        cex = prove_held(model_netlist, gate, dirty, members)
    except Netlist2TFError as exc:
        if strict:
            raise
        msg = f"warning: held group {what} is not proved ({exc}); only `netlist2tf verify` checks it"
        (log or (lambda m: None))(msg)
        return msg
    if cex is not None:
        raise Netlist2TFError(f"held group {what}: {cex}, so a skipped frame would leave a stale value in "
                              f"the row the next frame reads. Make {gate} 1 in every cycle that changes the "
                              f"group" + (f" and in the cycle after it ({dirty} 1 after a cycle that changed it)"
                                          if dirty else ""))
    msg = f"held group {what}: proved that the group is unchanged " + \
        ("for two cycles " if dirty else "") + f"while {gate} is 0 (z3, {time.perf_counter() - t0:.1f} s)"
    (log or (lambda m: None))(msg)
    return msg


PLANS_KEPT, PLANS_BYTES = 16, 1 << 30      # the plan cache: the newest 16, at most 1 GiB


def planned(netlist, settings: CompileSettings, build=None):
    """``plan_model(netlist, settings)``, kept under BUILD/plans/ (a pickle) by the netlist, the settings
    and netlist2tf's sources: a rebuild of a design whose netlist and settings did not change (an
    edit elsewhere, another output folder, a dtype) reads its plan instead of scheduling it again.
    A cache file that cannot be read is planned again; a plan that fails is not kept."""
    import pickle

    from netlist2tf.common import build_dir, prune_cache, write_file
    from netlist2tf.compile import ModelPlan

    path = build_dir(build) / "plans" / f"{_cache_key(netlist, repr(settings), 'plan')}.pickle"
    try:
        plan = pickle.loads(path.read_bytes())
        if isinstance(plan, ModelPlan):
            path.touch()                    # recently used: pruned last
            return plan
    except Exception:                       # missing, cut short, or from another version: plan again
        pass
    plan = plan_model(netlist, settings)
    try:
        write_file(path, pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL), "the plan cache")
        prune_cache(path.parent, ".pickle", PLANS_KEPT, PLANS_BYTES)
    except (OSError, Netlist2TFError, pickle.PicklingError, TypeError, AttributeError):
        pass
    return plan


#: the peak memory of writing a model's weights and checkpoint, in float32 copies of the model (the pair
#: model before it is folded, float64 where a weight is not a small multiple of 1/4, the file), from the
#: 64 KiB CPU's measured peak (docs/results.md "Compiling"), so 3 and 0.5 GB more
WRITE_COPIES, WRITE_BASE = 3, 1 << 29


def check_memory(plan) -> None:
    """Refuse, before any weight is written, a model this machine's memory cannot hold while it is
    written (``WRITE_COPIES``): one clear error instead of the kernel killing the compile."""
    from netlist2tf.common import available_memory, gigabytes

    avail = available_memory()
    params = plan.stats["parameters"]
    need = WRITE_COPIES * 4 * params + WRITE_BASE
    if avail is None or need <= avail:
        return
    t = plan.target
    raise Netlist2TFError(f"the compiled model has {params:,} parameters ({t.num_layers} layers, hidden size "
                          f"{plan.stats['hidden_size']}, FFN intermediate size {plan.stats['intermediate_size']}): "
                          f"writing it needs about {gigabytes(need)} of memory, more than the {gigabytes(avail)} "
                          f"available. Give it fewer layers if the logic fits (`--check-fit` says), shorten the "
                          f"design's deepest paths (pipeline registers) so that it fits in fewer, or compile on a "
                          f"machine with more memory")


def compile_netlist(netlist, settings: CompileSettings, log=None, prove: bool = True, strict: bool = False,
                    step=None, out=None, netlist_json: str | None = None, dtype=None, record=None,
                    force: bool = False, proved=(), build=None, plan_cache: bool = False):
    """Prove (``prove_gating``, unless ``prove`` is False), plan and write the weights of
    ``netlist``: the ``Compiled`` model (``netlist2tf.weights.Compiled``; its ``plan`` attached).
    With ``out``, also write it there as a checkpoint folder (``netlist2tf.checkpoint.emit_checkpoint``:
    ``netlist_json`` is the Yosys JSON it was read from, kept beside the weights; ``dtype`` the weights'
    (float32 when None); ``record`` what compile.json records of how it was made; ``force`` replaces a
    folder that is not one of ours). ``step``: called with a short description before each stage
    (progress for long compiles). ``proved``: groups ``find_economy`` proved (not proved again).
    ``plan_cache``: keep the plan for a rebuild and reuse a kept one (``planned``; ``build``: the build
    folder, default ``build_dir()``); the command line's compile does, a library call plans afresh
    (a caller may have changed what the key does not hold: a module's constant)."""
    from netlist2tf.weights import write_weights

    step = step or (lambda what: None)
    if prove and (settings.gated or settings.held):
        step("proving with z3 that the gated group does not matter while its gate is 0")
        prove_gating(netlist, settings, log, strict, proved)
    step("scheduling the netlist onto the layers and planning the model")
    plan = planned(netlist, settings, build) if plan_cache else plan_model(netlist, settings)
    check_memory(plan)
    step(f"writing the weights ({plan.stats['parameters'] / 1e6:.0f} M parameters)")
    compiled = write_weights(plan)
    if out is not None:
        from netlist2tf.checkpoint import emit_checkpoint

        if netlist_json is None:
            raise ValueError("compile_netlist(out=...) needs netlist_json, the Yosys JSON the netlist was read from")
        step("writing the checkpoint")
        emit_checkpoint(compiled, netlist_json, out, dtype, settings=record, force=force, netlist=netlist)
    return compiled


# -- the token economy found automatically (netlist2tf.compile.economy) ---------------------------

@dataclasses.dataclass(frozen=True)
class Economy:
    """What ``find_economy`` found for a design: ``settings`` with the groups it proved added (what
    the compile uses); ``groups``: each group found, as a dict (kind, gate, members, proof, share of
    the simulated frames that emit it); ``refuted``: register groups z3 refuted (gate, members,
    counterexample), none of them used; ``before``/``after``: the frame cost (``FrameCost``) over
    the simulated run with the hand-written groups only and with the groups found too."""
    settings: CompileSettings
    groups: tuple
    refuted: tuple
    before: object
    after: object

    @property
    def proved(self) -> tuple:
        """The register groups ((GATE, MEMBERS), ...) it proved (``compile_netlist(proved=...)``)."""
        return tuple((g["gate"], tuple(g["members"])) for g in self.groups if g["kind"] == "reg")

    def record(self) -> dict:
        return {"groups": [dict(g) for g in self.groups], "refuted": [dict(r) for r in self.refuted],
                "frame_cost_before": self.before.record(), "frame_cost_after": self.after.record()}

    def summary(self) -> str:
        count = lambda kind: sum(1 for g in self.groups if g["kind"] == kind)        # noqa: E731
        parts = [f"{n} {what}" for n, what in ((count("reg"), "register group(s) proved and used"),
                                              (count("tail"), "tail group proved and used"),
                                              (count("write"), "write group(s) gated"),
                                              (count("fold"), "write port(s) folded"),
                                              (len(self.refuted), "group(s) refuted by z3, not used")) if n]
        return (f"token economy: {', '.join(parts) or 'no group found'}; {self.before.mean:.2f} -> "
                f"{self.after.mean:.2f} generated tokens per cycle (worst {self.before.worst} -> {self.after.worst})")


@dataclasses.dataclass(frozen=True)
class EconomyRun:
    """A run of the design's own use for the token economy's search, instead of random inputs:
    ``stimulus`` a JSON-lines file of inputs per cycle (``netlist2tf sim --stimulus``'s format),
    ``cycles`` how many cycles to run it, ``memories`` {memory: {address: word}} loaded first (a
    program image). The groups found are still proved by z3 for every state; the run only decides
    which are proposed and whether they pay (a gate random inputs keep at 1, like a CPU's "halted",
    that real use keeps at 0)."""
    stimulus: str | None = None
    cycles: int = 1024
    memories: tuple = ()            # ((memory, ((address, word), ...)), ...)

    @classmethod
    def of(cls, stimulus=None, cycles: int = 1024, memories: dict | None = None) -> "EconomyRun":
        return cls(None if stimulus is None else str(stimulus), cycles,
                   tuple(sorted((m, tuple(sorted(w.items()))) for m, w in (memories or {}).items())))

    def key(self) -> str:
        """What the run is, for the cache: the stimulus file's bytes, the cycles and the memories."""
        import hashlib
        from pathlib import Path

        h = hashlib.sha256(repr((self.cycles, self.memories)).encode())
        if self.stimulus is not None:
            h.update(Path(self.stimulus).read_bytes())
        return h.hexdigest()

    def simulate(self, model_netlist, seed: int):
        from netlist2tf.compile import simulate
        from netlist2tf.sim import FileStimulus, TableStimulus

        names = {m.name for m in model_netlist.memories}
        bad = sorted(m for m, _ in self.memories if m not in names)
        if bad:
            raise Netlist2TFError(f"--economy-memory names {', '.join(bad)}, which the design does not have "
                                  f"(its memories: {', '.join(sorted(names)) or 'none'})")
        stim = FileStimulus(self.stimulus) if self.stimulus is not None else TableStimulus({})
        return simulate(model_netlist, seed, batch=1, cycles=self.cycles,
                        memories=[{m: dict(words) for m, words in self.memories}], stimulus=stim,
                        samples_at=range(0, self.cycles, max(1, self.cycles // 256)))


def find_economy(netlist, settings: CompileSettings, log=None, seed: int = 0, build=None,
                 run: EconomyRun | None = None) -> Economy:
    """The groups ``netlist2tf.compile.economy.search`` finds on the model's netlist (only
    ``settings.outputs`` kept), each register group proved alone with z3 (as ``prove_groups_apart``
    proves them: proved alone, they hold together with the hand-written ones); a refuted group is
    reported with its counterexample and not used, and its members are tried one by one. Cached
    under BUILD/economy/ by netlist, settings, seed and the compiler's sources: a rebuild of an
    unchanged design finds nothing again (``build``: the build folder, default ``build_dir()``).
    ``run``: the design's own use (``EconomyRun``) instead of the random run."""
    import json

    from netlist2tf.common import build_dir, prune_cache, write_file
    from netlist2tf.compile import FrameCost

    say = log or (lambda m: None)
    model_netlist = keep_outputs(netlist, settings.outputs) if settings.outputs is not None else netlist
    key = _cache_key(model_netlist, settings.record(), seed, run.key() if run is not None else None)
    path = build_dir(build) / "economy" / f"{key}.json"
    try:
        rec = json.loads(path.read_text())
        eco = _economy_from_record(settings, rec, FrameCost)
        say(eco.summary() + " [found before for this same netlist and settings: reused]")
        return eco
    except (OSError, ValueError, KeyError, TypeError):
        pass
    eco = _find_economy(model_netlist, settings, say, seed, run)
    say(eco.summary())
    try:
        write_file(path, json.dumps(eco.record()), "the token economy cache")
        prune_cache(path.parent, ".json", 256)
    except (OSError, Netlist2TFError):
        pass
    return eco


def _economy_from_record(settings, rec, FrameCost) -> Economy:
    groups = tuple(dict(g) for g in rec["groups"])
    found = _with_groups(settings, groups)
    cost = lambda r: FrameCost(int(r["frames"]), float(r["generated_mean"]), int(r["generated_worst"]),   # noqa: E731
                               int(r["generated_best"]), int(r["input_tokens"]))
    return Economy(found, groups, tuple(dict(r) for r in rec["refuted"]), cost(rec["frame_cost_before"]),
                   cost(rec["frame_cost_after"]))


def _with_groups(settings, groups) -> CompileSettings:
    return dataclasses.replace(
        settings,
        held=tuple(settings.held) + tuple((g["gate"], "", tuple(g["members"])) for g in groups if g["kind"] == "tail"),
        gated=tuple(settings.gated) + tuple((g["gate"], tuple(g["members"])) for g in groups if g["kind"] == "reg"),
        gated_writes=tuple(settings.gated_writes) + tuple(g["members"][0] for g in groups if g["kind"] == "write"),
        folded_writes=tuple(settings.folded_writes) + tuple(g["members"][0] for g in groups if g["kind"] == "fold"))


ROUNDS = 6      # search, prove, learn from the counterexamples: at most this many times


def _find_economy(model_netlist, settings, say, seed, use=None) -> Economy:
    from netlist2tf.netlist import prove_groups
    from netlist2tf.compile import Search, frame_cost, protocol_of, resolve_groups, simulate

    random = simulate(model_netlist, seed)
    run = use.simulate(model_netlist, seed) if use is not None else random       # what prices the frames
    found = Search(model_netlist, settings, random, seed, use=run if use is not None else None)
    groups = [{"kind": "write", "gate": f"{m}.en", "members": [m], "proof": "exact by construction "
               "(a skipped write group commits the last word written again)"} for m in found.gated_writes]
    groups += [{"kind": "fold", "gate": f"{m}.data", "members": [m], "proof": "exact by construction "
                "(a skipped chunk commits as 0)"} for m in found.folded_writes]
    base = found.settings
    kinds = [spec.kind for spec in resolve_groups(model_netlist, settings.gated, (), settings.held)]
    out = [g for g, kind in zip(settings.gated, kinds) if kind == "out"]
    refuted, proved, avoid = [], {}, set()
    for _ in range(ROUNDS):
        # propose, prove each new group alone; a refuted group's counterexample states join the
        # search's tests, so the next proposal leaves out what mattered there
        fresh = [g for g in found.propose(frozenset(avoid)) if g not in proved]
        learned = []
        for gate, members in fresh:
            t0 = time.perf_counter()
            try:
                cex = prove_groups(model_netlist, [(gate, members)], out, base.gated_writes)
            except Netlist2TFError as exc:
                say(f"warning: token economy: the register groups cannot be proved ({exc}); none is used")
                fresh = []
                break
            if cex is None:
                proved[(gate, members)] = time.perf_counter() - t0
                continue
            avoid.add((gate, members))
            refuted.append({"gate": gate, "members": list(members), "counterexample": str(cex)})
            say(f"token economy: group {gate}:{','.join(members)} refuted by z3 ({'; '.join(cex.what)}); not used")
            learned += list(cex.states)
        if not learned:
            break
        found.add_states(learned)
    # the proved groups still worth it, in the order proved (``Search.better``)
    cost = lambda s: frame_cost(protocol_of(model_netlist, s), run)          # noqa: E731
    chosen = base
    for (gate, members), took in proved.items():
        trial = dataclasses.replace(chosen, gated=tuple(chosen.gated) + ((gate, members),))
        if any(set(members) & set(m) or gate in m or g in members for g, m in chosen.gated):
            continue                        # overlaps a group kept already (proposals of two rounds)
        try:
            ok = found.better(chosen, trial)
        except Netlist2TFError:
            continue
        if ok:
            chosen = trial
            share = float(run.values[_d_net(model_netlist, gate)].mean())
            groups.append({"kind": "reg", "gate": gate, "members": list(members), "share": round(share, 4),
                           "proof": f"z3: the group does not matter while {gate} is 0"})
            say(f"token economy: group {gate}:{','.join(members)} proved by z3 ({took:.1f} s) and used")
    chosen = _find_tail(model_netlist, found, chosen, groups, say)
    before, after = cost(settings), cost(chosen)
    return Economy(_with_groups(settings, groups), tuple(groups), tuple(refuted), before, after)


def _find_tail(model_netlist, found, chosen, groups, say):
    """``chosen`` with the tail group ``found.propose_tail`` proposes, if z3 proves it (``prove_held``
    without a dirty bit: the group is unchanged in every cycle whose gate output is 0); a refuted one
    is tried member by member. Adds its entry to ``groups``."""
    from netlist2tf.netlist import prove_held

    tail = found.propose_tail(chosen)
    if tail is None:
        return chosen
    gate, members = tail
    try:
        cex = prove_held(model_netlist, gate, "", members)
        if cex is not None:
            say(f"token economy: tail group {gate}:{','.join(members)} refuted by z3 ({cex}); trying its members one by one")
            members = tuple(m for m in members if prove_held(model_netlist, gate, "", (m,)) is None)
            if not members:
                return chosen
    except Netlist2TFError as exc:
        say(f"warning: token economy: the tail group cannot be proved ({exc}); not used")
        return chosen
    trial = dataclasses.replace(chosen, held=tuple(chosen.held) + ((gate, "", members),))
    if not found.better(chosen, trial):
        return chosen
    share = float(found.run.values[next(p.bits[0] for p in model_netlist.outputs if p.name == gate)].mean())
    groups.append({"kind": "tail", "gate": gate, "members": list(members), "share": round(share, 4),
                   "proof": f"z3: the group is unchanged in every cycle where the output {gate} is 0"})
    say(f"token economy: tail group {gate}:{','.join(members)} proved by z3 and used")
    return trial


def _d_net(netlist, name):
    sig = next(s for s in netlist.signals if s.name == name)
    return next(r.d[r.q.index(sig.bits[0])] for r in netlist.registers if sig.bits[0] in r.q)
