/* strings: the runtime's string and memory functions (strlen, strcmp, strcpy, memcpy, memmove, memset,
 * memcmp) and a few of the program's own (reverse, upper-case, find, integer to text). */
#include "runtime.h"

static void reverse(char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n / 2; i++) {
        char t = s[i];
        s[i] = s[n - 1 - i];
        s[n - 1 - i] = t;
    }
}

static void upper(char *s)
{
    for (; *s; s++)
        if (*s >= 'a' && *s <= 'z')
            *s = (char)(*s - 'a' + 'A');
}

static int find(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (int i = 0; hay[i]; i++)
        if (memcmp(hay + i, needle, n) == 0)
            return i;
    return -1;
}

static char *utoa(unsigned v, char *out, unsigned base)
{
    char tmp[33];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdefghijklmnopqrstuvwxyz"[v % base];
        v /= base;
    } while (v);
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = 0;
    return out;
}

static int sign(int x)
{
    return x < 0 ? -1 : x > 0;
}

int main(void)
{
    char buf[64], other[64];
    const char *words[] = {"apple", "banana", "cherry", "apple pie", "", "Zebra"};
    for (int i = 0; i < 6; i++)
        printf("strlen(\"%s\") = %u\n", words[i], (unsigned)strlen(words[i]));
    printf("strcmp: %d %d %d %d %d\n", sign(strcmp("apple", "apple")), sign(strcmp("apple", "banana")),
           sign(strcmp("cherry", "banana")), sign(strcmp("apple", "apple pie")), sign(strcmp("Zebra", "apple")));
    strcpy(buf, "Hello, strings!");
    printf("strcpy: %s (%u)\n", buf, (unsigned)strlen(buf));
    reverse(buf);
    printf("reverse: %s\n", buf);
    upper(buf);
    printf("upper: %s\n", buf);
    memset(other, '*', 10);
    other[10] = 0;
    printf("memset: %s\n", other);
    memcpy(other, "0123456789abcdef", 17);
    printf("memcpy: %s\n", other);
    memmove(other + 4, other, 8);  /* overlapping, forwards */
    printf("memmove up: %s\n", other);
    memmove(other, other + 6, 8);  /* overlapping, backwards */
    printf("memmove down: %s\n", other);
    printf("memcmp: %d %d %d\n", sign(memcmp("abcd", "abce", 4)), sign(memcmp("abcd", "abcd", 4)),
           sign(memcmp("b", "a", 1)));
    printf("find: %d %d %d\n", find("the cat sat on the mat", "sat"), find("the cat sat on the mat", "mat"),
           find("the cat", "dog"));
    printf("utoa: %s %s %s\n", utoa(1234567, buf, 10), utoa(255, other, 2), utoa(0xdeadbeef, buf + 32, 36));
    /* unaligned copies and fills */
    char src[40], dst[40];
    for (int i = 0; i < 40; i++)
        src[i] = (char)('A' + i % 26), dst[i] = '.';
    memcpy(dst + 1, src + 3, 30);
    memset(dst + 33, '#', 5);
    dst[39] = 0;
    printf("unaligned: %s\n", dst);
    return 0;
}
