"""The block-based GEMM of seed 003: a 1-D grid (tile rows fastest), row and column offsets wrapped
with `% M` and `% N` so every load stays inside A and B without an M or N mask (the wrapped rows
compute garbage that is never stored), loads masked on K only, and a masked store. The seed
assumes contiguous inputs; this version takes arbitrary strides."""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import dtypes, registry
from gemm_fuzz.kernels.registry import INT32_OFFSETS, register_precisions


@triton.jit
def modulo_wrap_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    PRECISION: tl.constexpr, ACC: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    pid_m = pid % num_pid_m
    pid_n = pid // num_pid_m
    # wrapped offsets: rows past M read row (offs % M), always a real row of A
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=ACC)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator += tl.dot(a, b, input_precision=PRECISION, out_dtype=ACC)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=c_mask)


# seed 003's 128 x 128 x 32 on the GPU first
CONFIGS = {
    "cpu": (dict(BM=16, BN=32, BK=16, num_warps=1, num_stages=1), dict(BM=32, BN=32, BK=32, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=128, BN=128, BK=32, num_warps=4, num_stages=4), dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=3),
             dict(BM=128, BN=64, BK=64, num_warps=4, num_stages=3)),
}


def make_launch(name: str, precision: str):
    @registry.launcher(name)
    def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict) -> None:
        modulo_wrap_kernel[(triton.cdiv(M, cfg["BM"]) * triton.cdiv(N, cfg["BN"]),)](
            a, b, c, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BLOCK_SIZE_M=cfg["BM"], BLOCK_SIZE_N=cfg["BN"], BLOCK_SIZE_K=cfg["BK"], PRECISION=precision,
            ACC=dtypes.accumulator(a.dtype), **registry.options(cfg),
        )

    return launch


register_precisions("modulo_wrap", make_launch, CONFIGS, INT32_OFFSETS,
                    origin="seed 003: 1-D grid, offsets wrapped with % M and % N, masked store",
                    description="wrap-around offsets instead of M/N load masks")
