"""Split-K: the K dimension is divided among SPLIT_K programs per output tile (grid axis 1), each
adding its fp32 partial sum into a zeroed fp32 workspace with tl.atomic_add; a second pass rounds
the workspace into C. C is therefore right whatever it held before, in any output dtype, and the
sum keeps fp32 precision. Useful when M and N are small and K is large. Arbitrary strides."""

import torch
import triton
import triton.language as tl

from kernels import dtypes, operands, registry
from kernels.dtypes import ALL_DTYPES
from kernels.registry import Requirements, register_precisions


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


# (BM, BN, BK, SPLIT_K, num_warps, num_stages)
CPU_CONFIG = (16, 16, 16, 3, 1, 1)
GPU_CONFIG = {torch.float32: (64, 128, 32, 4, 4, 3)}
GPU_DEFAULT = (64, 128, 64, 4, 4, 3)


def make_launch(name: str, precision: str):
    def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
        M, N, K = operands.check(registry.get(name), a, b, c)
        if M == 0 or N == 0:
            return
        bm, bn, bk, split, warps, stages = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG.get(a.dtype, GPU_DEFAULT)
        workspace = torch.zeros((M, N), dtype=dtypes.accumulator_torch(a.dtype), device=a.device)
        split_k_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn), split)](
            a, b, workspace, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            BM=bm, BN=bn, BK=bk, SPLIT_K=split, PRECISION=precision, ACC=dtypes.accumulator(a.dtype),
            num_warps=warps, num_stages=stages,
        )
        round_into_c_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
            workspace, c, M, N, c.stride(0), c.stride(1), BM=bm, BN=bn,
        )

    return launch


register_precisions(
    "split_k",
    make_launch,
    ALL_DTYPES,
    blocks={"cpu": (CPU_CONFIG[:3],), "cuda": (GPU_DEFAULT[:3], GPU_CONFIG[torch.float32][:3])},
    origin="split-K GEMM (K divided among programs, partials combined with atomics in fp32)",
    requirements=Requirements(max_offset=2**31 - 1),
    description="SPLIT_K programs per tile, fp32 atomic workspace, then a rounding pass into C",
    deterministic=False,  # the order of the atomic adds varies on the GPU
)
