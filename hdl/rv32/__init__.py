"""The RV32IM+Zba core (see ``core.py`` and the machine interface in ``cpu/machine.py``)."""

from .core import M_CYCLES, Core

__all__ = ["Core", "M_CYCLES"]
