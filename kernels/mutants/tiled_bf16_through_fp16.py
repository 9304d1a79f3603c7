"""tiled converting bf16 operands to fp16 before tl.dot (a habit carried over from fp16 kernels):
exact for bf16 values inside fp16's range, Inf or a flushed zero outside it. Only values spread
over bf16's exponent range show it: the `mixed_magnitudes` profile."""

import torch
import triton
import triton.language as tl

from kernels import operands
from kernels.mutants import Mutant, register, variant
from kernels.registry import Requirements, Variant

NAME = "tiled_bf16_through_fp16"


@triton.jit
def tiled_bf16_through_fp16_kernel(
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
        acc = tl.dot(a.to(tl.float16), b.to(tl.float16), acc, input_precision="ieee")
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


CPU_CONFIG = (16, 32, 16, 1, 1)
GPU_CONFIG = (128, 128, 64, 8, 3)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    M, N, K = operands.check(variant(NAME), a, b, c)
    if M == 0 or N == 0:
        return
    bm, bn, bk, warps, stages = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG
    tiled_bf16_through_fp16_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=stages,
    )


register(Mutant(
    variant=Variant(
        name=NAME, launch=launch, dtypes={torch.bfloat16: (torch.bfloat16,)}, precision="ieee",
        blocks={"cpu": (CPU_CONFIG[:3],), "cuda": (GPU_CONFIG[:3],)},
        origin="mutant of tiled (seed 002)", requirements=Requirements(max_offset=2**31 - 1),
        description="bf16 operands through fp16",
    ),
    bug="bf16 operands routed through fp16: values outside fp16's range become Inf or 0",
    dtype="bf16",
    smallest=dict(M=1, N=1, K=1, profile="mixed_magnitudes"),
    why="one product of bf16 values spread over bf16's exponent range; seed 0 draws one past fp16's 65504",
    caught_as="ValueOutOfBound",
    unaffected=dict(profile="normal"),))
