"""Two ways to get the grouped ordering's last group wrong (Triton tutorial 03's arithmetic). When the
number of tile rows is not a multiple of GROUP_M the last group is smaller, and the program ids of a
group must be split by its real size:

  grouped_unclamped_group  group_size_m = GROUP_M, never clamped: whenever a group has fewer than
                           GROUP_M tile rows, some programs compute a tile past M (masked away) and the
                           tiles they should have computed are never written
  grouped_group_min        tl.minimum(num_pid_m, GROUP_M), forgetting to subtract first_pid_m: right
                           for the first group, wrong for a smaller last one
"""

import torch
import triton
import triton.language as tl

from kernels import operands
from kernels.mutants import Mutant, register, variant
from kernels.registry import SAME_DTYPE, Requirements, Variant


@triton.jit
def grouped_last_group_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
    PRECISION: tl.constexpr, GROUP_SIZE: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    if GROUP_SIZE == "unclamped":
        group_size_m = GROUP_M
    else:
        group_size_m = tl.minimum(num_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# GROUP_M = 3 on the CPU, as in grouped, so small problems end with a partial group
CPU_CONFIG = (16, 16, 16, 3, 1, 1)
GPU_CONFIG = {torch.float32: (128, 128, 32, 8, 8, 3)}
GPU_DEFAULT = (128, 256, 64, 8, 8, 3)


def make_launch(name: str, group_size: str):
    def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
        M, N, K = operands.check(variant(name), a, b, c)
        if M == 0 or N == 0:
            return
        bm, bn, bk, group, warps, stages = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG.get(a.dtype, GPU_DEFAULT)
        grouped_last_group_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn),)](
            a, b, c, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BM=bm, BN=bn, BK=bk, GROUP_M=group, PRECISION="ieee", GROUP_SIZE=group_size,
            num_warps=warps, num_stages=stages,
        )

    return launch


def _variant(name: str, group_size: str, description: str) -> Variant:
    return Variant(
        name=name, launch=make_launch(name, group_size), dtypes=SAME_DTYPE, precision="ieee",
        blocks={"cpu": (CPU_CONFIG[:3],), "cuda": (GPU_DEFAULT[:3], GPU_CONFIG[torch.float32][:3])},
        origin="mutant of grouped (seeds 000, 004)", requirements=Requirements(max_offset=2**31 - 1),
        description=description,
    )


register(Mutant(
    variant=_variant("grouped_unclamped_group", "unclamped", "group size never clamped to the tile rows left"),
    bug="grouped ordering: the last group's size is not clamped, so some tiles are never written",
    dtype="fp16",
    smallest=dict(M=1, N=17, K=1),
    why="one tile row (a group of 1, not GROUP_M=3) and two tile columns: program 1 computes tile (1, 0), "
        "past M, instead of (0, 1), which stays unwritten",
    caught_as="NotWritten",
    unaffected=dict(M=48),
))
register(Mutant(
    variant=_variant("grouped_group_min", "min", "group size min(num_pid_m, GROUP_M), without first_pid_m"),
    bug="grouped ordering: the wrong min for the last group's size (first_pid_m not subtracted)",
    dtype="fp16",
    smallest=dict(M=49, N=17, K=1),
    why="the smallest M with a smaller last group is 4 tile rows (3 + 1, GROUP_M=3, BM=16); two tile columns "
        "are needed for a program to land on the wrong tile",
    caught_as="NotWritten",
    unaffected=dict(M=48),
))
