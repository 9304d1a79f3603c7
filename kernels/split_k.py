"""Split-K: the K dimension is divided among SPLIT_K programs per output tile (grid axis 1), each
adding its fp32 partial sum into a zeroed fp32 workspace with tl.atomic_add; a second pass rounds
the workspace into C. C is therefore right whatever it held before, in any output dtype, and the
sum keeps fp32 precision. Useful when M and N are small and K is large. Arbitrary strides."""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import dtypes, registry
from gemm_fuzz.kernels.registry import INT32_OFFSETS, register_precisions


@triton.jit
def split_k_kernel(
    a_ptr, b_ptr, ws_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT_K: tl.constexpr, PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BN)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    # split pid_k takes every SPLIT_K-th strip of K: strips pid_k, pid_k + SPLIT_K, ...
    offs_k = pid_k * BK + tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, tl.cdiv(K, BK * SPLIT_K)):
        k_left = K - (k * SPLIT_K + pid_k) * BK
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (tl.arange(0, BK)[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(tl.arange(0, BK)[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)
        a_ptrs += BK * SPLIT_K * stride_ak
        b_ptrs += BK * SPLIT_K * stride_bk
    # the workspace is M x N, contiguous
    tl.atomic_add(ws_ptr + offs_m[:, None] * N + offs_n[None, :], acc,
                  mask=(offs_m[:, None] < M) & (offs_n[None, :] < N), sem="relaxed")


@triton.jit
def round_into_c_kernel(ws_ptr, c_ptr, M, N, stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    acc = tl.load(ws_ptr + offs_m[:, None] * N + offs_n[None, :], mask=mask)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=mask)


CONFIGS = {
    "cpu": (dict(BM=16, BN=16, BK=16, SPLIT_K=3, num_warps=1, num_stages=1),
            dict(BM=16, BN=16, BK=16, SPLIT_K=2, num_warps=1, num_stages=1),
            dict(BM=32, BN=16, BK=16, SPLIT_K=4, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=64, BN=128, BK=64, SPLIT_K=4, num_warps=4, num_stages=3),
             dict(BM=64, BN=64, BK=64, SPLIT_K=8, num_warps=4, num_stages=3),
             dict(BM=128, BN=128, BK=32, SPLIT_K=2, num_warps=8, num_stages=4)),
    "cuda/fp32": (dict(BM=64, BN=128, BK=32, SPLIT_K=4, num_warps=4, num_stages=3),
                  dict(BM=64, BN=64, BK=32, SPLIT_K=8, num_warps=4, num_stages=4)),
}


def make_launch(name: str, precision: str):
    @registry.launcher(name)
    def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict) -> None:
        bm, bn = cfg["BM"], cfg["BN"]
        workspace = torch.zeros((M, N), dtype=dtypes.accumulator_torch(a.dtype), device=a.device)
        split_k_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn), cfg["SPLIT_K"])](
            a, b, workspace, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            BM=bm, BN=bn, BK=cfg["BK"], SPLIT_K=cfg["SPLIT_K"], PRECISION=precision, ACC=dtypes.accumulator(a.dtype),
            **registry.options(cfg),
        )
        round_into_c_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
            workspace, c, M, N, c.stride(0), c.stride(1), BM=bm, BN=bn,
        )

    return launch


register_precisions("split_k", make_launch, CONFIGS, INT32_OFFSETS,
                    origin="split-K GEMM (K divided among programs, partials combined with atomics in fp32)",
                    description="SPLIT_K programs per tile, fp32 atomic workspace, then a rounding pass into C",
                    deterministic=False)  # the order of the atomic adds varies on the GPU
