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

/* ---- printf: one formatter (__rt_vformat) for the console and for buffers (the sprintf family) ---- */

/* Divide the 64-bit value *v by 10000 in place, returning the remainder, using only 32-bit
 * arithmetic (16-bit limbs), so that printf needs no 64-bit division helper. (Division by a
 * constant compiles to multiplications: the machine's divider takes 33 cycles.) */
static unsigned divmod10000_u64(uint64_t *v)
{
    uint32_t hi = (uint32_t)(*v >> 32), lo = (uint32_t)*v;
    uint32_t limbs[4] = {hi >> 16, hi & 0xffff, lo >> 16, lo & 0xffff};
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) {
        uint32_t cur = (r << 16) | limbs[i];
        limbs[i] = cur / 10000;
        r = cur % 10000;
    }
    *v = ((uint64_t)((limbs[0] << 16) | limbs[1]) << 32) | ((limbs[2] << 16) | limbs[3]);
    return r;
}

/* The decimal digits of v (>= 2^32), written backwards before d, 4 at a time while v needs 64
 * bits; returns where they start. Out of line: a rare case, kept out of __rt_vformat's registers. */
__attribute__((noinline)) static char *dec64(char *d, uint64_t v)
{
    while (v >> 32) {
        unsigned r = divmod10000_u64(&v);
        for (int i = 0; i < 4; i++, r /= 10)
            *--d = (char)('0' + r % 10);
    }
    for (uint32_t w = (uint32_t)v; w; w /= 10)
        *--d = (char)('0' + w % 10);
    return d;
}

/* Output: to the console when out == NULL, else into out, of which the first cap characters are
 * stored; n counts every character. */
static inline size_t put_run(char *out, size_t cap, size_t n, const char *s, int len)
{
    if (!out) {
        for (int i = 0; i < len; i++)
            *(volatile uint8_t *)CONSOLE_ADDR = (uint8_t)s[i];
    } else {
        for (int i = 0; i < len; i++)
            if (n + i < cap)
                out[n + i] = s[i];
    }
    return len > 0 ? n + (size_t)len : n;
}

static inline size_t put_fill(char *out, size_t cap, size_t n, char c, int len)
{
    for (; len > 0; len--, n++) {
        if (!out)
            *(volatile uint8_t *)CONSOLE_ADDR = (uint8_t)c;
        else if (n < cap)
            out[n] = c;
    }
    return n;
}

void __rt_out_write(struct __rt_out *o, const char *s, int n)
{
    o->n = put_run(o->buf, o->cap, o->n, s, n);
}

void __rt_out_pad(struct __rt_out *o, char c, int n)
{
    o->n = put_fill(o->buf, o->cap, o->n, c, n);
}

/* The flag characters ' ' '#' '+' '-' '0' as bits of (1 << (c - ' ')): __RT_F_* in runtime.h. */
#define FLAG_CHARS (__RT_F_SPACE | __RT_F_ALT | __RT_F_PLUS | __RT_F_LEFT | __RT_F_ZERO)
/* The length modifiers h j l q t z as bits 1 << (c - 'h') (L is tested apart). */
#define LENGTH_CHARS \
    (1u << 0 | 1u << ('j' - 'h') | 1u << ('l' - 'h') | 1u << ('q' - 'h') | 1u << ('t' - 'h') | 1u << ('z' - 'h'))

int __rt_vformat(char *out, size_t cap, const char *fmt, va_list ap)
{
    size_t n = 0;
    char buf[28];
    for (;;) {
        const char *lit = fmt;
        char c;
        if (!out) {
            for (; (c = *fmt) != 0 && c != '%'; fmt++)
                *(volatile uint8_t *)CONSOLE_ADDR = (uint8_t)c;
        } else {
            for (; (c = *fmt) != 0 && c != '%'; fmt++)
                if (n + (size_t)(fmt - lit) < cap)
                    out[n + (size_t)(fmt - lit)] = c;
        }
        n += (size_t)(fmt - lit);
        if (!c)
            break;
        c = *++fmt;
        fmt++;
        unsigned flags = 0;
        while ((unsigned)(c - ' ') <= 16 && ((FLAG_CHARS >> (c - ' ')) & 1)) {
            flags |= 1u << (c - ' ');
            c = *fmt++;
        }
        int width = 0;
        if (c == '*') {
            width = va_arg(ap, int);
            if (width < 0) {
                flags |= __RT_F_LEFT;
                width = -width;
            }
            c = *fmt++;
        } else {
            while ((unsigned)(c - '0') < 10) {
                width = width * 10 + (c - '0');
                c = *fmt++;
            }
        }
        int prec = -1;
        if (c == '.') {
            c = *fmt++;
            if (c == '*') {
                prec = va_arg(ap, int);
                if (prec < 0)
                    prec = -1;
                c = *fmt++;
            } else {
                prec = 0;
                while ((unsigned)(c - '0') < 10) {
                    prec = prec * 10 + (c - '0');
                    c = *fmt++;
                }
            }
        }
        /* length: 0 int, 1 long (32-bit, as int), 2 long long / intmax_t, -1 short, -2 char;
         * size_t and ptrdiff_t are 32-bit */
        int length = 0;
        if ((unsigned)(c - 'h') <= 18 && ((LENGTH_CHARS >> (c - 'h')) & 1)) {
            if (c == 'l') {
                length = 1;
                if (*fmt == 'l') {
                    length = 2;
                    fmt++;
                }
            } else if (c == 'h') {
                length = -1;
                if (*fmt == 'h') {
                    length = -2;
                    fmt++;
                }
            } else if (c == 'j' || c == 'q') {
                length = 2;
            }
            c = *fmt++;
        } else if (c == 'L') {
            length = 2;
            c = *fmt++;
        }
        if (!c)
            break;
        /* the field: [spaces] prefix [zeros] body [spaces] */
        const char *body = buf;
        int plen = 0, zeros = 0, blen;
        unsigned base = 10;
        uint64_t v;
        switch (c) {
        case 'd':
        case 'i': {
            int64_t s = length == 2 ? va_arg(ap, long long) : va_arg(ap, int);
            if (length == -1)
                s = (short)s;
            else if (length == -2)
                s = (signed char)s;
            v = (uint64_t)s;
            plen = 1;
            if (s < 0) {
                buf[0] = '-';
                v = 0 - v;
            } else if (flags & __RT_F_PLUS) {
                buf[0] = '+';
            } else if (flags & __RT_F_SPACE) {
                buf[0] = ' ';
            } else {
                plen = 0;
            }
            goto integer;
        }
        case 'p':
            v = (uintptr_t)va_arg(ap, void *);
            buf[0] = '0';
            buf[1] = 'x';
            plen = 2;
            base = 16;
            goto integer;
        case 'x':
        case 'X':
            base = 16;
            goto unsigned_arg;
        case 'o':
            base = 8;
            goto unsigned_arg;
        case 'u':
        unsigned_arg:
            v = length == 2 ? va_arg(ap, unsigned long long) : va_arg(ap, unsigned int);
            if (length == -1)
                v = (unsigned short)v;
            else if (length == -2)
                v = (unsigned char)v;
            if ((flags & __RT_F_ALT) && base == 16 && v) {
                buf[0] = '0';
                buf[1] = c;
                plen = 2;
            }
        integer: {
            /* the digits, right-aligned in buf; the prefix (plen characters) is at buf[0] */
            const char *digits = c == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
            char *end = buf + sizeof buf, *d = end;
            int nonzero = v != 0;
            if (base == 10) {
                if (v >> 32)
                    d = dec64(d, v);
                else
                    for (uint32_t w = (uint32_t)v; w; w /= 10)
                        *--d = (char)('0' + w % 10);
            } else { /* 8 or 16: shifts */
                unsigned shift = base == 16 ? 4 : 3;
                for (; v >> 32; v >>= shift)
                    *--d = digits[(uint32_t)v & (base - 1)];
                for (uint32_t w = (uint32_t)v; w; w >>= shift)
                    *--d = digits[w & (base - 1)];
            }
            if (!nonzero && (prec != 0 || c == 'p'))
                *--d = '0'; /* zero is "0", or nothing at precision 0 */
            blen = (int)(end - d);
            if (prec >= 0)
                zeros = prec - blen;
            else if ((flags & (__RT_F_ZERO | __RT_F_LEFT)) == __RT_F_ZERO)
                zeros = width - plen - blen;
            if (c == 'o' && (flags & __RT_F_ALT) && zeros <= 0 && (nonzero || !blen))
                zeros = 1; /* %#o: the first digit is a 0 */
            if (zeros < 0)
                zeros = 0;
            if (!zeros) { /* the usual case: the prefix goes right before the digits */
                for (int i = plen; i > 0; i--)
                    *--d = buf[i - 1];
                blen += plen;
                plen = 0;
            }
            body = d;
            break;
        }
        case 's':
            body = va_arg(ap, const char *);
            if (!body)
                body = "(null)";
            blen = 0;
            while ((prec < 0 || blen < prec) && body[blen])
                blen++;
            break;
        case 'c':
            buf[0] = (char)va_arg(ap, int);
            blen = 1;
            break;
        case 'n': {
            void *ptr = va_arg(ap, void *);
            if (length == 2)
                *(long long *)ptr = (long long)n;
            else if (length == -1)
                *(short *)ptr = (short)n;
            else if (length == -2)
                *(signed char *)ptr = (signed char)n;
            else
                *(int *)ptr = (int)n;
            continue;
        }
        case 'f':
        case 'F':
        case 'e':
        case 'E':
        case 'g':
        case 'G':
        case 'a':
        case 'A': {
            /* doubles (long double, %Lf, is read as a double); formatted by printf_float.c, which
             * cpu/toolchain.py links when the program uses floating point; else printed as is */
            union {
                double d;
                uint64_t u;
            } x = {.d = va_arg(ap, double)};
            if (__rt_format_double && c != 'a' && c != 'A') {
                struct __rt_out o = {out, cap, n};
                __rt_format_double(&o, x.u, c, flags, width, prec);
                n = o.n;
                continue;
            }
        }
            /* fall through */
        default: /* %% and unknown conversions: printed as is (%% as %) */
            buf[0] = '%';
            buf[1] = c;
            body = buf + (c == '%');
            blen = 2 - (c == '%');
            width = 0;
            break;
        }
        int pad = width - plen - zeros - blen;
        if (!(flags & __RT_F_LEFT) && pad > 0) {
            n = put_fill(out, cap, n, ' ', pad);
            pad = 0;
        }
        if (zeros) {
            n = put_run(out, cap, n, buf, plen);
            n = put_fill(out, cap, n, '0', zeros);
        }
        n = put_run(out, cap, n, body, blen);
        n = put_fill(out, cap, n, ' ', pad);
    }
    return (int)n;
}

int vprintf(const char *fmt, va_list ap)
{
    return __rt_vformat(NULL, 0, fmt, ap);
}

int printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = __rt_vformat(NULL, 0, fmt, ap);
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
