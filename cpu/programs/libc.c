/* libc: the small libc of runtime/include/ as ordinary C uses it -- the standard headers, printf's
 * conversions, flags and length modifiers, the sprintf family, string.h, ctype.h, strtol and friends,
 * rand, malloc/realloc/free, qsort/bsearch, stdio's FILE functions, assert. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

struct item {
    int key;
    char tag;
};

static int cmp_item(const void *a, const void *b)
{
    return ((const struct item *)a)->key - ((const struct item *)b)->key;
}

static void formats(void)
{
    int r = printf("printf: %d %i %u %o %x %X %c %s %%\n", -42, 7, 3000000000u, 8, 0xbeef, 0xbeef, 'c', "str");
    printf("returned %d; alt: %#o %#x %#X %#o %#x %p %p\n", r, 8, 255, 255, 0, 0, (void *)0x1234, NULL);
    printf("flags: [%-6d] [%06d] [%+d] [% d] [%+d] [%-+5d] [% 05d] [%-06x]\n", 42, -42, 5, 5, -5, 3, 7, 0xab);
    printf("prec: [%.5d] [%8.3d] [%-8.3x] [%.0d] [%.3s] [%-6.2s] [%10.4s] [%.*s]\n", 42, -7, 0xf, 0, "abcdef", "xyz",
           "hello", 2, "pqrs");
    printf("star: [%*d] [%-*d] [%*d]\n", 5, 1, 5, 2, -5, 3);
    printf("length: %hd %hu %hhd %hhu %ld %lu %zu %td %jd\n", 70000, 70000, 200, 300, -123456789L, 4000000000ul,
           (size_t)12345, (ptrdiff_t)-9, (intmax_t)-1234567LL);
    printf("64: %lld %llu %llx %llX %llo %020lld\n", LLONG_MIN, ULLONG_MAX, 0x123456789abcdefULL, 0xfedcba987ULL,
           01234567012345670ULL, -123456LL);
    printf("limits: %d %d %u %ld %" PRId64 " %" PRIu32 "\n", INT_MIN, INT_MAX, UINT_MAX, LONG_MAX, (int64_t)1 << 40,
           UINT32_MAX);
    printf("double: %f %.2f %e %g %-10.3g|\n", 3.14159, 2.675, 12345.678, 1234567.0, 2.0 / 3);
    int n1 = 0;
    printf("count%n|", &n1);
    printf("%d\n", n1);

    char buf[32];
    int w = snprintf(buf, 8, "%s-%d", "abcdef", 12345);
    printf("snprintf: %d \"%s\" %d", w, buf, snprintf(NULL, 0, "%lld", -1234567890123LL));
    w = snprintf(buf, 1, "xyz");
    printf(" %d \"%s\"", w, buf);
    w = sprintf(buf, "%08.3f|%x|%c", -3.14159, 48879u, 'Z');
    printf(" %d \"%s\"\n", w, buf);
}

static void strings(void)
{
    char a[32] = "hello", b[16];
    strcat(a, ", world");
    strncat(a, "!!!", 2);
    printf("strcat: %s (%u)\n", a, (unsigned)strlen(a));
    memset(b, 'x', sizeof b);
    strncpy(b, "abc", 6);
    printf("strncpy: %s %d %d %c\n", b, b[4], b[5], b[6]);
    printf("strncmp: %d %d %d %d\n", strncmp("apple", "apricot", 2) == 0, strncmp("apple", "apricot", 3) < 0,
           strncmp("abc", "abd", 0), strncmp("b", "a", 5) > 0);
    const char *s = "the quick brown fox";
    printf("strchr: %s | %s | %d\n", strchr(s, 'q'), strrchr(s, 'o'), strchr(s, 'z') == NULL);
    printf("strstr: %s | %d | %s\n", strstr(s, "brown"), strstr(s, "cat") == NULL, strstr(s, ""));
    printf("memchr: %d %d\n", (int)((const char *)memchr(s, 'k', 19) - s), memchr(s, 'k', 5) == NULL);
    printf("spn: %u %u %s\n", (unsigned)strspn("123abc", "0123456789"), (unsigned)strcspn("hello, world", ",;"),
           strpbrk(s, "kx"));
    char text[] = "  alpha,beta;;gamma , delta ";
    printf("strtok:");
    for (char *t = strtok(text, " ,;"); t; t = strtok(NULL, " ,;"))
        printf(" [%s]", t);
    char *d = strdup("duplicate");
    printf("\nstrdup: %s %d\n", d, strcmp(d, "duplicate"));
    free(d);
}

static const char SAMPLE[] = " \n\x7f" "09fAGz!@[`~";

static void classes(void)
{
    int counts[11] = {0};
    for (int i = -1; i < (int)sizeof SAMPLE - 1; i++) {
        int c = i < 0 ? EOF : (unsigned char)SAMPLE[i];
        counts[0] += !!isdigit(c);
        counts[1] += !!isalpha(c);
        counts[2] += !!isalnum(c);
        counts[3] += !!isspace(c);
        counts[4] += !!isupper(c);
        counts[5] += !!islower(c);
        counts[6] += !!isxdigit(c);
        counts[7] += !!isprint(c);
        counts[8] += !!ispunct(c);
        counts[9] += !!iscntrl(c);
        counts[10] += !!isgraph(c);
    }
    printf("ctype: %d %d %d %d %d %d %d %d %d %d %d", counts[0], counts[1], counts[2], counts[3], counts[4],
           counts[5], counts[6], counts[7], counts[8], counts[9], counts[10]);
    char word[] = "Mixed Case 123!";
    for (char *p = word; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    printf("\nupper: %s", word);
    for (char *p = word; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    printf(" lower: %s %d %d\n", word, toupper(EOF) == EOF, tolower('[') == '[');
}

static void numbers(void)
{
    char *end;
    printf("atoi: %d %d %ld %lld\n", atoi("  -42abc"), atoi("+17"), atol("2147483647"), atoll("-9000000000"));
    const char *inputs[] = {"0x1F", "0755", "0b101", "  -99 rest", "z", "12abc", "0x", "junk"};
    const int bases[] = {0, 0, 0, 10, 36, 16, 16, 10};
    long v[8];
    int used[8];
    for (int i = 0; i < 8; i++) {
        v[i] = strtol(inputs[i], &end, bases[i]);
        used[i] = (int)(end - inputs[i]);
    }
    printf("strtol: %ld/%d %ld/%d %ld/%d %ld/%d %ld/%d %ld/%d %ld/%d %ld/%d", v[0], used[0], v[1], used[1], v[2],
           used[2], v[3], used[3], v[4], used[4], v[5], used[5], v[6], used[6], v[7], used[7]);
    errno = 0;
    const char *ov = "-2147483649";
    long big = strtol(ov, &end, 10);
    printf("\noverflow: %ld %d %d", big, errno == ERANGE, (int)(end - ov));
    errno = 0;
    unsigned long ub = strtoul("4294967296", NULL, 10);
    printf(" %lu %d", ub, errno == ERANGE);
    printf(" %lu %llu %lld\n", strtoul("-1", NULL, 10), strtoull("18446744073709551615", NULL, 10),
           strtoll("-0x7fffffffffffffff", NULL, 16));
    div_t q = div(-17, 5);
    printf("abs: %d %ld %lld div %d %d\n", abs(-5), labs(-70000L), llabs(-5000000000LL), q.quot, q.rem);

    int r1 = rand(), r2 = rand(), r3 = rand();
    srand(2024);
    int r4 = rand(), r5 = rand();
    srand(1);
    printf("rand: %d %d %d %d %d %d %d\n", r1, r2, r3, r4, r5, rand(), RAND_MAX);
}

static void heap(void)
{
    int *v = malloc(10 * sizeof *v);
    for (int i = 0; i < 10; i++)
        v[i] = i * i;
    v = realloc(v, 1000 * sizeof *v);
    int sum = 0;
    for (int i = 0; i < 10; i++)
        sum += v[i];
    int *z = calloc(50, sizeof *z);
    int zsum = 0;
    for (int i = 0; i < 50; i++)
        zsum += z[i];
    printf("heap: %d %d aligned %d %d", sum, zsum, ((uintptr_t)v & 7) == 0, ((uintptr_t)z & 7) == 0);
    free(z);
    char *p = malloc(200);
    free(p);
    char *q = malloc(150);
    printf(" reused %d", p == q);
    free(q);
    free(v);
    /* use the heap up, then give it back */
    void *blocks[32];
    int count = 0;
    while (count < 32 && (blocks[count] = malloc(4000)) != NULL)
        count++;
    bool exhausted = count < 32 && count > 4;
    while (count > 0)
        free(blocks[--count]);
    void *again = malloc(4096);
    printf(" exhausted %d again %d huge %d\n", exhausted, again != NULL, malloc(0x7fffffff) == NULL);
    free(again);
}

static void sorting(void)
{
    int values[16];
    unsigned seed = 7;
    for (int i = 0; i < 16; i++) {
        seed = seed * 1103515245u + 12345u;
        values[i] = (int)((seed >> 16) % 1000) - 500;
    }
    qsort(values, 16, sizeof values[0], cmp_int);
    int key = values[11], missing = 1000;
    int *hit = bsearch(&key, values, 16, sizeof values[0], cmp_int);
    printf("qsort: %d %d %d %d %d %d | bsearch %d %d\n", values[0], values[3], values[7], values[8], values[12],
           values[15], hit != NULL && *hit == key, bsearch(&missing, values, 16, sizeof values[0], cmp_int) == NULL);

    const char *names[] = {"pear", "apple", "fig", "banana", "cherry", "date", "kiwi", "grape", "lemon", "mango"};
    qsort(names, 10, sizeof names[0], cmp_str);
    printf("names: %s %s %s %s %s %s %s %s %s %s", names[0], names[1], names[2], names[3], names[4], names[5],
           names[6], names[7], names[8], names[9]);

    struct item items[12];
    for (int i = 0; i < 12; i++) {
        items[i].key = (i * 7) % 5;
        items[i].tag = (char)('a' + i);
    }
    qsort(items, 12, sizeof items[0], cmp_item);
    char line[40], *p = line;
    for (int i = 0; i < 12; i++) {
        *p++ = ' ';
        *p++ = (char)('0' + items[i].key);
        *p++ = items[i].tag;
    }
    *p = 0;
    printf("\nstable:%s\n", line);
}

static void files(void)
{
    fputs("fputs to stdout, ", stdout);
    fputc('+', stdout);
    putc('-', stderr);
    int n = fprintf(stderr, " fprintf %s %d", "to stderr", 99);
    fprintf(stdout, " (%d) getchar %d EOF %d\n", n, getchar(), EOF);
    fflush(stdout);
}

int main(void)
{
    bool ok = true;
    assert(ok && sizeof(int32_t) == 4);
    formats();
    strings();
    classes();
    numbers();
    heap();
    sorting();
    files();
    assert(strcmp("a", "b") < 0);
    puts("done");
    return EXIT_SUCCESS;
}
