"""Batched GEMM, as torch.bmm takes it: A (Bt, M, K), B (Bt, K, N), C (Bt, M, N), any strides, a batch
stride of 0 for an operand every problem shares. Grid axis 0 walks the batch (CUDA allows 2**31 - 1
programs there; axes 1 and 2 stop at 65535), axis 1 the tiles of one problem in row-major order; the
batch offset is computed in int64, so a batch past 2**31 elements in all stays addressable."""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import registry
from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.kernels.registry import SAME_DTYPE, Variant, register

DTYPES = {**SAME_DTYPE, torch.float16: (torch.float16, torch.float32), torch.bfloat16: (torch.bfloat16, torch.float32)}


@triton.jit
def bmm_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_az, stride_am, stride_ak, stride_bz, stride_bk, stride_bn, stride_cz, stride_cm, stride_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr,
):
    z = tl.program_id(0).to(tl.int64)
    tiles_n = tl.cdiv(N, BN)
    pid_m = tl.program_id(1) // tiles_n
    pid_n = tl.program_id(1) % tiles_n
    a_ptr += z * stride_az
    b_ptr += z * stride_bz
    c_ptr += z * stride_cz
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=tl.float32)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


CONFIGS = {
    "cpu": (dict(BM=16, BN=32, BK=16, num_warps=1, num_stages=1), dict(BM=32, BN=16, BK=16, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=3), dict(BM=128, BN=128, BK=64, num_warps=8, num_stages=3)),
    "cuda/fp32": (dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=3),),
}


@registry.launcher("bmm")
def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict) -> None:
    grid = (a.shape[0], triton.cdiv(M, cfg["BM"]) * triton.cdiv(N, cfg["BN"]))
    bmm_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), a.stride(2), b.stride(0), b.stride(1), b.stride(2),
        c.stride(0), c.stride(1), c.stride(2),
        BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], PRECISION="ieee", **registry.options(cfg),
    )


register(Variant(name="bmm", launch=launch, dtypes=DTYPES, precision="ieee", configs=CONFIGS,
                 origin="torch.bmm's operation; Inductor's bmm template's tiling with the batch on grid axis 0",
                 description="batched: grid (problems, tiles), int64 batch offsets",
                 operation=Operation(batched=True)))
