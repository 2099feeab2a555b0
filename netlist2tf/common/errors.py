"""Typed errors of every stage. Each names the culprit and says what to do about it.

Asserts in this code base guard internal invariants only; anything a user can get wrong raises one
of these, so the command line can print the message alone (no traceback) and exit non-zero.
"""


class Netlist2TFError(Exception):
    """Base class: an error in the user's input or environment, with a message meant for them."""


class DesignNotFoundError(Netlist2TFError):
    """The DESIGN argument names a module, file or class that does not exist."""


class DesignElaborationError(Netlist2TFError):
    """The design exists but is not an elaboratable Amaranth design, or raised while elaborating."""


class YosysError(Netlist2TFError):
    """Yosys failed; the message carries its stderr/log tail and the script that was run."""


class NetlistFormatError(Netlist2TFError):
    """A Yosys JSON netlist that cannot be read (malformed JSON, missing keys, bad references)."""


class UnsupportedDesignError(Netlist2TFError):
    """The netlist uses constructs the toolchain does not accept; lists every one of them."""

    def __init__(self, problems):
        self.problems = tuple(problems)
        lines = [f"the design uses {len(self.problems)} unsupported construct(s):"]
        lines += [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))


class StimulusError(Netlist2TFError):
    """Simulation inputs that do not fit the design (unknown port, bad value, malformed file)."""
