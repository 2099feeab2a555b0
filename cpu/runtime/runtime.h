/* The C runtime of the RV32IM+Zba machine (cpu/machine.py): console output, exit, and the few
 * string/memory functions that programs and compilers need. No libc: programs are freestanding.
 *
 * A program is one .c file with `int main(void)` that includes this header; main's return value is
 * the exit code. */
#ifndef RV32_RUNTIME_H
#define RV32_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <limits.h>

#define CONSOLE_ADDR 0x10000000u
#define EXIT_SYSCALL 93

/* Console. printf supports %d %i %u %x %X %s %c %% (and %p: hex, no 0x), the flags '-' and '0',
 * a width (or '*'), and the length modifiers 'l' (32-bit, as int) and 'll' (64-bit). Returns the
 * number of characters written. */
int putchar(int c);
int puts(const char *s);
int printf(const char *fmt, ...);
int vprintf(const char *fmt, va_list ap);

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
