"""int4 weight-only GEMM (w4a16) in the AWQ/GPTQ form vLLM's fused_moe_kernel_gptq_awq uses:

    W[k, n] = (q[k, n] - z[k // GROUP_K, n]) * s[k // GROUP_K, n],   C = A @ W

A is fp16 or bf16; B holds int4 codes packed two a byte along K (even k in the low nibble), the
zero points eight an int32 along N, one scale and zero point per column and group of GROUP_K rows.
Each K tile (BK divides GROUP_K) unpacks its codes, dequantizes them into A's dtype and multiplies.
The group is 32 here (published kernels take 64 to 128): the interpreter reaches several groups.
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import registry
from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.kernels.registry import INT32_OFFSETS, Variant, register

GROUP_K = 32
OPERATION = Operation(weight="int4", b_scale="group", group_k=GROUP_K, zero="packed")
DTYPES = {torch.float16: (torch.float16, torch.float32), torch.bfloat16: (torch.bfloat16, torch.float32)}


@triton.jit
def w4a16_kernel(
    a_ptr, b_ptr, c_ptr, s_ptr, z_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_sk, stride_sn, stride_zk, stride_zn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        offs_k = k * BK + tl.arange(0, BK)
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        packed = tl.load(b_ptr + (offs_k // 2)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                         mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0)
        q = (packed.to(tl.int32) >> ((offs_k % 2) * 4)[:, None]) & 0xF
        group = (k * BK) // GROUP_K
        s = tl.load(s_ptr + group * stride_sk + offs_n * stride_sn, mask=offs_n < N, other=0.0)
        words = tl.load(z_ptr + group * stride_zk + (offs_n // 8) * stride_zn, mask=offs_n < N, other=0)
        z = (words >> ((offs_n % 8) * 4)) & 0xF
        w = ((q - z[None, :]).to(tl.float32) * s[None, :]).to(a_ptr.dtype.element_ty)
        # past K the codes read as 0 but (0 - z) * s is a weight: Inf for a huge scale, and 0 * Inf is NaN
        w = tl.where(offs_k[:, None] < K, w, 0.0)
        acc = tl.dot(a, w, acc)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


CONFIGS = {  # BK divides GROUP_K: one scale and zero row a K tile
    "cpu": (dict(BM=16, BN=16, BK=16, num_warps=1, num_stages=1), dict(BM=16, BN=32, BK=32, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=3), dict(BM=128, BN=64, BK=32, num_warps=4, num_stages=3)),
}


@registry.launcher("w4a16")
def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict, *,
           b_scale: torch.Tensor, b_zero: torch.Tensor) -> None:
    grid = (triton.cdiv(M, cfg["BM"]), triton.cdiv(N, cfg["BN"]))
    w4a16_kernel[grid](
        a, b, c, b_scale, b_zero, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        b_scale.stride(0), b_scale.stride(1), b_zero.stride(0), b_zero.stride(1),
        BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], GROUP_K=GROUP_K, **registry.options(cfg),
    )


register(Variant(name="w4a16", launch=launch, dtypes=DTYPES, precision="ieee", configs=CONFIGS,
                 origin="AWQ/GPTQ int4 weight-only GEMM (vLLM's fused_moe_kernel_gptq_awq), groups of 32",
                 requirements=INT32_OFFSETS, description="int4 codes two a byte along K, zero points eight an int32",
                 operation=OPERATION))
