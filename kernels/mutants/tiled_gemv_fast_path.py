"""tiled with a GEMV fast path for M == 1 (decode-style A @ B with a single row): one program per
block of columns, A's row loaded once per K strip as a vector. The fast path reads that row with
a.stride(0) as its element stride, as if A were a 1-D vector; for a 1 x K row the stride between
elements is stride(1). Every M > 1 takes the tiled path and is right."""

import torch
import triton
import triton.language as tl

from kernels import operands
from kernels.mutants import Mutant, register, variant
from kernels.registry import SAME_DTYPE, Requirements, Variant

NAME = "tiled_gemv_fast_path"


@triton.jit
def tiled_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr,
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
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def gemv_kernel(
    a_ptr, b_ptr, c_ptr,
    N, K,
    stride_a, stride_bk, stride_bn, stride_cn,
    BN: tl.constexpr, BK: tl.constexpr,
):
    """c[0, n] = sum_k a[k] * b[k, n]: a vector times a matrix, on CUDA cores."""
    offs_n = tl.program_id(0) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + (k + offs_k) * stride_a, mask=(k + offs_k) < K, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0).to(tl.float32)
        acc += tl.sum(a[:, None] * b, axis=0)
    tl.store(c_ptr + offs_n * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=offs_n < N)


CPU_CONFIG = (16, 32, 16, 1, 1)
GPU_CONFIG = {torch.float32: (128, 128, 32, 8, 3)}
GPU_DEFAULT = (128, 256, 64, 8, 3)
GEMV_CONFIG = (32, 16)  # (BN, BK)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    M, N, K = operands.check(variant(NAME), a, b, c)
    if M == 0 or N == 0:
        return
    if M == 1:  # GEMV: A is a single row
        bn, bk = GEMV_CONFIG
        gemv_kernel[(triton.cdiv(N, bn),)](
            a, b, c, N, K, a.stride(0), b.stride(0), b.stride(1), c.stride(1), BN=bn, BK=bk,
        )
        return
    bm, bn, bk, warps, stages = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG.get(a.dtype, GPU_DEFAULT)
    tiled_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=bm, BN=bn, BK=bk, PRECISION="ieee", num_warps=warps, num_stages=stages,
    )


register(Mutant(
    variant=Variant(
        name=NAME, launch=launch, dtypes=SAME_DTYPE, precision="ieee",
        blocks={"cpu": (CPU_CONFIG[:3], (1,) + GEMV_CONFIG),
                "cuda": (GPU_DEFAULT[:3], GPU_CONFIG[torch.float32][:3], (1,) + GEMV_CONFIG)},
        origin="mutant of tiled (seed 002) with a GEMV path", requirements=Requirements(max_offset=2**31 - 1),
        description="GEMV fast path for M == 1",
    ),
    bug="only M == 1: a GEMV fast path reads A's row with the wrong stride (stride(0) for stride(1))",
    dtype="fp16",
    smallest=dict(M=1, N=1, K=2),
    why="the path runs only for M == 1, and a 1 x 2 row-major A (strides (2, 1)) reads A[0, 1] at offset 2, "
        "past A; at K=1 the stride is never used",
    caught_as="OutOfBoundsAccess",
    unaffected=dict(M=2),
))
