"""tiled replacing NaN inputs with zero (tl.where(a == a, a, 0), a 'cleanup' of padded loads):
C is finite where the exact product is NaN. Only inputs holding NaN show it: the `specials` profile."""

import torch
import triton
import triton.language as tl

from kernels import operands
from kernels.mutants import Mutant, register, variant
from kernels.registry import Requirements, Variant

NAME = "tiled_nan_to_zero"


@triton.jit
def tiled_nan_to_zero_kernel(
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
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0)
        a = tl.where(a == a, a, 0.0)  # drops NaN
        b = tl.where(b == b, b, 0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


CPU_CONFIG = (16, 32, 16, 1, 1)
GPU_CONFIG = (128, 128, 64, 8, 3)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    M, N, K = operands.check(variant(NAME), a, b, c)
    if M == 0 or N == 0:
        return
    bm, bn, bk, warps, stages = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG
    tiled_nan_to_zero_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=stages,
    )


register(Mutant(
    variant=Variant(
        name=NAME, launch=launch, dtypes={torch.float16: (torch.float16,)}, precision="ieee",
        blocks={"cpu": (CPU_CONFIG[:3],), "cuda": (GPU_CONFIG[:3],)},
        origin="mutant of tiled (seed 002)", requirements=Requirements(max_offset=2**31 - 1),
        description="NaN dropped by a where",
    ),
    bug="NaN dropped by a where: NaN inputs replaced with zero, so C is finite where it must be NaN",
    dtype="fp16",
    smallest=dict(M=1, N=1, K=1, profile="specials", seed=2),
    why="one product whose A or B element is NaN; at 1x1x1 seeds 0 and 1 draw no NaN (an Inf times 0 "
        "stays NaN through the where)",
    caught_as="ValueOutOfBound",
    unaffected=dict(profile="normal"),
    shrinks_to=dict(M=1, N=2, K=1, profile="specials", seed=0),
    shrinks_to_why="specials places NaN by the seed: 1x2x1 at seed 0 has one, 1x1x1 needs seed 2; shrinking "
                   "keeps the seed at 0 and stops at the first size that fails there",))
