"""tiled behind a launcher with two paths: when every leading stride is a multiple of 16 elements the
kernel is told so (tl.multiple_of, for vectorized loads); otherwise a generic path runs the same
kernel without the hints. The generic path passes B's row stride for both of B's strides, a
copy-paste slip that only unaligned problems ever execute."""

import torch
import triton
import triton.language as tl

from kernels import operands
from kernels.mutants import Mutant, register, variant
from kernels.registry import SAME_DTYPE, Requirements, Variant

NAME = "tiled_aligned_fast_path"


@triton.jit
def tiled_aligned_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr,
    ALIGNED: tl.constexpr, A_COL: tl.constexpr, B_COL: tl.constexpr, C_COL: tl.constexpr,
):
    if ALIGNED:  # each operand's leading stride is a multiple of 16
        if A_COL:
            stride_ak = tl.multiple_of(stride_ak, 16)
        else:
            stride_am = tl.multiple_of(stride_am, 16)
        if B_COL:
            stride_bn = tl.multiple_of(stride_bn, 16)
        else:
            stride_bk = tl.multiple_of(stride_bk, 16)
        if C_COL:
            stride_cn = tl.multiple_of(stride_cn, 16)
        else:
            stride_cm = tl.multiple_of(stride_cm, 16)
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


def _column_major(t: torch.Tensor) -> bool:
    return t.stride(1) != 1 and t.stride(0) == 1


def _leading_stride(t: torch.Tensor) -> int:
    return t.stride(1) if _column_major(t) else t.stride(0)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    M, N, K = operands.check(variant(NAME), a, b, c)
    if M == 0 or N == 0:
        return
    bm, bn, bk, warps, stages = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG.get(a.dtype, GPU_DEFAULT)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    layout = dict(A_COL=_column_major(a), B_COL=_column_major(b), C_COL=_column_major(c))
    if all(_leading_stride(t) % 16 == 0 for t in (a, b, c)):
        tiled_aligned_kernel[grid](
            a, b, c, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BM=bm, BN=bn, BK=bk, PRECISION="ieee", ALIGNED=True, **layout, num_warps=warps, num_stages=stages,
        )
    else:
        tiled_aligned_kernel[grid](
            a, b, c, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(0), c.stride(0), c.stride(1),
            BM=bm, BN=bn, BK=bk, PRECISION="ieee", ALIGNED=False, **layout, num_warps=warps, num_stages=stages,
        )


register(Mutant(
    variant=Variant(
        name=NAME, launch=launch, dtypes=SAME_DTYPE, precision="ieee",
        blocks={"cpu": (CPU_CONFIG[:3],), "cuda": (GPU_DEFAULT[:3], GPU_CONFIG[torch.float32][:3])},
        origin="mutant of tiled (seed 002) with a 16-aligned fast path",
        requirements=Requirements(max_offset=2**31 - 1),
        description="hinted path for 16-divisible leading strides, generic path with a stride slip",
    ),
    bug="only strides not divisible by 16: the generic path passes B's row stride as its column stride",
    dtype="fp16",
    smallest=dict(M=1, N=2, K=1),
    why="B needs two columns for its column stride to matter: a 1 x 2 B (strides (2, 1)) reads B[0, 1] at "
        "offset 2, past B; its leading stride 2 is not a multiple of 16, so the generic path runs",
    caught_as="OutOfBoundsAccess",
    unaffected=dict(N=16, K=16),
))
