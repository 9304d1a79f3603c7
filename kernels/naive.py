"""The slow, obviously-right baseline: the thread-level view of seed 000 made Triton. Each program
owns a small tile of C and, for k = 0 .. K-1, adds the outer product of column k of A and row k of
B: every C[i, j] is the plain fp32 sum of A[i, k] * B[k, j], on CUDA cores. Arbitrary strides, and
64-bit offset arithmetic, so no 2**31 limit.

It deliberately avoids the tempting `tl.sum(a[:, :, None] * b[None, :, :], axis=1)`: Triton's
combine pass rewrites that pattern into a tt.dot, which for fp32 runs in tf32 by default (on an
H100 that made this kernel 5000x over the ieee bound on a 1x1x1 case)."""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import dtypes, registry
from gemm_fuzz.kernels.dtypes import ALL_DTYPES
from gemm_fuzz.kernels.registry import Variant, register


@triton.jit
def naive_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BM: tl.constexpr, BN: tl.constexpr, ACC: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    # 64-bit offsets: element offsets past 2**31 (huge operands) stay exact
    offs_m = (pid_m * BM + tl.arange(0, BM)).to(tl.int64)
    offs_n = (pid_n * BN + tl.arange(0, BN)).to(tl.int64)
    acc = tl.zeros((BM, BN), dtype=ACC)
    a_ptrs = a_ptr + offs_m * stride_am  # column k of A's tile, then advanced one column at a time
    b_ptrs = b_ptr + offs_n * stride_bn
    for _ in range(0, K):
        a = tl.load(a_ptrs, mask=offs_m < M, other=0.0).to(ACC)
        b = tl.load(b_ptrs, mask=offs_n < N, other=0.0).to(ACC)
        acc += a[:, None] * b[None, :]
        a_ptrs += stride_ak
        b_ptrs += stride_bk
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# BK is 1: one rank-1 update per k
CONFIGS = {
    "cpu": (dict(BM=32, BN=32, BK=1, num_warps=4), dict(BM=16, BN=8, BK=1, num_warps=4)),
    "cuda": (dict(BM=32, BN=32, BK=1, num_warps=4), dict(BM=64, BN=16, BK=1, num_warps=4)),
}


@registry.launcher("naive")
def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict) -> None:
    naive_kernel[(triton.cdiv(M, cfg["BM"]), triton.cdiv(N, cfg["BN"]))](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=cfg["BM"], BN=cfg["BN"], ACC=dtypes.accumulator(a.dtype), **registry.options(cfg),
    )


register(
    Variant(
        name="naive",
        launch=launch,
        dtypes=ALL_DTYPES,
        precision="ieee",
        configs=CONFIGS,
        origin="seed 000: the thread-level CUDA matmul, one small tile of C per program",
        description="rank-1 updates on CUDA cores, no tl.dot, 64-bit offsets",
    )
)
