/* printf's %f %F %e %E %g %G for the RV32IM+Zba machine's runtime (see runtime.h): linked by
 * cpu/toolchain.py into programs that use floating point; __rt_vformat (runtime.c) calls it through
 * a weak reference. Integer arithmetic only: no floating-point helper is needed. */
#include "runtime.h"

/* %f %e %g (and their capitals) of the double with the IEEE-754 bits `bits`, exactly rounded
 * (to nearest, ties to even, on the exact binary value, as glibc and Python do), with integer
 * arithmetic only. The value is m * 2^e. Usually (2^-60 <= 2^e, m * 2^e < 2^64) its integer part fits
 * 64 bits and its fraction 60: the digits come from the integer part and from multiplying the
 * fraction by 10, as many as the conversion needs, then a sticky digit 1 if more non-zero ones
 * follow. Else the exact digits are those of m * 2^e (e >= 0) or of m * 5^-e (e < 0, the point then
 * -e places from the right), computed in a big number of 16-bit limbs (slower: ~50,000 instructions
 * for 1e300, ~300,000 for %e of the smallest subnormal). */
#define FLT_LIMBS 162  /* 16-bit limbs: m * 5^1074 < 2^2550 (subnormals), m * 2^971 < 2^1024 */
#define FLT_DIGITS 800 /* decimal digits of the largest of those (768) */

/* *v /= 10, returning the remainder (constant divisions: multiplications) */
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

static int big_mul_small(uint16_t *a, int n, uint32_t k)   /* a (n limbs, little end first) *= k < 2^16 */
{
    uint32_t carry = 0;
    for (int i = 0; i < n; i++) {
        uint32_t t = a[i] * k + carry;
        a[i] = (uint16_t)t;
        carry = t >> 16;
    }
    if (carry)
        a[n++] = (uint16_t)carry;
    return n;
}

void __rt_format_double(struct __rt_out *o, uint64_t bits, char conv, unsigned flags, int width, int prec)
{
    char sign = (bits >> 63) ? '-' : (flags & __RT_F_PLUS) ? '+' : (flags & __RT_F_SPACE) ? ' ' : 0;
    int upper = conv >= 'A' && conv <= 'Z';
    int biased = (int)((bits >> 52) & 0x7ff);
    uint64_t m = bits & 0xfffffffffffffull;
    if (biased == 0x7ff) {  /* inf, nan: no zero padding */
        int pad = width - 3 - (sign != 0);
        if (!(flags & __RT_F_LEFT))
            __rt_out_pad(o, ' ', pad);
        __rt_out_write(o, &sign, sign != 0);
        __rt_out_write(o, m ? (upper ? "NAN" : "nan") : (upper ? "INF" : "inf"), 3);
        if (flags & __RT_F_LEFT)
            __rt_out_pad(o, ' ', pad);
        return;
    }
    if (prec < 0)
        prec = 6;
    char lc = (char)(conv | 0x20);
    if (lc == 'g' && prec == 0)
        prec = 1;
    int e2 = biased ? biased - 1075 : -1074;
    if (biased)
        m |= 1ull << 52;
    if (lc == 'f' && -(53 + e2) >= (prec + 1) * 10 / 3 + 2)
        m = 0; /* below 10^-(prec+1): rounds to 0, no need for its ~700 digits */

    /* The exact digits: dig[0 .. nd) with the decimal point after `point` digits (point may be < 0 or
     * > nd). Leading zeros are stripped; value 0 has nd = 0. */
    char dig[FLT_DIGITS];   /* on the stack: only while a double is formatted */
    int nd = 0, point = 0;
    if (m && e2 >= -60 && e2 <= 11) {
        int k = e2 < 0 ? -e2 : 0;
        uint64_t ip = e2 >= 0 ? m << e2 : m >> k, frac = e2 >= 0 ? 0 : m & ((1ull << k) - 1);
        char *d = dig + 24;
        while (ip >> 32)
            *--d = (char)('0' + divmod10_u64(&ip));
        for (uint32_t w = (uint32_t)ip; w; w /= 10)
            *--d = (char)('0' + w % 10);
        nd = point = (int)(dig + 24 - d);
        memmove(dig, d, (size_t)nd);
        /* fraction digits: %f needs prec + 1 after the point, %e prec + 2 significant, %g prec + 1 */
        int need = lc == 'f' ? prec + 1 : lc == 'e' ? prec + 2 : prec + 1;
        while (frac && (lc == 'f' ? nd - point : nd) < need && nd < FLT_DIGITS - 1) {
            frac *= 10;
            char c = (char)('0' + (uint32_t)(frac >> k));
            frac &= (1ull << k) - 1;
            if (!nd && c == '0')
                point--; /* a leading zero */
            else
                dig[nd++] = c;
        }
        if (frac)
            dig[nd++] = '1'; /* sticky: something non-zero follows */
        while (nd && dig[nd - 1] == '0')
            nd--;
    } else if (m) {
        uint16_t big[FLT_LIMBS];
        int n = 0;
        for (uint64_t t = m; t; t >>= 16)
            big[n++] = (uint16_t)t;
        if (e2 >= 0) {
            for (int s = e2; s > 0; s -= 15)
                n = big_mul_small(big, n, 1u << (s > 15 ? 15 : s));
        } else {
            static const uint16_t pow5[7] = {1, 5, 25, 125, 625, 3125, 15625};
            for (int s = -e2; s > 0; s -= 6) /* 5^6 = 15625 < 2^16 */
                n = big_mul_small(big, n, pow5[s >= 6 ? 6 : s]);
        }
        /* to decimal, 4 digits at a time from the bottom */
        char *d = dig + FLT_DIGITS;
        while (n) {
            uint32_t r = 0;
            for (int i = n - 1; i >= 0; i--) {
                uint32_t cur = (r << 16) | big[i];
                big[i] = (uint16_t)(cur / 10000);
                r = cur % 10000;
            }
            while (n && !big[n - 1])
                n--;
            for (int k = 0; k < 4; k++) {
                *--d = (char)('0' + r % 10);
                r /= 10;
            }
        }
        while (*d == '0')
            d++;
        nd = (int)(dig + FLT_DIGITS - d);
        memmove(dig, d, (size_t)nd);
        point = nd + (e2 < 0 ? e2 : 0);
        while (nd && dig[nd - 1] == '0')   /* trailing zeros carry nothing */
            nd--;
    }

    /* exponent of the first significant digit (for %e/%g); 0 for the value 0 */
    int exp10 = nd ? point - 1 : 0;
    int style_e = lc == 'e', strip = 0;
    if (lc == 'g') {
        /* P = prec significant digits; the exponent X after rounding to P digits decides the style */
        int x = exp10;
        if (nd > prec) {   /* does rounding to prec digits carry into a new digit? */
            int up = dig[prec] > '5' || (dig[prec] == '5' && (nd > prec + 1 || ((dig[prec - 1] - '0') & 1)));
            if (up) {
                int i = prec - 1;
                while (i >= 0 && dig[i] == '9')
                    i--;
                if (i < 0)
                    x++;
            }
        }
        if (x < -4 || x >= prec) {
            style_e = 1;
            prec -= 1;
        } else {
            prec = prec - 1 - x;
        }
        strip = !(flags & __RT_F_ALT);
    }

    /* keep digits up to position `cut` (index into dig; may be <= 0 or > nd), rounded */
    int cut = style_e ? prec + 1 : point + prec;
    if (cut < nd) {
        int up = 0;
        if (cut >= 0) {
            char next = dig[cut];
            up = next > '5' || (next == '5' && (nd > cut + 1 || (cut > 0 && ((dig[cut - 1] - '0') & 1))));
        }
        nd = cut < 0 ? 0 : cut;
        if (up) {
            int i = nd - 1;
            while (i >= 0 && dig[i] == '9')
                i--;
            if (i < 0) {   /* 999 -> 1000: one more integer digit */
                dig[0] = '1';
                nd = 1;
                point++;
            } else {
                dig[i]++;
                nd = i + 1;
            }
        }
        if (!nd)
            point = 0;   /* rounded to zero */
    }
    if (style_e)
        exp10 = nd ? point - 1 : 0;

    /* lay out: integer part, fraction (prec digits, fewer when stripping), exponent */
    char ebuf[8];
    int elen = 0;
    char ibuf[8];
    const char *ip;   /* the integer digits */
    int ilen, ifill;  /* ilen digits from ip, then ifill zeros */
    int flead, fdig;  /* fraction: flead zeros, then fdig digits from dig + fstart */
    int fstart;
    if (style_e) {
        ibuf[0] = nd ? dig[0] : '0';
        ip = ibuf;
        ilen = 1;
        ifill = 0;
        flead = 0;
        fstart = 1;
        fdig = nd > 1 ? nd - 1 : 0;
        int x = exp10 < 0 ? -exp10 : exp10;
        char *e = ebuf + sizeof ebuf;
        do {
            *--e = (char)('0' + x % 10);
            x /= 10;
        } while (x || e > ebuf + sizeof ebuf - 2);
        *--e = exp10 < 0 ? '-' : '+';
        *--e = upper ? 'E' : 'e';
        elen = (int)(ebuf + sizeof ebuf - e);
        memmove(ebuf, e, (size_t)elen);
    } else {
        if (point > 0) {
            ip = dig;
            ilen = point < nd ? point : nd;
            ifill = point - ilen;
            flead = 0;
            fstart = point;
            fdig = nd > point ? nd - point : 0;
        } else {
            ibuf[0] = '0';
            ip = ibuf;
            ilen = 1;
            ifill = 0;
            flead = -point;
            fstart = 0;
            fdig = nd;
            if (flead > prec) {
                flead = prec;
                fdig = 0;
            }
        }
    }
    int fzero = prec - flead - fdig;   /* trailing zeros of the fraction */
    if (fzero < 0)
        fzero = 0;
    if (strip) {
        while (fdig && dig[fstart + fdig - 1] == '0')
            fdig--;
        fzero = 0;
        if (!fdig)
            flead = 0;
    }
    int dot = (flead + fdig + fzero) > 0 || (flags & __RT_F_ALT);
    int body = ilen + ifill + dot + flead + fdig + fzero + elen;
    int zeros = 0, slen = sign != 0;
    if ((flags & (__RT_F_ZERO | __RT_F_LEFT)) == __RT_F_ZERO && width > body + slen)
        zeros = width - body - slen;
    int pad = width - body - slen - zeros;
    if (!(flags & __RT_F_LEFT))
        __rt_out_pad(o, ' ', pad);
    __rt_out_write(o, &sign, slen);
    __rt_out_pad(o, '0', zeros);
    __rt_out_write(o, ip, ilen);
    __rt_out_pad(o, '0', ifill);
    __rt_out_write(o, ".", dot);
    __rt_out_pad(o, '0', flead);
    __rt_out_write(o, dig + fstart, fdig);
    __rt_out_pad(o, '0', fzero);
    __rt_out_write(o, ebuf, elen);
    if (flags & __RT_F_LEFT)
        __rt_out_pad(o, ' ', pad);
}
