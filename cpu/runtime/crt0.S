/* Start-up code: the entry point _start is placed at address 0 by link.ld.
 * Sets sp to the top of RAM, clears .bss, calls main() and exits with its return value
 * (ecall with a7 = 93, a0 = code). */
    .section .text.start, "ax", @progbits
    .globl _start
    .type _start, @function
_start:
    .option push
    .option norelax
    la      sp, __stack_top
    .option pop
    la      t0, __bss_start
    la      t1, __bss_end
1:  bgeu    t0, t1, 2f
    sw      zero, 0(t0)
    addi    t0, t0, 4
    j       1b
2:  call    main
    li      a7, 93          /* exit(a0) */
    ecall
3:  ebreak                  /* not reached */
    j       3b
    .size _start, . - _start
