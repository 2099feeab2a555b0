/* Start-up code of the MicroPython firmware (cpu/micropython.py), at address 0 (link.ld).
 *
 * Two ways in, told apart by the word fw_booted:
 * - cold (fw_booted = 0, the ELF as linked): clear .bss, boot MicroPython (fw_boot: the heap, the
 *   interpreter's state), then fall through to fw_resume;
 * - warm (fw_booted = 1): the RAM is a snapshot taken at fw_resume on the reference machine after a
 *   cold boot (cpu/micropython.py booted_image), so the boot is skipped.
 * fw_resume sets the stack pointer afresh (the boot's frames are dead: the snapshot zeroes them) and
 * calls fw_main, which runs the script in the input area and returns the exit status. */
    .section .text.start, "ax", @progbits
    .globl _start
    .type _start, @function
_start:
    .option push
    .option norelax
    la      sp, __stack_top
    .option pop
    la      t0, fw_booted
    lw      t0, 0(t0)
    bnez    t0, fw_resume
    la      t0, __bss_start
    la      t1, __bss_end
1:  bgeu    t0, t1, 2f
    sw      zero, 0(t0)
    addi    t0, t0, 4
    j       1b
2:  call    fw_boot
    .globl  fw_resume
fw_resume:
    .option push
    .option norelax
    la      sp, __stack_top
    .option pop
    call    fw_main
    li      a7, 93          /* exit(a0) */
    ecall
3:  ebreak                  /* not reached */
    j       3b
    .size _start, . - _start
