/* MicroPython's configuration for the netlist2tf RV32IM(+Zba) machine (cpu/machine.py): bare metal,
 * one console byte port, the script read from the input area (cpu/runtime/link.ld), no filesystem,
 * no timers, no CSRs, soft float. What is on and what is off, and what each choice costs, is in
 * docs/guide/python-on-the-cpu.md. */
#include <stdint.h>

/* The feature set: MicroPython's "core features" level, plus what ordinary scripts use. */
#define MICROPY_CONFIG_ROM_LEVEL                (MICROPY_CONFIG_ROM_LEVEL_CORE_FEATURES)

#define MICROPY_ENABLE_COMPILER                 (1)
#define MICROPY_ENABLE_GC                       (1)
#define MICROPY_HELPER_REPL                     (0)
#define MICROPY_ENABLE_EXTERNAL_IMPORT          (0)
#define MICROPY_READER_POSIX                    (0)
#define MICROPY_READER_VFS                      (0)
#define MICROPY_ALLOC_PATH_MAX                  (64)
#define MICROPY_STACK_CHECK                     (1)

/* Python's integers are unbounded: the multi-precision implementation. */
#define MICROPY_LONGINT_IMPL                    (MICROPY_LONGINT_IMPL_MPZ)
/* Python's floats are IEEE doubles (soft float: the machine has no F/D extension). repr() and str()
 * give the shortest digits that read back as the same double, as CPython's do (the "exact" method,
 * which computes in soft 128-bit long doubles; the smaller "approx" one printed 1.4142135623730952
 * for 2 ** 0.5 where CPython prints ...951; its cost: docs/results.md). */
#define MICROPY_FLOAT_IMPL                      (MICROPY_FLOAT_IMPL_DOUBLE)
#define MICROPY_FLOAT_FORMAT_IMPL               (MICROPY_FLOAT_FORMAT_IMPL_EXACT)

/* Python calls keep their frames on the GC heap, not the C stack ("stackless"): recursion is bounded
 * by the heap, not by the few KB of stack left at the top of RAM. */
#define MICROPY_STACKLESS                       (1)

/* Tracebacks with line numbers; CPython-like error messages. */
#define MICROPY_ENABLE_SOURCE_LINE              (1)
#define MICROPY_ERROR_REPORTING                 (MICROPY_ERROR_REPORTING_DETAILED)

/* Language and builtins beyond the core level. */
#define MICROPY_PY_FSTRINGS                     (1)
#define MICROPY_PY_BUILTINS_STR_UNICODE         (1)
#define MICROPY_PY_BUILTINS_FROZENSET           (1)
#define MICROPY_PY_BUILTINS_ROUND_INT           (1)
#define MICROPY_PY_ALL_SPECIAL_METHODS          (1)
#define MICROPY_PY_DESCRIPTORS                  (1)
#define MICROPY_PY_BUILTINS_STR_CENTER          (1)
#define MICROPY_PY_BUILTINS_STR_PARTITION       (1)
#define MICROPY_PY_BUILTINS_STR_SPLITLINES      (1)
#define MICROPY_PY_BUILTINS_NOTIMPLEMENTED      (1)
#define MICROPY_PY_BUILTINS_SLICE_ATTRS         (1)
#define MICROPY_PY_BUILTINS_POW3                (1)
#define MICROPY_PY_BUILTINS_NEXT2               (1)
#define MICROPY_CPYTHON_COMPAT                  (1)

/* Off to make room (each line's saving is in docs/results.md, "MicroPython on the CPU"). */
#define MICROPY_PY_BUILTINS_COMPLEX             (0)
#define MICROPY_PY_ARRAY                        (0)
#define MICROPY_PY_BUILTINS_MEMORYVIEW          (0)
#define MICROPY_PY_STRUCT                       (0)
#define MICROPY_PY_ERRNO                        (0)
#define MICROPY_PY_MATH                         (0)
#define MICROPY_PY_ASYNC_AWAIT                  (0)

/* Off: no files, no console input, no help text, no REPL conveniences. */
#define MICROPY_PY_BUILTINS_INPUT               (0)
#define MICROPY_PY_BUILTINS_HELP                (0)
#define MICROPY_PY_IO                           (0)
#define MICROPY_PY_SYS_STDFILES                 (0)
#define MICROPY_PY_MICROPYTHON_MEM_INFO         (0)
#define MICROPY_PY_SYS                          (1)
#define MICROPY_PY_SYS_EXIT                     (1)
#define MICROPY_PY_SYS_PLATFORM                 "netlist2tf"

typedef intptr_t mp_int_t;
typedef uintptr_t mp_uint_t;
typedef long mp_off_t;

#define MICROPY_HW_BOARD_NAME                   "netlist2tf RV32IM"
#define MICROPY_HW_MCU_NAME                     "rv32im"
#define MP_STATE_PORT                           MP_STATE_VM

#include <alloca.h>
