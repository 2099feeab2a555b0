/* <ctype.h> of the machine's small libc (cpu/runtime/libc.c): the "C" locale, ASCII; EOF and bytes
 * above 127 belong to no class. */
#ifndef RV32_CTYPE_H
#define RV32_CTYPE_H

int isalnum(int c);
int isalpha(int c);
int isblank(int c);
int iscntrl(int c);
int isdigit(int c);
int isgraph(int c);
int islower(int c);
int isprint(int c);
int ispunct(int c);
int isspace(int c);
int isupper(int c);
int isxdigit(int c);
int tolower(int c);
int toupper(int c);

#endif
