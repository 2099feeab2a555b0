"""Writing what the commands make, without ever losing what the user made.

Every file and folder a command writes goes through here:

* ``check_output_file`` / ``check_output_folder`` run BEFORE any slow work (synthesis, compiling,
  loading a model): the path must be writable, and an existing file or non-empty folder there must be
  one of ours (recognised by its contents: a checkpoint's ``compile.json``, a VCD written by
  netlist2tf, ...) unless the user passed ``--force``. A user's folder is never deleted and a user's
  file never overwritten: the command stops with one message naming the path and the fix.
* ``write_file`` writes beside the target and renames it into place; ``write_folder`` fills a new
  folder beside the target and swaps it in with two renames done with SIGINT/SIGTERM blocked (an
  interruption leaves the old folder, whole, or the new one; never half of either). Only then is the
  old folder removed, and only if it is ours.
* Written folders and files get ordinary permissions (0777/0666 less the umask), not the private
  0700/0600 of ``tempfile``: a checkpoint is meant to be shared.
"""

import fcntl
import json
import os
import shutil
import signal
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .errors import Netlist2TFError


class OutputError(Netlist2TFError):
    """An output path that cannot be written, or would replace something that is not ours."""


# -- what is ours ------------------------------------------------------------------------------------

def _json_file(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def ours_folder(folder: Path) -> str | None:
    """What kind of netlist2tf folder ``folder`` is ("checkpoint", "merged checkpoint", "report",
    "base model"), or None if it is not one of ours."""
    folder = Path(folder)
    merge = _json_file(folder / "merge.json")
    if merge is not None and "trace_token_offset" in merge:
        return "merged checkpoint"
    meta = _json_file(folder / "compile.json")
    if meta is not None and "format" in meta and "chunk_bits" in meta:
        return "checkpoint"
    report = _json_file(folder / "report.json")
    if report is not None and "per_layer" in report and (folder / "report.html").is_file():
        return "report"
    if (_json_file(folder / "netlist2tf.json") or {}).get("made_by") == "netlist2tf":
        return "base model"
    return None


def first_line(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.readline(4096).decode("utf-8", "replace")
    except OSError:
        return ""


# recognisers of the single files the commands write, by kind
FILE_KINDS = {
    "vcd": lambda p: "netlist2tf" in _head(p, 512),
    "netlist": lambda p: '"creator": "Yosys' in _head(p, 512),
    "jsonl": lambda p: (lambda line: line.startswith("{") and _is_json(line))(first_line(p).strip()),
    "trace": lambda p: first_line(p).startswith("pc="),
    "progress": lambda p: _head(p, 64).startswith("PK") or _head(p, 8).startswith("\x80"),
}


def _head(path: Path, n: int) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(n).decode("latin-1")
    except OSError:
        return ""


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


# -- checks made before any slow work -------------------------------------------------------------------

def _check_parent(path: Path, option: str) -> None:
    """The nearest existing ancestor of ``path`` must be a writable folder."""
    parent = path.parent
    while not parent.exists():
        if parent == parent.parent:
            break
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{option} {path}: {parent} is a file, not a folder; choose a path in a folder")
    try:                             # a real probe: access() says yes to root under /proc
        with _signals_deferred():    # an interrupt between mkdtemp and rmdir would leave the probe
            os.rmdir(tempfile.mkdtemp(prefix=".netlist2tf-probe-", dir=parent))
    except OSError as exc:
        raise OutputError(f"{option} {path}: cannot write in {parent} ({exc.strerror or exc}); choose a path "
                          f"where you can write") from None


def check_output_file(path, option: str, kind: str, force: bool = False) -> Path:
    """``path`` can be written by the command: its folder is writable (or creatable) and any file
    there is a previous output of this kind (or ``force``). Returns the Path."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{option} {path}: is a folder; give a file name")
    _check_parent(path, option)
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputError(f"{option} {path}: the file is not writable; choose another path")
    if path.is_file() and path.stat().st_size and not force and not FILE_KINDS[kind](path):
        raise OutputError(f"{option} {path}: a file is there that netlist2tf did not write; it is left as it "
                          f"is: choose another path, or add --force to replace it")
    return path


def check_output_folder(path, option: str, force: bool = False) -> Path:
    """``path`` can become the command's output folder: it does not exist, is empty, or is a folder of
    ours (replaced as a whole), or ``force``. Returns the Path."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{option} {path}: is a file, not a folder; give a folder path (it is created)")
    _check_parent(path, option)
    if path.is_dir():
        if not os.access(path.parent if path.parent != path else path, os.W_OK | os.X_OK):
            raise OutputError(f"{option} {path}: its folder {path.parent} is not writable; choose another path")
        if any(path.iterdir()) and ours_folder(path) is None and not force:
            raise OutputError(f"{option} {path}: the folder holds files netlist2tf did not write; they are "
                              f"left as they are: choose another (new or empty) folder, or add --force to "
                              f"replace the folder")
    return path


def check_build_dir(path, option: str = "--build-dir") -> Path:
    """The cache and output folder must be a folder we can create and write in."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{option} {path}: is a file, not a folder; give a folder (it is created)")
    _check_parent(path / "x", option)
    return path


# -- atomic writers ------------------------------------------------------------------------------------

def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def share(path: Path) -> None:
    """Give ``path`` (and everything under it) ordinary permissions: 0777/0666 less the umask."""
    mask = _umask()
    path = Path(path)
    if path.is_dir():
        for root, dirs, files in os.walk(path):
            os.chmod(root, 0o777 & ~mask)
            for f in files:
                os.chmod(os.path.join(root, f), 0o666 & ~mask)
    else:
        os.chmod(path, 0o666 & ~mask)


@contextmanager
def _signals_deferred():
    """SIGINT and SIGTERM that arrive inside the block are recorded, not raised, and raised (by the
    handler that was in place) when it ends: a swap's renames and clean-up are never cut in half.
    Yields the list of signals caught so far, so the block can decide not to commit.

    Python-level handlers, not a signal mask: a signal whose C handler ran just before a mask was set
    would still raise at the next bytecode, inside the block. Off the main thread (where handlers
    cannot be set) the block runs as is."""
    caught: list[int] = []
    sigs = (signal.SIGINT, signal.SIGTERM)
    try:
        previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in sigs}
    except ValueError:                  # not the main thread
        yield caught
        return
    try:
        yield caught
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            handler = previous[caught[0]]
            if callable(handler):
                handler(caught[0], None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), caught[0])


def write_file(path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` atomically (beside it, then renamed; a failure leaves the old one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        with _signals_deferred():       # an interrupt between creation and the assignment would lose it
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        share(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    return path


@contextmanager
def file_writer(path, mode: str = "w"):
    """An open file whose contents replace ``path`` atomically when the block ends without error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        with _signals_deferred():       # an interrupt between creation and the assignment would lose it
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, mode) as f:
            yield f
        share(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


def write_folder(folder, write, force: bool = False) -> Path:
    """``write(tmp)`` fills a new folder beside ``folder``, which then takes its place atomically.

    The old folder (if any) must be ours, empty, or ``force``d (``check_output_folder``); it is
    renamed aside, the new one renamed in (signals blocked in between), and only then removed. A
    failure or an interruption during ``write`` leaves the old folder as it was and removes the
    half-written one."""
    folder = Path(folder)
    check_output_folder(folder, "output folder", force)
    folder.parent.mkdir(parents=True, exist_ok=True)
    recover(folder)
    tmp = None
    try:
        with _signals_deferred():       # an interrupt between mkdir and the assignment would lose it
            tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".new", dir=folder.parent))
        write(tmp)
        share(tmp)
        with _signals_deferred() as caught:
            if not caught:              # the commit point: an interrupt before it keeps the old folder
                old = folder.parent / f".{folder.name}.{os.getpid()}.old"
                if folder.exists():
                    if old.exists():
                        shutil.rmtree(old)
                    os.replace(folder, old)
                os.replace(tmp, folder)
                tmp = None
                shutil.rmtree(old, ignore_errors=True)
            else:
                shutil.rmtree(tmp, ignore_errors=True)
                tmp = None
    except BaseException:
        if tmp is not None:
            with _signals_deferred():
                shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


@contextmanager
def cache_lock(path, wait: bool = True):
    """An exclusive lock on the file ``path`` (created empty, kept) for the block: two processes
    filling the same cache entry (two test workers, two ``cpu run`` commands) take turns instead of
    one replacing the folder the other is still writing. With ``wait=False`` it yields False at once
    when another process holds the lock."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)            # closing the descriptor releases the lock


def recover(folder) -> None:
    """A swap cut off between its two renames (the machine lost power) left the old folder aside:
    put it back."""
    import glob

    folder = Path(folder)
    if folder.exists():
        return
    for old in sorted(folder.parent.glob(f".{glob.escape(folder.name)}.*.old")):
        if old.is_dir():
            os.replace(old, folder)
            return
