/* The float functions of <math.h>: each computes in double and rounds once to float. For the exact
 * functions (floorf, fmodf, ...) and sqrtf that is exact or correctly rounded (a double carries more
 * than twice float's 24 bits); for the others it adds at most half a float ulp to the double's error. */
#include <math.h>

#define F1(name) float name##f(float x) { return (float)name((double)x); }
#define F2(name) float name##f(float x, float y) { return (float)name((double)x, (double)y); }

F1(fabs) F1(floor) F1(ceil) F1(trunc) F1(round) F1(rint) F1(nearbyint) F1(sqrt) F1(cbrt)
F1(exp) F1(exp2) F1(expm1) F1(log) F1(log2) F1(log10) F1(log1p) F1(sinh) F1(cosh) F1(tanh)
F1(asinh) F1(acosh) F1(atanh) F1(sin) F1(cos) F1(tan) F1(asin) F1(acos) F1(atan)
F2(copysign) F2(fmod) F2(remainder) F2(hypot) F2(fmin) F2(fmax) F2(fdim) F2(pow) F2(atan2)

long lroundf(float x) { return lround((double)x); }
long lrintf(float x) { return lrint((double)x); }
float nanf(const char *tag) { return (float)nan(tag); }
float ldexpf(float x, int n) { return (float)ldexp((double)x, n < -400 ? -400 : n > 400 ? 400 : n); }
float scalbnf(float x, int n) { return ldexpf(x, n); }

float modff(float x, float *iptr) {
    double i;
    float f = (float)modf((double)x, &i);
    *iptr = (float)i;
    return f;
}

float frexpf(float x, int *exp) { return (float)frexp((double)x, exp); }
