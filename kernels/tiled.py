"""The canonical tiled GEMM of seed 002: a 2-D grid, one BM x BN tile of C per program, a K loop
over BK-wide strips, masks on all three axes, an fp32 accumulator and a cast on store.
Arbitrary strides for A, B and C."""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import dtypes, registry
from gemm_fuzz.kernels.registry import INT32_OFFSETS, register_precisions


@triton.jit
def tiled_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    PRECISION: tl.constexpr, ACC: tl.constexpr,
):
    # 1. which output tile am I?
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    # 2. row/column indices of my tile, and the K-strip indices
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    # 3. the accumulator stays in registers, wider than the inputs
    acc = tl.zeros((BM, BN), dtype=ACC)
    # 4. the K loop: each strip's loads are masked on both of their axes
    for k in range(0, K, BK):
        a = tl.load(
            a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak,
            mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
            mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)
    # 5. cast to C's dtype and store the tile, masked on M and N
    tl.store(
        c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
        acc.to(c_ptr.dtype.element_ty),
        mask=(offs_m[:, None] < M) & (offs_n[None, :] < N),
    )


# The interpreter runs programs one after another, so its tiles are small and asymmetric (a swapped
# M/N shows); on the GPU, 128 x 256 x 64 (fp32: 128 x 128 x 32), and smaller tiles with deeper
# pipelines (num_stages >= 3 is where triton-lang/triton#10474 lived).
CONFIGS = {
    "cpu": (dict(BM=16, BN=32, BK=16, num_warps=1, num_stages=1), dict(BM=32, BN=16, BK=32, num_warps=1, num_stages=1),
            dict(BM=16, BN=16, BK=16, num_warps=2, num_stages=1)),
    "cuda": (dict(BM=128, BN=256, BK=64, num_warps=8, num_stages=3), dict(BM=128, BN=128, BK=64, num_warps=4, num_stages=4),
             dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=5), dict(BM=128, BN=64, BK=32, num_warps=4, num_stages=3)),
    "cuda/fp32": (dict(BM=128, BN=128, BK=32, num_warps=8, num_stages=3), dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=4)),
}


def make_launch(name: str, precision: str):
    @registry.launcher(name)
    def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict) -> None:
        grid = (triton.cdiv(M, cfg["BM"]), triton.cdiv(N, cfg["BN"]))
        tiled_kernel[grid](
            a, b, c, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], PRECISION=precision, ACC=dtypes.accumulator(a.dtype),
            **registry.options(cfg),
        )

    return launch


register_precisions("tiled", make_launch, CONFIGS, INT32_OFFSETS,
                    origin="seed 002: the canonical tiled matmul (five sections, masks on three axes)",
                    description="2-D grid, one tile of C per program")
