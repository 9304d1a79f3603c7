"""tiled launched on a grid computed with floor division (M // BM, N // BN): the ragged last tile row
and column get no program, so those elements of C are never written."""

import torch
import triton
import triton.language as tl

from kernels import operands
from kernels.mutants import Mutant, register, variant
from kernels.registry import SAME_DTYPE, Requirements, Variant

NAME = "tiled_floor_grid"


@triton.jit
def tiled_floor_grid_kernel(
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


CPU_CONFIG = (16, 32, 16, 1, 1)
GPU_CONFIG = {torch.float32: (128, 128, 32, 8, 3)}
GPU_DEFAULT = (128, 256, 64, 8, 3)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    M, N, K = operands.check(variant(NAME), a, b, c)
    if M == 0 or N == 0:
        return
    bm, bn, bk, warps, stages = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG.get(a.dtype, GPU_DEFAULT)
    grid = (M // bm, N // bn)
    tiled_floor_grid_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=bm, BN=bn, BK=bk, PRECISION="ieee", num_warps=warps, num_stages=stages,
    )


register(Mutant(
    variant=Variant(
        name=NAME, launch=launch, dtypes=SAME_DTYPE, precision="ieee",
        blocks={"cpu": (CPU_CONFIG[:3],), "cuda": (GPU_DEFAULT[:3], GPU_CONFIG[torch.float32][:3])},
        origin="mutant of tiled (seed 002)", requirements=Requirements(max_offset=2**31 - 1),
        description="grid computed with floor division",
    ),
    bug="some tiles never written: the grid is computed with floor division",
    dtype="fp16",
    smallest=dict(M=1, N=1, K=1),
    why="M < BM=16 gives a grid of 0 programs, so C[0, 0] is never written",
    caught_as="NotWritten",
    unaffected=dict(M=16, N=32),
))
