/* <stdlib.h> of the machine's small libc (cpu/runtime/libc.c). */
#ifndef RV32_STDLIB_H
#define RV32_STDLIB_H

#include "runtime.h" /* exit; size_t, NULL */

#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
#define RAND_MAX 32767
#define MB_CUR_MAX 1

typedef struct { int quot, rem; } div_t;
typedef struct { long quot, rem; } ldiv_t;
typedef struct { long long quot, rem; } lldiv_t;

/* The heap is the RAM between the end of .bss and the stack (link.ld: __heap_start, __heap_end);
 * blocks are 8-byte aligned; malloc returns NULL when it is used up. free keeps a free list. */
void *malloc(size_t size);
void *calloc(size_t n, size_t size);
void *realloc(void *p, size_t size);
void free(void *p);

int atoi(const char *s);
long atol(const char *s);
long long atoll(const char *s);
long strtol(const char *restrict s, char **restrict end, int base);
unsigned long strtoul(const char *restrict s, char **restrict end, int base);
long long strtoll(const char *restrict s, char **restrict end, int base);
unsigned long long strtoull(const char *restrict s, char **restrict end, int base);

int abs(int x);
long labs(long x);
long long llabs(long long x);
div_t div(int a, int b);
ldiv_t ldiv(long a, long b);
lldiv_t lldiv(long long a, long long b);

/* The C standard's example generator: next = next * 1103515245 + 12345, rand() = next / 65536 % 32768. */
int rand(void);
void srand(unsigned seed);

void qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
void *bsearch(const void *key, const void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

void abort(void) __attribute__((noreturn)); /* exit code 134, like SIGABRT in a shell */
char *getenv(const char *name);             /* always NULL */

#endif
