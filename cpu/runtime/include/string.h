/* <string.h> of the machine's small libc (cpu/runtime/runtime.c, libc.c). */
#ifndef RV32_STRING_H
#define RV32_STRING_H

#include "runtime.h" /* memset memcpy memmove memcmp strlen strcmp strcpy; size_t, NULL */

size_t strnlen(const char *s, size_t n);
int strncmp(const char *a, const char *b, size_t n);
char *strncpy(char *restrict dst, const char *restrict src, size_t n);
char *strcat(char *restrict dst, const char *restrict src);
char *strncat(char *restrict dst, const char *restrict src, size_t n);
char *strchr(const char *s, int c);
char *strrchr(const char *s, int c);
char *strstr(const char *hay, const char *needle);
char *strpbrk(const char *s, const char *accept);
size_t strspn(const char *s, const char *accept);
size_t strcspn(const char *s, const char *reject);
char *strtok(char *restrict s, const char *restrict delim);
char *strtok_r(char *restrict s, const char *restrict delim, char **restrict save);
char *strdup(const char *s);
char *strndup(const char *s, size_t n);
void *memchr(const void *s, int c, size_t n);
char *strerror(int err);
int strcoll(const char *a, const char *b); /* as strcmp (the "C" locale) */

#endif
