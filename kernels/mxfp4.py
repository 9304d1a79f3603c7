"""Microscaled GEMM, MXFP8 x MXFP4 (OCP MX: gpt-oss's weights under fp8 activations):

    C[m, n] = sum over k of (A[m, k] * 2**(a_scale[m, k // 32] - 127)) * (B[k, n] * 2**(b_scale[k // 32, n] - 127))

A holds e4m3 codes, B e2m1 codes two a byte along K (even k in the low nibble); both scales are E8M0
bytes, one per 32 elements along K (byte 0 is 2**-127, 0xFF NaN). On the GPU each K tile of 64 goes
through `tl.dot_scaled` (native on Blackwell, emulated in bf16 on Hopper); on the interpreter one
configuration does the same and the other dequantizes each tile of 32 itself (decoding E8M0 and e2m1
by their bits) and multiplies in fp32, so the two paths are checked against each other too.

Triton's Hopper emulation of `tl.dot_scaled` decoded E8M0 byte 0 as 0 until triton-lang/triton#11624
(Triton 3.6 does): where a one-launch probe finds that, the DOT_SCALED configurations dequantize too,
as a kernel guarding against the known bug would.
"""

import functools

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import registry
from gemm_fuzz.kernels.dtypes import FP4_DTYPES
from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.kernels.registry import INT32_OFFSETS, Variant, register

GROUP = 32
OPERATION = Operation(a_scale="group", b_scale="group", group_k=GROUP, scale_dtype="e8m0", weight="e2m1")
DTYPES = {torch.float8_e4m3fn: FP4_DTYPES[torch.float8_e4m3fn]}


@triton.jit
def e8m0_to_fp32(s):
    """OCP E8M0: 2**(s - 127) by its bits; byte 0 is 2**-127 (an fp32 subnormal), 0xFF NaN."""
    bits = s.to(tl.int32) << 23
    bits = tl.where(s == 0, 0x00400000, bits)
    bits = tl.where(s == 255, 0x7FC00000, bits)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def e2m1_to_fp32(q):
    """A 4-bit e2m1 code (int32) as fp32: sign bit 3, exponent bits 1-2 (bias 1), mantissa bit 0."""
    e = (q >> 1) & 3
    m = q & 1
    normal = (((e + 126) << 23) | (m << 22)).to(tl.float32, bitcast=True)
    magnitude = tl.where(e == 0, m.to(tl.float32) * 0.5, normal)
    return tl.where((q & 8) != 0, -magnitude, magnitude)


@triton.jit
def mxfp4_kernel(
    a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_as_m, stride_as_k, stride_bs_k, stride_bs_n,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr, DOT_SCALED: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    groups = tl.cdiv(K, GROUP)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        offs_k = k * BK + tl.arange(0, BK)
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        if DOT_SCALED:
            offs_g = k * (BK // GROUP) + tl.arange(0, BK // GROUP)
            offs_kb = k * (BK // 2) + tl.arange(0, BK // 2)  # bytes of B: two codes each
            b = tl.load(b_ptr + offs_kb[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                        mask=(2 * offs_kb[:, None] < K) & (offs_n[None, :] < N), other=0)
            b = tl.where(2 * offs_kb[:, None] + 1 < K, b, b & 0xF)  # an odd K's last high nibble is not B's
            a_s = tl.load(as_ptr + offs_m[:, None] * stride_as_m + offs_g[None, :] * stride_as_k,
                          mask=(offs_m[:, None] < M) & (offs_g[None, :] < groups), other=127)
            b_s = tl.load(bs_ptr + offs_n[:, None] * stride_bs_n + offs_g[None, :] * stride_bs_k,
                          mask=(offs_n[:, None] < N) & (offs_g[None, :] < groups), other=127)
            acc = tl.dot_scaled(a, a_s, "e4m3", b, b_s, "e2m1", acc)
        else:
            packed = tl.load(b_ptr + (offs_k // 2)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                             mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0)
            q = (packed.to(tl.int32) >> ((offs_k % 2) * 4)[:, None]) & 0xF
            a_s = tl.load(as_ptr + offs_m[:, None] * stride_as_m + (offs_k // GROUP)[None, :] * stride_as_k,
                          mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=127)
            b_s = tl.load(bs_ptr + (offs_k // GROUP)[:, None] * stride_bs_k + offs_n[None, :] * stride_bs_n,
                          mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=127)
            a32 = a.to(tl.float32) * e8m0_to_fp32(a_s)
            b32 = e2m1_to_fp32(q) * e8m0_to_fp32(b_s)
            acc = tl.dot(a32, b32, acc, input_precision="ieee")
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _byte0_probe(a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr):
    m, k, kb = tl.arange(0, 16), tl.arange(0, 32), tl.arange(0, 16)
    a = tl.load(a_ptr + m[:, None] * 32 + k[None, :])
    b = tl.load(b_ptr + kb[:, None] * 16 + m[None, :])
    a_s = tl.load(as_ptr + m[:, None] + tl.arange(0, 1)[None, :])
    b_s = tl.load(bs_ptr + m[:, None] + tl.arange(0, 1)[None, :])
    tl.store(c_ptr + m[:, None] * 16 + m[None, :], tl.dot_scaled(a, a_s, "e4m3", b, b_s, "e2m1"))


@functools.cache
def dot_scaled_decodes_byte0(device: torch.device) -> bool:
    """Does tl.dot_scaled on this device read E8M0 byte 0 as 2**-127? A of 4s scaled by byte 0 times B of
    1s scaled by 1: each element is 32 * 4 * 2**-127 = 2**-120 (0 where byte 0 reads as 0)."""
    a = torch.full((16, 32), 4.0, device=device).to(torch.float8_e4m3fn)
    b = torch.full((16, 16), 0x22, dtype=torch.uint8, device=device)  # e2m1 1.0 twice
    a_scale = torch.zeros((16, 1), dtype=torch.uint8, device=device)
    b_scale = torch.full((16, 1), 127, dtype=torch.uint8, device=device)
    c = torch.empty((16, 16), device=device)
    _byte0_probe[(1,)](a, b, a_scale, b_scale, c)
    return bool((c == 2.0**-120).all())


# DOT_SCALED: through tl.dot_scaled where the device decodes E8M0 byte 0 as the specification says, else
# dequantized; dot_scaled takes whole groups a tile: BK a multiple of 32
CONFIGS = {
    "cpu": (dict(BM=16, BN=16, BK=32, DOT_SCALED=False, num_warps=1, num_stages=1),
            dict(BM=16, BN=32, BK=64, DOT_SCALED=True, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=64, BN=64, BK=64, DOT_SCALED=True, num_warps=4, num_stages=3),
             dict(BM=128, BN=64, BK=128, DOT_SCALED=True, num_warps=4, num_stages=3)),
}


@registry.launcher("mxfp4")
def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict, *,
           a_scale: torch.Tensor, b_scale: torch.Tensor) -> None:
    grid = (triton.cdiv(M, cfg["BM"]), triton.cdiv(N, cfg["BN"]))
    mxfp4_kernel[grid](
        a, b, c, a_scale, b_scale, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        a_scale.stride(0), a_scale.stride(1), b_scale.stride(0), b_scale.stride(1),
        BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], GROUP=GROUP,
        DOT_SCALED=cfg["DOT_SCALED"] and (a.device.type == "cpu" or dot_scaled_decodes_byte0(a.device)),
        **registry.options(cfg),
    )


register(Variant(name="mxfp4", launch=launch, dtypes=DTYPES, precision="ieee", configs=CONFIGS,
                 origin="OCP microscaling MXFP8 x MXFP4 (tl.dot_scaled, Triton's block-scaled matmul tutorial)",
                 requirements=INT32_OFFSETS, description="E8M0 scales per 32 along K; dot_scaled or dequantized",
                 operation=OPERATION))
