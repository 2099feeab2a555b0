/* quicksort: sort 300 pseudo-random signed ints (an LCG) with a recursive quicksort, check the order
 * and print a few elements and a checksum. */
#include "runtime.h"

#define N 300
static int a[N];

static void quicksort(int *v, int lo, int hi)
{
    while (lo < hi) {
        int pivot = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                int t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        }
        /* recurse into the smaller part, loop on the larger */
        if (j - lo < hi - i) {
            quicksort(v, lo, j);
            lo = i;
        } else {
            quicksort(v, i, hi);
            hi = j;
        }
    }
}

int main(void)
{
    unsigned seed = 12345;
    for (int i = 0; i < N; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = (int)((seed >> 16) & 0x7fff) - 16384;
    }
    quicksort(a, 0, N - 1);
    int sorted = 1;
    unsigned checksum = 0;
    for (int i = 0; i < N; i++) {
        if (i && a[i - 1] > a[i])
            sorted = 0;
        checksum = checksum * 31u + (unsigned)a[i];
    }
    printf("sorted: %s\n", sorted ? "yes" : "no");
    printf("min %d max %d median %d\n", a[0], a[N - 1], a[N / 2]);
    printf("first:");
    for (int i = 0; i < 8; i++)
        printf(" %d", a[i]);
    printf("\nchecksum %08x\n", checksum);
    return sorted ? 0 : 1;
}
