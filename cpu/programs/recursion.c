/* recursion: Ackermann A(2,3) and A(3,3), the towers of Hanoi (10 discs), mutual recursion and
 * recursive greatest common divisor. */
#include "runtime.h"

static unsigned calls;

static unsigned ackermann(unsigned m, unsigned n)
{
    calls++;
    if (m == 0)
        return n + 1;
    if (n == 0)
        return ackermann(m - 1, 1);
    return ackermann(m - 1, ackermann(m, n - 1));
}

static unsigned moves;
static unsigned hanoi_sum;

static void hanoi(int n, int from, int to, int via)
{
    if (n == 0)
        return;
    hanoi(n - 1, from, via, to);
    moves++;
    hanoi_sum += (unsigned)(from * 3 + to) * moves;
    hanoi(n - 1, via, to, from);
}

static int is_odd(unsigned n);
static int is_even(unsigned n) { return n == 0 ? 1 : is_odd(n - 1); }
static int is_odd(unsigned n) { return n == 0 ? 0 : is_even(n - 1); }

static unsigned gcd(unsigned a, unsigned b) { return b == 0 ? a : gcd(b, a % b); }

int main(void)
{
    calls = 0;
    unsigned a23 = ackermann(2, 3);
    printf("A(2,3) = %u (%u calls)\n", a23, calls);
    calls = 0;
    unsigned a33 = ackermann(3, 3);
    printf("A(3,3) = %u (%u calls)\n", a33, calls);
    hanoi(10, 1, 3, 2);
    printf("hanoi(10): %u moves, weighted sum %u\n", moves, hanoi_sum);
    printf("is_even(100) = %d, is_odd(77) = %d, is_even(33) = %d\n", is_even(100), is_odd(77), is_even(33));
    printf("gcd(1071, 462) = %u, gcd(832040, 514229) = %u\n", gcd(1071, 462), gcd(832040, 514229));
    return a23 == 9 && a33 == 61 ? 0 : 1;
}
