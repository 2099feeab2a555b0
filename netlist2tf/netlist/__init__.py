"""The netlist: Yosys's JSON read into a typed IR (cells, nets, memories, ports), its graph (drivers,
combinational loops), the checks a design must pass before it is compiled, and z3 proofs over it."""

from netlist2tf.common.lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'formal': ('prove_groups', 'prove_held'),
    'graph': ('find_drivers', 'keep_outputs', 'netlist_graph'),
    'ir': ('CONST0', 'CONST1', 'CONSTX', 'Cell', 'Memory', 'Net', 'Netlist', 'Port', 'WritePort',
           'load_netlist', 'parse_netlist'),
    'validate': ('Problem', 'SIM_ONLY_VERILOG_FIX', 'check_netlist', 'check_simulation_only', 'find_problems'),
})
