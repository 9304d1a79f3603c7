"""The grouped GEMM of seeds 000 and 004 (Triton tutorial 03): a 1-D grid whose program ids are
re-ordered so that GROUP_M consecutive programs share rows of A and columns of B in L2. When the
number of tile rows is not a multiple of GROUP_M the last group is smaller; that is where the
ordering's arithmetic is easiest to get wrong. Arbitrary strides."""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import dtypes, registry
from gemm_fuzz.kernels.registry import INT32_OFFSETS, register_precisions


@triton.jit
def grouped_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
    PRECISION: tl.constexpr, ACC: tl.constexpr,
):
    # 1. which tile: groups of GROUP_M tile rows, column-major inside a group
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)  # the last group may be smaller
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    # 2. offsets
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    # 3-4. accumulate over K, advancing the pointers one strip at a time
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    # 5. store
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# On the CPU GROUP_M = 3 by default, so that small problems (4 or 5 tile rows) end with a partial group.
CONFIGS = {
    "cpu": (dict(BM=16, BN=16, BK=16, GROUP_M=3, num_warps=1, num_stages=1),
            dict(BM=16, BN=32, BK=16, GROUP_M=2, num_warps=1, num_stages=1),
            dict(BM=32, BN=16, BK=32, GROUP_M=1, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=128, BN=256, BK=64, GROUP_M=8, num_warps=8, num_stages=3),
             dict(BM=128, BN=128, BK=64, GROUP_M=4, num_warps=4, num_stages=4),
             dict(BM=64, BN=64, BK=32, GROUP_M=2, num_warps=4, num_stages=5)),
    "cuda/fp32": (dict(BM=128, BN=128, BK=32, GROUP_M=8, num_warps=8, num_stages=3),
                  dict(BM=64, BN=64, BK=32, GROUP_M=4, num_warps=4, num_stages=4)),
}


def make_launch(name: str, precision: str):
    @registry.launcher(name)
    def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict) -> None:
        grid = (triton.cdiv(M, cfg["BM"]) * triton.cdiv(N, cfg["BN"]),)
        grouped_kernel[grid](
            a, b, c, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], GROUP_M=cfg["GROUP_M"], PRECISION=precision,
            ACC=dtypes.accumulator(a.dtype), **registry.options(cfg),
        )

    return launch


register_precisions("grouped", make_launch, CONFIGS, INT32_OFFSETS,
                    origin="seeds 000 and 004: 1-D grid with GROUP_SIZE_M re-ordering for L2 reuse (Triton tutorial 03)",
                    description="grouped tile order, last group smaller")
