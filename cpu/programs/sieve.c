/* sieve: the sieve of Eratosthenes below 2000. Exit code: the number of primes & 0xff (non-zero on
 * purpose). */
#include "runtime.h"

#define N 2000
static unsigned char composite[N];

int main(void)
{
    for (int i = 2; i * i < N; i++)
        if (!composite[i])
            for (int j = i * i; j < N; j += i)
                composite[j] = 1;
    int count = 0;
    unsigned sum = 0;
    int last = 0;
    printf("first primes:");
    for (int i = 2; i < N; i++) {
        if (composite[i])
            continue;
        if (count < 20)
            printf(" %d", i);
        count++;
        sum += i;
        last = i;
    }
    printf("\nprimes below %d: %d, sum %u, largest %d\n", N, count, sum, last);
    return count & 0xff;
}
