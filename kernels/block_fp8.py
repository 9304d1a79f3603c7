"""Block-scaled fp8 GEMM in DeepSeek-V3's form (vLLM's and SGLang's w8a8 block fp8 matmul):

    C[m, n] = sum over K groups g of (A[m, g] @ B[g, n]) * a_scale[m, g] * b_scale[g, n // group_n]

A holds e4m3 codes with one fp32 scale per row and group of `GROUP_K` along K (per token group), B
codes with one scale per GROUP_K x GROUP_N block. Each K tile lies in one group (BK divides
GROUP_K), so each partial dot is scaled by the pair of its group. K need not be a multiple of the
group: the last group is partial and masked. Group sizes here are 32 (the published kernels take
128): the interpreter reaches several groups along K and N at small sizes.
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import registry
from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.kernels.registry import INT32_OFFSETS, Variant, register

GROUP_K, GROUP_N = 32, 32
OPERATION = Operation(a_scale="group", b_scale="block", group_k=GROUP_K, group_n=GROUP_N)
DTYPES = {torch.float8_e4m3fn: (torch.bfloat16, torch.float16, torch.float32)}


@triton.jit
def block_fp8_kernel(
    a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_as_m, stride_as_k, stride_bs_k, stride_bs_n,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_K: tl.constexpr, GROUP_N: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        ks = k * BK + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        group = (k * BK) // GROUP_K
        a_s = tl.load(as_ptr + offs_m * stride_as_m + group * stride_as_k, mask=offs_m < M, other=0.0)
        b_s = tl.load(bs_ptr + group * stride_bs_k + (offs_n // GROUP_N) * stride_bs_n, mask=offs_n < N, other=0.0)
        acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


CONFIGS = {  # BK divides GROUP_K: one scale pair a K tile
    "cpu": (dict(BM=16, BN=16, BK=16, num_warps=1, num_stages=1), dict(BM=32, BN=32, BK=32, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=64, BN=32, BK=32, num_warps=4, num_stages=3), dict(BM=128, BN=32, BK=32, num_warps=4, num_stages=4)),
}


@registry.launcher("block_fp8")
def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict, *,
           a_scale: torch.Tensor, b_scale: torch.Tensor) -> None:
    grid = (triton.cdiv(M, cfg["BM"]), triton.cdiv(N, cfg["BN"]))
    block_fp8_kernel[grid](
        a, b, c, a_scale, b_scale, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        a_scale.stride(0), a_scale.stride(1), b_scale.stride(0), b_scale.stride(1),
        BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], GROUP_K=GROUP_K, GROUP_N=GROUP_N, **registry.options(cfg),
    )


register(Variant(name="block_fp8", launch=launch, dtypes=DTYPES, precision="ieee", configs=CONFIGS,
                 origin="DeepSeek-V3's block-scaled fp8 GEMM (vLLM/SGLang w8a8_block_fp8_matmul), groups of 32",
                 requirements=INT32_OFFSETS, description="1 x 32 scales of A, 32 x 32 of B, applied per K tile",
                 operation=OPERATION))
