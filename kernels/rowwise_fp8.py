"""Row-wise scaled fp8 GEMM in FBGEMM's form (fp8_gemm.py's non-persistent kernel):

    C = (A @ B) * a_scale[m] * b_scale[n]

e4m3 codes, one fp32 scale per row of A (per token) and per column of B (per channel), applied once
to the fp32 accumulator after the whole K loop.
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import registry
from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.kernels.registry import INT32_OFFSETS, Variant, register

OPERATION = Operation(a_scale="row", b_scale="col")
DTYPES = {torch.float8_e4m3fn: (torch.bfloat16, torch.float16, torch.float32)}


@triton.jit
def rowwise_fp8_kernel(
    a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_as, stride_bs,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    a_s = tl.load(as_ptr + offs_m * stride_as, mask=offs_m < M, other=0.0)
    b_s = tl.load(bs_ptr + offs_n * stride_bs, mask=offs_n < N, other=0.0)
    acc = acc * a_s[:, None] * b_s[None, :]
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


CONFIGS = {
    "cpu": (dict(BM=16, BN=16, BK=16, num_warps=1, num_stages=1), dict(BM=32, BN=16, BK=32, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=128, BN=128, BK=64, num_warps=8, num_stages=3), dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=3)),
}


@registry.launcher("rowwise_fp8")
def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict, *,
           a_scale: torch.Tensor, b_scale: torch.Tensor) -> None:
    grid = (triton.cdiv(M, cfg["BM"]), triton.cdiv(N, cfg["BN"]))
    rowwise_fp8_kernel[grid](
        a, b, c, a_scale, b_scale, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        a_scale.stride(0), b_scale.stride(0),
        BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], **registry.options(cfg),
    )


register(Variant(name="rowwise_fp8", launch=launch, dtypes=DTYPES, precision="ieee", configs=CONFIGS,
                 origin="FBGEMM's row-wise scaled fp8 GEMM (fp8_gemm.py)", requirements=INT32_OFFSETS,
                 description="per-row scales of A, per-column of B, applied after the K loop", operation=OPERATION))
