/* <stdio.h> of the machine's small libc (cpu/runtime/libc.c, runtime.c): console output and the
 * program's input. stdout and stderr both go to the console; stdin reads the input the host placed in
 * RAM (`cpu run --input`; runtime.h input_size/input_data), EOF after it. There are no files. */
#ifndef RV32_STDIO_H
#define RV32_STDIO_H

#include "runtime.h" /* putchar, puts, printf, vprintf; size_t, va_list, NULL */

#define EOF (-1)
#define BUFSIZ 256
#define SEEK_SET 0
#define SEEK_CUR 1
#define SEEK_END 2

typedef struct __rt_file FILE;
struct __rt_file {
    int fd; /* 0 stdin, 1 stdout, 2 stderr */
};
extern FILE *stdin, *stdout, *stderr;
#define stdin stdin
#define stdout stdout
#define stderr stderr

int sprintf(char *restrict buf, const char *restrict fmt, ...) __attribute__((format(printf, 2, 3)));
int snprintf(char *restrict buf, size_t size, const char *restrict fmt, ...) __attribute__((format(printf, 3, 4)));
int vsprintf(char *restrict buf, const char *restrict fmt, va_list ap) __attribute__((format(printf, 2, 0)));
int vsnprintf(char *restrict buf, size_t size, const char *restrict fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
int fprintf(FILE *restrict f, const char *restrict fmt, ...) __attribute__((format(printf, 2, 3)));
int vfprintf(FILE *restrict f, const char *restrict fmt, va_list ap) __attribute__((format(printf, 2, 0)));

int fputc(int c, FILE *f);
int putc(int c, FILE *f);
int fputs(const char *restrict s, FILE *restrict f);
size_t fwrite(const void *restrict p, size_t size, size_t n, FILE *restrict f);
int fflush(FILE *f);
void perror(const char *s);

/* stdin: the program's input, once, in order (EOF at its end; ungetc pushes back one byte). */
int getchar(void);
int getc(FILE *f);
int fgetc(FILE *f);
int ungetc(int c, FILE *f);
char *fgets(char *restrict s, int n, FILE *restrict f);
size_t fread(void *restrict p, size_t size, size_t n, FILE *restrict f);
int feof(FILE *f);
int ferror(FILE *f);

#endif
