"""What the two command lines (``netlist2tf``, ``cpu``) share: help that shows every default,
``--version``, checked numeric options, and one way of ending: a one-line error and exit status 2
for bad input, a one-line "interrupted" and 130 (143 for SIGTERM) for a signal, never a traceback
(an unexpected exception is reported as a bug in one line; ``NETLIST2TF_TRACEBACK=1`` shows it)."""

import argparse
import os
import signal
import sys

from netlist2tf.common import Netlist2TFError

EXIT_INPUT_ERROR = 2


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error: "PROG: error: MESSAGE (see PROG --help)", exit status 2."""

    def error(self, message):
        self.exit(EXIT_INPUT_ERROR, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class Formatter(argparse.HelpFormatter):
    """Adds "(default: X)" to every option whose help does not already say its default."""

    def _get_help_string(self, action):
        text = action.help or ""
        if ("%(default)" in text or "default" in text.lower() or action.default is None or action.default is False
                or action.default is argparse.SUPPRESS or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


def version() -> str:
    from importlib.metadata import PackageNotFoundError, version as dist_version
    try:
        return dist_version("netlist2tf")
    except PackageNotFoundError:
        return "unknown (not installed)"


def add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")


def count(low: int = 0, high: int | None = None, what: str = "a number"):
    """An argparse type: an integer (decimal or 0x...) in [low, high]."""
    def parse(text: str) -> int:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low or (high is not None and value > high):
            span = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what} must be {span}")
        return value
    parse.__name__ = "integer"
    return parse


def seconds(what: str):
    """An argparse type: a number of seconds, 0 or more (decimals allowed)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
        if not value >= 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what} must be 0 or more seconds")
        return value
    parse.__name__ = "seconds"
    return parse


def path_arg(text: str) -> str:
    """An argparse type for a file or folder path: never the empty string (which would otherwise mean
    the current folder, or be taken for "not given")."""
    if not text:
        raise argparse.ArgumentTypeError("the path is empty; give a file or folder name")
    return text


path_arg.__name__ = "path"


class Interrupted(KeyboardInterrupt):
    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum, frame):
    raise Interrupted(signum)


def run(prog: str, func, args) -> int:
    """``func(args)``'s exit status, with every way of failing turned into one line on stderr."""
    import logging
    import warnings

    warnings.filterwarnings("ignore", message=".*created but never used")
    logging.getLogger("transformers").setLevel(logging.ERROR)   # library notes are not our output
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        from netlist2tf.common import drop_kernel_notes
        drop_kernel_notes()
        return func(args)
    except Netlist2TFError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        from netlist2tf.common import streamed
        into = streamed()
        what = (f"{', '.join(into)} received output as it was made (not a regular file: written into, not "
                f"replaced); every other output is as it was" if into else
                "nothing half-written was kept: every output is as it was, or whole")
        print(f"\n{prog}: interrupted ({signal.Signals(signum).name}); {what}", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:
        sys.stderr.close()
        return 1
    except MemoryError:
        print(f"{prog}: error: out of memory; try a smaller --batch, fewer --cycles or a smaller design",
              file=sys.stderr)
        return EXIT_INPUT_ERROR
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"{prog}: error: {exc.strerror or exc}{where}; check the path and that the disk has room",
              file=sys.stderr)
        return EXIT_INPUT_ERROR
    except Exception as exc:
        if os.environ.get("NETLIST2TF_TRACEBACK"):
            raise
        print(f"{prog}: internal error (a bug in netlist2tf, please report it): {type(exc).__name__}: "
              f"{str(exc).splitlines()[0] if str(exc) else ''} (NETLIST2TF_TRACEBACK=1 shows where)",
              file=sys.stderr)
        return 1
