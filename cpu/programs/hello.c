/* hello: the smallest program; prints a greeting and a few printf conversions. */
#include "runtime.h"

int main(void)
{
    puts("Hello, RISC-V!");
    printf("%d %i %u %x %X %s %c %%\n", -42, 7, 3000000000u, 0xbeef, 0xbeef, "str", 'c');
    printf("[%08x] [%5d] [%-5d] [%05d] [%ld] [%lu] [%3s] [%-3s]\n", 0x1234abcd, 42, 42, -42, 123456789L,
           4000000000ul, "ab", "ab");
    printf("%lld %llu %llx\n", -1234567890123456789LL, 18446744073709551615ull, 0x123456789abcdefull);
    return 0;
}
