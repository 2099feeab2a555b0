/* The small libc of the RV32IM+Zba machine: what the standard headers of runtime/include/ declare
 * beyond runtime.c (which has putchar, puts, printf, vprintf, the formatter __rt_vformat, exit and
 * the mem and str functions of runtime.h).
 *
 * Every function here is weak: a program that defines a function of the same name (it may, when it
 * includes only "runtime.h") gets its own. Unused functions cost nothing (the linker drops them). */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define WEAK __attribute__((weak))

WEAK int errno;

/* ---- ctype: the "C" locale; EOF and bytes above 127 belong to no class ---- */

WEAK int isdigit(int c) { return (unsigned)c - '0' < 10; }
WEAK int islower(int c) { return (unsigned)c - 'a' < 26; }
WEAK int isupper(int c) { return (unsigned)c - 'A' < 26; }
WEAK int isalpha(int c) { return ((unsigned)c | 32) - 'a' < 26; }
WEAK int isalnum(int c) { return (unsigned)c - '0' < 10 || ((unsigned)c | 32) - 'a' < 26; }
WEAK int isxdigit(int c) { return (unsigned)c - '0' < 10 || ((unsigned)c | 32) - 'a' < 6; }
WEAK int isspace(int c) { return c == ' ' || (unsigned)c - '\t' < 5; }
WEAK int isblank(int c) { return c == ' ' || c == '\t'; }
WEAK int iscntrl(int c) { return (unsigned)c < 32 || c == 127; }
WEAK int isprint(int c) { return (unsigned)c - 32 < 95; }
WEAK int isgraph(int c) { return (unsigned)c - 33 < 94; }
WEAK int ispunct(int c) { return (unsigned)c - 33 < 94 && !isalnum(c); }
WEAK int tolower(int c) { return (unsigned)c - 'A' < 26 ? c | 32 : c; }
WEAK int toupper(int c) { return (unsigned)c - 'a' < 26 ? c & ~32 : c; }

static inline int is_space(int c) { return c == ' ' || (unsigned)c - '\t' < 5; }

/* ---- string.h ---- */

WEAK size_t strnlen(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i])
        i++;
    return i;
}

WEAK int strncmp(const char *a, const char *b, size_t n)
{
    for (; n; n--, a++, b++) {
        if (*a != *b)
            return (int)(unsigned char)*a - (int)(unsigned char)*b;
        if (!*a)
            break;
    }
    return 0;
}

WEAK char *strncpy(char *restrict dst, const char *restrict src, size_t n)
{
    size_t i = 0;
    for (; i < n && src[i]; i++)
        dst[i] = src[i];
    for (; i < n; i++)
        dst[i] = 0;
    return dst;
}

WEAK char *strcat(char *restrict dst, const char *restrict src)
{
    strcpy(dst + strlen(dst), src);
    return dst;
}

WEAK char *strncat(char *restrict dst, const char *restrict src, size_t n)
{
    char *d = dst + strlen(dst);
    while (n-- && *src)
        *d++ = *src++;
    *d = 0;
    return dst;
}

WEAK char *strchr(const char *s, int c)
{
    for (;; s++) {
        if (*s == (char)c)
            return (char *)s;
        if (!*s)
            return NULL;
    }
}

WEAK char *strrchr(const char *s, int c)
{
    const char *last = NULL;
    for (;; s++) {
        if (*s == (char)c)
            last = s;
        if (!*s)
            return (char *)last;
    }
}

WEAK char *strstr(const char *hay, const char *needle)
{
    if (!*needle)
        return (char *)hay;
    for (; *hay; hay++) {
        if (*hay != *needle)
            continue;
        size_t i = 1;
        while (needle[i] && hay[i] == needle[i])
            i++;
        if (!needle[i])
            return (char *)hay;
    }
    return NULL;
}

/* The length of the start of s made of characters in set (accept 1) or not in set (accept 0). */
static size_t span(const char *s, const char *set, int accept)
{
    size_t n = 0;
    for (char c; (c = s[n]) != 0; n++) {
        const char *p = set;
        while (*p && *p != c)
            p++;
        if ((*p != 0) != accept)
            break;
    }
    return n;
}

WEAK size_t strspn(const char *s, const char *accept) { return span(s, accept, 1); }
WEAK size_t strcspn(const char *s, const char *reject) { return span(s, reject, 0); }

WEAK char *strpbrk(const char *s, const char *accept)
{
    s += strcspn(s, accept);
    return *s ? (char *)s : NULL;
}

WEAK char *strtok_r(char *restrict s, const char *restrict delim, char **restrict save)
{
    if (!s)
        s = *save;
    if (!s)
        return NULL;
    s += strspn(s, delim);
    if (!*s) {
        *save = NULL;
        return NULL;
    }
    char *end = s + strcspn(s, delim);
    if (*end)
        *end++ = 0;
    else
        end = NULL;
    *save = end;
    return s;
}

WEAK char *strtok(char *restrict s, const char *restrict delim)
{
    static char *save;
    return strtok_r(s, delim, &save);
}

WEAK char *strndup(const char *s, size_t n)
{
    n = strnlen(s, n);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

WEAK char *strdup(const char *s) { return strndup(s, (size_t)-1); }

WEAK void *memchr(const void *s, int c, size_t n)
{
    const unsigned char *p = s;
    for (; n; n--, p++)
        if (*p == (unsigned char)c)
            return (void *)p;
    return NULL;
}

WEAK int strcoll(const char *a, const char *b) { return strcmp(a, b); }

WEAK char *strerror(int err)
{
    switch (err) {
    case 0: return "Success";
    case EDOM: return "Numerical argument out of domain";
    case ERANGE: return "Numerical result out of range";
    case EINVAL: return "Invalid argument";
    case ENOMEM: return "Cannot allocate memory";
    default: return "Unknown error";
    }
}

WEAK int strncasecmp(const char *a, const char *b, size_t n)
{
    for (; n; n--, a++, b++) {
        int x = tolower((unsigned char)*a), y = tolower((unsigned char)*b);
        if (x != y)
            return x - y;
        if (!x)
            break;
    }
    return 0;
}

WEAK int strcasecmp(const char *a, const char *b) { return strncasecmp(a, b, (size_t)-1); }

/* ---- malloc: first fit from an address-ordered free list, else from the top of the heap ----
 * A block is an 8-byte header (its size, header included, a multiple of 8; and the next free block
 * while it is free) and the user's bytes. Freed neighbours merge; a free block at the top of the
 * heap goes back to it. */

struct blk {
    size_t size;
    struct blk *next;
};
#define HDR sizeof(struct blk)
#define STACK_MARGIN 1024 /* malloc leaves this much below the current stack pointer */

extern char __heap_start[], __heap_end[]; /* link.ld */
static char *heap_top; /* set by the first malloc: after the program's input (stdio below) */
static struct blk *free_list;

/* Whether the heap's top may move up to `end`. */
static int heap_fits(uintptr_t end)
{
    uintptr_t sp;
    __asm__ volatile("mv %0, sp" : "=r"(sp));
    return end <= (uintptr_t)__heap_end && end <= sp - STACK_MARGIN;
}

static size_t block_size(size_t n) /* 0: too big */
{
    if (n > 0x7fff0000u)
        return 0;
    n = (n + HDR + 7) & ~(size_t)7;
    return n < 16 ? 16 : n;
}

WEAK void *malloc(size_t n)
{
    size_t need = block_size(n);
    if (!need)
        return NULL;
    for (struct blk **pp = &free_list, *b; (b = *pp) != NULL; pp = &b->next) {
        if (b->size < need)
            continue;
        if (b->size - need >= 16) { /* split: the rest stays free */
            struct blk *rest = (struct blk *)((char *)b + need);
            rest->size = b->size - need;
            rest->next = b->next;
            *pp = rest;
            b->size = need;
        } else {
            *pp = b->next;
        }
        return (char *)b + HDR;
    }
    if (!heap_top) { /* the heap starts after the input's bytes (link.ld) */
        uintptr_t start = ((uintptr_t)input_data() + input_size() + 7) & ~(uintptr_t)7;
        heap_top = start > (uintptr_t)__heap_start ? (char *)start : __heap_start;
    }
    char *top = heap_top;
    if (top > __heap_end || need > (uintptr_t)__heap_end - (uintptr_t)top || !heap_fits((uintptr_t)top + need))
        return NULL;
    struct blk *b = (struct blk *)top;
    b->size = need;
    heap_top = top + need;
    return (char *)b + HDR;
}

WEAK void free(void *p)
{
    if (!p)
        return;
    struct blk *b = (struct blk *)((char *)p - HDR);
    struct blk *pprev = NULL, *prev = NULL, *cur = free_list;
    while (cur && cur < b) {
        pprev = prev;
        prev = cur;
        cur = cur->next;
    }
    if (cur && (char *)b + b->size == (char *)cur) { /* merge the next free block */
        b->size += cur->size;
        cur = cur->next;
    }
    b->next = cur;
    struct blk *merged = b, *before = prev;
    if (prev && (char *)prev + prev->size == (char *)b) { /* merge into the previous one */
        prev->size += b->size;
        prev->next = cur;
        merged = prev;
        before = pprev;
    } else if (prev) {
        prev->next = b;
    } else {
        free_list = b;
    }
    if ((char *)merged + merged->size == heap_top) { /* the top of the heap: give it back */
        heap_top = (char *)merged;
        if (before)
            before->next = NULL;
        else
            free_list = NULL;
    }
}

WEAK void *calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
        return NULL;
    void *p = malloc(total);
    if (p)
        memset(p, 0, total);
    return p;
}

WEAK void *realloc(void *p, size_t n)
{
    if (!p)
        return malloc(n);
    if (!n) {
        free(p);
        return NULL;
    }
    struct blk *b = (struct blk *)((char *)p - HDR);
    size_t need = block_size(n);
    if (!need)
        return NULL;
    if (b->size >= need)
        return p;
    if ((char *)b + b->size == heap_top && need - b->size <= (uintptr_t)__heap_end - (uintptr_t)heap_top &&
        heap_fits((uintptr_t)b + need)) { /* the top block grows in place */
        heap_top = (char *)b + need;
        b->size = need;
        return p;
    }
    void *q = malloc(n);
    if (q) {
        memcpy(q, p, b->size - HDR);
        free(p);
    }
    return q;
}

/* ---- numbers ---- */

static unsigned digit_value(int c)
{
    if ((unsigned)c - '0' < 10)
        return (unsigned)c - '0';
    c |= 32;
    if ((unsigned)c - 'a' < 26)
        return (unsigned)c - 'a' + 10;
    return 99;
}

/* strtol and friends: the magnitude of the number, clamped to `max_pos` (or `max_neg` after a '-')
 * with errno = ERANGE on overflow; *how gets STRTO_NEG for a '-' and STRTO_OVER on overflow. Only
 * 32-bit multiplications (no helper calls). Prefixes: 0x/0X for bases 0 and 16, 0b/0B for bases 0
 * and 2 (as C23), 0 for octal with base 0. */
enum { STRTO_NEG = 1, STRTO_OVER = 2 };

static uint64_t strto_core(const char *nptr, char **endptr, int base, uint64_t max_pos, uint64_t max_neg, int *how)
{
    const char *s = nptr;
    while (is_space(*s))
        s++;
    int neg = 0;
    if (*s == '-' || *s == '+')
        neg = *s++ == '-';
    *how = neg;
    if (base < 0 || base == 1 || base > 36) {
        errno = EINVAL;
        if (endptr)
            *endptr = (char *)nptr;
        return 0;
    }
    if ((base == 0 || base == 16) && s[0] == '0' && (s[1] | 32) == 'x' && digit_value(s[2]) < 16) {
        s += 2;
        base = 16;
    } else if ((base == 0 || base == 2) && s[0] == '0' && (s[1] | 32) == 'b' && digit_value(s[2]) < 2) {
        s += 2;
        base = 2;
    } else if (base == 0) {
        base = s[0] == '0' ? 8 : 10;
    }
    uint64_t max = neg ? max_neg : max_pos, acc = 0;
    int any = 0, over = 0;
    for (unsigned d; (d = digit_value(*s)) < (unsigned)base; s++) {
        any = 1;
        if (acc < (1u << 25)) { /* 32-bit arithmetic; below every max */
            acc = (uint32_t)acc * (unsigned)base + d;
            continue;
        }
        if (over)
            continue;
        uint64_t lo = (uint64_t)(uint32_t)acc * (unsigned)base;
        uint64_t hi = (uint64_t)(uint32_t)(acc >> 32) * (unsigned)base + (lo >> 32);
        acc = (hi << 32 | (uint32_t)lo) + d;
        if ((hi >> 32) || acc < d || acc > max)
            over = 1;
    }
    if (endptr)
        *endptr = (char *)(any ? s : nptr);
    if (over) {
        errno = ERANGE;
        *how |= STRTO_OVER;
        return max;
    }
    return acc;
}

WEAK long strtol(const char *restrict s, char **restrict end, int base)
{
    int how;
    uint32_t v = (uint32_t)strto_core(s, end, base, LONG_MAX, (uint32_t)LONG_MAX + 1, &how);
    return (long)(how & STRTO_NEG ? 0u - v : v);
}

WEAK unsigned long strtoul(const char *restrict s, char **restrict end, int base)
{
    int how;
    uint32_t v = (uint32_t)strto_core(s, end, base, ULONG_MAX, ULONG_MAX, &how);
    return how == STRTO_NEG ? 0u - v : v; /* overflow: ULONG_MAX, also after a '-' */
}

WEAK long long strtoll(const char *restrict s, char **restrict end, int base)
{
    int how;
    uint64_t v = strto_core(s, end, base, LLONG_MAX, (uint64_t)LLONG_MAX + 1, &how);
    return (long long)(how & STRTO_NEG ? 0u - v : v);
}

WEAK unsigned long long strtoull(const char *restrict s, char **restrict end, int base)
{
    int how;
    uint64_t v = strto_core(s, end, base, ULLONG_MAX, ULLONG_MAX, &how);
    return how == STRTO_NEG ? 0u - v : v;
}

WEAK intmax_t strtoimax(const char *restrict s, char **restrict end, int base) { return strtoll(s, end, base); }
WEAK uintmax_t strtoumax(const char *restrict s, char **restrict end, int base) { return strtoull(s, end, base); }
WEAK int atoi(const char *s) { return (int)strtol(s, NULL, 10); }
WEAK long atol(const char *s) { return strtol(s, NULL, 10); }
WEAK long long atoll(const char *s) { return strtoll(s, NULL, 10); }

WEAK int abs(int x) { return x < 0 ? -x : x; }
WEAK long labs(long x) { return x < 0 ? -x : x; }
WEAK long long llabs(long long x) { return x < 0 ? -x : x; }
WEAK intmax_t imaxabs(intmax_t x) { return x < 0 ? -x : x; }
WEAK div_t div(int a, int b) { return (div_t){a / b, a % b}; }
WEAK ldiv_t ldiv(long a, long b) { return (ldiv_t){a / b, a % b}; }

/* lldiv by shift-subtract: libc.c calls no compiler helper (GCC's libgcc for rv32 with Zba is not
 * always at hand) */
WEAK lldiv_t lldiv(long long a, long long b)
{
    uint64_t n = a < 0 ? 0 - (uint64_t)a : (uint64_t)a, d = b < 0 ? 0 - (uint64_t)b : (uint64_t)b, q = 0, r = 0;
    for (int i = 0; i < 64; i++) {
        r = (r << 1) | (n >> 63);
        n <<= 1;
        q <<= 1;
        if (r >= d) {
            r -= d;
            q |= 1;
        }
    }
    return (lldiv_t){(a < 0) != (b < 0) ? (long long)(0 - q) : (long long)q, a < 0 ? (long long)(0 - r) : (long long)r};
}

static unsigned long rand_next = 1;

WEAK int rand(void)
{
    rand_next = rand_next * 1103515245u + 12345u;
    return (int)((rand_next / 65536) % 32768);
}

WEAK void srand(unsigned seed) { rand_next = seed; }

WEAK char *getenv(const char *name)
{
    (void)name;
    return NULL;
}

WEAK void abort(void) { exit(134); }

/* ---- qsort: a stable merge sort (so equal elements keep their order), insertion sort for short
 * runs; the merge buffer is on the stack for small arrays, else malloc'ed, and if that fails the
 * whole array is insertion-sorted (slow, still correct). ---- */

typedef int (*cmp_fn)(const void *, const void *);

static void copy_elem(char *d, const char *s, size_t size, int words)
{
    if (words) {
        for (size_t i = 0; i < size; i += 4)
            *(uint32_t *)(d + i) = *(const uint32_t *)(s + i);
    } else {
        for (size_t i = 0; i < size; i++)
            d[i] = s[i];
    }
}

static void swap_elem(char *a, char *b, size_t size, int words)
{
    if (words) {
        for (size_t i = 0; i < size; i += 4) {
            uint32_t t = *(uint32_t *)(a + i);
            *(uint32_t *)(a + i) = *(uint32_t *)(b + i);
            *(uint32_t *)(b + i) = t;
        }
    } else {
        for (size_t i = 0; i < size; i++) {
            char t = a[i];
            a[i] = b[i];
            b[i] = t;
        }
    }
}

static void insertion_sort(char *a, size_t n, size_t size, cmp_fn cmp, int words)
{
    for (size_t i = 1; i < n; i++)
        for (char *p = a + i * size; p > a && cmp(p - size, p) > 0; p -= size)
            swap_elem(p - size, p, size, words);
}

static void merge_sort(char *a, char *tmp, size_t n, size_t size, cmp_fn cmp, int words)
{
    if (n <= 8) {
        insertion_sort(a, n, size, cmp, words);
        return;
    }
    size_t h = n / 2;
    char *mid = a + h * size, *end = a + n * size;
    merge_sort(a, tmp, h, size, cmp, words);
    merge_sort(mid, tmp, n - h, size, cmp, words);
    if (cmp(mid - size, mid) <= 0)
        return; /* already in order */
    memcpy(tmp, a, h * size);
    char *l = tmp, *lend = tmp + h * size, *r = mid, *o = a;
    while (l < lend && r < end) {
        if (cmp(r, l) < 0) {
            copy_elem(o, r, size, words);
            r += size;
        } else {
            copy_elem(o, l, size, words);
            l += size;
        }
        o += size;
    }
    memcpy(o, l, (size_t)(lend - l)); /* what is left of the right half is in place */
}

WEAK void qsort(void *base, size_t n, size_t size, cmp_fn cmp)
{
    if (n < 2 || !size)
        return;
    int words = ((size | (uintptr_t)base) & 3) == 0;
    size_t need = n / 2 * size;
    if (n <= 8) {
        insertion_sort(base, n, size, cmp, words);
        return;
    }
    uint32_t small[64]; /* 256 bytes, word-aligned */
    char *tmp = need <= sizeof small ? (char *)small : malloc(need);
    if (!tmp) {
        insertion_sort(base, n, size, cmp, words);
        return;
    }
    merge_sort(base, tmp, n, size, cmp, words);
    if (tmp != (char *)small)
        free(tmp);
}

WEAK void *bsearch(const void *key, const void *base, size_t n, size_t size, cmp_fn cmp)
{
    const char *lo = base;
    while (n) {
        const char *mid = lo + (n / 2) * size;
        int c = cmp(key, mid);
        if (!c)
            return (void *)mid;
        if (c > 0) {
            lo = mid + size;
            n -= n / 2 + 1;
        } else {
            n /= 2;
        }
    }
    return NULL;
}

/* ---- stdio: stdout and stderr are the console; stdin is the program's input (cpu run --input) ---- */

static FILE rt_stdin = {0}, rt_stdout = {1}, rt_stderr = {2};
FILE *stdin = &rt_stdin, *stdout = &rt_stdout, *stderr = &rt_stderr;

WEAK int vsnprintf(char *restrict buf, size_t size, const char *restrict fmt, va_list ap)
{
    static char nowhere[1];
    size_t cap = size ? size - 1 : 0;
    int n = __rt_vformat(size ? buf : nowhere, cap, fmt, ap); /* buf may be NULL when size is 0 */
    if (size)
        buf[(size_t)n < cap ? (size_t)n : cap] = 0;
    return n;
}

WEAK int vsprintf(char *restrict buf, const char *restrict fmt, va_list ap)
{
    return vsnprintf(buf, (size_t)INT_MAX, fmt, ap);
}

WEAK int snprintf(char *restrict buf, size_t size, const char *restrict fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return n;
}

WEAK int sprintf(char *restrict buf, const char *restrict fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, (size_t)INT_MAX, fmt, ap);
    va_end(ap);
    return n;
}

WEAK int vfprintf(FILE *restrict f, const char *restrict fmt, va_list ap)
{
    if (!f || f->fd == 0)
        return -1;
    return vprintf(fmt, ap);
}

WEAK int fprintf(FILE *restrict f, const char *restrict fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(f, fmt, ap);
    va_end(ap);
    return n;
}

WEAK int fputc(int c, FILE *f)
{
    if (!f || f->fd == 0)
        return EOF;
    return putchar(c);
}

WEAK int putc(int c, FILE *f) { return fputc(c, f); }

WEAK int fputs(const char *restrict s, FILE *restrict f)
{
    if (!f || f->fd == 0)
        return EOF;
    while (*s)
        putchar(*s++);
    return 1;
}

WEAK size_t fwrite(const void *restrict p, size_t size, size_t n, FILE *restrict f)
{
    if (!f || f->fd == 0 || !size)
        return 0;
    const char *s = p;
    for (size_t i = 0, total = size * n; i < total; i++)
        putchar(s[i]);
    return n;
}

WEAK int fflush(FILE *f)
{
    (void)f;
    return 0;
}

WEAK void perror(const char *s)
{
    if (s && *s)
        printf("%s: ", s);
    puts(strerror(errno));
}

/* Input: stdin reads the bytes the host placed after __input_start (link.ld), once, in order. */
extern const uint32_t __input_start[]; /* link.ld: the input's length, then its bytes */

WEAK size_t input_size(void) { return __input_start[0]; }
WEAK const char *input_data(void) { return (const char *)(__input_start + 1); }

static size_t in_pos;
static int in_eof, in_back = EOF;

WEAK int fgetc(FILE *f)
{
    if (!f || f->fd != 0)
        return EOF;
    if (in_back != EOF) {
        int c = in_back;
        in_back = EOF;
        return c;
    }
    if (in_pos >= input_size()) {
        in_eof = 1;
        return EOF;
    }
    return (unsigned char)input_data()[in_pos++];
}
WEAK int getchar(void) { return fgetc(stdin); }
WEAK int getc(FILE *f) { return fgetc(f); }
WEAK int ungetc(int c, FILE *f)
{
    if (!f || f->fd != 0 || c == EOF || in_back != EOF)
        return EOF;
    in_back = (unsigned char)c;
    in_eof = 0;
    return in_back;
}
WEAK char *fgets(char *restrict s, int n, FILE *restrict f)
{
    int i = 0, c = 0;
    if (!f || f->fd != 0 || n <= 0)
        return NULL;
    while (i < n - 1 && (c = fgetc(f)) != EOF) {
        s[i++] = (char)c;
        if (c == '\n')
            break;
    }
    if (i == 0 && c == EOF)
        return NULL;
    s[i] = 0;
    return s;
}
WEAK size_t fread(void *restrict p, size_t size, size_t n, FILE *restrict f)
{
    if (!f || f->fd != 0 || !size)
        return 0;
    char *out = p;
    size_t got = 0, total = size * n;
    for (int c; got < total && (c = fgetc(f)) != EOF;)
        out[got++] = (char)c;
    return got / size;
}
WEAK int feof(FILE *f) { return f && f->fd == 0 && in_eof; }
WEAK int ferror(FILE *f)
{
    (void)f;
    return 0;
}

/* ---- assert ---- */

WEAK void __rt_assert_fail(const char *expr, const char *file, int line)
{
    printf("assertion failed: %s (%s:%d)\n", expr, file, line);
    exit(134);
}
