"""Reading what the user gives, bounded: a file, a device or a pipe is read in pieces and refused as
soon as it is longer than the command can use, so an endless input (a device that never ends, a
pipe that never closes) is one clear error instead of a machine out of memory; a Ctrl-C between
pieces is honoured.
"""

from pathlib import Path

from netlist2tf.common.errors import Netlist2TFError

# The most a text input (a netlist, a config, a report, a script) may hold: far above any real one.
MAX_TEXT_BYTES = 1 << 30
# The most one line of a JSON-lines or chat input, or a small text (a config, a chat script), may hold.
MAX_LINE_BYTES = MAX_SMALL_TEXT_BYTES = 16 << 20


class InputTooLong(Netlist2TFError):
    """An input longer than what reads it can use."""


def read_limited(f, limit: int, what: str, fix: str) -> bytes:
    """At most ``limit`` bytes from the binary file object ``f``, read in 64 KiB pieces; one more is
    an InputTooLong naming ``what`` and ``fix``."""
    chunks, size = [], 0
    while True:
        piece = f.read(min(1 << 16, limit + 1 - size))
        if not piece:
            return b"".join(chunks)
        chunks.append(piece)
        size += len(piece)
        if size > limit:
            raise InputTooLong(f"{what} is longer than {limit:,} bytes; {fix}")


def read_bytes(path, what: str, limit: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of ``path`` (``what`` names it in errors: "--stimulus s.jsonl"), bounded."""
    path = Path(path)
    if path.is_dir():
        raise Netlist2TFError(f"{what}: is a folder; give a file")
    try:
        with open(path, "rb", buffering=0) as f:
            return read_limited(f, limit, what, "give a shorter file")
    except OSError as exc:
        raise Netlist2TFError(f"{what}: cannot read it ({exc.strerror or exc})") from None


def read_text(path, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    """``read_bytes`` as UTF-8 text."""
    try:
        return read_bytes(path, what, limit).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Netlist2TFError(f"{what}: is not UTF-8 text (byte {exc.start}); give a text file") from None


def lines(f, what: str, limit: int = MAX_LINE_BYTES):
    """The lines of the binary file object ``f`` as text, each refused past ``limit`` bytes."""
    number = 0
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            raise InputTooLong(f"{what}: line {number} is longer than {limit:,} bytes; give shorter lines")
        try:
            yield number, line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Netlist2TFError(f"{what}:{number}: is not UTF-8 text (byte {exc.start}); give UTF-8 text") from None

