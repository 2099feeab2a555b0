"""The one compile driver: a netlist and its ``CompileSettings`` -> a compiled model.

``compile_netlist`` runs the stages in one order for every caller (``netlist2tf compile``, the CPU
model engine, the bench scripts): keep only the outputs asked for, prove the gated group harmless
on that netlist (the one the model computes), plan (``netlist2tf.plan``), write the weights
(``netlist2tf.assemble.write_weights``). ``--check-fit`` and the report stop after the plan
(``plan_model``).
"""

import time

from .errors import Netlist2TFError
from .graph import keep_outputs
from .plan import CompileSettings, plan_model


def prove_gating(netlist, settings: CompileSettings, log=None, strict: bool = False) -> str | None:
    """Prove with z3 (``netlist2tf.formal.prove_gated``) that ``settings.gated``'s group does not
    matter while its gate is 0, on the netlist the model computes (only ``settings.outputs`` kept).
    Returns a one-line summary (None without a gated group). A counterexample raises
    Netlist2TFError; a netlist the prover cannot model is a warning (``log``) unless ``strict``."""
    from .formal import prove_gated

    if settings.gated is None:
        return None
    gate, group = settings.gated
    what = f"{gate}:{','.join(group)}"
    model_netlist = keep_outputs(netlist, settings.outputs) if settings.outputs is not None else netlist
    t0 = time.perf_counter()
    try:
        cex = prove_gated(model_netlist, gate, group)
    except Netlist2TFError as exc:
        if strict:
            raise
        msg = f"warning: gated group {what} is not proved ({exc}); only `netlist2tf verify` checks it"
        (log or (lambda m: None))(msg)
        return msg
    if cex is not None:
        raise Netlist2TFError(f"gated group {what}: the group matters while {gate} is 0, so the model's stale "
                              f"values would change the trace: {cex}. Leave the registers involved out of "
                              f"the group (or gate on a register that is 1 whenever they are used)")
    msg = f"gated group {what}: proved that the group does not matter while {gate} is 0 (z3, " \
          f"{time.perf_counter() - t0:.1f} s)"
    (log or (lambda m: None))(msg)
    return msg


def compile_netlist(netlist, settings: CompileSettings, log=None, prove: bool = True, strict: bool = False,
                    step=None):
    """Prove (``prove_gating``, unless ``prove`` is False), plan and write the weights of
    ``netlist``: the ``Compiled`` model (``assemble.Compiled``; its ``plan`` attached). ``step``:
    called with a short description before each stage (progress for long compiles)."""
    from .assemble import write_weights

    step = step or (lambda what: None)
    if prove and settings.gated is not None:
        step("proving with z3 that the gated group does not matter while its gate is 0")
        prove_gating(netlist, settings, log, strict)
    step("scheduling the netlist onto the layers and planning the model")
    plan = plan_model(netlist, settings)
    step(f"writing the weights ({plan.stats['parameters'] / 1e6:.0f} M parameters)")
    return write_weights(plan)
