"""Amaranth designs compiled by netlist2tf."""
