/* hi: the compiled model's sample (README main command). Tiny on purpose: every instruction costs the
 * model a frame of tokens, so it writes a few console bytes directly and adds the digits of a number
 * (no multiplication: an M instruction occupies the core for 18 cycles). */

#define CONSOLE (*(volatile char *)0x10000000)

static int digit_sum(unsigned x)
{
    int s = 0;
    while (x) {
        s += x & 15;
        x >>= 4;
    }
    return s;
}

int main(void)
{
    const char *s = "hi!\n";
    while (*s)
        CONSOLE = *s++;
    return digit_sum(0x1234);     /* 1 + 2 + 3 + 4 = 10 */
}
