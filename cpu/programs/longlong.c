/* longlong: 64-bit arithmetic on the 32-bit machine: long long multiply, divide, remainder and
 * shifts, signed and unsigned (division and remainder call the compiler's runtime helpers
 * __divdi3 / __udivdi3 / __moddi3 / __umoddi3). Results are printed as hex halves hi_lo. */
#include "runtime.h"

#define HALVES(v) (unsigned)((unsigned long long)(v) >> 32), (unsigned)(v)

static const long long A[] = {123456789012345LL, -987654321098765LL, 0x7fffffffffffffffLL, -1LL,
                              0x0123456789abcdefLL, 1000000007LL, -5LL, 4294967296LL};
static const long long B[] = {1000LL, 12345LL, -3LL, 7LL, 0xfedcba9876LL, -65536LL, 2LL, 4294967295LL};
static const int SHIFTS[] = {0, 1, 31, 32, 33, 63};

int main(void)
{
    for (int i = 0; i < 8; i++) {
        volatile long long va = A[i], vb = B[i];
        long long a = va, b = vb;
        unsigned long long ua = (unsigned long long)a, ub = (unsigned long long)b;
        printf("a=%08x_%08x b=%08x_%08x\n", HALVES(a), HALVES(b));
        printf("  mul %08x_%08x div %08x_%08x rem %08x_%08x\n", HALVES(a * b), HALVES(a / b), HALVES(a % b));
        printf("  udiv %08x_%08x urem %08x_%08x\n", HALVES(ua / ub), HALVES(ua % ub));
        printf("  dec %lld / %lld = %lld\n", a, b, a / b);
    }
    volatile long long vx = -0x123456789abcdefLL;
    long long x = vx;
    for (int i = 0; i < 6; i++) {
        volatile int vs = SHIFTS[i];
        int s = vs;
        printf("shift %d: shl %08x_%08x sar %08x_%08x shr %08x_%08x\n", s, HALVES(x << s), HALVES(x >> s),
               HALVES((unsigned long long)x >> s));
    }
    return 0;
}
