/* Integer inner loops for the ESP32-S3 with its PIE (Processor Instruction Extensions) SIMD unit.
 * Each function returns or stores EXACT int32 sums; the float steps of every kernel stay in C++
 * (kernels/esp32s3/pie_table.cpp) in the scalar reference's order, so results are bit for bit the
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

/* ---- void mcullm_pie_q4g64_isums(const uint8_t* blocks, const int8_t* xq, int nb, int32_t* isum,
 *                                 const int8_t* consts) -----------------------------------------------
 * isum[b] = sum over j < 64 of (c_j - 8) * xq[64 b + j] for nb q4g64 blocks (quant/blocks.h: 34
 * bytes, f16 d then qs[32]; qs[j] low nibble = code of weight j, high nibble = code of weight j + 32).
 * The blocks have any alignment (34-byte stride): qs is read as three aligned chunks and realigned.
 * c * x and -8 * x are both accumulated, so ACCX holds the block's exact sum of (c - 8) * x.
 * xq 16-byte aligned; consts = 16 bytes of 0x0F then 16 bytes of -8, 16-byte aligned.
 * Register map: a2 = block (advances 34), a3 = xq (advances 64), a4 = nb, a5 = isum (advances 4),
 *               a6 = consts, a7 = &qs[0], a8 = &qs[31], a9 = the block's sum.
 *               q0 = 0x0F x 16, q1 = -8 x 16, q2 / q3 / q4 = the aligned chunks around qs,
 *               q6 / q7 = qs[0..15] / qs[16..31] (then their high nibbles), q2 / q3 = low-nibble
 *               codes, q5 = 16 activations. */
    .global mcullm_pie_q4g64_isums
    .type   mcullm_pie_q4g64_isums, @function
    .p2align 2
mcullm_pie_q4g64_isums:
    entry   a1, 32
    ssai    4                       /* SAR = 4 for ee.vsr.32 (high nibble -> low nibble) */
    ee_vld_128_ip 0, 6, 16          /* q0 <- 0x0F x 16 */
    ee_vld_128_ip 1, 6, 0           /* q1 <- -8 x 16 */
    loopnez a4, .Lq4_end
    addi    a7, a2, 2               /* a7 = &qs[0] */
    addi    a8, a2, 33              /* a8 = &qs[31] */
    ee_ld_128_usar_ip 4, 8, 0       /* q4 <- the chunk holding qs[31] (its SAR_BYTE is replaced next) */
    ee_ld_128_usar_ip 2, 7, 16      /* q2 <- the chunk holding qs[0]; SAR_BYTE <- &qs[0] & 15 */
    ee_vld_128_ip 3, 7, 0           /* q3 <- the chunk after it (== q4 when qs is aligned) */
    ee_src_q 6, 2, 3                /* q6 <- qs[0..15] */
    ee_src_q 7, 3, 4                /* q7 <- qs[16..31] */
    ee_zero_accx
    /* low nibbles: weights 0..31 */
    ee_andq 2, 6, 0                 /* q2 <- codes of weights 0..15 */
    ee_andq 3, 7, 0                 /* q3 <- codes of weights 16..31 */
    ee_vld_128_ip 5, 3, 16          /* q5 <- xq[0..15] */
    ee_vmulas_s8_accx 2, 5
    ee_vmulas_s8_accx_ld_ip 5, 3, 16, 1, 5   /* ... - 8 * xq, then q5 <- xq[16..31] */
    ee_vmulas_s8_accx 3, 5
    ee_vmulas_s8_accx_ld_ip 5, 3, 16, 1, 5   /* q5 <- xq[32..47] */
    /* high nibbles: weights 32..63 */
    ee_vsr_32 6, 6
    ee_vsr_32 7, 7
    ee_andq 6, 6, 0                 /* q6 <- codes of weights 32..47 */
    ee_andq 7, 7, 0                 /* q7 <- codes of weights 48..63 */
    ee_vmulas_s8_accx 6, 5
    ee_vmulas_s8_accx_ld_ip 5, 3, 16, 1, 5   /* q5 <- xq[48..63] */
    ee_vmulas_s8_accx 7, 5
    ee_vmulas_s8_accx 1, 5
    rur_accx_0 9
    s32i    a9, a5, 0               /* isum[b] */
    addi    a5, a5, 4
    addi    a2, a2, 34              /* next block */
.Lq4_end:
    retw
    .size   mcullm_pie_q4g64_isums, . - mcullm_pie_q4g64_isums

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
 * f16 -> f32: exponent 1..30: sign | ((h & 0x7FFF) << 13) + (112 << 23); exponent 0 (zero and
 * subnormals): (h & 0x3FF) * 2^-24 exactly, with the sign; exponent 31: sign | 0x7F800000 | mant << 13.
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
    extui   a10, a9, 10, 5
    addi    a10, a10, 1
    extui   a10, a10, 0, 5          /* (exponent + 1) mod 32: 1 for exponent 0, 0 for 31 */
    bltui   a10, 2, .Lq4e_special
    extui   a10, a9, 0, 15
    slli    a10, a10, 13
    add     a10, a10, a15
    extui   a9, a9, 15, 1
    slli    a9, a9, 31
    or      a10, a10, a9            /* the scale's float bits */
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
.Lq4e_special:                      /* a9 = h, a10 = 1 (exponent 0) or 0 (31); a13 is free until reloaded */
    extui   a13, a9, 0, 10          /* mantissa */
    bnez    a10, .Lq4e_sub
    slli    a10, a13, 13            /* exponent 31: inf / nan */
    movi    a13, 255
    slli    a13, a13, 23
    or      a10, a10, a13
    extui   a9, a9, 15, 1
    slli    a9, a9, 31
    or      a10, a10, a9
    l32i    a13, a2, 28
    j       .Lq4e_scaled
.Lq4e_sub:                          /* zero or subnormal: mantissa * 2^-12 * 2^-12, both exact */
    float.s f2, a13, 12
    movi    a13, 0x398
    slli    a13, a13, 20            /* 2^-12 */
    wfr     f3, a13
    mul.s   f2, f2, f3
    bbci    a9, 15, .Lq4e_sub_pos
    neg.s   f2, f2
.Lq4e_sub_pos:
    rfr     a10, f2
    l32i    a13, a2, 28
    j       .Lq4e_scaled
    .size   mcullm_pie_q4e_rows, . - mcullm_pie_q4e_rows
