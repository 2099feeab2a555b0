"""What the machine can do, chosen once and said once: the dtype a model runs in, transformers kept
quiet, progress shown honestly.

* ``default_dtype(device)``: bfloat16 where the CPU has bfloat16 matrix instructions (x86
  ``avx512_bf16`` or ``amx_bf16``, Arm ``bf16``) or on a GPU, float32 elsewhere. Measured: on a Xeon
  with AMX/avx512_bf16 bfloat16 was 2.4x faster than float32 (bench/model_speed.py); on an AMD EPYC
  without them 3-4x SLOWER (speculative hi-loop 8.6 against 33.0 tokens/s). The compiled models are
  exact in both, so this is a speed choice only; the reason is returned for the command to print.
* ``quiet_transformers()``: no weight-loading bars, and transformers' note that its DeltaNet kernels
  fall back to the reference PyTorch path (true of every CPU run: our CLIs say it once instead).
* ``Progress``: a tqdm bar on a terminal (after ``min_seconds``); when stderr is not a terminal (a log,
  CI), one plain line after 10 s and then every ``every`` seconds with the same figures (no carriage
  returns).
"""

import logging
import platform
import sys
import time
from contextlib import contextmanager


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key = line.split(":", 1)[0].strip().lower()
                if key in ("flags", "features"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")


def default_dtype(device: str = "cpu") -> tuple[str, str]:
    """(dtype name, why) for running a compiled model on ``device``."""
    if str(device).startswith("cuda"):
        return "bfloat16", "a GPU"
    found = [f for f in BF16_FLAGS if f in _cpu_flags()]
    if found:
        return "bfloat16", f"this CPU has bfloat16 matrix instructions ({', '.join(found)})"
    return "float32", (f"this CPU ({platform.machine()}) has no bfloat16 matrix instructions (no "
                       f"{'/'.join(BF16_FLAGS)}), where bfloat16 is several times slower")


class _DropKernelNotes(logging.Filter):
    def filter(self, record):
        return "falling back to its reference PyTorch implementation" not in record.getMessage()


_FILTER = _DropKernelNotes()


def drop_kernel_notes() -> None:
    """Stop transformers' per-kernel "falling back to its reference PyTorch implementation" notes."""
    for name in ("transformers.integrations.hub_kernels", "transformers"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
        for h in logger.handlers:
            if _FILTER not in h.filters:
                h.addFilter(_FILTER)


@contextmanager
def quiet_transformers():
    """No loading bars inside the block; the kernel notes dropped from then on."""
    from transformers.utils import logging as hf_logging

    drop_kernel_notes()
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def where_it_runs(device: str, dtype: str, why: str, threads: int) -> str:
    """One line saying what runs where (printed once per command)."""
    import torch

    kernels = "" if str(device).startswith("cuda") else ("; DeltaNet by transformers' reference PyTorch "
                                                         "path (flash-linear-attention is for GPUs)")
    return (f"model: {device}, {dtype} ({why}), {threads} torch thread{'s' * (threads != 1)}, torch "
            f"{torch.__version__}{kernels}")


def available_memory() -> int | None:
    """Bytes of memory this process can still take: the kernel's MemAvailable, less where a cgroup
    limit (a container's) leaves less; None where neither can be read."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        pass
    for limit, used in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit) as f:
                text = f.read().strip()
            if text == "max":
                continue
            with open(used) as f:
                room = int(text) - int(f.read().strip())
        except (OSError, ValueError):
            continue
        if room < (1 << 50):             # cgroup v1 says "no limit" with a huge number
            avail = room if avail is None else min(avail, room)
    return avail


def gigabytes(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.0f} MB"


class Progress:
    """``update(n)`` as work is done; ``close()``. A tqdm bar on a terminal, else a plain line every
    ``every`` seconds: done/total, rate and the remaining time at the rate so far."""

    def __init__(self, total: int, unit: str, desc: str, every: float = 30.0, file=None, min_seconds: float = 3.0):
        self.total, self.unit, self.desc, self.every = total, unit, desc, every
        self.file = file or sys.stderr
        self.done, self.t0, self.last = 0, time.perf_counter(), time.perf_counter()
        self.bar = None
        if self.file.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit=unit, desc=desc, file=self.file, delay=min_seconds,
                            dynamic_ncols=True, smoothing=0.05)

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
            return
        now = time.perf_counter()
        # the first line after 10 s (a run that long deserves a word), then one every ``every``
        if now - self.last >= (min(self.every, 10.0) if self.last == self.t0 else self.every):
            self.last = now
            print(self.line(now), file=self.file, flush=True)

    def line(self, now=None) -> str:
        dt = (now or time.perf_counter()) - self.t0
        rate = self.done / dt if dt > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 and self.total else None
        eta = "" if left is None else f", about {_duration(left)} left at this rate"
        total = f"/{self.total:,}" if self.total else ""
        return f"{self.desc}: {self.done:,}{total} {self.unit}s, {rate:,.1f} {self.unit}s/s{eta}"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"
