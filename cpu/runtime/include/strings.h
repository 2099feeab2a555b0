/* <strings.h> of the machine's small libc (cpu/runtime/libc.c). */
#ifndef RV32_STRINGS_H
#define RV32_STRINGS_H

#include <stddef.h>

int strcasecmp(const char *a, const char *b);
int strncasecmp(const char *a, const char *b, size_t n);

#endif
