/* fibonacci: iterative Fibonacci numbers in 32 bits (F(0)..F(46)), a 64-bit one (F(90)), and a
 * recursive F(15). */
#include "runtime.h"

static unsigned fib_rec(unsigned n)
{
    return n < 2 ? n : fib_rec(n - 1) + fib_rec(n - 2);
}

int main(void)
{
    unsigned a = 0, b = 1;
    for (int i = 0; i <= 46; i++) {
        printf("F(%d) = %u\n", i, a);
        unsigned t = a + b;
        a = b;
        b = t;
    }
    unsigned long long x = 0, y = 1;
    for (int i = 0; i < 90; i++) {
        unsigned long long t = x + y;
        x = y;
        y = t;
    }
    printf("F(90) = %llu = 0x%08x%08x\n", x, (unsigned)(x >> 32), (unsigned)x);
    printf("fib_rec(15) = %u\n", fib_rec(15));
    return 0;
}
