/* <errno.h> of the machine's small libc (cpu/runtime/libc.c): strtol and friends set ERANGE. */
#ifndef RV32_ERRNO_H
#define RV32_ERRNO_H

extern int errno;
#define errno errno

#define EPERM 1
#define ENOENT 2
#define EIO 5
#define EBADF 9
#define ENOMEM 12
#define EINVAL 22
#define ENOSPC 28
#define EDOM 33
#define ERANGE 34
#define EILSEQ 84
#define EOVERFLOW 75

#endif
