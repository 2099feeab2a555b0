"""netlist2tf: compile synchronous hardware into the weights of a Qwen3.5-architecture transformer.

Pipeline (one module per stage): ``frontend`` (Amaranth -> Yosys JSON), ``ir`` (typed netlist),
``validate`` (what the later stages accept), ``graph`` (networkx view), ``sim`` (cycle-accurate
netlist simulator, the golden model), then the compiler stages of later issues.
"""
