/* <math.h> of the machine's small libc: cpu/runtime/libm/ (double precision, IEEE binary64 in
 * software: the core has no floating-point unit, so every operation is a call into the compiler's
 * runtime library). Round to nearest, no floating-point exceptions or errno (math_errhandling is 0);
 * results on NaN, infinite and out-of-domain arguments follow C's Annex F (NaN, +-HUGE_VAL, ...).
 * Accuracy (tests/cpu/test_cpu_libm.py, against mpmath's exact values): exact where C's definition
 * is exact (fabs floor ceil trunc round rint fmod remainder remquo frexp ldexp modf ...), correctly
 * rounded sqrt and fma, and every other function within 1 ulp of the exact value (measured: at most
 * 0.51 ulp for exp, exp2, expm1, the logarithms, pow and the inverse functions, 0.8 for sin, cos, tan,
 * sinh, cosh). The float versions (sinf ...) compute in double and round once.
 * The + - * / themselves come from the compiler's runtime: zig 0.17.1's compiler_rt rounds some
 * quotients in the subnormal range 1 ulp off (4.039277139332e-123 / 3.752677336284965e+190 gives
 * ...2f9c, IEEE ...2f9d; gcc's libgcc is exact), which reaches atan2 with subnormal results.
 * Linked from a library archive only when a program calls them. Not provided (a call is a compile
 * error naming the function): erf, erfc, tgamma, lgamma, the Bessel functions, fmaf, <fenv.h>. */
#ifndef RV32_MATH_H
#define RV32_MATH_H

#define HUGE_VAL (__builtin_huge_val())
#define HUGE_VALF (__builtin_huge_valf())
#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))
#define FP_NAN 0
#define FP_INFINITE 1
#define FP_ZERO 2
#define FP_SUBNORMAL 3
#define FP_NORMAL 4
#define FP_ILOGB0 (-2147483647 - 1)
#define FP_ILOGBNAN (-2147483647 - 1)
#define MATH_ERRNO 1
#define MATH_ERREXCEPT 2
#define math_errhandling 0

typedef float float_t;
typedef double double_t;

#define fpclassify(x) __builtin_fpclassify(FP_NAN, FP_INFINITE, FP_NORMAL, FP_SUBNORMAL, FP_ZERO, x)
#define isnan(x) __builtin_isnan(x)
#define isinf(x) __builtin_isinf(x)
#define isfinite(x) __builtin_isfinite(x)
#define isnormal(x) __builtin_isnormal(x)
#define signbit(x) __builtin_signbit(x)
#define isgreater(x, y) __builtin_isgreater(x, y)
#define isgreaterequal(x, y) __builtin_isgreaterequal(x, y)
#define isless(x, y) __builtin_isless(x, y)
#define islessequal(x, y) __builtin_islessequal(x, y)
#define islessgreater(x, y) __builtin_islessgreater(x, y)
#define isunordered(x, y) __builtin_isunordered(x, y)

#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440

/* exact or correctly rounded (libm/basic.c) */
double fabs(double x);
double copysign(double x, double y);
double floor(double x);
double ceil(double x);
double trunc(double x);
double round(double x);
long lround(double x);
long long llround(double x);
double rint(double x);
double nearbyint(double x);
long lrint(double x);
long long llrint(double x);
double modf(double x, double *iptr);
double frexp(double x, int *exp);
double ldexp(double x, int exp);
double scalbn(double x, int exp);
double scalbln(double x, long exp);
int ilogb(double x);
double logb(double x);
double fmod(double x, double y);
double remainder(double x, double y);
double remquo(double x, double y, int *quo);
double sqrt(double x);
double cbrt(double x);
double hypot(double x, double y);
double fmin(double x, double y);
double fmax(double x, double y);
double fdim(double x, double y);
double nextafter(double x, double y);
double nan(const char *tag);
double fma(double x, double y, double z);

/* exponentials and logarithms (libm/explog.c) */
double exp(double x);
double exp2(double x);
double expm1(double x);
double log(double x);
double log2(double x);
double log10(double x);
double log1p(double x);
double pow(double x, double y);
double sinh(double x);
double cosh(double x);
double tanh(double x);
double asinh(double x);
double acosh(double x);
double atanh(double x);

/* trigonometry (libm/trig.c) */
double sin(double x);
double cos(double x);
double tan(double x);
double asin(double x);
double acos(double x);
double atan(double x);
double atan2(double y, double x);

/* float versions (libm/float.c) */
float fabsf(float x);
float copysignf(float x, float y);
float floorf(float x);
float ceilf(float x);
float truncf(float x);
float roundf(float x);
long lroundf(float x);
float rintf(float x);
float nearbyintf(float x);
long lrintf(float x);
float modff(float x, float *iptr);
float frexpf(float x, int *exp);
float ldexpf(float x, int exp);
float scalbnf(float x, int exp);
float fmodf(float x, float y);
float remainderf(float x, float y);
float sqrtf(float x);
float cbrtf(float x);
float hypotf(float x, float y);
float fminf(float x, float y);
float fmaxf(float x, float y);
float fdimf(float x, float y);
float nanf(const char *tag);
float expf(float x);
float exp2f(float x);
float expm1f(float x);
float logf(float x);
float log2f(float x);
float log10f(float x);
float log1pf(float x);
float powf(float x, float y);
float sinhf(float x);
float coshf(float x);
float tanhf(float x);
float asinhf(float x);
float acoshf(float x);
float atanhf(float x);
float sinf(float x);
float cosf(float x);
float tanf(float x);
float asinf(float x);
float acosf(float x);
float atanf(float x);
float atan2f(float y, float x);

#endif
