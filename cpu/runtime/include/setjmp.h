/* <setjmp.h> of the machine's small libc (cpu/runtime/libm/setjmp.S): a jmp_buf holds ra, sp and
 * the callee-saved registers s0-s11 (there are no floating-point registers and no signal mask). */
#ifndef RV32_SETJMP_H
#define RV32_SETJMP_H

typedef unsigned long jmp_buf[14];

int setjmp(jmp_buf env) __attribute__((returns_twice));
_Noreturn void longjmp(jmp_buf env, int value);

#endif
