/* The exact and correctly rounded functions of <math.h>: rounding to integers, exponent
 * manipulation, fmod/remainder/remquo, sqrt (correctly rounded, digit by digit on integers), fma
 * (exact product and one rounding), and cbrt/hypot (within 1 ulp: double-double corrections).
 * IEEE binary64, round to nearest even; special values as C's Annex F. */
#include <limits.h>
#include <stdint.h>
#include <math.h>
#include "internal.h"

#define MANT_MASK ((1ULL << 52) - 1)
#define SIGN_BIT (1ULL << 63)

double fabs(double x) { return asdouble(asuint64(x) & ~SIGN_BIT); }

double copysign(double x, double y) {
    return asdouble((asuint64(x) & ~SIGN_BIT) | (asuint64(y) & SIGN_BIT));
}

double nan(const char *tag) {
    (void)tag;
    return asdouble(0x7ff8000000000000ULL);
}

/* -- rounding to integers ---------------------------------------------------------------------- */

double trunc(double x) {
    uint64_t u = asuint64(x);
    int e = EXPONENT(x) - 1023;
    if (e >= 52)
        return x;                            /* integral already, or inf/nan */
    if (e < 0)
        return asdouble(u & SIGN_BIT);       /* |x| < 1: a signed zero */
    return asdouble(u & ~(MANT_MASK >> e));
}

/* x rounded toward -inf (down = 1) or +inf (down = 0) */
static double floor_ceil(double x, int down) {
    uint64_t u = asuint64(x);
    int e = EXPONENT(x) - 1023, neg = SIGN(x);
    if (e >= 52)
        return x;
    if (e < 0) {
        if ((u & ~SIGN_BIT) == 0)
            return x;                        /* +-0 */
        if (neg == down)
            return neg ? -1.0 : 1.0;         /* away from zero: floor(-0.3) = -1, ceil(0.3) = 1 */
        return asdouble(u & SIGN_BIT);       /* toward zero: floor(0.3) = 0, ceil(-0.3) = -0 */
    }
    uint64_t frac = MANT_MASK >> e;
    if ((u & frac) == 0)
        return x;
    if (neg == down)
        u += frac + 1;                       /* one more unit of magnitude (carries into the exponent) */
    return asdouble(u & ~frac);
}

double floor(double x) { return floor_ceil(x, 1); }
double ceil(double x) { return floor_ceil(x, 0); }

double round(double x) {
    uint64_t u = asuint64(x);
    int e = EXPONENT(x) - 1023;
    if (e >= 52)
        return x;
    if (e < -1)
        return asdouble(u & SIGN_BIT);
    if (e == -1)
        return asdouble((u & SIGN_BIT) | 0x3ff0000000000000ULL);   /* 0.5 <= |x| < 1: +-1 */
    uint64_t frac = MANT_MASK >> e;
    u += (frac + 1) >> 1;                    /* add one half, then truncate */
    return asdouble(u & ~frac);
}

double rint(double x) {
    /* |x| < 2^52: adding and subtracting 2^52 rounds to an integer, to nearest even */
    if (EXPONENT(x) - 1023 >= 52)
        return x;
    volatile double big = 0x1p52;
    double a = fabs(x);
    volatile double t = a + big;
    double r = t - big;
    return copysign(r, x);
}

double nearbyint(double x) { return rint(x); }
long lrint(double x) { return (long)rint(x); }
long long llrint(double x) { return (long long)rint(x); }
long lround(double x) { return (long)round(x); }
long long llround(double x) { return (long long)round(x); }

double modf(double x, double *iptr) {
    double i = trunc(x);
    *iptr = i;
    if (isinf(x))
        return copysign(0.0, x);
    return copysign(x - i, x);               /* exact; -0 for negative integers; nan stays nan */
}

/* -- exponents ---------------------------------------------------------------------------------- */

double frexp(double x, int *exp) {
    uint64_t u = asuint64(x);
    int e = EXPONENT(x);
    if (e == 0x7ff || (u & ~SIGN_BIT) == 0) {
        *exp = 0;
        return x;
    }
    int shift = 0;
    if (e == 0) {                            /* subnormal: normalise first */
        x *= 0x1p64;
        u = asuint64(x);
        e = EXPONENT(x);
        shift = 64;
    }
    *exp = e - 1022 - shift;
    return asdouble((u & ~(0x7ffULL << 52)) | (1022ULL << 52));
}

double scalbn(double x, int n) {
    /* multiply in at most three steps so that a subnormal result is rounded once */
    if (n > 1023) {
        x *= 0x1p1023;
        n -= 1023;
        if (n > 1023) {
            x *= 0x1p1023;
            n -= 1023;
            if (n > 1023)
                n = 1023;
        }
    } else if (n < -1022) {
        x *= 0x1p-1022 * 0x1p53;             /* keep 53 bits of room above the subnormal range */
        n += 1022 - 53;
        if (n < -1022) {
            x *= 0x1p-1022 * 0x1p53;
            n += 1022 - 53;
            if (n < -1022)
                n = -1022;
        }
    }
    return x * asdouble((uint64_t)(0x3ff + n) << 52);
}

double ldexp(double x, int n) { return scalbn(x, n); }

double scalbln(double x, long n) {
    return scalbn(x, n > INT_MAX ? INT_MAX : n < INT_MIN ? INT_MIN : (int)n);
}

int ilogb(double x) {
    uint64_t u = asuint64(x) & ~SIGN_BIT;
    int e = EXPONENT(x);
    if (e == 0x7ff)
        return (u & MANT_MASK) ? FP_ILOGBNAN : INT_MAX;
    if (e == 0) {
        if (u == 0)
            return FP_ILOGB0;
        int k = -1023;                       /* subnormal: the position of the highest set bit */
        for (uint64_t m = u << 12; !(m >> 63); m <<= 1)
            k--;
        return k;
    }
    return e - 1023;
}

double logb(double x) {
    if (isnan(x))
        return x + x;
    if (isinf(x))
        return fabs(x);
    if (x == 0)
        return -1.0 / fabs(x);               /* -inf */
    return (double)ilogb(x);
}

double nextafter(double x, double y) {
    if (isnan(x) || isnan(y))
        return x + y;
    if (x == y)
        return y;
    uint64_t u = asuint64(x);
    if ((u & ~SIGN_BIT) == 0)
        return asdouble((asuint64(y) & SIGN_BIT) | 1);   /* the smallest subnormal toward y */
    if ((x < y) == !SIGN(x))
        u++;
    else
        u--;
    return asdouble(u);
}

/* -- remainders --------------------------------------------------------------------------------- */

/* mantissa with its implicit bit, normalised so that bit 52 is set; *e the matching exponent
 * (x = m * 2^(*e - 1075)); x finite and non-zero */
static uint64_t mantissa(double x, int *e) {
    uint64_t m = asuint64(x) & MANT_MASK;
    int ex = EXPONENT(x);
    if (ex == 0) {
        ex = 1;
        while (!(m >> 52)) {
            m <<= 1;
            ex--;
        }
    } else {
        m |= 1ULL << 52;
    }
    *e = ex;
    return m;
}

/* |x| mod |y| exactly (x, y finite, y non-zero), and the low 31 bits of the quotient's integer part */
static double mod_core(double x, double y, uint32_t *quo) {
    double ax = fabs(x), ay = fabs(y);
    *quo = 0;
    if (ax < ay)
        return ax;
    int ex, ey;
    uint64_t mx = mantissa(ax, &ex), my = mantissa(ay, &ey);
    uint32_t q = 0;
    for (; ex > ey; ex--) {                  /* long division, one quotient bit per step */
        if (mx >= my) {
            mx -= my;
            q |= 1;
        }
        mx <<= 1;
        q <<= 1;
    }
    if (mx >= my) {
        mx -= my;
        q |= 1;
    }
    *quo = q & 0x7fffffff;
    if (mx == 0)
        return 0.0;
    while (!(mx >> 52)) {                    /* renormalise */
        mx <<= 1;
        ey--;
    }
    if (ey <= 0)                             /* the remainder is subnormal (exact: it has few bits) */
        return asdouble(mx >> (1 - ey));
    return asdouble(((uint64_t)ey << 52) | (mx & MANT_MASK));
}

double fmod(double x, double y) {
    if (isnan(x) || isnan(y) || isinf(x) || y == 0)
        return (x * y) / (x * y);            /* nan */
    if (isinf(y))
        return x;
    uint32_t q;
    return copysign(mod_core(x, y, &q), x);
}

double remquo(double x, double y, int *quo) {
    *quo = 0;
    if (isnan(x) || isnan(y) || isinf(x) || y == 0)
        return (x * y) / (x * y);
    if (isinf(y))
        return x;
    uint32_t q;
    double ay = fabs(y), r = mod_core(x, y, &q);
    /* to the nearest multiple of y, ties to the even quotient: compare r with |y| / 2 without
     * rounding (for tiny y, 2r is exact; otherwise |y| / 2 is) */
    int more, tie;
    if (ay < 0x1p-1021) {
        more = r + r > ay;
        tie = r + r == ay;
    } else {
        more = r > 0.5 * ay;
        tie = r == 0.5 * ay;
    }
    if (more || (tie && (q & 1))) {
        r -= ay;
        q++;
    }
    int sq = (int)(q & 0x7fffffff);
    *quo = SIGN(x) != SIGN(y) ? -sq : sq;
    return SIGN(x) ? -r : r;                 /* r == 0 keeps x's sign */
}

double remainder(double x, double y) {
    int q;
    return remquo(x, y, &q);
}

/* -- roots -------------------------------------------------------------------------------------- */

double sqrt(double x) {
    uint64_t u = asuint64(x);
    if (isnan(x))
        return x + x;
    if ((u & ~SIGN_BIT) == 0)
        return x;                            /* +-0 */
    if (SIGN(x))
        return (x - x) / (x - x);            /* nan */
    if (isinf(x))
        return x;
    int e;
    uint64_t m = mantissa(x, &e);            /* x = m * 2^(e - 1075), 2^52 <= m < 2^53 */
    e -= 1075;
    if (e & 1) {                             /* make the exponent even */
        m <<= 1;
        e--;
    }
    /* q = floor(sqrt(m * 2^54)), 54 bits, by the digit-by-digit method over the radicand's bit pairs
     * (the remainder r stays below 2q + 1 < 2^55) */
    uint64_t q = 0, r = 0;
    for (int i = 53; i >= 0; i--) {
        r = (r << 2) | (2 * i >= 54 ? (m >> (2 * i - 54)) & 3 : 0);
        uint64_t t = (q << 2) | 1;
        if (r >= t) {
            r -= t;
            q = (q << 1) | 1;
        } else {
            q <<= 1;
        }
    }
    /* sqrt(x) = sqrt(m * 2^54) * 2^((e - 54) / 2); q's last bit is the rounding bit, r the sticky */
    uint64_t mant = q >> 1;
    if ((q & 1) && (r != 0 || (mant & 1)))
        mant++;
    int ee = (e - 54) / 2 + 1;               /* mant in [2^52, 2^53]: value mant * 2^(ee - 1 - 52 + 1) */
    if (mant >> 53) {
        mant >>= 1;
        ee++;
    }
    return asdouble(((uint64_t)(ee + 52 + 1023) << 52) | (mant & MANT_MASK));
}

double cbrt(double x) {
    if (isnan(x) || isinf(x) || x == 0)
        return x + x;
    int scale = 0;
    double a = fabs(x);
    if (EXPONENT(a) == 0) {                  /* subnormal: scale by 2^54 (cube root 2^18) */
        a *= 0x1p54;
        scale = -18;
    }
    /* a first guess from the exponent divided by three, then Newton steps t -= (t^3 - a) / (3 t^2)
     * (quadratic: ~7 % -> 1e-16 in five steps) */
    int e = EXPONENT(a) - 1023;
    int k = (e >= 0 ? e : e - 2) / 3;        /* floor(e / 3) */
    double t = scalbn(1.0 + (scalbn(a, -e) - 1.0) / 3.0, k);
    double rem = scalbn(1.0, e - 3 * k);     /* the exponent left over: 1, 2 or 4 */
    t *= rem == 1.0 ? 1.0 : rem == 2.0 ? 1.2599210498948732 : 1.5874010519681994;
    for (int i = 0; i < 5; i++)
        t -= (t * t * t - a) / (3.0 * t * t);
    /* last correction with the residual a - t^3 computed nearly exactly */
    double t2l, t2 = two_prod(t, t, &t2l);
    double t3l, t3 = two_prod(t2, t, &t3l);
    t3l += t2l * t;
    double res = (a - t3) - t3l;
    t += res / (3.0 * t * t);
    if (scale)
        t = scalbn(t, scale);
    return copysign(t, x);
}

double hypot(double x, double y) {
    if (isinf(x) || isinf(y))
        return INFINITY;
    if (isnan(x) || isnan(y))
        return x + y;
    double a = fabs(x), b = fabs(y);
    if (a < b) {
        double t = a;
        a = b;
        b = t;
    }
    if (b == 0)
        return a;
    if (EXPONENT(a) - EXPONENT(b) > 60)
        return a + b;                        /* b is far below half an ulp of a */
    int scale = 0;
    if (EXPONENT(a) > 1023 + 500) {
        a *= 0x1p-600;
        b *= 0x1p-600;
        scale = 600;
    } else if (EXPONENT(b) < 1023 - 500) {
        a *= 0x1p600;
        b *= 0x1p600;
        scale = -600;
    }
    /* s = a^2 + b^2 as a double-double, then sqrt(sh + sl) ~ r + (sh - r^2 + sl) / (2r) */
    double al, ah = two_prod(a, a, &al);
    double bl, bh = two_prod(b, b, &bl);
    double e1, sh = fast_two_sum(ah, bh, &e1);
    double sl = e1 + al + bl;
    double r = sqrt(sh);
    double rl, rh = two_prod(r, r, &rl);
    r += ((sh - rh) - rl + sl) / (2.0 * r);
    return scale ? scalbn(r, scale) : r;
}

/* -- min, max, difference ----------------------------------------------------------------------- */

double fmin(double x, double y) {
    if (isnan(x))
        return y;
    if (isnan(y))
        return x;
    if (x == y)
        return SIGN(x) ? x : y;              /* fmin(-0, +0) = -0 */
    return x < y ? x : y;
}

double fmax(double x, double y) {
    if (isnan(x))
        return y;
    if (isnan(y))
        return x;
    if (x == y)
        return SIGN(x) ? y : x;              /* fmax(-0, +0) = +0 */
    return x > y ? x : y;
}

double fdim(double x, double y) {
    if (isnan(x) || isnan(y))
        return x + y;
    return x > y ? x - y : 0.0;
}

/* -- fma: x * y + z with one rounding ----------------------------------------------------------- */

/* 64 x 64 -> 128-bit product from 32-bit pieces */
static void mul64(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo) {
    uint64_t a0 = a & 0xffffffff, a1 = a >> 32, b0 = b & 0xffffffff, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffff) + (p10 & 0xffffffff);
    *lo = (p00 & 0xffffffff) | (mid << 32);
    *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* shift the 128-bit (hi, lo) right by n (0 <= n), ORing the bits shifted out into the lowest bit */
static void shr_sticky(uint64_t *hi, uint64_t *lo, int n) {
    if (n == 0)
        return;
    if (n >= 128) {
        *lo = (*hi | *lo) != 0;
        *hi = 0;
    } else if (n >= 64) {
        uint64_t sticky = (*lo != 0) | (n > 64 ? (*hi << (128 - n)) != 0 : 0);
        *lo = (n == 64 ? *hi : *hi >> (n - 64)) | sticky;
        *hi = 0;
    } else {
        uint64_t sticky = (*lo << (64 - n)) != 0;
        *lo = (*lo >> n) | (*hi << (64 - n)) | sticky;
        *hi >>= n;
    }
}

double fma(double x, double y, double z) {
    if (isnan(x) || isnan(y) || isnan(z) || isinf(x) || isinf(y))
        return x * y + z;                    /* nan and infinity rules of the plain operations */
    if (isinf(z))
        return z;
    if (x == 0 || y == 0)
        return x * y + z;                    /* exact product: signed zeros as usual */
    int sp = SIGN(x) ^ SIGN(y), ex, ey, ez;
    uint64_t mx = mantissa(x, &ex), my = mantissa(y, &ey);
    /* the exact product as a 128-bit integer a (top bit 125 or 126): x * y = a * 2^e */
    uint64_t ahi, alo;
    mul64(mx << 10, my << 11, &ahi, &alo);
    int e = (ex - 1075) + (ey - 1075) - 21;
    int sr = sp;
    if (z != 0) {
        /* z as a 128-bit integer b (top bit 126), aligned with a to the larger exponent; the bits
         * shifted out of the smaller one leave a sticky bit (over 70 guard bits below the result) */
        uint64_t bhi = mantissa(z, &ez) << 10, blo = 0;
        int ze = ez - 1075 - 74, sz = SIGN(z);
        if (ze > e) {
            shr_sticky(&ahi, &alo, ze - e);
            e = ze;
        } else {
            shr_sticky(&bhi, &blo, e - ze);
        }
        if (sp == sz) {                      /* both below 2^127: no carry out */
            alo += blo;
            ahi += bhi + (alo < blo);
        } else if (ahi > bhi || (ahi == bhi && alo >= blo)) {
            ahi = ahi - bhi - (alo < blo);
            alo -= blo;
        } else {
            bhi = bhi - ahi - (blo < alo);
            blo -= alo;
            ahi = bhi;
            alo = blo;
            sr = sz;
        }
        if (ahi == 0 && alo == 0)
            return 0.0;                      /* exact cancellation: +0 when rounding to nearest */
    }
    while (!(ahi >> 63)) {                   /* normalise: top bit at 127 */
        ahi = (ahi << 1) | (alo >> 63);
        alo <<= 1;
        e--;
    }
    /* the result is in [2^(127 + e), 2^(128 + e)): biased exponent be; keep 53 bits (fewer when
     * subnormal) and round the `drop` bits below them to nearest even */
    int be = 127 + e + 1023, drop = 75;
    if (be <= 0) {
        drop += 1 - be;
        be = 0;
    }
    if (drop > 128)
        return sr ? -0.0 : 0.0;              /* below half the smallest subnormal */
    uint64_t mant, rhi, rlo;                 /* kept bits; dropped bits */
    if (drop == 128) {
        mant = 0;
        rhi = ahi;
        rlo = alo;
    } else if (drop >= 64) {
        mant = ahi >> (drop - 64);
        rhi = drop == 64 ? 0 : ahi & ((1ULL << (drop - 64)) - 1);
        rlo = alo;
    } else {
        mant = (ahi << (64 - drop)) | (alo >> drop);
        rhi = 0;
        rlo = alo & ((1ULL << drop) - 1);
    }
    uint64_t hh = drop > 64 ? 1ULL << (drop - 65) : 0, hl = drop > 64 ? 0 : 1ULL << (drop - 1);
    int above = rhi > hh || (rhi == hh && rlo > hl);
    int half = rhi == hh && rlo == hl;
    if (above || (half && (mant & 1)))
        mant++;
    uint64_t bits;
    if (be == 0) {
        bits = mant;                         /* subnormal (or the smallest normal after rounding up) */
    } else {
        if (mant >> 53) {
            mant >>= 1;
            be++;
        }
        if (be >= 0x7ff)
            return sr ? -INFINITY : INFINITY;
        bits = ((uint64_t)be << 52) | (mant & MANT_MASK);
    }
    return asdouble(bits | ((uint64_t)sr << 63));
}
