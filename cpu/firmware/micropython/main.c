/* The MicroPython firmware's main (cpu/micropython.py builds it): boot the interpreter, then compile
 * and run the script the host placed in the input area (cpu/runtime/link.ld: a length word, then the
 * bytes), printing to the console. The exit status is MicroPython's: 0, sys.exit's value, or 1 after
 * an uncaught exception's traceback. */
#include <stdint.h>
#include <string.h>

#include "py/builtin.h"
#include "py/compile.h"
#include "py/cstack.h"
#include "py/gc.h"
#include "py/lexer.h"
#include "py/mperrno.h"
#include "py/mphal.h"
#include "py/runtime.h"
#include "shared/runtime/gchelper.h"

#define CONSOLE ((volatile uint8_t *)0x10000000)

/* The GC heap: a fixed block of .bss, sized by the build (cpu/micropython.py HEAP_SIZE). */
static char heap[MP_HEAP_SIZE] __attribute__((aligned(16)));

/* 1 once fw_boot has run: a RAM snapshot taken after the boot starts warm (crt0.S). */
volatile uint32_t fw_booted;

extern char __input_start[];    /* the input area: length word, then the script's bytes */
extern char __stack_top[];

mp_uint_t mp_hal_stdout_tx_strn(const char *str, size_t len) {
    for (size_t i = 0; i < len; i++) {
        *CONSOLE = (uint8_t)str[i];
    }
    return len;
}

/* "Cooked" output turns \n into \r\n on a serial terminal; this console is a byte stream like a
 * POSIX stdout, so it is the same as the raw one (the output equals CPython's). */
void mp_hal_stdout_tx_strn_cooked(const char *str, size_t len) {
    mp_hal_stdout_tx_strn(str, len);
}

static void exit_now(int status) {
    register int a0 __asm__("a0") = status;
    register int a7 __asm__("a7") = 93;
    __asm__ volatile ("ecall" : : "r"(a0), "r"(a7));
    for (;;) {
    }
}

/* The stack: from the top of RAM down to the end of the script, less a margin for the C frames
 * that run before a check (MicroPython checks the depth at each Python call and in the parser). */
static void set_stack(void) {
    uint32_t length = *(volatile uint32_t *)__input_start;
    uintptr_t bottom = (uintptr_t)__input_start + 4 + length;
    uintptr_t top = (uintptr_t)__stack_top;
    size_t size = top > bottom + 1024 ? top - bottom - 1024 : 0;
    mp_cstack_init_with_top(__stack_top, size);
}

void fw_boot(void) {
    set_stack();
    gc_init(heap, heap + sizeof(heap));
    mp_init();
    fw_booted = 1;
}

static int uncaught(mp_obj_base_t *exc) {
    if (mp_obj_is_subclass_fast(MP_OBJ_FROM_PTR(exc->type), MP_OBJ_FROM_PTR(&mp_type_SystemExit))) {
        /* None exits 0, an int its value, anything else prints and exits 1 (as CPython) */
        mp_obj_t value = mp_obj_exception_get_value(MP_OBJ_FROM_PTR(exc));
        mp_int_t status = 0;
        if (value != mp_const_none && !mp_obj_get_int_maybe(value, &status)) {
            mp_obj_print(value, PRINT_STR);
            mp_print_str(&mp_plat_print, "\n");
            status = 1;
        }
        return (int)(status & 255);
    }
    mp_obj_print_exception(&mp_plat_print, MP_OBJ_FROM_PTR(exc));
    return 1;
}

int fw_main(void) {
    set_stack();
    uint32_t length = *(volatile uint32_t *)__input_start;
    nlr_buf_t nlr;
    if (nlr_push(&nlr) == 0) {
        mp_lexer_t *lex = mp_lexer_new_from_str_len(MP_QSTR__lt_stdin_gt_, __input_start + 4, length, 0);
        qstr source_name = lex->source_name;
        mp_parse_tree_t tree = mp_parse(lex, MP_PARSE_FILE_INPUT);
        mp_obj_t module = mp_compile(&tree, source_name, false);
        mp_call_function_0(module);
        nlr_pop();
        return 0;
    }
    return uncaught((mp_obj_base_t *)nlr.ret_val);
}

void gc_collect(void) {
    gc_collect_start();
    gc_helper_collect_regs_and_stack();
    gc_collect_end();
}

mp_lexer_t *mp_lexer_new_from_file(qstr filename) {
    mp_raise_OSError(MP_ENOENT);
}

mp_import_stat_t mp_import_stat(const char *path) {
    return MP_IMPORT_STAT_NO_EXIST;
}

void nlr_jump_fail(void *val) {
    static const char msg[] = "FATAL: uncaught NLR\n";
    mp_hal_stdout_tx_strn(msg, sizeof(msg) - 1);
    exit_now(134);
}

void MP_NORETURN __fatal_error(const char *msg) {
    mp_hal_stdout_tx_strn(msg, strlen(msg));
    mp_hal_stdout_tx_strn("\n", 1);
    exit_now(134);
}
