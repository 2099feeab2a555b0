/* Trigonometric functions in IEEE binary64, round to nearest: sin cos tan asin acos atan atan2.
 * Soft-float machine (no FPU): every + - * / below is a runtime call, so the code keeps the
 * number of operations moderate and uses double-double arithmetic (internal.h) where accuracy
 * needs it. No errno, no exceptions; special values per C Annex F.
 *
 * sin/cos/tan: the argument is reduced to r = x - n*pi/2, |r| <= ~pi/4, held as a double-double
 *   hi + lo: Cody-Waite with pi/2 split into four parts (33+33+33+53 bits) for |x| < 2^20, and
 *   Payne-Hanek (integer arithmetic on a window of 192 bits of 2/pi) above, up to DBL_MAX.
 *   Kernels on [-pi/4, pi/4]: Taylor series of sin and cos (the first term of cos is computed
 *   exactly); tan is the double-double quotient of the two kernels.
 * atan/atan2/asin/acos: one core computes atan(a/b) for 0 <= a <= b as a double-double:
 *   c = i/16 nearest to a/b, t = (a - c*b)/(b + c*a) in double-double (|t| <= ~1/32),
 *   atan(a/b) = atan(c) + atan(t) with atan(c) tabulated as hi+lo pairs and atan(t) a short
 *   Taylor series. asin(x) = atan2(x, sqrt(1-x^2)), acos(x) = atan2(sqrt(1-x^2), x) with the
 *   square root formed as a double-double.
 *
 * All constants were generated with mpmath 1.3 (mp.prec = 2000) and rounded to nearest double
 * (float(v).hex()):
 *   pi/2 parts: P1 = pi/2 rounded to 33 bits, P2 = (pi/2 - P1) rounded to 33 bits, P3 likewise,
 *   P4 = (pi/2 - P1 - P2 - P3) rounded to 53 bits; X_H, X_L = double(v), double(v - X_H);
 *   Taylor coefficients (-1)^k/(2k+1)!, (-1)^k/(2k)!, (-1)^k/(2k+1) rounded to double.
 *
 * Measured against mpmath (a few thousand arguments per function, huge ones included): sin, cos,
 * tan within 0.8 ulp; asin, acos, atan, atan2 within 0.5 ulp + the rounding of a subnormal
 * quotient by the compiler's division. */

#include <stdint.h>
#include <math.h>
#include "internal.h"

/* pi/2, pi, pi/4 and 3pi/4 as double-doubles (hi = value rounded to nearest, lo = the rest) */
static const double PIO2_H = 0x1.921fb54442d18p+0, PIO2_L = 0x1.1a62633145c07p-54;
static const double PI_H = 0x1.921fb54442d18p+1, PI_L = 0x1.1a62633145c07p-53;
static const double PIO4_H = 0x1.921fb54442d18p-1;
static const double PI3O4_H = 0x1.2d97c7f3321d2p+1;

/* 2/pi rounded to double (only used to pick n in the Cody-Waite reduction) */
static const double INVPIO2 = 0x1.45f306dc9c883p-1;

/* pi/2 = P1 + P2 + P3 + P4 + O(2^-160): P1..P3 have 33 significant bits each, so k*Pi is exact
 * for |k| < 2^20 */
static const double CW_P1 = 0x1.921fb54400000p+0;
static const double CW_P2 = 0x1.0b4611a600000p-34;
static const double CW_P3 = 0x1.3198a2e000000p-69;
static const double CW_P4 = 0x1.b839a252049c1p-104;

/* Bits of 2/pi for Payne-Hanek, most significant first, preceded by 64 zero bits: the whole
 * string of 40*32 bits read as a binary fraction 0.b0 b1 b2 ... equals (2/pi) * 2^-64
 * (truncated). Generated as floor((2/pi) * 2^(40*32 - 64)) with mpmath. */
static const uint32_t TWO_OVER_PI[40] = {
    0x00000000, 0x00000000, 0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0, 0xdb629599,
    0x3c439041, 0xfe5163ab, 0xdebbc561, 0xb7246e3a, 0x424dd2e0, 0x06492eea, 0x09d1921c,
    0xfe1deb1c, 0xb129a73e, 0xe88235f5, 0x2ebb4484, 0xe99c7026, 0xb45f7e41, 0x3991d639,
    0x835339f4, 0x9c845f8b, 0xbdf9283b, 0x1ff897ff, 0xde05980f, 0xef2f118b, 0x5a0a6d1f,
    0x6d367ecf, 0x27cb09b7, 0x4f463f66, 0x9e5fea2d, 0x7527bac7, 0xebe5f17b, 0x3d0739f7,
    0x8a5292ea, 0x6bfb5fb1, 0x1f8d5d08, 0x56033046, 0xfc7b6bab,
};

/* sin(r) = r + r^3 * (S1 + S2 r^2 + ... + S8 r^14): Taylor, S_k = (-1)^k / (2k+1)!; the first
 * omitted term, r^19/19!, is below 2^-62 * sin(r) for |r| <= 0.8 */
static const double S1 = -0x1.5555555555555p-3, S2 = 0x1.1111111111111p-7,
                    S3 = -0x1.a01a01a01a01ap-13, S4 = 0x1.71de3a556c734p-19,
                    S5 = -0x1.ae64567f544e4p-26, S6 = 0x1.6124613a86d09p-33,
                    S7 = -0x1.ae7f3e733b81fp-41, S8 = 0x1.952c77030ad4ap-49;

/* cos(r) = 1 - r^2/2 + r^4 * (C2 + C3 r^2 + ... + C9 r^14): Taylor, C_k = (-1)^k / (2k)!; the
 * first omitted term, r^20/20!, is below 2^-67 * cos(r) for |r| <= 0.8 */
static const double C2 = 0x1.5555555555555p-5, C3 = -0x1.6c16c16c16c17p-10,
                    C4 = 0x1.a01a01a01a01ap-16, C5 = -0x1.27e4fb7789f5cp-22,
                    C6 = 0x1.1eed8eff8d898p-29, C7 = -0x1.93974a8c07c9dp-37,
                    C8 = 0x1.ae7f3e733b81fp-45, C9 = -0x1.6827863b97d97p-53;

/* atan(t) = t + t^3 * (A1 + A2 t^2 + ... + A5 t^8) for |t| <= ~1/32: Taylor, A_k = (-1)^k/(2k+1) */
static const double A1 = -0x1.5555555555555p-2, A2 = 0x1.999999999999ap-3,
                    A3 = -0x1.2492492492492p-3, A4 = 0x1.c71c71c71c71cp-4,
                    A5 = -0x1.745d1745d1746p-4;

/* atan(i/16) for i = 0..16 as hi, lo pairs (hi = rounded to nearest, lo = the rest) */
static const double ATAN_TAB[17][2] = {
    {0.0, 0.0},
    {0x1.ff55bb72cfdeap-5, -0x1.c934d86d23f1dp-60},
    {0x1.fd5ba9aac2f6ep-4, -0x1.cd37686760c17p-59},
    {0x1.7b97b4bce5b02p-3, 0x1.347b0b4f881cap-58},
    {0x1.f5b75f92c80ddp-3, 0x1.8ab6e3cf7afbdp-57},
    {0x1.362773707ebccp-2, -0x1.963a544b672d8p-57},
    {0x1.6f61941e4def1p-2, -0x1.c63aae6f6e918p-56},
    {0x1.a64eec3cc23fdp-2, -0x1.24dec1b50b7ffp-56},
    {0x1.dac670561bb4fp-2, 0x1.a2b7f222f65e2p-56},
    {0x1.0657e94db30d0p-1, -0x1.d5b495f6349e6p-56},
    {0x1.1e00babdefeb4p-1, -0x1.928df287a668fp-58},
    {0x1.345f01cce37bbp-1, 0x1.1021137c71102p-55},
    {0x1.4978fa3269ee1p-1, 0x1.2419a87f2a458p-56},
    {0x1.5d58987169b18p-1, 0x1.0028e4bc5e7cap-57},
    {0x1.700a7c5784634p-1, -0x1.8c34d25aadef6p-56},
    {0x1.819d0b7158a4dp-1, -0x1.bf76229d3b917p-56},
    {0x1.921fb54442d18p-1, 0x1.1a62633145c07p-55},
};

/* |x| by clearing the sign bit */
static inline double absd(double x) { return asdouble(asuint64(x) & 0x7fffffffffffffffULL); }

/* 2^k as a double for -1022 <= k <= 1023 */
static inline double pow2(int k) { return asdouble((uint64_t)(k + 1023) << 52); }

/* number of leading zero bits of a nonzero 64-bit value */
static int clz64(uint64_t v) {
    int n = 0;
    if (!(v >> 32)) { n += 32; v <<= 32; }
    if (!(v >> 48)) { n += 16; v <<= 16; }
    if (!(v >> 56)) { n += 8; v <<= 8; }
    if (!(v >> 60)) { n += 4; v <<= 4; }
    if (!(v >> 62)) { n += 2; v <<= 2; }
    if (!(v >> 63)) { n += 1; }
    return n;
}

/* Payne-Hanek: for finite |x| >= 2^20, returns n mod 4 and *hi + *lo = x - n*pi/2 (|r| <= pi/4).
 * x = m * 2^e with m a 53-bit integer; x * 2/pi mod 4 = m * W * 2^(2-192) mod 4 + O(2^-137),
 * where W is the 192-bit window of 2/pi's bits starting at the bit of weight 2^(e-1) (the bits
 * before it only add multiples of 4). */
static int reduce_large(double x, double *hi, double *lo) {
    uint64_t ix = asuint64(x);
    int e = (int)((ix >> 52) & 0x7ff) - 1075;
    uint64_t m = (ix & 0x000fffffffffffffULL) | 0x0010000000000000ULL;
    int j0 = e + 62; /* first bit of the window, counted in TWO_OVER_PI's string */
    int wi = j0 >> 5, sh = j0 & 31;
    uint32_t w[6], p[8], mm[2], f[6];
    int i, j;
    for (i = 0; i < 6; i++) { /* w[0] least significant */
        int k = wi + 5 - i;
        uint32_t v = TWO_OVER_PI[k] << sh;
        if (sh) v |= TWO_OVER_PI[k + 1] >> (32 - sh);
        w[i] = v;
    }
    mm[0] = (uint32_t)m;
    mm[1] = (uint32_t)(m >> 32);
    for (i = 0; i < 8; i++) p[i] = 0;
    for (i = 0; i < 6; i++) {
        uint64_t carry = 0;
        for (j = 0; j < 2; j++) {
            uint64_t t = (uint64_t)w[i] * mm[j] + p[i + j] + carry;
            p[i + j] = (uint32_t)t;
            carry = t >> 32;
        }
        p[i + 2] = (uint32_t)carry;
    }
    /* bits 190, 191 of p: the integer part mod 4; bits 0..189: the fraction. Shift the
     * fraction to a 192-bit f (f[5] most significant, value f * 2^-192). */
    int n = (int)(p[5] >> 30);
    f[0] = p[0] << 2;
    for (i = 1; i < 6; i++) f[i] = (p[i] << 2) | (p[i - 1] >> 30);
    uint64_t F2 = ((uint64_t)f[5] << 32) | f[4];
    uint64_t F1 = ((uint64_t)f[3] << 32) | f[2];
    uint64_t F0 = ((uint64_t)f[1] << 32) | f[0];
    int neg = 0;
    if (F2 >> 63) { /* fraction >= 1/2: round n up, r = fraction - 1 < 0 */
        n++;
        neg = 1;
        /* F = 2^192 - F */
        F0 = ~F0;
        F1 = ~F1;
        F2 = ~F2;
        if (++F0 == 0)
            if (++F1 == 0) ++F2;
    }
    int shift = 0;
    for (i = 0; i < 2 && F2 == 0; i++) {
        F2 = F1;
        F1 = F0;
        F0 = 0;
        shift += 64;
    }
    double rh, rl;
    if (F2 == 0) {
        rh = 0.0;
        rl = 0.0;
    } else {
        int lz = clz64(F2);
        if (lz) {
            F2 = (F2 << lz) | (F1 >> (64 - lz));
            F1 = (F1 << lz) | (F0 >> (64 - lz));
        }
        shift += lz;
        /* fraction = (F2 + F1 * 2^-64) * 2^(-64-shift) ~= d1 * 2^(-53-shift) + d2 * 2^(-106-shift) */
        double d1 = (double)(int64_t)(F2 >> 11);
        double d2 = (double)(int64_t)(((F2 & 0x7ff) << 42) | (F1 >> 22));
        double fh = d1 * pow2(-53 - shift), fl = d2 * pow2(-106 - shift);
        /* r = fraction * pi/2 */
        double e1;
        double ph = two_prod(fh, PIO2_H, &e1);
        e1 += fh * PIO2_L + fl * PIO2_H;
        rh = fast_two_sum(ph, e1, &rl);
    }
    if (neg) {
        rh = -rh;
        rl = -rl;
    }
    if (ix >> 63) {
        rh = -rh;
        rl = -rl;
        n = -n;
    }
    *hi = rh;
    *lo = rl;
    return n & 3;
}

/* x finite with |x| > pi/4: returns n mod 4 and *hi + *lo = x - n*pi/2, |hi| <= ~pi/4 */
static int reduce(double x, double *hi, double *lo) {
    if (EXPONENT(x) < 1023 + 20) { /* |x| < 2^20: Cody-Waite */
        const double magic = 0x1.8p52;
        double kd = x * INVPIO2 + magic;
        int n = (int)(asuint64(kd) & 3); /* kd = 1.5*2^52 + n */
        double fn = kd - magic;
        double r1 = x - fn * CW_P1; /* exact */
        double e, s = two_sum(r1, -(fn * CW_P2), &e);
        double tail = (e - fn * CW_P3) - fn * CW_P4;
        *hi = fast_two_sum(s, tail, lo);
        return n & 3;
    }
    return reduce_large(x, hi, lo);
}

/* p + e == a * a exactly (Dekker's product with a single split) */
static inline double sqr_exact(double a, double *e) {
    double p = a * a, ah, al;
    split(a, &ah, &al);
    *e = ((ah * ah - p) + 2.0 * ah * al) + al * al;
    return p;
}

/* p + e == c * b exactly when c has at most 26 significant bits (c = i/16 here): only b is split */
static inline double prod_short(double c, double b, double *e) {
    double p = c * b, bh, bl;
    split(b, &bh, &bl);
    *e = (c * bh - p) + c * bl;
    return p;
}

/* sin(hi + lo) = *sh + *sl for |hi| <= ~pi/4, |lo| <= ulp(hi) */
static void ksin(double hi, double lo, double *sh, double *sl) {
    double z = hi * hi;
    double p = S7 + z * S8;
    p = S6 + z * p;
    p = S5 + z * p;
    p = S4 + z * p;
    p = S3 + z * p;
    p = S2 + z * p;
    p = S1 + z * p;
    double t = (hi * z) * p + (lo - 0.5 * z * lo);
    *sh = fast_two_sum(hi, t, sl);
}

/* cos(hi + lo) = *ch + *cl for |hi| <= ~pi/4, |lo| <= ulp(hi) */
static void kcos(double hi, double lo, double *ch, double *cl) {
    double zl, z = sqr_exact(hi, &zl); /* hi^2 = z + zl exactly */
    double q = C8 + z * C9;
    q = C7 + z * q;
    q = C6 + z * q;
    q = C5 + z * q;
    q = C4 + z * q;
    q = C3 + z * q;
    q = C2 + z * q;
    double hz = 0.5 * z;
    double w = 1.0 - hz;
    double c = (((1.0 - w) - hz) - 0.5 * zl - hi * lo) + (z * z) * q;
    *ch = fast_two_sum(w, c, cl);
}

/* (nh + nl) / (dh + dl) in double-double precision, rounded to a double */
static double dd_div(double nh, double nl, double dh, double dl) {
    double q = nh / dh;
    double pe, p = two_prod(q, dh, &pe);
    double rem = (((nh - p) - pe) + nl) - q * dl;
    return q + rem / dh;
}

/* x = n * pi/2 + hi + lo with |hi + lo| <= ~pi/4 (n = 0 and x itself when |x| <= pi/4 already) */
static int reduce_quadrant(double x, double *hi, double *lo) {
    int ex = EXPONENT(x);
    if (ex < 1022 || (ex == 1022 && (asuint64(x) & 0x7fffffffffffffffULL) <= asuint64(PIO4_H))) {
        *hi = x;
        *lo = 0.0;
        return 0;
    }
    return reduce(x, hi, lo);
}

double sin(double x) {
    int ex = EXPONENT(x);
    if (ex < 1023 - 26) return x; /* |x| < 2^-26: sin(x) rounds to x (also +-0, subnormals) */
    if (ex == 0x7ff) return x - x; /* nan or inf: nan */
    double hi, lo, rh, rl;
    int n = reduce_quadrant(x, &hi, &lo);
    if (n & 1)
        kcos(hi, lo, &rh, &rl);
    else
        ksin(hi, lo, &rh, &rl);
    double r = rh + rl;
    return (n & 2) ? -r : r;
}

double cos(double x) {
    int ex = EXPONENT(x);
    if (ex < 1023 - 27) return 1.0; /* |x| < 2^-27: cos(x) rounds to 1 */
    if (ex == 0x7ff) return x - x;
    double hi, lo, rh, rl;
    int n = reduce_quadrant(x, &hi, &lo);
    if (n & 1)
        ksin(hi, lo, &rh, &rl);
    else
        kcos(hi, lo, &rh, &rl);
    double r = rh + rl;
    return ((n + 1) & 2) ? -r : r;
}

double tan(double x) {
    int ex = EXPONENT(x);
    if (ex < 1023 - 27) return x; /* |x| < 2^-27: tan(x) rounds to x */
    if (ex == 0x7ff) return x - x;
    double hi, lo, sh, sl, ch, cl;
    int n = reduce_quadrant(x, &hi, &lo);
    ksin(hi, lo, &sh, &sl);
    kcos(hi, lo, &ch, &cl);
    if (n & 1) return -dd_div(ch, cl, sh, sl); /* tan(r + pi/2) = -cos(r)/sin(r) */
    return dd_div(sh, sl, ch, cl);
}

/* atan(A / B) as a double-double *rh + *rl, for A = ah + al, B = bh + bl with
 * 0 <= A <= B (up to rounding), B > 0, both within [2^-200, 2^200] or A == 0 */
static void atan_core(double ah, double al, double bh, double bl, double *rh, double *rl) {
    double q = ah / bh;
    int i = (int)(q * 16.0 + 0.5);
    if (i > 16) i = 16;
    double nh, nl, dh, dl;
    if (i == 0) {
        nh = ah;
        nl = al;
        dh = bh;
        dl = bl;
    } else {
        /* t = (A - c B) / (B + c A), c = i/16: atan(A/B) = atan(c) + atan(t) */
        double c = (double)i * 0.0625;
        double e1, p1 = prod_short(c, bh, &e1);
        double e2, p2 = prod_short(c, ah, &e2);
        double e3, e4;
        nh = two_sum(ah, -p1, &e3);
        nl = ((e3 - e1) + al) - c * bl;
        dh = two_sum(bh, p2, &e4);
        dl = ((e4 + e2) + bl) + c * al;
    }
    /* t = th + tl, double-double quotient */
    double th = nh / dh;
    double pe, p = two_prod(th, dh, &pe);
    double tl = ((((nh - p) - pe) + nl) - th * dl) / dh;
    double z = th * th;
    double poly = A4 + z * A5;
    poly = A3 + z * poly;
    poly = A2 + z * poly;
    poly = A1 + z * poly;
    double e, s = two_sum(ATAN_TAB[i][0], th, &e);
    double l = ((e + ATAN_TAB[i][1]) + tl) + (th * z) * poly;
    *rh = fast_two_sum(s, l, rl);
}

/* (ch + cl) - (h + l) as a double-double, for |h| < ch */
static void dd_sub_from(double ch, double cl, double h, double l, double *rh, double *rl) {
    double e, s = two_sum(ch, -h, &e);
    *rh = fast_two_sum(s, (e + cl) - l, rl);
}

double atan(double x) {
    int ex = EXPONENT(x);
    if (ex < 1023 - 27) return x; /* |x| < 2^-27 (and +-0): atan(x) rounds to x */
    if (ex >= 1023 + 60) { /* |x| >= 2^60, inf, nan */
        if (ex == 0x7ff && (asuint64(x) << 12)) return x + x;
        return SIGN(x) ? -PIO2_H : PIO2_H;
    }
    double a = absd(x), h, l;
    if (a <= 1.0) {
        atan_core(a, 0.0, 1.0, 0.0, &h, &l);
    } else {
        atan_core(1.0, 0.0, a, 0.0, &h, &l);
        dd_sub_from(PIO2_H, PIO2_L, h, l, &h, &l);
    }
    double r = h + l;
    return SIGN(x) ? -r : r;
}

double atan2(double y, double x) {
    if (isnan(x) || isnan(y)) return x + y;
    int sy = SIGN(y), sx = SIGN(x);
    double r;
    if (y == 0.0) {
        r = sx ? PI_H : 0.0; /* atan2(+-0, x>=+0) = +-0, atan2(+-0, x<=-0) = +-pi */
    } else if (isinf(y)) {
        if (isinf(x))
            r = sx ? PI3O4_H : PIO4_H;
        else
            r = PIO2_H;
    } else if (x == 0.0) {
        r = PIO2_H;
    } else if (isinf(x)) {
        r = sx ? PI_H : 0.0;
    } else {
        double ax = absd(x), ay = absd(y), a, b, h, l;
        int swap = ay > ax;
        if (swap) {
            a = ax;
            b = ay;
        } else {
            a = ay;
            b = ax;
        }
        int eb = EXPONENT(b), ea = EXPONENT(a);
        if (eb - ea > 62) {
            /* a/b < 2^-61: atan(a/b) rounds like a/b (which may be subnormal) */
            if (!swap && !sx) {
                r = a / b;
                return sy ? -r : r;
            }
            h = a / b;
            l = 0.0;
        } else {
            if (eb == 0) { /* b subnormal: so is a; exact scaling */
                a *= 0x1p600;
                b *= 0x1p600;
                eb = EXPONENT(b);
            }
            /* scale so that b is in [1, 2) (exact: a stays normal since a/b >= 2^-63) */
            int k = 1023 - eb;
            if (k < -1000) {
                a *= 0x1p-1000;
                b *= 0x1p-1000;
                k += 1000;
            }
            double s = pow2(k);
            a *= s;
            b *= s;
            atan_core(a, 0.0, b, 0.0, &h, &l);
        }
        if (swap) dd_sub_from(PIO2_H, PIO2_L, h, l, &h, &l);
        if (sx) dd_sub_from(PI_H, PI_L, h, l, &h, &l);
        r = h + l;
    }
    return sy ? -r : r;
}

/* sqrt(1 - a^2) = *sh + *sl (double-double) for 2^-27 <= a < 1 */
static void sqrt_one_minus_sq(double a, double *sh, double *sl) {
    double pe, p = sqr_exact(a, &pe);
    double we, w = two_sum(1.0, -p, &we);
    double wl, wh = fast_two_sum(w, we - pe, &wl);
    double s = sqrt(wh);
    double qe, q = sqr_exact(s, &qe);
    *sh = s;
    *sl = (((wh - q) - qe) + wl) / (2.0 * s);
}

double asin(double x) {
    int ex = EXPONENT(x);
    if (ex < 1023 - 26) return x; /* |x| < 2^-26 (and +-0): asin(x) rounds to x */
    double a = absd(x), h, l;
    if (!(a < 1.0)) {
        if (a == 1.0) return SIGN(x) ? -PIO2_H : PIO2_H;
        if (isnan(x)) return x + x;
        return NAN;
    }
    double sh, sl;
    sqrt_one_minus_sq(a, &sh, &sl);
    /* asin(a) = atan2(a, s) */
    if (a <= sh) {
        atan_core(a, 0.0, sh, sl, &h, &l);
    } else {
        atan_core(sh, sl, a, 0.0, &h, &l);
        dd_sub_from(PIO2_H, PIO2_L, h, l, &h, &l);
    }
    double r = h + l;
    return SIGN(x) ? -r : r;
}

double acos(double x) {
    int ex = EXPONENT(x);
    if (ex < 1023 - 57) return PIO2_H; /* |x| < 2^-57: acos(x) rounds to pi/2 */
    double a = absd(x), h, l;
    if (!(a < 1.0)) {
        if (x == 1.0) return 0.0;
        if (x == -1.0) return PI_H;
        if (isnan(x)) return x + x;
        return NAN;
    }
    if (ex < 1023 - 27) { /* |x| < 2^-27: acos(x) = pi/2 - x (+ O(x^3)) */
        h = x;
        l = 0.0;
        dd_sub_from(PIO2_H, PIO2_L, h, l, &h, &l);
        return h + l;
    }
    double sh, sl;
    sqrt_one_minus_sq(a, &sh, &sl);
    /* acos(a) = atan2(s, a) */
    if (sh <= a) {
        atan_core(sh, sl, a, 0.0, &h, &l);
    } else {
        atan_core(a, 0.0, sh, sl, &h, &l);
        dd_sub_from(PIO2_H, PIO2_L, h, l, &h, &l);
    }
    if (SIGN(x)) dd_sub_from(PI_H, PI_L, h, l, &h, &l);
    return h + l;
}
