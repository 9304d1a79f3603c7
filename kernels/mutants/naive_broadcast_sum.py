"""naive written the tempting way: per K block, tl.sum(a[:, :, None] * b[None, :, :], axis=1). It
reads as an fp32 sum of products on CUDA cores, but Triton's combine pass rewrites the pattern into
a tt.dot, which for fp32 inputs runs in tf32 by default; the variant promises ieee fp32. On an H100
that made a 1x1x1 case err 5000 x the ieee bound (see kernels/naive.py). Triton's own test of the
rewrite, test_dot_mulbroadcasted, compares with atol 0.01, loose enough for tf32.

GPU-only: the interpreter evaluates the broadcast, multiply and sum as written, in fp32."""

import torch
import triton
import triton.language as tl

from kernels import operands
from kernels.mutants import Mutant, register, variant
from kernels.registry import SAME_DTYPE, Requirements, Variant

NAME = "naive_broadcast_sum"


@triton.jit
def naive_broadcast_sum_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
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
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0).to(tl.float32)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0).to(tl.float32)
        acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# (BM, BN, BK): the rewrite into tt.dot needs dot-sized blocks (at least 16 each)
CPU_CONFIG = (16, 16, 16)
GPU_CONFIG = (32, 32, 16)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    M, N, K = operands.check(variant(NAME), a, b, c)
    if M == 0 or N == 0:
        return
    bm, bn, bk = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG
    naive_broadcast_sum_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=bm, BN=bn, BK=bk, num_warps=4,
    )


register(Mutant(
    variant=Variant(
        name=NAME, launch=launch, dtypes=SAME_DTYPE, precision="ieee",
        blocks={"cpu": (CPU_CONFIG,), "cuda": (GPU_CONFIG,)},
        origin="mutant of naive (seed 000)", requirements=Requirements(max_offset=2**31 - 1),
        description="broadcast-multiply-sum per K block, rewritten into a tf32 tt.dot on the GPU",
    ),
    bug="the naive kernel as tl.sum(a[:, :, None] * b[None, :, :], axis=1): the compiler makes it a tf32 dot",
    dtype="fp32",
    smallest=dict(M=1, N=1, K=1, profile="uniform"),
    why="ones and small_ints are exact in tf32; the first profile with fraction bits beyond tf32's tenth is "
        "uniform, and one product truncated to tf32 already errs thousands of times the ieee bound",
    caught_as="ValueOutOfBound",
    gpu_only=True,
    gpu_only_why="the rewrite into tt.dot is a compiler pass; the interpreter runs the sum of products as written",
))
