"""Designs that are wrong on purpose, for the error-message tests."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class NotHardware:
    """A class that is not an Amaranth Elaboratable."""


class RaisesInElaborate(wiring.Component):
    a: In(4)
    y: Out(4)

    def elaborate(self, platform):
        m = Module()
        raise ValueError("width must be even")  # line pinned by the test


class NeedsArgument(wiring.Component):
    y: Out(4)

    def __init__(self, width):
        super().__init__()
