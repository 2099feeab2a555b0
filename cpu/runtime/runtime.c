/* The C runtime of the RV32IM+Zba machine; see runtime.h. */
#include "runtime.h"

/* GCC may turn the loops below into calls to memset/memcpy (themselves); forbid it. Clang/LLVM
 * never does this inside functions with these names. */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_LOOP_IDIOMS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NO_LOOP_IDIOMS
#endif

int putchar(int c)
{
    *(volatile uint8_t *)CONSOLE_ADDR = (uint8_t)c;
    return (uint8_t)c;
}

int puts(const char *s)
{
    while (*s)
        putchar(*s++);
    putchar('\n');
    return 1;
}

void exit(int code)
{
    register int a0 __asm__("a0") = code;
    register int a7 __asm__("a7") = EXIT_SYSCALL;
    for (;;)
        __asm__ volatile("ecall" : : "r"(a0), "r"(a7) : "memory");
}

void ebreak(int code)
{
    register int a0 __asm__("a0") = code;
    for (;;)
        __asm__ volatile("ebreak" : : "r"(a0) : "memory");
}

/* ---- printf ---- */

/* Divide the 64-bit value *v by 10 in place, returning the remainder, using only 32-bit
 * arithmetic (16-bit limbs), so that printf needs no 64-bit division helper. */
static unsigned divmod10_u64(uint64_t *v)
{
    uint32_t hi = (uint32_t)(*v >> 32), lo = (uint32_t)*v;
    uint32_t limbs[4] = {hi >> 16, hi & 0xffff, lo >> 16, lo & 0xffff};
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) {
        uint32_t cur = (r << 16) | limbs[i];
        limbs[i] = cur / 10;
        r = cur % 10;
    }
    *v = ((uint64_t)((limbs[0] << 16) | limbs[1]) << 32) | ((limbs[2] << 16) | limbs[3]);
    return r;
}

static int emit_padded(const char *s, int len, int width, int left, char pad, char sign)
{
    /* sign (0 if none) goes before zero padding and after space padding */
    int n = 0, total = len + (sign ? 1 : 0);
    if (!left && pad == '0' && sign) {
        putchar(sign);
        n++;
        sign = 0;
    }
    if (!left)
        for (; total < width; total++, n++)
            putchar(pad);
    if (sign) {
        putchar(sign);
        n++;
    }
    for (int i = 0; i < len; i++, n++)
        putchar(s[i]);
    if (left)
        for (; total < width; total++, n++)
            putchar(' ');
    return n;
}

int vprintf(const char *fmt, va_list ap)
{
    int n = 0;
    char buf[24];
    for (; *fmt; fmt++) {
        if (*fmt != '%') {
            putchar(*fmt);
            n++;
            continue;
        }
        fmt++;
        int left = 0;
        char pad = ' ';
        for (;; fmt++) {
            if (*fmt == '-')
                left = 1;
            else if (*fmt == '0')
                pad = '0';
            else
                break;
        }
        int width = 0;
        if (*fmt == '*') {
            width = va_arg(ap, int);
            if (width < 0) {
                left = 1;
                width = -width;
            }
            fmt++;
        } else {
            while (*fmt >= '0' && *fmt <= '9')
                width = width * 10 + (*fmt++ - '0');
        }
        if (left)
            pad = ' ';
        int longlong = 0;
        while (*fmt == 'l') {
            longlong += 1;
            fmt++;
        }
        longlong = longlong >= 2;
        char c = *fmt;
        if (c == 0)
            break;
        switch (c) {
        case '%':
            putchar('%');
            n++;
            break;
        case 'c':
            buf[0] = (char)va_arg(ap, int);
            n += emit_padded(buf, 1, width, left, ' ', 0);
            break;
        case 's': {
            const char *s = va_arg(ap, const char *);
            if (!s)
                s = "(null)";
            n += emit_padded(s, (int)strlen(s), width, left, ' ', 0);
            break;
        }
        case 'd':
        case 'i':
        case 'u':
        case 'x':
        case 'X':
        case 'p': {
            uint64_t v;
            char sign = 0;
            if (c == 'd' || c == 'i') {
                int64_t s = longlong ? va_arg(ap, long long) : va_arg(ap, int);
                if (s < 0) {
                    sign = '-';
                    v = (uint64_t)0 - (uint64_t)s;
                } else
                    v = (uint64_t)s;
            } else if (c == 'p') {
                v = (uintptr_t)va_arg(ap, void *);
            } else {
                v = longlong ? va_arg(ap, unsigned long long) : va_arg(ap, unsigned int);
            }
            int len = 0;
            char *end = buf + sizeof buf;
            if (c == 'd' || c == 'i' || c == 'u') {
                do {
                    *--end = (char)('0' + divmod10_u64(&v));
                    len++;
                } while (v);
            } else {
                const char *digits = c == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
                do {
                    *--end = digits[(uint32_t)v & 15];
                    v >>= 4;
                    len++;
                } while (v);
            }
            n += emit_padded(end, len, width, left, pad, sign);
            break;
        }
        default: /* unknown conversion: print it as is */
            putchar('%');
            putchar(c);
            n += 2;
            break;
        }
    }
    return n;
}

int printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vprintf(fmt, ap);
    va_end(ap);
    return n;
}

/* ---- memory and strings ---- */

NO_LOOP_IDIOMS void *memset(void *dst, int c, size_t n)
{
    uint8_t *d = dst;
    uint8_t b = (uint8_t)c;
    while (n && ((uintptr_t)d & 3)) {
        *d++ = b;
        n--;
    }
    if (n >= 4) {
        uint32_t w = b * 0x01010101u;
        volatile uint32_t *dw = (uint32_t *)d; /* volatile: keep this loop a loop */
        for (; n >= 4; n -= 4)
            *dw++ = w;
        d = (uint8_t *)dw;
    }
    while (n--)
        *d++ = b;
    return dst;
}

NO_LOOP_IDIOMS void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    if ((((uintptr_t)d | (uintptr_t)s) & 3) == 0) {
        volatile uint32_t *dw = (uint32_t *)d;
        const uint32_t *sw = (const uint32_t *)s;
        for (; n >= 4; n -= 4)
            *dw++ = *sw++;
        d = (uint8_t *)dw;
        s = (const uint8_t *)sw;
    }
    while (n--) {
        *(volatile uint8_t *)d = *s++;
        d++;
    }
    return dst;
}

NO_LOOP_IDIOMS void *memmove(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    if (d == s || n == 0)
        return dst;
    if (d < s || d >= s + n)
        return memcpy(dst, src, n);
    while (n--)
        *(volatile uint8_t *)(d + n) = s[n];
    return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

size_t strlen(const char *s)
{
    const char *p = s;
    while (*p)
        p++;
    return (size_t)(p - s);
}

int strcmp(const char *a, const char *b)
{
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return (int)(uint8_t)*a - (int)(uint8_t)*b;
}

NO_LOOP_IDIOMS char *strcpy(char *restrict dst, const char *restrict src)
{
    char *d = dst;
    while ((*(volatile char *)d = *src++) != 0)
        d++;
    return dst;
}
