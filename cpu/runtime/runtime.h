/* The C runtime of the RV32IM+Zba machine (cpu/machine.py): console output, exit, and the few
 * string/memory functions that programs and compilers need. No libc: programs are freestanding.
 *
 * A program is one .c file with `int main(void)` that includes this header (or the standard headers
 * of runtime/include/, which include it); main's return value is the exit code. */
#ifndef RV32_RUNTIME_H
#define RV32_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <limits.h>

#define CONSOLE_ADDR 0x10000000u
#define EXIT_SYSCALL 93

/* Console. printf follows C's printf: conversions %d %i %u %o %x %X %c %s %p %n %% and %f %F %e %E
 * %g %G (doubles, exactly rounded, with integer arithmetic only; %a is not supported); the flags
 * '-' '0' '+' ' ' '#'; a width and a precision (digits or '*'); the length modifiers hh h l ll j z t
 * (l, z, t: 32-bit; ll, j: 64-bit; L reads a double). %p prints 0x and the address in lower-case
 * hex (0x0 for NULL). Returns the number of characters written. The sprintf family, fprintf and the
 * rest of the small libc are declared in the standard headers of runtime/include/ (<stdio.h> ...). */
int putchar(int c);
int puts(const char *s);
int printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int vprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Internals of printf and the sprintf family (stdio.h): __rt_vformat formats like vprintf to the
 * console (out == NULL) or into out, where it stores at most cap characters (no NUL) and counts the
 * rest; it returns the number of characters. Doubles (%f %e %g) are formatted by
 * __rt_format_double (printf_float.c), which cpu/toolchain.py links only into programs that use
 * floating point; it is a weak symbol, and without it %f etc. print as they are. */
int __rt_vformat(char *out, size_t cap, const char *fmt, va_list ap);
struct __rt_out {
    char *buf; /* NULL: the console */
    size_t cap;
    size_t n;
};
/* printf's flags, as bits 1 << (c - ' ') of their characters */
enum { __RT_F_SPACE = 1, __RT_F_ALT = 1 << 3, __RT_F_PLUS = 1 << 11, __RT_F_LEFT = 1 << 13, __RT_F_ZERO = 1 << 16 };
void __rt_out_write(struct __rt_out *o, const char *s, int n);
void __rt_out_pad(struct __rt_out *o, char c, int n);
void __rt_format_double(struct __rt_out *o, uint64_t bits, char conv, unsigned flags, int width, int prec)
    __attribute__((weak));

/* Program input (`cpu run PROGRAM --input FILE`): the bytes the host placed in RAM before the program
 * started (link.ld: a length word at __input_start, after .bss, then the bytes); input_size() is 0
 * when there is none. <stdio.h>'s stdin reads the same bytes (getchar, fgets, fread ...). */
size_t input_size(void);
const char *input_data(void);

/* Stop the machine: exit(code) is ecall with a7 = 93 and a0 = code; ebreak(code) runs ebreak with
 * a0 = code (the machine halts, reporting a0). */
void exit(int code) __attribute__((noreturn));
void ebreak(int code) __attribute__((noreturn));

void *memset(void *dst, int c, size_t n);
void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
int strcmp(const char *a, const char *b);
char *strcpy(char *restrict dst, const char *restrict src);

#endif
