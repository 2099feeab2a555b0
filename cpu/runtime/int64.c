/* 64-bit integer helpers (the libgcc / compiler-rt routines a 32-bit compiler calls for long long
 * division, remainder, multiplication and shifts), for compilers that bring no runtime library of
 * their own for rv32 (Debian's clang). cpu/toolchain.py links this file only for those compilers
 * (or when asked to); zig links its compiler_rt and gcc its libgcc instead.
 *
 * Only 32-bit operations are used here, so nothing in this file calls back into itself. */
#include <stdint.h>

/* count leading zeros of a non-zero word (no __builtin_clz: gcc would call __clzsi2 without Zbb) */
static int clz32(uint32_t x)
{
    int n = 0;
    if (!(x >> 16)) { n += 16; x <<= 16; }
    if (!(x >> 24)) { n += 8; x <<= 8; }
    if (!(x >> 28)) { n += 4; x <<= 4; }
    if (!(x >> 30)) { n += 2; x <<= 2; }
    if (!(x >> 31)) { n += 1; }
    return n;
}

uint64_t __udivmoddi4(uint64_t n, uint64_t d, uint64_t *rem)
{
    uint32_t nh = (uint32_t)(n >> 32), nl = (uint32_t)n;
    uint32_t dh = (uint32_t)(d >> 32), dl = (uint32_t)d;
    if (d == 0) { /* undefined in C; behave like the RISC-V divu/remu */
        if (rem)
            *rem = n;
        return ~(uint64_t)0;
    }
    if (nh == 0 && dh == 0) {
        if (rem)
            *rem = nl % dl;
        return nl / dl;
    }
    if (d > n) {
        if (rem)
            *rem = n;
        return 0;
    }
    /* restoring shift-subtract division, starting at the divisor's leading bit aligned with n's */
    int shift = (dh ? clz32(dh) : 32 + clz32(dl)) - (nh ? clz32(nh) : 32 + clz32(nl));
    uint64_t q = 0, r = n, dd = d << shift;
    for (int i = 0; i <= shift; i++) {
        q <<= 1;
        if (r >= dd) {
            r -= dd;
            q |= 1;
        }
        dd >>= 1;
    }
    if (rem)
        *rem = r;
    return q;
}

uint64_t __udivdi3(uint64_t n, uint64_t d) { return __udivmoddi4(n, d, 0); }

uint64_t __umoddi3(uint64_t n, uint64_t d)
{
    uint64_t r;
    __udivmoddi4(n, d, &r);
    return r;
}

int64_t __divdi3(int64_t a, int64_t b)
{
    uint64_t ua = a < 0 ? (uint64_t)0 - (uint64_t)a : (uint64_t)a;
    uint64_t ub = b < 0 ? (uint64_t)0 - (uint64_t)b : (uint64_t)b;
    uint64_t q = __udivmoddi4(ua, ub, 0);
    return (int64_t)(((a < 0) != (b < 0)) ? (uint64_t)0 - q : q);
}

int64_t __moddi3(int64_t a, int64_t b)
{
    uint64_t ua = a < 0 ? (uint64_t)0 - (uint64_t)a : (uint64_t)a;
    uint64_t ub = b < 0 ? (uint64_t)0 - (uint64_t)b : (uint64_t)b;
    uint64_t r;
    __udivmoddi4(ua, ub, &r);
    return (int64_t)(a < 0 ? (uint64_t)0 - r : r);
}

int64_t __divmoddi4(int64_t a, int64_t b, int64_t *rem)
{
    int64_t q = __divdi3(a, b);
    if (rem)
        *rem = (int64_t)((uint64_t)a - (uint64_t)q * (uint64_t)b);
    return q;
}

/* Compilers inline these on rv32im; they are here for completeness. */
int64_t __muldi3(int64_t a, int64_t b)
{
    uint32_t al = (uint32_t)a, ah = (uint32_t)((uint64_t)a >> 32);
    uint32_t bl = (uint32_t)b, bh = (uint32_t)((uint64_t)b >> 32);
    uint32_t lo = al * bl;
    uint32_t hi = (uint32_t)(((uint64_t)al * bl) >> 32) + al * bh + ah * bl;
    return (int64_t)(((uint64_t)hi << 32) | lo);
}

int64_t __ashldi3(int64_t a, int s)
{
    uint32_t lo = (uint32_t)a, hi = (uint32_t)((uint64_t)a >> 32);
    s &= 63;
    if (s == 0)
        return a;
    if (s >= 32)
        return (int64_t)((uint64_t)(lo << (s - 32)) << 32);
    return (int64_t)(((uint64_t)((hi << s) | (lo >> (32 - s))) << 32) | (lo << s));
}

uint64_t __lshrdi3(uint64_t a, int s)
{
    uint32_t lo = (uint32_t)a, hi = (uint32_t)(a >> 32);
    s &= 63;
    if (s == 0)
        return a;
    if (s >= 32)
        return hi >> (s - 32);
    return ((uint64_t)(hi >> s) << 32) | ((lo >> s) | (hi << (32 - s)));
}

int64_t __ashrdi3(int64_t a, int s)
{
    uint32_t lo = (uint32_t)a;
    int32_t hi = (int32_t)((uint64_t)a >> 32);
    s &= 63;
    if (s == 0)
        return a;
    if (s >= 32)
        return (int64_t)(hi >> (s - 32));
    return (int64_t)(((uint64_t)(uint32_t)(hi >> s) << 32) | ((lo >> s) | ((uint32_t)hi << (32 - s))));
}
