"""User kernels of microscaled GEMMs (OCP MX and NVFP4: e2m1 or e4m3 codes with a power-of-two E8M0 scale per 32
along K, or e2m1 codes with an e4m3 scale per 16 along K and one global alpha) in the styles people publish.
Storage: e2m1 codes two a byte along K, the even k in the low nibble, A (M, ceil(K/2)) and B (ceil(K/2), N), an odd
K's last high nibble not part of the matrix; E8M0 scales uint8, byte e is 2**(e - 127), byte 0 is 2**-127, byte 255
NaN; a_scale (M, ceil(K/g)) and b_scale (ceil(K/g), N), the last group partial. Each right kernel has a wrong twin
with one bug a real author could write, which only one kind of case shows:

  right                 wrong twin                                shown by
  mxfp4_weight_matmul   mxfp4_weight_matmul_scale_byte0_zero      bf16 A and a column of B whose scale bytes are all
                                                                  0 (weights 2**-127 times a code, tiny but not 0:
                                                                  the column reads 0; fp16 A rounds them to 0 anyway)
  mxfp8_mxfp4_matmul    mxfp8_mxfp4_matmul_b_scale_mask_missing   N not a multiple of BLOCK_N (b_scale read past its
                                                                  end; the columns read are never stored, C right)
  nvfp4_matmul          nvfp4_matmul_group_of_32                  K past 16 (k in [16, 32) scaled by group 0's
                                                                  scales: MXFP4's group of 32 kept in an NVFP4 port)

The dequantizing kernels mask the codes by the logical k < K, so an odd K's garbage nibble reads as code 0; the
dot_scaled kernel loads whole bytes and clears that nibble itself (0 times 6 * 2**127, an fp32 Inf, is NaN).
NVFP4's A and B are both packed, so their shapes give ceil(K/2), not K: nvfp4_matmul takes K = 2 * ceil(K/2), and
an odd K's garbage nibbles in A and B then multiply each other (_nvfp4 takes the logical K as `k`).
The bf16 tiles of mxfp4_weight_matmul and nvfp4_matmul need the suite's interpreter fixes (Triton 3.9's interpreter
multiplies bf16 bit patterns in tl.dot, triton-lang/triton#11584).
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import Operation, contract

MX_GROUP = 32  # E8M0 scale per 32 along K
NV_GROUP = 16  # e4m3 scale per 16 along K


@triton.jit
def _e2m1_bits_to_fp32(code):
    # code & 7 indexes 0, .5, 1, 1.5, 2, 3, 4, 6: from 2 on, exponent (em >> 1) - 1 and mantissa em & 1 are fp32's
    # bits em << 22 rebiased by 126; 1 (0.5) is subnormal in e2m1, 0 is zero; bit 3 the sign
    em = code & 0x7
    bits = tl.where(em >= 2, (em << 22) + (126 << 23), tl.where(em == 1, 126 << 23, 0))
    return (bits | ((code & 0x8) << 28)).to(tl.float32, bitcast=True)


@triton.jit
def _e8m0_to_fp32(s, BYTE0_AS_ZERO: tl.constexpr):
    s = s.to(tl.uint32)
    if BYTE0_AS_ZERO:  # BUG: the byte's exponent placed in fp32's, byte 0 then reads +0.0, not 2**-127
        bits = s << 23
    else:
        bits = tl.where(s == 0, 1 << 22, s << 23)  # 2**-127 is fp32's subnormal 0x00400000
    bits = tl.where(s == 0xFF, 0x7FC00000, bits)  # NaN, not the Inf the shift makes
    return bits.to(tl.float32, bitcast=True)


# --- gpt-oss's MXFP4 MoE weights through triton_kernels' matmul_ogs (triton_kernels/matmul_ogs_details/
# --- _matmul_ogs.py, numerics_details/mxfp.py's _upcast_from_mxfp), without the experts, as on GPUs without native
# --- MX dots: grouped tile order, the e2m1 weight tile upcast by bit arithmetic, its E8M0 scales loaded
# --- (BLOCK_K // 32, BLOCK_N) and broadcast over their 32 rows, the weights rounded to A's dtype before tl.dot

MXFP4_WEIGHT = dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=64, GROUP_M=4)  # BLOCK_K a multiple of 32


@triton.jit
def _mxfp4_weight_kernel(A, B, C, BScale, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                         stride_bsk, stride_bsn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr, BYTE0_AS_ZERO: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = min(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // group_size

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    offs_g = tl.arange(0, BLOCK_K // 32)
    mask_m = offs_m < M
    mask_n = offs_n < N
    num_groups = tl.cdiv(K, 32)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        mask_k = k < K  # the logical k: an odd K's last high nibble is masked off here
        a = tl.load(A + offs_m[:, None] * stride_am + k[None, :] * stride_ak, mask=mask_m[:, None] & mask_k[None, :],
                    other=0.0)
        packed = tl.load(B + (k // 2)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                         mask=mask_k[:, None] & mask_n[None, :], other=0)
        codes = (packed.to(tl.uint32) >> ((k % 2) * 4)[:, None]) & 0xF  # even k in the low nibble

        g = k0 // 32 + offs_g
        s = tl.load(BScale + g[:, None] * stride_bsk + offs_n[None, :] * stride_bsn,
                    mask=(g < num_groups)[:, None] & mask_n[None, :], other=127)
        scale = _e8m0_to_fp32(s, BYTE0_AS_ZERO)
        scale = tl.broadcast_to(tl.reshape(scale, (BLOCK_K // 32, 1, BLOCK_N)), (BLOCK_K // 32, 32, BLOCK_N))
        scale = tl.reshape(scale, (BLOCK_K, BLOCK_N))

        w = (_e2m1_bits_to_fp32(codes) * scale).to(a.dtype)
        acc = tl.dot(a, w, acc)

    c = acc.to(C.dtype.element_ty)
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, c, mask=mask_m[:, None] & mask_n[None, :])


def _mxfp4_weight(a, b, c, b_scale, byte0_as_zero=False):
    M, K = a.shape
    N = b.shape[1]
    assert a.dtype in (torch.bfloat16, torch.float16) and b.dtype == torch.uint8, "bf16/fp16 A, e2m1 codes for B"
    assert b.shape[0] == triton.cdiv(K, 2), "two e2m1 codes a byte along K"
    assert b_scale.dtype == torch.uint8 and tuple(b_scale.shape) == (triton.cdiv(K, MX_GROUP), N)
    assert c.shape == (M, N) and c.dtype in (torch.bfloat16, torch.float16, torch.float32)
    cfg = MXFP4_WEIGHT
    assert cfg["BLOCK_K"] % MX_GROUP == 0
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    _mxfp4_weight_kernel[grid](a, b, c, b_scale, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                               c.stride(0), c.stride(1), b_scale.stride(0), b_scale.stride(1), **cfg,
                               BYTE0_AS_ZERO=byte0_as_zero, num_warps=1, num_stages=1)


WEIGHT = dict(dtypes={torch.bfloat16: (torch.bfloat16, torch.float32), torch.float16: (torch.float16, torch.float32)},
              blocks=(16, 32, 64), operation=Operation(weight="e2m1", b_scale="group", group_k=32, scale_dtype="e8m0"))


@contract(**WEIGHT)
def mxfp4_weight_matmul(a, b, c, b_scale):
    _mxfp4_weight(a, b, c, b_scale)


@contract(**WEIGHT)
def mxfp4_weight_matmul_scale_byte0_zero(a, b, c, b_scale):
    _mxfp4_weight(a, b, c, b_scale, byte0_as_zero=True)


# --- Triton's tutorial 10 (python/tutorials/10-block-scaled-matmul.py) and the mxfp_matmul of its unit tests
# --- (python/test/unit/language/test_matmul.py): tl.dot_scaled on an e4m3 A tile of BLOCK_K and an e2m1 B tile of
# --- BLOCK_K // 2 bytes with their E8M0 scales, A's (BLOCK_M, BLOCK_K // 32), B's loaded transposed to
# --- (BLOCK_N, BLOCK_K // 32) as dot_scaled wants. The tutorial's TMA descriptors zero what lies out of bounds;
# --- here masks do, and a masked scale reads 127 (1.0). Triton 3.9's interpreter runs dot_scaled with any
# --- BLOCK_K a multiple of 32 (a scale shape must be exactly (rows, BLOCK_K // 32)); it upcasts both tiles to
# --- fp32 (byte 0 as 2**-127, byte 255 as NaN) and multiplies in fp32, with no bf16 rounding of the operands

MXFP8_MXFP4 = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=64)  # BLOCK_K a multiple of 32


@triton.jit
def _mxfp_matmul_kernel(A, B, C, AScale, BScale, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                        stride_cn, stride_asm, stride_ask, stride_bsk, stride_bsn, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, MASK_B_SCALE_N: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    pid_m = pid % num_pid_m
    pid_n = pid // num_pid_m
    offs_am = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_bn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_ak = tl.arange(0, BLOCK_K)
    offs_bk = tl.arange(0, BLOCK_K // 2)
    offs_scale_k = tl.arange(0, BLOCK_K // 32)
    mask_m = offs_am < M
    mask_n = offs_bn < N
    packed_k = tl.cdiv(K, 2)
    scale_k = tl.cdiv(K, 32)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        ak = k * BLOCK_K + offs_ak
        a = tl.load(A + offs_am[:, None] * stride_am + ak[None, :] * stride_ak,
                    mask=mask_m[:, None] & (ak < K)[None, :], other=0.0)
        bk = k * (BLOCK_K // 2) + offs_bk
        b = tl.load(B + bk[:, None] * stride_bk + offs_bn[None, :] * stride_bn,
                    mask=(bk < packed_k)[:, None] & mask_n[None, :], other=0)
        b = tl.where((2 * bk + 1 < K)[:, None], b, b & 0xF).to(tl.uint8)  # an odd K's last high nibble is not B's

        sk = k * (BLOCK_K // 32) + offs_scale_k
        scale_a = tl.load(AScale + offs_am[:, None] * stride_asm + sk[None, :] * stride_ask,
                          mask=mask_m[:, None] & (sk < scale_k)[None, :], other=127)
        if MASK_B_SCALE_N:
            b_scale_mask = mask_n[:, None] & (sk < scale_k)[None, :]
        else:  # BUG: only K's tail masked, the N tail's scales read past the end of b_scale
            b_scale_mask = (sk < scale_k)[None, :]
        scale_b = tl.load(BScale + offs_bn[:, None] * stride_bsn + sk[None, :] * stride_bsk, mask=b_scale_mask,
                          other=127)
        accumulator = tl.dot_scaled(a, scale_a, "e4m3", b, scale_b, "e2m1", accumulator)

    c = accumulator.to(C.dtype.element_ty)
    c_ptrs = C + stride_cm * offs_am[:, None] + stride_cn * offs_bn[None, :]
    tl.store(c_ptrs, c, mask=mask_m[:, None] & mask_n[None, :])


def _mxfp8_mxfp4(a, b, c, a_scale, b_scale, mask_b_scale_n=True):
    M, K = a.shape
    N = b.shape[1]
    assert a.dtype == torch.float8_e4m3fn and b.dtype == torch.uint8, "e4m3 A, e2m1 codes for B"
    assert b.shape[0] == triton.cdiv(K, 2), "two e2m1 codes a byte along K"
    assert a_scale.dtype == torch.uint8 and tuple(a_scale.shape) == (M, triton.cdiv(K, MX_GROUP))
    assert b_scale.dtype == torch.uint8 and tuple(b_scale.shape) == (triton.cdiv(K, MX_GROUP), N)
    assert c.shape == (M, N) and c.dtype in (torch.bfloat16, torch.float16, torch.float32)
    cfg = MXFP8_MXFP4
    assert cfg["BLOCK_K"] % MX_GROUP == 0
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    _mxfp_matmul_kernel[grid](a, b, c, a_scale, b_scale, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                              c.stride(0), c.stride(1), a_scale.stride(0), a_scale.stride(1), b_scale.stride(0),
                              b_scale.stride(1), **cfg, MASK_B_SCALE_N=mask_b_scale_n, num_warps=1, num_stages=1)


MX = dict(dtypes={torch.float8_e4m3fn: (torch.bfloat16, torch.float16, torch.float32)}, blocks=(16, 16, 64),
          operation=Operation(a_scale="group", b_scale="group", group_k=32, scale_dtype="e8m0", weight="e2m1"))


@contract(**MX)
def mxfp8_mxfp4_matmul(a, b, c, a_scale, b_scale):
    _mxfp8_mxfp4(a, b, c, a_scale, b_scale)


@contract(**MX)
def mxfp8_mxfp4_matmul_b_scale_mask_missing(a, b, c, a_scale, b_scale):
    _mxfp8_mxfp4(a, b, c, a_scale, b_scale, mask_b_scale_n=False)


# --- NVFP4 as FlashInfer's and TensorRT-LLM's reference fp4 GEMMs compute it (dequantize both operands, e2m1
# --- through a lookup and an e4m3 scale per 16 along K, then one matmul, times alpha), rewritten as one Triton
# --- kernel: both e2m1 tiles unpacked along K and decoded with a chain of tl.where, times their e4m3 scales
# --- gathered per element, rounded to bf16 (exact: a code times a scale has at most 6 significant bits and lies
# --- within 2**-10 and 2688), tl.dot into fp32, alpha last

NVFP4 = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=32)


@triton.jit
def _e2m1_to_fp32(code):
    em = (code & 0x7).to(tl.float32)  # 0-3: em / 2 (0, .5, 1, 1.5); 4, 5: em - 2 (2, 3); 6, 7: 2 * em - 8 (4, 6)
    mag = tl.where(em < 4, em * 0.5, tl.where(em < 6, em - 2.0, em * 2.0 - 8.0))
    return tl.where((code & 0x8) != 0, -mag, mag)


@triton.jit
def _nvfp4_kernel(A, B, C, AScale, BScale, alpha, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                  stride_cn, stride_asm, stride_ask, stride_bsk, stride_bsn, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_OF_32: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        mask_k = k < K  # the logical k: both operands' odd-K nibble is masked off
        if GROUP_OF_32:  # BUG: MXFP4's group of 32 kept in a port to NVFP4, whose scales come one per 16
            g = k // 32
        else:
            g = k // 16
        shift = (k % 2) * 4  # even k in the low nibble
        mask_a = mask_m[:, None] & mask_k[None, :]
        a = tl.load(A + offs_m[:, None] * stride_am + (k // 2)[None, :] * stride_ak, mask=mask_a, other=0)
        a = (a.to(tl.int32) >> shift[None, :]) & 0xF
        a_s = tl.load(AScale + offs_m[:, None] * stride_asm + g[None, :] * stride_ask, mask=mask_a, other=0.0)
        a = (_e2m1_to_fp32(a) * a_s.to(tl.float32)).to(tl.bfloat16)

        mask_b = mask_k[:, None] & mask_n[None, :]
        b = tl.load(B + (k // 2)[:, None] * stride_bk + offs_n[None, :] * stride_bn, mask=mask_b, other=0)
        b = (b.to(tl.int32) >> shift[:, None]) & 0xF
        b_s = tl.load(BScale + g[:, None] * stride_bsk + offs_n[None, :] * stride_bsn, mask=mask_b, other=0.0)
        b = (_e2m1_to_fp32(b) * b_s.to(tl.float32)).to(tl.bfloat16)

        acc = tl.dot(a, b, acc)

    acc = acc * alpha
    c = acc.to(C.dtype.element_ty)
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, c, mask=mask_m[:, None] & mask_n[None, :])


def _nvfp4(a, b, c, a_scale, b_scale, alpha, k=None, group_of_32=False):
    # both operands packed: their shapes give ceil(K/2), not K. Without `k` an odd K is taken for K + 1, its last
    # high nibbles (garbage in A and in B) multiplied in: give K, or keep K even (fp4 GEMM libraries want K % 32 == 0)
    M, N = a.shape[0], b.shape[1]
    K = 2 * a.shape[1] if k is None else k
    assert a.dtype == torch.uint8 and b.dtype == torch.uint8, "e2m1 codes, two a byte along K"
    assert a.shape[1] == triton.cdiv(K, 2) and b.shape[0] == triton.cdiv(K, 2)
    assert a_scale.dtype == torch.float8_e4m3fn and b_scale.dtype == torch.float8_e4m3fn, "e4m3 scales"
    assert tuple(a_scale.shape) == (M, triton.cdiv(K, NV_GROUP)) and tuple(b_scale.shape) == (a_scale.shape[1], N)
    assert c.shape == (M, N) and c.dtype in (torch.bfloat16, torch.float16, torch.float32)
    cfg = NVFP4
    grid = (triton.cdiv(M, cfg["BLOCK_M"]), triton.cdiv(N, cfg["BLOCK_N"]))
    _nvfp4_kernel[grid](a, b, c, a_scale, b_scale, float(alpha), M, N, K, a.stride(0), a.stride(1), b.stride(0),
                        b.stride(1), c.stride(0), c.stride(1), a_scale.stride(0), a_scale.stride(1),
                        b_scale.stride(0), b_scale.stride(1), **cfg, GROUP_OF_32=group_of_32, num_warps=1,
                        num_stages=1)


NV = dict(dtypes={torch.uint8: (torch.bfloat16, torch.float16, torch.float32)}, blocks=(16, 16, 32),
          operation=Operation(a_scale="group", b_scale="group", group_k=16, scale_dtype="e4m3", weight="e2m1",
                              alpha=True))


@contract(**NV)
def nvfp4_matmul(a, b, c, a_scale, b_scale, alpha):
    _nvfp4(a, b, c, a_scale, b_scale, alpha)


@contract(**NV)
def nvfp4_matmul_group_of_32(a, b, c, a_scale, b_scale, alpha):
    _nvfp4(a, b, c, a_scale, b_scale, alpha, group_of_32=True)
