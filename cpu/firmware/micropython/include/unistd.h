/* The one thing MicroPython's core takes from <unistd.h> on this bare machine: ssize_t. */
#ifndef NETLIST2TF_MP_UNISTD_H
#define NETLIST2TF_MP_UNISTD_H
#include <stddef.h>
typedef ptrdiff_t ssize_t;
#endif
