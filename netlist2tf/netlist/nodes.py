"""Every key used on the networkx graphs of the toolchain, and which pass sets it.

No module writes an attribute that is not declared here (tracr's ``nodes.py`` habit): a reader of
any graph can look up what a key means and who owns it.

Node ids are strings: ``in:NAME``, ``out:NAME`` (ports), ``cell:NAME``, ``reg:NAME``,
``memrd:MEM:I`` / ``memwr:MEM:I`` (memory ports).
"""

# --- node attributes, set by graph.netlist_graph -------------------------------------------------
KIND = "kind"                    #: one of the NODE_* constants below
OBJ = "obj"                      #: the IR record: Port, Cell, Register, or (Memory, port index)
SRC = "src"                      #: Amaranth/Verilog source location ("file:line"), may be ""
COMBINATIONAL = "combinational"  #: True if the node's outputs follow its inputs within a cycle

NODE_INPUT = "input"
NODE_OUTPUT = "output"
NODE_CELL = "cell"
NODE_REGISTER = "register"
NODE_MEMORY_READ = "memory_read"
NODE_MEMORY_WRITE = "memory_write"

# --- edge attributes, set by graph.netlist_graph --------------------------------------------------
NETS = "nets"                    #: tuple of net indices that the edge's driver feeds to its reader
