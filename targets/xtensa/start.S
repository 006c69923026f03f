/* Xtensa lx106 on QEMU -M sim: QEMU resets the CPU after loading the ELF, so execution starts at
 * the lx106 reset vector 0x50000000 whatever the ELF entry says. The stub there jumps to _start,
 * which sets the stack, VECBASE and PS, then calls board_start (syscalls.c; call0 ABI).
 * Every exception ends the run with exit code 100 + EXCCAUSE instead of looping forever. */
    .section .ResetVector.text, "ax"
    .global _reset
_reset:
    j       1f
    .align  4
2:  .word   _start
1:  l32r    a0, 2b
    jx      a0

    .macro  exit_on_exception offset
    .org    \offset
    movi    a2, 1                   /* SYS_exit */
    rsr     a3, exccause
    addi    a3, a3, 100
    simcall
    .endm

    .section .VectorTable.text, "ax"
    .align  4096
    .global _vectors
_vectors:
    exit_on_exception 0x10          /* debug */
    exit_on_exception 0x20          /* NMI */
    exit_on_exception 0x30          /* kernel */
    exit_on_exception 0x50          /* user: illegal instruction, unaligned access, ... */
    exit_on_exception 0x70          /* double */

    .section .text.start, "ax"
    .literal_position
    .global _start
    .align  4
_start:
    movi    a1, __stack
    movi    a0, _vectors
    wsr     a0, vecbase
    movi    a0, 0x20                /* PS: UM=1, INTLEVEL=0, EXCM=0 */
    wsr     a0, ps
    rsync
    movi    a0, 0
    call0   board_start
3:  j       3b
