"""Writing what the commands make, without ever losing what the user made.

Every file and folder a command writes goes through here:

* ``check_output_file`` / ``check_output_folder`` run BEFORE any slow work (synthesis, compiling,
  loading a model): the path must be writable, and an existing file or non-empty folder there must be
  an output of the same kind (recognised by its format: a VCD header written by netlist2tf, a Yosys
  netlist, a checkpoint's ``compile.json``, ...) unless the user passed ``--force``. A user's folder is
  never deleted and a user's file never overwritten: the command stops with one message naming the
  path and the fix. A command never replaces its own input (not even with ``--force``), nor, from the
  command line, the build folder's caches.
* Where the path goes: a symlink is followed to its target (the link stays); a regular file (or a
  new one) is written beside the target and renamed over it (``file_writer``, ``write_file``); a
  character device or a named pipe is written into as the output is made (streaming, as every Unix
  tool does: ``--outputs /dev/stdout`` or a FIFO a reader drains), never renamed over; ``/dev/stdout``,
  ``/dev/stderr`` and ``/dev/fd/N`` write to the command's own descriptor; a block device or a
  socket is refused. ``write_folder`` fills a new folder beside the target and swaps it in with two
  renames done with SIGINT/SIGTERM held back (an interruption leaves the old folder, whole, or the
  new one; never half of either). Only then is the old folder removed.
* Written folders and files get ordinary permissions (0777/0666 less the umask), not the private
  0700/0600 of ``tempfile``: a checkpoint is meant to be shared.
* ``streamed()`` lists the non-regular destinations written into so far: an interrupted command says
  which outputs received part of their data (every other output is as it was).
"""

import fcntl
import json
import os
import re
import shutil
import signal
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path

from netlist2tf.common.errors import Netlist2TFError


class OutputError(Netlist2TFError):
    """An output path that cannot be written, or would replace something that is not ours."""


# -- where a path goes -------------------------------------------------------------------------------

_STD_NAMES = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_FD_NAME = re.compile(r"^/(?:dev/fd|proc/self/fd|proc/(\d+)/fd)/(\d+)$")
_STREAMED: list[str] = []


def _descriptor(text: str) -> int | None:
    """The command's own descriptor that ``text`` names (/dev/stdout, /dev/fd/N, /proc/self/fd/N)."""
    if text in _STD_NAMES:
        return _STD_NAMES[text]
    m = _FD_NAME.match(text)
    if m and (m.group(1) is None or int(m.group(1)) == os.getpid()):
        return int(m.group(2))
    return None


def _what(mode: int) -> str:
    return ("a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a character device" if stat.S_ISCHR(mode) else "a named pipe" if stat.S_ISFIFO(mode)
            else "a folder" if stat.S_ISDIR(mode) else "a special file")


def destination(path, option: str = "output") -> tuple[str, Path | int]:
    """Where writing ``path`` goes: ("file", target) for a regular file or a new one (the target is
    the path with every symlink followed), ("dir", target), ("stream", target) for a character device
    or a named pipe, ("fd", n) for the command's own descriptor n. Raises OutputError for an empty
    path, a block device, a socket, a closed descriptor or a symlink loop."""
    text = os.fspath(path)
    if not text:
        raise OutputError(f"{option} '': the path is empty; give a file name")
    fd = _descriptor(text)
    if fd is not None:
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            raise OutputError(f"{option} {text}: descriptor {fd} is not open; give a file name") from None
        if flags & os.O_ACCMODE == os.O_RDONLY:
            raise OutputError(f"{option} {text}: descriptor {fd} is open for reading only; give a file name")
        return "fd", fd
    target = Path(os.path.realpath(text))
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return "file", target
    except OSError as exc:
        raise OutputError(f"{option} {text}: cannot use it ({exc.strerror or exc}); give another path") from None
    if stat.S_ISREG(mode):
        return "file", target
    if stat.S_ISDIR(mode):
        return "dir", target
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return "stream", target
    raise OutputError(f"{option} {text}: is {_what(mode)}; netlist2tf writes regular files, character devices "
                      f"and named pipes: give a file name")


def streamed() -> list[str]:
    """The non-regular destinations (devices, pipes, descriptors) written into so far."""
    return list(_STREAMED)


# -- what is ours ------------------------------------------------------------------------------------

def _json_file(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


FOLDER_KINDS = ("checkpoint", "merged checkpoint", "report", "base model")


def ours_folder(folder: Path) -> str | None:
    """What kind of netlist2tf folder ``folder`` is (one of ``FOLDER_KINDS``), or None if it is not
    one of ours."""
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


def _head(path: Path, n: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def _lines(path: Path, n: int = 64) -> list[str] | None:
    """The first ``n`` lines of ``path`` (each at most 64 KiB) as text, or None if it is not UTF-8."""
    try:
        with open(path, "rb") as f:
            return [f.readline(1 << 16).decode("utf-8").rstrip("\n") for _ in range(n)]
    except (OSError, UnicodeDecodeError):
        return None


# the VCD header netlist2tf.sim.waveform writes (pyvcd with date "(netlist2tf)", version "netlist2tf")
_VCD_HEADER = re.compile(rb"\A\$date \(netlist2tf\) \$end\n\$timescale \d+ [munpf]?s \$end\n"
                         rb"\$version netlist2tf \$end\n\$scope module ")
# one retired instruction as cpu.machine.Retire prints it
_TRACE_LINE = re.compile(r"pc=[0-9a-f]{8} insn=[0-9a-f]{8} -> [0-9a-f]{8}( x\d{1,2}=[0-9a-f]{8})?"
                         r"( load\[[0-9a-f]{8}/[01]{4}\]=[0-9a-f]{8})?( store\[[0-9a-f]{8}/[01]{4}\]=[0-9a-f]{8})?")
# verify --resume's progress file: this line, then torch.save's bytes
PROGRESS_MAGIC = b"netlist2tf teacher-forced progress\n"


def _is_yosys_netlist(path: Path) -> bool:
    doc = _json_file(path)
    return (doc is not None and str(doc.get("creator", "")).startswith("Yosys")
            and isinstance(doc.get("modules"), dict))


def _is_outputs_jsonl(path: Path) -> bool:
    """Every line (of the first 64) a JSON object of port name -> integer or list of integers."""
    lines = _lines(path)
    if lines is None:
        return False
    seen = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            return False
        if not isinstance(row, dict) or not all(
                isinstance(v, int) or (isinstance(v, list) and all(isinstance(x, int) for x in v))
                for v in row.values()):
            return False
        seen += 1
    return seen > 0


def _is_trace(path: Path) -> bool:
    lines = _lines(path)
    return lines is not None and all(_TRACE_LINE.fullmatch(ln) for ln in lines if ln) and any(lines)


# recognisers of the single files the commands write, by kind: by their format, never by a word
FILE_KINDS = {
    "vcd": lambda p: bool(_VCD_HEADER.match(_head(p, 256))),
    "netlist": _is_yosys_netlist,
    "jsonl": _is_outputs_jsonl,
    "trace": _is_trace,
    "progress": lambda p: _head(p, len(PROGRESS_MAGIC)) == PROGRESS_MAGIC,
    # a GGUF file that carries our format key among its first keys (netlist2tf.serve.gguf writes it first)
    "gguf": lambda p: _head(p, 4) == b"GGUF" and b"netlist2tf.format" in _head(p, 256),
}


# -- checks made before any slow work -------------------------------------------------------------------

def _check_parent(path: Path, option: str, shown=None) -> None:
    """The nearest existing ancestor of ``path`` must be a writable folder."""
    shown = shown if shown is not None else path
    parent = path.parent
    while not parent.exists():
        if parent == parent.parent:
            break
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{option} {shown}: {parent} is a file, not a folder; choose a path in a folder")
    try:                             # a real probe: access() says yes to root under /proc
        with _signals_deferred():    # an interrupt between mkdtemp and rmdir would leave the probe
            os.rmdir(tempfile.mkdtemp(prefix=".netlist2tf-probe-", dir=parent))
    except OSError as exc:
        raise OutputError(f"{option} {shown}: cannot write in {parent} ({exc.strerror or exc}); choose a path "
                          f"where you can write") from None


def check_output_file(path, option: str, kind: str, force: bool = False, stream: bool = True) -> Path:
    """``path`` can be written by the command: a regular file (or a new one) in a writable folder
    whose present contents are a previous output of this ``kind`` (or ``force``), or, where
    ``stream``, a writable character device, named pipe or descriptor (written into, never
    replaced). Returns the Path as given."""
    how, target = destination(path, option)
    path = Path(path)
    if how == "dir":
        raise OutputError(f"{option} {path}: is a folder; give a file name")
    if how in ("stream", "fd"):
        if not stream:
            raise OutputError(f"{option} {path}: is not a regular file ({'a descriptor' if how == 'fd' else _what(os.stat(target).st_mode)}); "
                              f"this file is read back later: give a file name")
        if how == "stream" and not os.access(target, os.W_OK):
            raise OutputError(f"{option} {path}: is not writable; choose another path")
        return path
    _check_parent(target, option, path)
    if target.exists() and not os.access(target, os.W_OK):
        raise OutputError(f"{option} {path}: the file is not writable; choose another path")
    if target.is_file() and target.stat().st_size and not force and not FILE_KINDS[kind](target):
        where = f" (the link's target {target})" if target != Path(os.path.abspath(path)) else ""
        raise OutputError(f"{option} {path}: a file is there{where} that netlist2tf did not write; it is left as it "
                          f"is: choose another path, or add --force to replace it")
    return path


def _overlap(a: Path, b: Path) -> bool:
    return a == b or a in b.parents or b in a.parents


def check_output_folder(path, option: str, kind: str, force: bool = False, inputs=(), build=None,
                        caches_ok: bool = False) -> Path:
    """``path`` can become the command's output folder, a ``kind`` (one of ``FOLDER_KINDS``): it does
    not exist, is empty, or holds a netlist2tf folder of the same kind (replaced as a whole), or
    ``force``. Never (not even with ``force``) one of the command's ``inputs``, a folder holding one
    or inside one, nor (unless ``caches_ok``: the caches' own writers) the build folder's caches.
    Returns the Path as given."""
    text = os.fspath(path)
    if not text:
        raise OutputError(f"{option} '': the path is empty; give a folder (it is created)")
    path = Path(path)
    real = Path(os.path.realpath(text))
    if real.exists() and not real.is_dir():
        raise OutputError(f"{option} {path}: is a file, not a folder; give a folder path (it is created)")
    for given in inputs:
        if given is not None and _overlap(real, Path(os.path.realpath(given))):
            rel = ("is" if real == Path(os.path.realpath(given)) else
                   "holds" if real in Path(os.path.realpath(given)).parents else "lies inside")
            raise OutputError(f"{option} {path}: {rel} the command's input {given}; a command never replaces its "
                              f"own input: choose another folder")
    if not caches_ok:
        from netlist2tf.common.paths import CACHES, build_dir
        root = Path(os.path.realpath(build_dir(build)))
        for name in CACHES:
            if _overlap(real, root / name):
                raise OutputError(f"{option} {path}: is netlist2tf's cache ({root / name}), which the commands "
                                  f"manage themselves; choose another folder")
    _check_parent(real, option, path)
    if real.is_dir():
        if not os.access(real.parent if real.parent != real else real, os.W_OK | os.X_OK):
            raise OutputError(f"{option} {path}: its folder {real.parent} is not writable; choose another path")
        if any(real.iterdir()) and not force:
            have = ours_folder(real)
            if have is None:
                raise OutputError(f"{option} {path}: the folder holds files netlist2tf did not write; they are "
                                  f"left as they are: choose another (new or empty) folder, or add --force to "
                                  f"replace the folder")
            if have != kind:
                raise OutputError(f"{option} {path}: holds a netlist2tf {have}, and this command writes a {kind}; "
                                  f"it is left as it is: choose another folder, or add --force to replace the "
                                  f"{have}")
    return path


def check_build_dir(path, option: str = "--build-dir") -> Path:
    """The cache and output folder must be a folder we can create and write in."""
    if not os.fspath(path):
        raise OutputError(f"{option} '': the path is empty; give a folder (it is created)")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{option} {path}: is a file, not a folder; give a folder (it is created)")
    _check_parent(path / "x", option)
    return path


# -- writers ------------------------------------------------------------------------------------------

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


class _Named:
    """A file whose write errors (a full disk, a device that refuses) name the option and the path."""

    def __init__(self, f, option: str, path, streamed: bool):
        self._f, self._option, self._path, self._streamed = f, option, path, streamed

    def _error(self, exc: OSError) -> OutputError:
        kept = ("what was written before the error stays there" if self._streamed else
                "the previous file (if any) is as it was")
        return OutputError(f"{self._option} {self._path}: cannot write it ({exc.strerror or exc}); {kept}: "
                           f"free some space or choose another path")

    def write(self, data):
        try:
            return self._f.write(data)
        except OSError as exc:
            raise self._error(exc) from None

    def flush(self):
        try:
            self._f.flush()
        except OSError as exc:
            raise self._error(exc) from None

    def close(self):
        try:
            self._f.close()
        except OSError as exc:
            raise self._error(exc) from None

    def __getattr__(self, name):
        return getattr(self._f, name)


@contextmanager
def _named(fd: int, mode: str, option: str, path, streamed: bool):
    f = _Named(os.fdopen(fd, mode), option, path, streamed)
    try:
        yield f
    except BaseException:
        try:
            f._f.close()
        except OSError:
            pass
        raise
    f.close()


@contextmanager
def file_writer(path, mode: str = "w", option: str = "output"):
    """An open file for ``path``: for a regular file (or a new one; a symlink is followed), a file
    beside it whose contents replace it atomically when the block ends without error (an error or
    an interruption leaves the old one); for a character device, a named pipe or the command's own
    descriptor (/dev/stdout), that destination itself, written into as the block writes."""
    how, target = destination(path, option)
    if how == "dir":
        raise OutputError(f"{option} {path}: is a folder; give a file name")
    if how in ("stream", "fd"):
        import sys
        if how == "fd":
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            fd = os.dup(target)
        else:
            fd = os.open(target, os.O_WRONLY | os.O_NOCTTY)    # a pipe waits here for its reader
        _STREAMED.append(os.fspath(path))
        with _named(fd, mode, option, path, True) as f:
            yield f
        return
    with file_beside(target) as (fd, _):
        with _named(fd, mode, option, path, False) as f:
            yield f


@contextmanager
def file_beside(target):
    """(descriptor, path) of a new file beside the regular file ``target`` (a link already resolved),
    for a writer that needs a real file or a path; when the block ends without error the file replaces
    ``target`` atomically, otherwise it is removed and ``target`` is left as it was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        with _signals_deferred():       # an interrupt between creation and the assignment would lose it
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        yield fd, Path(tmp)
        share(Path(tmp))
        with _signals_deferred():
            os.replace(tmp, target)
            tmp = None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def write_file(path, data: str | bytes, option: str = "output") -> Path:
    """Write ``data`` to ``path`` as ``file_writer`` does (atomically for a regular file)."""
    with file_writer(path, "w" if isinstance(data, str) else "wb", option) as f:
        f.write(data)
    return Path(path)


def check_room(path, need: int, option: str = "output") -> None:
    """The disk that will hold ``path`` has room for ``need`` more bytes (with 5 % and 64 MB to
    spare): refused before the write starts instead of filling the disk half-way (a full disk would
    leave the old output whole, but only after minutes of work and with the disk full meanwhile)."""
    from netlist2tf.common.hardware import gigabytes

    where = Path(os.path.realpath(path))
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return
    if need * 1.05 + (64 << 20) > free:
        raise OutputError(f"{option} {path}: the output needs about {gigabytes(need)} and the disk holding {where} has "
                          f"{gigabytes(free)} free (the new output is written whole before the old one goes); "
                          f"free some space or choose a path on another disk")


def write_folder(folder, write, kind: str, force: bool = False, size: int | None = None) -> Path:
    """``write(tmp)`` fills a new folder beside ``folder`` (a symlink is followed to its target),
    which then takes its place atomically.

    The old folder (if any) must be of the same ``kind``, empty, or ``force``d
    (``check_output_folder``); ``size`` (bytes, about) must fit on the disk (``check_room``); it is renamed aside, the new one renamed in (signals held back in
    between), and only then removed. A failure or an interruption during ``write`` leaves the old
    folder as it was and removes the half-written one."""
    check_output_folder(folder, "output folder", kind, force, caches_ok=True)
    folder = Path(os.path.realpath(folder))
    folder.parent.mkdir(parents=True, exist_ok=True)
    recover(folder)
    if size is not None:
        check_room(folder, size, "output folder")
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
