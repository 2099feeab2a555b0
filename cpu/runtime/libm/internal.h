/* Helpers shared by the files of cpu/runtime/libm/: bit access to doubles and exact (error-free) operations
 * for double-double arithmetic. Soft-float on this machine: every + - * / is a runtime call. */
#ifndef RV32_LIBM_INTERNAL_H
#define RV32_LIBM_INTERNAL_H

#include <stdint.h>
#include <math.h>

static inline uint64_t asuint64(double x) { union { double f; uint64_t i; } u = {x}; return u.i; }
static inline double asdouble(uint64_t i) { union { uint64_t i; double f; } u = {i}; return u.f; }
static inline uint32_t asuint(float x) { union { float f; uint32_t i; } u = {x}; return u.i; }
static inline float asfloat(uint32_t i) { union { uint32_t i; float f; } u = {i}; return u.f; }

/* the biased exponent field (0..2047) and the sign bit */
#define EXPONENT(x) ((int)((asuint64(x) >> 52) & 0x7ff))
#define SIGN(x) ((int)(asuint64(x) >> 63))

/* s + e == a + b exactly, s = fl(a + b) (Knuth's TwoSum, any magnitudes) */
static inline double two_sum(double a, double b, double *e) {
    double s = a + b, bb = s - a;
    *e = (a - (s - bb)) + (b - bb);
    return s;
}

/* s + e == a + b exactly when |a| >= |b| or a == 0 (Dekker's Fast2Sum) */
static inline double fast_two_sum(double a, double b, double *e) {
    double s = a + b;
    *e = b - (s - a);
    return s;
}

/* Veltkamp split: hi has the top 26 bits of a, lo the rest (|a| < 2^995) */
static inline void split(double a, double *hi, double *lo) {
    double c = 134217729.0 * a; /* 2^27 + 1 */
    *hi = c - (c - a);
    *lo = a - *hi;
}

/* p + e == a * b exactly, p = fl(a * b) (Dekker's TwoProduct; no fma on this machine) */
static inline double two_prod(double a, double b, double *e) {
    double p = a * b, ah, al, bh, bl;
    split(a, &ah, &al);
    split(b, &bh, &bl);
    *e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    return p;
}

/* volatile forces a computation the compiler could otherwise fold or drop */
#define FORCE_EVAL(x) do { volatile double __v = (x); (void)__v; } while (0)

#endif
