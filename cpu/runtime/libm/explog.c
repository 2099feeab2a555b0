/* Exponentials, logarithms, powers and hyperbolic functions in IEEE binary64, round to nearest
 * (declared in <math.h>): exp exp2 expm1 log log2 log10 log1p pow sinh cosh tanh asinh acosh atanh.
 *
 * The core has no floating-point unit: every + - * / here is a soft-float call, so the algorithms
 * favour few operations over tiny tables. Two cores do the work, both in double-double arithmetic
 * (a value is hi + lo, |lo| <= ulp(hi)/2) so that the final rounding is the only sizeable error:
 *
 * exp: x = k*ln2/32 + r (Cody-Waite, ln2/32 split in a 37-bit head and a tail), |r| <= ln2/64;
 *   exp(x) = 2^(k>>5) * 2^((k&31)/32) * exp(r), the 32 values 2^(j/32) tabulated as a 26-bit head
 *   plus a tail (so head*r is exact in two doubles), exp(r) - 1 - r ~ r^2/2 + r^3 Q(r), Q of
 *   degree 4. The result is scaled by 2^e with a single rounding, also when it is subnormal.
 *   exp and exp2 themselves use a cheaper plain-double evaluation of the same formula; pow,
 *   expm1 and the hyperbolic functions the double-double one.
 * log: x = 2^k * z, z in [0.75, 1.5); z is reduced by a tabulated c ~ z (64 intervals,
 *   1/c a 26-bit number, log(c) as a double-double; c = 1 around 1), r = z/c - 1 is computed
 *   exactly, log1p(r) = r - r^2/2 + r^3 Q(r), Q of degree 8, |r| < 2^-6.
 *   log(x) = k*ln2 + log(c) + log1p(r) as a double-double (relative error about 2^-68).
 * pow(x, y) = exp(y * log(x)) with log(x) and the product as double-doubles.
 * The hyperbolic functions are built on these (and on sqrt for asinh/acosh).
 *
 * Polynomial coefficients are Chebyshev fits computed with mpmath (256-bit) for this file; the
 * tables are 2^(j/32) and -log(1/c) rounded from mpmath values. */
#include <stdint.h>
#include <math.h>
#include "internal.h"

#define SIGN_MASK 0x8000000000000000ULL
#define INF_BITS 0x7ff0000000000000ULL

/* 2^n for -1022 <= n <= 1023, by building the bits */
static inline double pow2i(int n) { return asdouble((uint64_t)(n + 1023) << 52); }

/* ---------------------------------------------------------------------------------------- */
/* exp core */

/* 0x1.8p52: adding it to |v| < 2^51 rounds v to an integer held in the low mantissa bits */
static const double SHIFT = 0x1.8p52;
/* 32/ln2 */
static const double INV_LN2_32 = 0x1.71547652b82fep+5;
/* ln2/32 = LN2_32_HI + LN2_32_LO, the head with 37 significant bits (k*head exact for |k| < 2^16) */
static const double LN2_32_HI = 0x1.62e42fefa0000p-6;
static const double LN2_32_LO = 0x1.cf79abc9e3b3ap-45;
/* ln2/32 rounded to a double, for exp2 */
static const double LN2_32_H = 0x1.62e42fefa39efp-6;

/* 2^(j/32), j = 0..31: head rounded to 26 significant bits, then the rest rounded to a double */
static const double exp_tab[64] = {
    0x1.0000000000000p+0, 0x0.0p+0,
    0x1.059b0d0000000p+0, 0x1.8ac2ba1d73e2ap-27,
    0x1.0b55870000000p+0, -0x1.833b784eb3a37p-27,
    0x1.11301d0000000p+0, 0x1.25b50a4ebbf1bp-32,
    0x1.172b840000000p+0, -0x1.c15742919041cp-27,
    0x1.1d48730000000p+0, 0x1.68b9aa7805b80p-28,
    0x1.2387a70000000p+0, -0x1.8a9dc7993e052p-28,
    0x1.29e9df8000000p+0, -0x1.70108f69ed175p-27,
    0x1.306fe08000000p+0, 0x1.18db8a96f46adp-27,
    0x1.371a738000000p+0, -0x1.8aac6ab1d7560p-29,
    0x1.3dea650000000p+0, -0x1.f6e5eee525f6fp-27,
    0x1.44e0860000000p+0, 0x1.8624b40c4dbd0p-30,
    0x1.4bfdad8000000p+0, -0x1.64eaec715e343p-27,
    0x1.5342b58000000p+0, -0x1.62b07e20f57c4p-28,
    0x1.5ab07e0000000p+0, -0x1.5bd5eb539b67fp-27,
    0x1.6247eb0000000p+0, 0x1.d2ac258f87d03p-31,
    0x1.6a09e68000000p+0, -0x1.80c4336f74d05p-28,
    0x1.71f75e8000000p+0, 0x1.d8bee7ba46e1ep-29,
    0x1.7a11470000000p+0, 0x1.f580c36bea881p-27,
    0x1.8258998000000p+0, 0x1.4cce128acf88bp-28,
    0x1.8ace540000000p+0, 0x1.15506dadd3e2bp-27,
    0x1.93737b0000000p+0, 0x1.9b8bc9e8a0388p-29,
    0x1.9c49180000000p+0, 0x1.51f8480e3e236p-27,
    0x1.a5503b0000000p+0, 0x1.1f12ae45a1225p-27,
    0x1.ae89f98000000p+0, 0x1.5ad3ad5e8734dp-28,
    0x1.b7f76f0000000p+0, 0x1.7daf237553d84p-27,
    0x1.c199be0000000p+0, -0x1.3d56b1eeef9a7p-27,
    0x1.cb720e0000000p+0, -0x1.8837cb757e1a1p-27,
    0x1.d5818e0000000p+0, -0x1.822dbc6d12fd3p-27,
    0x1.dfc9730000000p+0, 0x1.bdcdaf5cb4656p-27,
    0x1.ea4afa0000000p+0, 0x1.52486cc2c7b9dp-27,
    0x1.f507658000000p+0, 0x1.b722a033a7c26p-27,
};

/* Q(r) ~ (exp(r) - 1 - r - r^2/2) / r^3 on |r| <= 0.011 (Chebyshev fit, max error 2.6e-16) */
static const double EQ0 = 0x1.5555555555555p-3;  /* ~ 1/6 */
static const double EQ1 = 0x1.5555555551574p-5;  /* ~ 1/24 */
static const double EQ2 = 0x1.111111110f4adp-7;  /* ~ 1/120 */
static const double EQ3 = 0x1.6c1701de3d4a3p-10; /* ~ 1/720 */
static const double EQ4 = 0x1.a01a3ae91ee59p-13; /* ~ 1/5040 */

/* r^2/2 + r^3 Q(r) ~ exp(r) - 1 - r */
static inline double exp_poly(double r)
{
    double r2 = r * r;
    return r2 * (0.5 + r * (EQ0 + r * (EQ1 + r * (EQ2 + r * (EQ3 + r * EQ4)))));
}

/* xh + xl = k*ln2/32 + rh + rl with |rh| <= ~0.0109, |rl| <= ulp(rh)/2; returns k.
 * Needs |xh| <= 750 and |xl| <= 2^-40. */
static int exp_reduce(double xh, double xl, double *rh, double *rl)
{
    double t = xh * INV_LN2_32 + SHIFT;
    double kd = t - SHIFT;
    int k = (int)(int32_t)(uint32_t)asuint64(t);
    double a = xh - kd * LN2_32_HI; /* exact (Sterbenz; kd*LN2_32_HI exact) */
    double b = xl - kd * LN2_32_LO;
    *rh = two_sum(a, b, rl);
    return k;
}

/* exp(k*ln2/32 + rh + rl) = (*hi + *lo) * 2^e; returns e. *hi is in [0.98, 2.03] */
static int exp_eval(int k, double rh, double rl, double *hi, double *lo)
{
    int j = k & 31;
    int e = (k - j) / 32;
    double th = exp_tab[2 * j], tl = exp_tab[2 * j + 1];
    double q = exp_poly(rh);
    double r1, r2, err;
    split(rh, &r1, &r2);
    /* th has 26 bits, r1 26 and r2 27: both products are exact */
    double u1 = th * r1, u2 = th * r2;
    double s = fast_two_sum(th, u1, &err);
    /* T*(1 + p) with T = th + tl, p = rh + rl + q: th + th*rh + (th*(rl + q) + tl + tl*(rh + q)) */
    *lo = err + (u2 + (tl + (tl * (rh + q) + th * (rl + q))));
    *hi = s;
    return e;
}

/* (hi + lo) * 2^e rounded once to a double (normal, subnormal, zero or infinity); hi in [0.5, 4] */
static double exp_scale(double hi, double lo, int e)
{
    if (e > -1021) {
        if (e > 1000)
            return (hi + lo) * 0x1p1000 * pow2i(e - 1000);
        return (hi + lo) * pow2i(e);
    }
    if (e < -1022 - 60)
        return 0.0;
    double sc = pow2i(e + 1022);
    double hs = hi * sc, ls = lo * sc; /* exact */
    if (hs >= 1.0)
        return (hs + ls) * 0x1p-1022; /* a normal result */
    /* subnormal: round hs + ls to a multiple of 2^-52, the spacing of doubles in [1, 2) */
    double l, h = fast_two_sum(1.0, hs, &l);
    l += ls;
    return ((h + l) - 1.0) * 0x1p-1022; /* both exact */
}

/* exp(xh + xl) rounded, for xh in [-746, 710] */
static double exp_dd_rounded(double xh, double xl)
{
    double rh, rl, hi, lo;
    int k = exp_reduce(xh, xl, &rh, &rl);
    int e = exp_eval(k, rh, rl, &hi, &lo);
    return exp_scale(hi, lo, e);
}

/* 2^(k/32) * exp(r) rounded, |r| <= ~0.0109 given as a plain double: the cheaper evaluation
 * for exp and exp2 (errors of about 2^-59 relative besides the final rounding) */
static double exp_fast(int k, double r)
{
    int j = k & 31;
    double th = exp_tab[2 * j], tl = exp_tab[2 * j + 1];
    double p = r + exp_poly(r); /* exp(r) - 1 */
    return exp_scale(th, tl + (th + tl) * p, (k - j) / 32);
}

double exp(double x)
{
    if (isnan(x))
        return x + x;
    if (x > 710.0)
        return HUGE_VAL;
    if (x < -746.0)
        return 0.0;
    double t = x * INV_LN2_32 + SHIFT;
    double kd = t - SHIFT;
    int k = (int)(int32_t)(uint32_t)asuint64(t);
    return exp_fast(k, (x - kd * LN2_32_HI) - kd * LN2_32_LO);
}

double exp2(double x)
{
    if (isnan(x))
        return x + x;
    if (x > 1025.0)
        return HUGE_VAL;
    if (x < -1080.0)
        return 0.0;
    double x32 = x * 32.0;
    double t = x32 + SHIFT;
    double kd = t - SHIFT;
    int k = (int)(int32_t)(uint32_t)asuint64(t);
    double f = x32 - kd; /* exact, |f| <= 1/2 */
    return exp_fast(k, f * LN2_32_H);
}

/* expm1(x) as *lo + return value (double-double), for 2^-54 <= |x| and -38 <= x <= 709 */
static double expm1_dd(double x, double *lo)
{
    double rh, rl, hi, l, err;
    int k = exp_reduce(x, 0.0, &rh, &rl);
    if (k == 0) /* |x| <= ln2/64: rh == x, rl == 0 */
        return fast_two_sum(x, exp_poly(x), lo);
    int e = exp_eval(k, rh, rl, &hi, &l);
    double sc = pow2i(e); /* -55 <= e <= 1023 */
    hi *= sc;
    l *= sc;
    double a = two_sum(hi, -1.0, &err);
    return fast_two_sum(a, err + l, lo);
}

double expm1(double x)
{
    uint64_t ia = asuint64(x) & ~SIGN_MASK;
    if (ia > INF_BITS)
        return x + x;
    if (x > 709.0) {
        if (x > 710.0)
            return HUGE_VAL;
        return exp_dd_rounded(x, 0.0); /* the -1 is far below half an ulp */
    }
    if (x < -38.0)
        return -1.0; /* exp(x) < 2^-54 */
    if (ia < 0x3c90000000000000ULL) /* |x| < 2^-54 (also +-0, subnormals) */
        return x;
    double lo, hi = expm1_dd(x, &lo);
    return hi + lo;
}

/* ---------------------------------------------------------------------------------------- */
/* log core */

/* ln2 = LN2_HI + LN2_LO, the head with 42 significant bits (k*LN2_HI exact for |k| < 2^11) */
static const double LN2_HI = 0x1.62e42fefa3800p-1;
static const double LN2_LO = 0x1.ef35793c76730p-45;
/* ln2, log2(e), log10(e) as double-doubles */
static const double LN2_H = 0x1.62e42fefa39efp-1, LN2_L = 0x1.abc9e3b39803fp-56;
static const double LOG2E_H = 0x1.71547652b82fep+0, LOG2E_L = 0x1.777d0ffda0d24p-56;
static const double LOG10E_H = 0x1.bcb7b1526e50ep-2, LOG10E_L = 0x1.95355baaafad3p-57;

/* z in [0.75, 1.5) in 64 intervals: [0.75 + i/128, +1/128) for i < 32, [1 + (i-32)/64, +1/64)
 * for i >= 32. Per interval: 1/c (c its midpoint; 1/c rounded to 26 significant bits; c = 1 for
 * the two intervals next to 1), and -log(1/c) as head + tail. */
static const double log_tab[64][3] = {
    {0x1.5390948000000p+0, -0x1.214456a2eb8d4p-2, -0x1.736e91aac475fp-57},
    {0x1.5015018000000p+0, -0x1.16b5cd4ccfb73p-2, 0x1.33242d356e621p-56},
    {0x1.4cab888000000p+0, -0x1.0c42d6a0162e3p-2, -0x1.cd63cedec4f72p-61},
    {0x1.49539e0000000p+0, -0x1.01eae4aa6c690p-2, 0x1.141487e43eecap-58},
    {0x1.460cbc8000000p+0, -0x1.ef5ade51cffe6p-3, 0x1.092b2ddc705f6p-58},
    {0x1.42d6628000000p+0, -0x1.db13dbe94893fp-3, -0x1.e0c8ea85f3fb1p-57},
    {0x1.3fb0140000000p+0, -0x1.c6ffbc8f00f71p-3, 0x1.9e58b2c54f9fap-57},
    {0x1.3c995a8000000p+0, -0x1.b31d86e1bce3bp-3, 0x1.7993aa431cffap-57},
    {0x1.3991c30000000p+0, -0x1.9f6c420889662p-3, 0x1.db97992514607p-57},
    {0x1.3698df0000000p+0, -0x1.8beafd1b8fe8ap-3, 0x1.7e2abba4a62e3p-57},
    {0x1.33ae458000000p+0, -0x1.7898d6f044c71p-3, -0x1.3b87b67902254p-57},
    {0x1.30d1900000000p+0, -0x1.6574eb68c133ap-3, 0x1.3a69e1f36ee28p-57},
    {0x1.2e025c0000000p+0, -0x1.527e5e2a1b58dp-3, 0x1.38d4b41320354p-60},
    {0x1.2b404b0000000p+0, -0x1.3fb45ba1928cap-3, 0x1.a5f9a60746c09p-59},
    {0x1.288b010000000p+0, -0x1.2d160fb068139p-3, 0x1.6dcd20027f206p-57},
    {0x1.25e2270000000p+0, -0x1.1aa2b7aa3f72ap-3, 0x1.45778ecf60d15p-58},
    {0x1.2345678000000p+0, -0x1.08598b15e3a06p-3, -0x1.da4ff66e3aa23p-57},
    {0x1.20b4710000000p+0, -0x1.ec739b60a111bp-4, 0x1.235fc9d8dc6a6p-58},
    {0x1.1e2ef38000000p+0, -0x1.c8857d33c4b1fp-4, -0x1.7e19669bf5e03p-59},
    {0x1.1bb4a40000000p+0, -0x1.a4e763cb1bc38p-4, 0x1.7b5ca204397afp-58},
    {0x1.1945380000000p+0, -0x1.8197e2740e3f0p-4, 0x1.1834803aef5a0p-62},
    {0x1.16e0688000000p+0, -0x1.5e95a3b1791cbp-4, 0x1.71f174b66bb41p-59},
    {0x1.1485f10000000p+0, -0x1.3bdf5c4d1ee63p-4, 0x1.d4b448e34bb26p-58},
    {0x1.12358e8000000p+0, -0x1.1973bdac65567p-4, 0x1.6f2c1b38be3d0p-58},
    {0x1.0fef010000000p+0, -0x1.eea31a206b87bp-5, 0x1.849f92bd46cd9p-60},
    {0x1.0db20a8000000p+0, -0x1.aaef2bffb10fcp-5, 0x1.7056226b5afe7p-60},
    {0x1.0b7e6f0000000p+0, -0x1.67c9568d4bb4bp-5, 0x1.5fec1154444bep-59},
    {0x1.0953f38000000p+0, -0x1.252f3108d183ep-5, 0x1.557f794cdfe6bp-59},
    {0x1.0732608000000p+0, -0x1.c63d25e14aae8p-6, 0x1.30030e0c7b2e2p-60},
    {0x1.05197f8000000p+0, -0x1.432a92f980cc1p-6, 0x1.bedaf38fb0c3dp-60},
    {0x1.03091b8000000p+0, -0x1.8244a0f88a28ap-7, 0x1.c34e801e5cbf7p-62},
    {0x1.0000000000000p+0, 0x0.0p+0, 0x0.0p+0},
    {0x1.0000000000000p+0, 0x0.0p+0, 0x0.0p+0},
    {0x1.f4465a0000000p-1, 0x1.7b91acfd5b11cp-6, 0x1.893fa9f13608bp-61},
    {0x1.ecc07b0000000p-1, 0x1.39e87ebfebd62p-5, 0x1.a015b48db63c3p-61},
    {0x1.e573ac8000000p-1, 0x1.b42dd821971bfp-5, 0x1.59a2992e6c2f1p-62},
    {0x1.de5d6e0000000p-1, 0x1.1653710a37ae3p-4, 0x1.5312e25359440p-59},
    {0x1.d77b658000000p-1, 0x1.51b0722861841p-4, -0x1.70e36b7460d84p-65},
    {0x1.d0cb590000000p-1, 0x1.8c345d1319b21p-4, 0x1.165a151e21805p-63},
    {0x1.ca4b308000000p-1, 0x1.c5e5477dbc744p-4, 0x1.4fb0bef4db62fp-59},
    {0x1.c3f8f00000000p-1, 0x1.fec9141dbeabbp-4, 0x1.51728cfa743d2p-59},
    {0x1.bdd2b88000000p-1, 0x1.1b72adc6f67a0p-3, 0x1.765811ab86d64p-57},
    {0x1.b7d6c40000000p-1, 0x1.371fc161e8f75p-3, -0x1.80c9a4ff5c905p-57},
    {0x1.b203640000000p-1, 0x1.526e5e5a1b438p-3, -0x1.646ff8a44628fp-57},
    {0x1.ac57018000000p-1, 0x1.6d60ff459d21dp-3, 0x1.e723b34352a64p-58},
    {0x1.a6d01a8000000p-1, 0x1.87fa05f60c911p-3, -0x1.3b3fdbfdfec45p-57},
    {0x1.a16d3f8000000p-1, 0x1.a23bc2722b563p-3, 0x1.371c46c9dad0ep-57},
    {0x1.9c2d150000000p-1, 0x1.bc2866ead8cd6p-3, 0x1.20e73a20c1255p-57},
    {0x1.970e4f8000000p-1, 0x1.d5c216b8fbb91p-3, 0x1.6e843597e4e95p-57},
    {0x1.920fb48000000p-1, 0x1.ef0add51c5937p-3, -0x1.615c869ea6c9ep-57},
    {0x1.8d30190000000p-1, 0x1.040258d74d041p-2, 0x1.1009ef231643fp-56},
    {0x1.886e5f0000000p-1, 0x1.1058bfb6e4ad5p-2, 0x1.ebfa0ab694872p-58},
    {0x1.83c9778000000p-1, 0x1.1c898c88999fbp-2, 0x1.853a39f32543cp-56},
    {0x1.7f40600000000p-1, 0x1.2895a0bde86a4p-2, -0x1.0a5b682d74d38p-57},
    {0x1.7ad2208000000p-1, 0x1.347dd9cf87d55p-2, -0x1.e7298afcac144p-58},
    {0x1.767dce8000000p-1, 0x1.404307c26a7e5p-2, -0x1.aeafb6653d5c2p-56},
    {0x1.7242880000000p-1, 0x1.4be5f937778a1p-2, -0x1.cb366b633ad24p-58},
    {0x1.6e1f768000000p-1, 0x1.5767720655a6dp-2, -0x1.3752498789492p-60},
    {0x1.6a13cd0000000p-1, 0x1.62c82f679c795p-2, 0x1.2e3d7c8efd073p-56},
    {0x1.661ec68000000p-1, 0x1.6e08eb0cba1e4p-2, -0x1.c246ce11a1ae7p-58},
    {0x1.623fa78000000p-1, 0x1.792a55cfd47a3p-2, -0x1.cd8896e21107fp-56},
    {0x1.5e75bb8000000p-1, 0x1.842d1dc7e8b17p-2, 0x1.520c5198a2321p-56},
    {0x1.5ac0568000000p-1, 0x1.8f11e901662c8p-2, 0x1.b9f69e3f9c3e1p-58},
    {0x1.571ed40000000p-1, 0x1.99d957617e08cp-2, -0x1.095b44bdcc9e3p-56},
};

/* Q(r) ~ (log1p(r) - r + r^2/2) / r^3 on |r| <= 0.0157 (Chebyshev fit, max error 1.9e-17) */
static const double LQ0 = 0x1.5555555555555p-2;  /* ~ 1/3 */
static const double LQ1 = -0x1.0000000000000p-2; /* ~ -1/4 */
static const double LQ2 = 0x1.9999999999999p-3;  /* ~ 1/5 */
static const double LQ3 = -0x1.555555555a7b4p-3; /* ~ -1/6 */
static const double LQ4 = 0x1.249249249709bp-3;  /* ~ 1/7 */
static const double LQ5 = -0x1.fffffdb49dbecp-4; /* ~ -1/8 */
static const double LQ6 = 0x1.c71c6fa8e87d5p-4;  /* ~ 1/9 */
static const double LQ7 = -0x1.99ca13c7dd6dap-4; /* ~ -1/10 */
static const double LQ8 = 0x1.7489d6dd506a7p-4;  /* ~ 1/11 */

/* log1p(rh + rl) as *lo + return value, |rh| <= 0.0157, |rl| <= 2^-50 |rh| (or rh == 0) */
static double log1p_poly(double rh, double rl, double *lo)
{
    double r1, r2, te;
    split(rh, &r1, &r2);
    double s = -0.5 * (r1 * r1);           /* exact: r1 has 26 bits */
    double s2 = -(r1 * r2 + 0.5 * (r2 * r2)); /* the rest of -rh^2/2 */
    double q = LQ0 + rh * (LQ1 + rh * (LQ2 + rh * (LQ3 + rh * (LQ4 + rh * (LQ5 + rh * (LQ6 + rh * (LQ7 + rh * LQ8)))))));
    double p = (rh * rh) * rh * q;
    double t = fast_two_sum(rh, s, &te);
    *lo = te + (s2 + (p + (rl - rh * rl)));
    return t;
}

/* log(xh + xl) as *lo + return value, for a finite xh > 0 and |xl| <= ulp(xh)/2 (xl = 0 when xh
 * is subnormal, or xh >= 2^1000). Relative error about 2^-68. */
static double log_dd(double xh, double xl, double *lo)
{
    uint64_t ix = asuint64(xh);
    int k0 = 0;
    if (ix < 0x0010000000000000ULL) { /* subnormal */
        ix = asuint64(xh * 0x1p52);
        k0 = -52;
    }
    uint64_t tmp = ix - 0x3fe8000000000000ULL; /* 0.75 */
    int i = (int)((tmp >> 46) & 63);
    int k = (int)((int64_t)tmp >> 52);
    double z = asdouble(ix - (tmp & 0xfff0000000000000ULL)); /* in [0.75, 1.5), xh = z * 2^k */
    double invc = log_tab[i][0];
    double rh, rl;
    if (i == 31 || i == 32) {
        rh = z - 1.0; /* exact */
        rl = 0.0;
    } else {
        /* z * invc - 1 exactly (Dekker's product, invc has 26 bits so it needs no split) */
        double z1, z2;
        split(z, &z1, &z2);
        double p = z * invc;
        double e = (z1 * invc - p) + z2 * invc;
        rh = fast_two_sum(p - 1.0, e, &rl); /* p - 1 exact (Sterbenz) */
    }
    if (xl != 0.0)
        rl += xl * invc * pow2i(-k);
    k += k0;
    double tl, t = log1p_poly(rh, rl, &tl);
    double kd = (double)k;
    double e1, e2;
    double s1 = fast_two_sum(kd * LN2_HI, log_tab[i][1], &e1);
    double s2 = fast_two_sum(s1, t, &e2);
    double l = kd * LN2_LO + log_tab[i][2] + e1 + e2 + tl;
    return fast_two_sum(s2, l, lo);
}

/* log1p(xh + xl) as *lo + return value, for xh > -1, |xl| <= ulp(xh) */
static double log1p_dd(double xh, double xl, double *lo)
{
    uint64_t ia = asuint64(xh) & ~SIGN_MASK;
    if (ia < 0x3f90000000000000ULL) /* |xh| < 2^-6 */
        return log1p_poly(xh, xl, lo);
    double ul, uh = two_sum(1.0, xh, &ul);
    ul += xl;
    if (uh > 0x1p900)
        ul = 0.0;
    return log_dd(uh, ul, lo);
}

/* the result for x < 0 (NaN), +-0 (-inf), +inf, NaN; 0 when x is positive and finite */
static int log_special(double x, double *r)
{
    uint64_t ix = asuint64(x);
    if (ix - 0x0000000000000001ULL < INF_BITS - 1) /* 0 < x < inf */
        return 0;
    if ((ix << 1) == 0)
        *r = -HUGE_VAL;
    else if (ix == INF_BITS)
        *r = x;
    else if (ix > INF_BITS && (ix & ~SIGN_MASK) <= INF_BITS) /* negative */
        *r = __builtin_nan("");
    else /* NaN */
        *r = x + x;
    return 1;
}

double log(double x)
{
    double r, lo;
    if (log_special(x, &r))
        return r;
    return log_dd(x, 0.0, &lo);
}

/* (hi + lo) * (ch + cl) rounded */
static double mul_dd(double hi, double lo, double ch, double cl)
{
    double pe, p = two_prod(hi, ch, &pe);
    return p + (pe + (hi * cl + lo * ch));
}

double log2(double x)
{
    double r, lo;
    if (log_special(x, &r))
        return r;
    double hi = log_dd(x, 0.0, &lo);
    return mul_dd(hi, lo, LOG2E_H, LOG2E_L);
}

double log10(double x)
{
    double r, lo;
    if (log_special(x, &r))
        return r;
    double hi = log_dd(x, 0.0, &lo);
    return mul_dd(hi, lo, LOG10E_H, LOG10E_L);
}

double log1p(double x)
{
    uint64_t ix = asuint64(x), ia = ix & ~SIGN_MASK;
    if (ia >= INF_BITS || x <= -1.0) {
        if (ia > INF_BITS)
            return x + x;
        if (x == -1.0)
            return -HUGE_VAL;
        if (x < -1.0)
            return __builtin_nan("");
        return x; /* +inf */
    }
    if (ia < 0x3c90000000000000ULL) /* |x| < 2^-54: x (also +-0, subnormals) */
        return x;
    double lo, hi = log1p_dd(x, 0.0, &lo);
    return hi + lo;
}

/* ---------------------------------------------------------------------------------------- */
/* pow */

/* 0: y is not an integer, 1: odd integer, 2: even integer (y finite, nonzero) */
static int int_class(uint64_t iy)
{
    int ey = (int)((iy >> 52) & 0x7ff) - 1023;
    if (ey >= 53)
        return 2;
    if (ey < 0)
        return 0;
    uint64_t m = (iy & 0x000fffffffffffffULL) | 0x0010000000000000ULL;
    int sh = 52 - ey;
    if (m & ((1ULL << sh) - 1))
        return 0;
    return ((m >> sh) & 1) ? 1 : 2;
}

double pow(double x, double y)
{
    uint64_t ix = asuint64(x), iy = asuint64(y);
    uint64_t ax = ix & ~SIGN_MASK, ay = iy & ~SIGN_MASK;
    if (ay == 0 || ix == 0x3ff0000000000000ULL) /* pow(x, +-0) = pow(1, y) = 1, even for NaN */
        return 1.0;
    if (ax > INF_BITS || ay > INF_BITS)
        return x + y;
    int ysign = (int)(iy >> 63), xsign = (int)(ix >> 63);
    if (ay == INF_BITS) {
        if (ax == 0x3ff0000000000000ULL) /* x == -1 */
            return 1.0;
        /* |x| < 1 with y = +inf, or |x| > 1 with y = -inf: +0; else +inf */
        return ((ax < 0x3ff0000000000000ULL) != ysign) ? 0.0 : HUGE_VAL;
    }
    int yc = int_class(iy);
    int neg = xsign && yc == 1; /* the result's sign */
    if (ax == 0 || ax == INF_BITS) {
        /* |x|^y is 0 or inf: +-0 with y > 0 or +-inf with y < 0 give 0 */
        double r = ((ax == 0) != ysign) ? 0.0 : HUGE_VAL;
        return neg ? -r : r;
    }
    if (xsign && yc == 0)
        return __builtin_nan(""); /* negative base, non-integer exponent */
    if (ax == 0x3ff0000000000000ULL) /* x == -1, y integer */
        return neg ? -1.0 : 1.0;
    x = asdouble(ax);
    double r;
    if (ay >= 0x43f0000000000000ULL) { /* |y| >= 2^64: |y*log(x)| >= 2^11 */
        r = ((ax < 0x3ff0000000000000ULL) != ysign) ? 0.0 : HUGE_VAL;
    } else {
        double ll, lh = log_dd(x, 0.0, &ll);
        double ze, zh = two_prod(y, lh, &ze);
        double zl = ze + y * ll;
        zh = fast_two_sum(zh, zl, &zl);
        if (zh > 710.0)
            r = HUGE_VAL;
        else if (zh < -746.0)
            r = 0.0;
        else
            r = exp_dd_rounded(zh, zl);
    }
    return neg ? -r : r;
}

/* ---------------------------------------------------------------------------------------- */
/* hyperbolic functions */

/* P(t) ~ (sinh(x) - x) / x^3 with t = x^2 in [0, 1] (Chebyshev fit, max error 1.1e-17) */
static const double SP0 = 0x1.5555555555555p-3;  /* ~ 1/3! */
static const double SP1 = 0x1.11111111110fdp-7;  /* ~ 1/5! */
static const double SP2 = 0x1.a01a01a01ee70p-13; /* ~ 1/7! */
static const double SP3 = 0x1.71de3a4e14f40p-19; /* ~ 1/9! */
static const double SP4 = 0x1.ae6460fae3728p-26; /* ~ 1/11! */
static const double SP5 = 0x1.611cb330c1fe8p-33; /* ~ 1/13! */
static const double SP6 = 0x1.b41232cf9950fp-41; /* ~ 1/15! */

/* for 2^-27 <= a <= 22: exp(a) = *eh + *el (a normalized double-double) */
static void exp_pos(double a, double *eh, double *el)
{
    double rh, rl, hi, lo;
    int k = exp_reduce(a, 0.0, &rh, &rl);
    int e = exp_eval(k, rh, rl, &hi, &lo);
    double sc = pow2i(e);
    hi = fast_two_sum(hi, lo, &lo); /* lo was not below ulp(hi) */
    *eh = hi * sc;
    *el = lo * sc;
}

/* for 22 < a: exp(a)/2 rounded (cosh and sinh there) */
static double exp_half(double a)
{
    if (a > 711.0)
        return HUGE_VAL;
    double rh, rl, hi, lo;
    int k = exp_reduce(a, 0.0, &rh, &rl);
    int e = exp_eval(k, rh, rl, &hi, &lo);
    return exp_scale(hi, lo, e - 1);
}

double sinh(double x)
{
    uint64_t ix = asuint64(x), ia = ix & ~SIGN_MASK;
    double a = asdouble(ia), r;
    if (ia >= INF_BITS) /* +-inf, NaN */
        return x + x;
    if (ia < 0x3e40000000000000ULL) /* |x| < 2^-27 (also +-0): x */
        return x;
    if (a < 1.0) {
        double t = x * x;
        return x + x * t * (SP0 + t * (SP1 + t * (SP2 + t * (SP3 + t * (SP4 + t * (SP5 + t * SP6))))));
    }
    if (a > 22.0) {
        r = exp_half(a);
    } else {
        double eh, el, err;
        exp_pos(a, &eh, &el);
        double inv = 1.0 / eh;
        double dinv = -inv * inv * el; /* 1/(eh + el) ~ inv + dinv */
        double d = two_sum(eh, -inv, &err);
        r = 0.5 * (d + (err + (el - dinv)));
    }
    return (ix >> 63) ? -r : r;
}

double cosh(double x)
{
    uint64_t ia = asuint64(x) & ~SIGN_MASK;
    double a = asdouble(ia);
    if (ia >= INF_BITS) /* +inf for +-inf, NaN */
        return x * x;
    if (ia < 0x3e40000000000000ULL) /* |x| < 2^-27: 1 */
        return 1.0;
    if (a > 22.0)
        return exp_half(a);
    double eh, el, err;
    exp_pos(a, &eh, &el);
    double inv = 1.0 / eh;
    double dinv = -inv * inv * el;
    double d = two_sum(eh, inv, &err);
    return 0.5 * (d + (err + (el + dinv)));
}

double tanh(double x)
{
    uint64_t ix = asuint64(x), ia = ix & ~SIGN_MASK;
    double a = asdouble(ia), r;
    if (ia > INF_BITS)
        return x + x;
    if (ia < 0x3e40000000000000ULL) /* |x| < 2^-27 (also +-0): x */
        return x;
    if (a > 22.0) {
        r = 1.0; /* also inf */
    } else {
        /* tanh(a) = t / (t + 2), t = expm1(2a) */
        double tl, th = expm1_dd(2.0 * a, &tl);
        double dl, dh = two_sum(th, 2.0, &dl);
        dl += tl;
        double q = th / dh;
        double pe, p = two_prod(q, dh, &pe);
        double rem = (((th - p) - pe) + tl) - q * dl;
        r = q + rem / dh;
    }
    return (ix >> 63) ? -r : r;
}

/* sqrt(sh + sl) as *ql + return value; sh > 0, |sl| <= ulp(sh)/2 */
static double sqrt_dd(double sh, double sl, double *ql)
{
    double q = sqrt(sh);
    double qe, q2 = two_prod(q, q, &qe);
    *ql = (((sh - q2) - qe) + sl) / (2.0 * q);
    return q;
}

/* log(2a) rounded, for large a */
static double log_twice(double a)
{
    double lo, hi = log_dd(a, 0.0, &lo);
    double err, s = two_sum(hi, LN2_H, &err);
    return s + (err + (lo + LN2_L));
}

double asinh(double x)
{
    uint64_t ix = asuint64(x), ia = ix & ~SIGN_MASK;
    double a = asdouble(ia), r;
    if (ia >= INF_BITS) /* +-inf, NaN */
        return x + x;
    if (ia < 0x3e50000000000000ULL) /* |x| < 2^-26 (also +-0): x */
        return x;
    if (ia > 0x41b0000000000000ULL) { /* |x| > 2^28: log(2|x|) */
        r = log_twice(a);
    } else {
        /* asinh(a) = log1p(a + (sqrt(1 + a^2) - 1)) */
        double pe, p = two_prod(a, a, &pe);
        double sl, sh = two_sum(1.0, p, &sl);
        sh = fast_two_sum(sh, sl + pe, &sl);
        double ql, q = sqrt_dd(sh, sl, &ql);
        double fl, fh = two_sum(q, -1.0, &fl);
        fl += ql;
        double wl, wh = two_sum(a, fh, &wl);
        wl += fl;
        wh = fast_two_sum(wh, wl, &wl);
        double lo, hi = log1p_dd(wh, wl, &lo);
        r = hi + lo;
    }
    return (ix >> 63) ? -r : r;
}

double acosh(double x)
{
    uint64_t ix = asuint64(x);
    if (!(x > 1.0)) {
        if (x == 1.0)
            return 0.0;
        if (x != x)
            return x + x;
        return __builtin_nan(""); /* x < 1 */
    }
    if (ix >= INF_BITS)
        return x; /* +inf */
    if (ix > 0x41b0000000000000ULL) /* x > 2^28: log(2x) */
        return log_twice(x);
    /* acosh(x) = log1p((x - 1) + sqrt(x^2 - 1)) */
    double pe, p = two_prod(x, x, &pe);
    double sl, sh = two_sum(p, -1.0, &sl);
    sh = fast_two_sum(sh, sl + pe, &sl);
    double ql, q = sqrt_dd(sh, sl, &ql);
    double tl, th = two_sum(x, -1.0, &tl);
    double wl, wh = two_sum(th, q, &wl);
    wl += tl + ql;
    wh = fast_two_sum(wh, wl, &wl);
    double lo, hi = log1p_dd(wh, wl, &lo);
    return hi + lo;
}

double atanh(double x)
{
    uint64_t ix = asuint64(x), ia = ix & ~SIGN_MASK;
    double a = asdouble(ia), r;
    if (ia >= 0x3ff0000000000000ULL) { /* |x| >= 1 or NaN */
        if (ia > INF_BITS)
            return x + x;
        if (ia == 0x3ff0000000000000ULL)
            return (ix >> 63) ? -HUGE_VAL : HUGE_VAL;
        return __builtin_nan("");
    }
    if (ia < 0x3e40000000000000ULL) /* |x| < 2^-27 (also +-0): x */
        return x;
    /* atanh(a) = log1p(2a / (1 - a)) / 2 */
    double dl, dh = two_sum(1.0, -a, &dl);
    double n = 2.0 * a;
    double q = n / dh;
    double pe, p = two_prod(q, dh, &pe);
    double ql = (((n - p) - pe) - q * dl) / dh;
    double lo, hi = log1p_dd(q, ql, &lo);
    r = 0.5 * (hi + lo);
    return (ix >> 63) ? -r : r;
}
