"""split-K as the old triton.ops.matmul did it: each of the SPLIT_K programs of a tile atomically
adds its partial sum into C itself. That is right only if C holds zeros beforehand; this launcher
never zeroes it, so C's previous contents are added in."""

import torch
import triton
import triton.language as tl

from kernels import operands
from kernels.mutants import Mutant, register, variant
from kernels.registry import SAME_DTYPE, Requirements, Variant

NAME = "split_k_into_c"


@triton.jit
def split_k_into_c_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT_K: tl.constexpr, PRECISION: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BN)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = pid_k * BK + tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK * SPLIT_K)):
        k_left = K - (k * SPLIT_K + pid_k) * BK
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (tl.arange(0, BK)[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(tl.arange(0, BK)[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * SPLIT_K * stride_ak
        b_ptrs += BK * SPLIT_K * stride_bk
    acc = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc, mask=mask)
    else:
        tl.atomic_add(c_ptrs, acc, mask=mask, sem="relaxed")


CPU_CONFIG = (16, 16, 16, 3, 1, 1)
GPU_CONFIG = {torch.float32: (64, 128, 32, 4, 4, 3)}
GPU_DEFAULT = (64, 128, 64, 4, 4, 3)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    M, N, K = operands.check(variant(NAME), a, b, c)
    if M == 0 or N == 0:
        return
    bm, bn, bk, split, warps, stages = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG.get(a.dtype, GPU_DEFAULT)
    split_k_into_c_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn), split)](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=bm, BN=bn, BK=bk, SPLIT_K=split, PRECISION="ieee", num_warps=warps, num_stages=stages,
    )


register(Mutant(
    variant=Variant(
        name=NAME, launch=launch, dtypes=SAME_DTYPE, precision="ieee",
        blocks={"cpu": (CPU_CONFIG[:3],), "cuda": (GPU_DEFAULT[:3], GPU_CONFIG[torch.float32][:3])},
        origin="mutant of split_k (triton.ops.matmul's SPLIT_K path)", requirements=Requirements(max_offset=2**31 - 1),
        description="partials atomically added into C, which is never zeroed",
    ),
    bug="split-K relies on C being zero: partial sums are added into C without zeroing it first",
    dtype="fp16",
    smallest=dict(M=1, N=1, K=1),
    why="any C that does not hold zeros shows it; the suite pre-fills C with NaN, so 1x1x1 gives NaN",
    caught_as="NotWritten",
))
