"""The one compile driver: a netlist and its ``CompileSettings`` -> a compiled model.

``compile_netlist`` runs the stages in one order for every caller (``netlist2tf compile``, the CPU
model engine, the bench scripts): keep only the outputs asked for, prove the gated group harmless
on that netlist (the one the model computes), plan (``netlist2tf.compile.plan``), write the weights
(``netlist2tf.weights.assemble.write_weights``). ``--check-fit`` and the report stop after the plan
(``plan_model``).
"""

import time

from netlist2tf.common import Netlist2TFError
from netlist2tf.netlist import keep_outputs
from netlist2tf.compile import CompileSettings, plan_model


def prove_gating(netlist, settings: CompileSettings, log=None, strict: bool = False) -> str | None:
    """Prove with z3 (``netlist2tf.netlist.formal.prove_groups``) that each gated register group of
    ``settings`` does not matter while its gate is 0, on the netlist the model computes (only
    ``settings.outputs`` kept), with the output groups and gated writes skipped as the model skips
    them. Returns a one-line summary (None without a register group). A counterexample raises
    Netlist2TFError; a netlist the prover cannot model is a warning (``log``) unless ``strict``."""
    model_netlist = keep_outputs(netlist, settings.outputs) if settings.outputs is not None else netlist
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
    """What a proof depends on: the netlist (its repr: every cell, net and port), the groups, the
    gated writes, and the prover (netlist2tf's sources, z3's version)."""
    import hashlib
    import importlib.metadata

    from netlist2tf.common import source_digest

    h = hashlib.sha256(repr(model_netlist).encode())
    h.update(repr((settings.gated, settings.held, settings.gated_writes)).encode())
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


def compile_netlist(netlist, settings: CompileSettings, log=None, prove: bool = True, strict: bool = False,
                    step=None, out=None, netlist_json: str | None = None, dtype=None, record=None,
                    force: bool = False):
    """Prove (``prove_gating``, unless ``prove`` is False), plan and write the weights of
    ``netlist``: the ``Compiled`` model (``netlist2tf.weights.Compiled``; its ``plan`` attached).
    With ``out``, also write it there as a checkpoint folder (``netlist2tf.checkpoint.emit_checkpoint``:
    ``netlist_json`` is the Yosys JSON it was read from, kept beside the weights; ``dtype`` the weights'
    (float32 when None); ``record`` what compile.json records of how it was made; ``force`` replaces a
    folder that is not one of ours). ``step``: called with a short description before each stage
    (progress for long compiles)."""
    from netlist2tf.weights import write_weights

    step = step or (lambda what: None)
    if prove and (settings.gated or settings.held):
        step("proving with z3 that the gated group does not matter while its gate is 0")
        prove_gating(netlist, settings, log, strict)
    step("scheduling the netlist onto the layers and planning the model")
    plan = plan_model(netlist, settings)
    step(f"writing the weights ({plan.stats['parameters'] / 1e6:.0f} M parameters)")
    compiled = write_weights(plan)
    if out is not None:
        import torch

        from netlist2tf.checkpoint import emit_checkpoint

        if netlist_json is None:
            raise ValueError("compile_netlist(out=...) needs netlist_json, the Yosys JSON the netlist was read from")
        step("writing the checkpoint")
        emit_checkpoint(compiled, netlist_json, out, dtype or torch.float32, settings=record, force=force)
    return compiled
