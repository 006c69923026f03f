# Start-up for the ESP32-style LX7 on QEMU -M sim -cpu de233_fpu (windowed ABI, FPU), assembled
# by clang-22 -mcpu=esp32. LLVM's assembler: '#' comments, .long, .p2align, no simcall mnemonic.
# QEMU resets the CPU after loading the ELF, so the run starts at the reset vector 0xfe000000
# whatever the ELF entry says; the stub there jumps to _start in RAM.

    .macro  semihost                # SIMCALL (needs qemu -semihosting): a2 = call, a3.. = args
    .byte   0x00, 0x51, 0x00
    .endm

    .section .ResetVector.text, "ax"
    .global _reset
_reset:
    j       .Lreset_go
    .p2align 2
.Lreset_to:
    .long   _start
.Lreset_go:
    l32r    a0, .Lreset_to
    jx      a0

# The exception vectors (offsets from VECBASE as on the ESP32). The window handlers are the
# standard ones of the Xtensa ISA: a frame's a0..a3 go to the 16 bytes below the SP of the frame
# it called; the a4..a7 (call8) or a4..a11 (call12) of a frame go to the top of its own frame,
# found through its caller's SP, which is itself saved at [SP - 12].
    .section .VectorTable.text, "ax"
    .p2align 12
    .global _vectors
_vectors:
    .org    0x00                    # overflow, call4 frame
    s32e    a0, a5, -16
    s32e    a1, a5, -12
    s32e    a2, a5, -8
    s32e    a3, a5, -4
    rfwo
    .org    0x40                    # underflow, call4 frame
.Lunder4:
    l32e    a0, a5, -16
    l32e    a1, a5, -12
    l32e    a2, a5, -8
    l32e    a3, a5, -4
    rfwu
    .org    0x80                    # overflow, call8 frame
    s32e    a0, a9, -16
    l32e    a0, a1, -12             # the caller's SP
    s32e    a1, a9, -12
    s32e    a2, a9, -8
    s32e    a3, a9, -4
    s32e    a4, a0, -32
    s32e    a5, a0, -28
    s32e    a6, a0, -24
    s32e    a7, a0, -20
    rfwo
    .org    0xc0                    # underflow, call8 frame
.Lunder8:
    l32e    a1, a9, -12
    l32e    a0, a9, -16
    l32e    a7, a1, -12             # the caller's SP (a7 is loaded last)
    l32e    a2, a9, -8
    l32e    a4, a7, -32
    l32e    a3, a9, -4
    l32e    a5, a7, -28
    l32e    a6, a7, -24
    l32e    a7, a7, -20
    rfwu
    .org    0x100                   # overflow, call12 frame
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
    .org    0x140                   # underflow, call12 frame
.Lunder12:
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

# Any other exception ends the run: SYS_exit(100 + EXCCAUSE), as the lx106 target does
# (illegal instruction 100, unaligned access 109, FPU disabled 132), instead of hanging QEMU.
    .macro  fatal   offset
    .org    \offset
    movi    a2, 1
    rsr     a3, exccause
    addi    a3, a3, 100
    semihost
    .endm
    fatal   0x180                   # interrupt levels 2..5, debug, NMI, kernel: never expected
    fatal   0x1c0
    fatal   0x200
    fatal   0x240
    fatal   0x280
    fatal   0x2c0
    fatal   0x300
    .org    0x340                   # user exceptions
    wsr     a0, excsave1
    rsr     a0, exccause
    beqi    a0, 5, .Lalloca
    movi    a2, 1
    rsr     a3, exccause
    addi    a3, a3, 100
    semihost
# AllocaCause: MOVSP (LLVM moves SP with it for variable-length arrays) found the caller's
# registers spilled. Reload them with the underflow handler of the caller's call size, entered
# as RETW would (PS.OWB = the trapping WINDOWBASE); its RFWU then retries the MOVSP.
.Lalloca:
    rsr     a0, windowbase
    rotw    -1                      # the trapping frame's a0..a3 are now a4..a7
    rsr     a2, ps
    extui   a3, a2, 8, 4            # PS.OWB := the trapping frame's WINDOWBASE (in a0, now a4)
    xor     a3, a3, a4
    slli    a3, a3, 8
    xor     a2, a2, a3
    wsr     a2, ps
    rsync
    rsr     a4, excsave1            # the trapping frame's a0: bits 31:30 = its caller's call size
    bbci    a4, 31, .Lreload4
    rotw    -1
    bbci    a8, 30, .Lreload8
    rotw    -1
    j       .Lunder12
.Lreload4:
    j       .Lunder4
.Lreload8:
    j       .Lunder8
    fatal   0x3c0                   # double exception

# Variadic functions: LLVM 22 compiles va_start / va_arg wrongly for Xtensa, but its callers pass
# arguments by the GCC rules (a2..a7, a 64-bit value in an even pair, the rest on the stack). Each
# stub stores a2..a7 at the bottom of its frame (the top 32 bytes belong to the window spill
# area) and calls IMPL(saved a2..a7, the caller's stack arguments), which returns in a2.
    .macro  variadic name, impl
    .section .text.\name, "ax"
    .global \name
    .p2align 2
\name:
    entry   a1, 64
    s32i    a2, a1, 0
    s32i    a3, a1, 4
    s32i    a4, a1, 8
    s32i    a5, a1, 12
    s32i    a6, a1, 16
    s32i    a7, a1, 20
    mov     a10, a1
    addi    a11, a1, 64             # the caller's SP: its outgoing stack arguments
    j       .Lgo_\impl
    .p2align 2
.Lto_\impl:
    .long   \impl
.Lgo_\impl:
    l32r    a8, .Lto_\impl
    callx8  a8
    mov     a2, a10
    retw
    .endm
    variadic printf, lx7_printf
    variadic snprintf, lx7_snprintf
    # mcullm::Status::Error(Code, const char*, ...) and Status::prefix(const char*, ...): the
    # link wraps them (--wrap), so status.cpp's own definitions are never called.
    variadic __wrap__ZN6mcullm6Status5ErrorENS_4CodeEPKcz, lx7_status_error
    variadic __wrap__ZN6mcullm6Status6prefixEPKcz, lx7_status_prefix

    .section .text.start, "ax"
    .global _start
    .p2align 2
_start:
    j       .Lstart_go
    .p2align 2
.Lvecbase:
    .long   _vectors
.Lstack:
    .long   __stack
.Lcstart:
    .long   lx7_start
.Lstack1:
    .long   __stack1
.Lcore1:
    .long   lx7_second_core
.Lps:
    .long   0x00040020              # PS: WOE (window exceptions on), UM, INTLEVEL 0, EXCM 0
.Lstart_go:
    l32r    a0, .Lvecbase
    wsr     a0, vecbase
    movi    a0, 0
    wsr     a0, windowbase
    rsync
    movi    a0, 1
    wsr     a0, windowstart         # frame 0 is the only live one
    wsr     a0, cpenable            # coprocessor 0, the FPU (else add.s raises cause 32)
    rsync
    movi    a0, 0
    wur     a0, fcr                 # round to nearest even, no FP traps
    l32r    a0, .Lps
    wsr     a0, ps
    rsync
    movi    a0, 0
    wsr     a0, icount              # each core counts its own instructions (board.c, ICOUNT)
    movi    a0, 15
    wsr     a0, icountlevel
    isync
    rsr     a2, prid                # QEMU -M sim numbers its CPUs 0, 1, ... (-smp N): every one
    bnez    a2, .Lsecond            # starts here; core 1 becomes the worker, any other one sleeps
    l32r    a1, .Lstack
    movi    a0, 0                   # the end of every backtrace
    l32r    a4, .Lcstart
    callx4  a4                      # lx7_start (board.c) does not return
.Lhang:
    j       .Lhang
.Lsecond:
    bnei    a2, 1, .Lsleep
    l32r    a1, .Lstack1
    movi    a0, 0
    l32r    a4, .Lcore1
    callx4  a4                      # lx7_second_core (board.c) does not return
.Lsleep:
    waiti   15
    j       .Lsleep
