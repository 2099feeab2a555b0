/* alloca for MicroPython's core (py/pystack.h): the compiler's builtin. */
#ifndef NETLIST2TF_MP_ALLOCA_H
#define NETLIST2TF_MP_ALLOCA_H
#define alloca __builtin_alloca
#endif
