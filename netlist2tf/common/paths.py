"""Where netlist2tf keeps what it builds: one place, whatever the current directory.

``build_dir()`` is, in order: the ``--build-dir`` given, ``$NETLIST2TF_BUILD_DIR``, the project's own
``build/`` (a source checkout: the folder beside ``netlist2tf/`` holding ``pyproject.toml``), or
``$XDG_CACHE_HOME/netlist2tf`` (``~/.cache/netlist2tf``) for an installed package. The synthesis cache
(``synth/``), the C toolchain's cache (``cpu/``), the compiled CPU (``cpu-model/``), the default base
(``base/``), saved teacher-forcing progress (``teacher-forced/``), the fast executor's kernel and
images (``fast/``), checkpoints' parsed trace sides (``trace-side/``), z3 proofs already made
(``proofs/``) and the default output folders
(``compiled/``, ``reports/``, ``merged/``) live under it, so ``cpu run`` from another folder reuses the
same 1.8 GB checkpoint instead of building a second one there.
"""

import functools
import hashlib
import os
from pathlib import Path

ENV = "NETLIST2TF_BUILD_DIR"
# the folders under it that the commands manage themselves (never an --out)
CACHES = ("synth", "cpu", "cpu-model", "base", "teacher-forced", "fast", "trace-side", "proofs")
PROJECT_ROOT = Path(__file__).resolve().parents[2]      # netlist2tf/common/paths.py -> the checkout


def build_dir(given=None) -> Path:
    if given:
        return Path(given)
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    if (PROJECT_ROOT / "pyproject.toml").is_file() and (PROJECT_ROOT / "netlist2tf").is_dir():
        return PROJECT_ROOT / "build"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "netlist2tf"


def prune_cache(folder, suffix: str, keep: int, max_bytes: int | None = None) -> None:
    """Delete the oldest files named ``*SUFFIX`` directly in the cache ``folder`` (by modification
    time; a use touches a file) beyond the newest ``keep``, or beyond ``max_bytes`` in all. Only for
    folders netlist2tf manages itself; files it cannot delete stay."""
    try:
        files = sorted((f for f in Path(folder).iterdir() if f.name.endswith(suffix) and f.is_file()),
                       key=lambda f: f.stat().st_mtime_ns, reverse=True)
    except OSError:
        return
    total = 0
    for i, f in enumerate(files):
        try:
            total += f.stat().st_size
            if i >= keep or (max_bytes is not None and total > max_bytes and i > 0):
                f.unlink()
        except OSError:
            pass


@functools.cache
def source_digest() -> str:
    """The sha256 of netlist2tf's own sources (every .py, .json and .c file of the package), once per
    process: what a cache of derived results (a checkpoint's parsed trace side, a proof) was made by."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for f in sorted([*root.rglob("*.py"), *root.rglob("*.json"), *root.rglob("*.c")]):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()
