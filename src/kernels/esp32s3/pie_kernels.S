/* Inner loops for the ESP32-S3 with its PIE (Processor Instruction Extensions) SIMD unit.
 * The dot products and i2_s codes return EXACT int32 sums (their float steps in C++,
 * kernels/esp32s3/pie_table.cpp); the q4g64 and q4e row kernels also do their float steps (f16
 * scales, mul.s, add.s) in the scalar reference's order, so results are bit for bit the
 * reference's (kernels.h). Windowed ABI (entry / retw): arguments in a2..a7, result in a2.
 *
 * PIE instructions are written through the macros of pie_encodings.inc (.byte sequences, since the
 * assemblers here do not know PIE): operands are numbers, `ee_vld_128_ip 0, 2, 16` is
 * `ee.vld.128.ip q0, a2, 16`. What the instructions used here do:
 *   ee.vld.128.ip q, a, imm      q <- 16 bytes at a & ~15 (the 4 low bits are ignored); a += imm
 *   ee.ld.128.usar.ip q, a, imm  the same, and SAR_BYTE <- a & 15
 *   ee.src.q qa, q0, q1          qa <- 16 bytes of the 32-byte {q1:q0} starting at byte SAR_BYTE
 *   ee.vmulas.s8.accx qx, qy     ACCX (40 bits) += sum over 16 lanes of s8 qx[i] * s8 qy[i]
 *   ee.vmulas.s8.accx.ld.ip q, a, imm, qx, qy   the same, then ee.vld.128.ip q, a, imm (the
 *                                multiply reads qx and qy before q is replaced)
 *   ee.zero.accx, rur.accx_0 a   ACCX <- 0; a <- ACCX[31:0]
 *   ee.andq / ee.orq qa, qx, qy  bitwise; ee.vsr.32 qa, qs: each 32-bit lane >> SAR (arithmetic;
 *                                the kernels mask the result, so a logical shift would do too)
 * Sums of int8 products here stay far below 2^31, so ACCX[31:0] is the exact int32 sum.
 * Comments are C style: the file goes through the C preprocessor (for the #include) and then
 * clang-22's assembler. */

#include "kernels/esp32s3/pie_encodings.inc"

    .text

/* ---- int32_t mcullm_pie_dot_s8(const int8_t* a, const int8_t* b, int n16) -----------------------
 * sum of a[i] * b[i] for i < 16 * n16; a and b 16-byte aligned.
 * The fused multiply-and-load (.LD.IP: the multiply reads q0 before the load replaces it) leaves
 * two instructions per 16 products; the last chunk is outside the loop, so nothing past a or b
 * is read.
 * Register map: a2 = a (advances), a3 = b (advances), a4 = n16 - 1 (loop count), a2 = result.
 *               q0 = 16 values of a, q1 = 16 values of b, ACCX = the running sum. */
    .global mcullm_pie_dot_s8
    .type   mcullm_pie_dot_s8, @function
    .p2align 2
mcullm_pie_dot_s8:
    entry   a1, 32
    ee_zero_accx
    ee_vld_128_ip 0, 2, 16          /* q0 <- a[0 .. 15] */
    addi    a4, a4, -1
    loopnez a4, .Ldot_end
    ee_vld_128_ip 1, 3, 16          /* q1 <- b[16i .. 16i+15] */
    ee_vmulas_s8_accx_ld_ip 0, 2, 16, 0, 1  /* ACCX += q0 . q1, then q0 <- a[16(i+1) ..] */
.Ldot_end:
    ee_vld_128_ip 1, 3, 16          /* the last 16 values of b */
    ee_vmulas_s8_accx 0, 1
    rur_accx_0 2
    retw
    .size   mcullm_pie_dot_s8, . - mcullm_pie_dot_s8

/* ---- int32_t mcullm_pie_dot_s8_ub(const int8_t* a, const int8_t* b, int n16) --------------------
 * The same with b NOT 16-byte aligned (b & 15 != 0): b is read as aligned chunks and realigned with
 * SAR_BYTE. Only chunks holding bytes of b[0 .. 16 n16) are read (n16 + 1 of them).
 * Register map: a2 = a (advances), a3 = b's aligned chunks (advances), a4 = n16, a2 = result.
 *               q0 = 16 values of a, q2 / q3 = two consecutive chunks around b's next 16 values,
 *               q1 = those 16 values realigned, ACCX = the running sum. */
    .global mcullm_pie_dot_s8_ub
    .type   mcullm_pie_dot_s8_ub, @function
    .p2align 2
mcullm_pie_dot_s8_ub:
    entry   a1, 32
    ee_zero_accx
    ee_ld_128_usar_ip 2, 3, 16      /* q2 <- the chunk holding b[0]; SAR_BYTE <- b & 15 */
    loopnez a4, .Lub_end
    ee_vld_128_ip 3, 3, 16          /* q3 <- the next chunk */
    ee_src_q 1, 2, 3                /* q1 <- b[16i .. 16i+15] */
    ee_vld_128_ip 0, 2, 16          /* q0 <- a[16i .. 16i+15] */
    ee_vmulas_s8_accx 0, 1
    ee_orq  2, 3, 3                 /* q2 <- q3 */
.Lub_end:
    rur_accx_0 2
    retw
    .size   mcullm_pie_dot_s8_ub, . - mcullm_pie_dot_s8_ub

/* ---- int32_t mcullm_pie_i2s_codes(const uint8_t* row, const int8_t* xq, int ngroups, const uint8_t* m03)
 * sum of code * xq over ngroups groups of 128 i2_s weights (quant/ternary.h: per 128 weights, byte
 * b holds weight b + 32k at bits 7-6 (k = 0) .. 1-0 (k = 3); code = weight + 1, 0..2). The caller
 * subtracts sum(xq) to get sum((code - 1) * xq). row, xq and m03 (16 bytes of 0x03) 16-byte aligned.
 * Per group: the 32 bytes are loaded once; field k = 3 is (byte & 3), then each ee.vsr.32 by 2
 * brings the next field down (bits of the neighbouring byte land above bit 1 and are masked off).
 * Each field's multiplies also load the next field's activations (.LD.IP: the multiply reads
 * its operands before the load replaces one), all inside the group: nothing past xq is read.
 * Register map: a2 = row (advances 32 per group), a3 = xq (walks the group's slices: 96, 112, 64,
 *               80, 32, 48, 0, 16), a4 = ngroups, a5 = m03, a2 = result.
 *               q0 / q1 = the group's bytes 0-15 / 16-31, shifted right 2 bits per field,
 *               q2 = 0x03 in every byte, q3 / q4 = the field's codes, q5 / q6 = activations. */
    .global mcullm_pie_i2s_codes
    .type   mcullm_pie_i2s_codes, @function
    .p2align 2
mcullm_pie_i2s_codes:
    entry   a1, 32
    ssai    2                       /* SAR = 2 for ee.vsr.32 */
    ee_vld_128_ip 2, 5, 0           /* q2 <- 0x03 x 16 */
    ee_zero_accx
    addi    a3, a3, 96              /* xq -> weights 96..127 of group 0 (field k = 3) */
    loopnez a4, .Li2s_end
    ee_vld_128_ip 0, 2, 16          /* q0 <- row bytes 0..15 of the group */
    ee_vld_128_ip 1, 2, 16          /* q1 <- row bytes 16..31 */
    /* k = 3: bits 1-0, weights 96..127 */
    ee_vld_128_ip 5, 3, 16          /* q5 <- xq[96..111] */
    ee_vld_128_ip 6, 3, -48         /* q6 <- xq[112..127]; xq -> 64 */
    ee_andq 3, 0, 2
    ee_andq 4, 1, 2
    ee_vmulas_s8_accx_ld_ip 5, 3, 16, 3, 5   /* ACCX += q3 . q5, then q5 <- xq[64..79] */
    ee_vmulas_s8_accx_ld_ip 6, 3, -48, 4, 6  /* ACCX += q4 . q6, then q6 <- xq[80..95]; xq -> 32 */
    ee_vsr_32 0, 0
    ee_vsr_32 1, 1
    /* k = 2: bits 3-2, weights 64..95 */
    ee_andq 3, 0, 2
    ee_andq 4, 1, 2
    ee_vmulas_s8_accx_ld_ip 5, 3, 16, 3, 5   /* q5 <- xq[32..47] */
    ee_vmulas_s8_accx_ld_ip 6, 3, -48, 4, 6  /* q6 <- xq[48..63]; xq -> 0 */
    ee_vsr_32 0, 0
    ee_vsr_32 1, 1
    /* k = 1: bits 5-4, weights 32..63 */
    ee_andq 3, 0, 2
    ee_andq 4, 1, 2
    ee_vmulas_s8_accx_ld_ip 5, 3, 16, 3, 5   /* q5 <- xq[0..15] */
    ee_vmulas_s8_accx_ld_ip 6, 3, 208, 4, 6  /* q6 <- xq[16..31]; xq -> 96 of the next group */
    ee_vsr_32 0, 0
    ee_vsr_32 1, 1
    /* k = 0: bits 7-6, weights 0..31 */
    ee_andq 3, 0, 2
    ee_andq 4, 1, 2
    ee_vmulas_s8_accx 3, 5
    ee_vmulas_s8_accx 4, 6
.Li2s_end:
    rur_accx_0 2
    retw
    .size   mcullm_pie_i2s_codes, . - mcullm_pie_i2s_codes

/* ---- f16 -> f32 bits (quant/f16.h's f16_to_f32), shared by the q4g64 and q4e kernels ----------------
 * exponent 1..30: sign | ((h & 0x7FFF) << 13) + (112 << 23); exponent 0 (zero and subnormals):
 * (h & 0x3FF) * 2^-24 exactly, with the sign; exponent 31: sign | 0x7F800000 | mant << 13.
 * f16_bits: out <- the float bits of h (h is clobbered), bias = 112 << 23; exponents 0 and 31 branch
 * (beqz: its reach is 2 KB, bltui's only 128 bytes) to \special, where the caller places f16_special
 * (out of the loop) followed by its jump back to the instruction after f16_bits. */
    .macro f16_bits h, out, bias, special
    extui   \out, \h, 10, 5
    addi    \out, \out, 1
    extui   \out, \out, 1, 4        /* (exponent + 1) >> 1 mod 16: 0 for exponents 0 and 31 only */
    beqz    \out, \special
    extui   \out, \h, 0, 15
    slli    \out, \out, 13
    add     \out, \out, \bias
    extui   \h, \h, 15, 1
    slli    \h, \h, 31
    or      \out, \out, \h          /* the float bits */
    .endm
/* f16_special: out <- the float bits of h for exponents 0 and 31; clobbers h, tmp, fa and fb. */
    .macro f16_special h, out, tmp, fa, fb
    extui   \tmp, \h, 0, 10         /* mantissa */
    bbci    \h, 10, 1f               /* the exponent's low bit: 0 for exponent 0, 1 for 31 */
    slli    \out, \tmp, 13          /* exponent 31: inf / nan */
    movi    \tmp, 255
    slli    \tmp, \tmp, 23
    or      \out, \out, \tmp
    extui   \h, \h, 15, 1
    slli    \h, \h, 31
    or      \out, \out, \h
    j       2f
1:                                  /* zero or subnormal: mantissa * 2^-12 * 2^-12, both exact */
    float.s \fa, \tmp, 12
    movi    \tmp, 0x398
    slli    \tmp, \tmp, 20          /* 2^-12 */
    wfr     \fb, \tmp
    mul.s   \fa, \fa, \fb
    bbci    \h, 15, 3f
    neg.s   \fa, \fa
3:
    rfr     \out, \fa
2:
    .endm

/* ---- void mcullm_pie_q4g64_rows(const BlockRows* a), void mcullm_pie_q8_0_rows(const BlockRows* a) ----
 * 34-byte blocks (quant/blocks.h: f16 d then qs[32]) times int8 activations, a->rows rows of a->nb
 * (>= 1) blocks, in the reference's order (matvec_blocks_ref, shared by matvec_q4g64_ref and
 * matvec_q8_0_ref):
 *   acc[b % 8] = acc[b % 8] + (float)isum_b * (f16_to_f32(d_b) * xs[b]), acc starting at +0 (three
 *   separate mul.s / mul.s / add.s: the C is built with -ffp-contract=off), isum_b the block's exact
 *   integer sum (below), then y[r] = fold_lanes8(acc): (4+0, 5+1, 6+2, 7+3), then (0+2, 1+3), then
 *   0+1. The operands of each mul.s / add.s are in the order of clang-22's code for the reference
 *   (the same for both instantiations): IEEE sums and products commute except for which NaN's
 *   payload a NaN + NaN keeps.
 *   q4g64: 64 weights per block, qs[j] low nibble = code of weight j, high nibble = code of weight
 *   j + 32; isum_b = sum over j < 64 of (c_j - 8) * xq[64 b + j]: c * x and -8 * x are both
 *   accumulated, so ACCX holds the exact sum of (c - 8) * x.
 *   q8_0: 32 weights per block, qs[j] = weight j; isum_b = sum over j < 32 of qs[j] * xq[32 b + j].
 * The struct (BlockRows in pie_table.cpp), word offsets: 0 blocks (row 0's first block, any
 * alignment), 4 y, 8 rows (>= 1), 12 row_bytes, 16 nb, 20 xq (16-byte aligned), 24 xs, 28 consts
 * (q4g64 only: 16 bytes of 0x0F then 16 bytes of -8, 16-byte aligned).
 * The eight lanes are eight float registers: the block loop is unrolled eight times (one lane per
 * copy, block_step), each copy leaving the loop after the row's last block. Rows of one block (the
 * dim-wide q4g64 matrices of small models) have their own loop: y = +0 + the product, no lanes to
 * zero or fold (adding a +0 lane returns the other operand, NaNs included, and no lane can be -0).
 * qs is read as the aligned chunks holding qs[0] and qs[31] (three at most) and realigned (block_qs).
 * Register map: a2 = a, a3 = the row's first block, a4 = &y[r], a5 = rows left, a6 = block (advances
 *               34), a7 = xq (advances 64 / 32), a8 = xs (advances 4), a9 / a10 = scratch (the sum,
 *               the f16, the float bits), a11 = blocks left, a12 = &qs[0], a13 = &qs[31],
 *               a14 = 112 << 23, a15 = scratch (f16_special).
 *               f0..f7 = the lanes, f8 = (float)isum, then the product, f9 = the scale d, then d * xs,
 *               f10 = xs[b] (and f16_special's scratch), f11 = +0 (one-block rows).
 *               One-block rows: a3 = row_bytes - 34.
 *               q0 = 0x0F x 16, q1 = -8 x 16 (q4g64), q2 / q3 / q4 = the aligned chunks around qs,
 *               q6 / q7 = qs[0..15] / qs[16..31] (q4g64: then their high nibbles), q2 / q3 =
 *               low-nibble codes (q4g64), q5 = 16 activations. */
    .macro block_qs                 /* q6 / q7 <- qs[0..15] / qs[16..31] of the block at a6 */
    addi    a12, a6, 2              /* &qs[0] */
    addi    a13, a6, 33             /* &qs[31] */
    ee_ld_128_usar_ip 4, 13, 0      /* q4 <- the chunk holding qs[31] (its SAR_BYTE is replaced next) */
    ee_ld_128_usar_ip 2, 12, 16     /* q2 <- the chunk holding qs[0]; SAR_BYTE <- &qs[0] & 15 */
    ee_vld_128_ip 3, 12, 0          /* q3 <- the chunk after it (== q4 when qs is aligned) */
    ee_src_q 6, 2, 3                /* q6 <- qs[0..15] */
    ee_src_q 7, 3, 4                /* q7 <- qs[16..31] */
    .endm
    .macro q4g64_isum               /* a9 <- the block's isum; xq += 64 */
    block_qs
    ee_zero_accx
    /* low nibbles: weights 0..31 */
    ee_andq 2, 6, 0                 /* q2 <- codes of weights 0..15 */
    ee_andq 3, 7, 0                 /* q3 <- codes of weights 16..31 */
    ee_vld_128_ip 5, 7, 16          /* q5 <- xq[0..15] */
    ee_vmulas_s8_accx 2, 5
    ee_vmulas_s8_accx_ld_ip 5, 7, 16, 1, 5   /* ... - 8 * xq, then q5 <- xq[16..31] */
    ee_vmulas_s8_accx 3, 5
    ee_vmulas_s8_accx_ld_ip 5, 7, 16, 1, 5   /* q5 <- xq[32..47] */
    /* high nibbles: weights 32..63 */
    ee_vsr_32 6, 6
    ee_vsr_32 7, 7
    ee_andq 6, 6, 0                 /* q6 <- codes of weights 32..47 */
    ee_andq 7, 7, 0                 /* q7 <- codes of weights 48..63 */
    ee_vmulas_s8_accx 6, 5
    ee_vmulas_s8_accx_ld_ip 5, 7, 16, 1, 5   /* q5 <- xq[48..63] */
    ee_vmulas_s8_accx 7, 5
    ee_vmulas_s8_accx 1, 5
    rur_accx_0 9
    .endm
    .macro q8_0_isum                /* a9 <- the block's isum; xq += 32 */
    block_qs
    ee_zero_accx
    ee_vld_128_ip 5, 7, 16          /* q5 <- xq[0..15] */
    ee_vmulas_s8_accx_ld_ip 5, 7, 16, 6, 5   /* ACCX += qs[0..15] . q5, then q5 <- xq[16..31] */
    ee_vmulas_s8_accx 7, 5
    rur_accx_0 9
    .endm
    .macro block_step kind, id, dst, src  /* \dst <- \src + the block's product */
    \kind\()_isum
    float.s f8, a9, 0               /* (float)isum */
    l8ui    a9, a6, 0
    l8ui    a10, a6, 1
    addi    a6, a6, 34              /* next block */
    slli    a10, a10, 8
    or      a9, a9, a10             /* a9 = h, the block's f16 scale */
    f16_bits a9, a10, a14, .L\kind\()_special\id
.L\kind\()_scaled\id:
    wfr     f9, a10
    lsi     f10, a8, 0
    addi    a8, a8, 4
    mul.s   f9, f9, f10             /* d * xs[b] */
    mul.s   f8, f9, f8              /* (float)isum * (d * xs[b]) */
    add.s   \dst, \src, f8
    addi    a11, a11, -1
    .endm
    .macro block_special kind, id
.L\kind\()_special\id:
    f16_special a9, a10, a15, f9, f10
    j       .L\kind\()_scaled\id
    .endm

    .macro block_rows kind, cols    /* mcullm_pie_\kind\()_rows, blocks of \cols weights */
    .global mcullm_pie_\kind\()_rows
    .type   mcullm_pie_\kind\()_rows, @function
    .p2align 2
mcullm_pie_\kind\()_rows:
    entry   a1, 32
    .ifc \kind, q4g64
    ssai    4                       /* SAR = 4 for ee.vsr.32 (high nibble -> low nibble) */
    l32i    a9, a2, 28
    ee_vld_128_ip 0, 9, 16          /* q0 <- 0x0F x 16 */
    ee_vld_128_ip 1, 9, 0           /* q1 <- -8 x 16 */
    .endif
    movi    a14, 56
    slli    a14, a14, 24            /* 112 << 23: f16 exponent bias -> f32 exponent bias */
    l32i    a3, a2, 0
    l32i    a4, a2, 4
    l32i    a5, a2, 8
    l32i    a11, a2, 16
    addi    a9, a11, -1
    beqz    a9, .L\kind\()_one
.L\kind\()_row:
    movi    a9, 0
    wfr     f0, a9
    wfr     f1, a9
    wfr     f2, a9
    wfr     f3, a9
    wfr     f4, a9
    wfr     f5, a9
    wfr     f6, a9
    wfr     f7, a9
    mov     a6, a3
    l32i    a11, a2, 16
    l32i    a7, a2, 20
    l32i    a8, a2, 24
.L\kind\()_blocks:
    .irp    id, 0, 1, 2, 3, 4, 5, 6
    block_step \kind, \id, f\id, f\id
    beqz    a11, .L\kind\()_fold
    .endr
    block_step \kind, 7, f7, f7
    bnez    a11, .L\kind\()_blocks
.L\kind\()_fold:                    /* operands in the order clang-22 gives the reference (NaN payloads) */
    add.s   f0, f4, f0
    add.s   f1, f5, f1
    add.s   f2, f6, f2
    add.s   f3, f7, f3
    add.s   f0, f0, f2
    add.s   f1, f1, f3
    add.s   f0, f0, f1
    ssi     f0, a4, 0
    addi    a4, a4, 4
    l32i    a10, a2, 12
    add     a3, a3, a10             /* the next row */
    addi    a5, a5, -1
    bnez    a5, .L\kind\()_row
    retw
.L\kind\()_one:                     /* one block per row: y = +0 + the product, the fold's adds of +0
                                       lanes change nothing (no lane holds -0) */
    movi    a9, 0
    wfr     f11, a9                 /* +0 */
    mov     a6, a3
    l32i    a3, a2, 12
    addi    a3, a3, -34             /* row_bytes - 34: from past the block to the next row's */
    l32i    a7, a2, 20
    l32i    a8, a2, 24
.L\kind\()_row1:
    block_step \kind, 8, f0, f11
    ssi     f0, a4, 0
    addi    a4, a4, 4
    addi    a7, a7, -\cols          /* the same activations */
    addi    a8, a8, -4
    add     a6, a6, a3
    addi    a5, a5, -1
    bnez    a5, .L\kind\()_row1
    retw
    .irp    id, 0, 1, 2, 3, 4, 5, 6, 7, 8
    block_special \kind, \id
    .endr
    .size   mcullm_pie_\kind\()_rows, . - mcullm_pie_\kind\()_rows
    .endm

    block_rows q4g64, 64
    block_rows q8_0, 32

/* ---- void mcullm_pie_q4e_rows(const Q4eRows* a) -------------------------------------------------
 * esp32-ai int4 (quant/q4e.h): two codes per byte, the even column in the low nibble. For a->rows
 * rows and a->ngroups (>= 1) consecutive groups of 32 * a->n16 columns each, starting at an even
 * column, in the reference's order (matvec_q4e_q8_ref):
 *   y[r] = y[r] + (float)isum_g * scale_g, group after group, each a mul.s then an add.s (no madd.s:
 *   the C is built with -ffp-contract=off), isum_g = sum over the group of (c_j - 8) * x_j (exact),
 *   scale_g = the f16 at scales + 2 g (two bytes, any alignment) as a float, as f16_to_f32 gives it.
 * The struct (pie_table.cpp), word offsets: 0 codes (row 0's first code byte, any alignment),
 * 4 scales (row 0's first group's f16), 8 y, 12 rows (>= 1), 16 row_bytes, 20 scale_stride (bytes
 * between rows' scales), 24 ngroups, 28 n16, 32 x2, 36 consts, 40 from_zero (nonzero: the sums start
 * at +0 instead of y[r], which is then not read), 44 xsum8 (per group: 8 * the sum of its x).
 * isum_g is sum(c_j * x_j) - xsum8[g]: the codes' -8 costs one subtraction per group, not two
 * multiplies per 16 columns.
 * x2: the activations deinterleaved by the caller, even columns at x2[0..255] and odd columns at
 * x2[256..511] (16-byte aligned; the first group's first pair at x2[0] / x2[256]). consts as for
 * q4g64 (0x0F x 16; the -8 is unused). Each 16 code bytes are read as the aligned chunks that hold their
 * first and last byte, so nothing past the last group's codes is read. Each chunk's multiplies load
 * the next activations (.LD.IP), so a row reads one chunk of x2 past its columns (at most x2[256],
 * inside the 512-byte buffer).
 * f16 -> f32: f16_bits / f16_special.
 * Register map: a2 = a, a3 / a4 = the row's codes / scales, a5 = &y[r], a6 = rows left,
 *               a7 = groups left, a8 = x2 (advances 16 per chunk), a9 / a10 = scratch (the sum,
 *               the f16, the float bits), a11 = the group's scale (advances 2), a12 = codes
 *               (advances 16 per chunk), a13 = n16, a14 = xsum8 (advances 4), a15 = 112 << 23.
 *               f0 = y[r]'s running sum, f1 = (float)isum, then its product, f2 = the scale,
 *               f3 = scratch.
 *               q0 = 0x0F x 16, q3 / q4 = the chunks holding the first / last code
 *               byte, then q3 = the 16 code bytes, then their high-nibble codes; q5 = low-nibble
 *               codes, q6 = 16 even-column activations, q7 = 16 odd-column activations. */
    .global mcullm_pie_q4e_rows
    .type   mcullm_pie_q4e_rows, @function
    .p2align 2
mcullm_pie_q4e_rows:
    entry   a1, 32
    ssai    4                       /* SAR = 4 for ee.vsr.32 */
    l32i    a9, a2, 36
    ee_vld_128_ip 0, 9, 16          /* q0 <- 0x0F x 16 */
    movi    a15, 56
    slli    a15, a15, 24            /* 112 << 23: f16 exponent bias -> f32 exponent bias */
    l32i    a3, a2, 0
    l32i    a4, a2, 4
    l32i    a5, a2, 8
    l32i    a6, a2, 12
.Lq4e_row:
    l32i    a9, a2, 40
    movi    a10, 0
    wfr     f0, a10                 /* +0 when from_zero, ... */
    bnez    a9, .Lq4e_zero
    lsi     f0, a5, 0               /* ... from_zero is 0: the running sum y[r] */
.Lq4e_zero:
    l32i    a8, a2, 32
    l32i    a7, a2, 24
    l32i    a13, a2, 28
    l32i    a14, a2, 44
    mov     a12, a3
    mov     a11, a4
    ee_vld_128_ip 6, 8, 256         /* q6 <- the first 16 even-column activations; x2 -> the odd ones */
.Lq4e_group:
    ee_zero_accx
    loopnez a13, .Lq4e_chunk_end
    addi    a9, a12, 15             /* a9 = the chunk's last code byte */
    ee_ld_128_usar_ip 4, 9, 0       /* q4 <- the aligned chunk holding it */
    ee_ld_128_usar_ip 3, 12, 16     /* q3 <- the aligned chunk holding the first; SAR_BYTE; codes += 16 */
    ee_src_q 3, 3, 4                /* q3 <- the 16 code bytes */
    ee_andq 5, 3, 0                 /* q5 <- even-column codes */
    ee_vsr_32 3, 3
    ee_andq 3, 3, 0                 /* q3 <- odd-column codes */
    ee_vmulas_s8_accx_ld_ip 7, 8, -240, 5, 6  /* ACCX += even codes . q6, then q7 <- 16 odd-column
                                                 activations; x2 -> the next even ones */
    ee_vmulas_s8_accx_ld_ip 6, 8, 256, 3, 7   /* ACCX += odd codes . q7, then q6 <- the next even
                                                 ones; x2 -> their odd ones */
.Lq4e_chunk_end:
    rur_accx_0 9
    l32i    a10, a14, 0
    addi    a14, a14, 4
    sub     a9, a9, a10             /* isum = sum(c * x) - 8 * sum(x) */
    float.s f1, a9, 0               /* (float)isum */
    l8ui    a9, a11, 0
    l8ui    a10, a11, 1
    addi    a11, a11, 2
    slli    a10, a10, 8
    or      a9, a9, a10             /* a9 = h, the group's f16 scale */
    f16_bits a9, a10, a15, .Lq4e_special
.Lq4e_scaled:
    wfr     f2, a10
    mul.s   f1, f1, f2
    add.s   f0, f0, f1
    addi    a7, a7, -1
    bnez    a7, .Lq4e_group
    ssi     f0, a5, 0
    addi    a5, a5, 4
    l32i    a10, a2, 16
    add     a3, a3, a10             /* the next row's codes */
    l32i    a10, a2, 20
    add     a4, a4, a10             /* and scales */
    addi    a6, a6, -1
    bnez    a6, .Lq4e_row
    retw
.Lq4e_special:                      /* a13 (n16) is free until reloaded */
    f16_special a9, a10, a13, f2, f3
    l32i    a13, a2, 28
    j       .Lq4e_scaled
    .size   mcullm_pie_q4e_rows, . - mcullm_pie_q4e_rows

/* ---- void mcullm_pie_scores_s8(const int8_t* q, const int8_t* keys, int stride, int n, int n16, int32_t* out)
 * out[t] = sum of q[i] * keys[t * stride + i] for i < 16 * n16, t < n: the attention scores' exact
 * int32 sums, one call per head instead of one per position. q 16-byte aligned; keys and stride
 * any (each row is realigned with SAR_BYTE, as mcullm_pie_dot_s8_ub). Reads the aligned chunks
 * holding keys[t * stride .. t * stride + 16 n16) (n16 + 1 of them per row): the caller makes sure
 * they exist (a head narrower than 16 n16 is padded with zeros in q and reads into the next bytes).
 * Register map: a2 = q, a3 = keys (row t), a4 = stride, a5 = n (rows left), a6 = n16, a7 = out,
 *               a8 = q's walk, a9 = row t's chunks (advances), a10 = the sum.
 *               q0 = 16 values of q, q1 = 16 values of the row realigned, q2 / q3 = two chunks. */
    .global mcullm_pie_scores_s8
    .type   mcullm_pie_scores_s8, @function
    .p2align 2
mcullm_pie_scores_s8:
    entry   a1, 32
    beqz    a5, .Lsc_done
.Lsc_row:
    mov     a8, a2
    mov     a9, a3
    ee_zero_accx
    ee_ld_128_usar_ip 2, 9, 16      /* q2 <- the chunk holding the row's first key; SAR_BYTE <- its offset */
    loopnez a6, .Lsc_end
    ee_vld_128_ip 3, 9, 16          /* q3 <- the next chunk */
    ee_src_q 1, 2, 3                /* q1 <- 16 keys */
    ee_vld_128_ip 0, 8, 16          /* q0 <- 16 values of q */
    ee_vmulas_s8_accx 0, 1
    ee_orq  2, 3, 3                 /* q2 <- q3 */
.Lsc_end:
    rur_accx_0 10
    s32i    a10, a7, 0
    addi    a7, a7, 4
    add     a3, a3, a4
    addi    a5, a5, -1
    bnez    a5, .Lsc_row
.Lsc_done:
    retw
    .size   mcullm_pie_scores_s8, . - mcullm_pie_scores_s8

/* ---- void mcullm_fdiv_by(float* x, int n, uint32_t d_bits) ------------------------------------
 * x[i] = x[i] / d for i < n, each quotient exactly what one __divsf3 gives (the ESP32 toolchain's
 * divide, libgcc's ieee754-sf.S with the FPU's divide steps): the same instructions on the same
 * values, with the steps that read only the divisor done once. Not PIE: FPU instructions only.
 * Per element (f1 = x[i]): nexp01.s f2, f1; f0 = 0 + (-f2) y0; f7 = mkdadj(d, x); f8 = -f2 + f4 f0;
 * f0 += f8 y2; f2 = f2 + f4 f0 with f2 negated; addexpm.s f0, f7; f9 = addexp(y3, f7); divn.s f0, f2, f9.
 * Register map: a2 = x (advances), a3 = n, a4 = d's bits.
 *               f10 = y0 (div0.s d), f11 = y2, f12 = y3 (the refined reciprocals), f4 = nexp01.s d,
 *               f13 = d; f0 .. f9 per element as in __divsf3. */
    .global mcullm_fdiv_by
    .type   mcullm_fdiv_by, @function
    .p2align 2
mcullm_fdiv_by:
    entry   a1, 32
    wfr     f13, a4
    div0.s  f10, f13                /* y0 */
    nexp01.s f4, f13
    const.s f5, 1
    maddn.s f5, f4, f10
    mov.s   f6, f10
    maddn.s f6, f5, f6              /* y1 */
    const.s f5, 1
    maddn.s f5, f4, f6
    maddn.s f6, f5, f6              /* y2 */
    mov.s   f11, f6
    const.s f3, 1
    maddn.s f3, f4, f6
    maddn.s f6, f3, f6              /* y3 */
    mov.s   f12, f6
    loopnez a3, .Lfdiv_end
    lsi     f1, a2, 0
    nexp01.s f2, f1
    const.s f0, 0
    neg.s   f8, f2
    maddn.s f0, f8, f10
    mov.s   f7, f13
    mkdadj.s f7, f1
    maddn.s f8, f4, f0
    maddn.s f0, f8, f11
    neg.s   f2, f2
    maddn.s f2, f4, f0
    addexpm.s f0, f7
    mov.s   f9, f12
    addexp.s f9, f7
    divn.s  f0, f2, f9
    ssi     f0, a2, 0
    addi    a2, a2, 4
.Lfdiv_end:
    retw
    .size   mcullm_fdiv_by, . - mcullm_fdiv_by

/* ---- void mcullm_fill_u32(uint32_t* x, int n, uint32_t v) ---------------------------------------
 * x[i] = v for i < n: eight stores a loop step (the two-stage head's -inf fill of a 32k vocabulary;
 * the compiled loop takes 3 instructions a value, this 1.125). Not PIE: base ISA only.
 * Register map: a2 = x (advances), a3 = n, a4 = v, a5 = loop counts. */
    .global mcullm_fill_u32
    .type   mcullm_fill_u32, @function
    .p2align 2
mcullm_fill_u32:
    entry   a1, 32
    srli    a5, a3, 3
    loopnez a5, .Lfill8_end
    s32i    a4, a2, 0
    s32i    a4, a2, 4
    s32i    a4, a2, 8
    s32i    a4, a2, 12
    s32i    a4, a2, 16
    s32i    a4, a2, 20
    s32i    a4, a2, 24
    s32i    a4, a2, 28
    addi    a2, a2, 32
.Lfill8_end:
    extui   a5, a3, 0, 3
    loopnez a5, .Lfill1_end
    s32i    a4, a2, 0
    addi    a2, a2, 4
.Lfill1_end:
    retw
    .size   mcullm_fill_u32, . - mcullm_fill_u32

/* ---- mc_expf in registers -------------------------------------------------------------------------
 * expf_f0: f3 = mc_expf(f0) (core/fmath.h), its operations one by one on the same values (so the same
 * bits), for the loops below, which load its constants once:
 *   f14 = 1.44269504088896341f, f13 = 0.693145751953125f, f12 = 1.428606765330187045e-06f,
 *   f11 .. f7 = 1/5040, 1/720, 1/120, 1/24, 1/6, f6 = 0.5f, f5 = 1.0f,
 *   a10 / a11 = the bits of 88.72283935546875f / -103.972084045410f (range checks on the bits: within a
 *   sign, float order is unsigned order, and a NaN's bits are above both limits).
 * Scratch: a5 .. a8, f1, f2. Numeric labels: the macro is expanded in more than one loop. */
.macro expf_f0
    rfr     a5, f0
    bltz    a5, 2f
    bgeu    a10, a5, 4f             /* (the rare cases sit here: conditional branches reach 128 bytes) */
    movi    a7, 255                 /* above 88.72...: +inf, or a NaN (returned as it is) */
    slli    a7, a7, 23
    mov.s   f3, f0
    bltu    a7, a5, 3f
    wfr     f3, a7
    j       9f
2:  bgeu    a11, a5, 5f
    slli    a7, a5, 1               /* below -103.97...: +0, or a NaN (its bits shifted left are above these) */
    movi    a8, 255
    slli    a8, a8, 24
    mov.s   f3, f0
    bltu    a8, a7, 3f
    movi    a7, 0
    wfr     f3, a7
3:  j       9f
4:  mul.s   f1, f0, f14             /* t = x log2(e) >= 0: n = (float)(int)(t + 0.5) */
    add.s   f1, f1, f6
    trunc.s a6, f1, 0
    float.s f1, a6, 0
    j       6f
5:  mul.s   f1, f0, f14             /* t < 0 (or -0): n = -(float)(int)(0.5 - t), e = (int)n */
    sub.s   f1, f6, f1
    trunc.s a6, f1, 0
    float.s f1, a6, 0
    neg.s   f1, f1
    neg     a6, a6
6:  mul.s   f2, f1, f13
    sub.s   f2, f0, f2
    mul.s   f3, f1, f12
    sub.s   f2, f2, f3              /* r = (x - n ln2_hi) - n ln2_lo */
    mul.s   f3, f11, f2
    add.s   f3, f3, f10
    mul.s   f3, f3, f2
    add.s   f3, f3, f9
    mul.s   f3, f3, f2
    add.s   f3, f3, f8
    mul.s   f3, f3, f2
    add.s   f3, f3, f7
    mul.s   f3, f3, f2
    add.s   f3, f3, f6
    mul.s   f3, f3, f2
    add.s   f3, f3, f5
    mul.s   f3, f3, f2
    add.s   f3, f3, f5              /* p, Horner from 1/5040 */
    extui   a7, a6, 31, 1
    add     a7, a6, a7
    srai    a7, a7, 1               /* e1 = e / 2, toward zero */
    sub     a8, a6, a7              /* e2 = e - e1 */
    addi    a7, a7, 127
    slli    a7, a7, 23
    wfr     f1, a7
    mul.s   f3, f3, f1              /* p 2^e1 */
    addi    a8, a8, 127
    slli    a8, a8, 23
    wfr     f1, a8
    mul.s   f3, f3, f1              /* then times 2^e2 */
9:
.endm

/* Loads expf_f0's constants from k: [0] (the caller's), [1] .. [10] the floats above, [11] / [12] the two
 * limits (as floats: their bits are what a10 / a11 get). */
.macro expf_constants k
    lsi     f14, \k, 4
    lsi     f13, \k, 8
    lsi     f12, \k, 12
    lsi     f11, \k, 16
    lsi     f10, \k, 20
    lsi     f9, \k, 24
    lsi     f8, \k, 28
    lsi     f7, \k, 32
    lsi     f6, \k, 36
    lsi     f5, \k, 40
    l32i    a10, \k, 44
    l32i    a11, \k, 48
.endm

/* ---- uint32_t mcullm_softmax_exps(float* x, int n, const float* k) -----------------------------
 * softmax's middle pass: x[i] = mc_expf(x[i] - max), returning (the bits of) their sum in increasing
 * i. k[0] = max, then expf_f0's constants. Not PIE: FPU instructions only.
 * Register map: a2 = x (advances), a3 = n, a4 = k; f15 = max, f4 = the sum, f0 = the argument. */
    .global mcullm_softmax_exps
    .type   mcullm_softmax_exps, @function
    .p2align 2
mcullm_softmax_exps:
    entry   a1, 32
    lsi     f15, a4, 0
    expf_constants a4
    movi    a7, 0
    wfr     f4, a7                  /* sum = +0 */
    loopnez a3, .Lexps_end
    lsi     f0, a2, 0
    sub.s   f0, f0, f15             /* the argument x[i] - max */
    expf_f0
    ssi     f3, a2, 0
    add.s   f4, f4, f3
    addi    a2, a2, 4
.Lexps_end:
    rfr     a2, f4
    retw
    .size   mcullm_softmax_exps, . - mcullm_softmax_exps

/* ---- void mcullm_silu_denominators(const float* x, float* den, int n, const float* k) -----------
 * den[i] = 1.0f + mc_expf(-x[i]): mc_silu's divisor (k as for mcullm_softmax_exps; k[0] unused).
 * Register map: a2 = x, a3 = den (advance), a4 = n, a9 = k. */
    .global mcullm_silu_denominators
    .type   mcullm_silu_denominators, @function
    .p2align 2
mcullm_silu_denominators:
    entry   a1, 32
    mov     a9, a5
    expf_constants a9
    loopnez a4, .Lsden_end
    lsi     f0, a2, 0
    neg.s   f0, f0
    expf_f0
    add.s   f3, f5, f3
    ssi     f3, a3, 0
    addi    a2, a2, 4
    addi    a3, a3, 4
.Lsden_end:
    retw
    .size   mcullm_silu_denominators, . - mcullm_silu_denominators

/* ---- void mcullm_silu_gate(float* gate, const float* den, const float* up, int n) --------------
 * gate[i] = (gate[i] / den[i]) * up[i]: mc_silu's division (__divsf3's FPU steps, libgcc's
 * ieee754-sf.S, in its order and registers) and the SwiGLU product.
 * Register map: a2 = gate, a3 = den, a4 = up (advance), a5 = n. */
    .global mcullm_silu_gate
    .type   mcullm_silu_gate, @function
    .p2align 2
mcullm_silu_gate:
    entry   a1, 32
    loopnez a5, .Lsgate_end
    lsi     f1, a2, 0               /* dividend */
    lsi     f2, a3, 0               /* divisor */
    div0.s  f3, f2
    nexp01.s f4, f2
    const.s f5, 1
    maddn.s f5, f4, f3
    mov.s   f6, f3
    mov.s   f7, f2
    nexp01.s f2, f1
    maddn.s f6, f5, f6
    const.s f5, 1
    const.s f0, 0
    neg.s   f8, f2
    maddn.s f5, f4, f6
    maddn.s f0, f8, f3
    mkdadj.s f7, f1
    maddn.s f6, f5, f6
    maddn.s f8, f4, f0
    const.s f3, 1
    maddn.s f3, f4, f6
    maddn.s f0, f8, f6
    neg.s   f2, f2
    maddn.s f6, f3, f6
    maddn.s f2, f4, f0
    addexpm.s f0, f7
    addexp.s f6, f7
    divn.s  f0, f2, f6
    lsi     f9, a4, 0
    mul.s   f0, f0, f9
    ssi     f0, a2, 0
    addi    a2, a2, 4
    addi    a3, a3, 4
    addi    a4, a4, 4
.Lsgate_end:
    retw
    .size   mcullm_silu_gate, . - mcullm_silu_gate

/* ---- void mcullm_values_q8_12(const ValuesQ8Block* a) --------------------------------------------
 * Twelve outputs of the int8 attention values: out[i] = sum over t < n, in increasing t, of
 * (att[t] * vscale[t]) * (float)v[t][i], from +0 (attn_values_q8_ref's order per output), the twelve
 * sums in f0 .. f11 while every position passes. Two values a load: l16si, then sext (the low byte)
 * and srai (the high one); the caller checks that the rows are 2-byte aligned. Not PIE: base ISA + FPU.
 * a: [0] att, [4] values (row 0 at the first of the twelve), [8] vscales, [12] stride (bytes),
 *    [16] the scales' stride (bytes), [20] n, [24] out.
 * Register map: a3 = the row's values, a4 = att, a5 = vscales (advance), a6 / a7 = the strides,
 *               a10 = n, a8 / a9 = two values; f12 = att[t], f13 = the row's weight, f14 / f15 = products. */
.macro value_pair off, fa, fb
    l16si   a8, a3, \off
    sext    a9, a8, 7
    srai    a8, a8, 8
    float.s f14, a9, 0
    mul.s   f14, f13, f14
    add.s   \fa, \fa, f14
    float.s f15, a8, 0
    mul.s   f15, f13, f15
    add.s   \fb, \fb, f15
.endm
    .global mcullm_values_q8_12
    .type   mcullm_values_q8_12, @function
    .p2align 2
mcullm_values_q8_12:
    entry   a1, 32
    l32i    a4, a2, 0
    l32i    a3, a2, 4
    l32i    a5, a2, 8
    l32i    a6, a2, 12
    l32i    a7, a2, 16
    l32i    a10, a2, 20
    movi    a8, 0
    wfr     f0, a8
    wfr     f1, a8
    wfr     f2, a8
    wfr     f3, a8
    wfr     f4, a8
    wfr     f5, a8
    wfr     f6, a8
    wfr     f7, a8
    wfr     f8, a8
    wfr     f9, a8
    wfr     f10, a8
    wfr     f11, a8
    loopnez a10, .Lv12_end
    lsi     f12, a4, 0
    lsi     f13, a5, 0
    mul.s   f13, f12, f13           /* att[t] * vscale[t] */
    value_pair 0, f0, f1
    value_pair 2, f2, f3
    value_pair 4, f4, f5
    value_pair 6, f6, f7
    value_pair 8, f8, f9
    value_pair 10, f10, f11
    addi    a4, a4, 4
    add     a5, a5, a7
    add     a3, a3, a6
.Lv12_end:
    l32i    a8, a2, 24
    ssi     f0, a8, 0
    ssi     f1, a8, 4
    ssi     f2, a8, 8
    ssi     f3, a8, 12
    ssi     f4, a8, 16
    ssi     f5, a8, 20
    ssi     f6, a8, 24
    ssi     f7, a8, 28
    ssi     f8, a8, 32
    ssi     f9, a8, 36
    ssi     f10, a8, 40
    ssi     f11, a8, 44
    retw
    .size   mcullm_values_q8_12, . - mcullm_values_q8_12

/* The int8 rounding loops' last steps: the integer in a6 clamped to [a11, a10] = [-127, 127], 0 (a12)
 * when \fr (the value it came from) is a NaN, stored at q (a5); x (a2) and q advance. */
.macro int8_store_next fr
    max     a6, a6, a11
    min     a6, a6, a10
    un.s    b1, \fr, \fr
    movt    a6, a12, b1
    s8i     a6, a5, 0
    addi    a2, a2, 4
    addi    a5, a5, 1
.endm

/* ---- void mcullm_round_to_int8(const float* x, int n, uint32_t id_bits, int8_t* q) ----------------
 * q[i] = round_to_int8(x[i] * id) (quant/blocks.h): round half away from zero as round_half_away
 * computes it (a = |v|, r = (float)(int)(a + 0.5f), one less when a < r - 0.5f, the sign back), then
 * [-127, 127] and 0 for a NaN, branch-free: the same float operations on the same values. |v| >= 2^23
 * (the reference returns v itself) and infinities truncate to at least 2^23 (or saturate) and clamp
 * to +-127 like it. Not PIE: base ISA + FPU (booleans, MINMAX).
 * Register map: a2 = x, a5 = q (advance), a3 = n, a10 / a11 = 127 / -127, a12 = 0;
 *               f15 = id, f14 = 0.5; f0 = v, f1 = a, f2 / f3 = r and r - 0.5. */
    .global mcullm_round_to_int8
    .type   mcullm_round_to_int8, @function
    .p2align 2
mcullm_round_to_int8:
    entry   a1, 32
    wfr     f15, a4
    movi    a8, 63
    slli    a8, a8, 24              /* 0x3f000000: 0.5f */
    wfr     f14, a8
    movi    a10, 127
    movi    a11, -127
    movi    a12, 0
    loopnez a3, .Lr8_end
    lsi     f0, a2, 0
    mul.s   f0, f0, f15             /* v = x * id */
    abs.s   f1, f0
    add.s   f2, f1, f14
    trunc.s a6, f2, 0               /* (int)(a + 0.5f) */
    float.s f2, a6, 0               /* r */
    sub.s   f3, f2, f14
    olt.s   b0, f1, f3              /* a < r - 0.5f: one less */
    addi    a7, a6, -1
    movt    a6, a7, b0
    rfr     a8, f0
    srai    a8, a8, 31              /* -1 when v's sign bit is set */
    xor     a6, a6, a8
    sub     a6, a6, a8              /* the sign back */
    int8_store_next f0
.Lr8_end:
    retw
    .size   mcullm_round_to_int8, . - mcullm_round_to_int8

/* ---- uint32_t mcullm_q4e_abs_max(const float* x, int n, uint32_t m_bits) ------------------------
 * q4e_activations_max (quant/q4e.cpp): from m (its 1e-8f), m = a wherever a = |x[i]| > m (a NaN
 * compares false and is skipped, as there); returns m's bits. Register map: a2 = x, a3 = n; f15 = m,
 * f0 = a. */
    .global mcullm_q4e_abs_max
    .type   mcullm_q4e_abs_max, @function
    .p2align 2
mcullm_q4e_abs_max:
    entry   a1, 32
    wfr     f15, a4
    loopnez a3, .Lq4m_end
    lsi     f0, a2, 0
    abs.s   f0, f0
    olt.s   b0, f15, f0             /* m < a */
    movt.s  f15, f0, b0
    addi    a2, a2, 4
.Lq4m_end:
    rfr     a2, f15
    retw
    .size   mcullm_q4e_abs_max, . - mcullm_q4e_abs_max

/* ---- void mcullm_q4e_round_int8(const float* x, int n, uint32_t inv_bits, int8_t* q) --------------
 * q4e_quantize_activations_with's loop: v = x[i] * inv, r = (v + 1.5 * 2^23) - 1.5 * 2^23 (round half
 * to even, as round_half_even computes it), then [-127, 127] and 0 for a NaN r, as saturate_to_int:
 * the same float operations on the same values. An r beyond int32 (huge v, infinities) truncates
 * saturated and clamps to +-127 like the reference's comparisons. Base ISA + FPU.
 * Register map: a2 = x, a5 = q (advance), a3 = n, a10 / a11 = 127 / -127, a12 = 0;
 *               f15 = inv, f14 = 1.5 * 2^23; f0 = v, f1 = r. */
    .global mcullm_q4e_round_int8
    .type   mcullm_q4e_round_int8, @function
    .p2align 2
mcullm_q4e_round_int8:
    entry   a1, 32
    wfr     f15, a4
    movi    a8, 0x4b4
    slli    a8, a8, 20              /* 0x4b400000: 12582912.0f */
    wfr     f14, a8
    movi    a10, 127
    movi    a11, -127
    movi    a12, 0
    loopnez a3, .Lq4r_end
    lsi     f0, a2, 0
    mul.s   f0, f0, f15             /* v = x * inv */
    add.s   f1, f0, f14
    sub.s   f1, f1, f14             /* r = (v + magic) - magic */
    trunc.s a6, f1, 0
    int8_store_next f1
.Lq4r_end:
    retw
    .size   mcullm_q4e_round_int8, . - mcullm_q4e_round_int8
