"""The engines a program runs on, by name (``cpu run --engine``, ``cpu check``, the chat's tools): the
reference machine (unicorn), the core's netlist simulator, and the compiled model."""

from netlist2tf.common import Netlist2TFError

from .machine import DEFAULT_RAM_SIZE


def model_dtype(given: str | None) -> tuple[str, str]:
    """(dtype, why) of the model engine: the one given, else what this machine runs fastest
    (netlist2tf.common.hardware.default_dtype: bfloat16 only with bfloat16 matrix instructions)."""
    from netlist2tf.common import default_dtype
    return (given, "--dtype") if given else default_dtype("cpu")


def _run_unicorn(image, ram_size, max_steps, trace):
    from .unicorn_ref import run_unicorn
    return run_unicorn(image, ram_size=ram_size, max_steps=max_steps, trace=trace)


def _run_netlist(image, ram_size, max_steps, trace):
    from .netlist_engine import run_netlist
    return run_netlist(image, ram_size=ram_size, max_steps=max_steps, trace=trace)


def _run_model(image, ram_size, max_steps, trace, dtype=None, batch=1, prefill=True,
               decoding="speculative", threads=None, checkpoint=None, executor="stock", text_prefix=0):
    """``decoding``: "speculative" (the netlist simulator drafts, the model verifies every token in long
    forward calls; plain generation if it rejects one), "plain" (token-by-token greedy generation) or
    "teacher-forced" (like speculative, but a rejected token is an error: a check of the model)."""
    from .model_engine import check_model_batch, run_model_batch, run_model_speculative
    images, dtype = [image] * batch, model_dtype(dtype)[0]
    if not (executor == "fast" and decoding == "plain"):   # the fast executor's generation needs no torch
        import torch
        dtype = getattr(torch, dtype)
    from netlist2tf.common import build_dir
    progress = build_dir() / "teacher-forced"
    if decoding == "teacher-forced":
        results = check_model_batch(images, ram_size, max_steps, trace, dtype=dtype, threads=threads or 1,
                                    resume_dir=progress, checkpoint=checkpoint, executor=executor,
                                    text_prefix=text_prefix)
    elif decoding == "speculative":
        results = run_model_speculative(images, ram_size, max_steps, trace, dtype=dtype, threads=threads or 1,
                                        resume_dir=progress, checkpoint=checkpoint, executor=executor,
                                        text_prefix=text_prefix)
    else:
        results = run_model_batch(images, ram_size, max_steps, trace, dtype=dtype, prefill=prefill,
                                  checkpoint=checkpoint, executor=executor, text_prefix=text_prefix)
    first = results[0]
    for row, r in enumerate(results[1:], 1):
        if (r.console, r.halt, r.records) != (first.console, first.halt, first.records):
            raise Netlist2TFError(f"batch row {row} ran the same program differently from row 0")
    first.batch = batch
    first.dtype = str(dtype).split(".")[-1]
    first.decoding = getattr(first, "decoding", decoding)
    return first


# name -> function(image, ram_size, max_steps, trace) -> RunResult
ENGINES = {
    "unicorn": _run_unicorn,
    "netlist": _run_netlist,
    "model": _run_model,
}


def default_ram_size(engine: str, checkpoint=None) -> int:
    """The RAM a program is linked for when --ram-size is not given: for ``model`` with a
    ``checkpoint``, the RAM that checkpoint's CPU was compiled with; the model engine's and every
    other engine's default otherwise (the same 64 KiB)."""
    if engine == "model":
        from .model_engine import MODEL_RAM_SIZE, checkpoint_ram_size
        return (checkpoint_ram_size(checkpoint) if checkpoint else None) or MODEL_RAM_SIZE
    return DEFAULT_RAM_SIZE
