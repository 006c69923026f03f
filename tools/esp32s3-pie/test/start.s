# Start-up for the kernel test on QEMU -M sim -cpu esp32s3 (tools/esp32s3-qemu): the core imported
# from Espressif's overlay has 64 MB of instruction RAM at 0x40000000 holding VECBASE (the window
# vectors at +0x000..0x17f, kernel/user exceptions at +0x300/+0x340, double at +0x3c0) and the reset
# vector at 0x40000400, where QEMU starts after loading the ELF. Windowed ABI; the window handlers
# are the Xtensa ISA's standard ones. Assembled by clang-22 (-mcpu=esp32): '#' comments.

    .macro  simcall_                # SIMCALL (QEMU -semihosting): a2 = call, a3.. = arguments
    .byte   0x00, 0x51, 0x00
    .endm

    .section .vectors, "ax"
    .global _vectors
_vectors:
    .org    0x00                    # window overflow, call4 frame
    s32e    a0, a5, -16
    s32e    a1, a5, -12
    s32e    a2, a5, -8
    s32e    a3, a5, -4
    rfwo
    .org    0x40                    # window underflow, call4 frame
    l32e    a0, a5, -16
    l32e    a1, a5, -12
    l32e    a2, a5, -8
    l32e    a3, a5, -4
    rfwu
    .org    0x80                    # window overflow, call8 frame
    s32e    a0, a9, -16
    l32e    a0, a1, -12
    s32e    a1, a9, -12
    s32e    a2, a9, -8
    s32e    a3, a9, -4
    s32e    a4, a0, -32
    s32e    a5, a0, -28
    s32e    a6, a0, -24
    s32e    a7, a0, -20
    rfwo
    .org    0xc0                    # window underflow, call8 frame
    l32e    a1, a9, -12
    l32e    a0, a9, -16
    l32e    a7, a1, -12
    l32e    a2, a9, -8
    l32e    a4, a7, -32
    l32e    a3, a9, -4
    l32e    a5, a7, -28
    l32e    a6, a7, -24
    l32e    a7, a7, -20
    rfwu
    .org    0x100                   # window overflow, call12 frame
    s32e    a0, a13, -16
    l32e    a0, a1, -12
    s32e    a1, a13, -12
    s32e    a2, a13, -8
    s32e    a3, a13, -4
    s32e    a4, a0, -48
    s32e    a5, a0, -44
    s32e    a6, a0, -40
    s32e    a7, a0, -36
    s32e    a8, a0, -32
    s32e    a9, a0, -28
    s32e    a10, a0, -24
    s32e    a11, a0, -20
    rfwo
    .org    0x140                   # window underflow, call12 frame
    l32e    a1, a13, -12
    l32e    a0, a13, -16
    l32e    a11, a1, -12
    l32e    a2, a13, -8
    l32e    a4, a11, -48
    l32e    a8, a11, -32
    l32e    a3, a13, -4
    l32e    a5, a11, -44
    l32e    a6, a11, -40
    l32e    a7, a11, -36
    l32e    a9, a11, -28
    l32e    a10, a11, -24
    l32e    a11, a11, -20
    rfwu
    .org    0x300                   # kernel exception: exit(100 + EXCCAUSE)
    j       .Lfault
    .org    0x340                   # user exception
    j       .Lfault
    .org    0x3c0                   # double exception
    j       .Lfault
    .org    0x400                   # reset vector
    j       .Lreset
    .p2align 2
.Lstart_addr:
    .long   _start
.Lreset:
    l32r    a0, .Lstart_addr
    jx      a0
.Lfault:
    rsr.exccause a3
    addi    a3, a3, 100
    movi    a2, 1
    simcall_

    .text
    .p2align 2
.Lconsts:
    .long   __stack
    .long   _vectors
    .long   __bss_start
    .long   __bss_end
    .long   main
    .global _start
_start:
    l32r    a1, .Lconsts            # SP
    l32r    a2, .Lconsts + 4
    wsr.vecbase a2
    movi    a2, 0xff
    wsr.cpenable a2                 # the FPU (and the other coprocessors)
    l32r    a2, .Lconsts + 8
    l32r    a3, .Lconsts + 12
    movi    a4, 0
.Lbss:
    bgeu    a2, a3, .Lbss_done
    s32i    a4, a2, 0
    addi    a2, a2, 4
    j       .Lbss
.Lbss_done:
    l32r    a2, .Lps
    wsr.ps  a2                      # WOE = 1, UM = 1, INTLEVEL = 0
    rsync
    l32r    a8, .Lconsts + 16
    callx8  a8                      # main() -> a10
    mov     a3, a10
    movi    a2, 1                   # SYS_exit
    simcall_
    .p2align 2
.Lps:
    .long   0x00040020

# void semihost_write(const char* s, int n): SYS_write to fd 1.
    .global semihost_write
    .p2align 2
semihost_write:
    entry   a1, 32
    mov     a5, a3
    mov     a4, a2
    movi    a3, 1
    movi    a2, 4
    simcall_
    retw

# uint32_t read_ccount(void)
    .global read_ccount
    .p2align 2
read_ccount:
    entry   a1, 32
    rsr.ccount a2
    retw
