"""persistent with tl.dot left at its default input precision while the variant promises ieee fp32:
on NVIDIA GPUs (and in the interpreter, which emulates it) fp32 operands are truncated to tf32's
10 fraction bits (triton-lang/triton#2654)."""

import torch
import triton
import triton.language as tl

from kernels import operands
from kernels.mutants import Mutant, register, variant
from kernels.registry import SAME_DTYPE, Requirements, Variant

NAME = "persistent_default_precision"


@triton.jit
def persistent_default_precision_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    NUM_SMS: tl.constexpr,
):
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    total_tasks = num_pid_m * num_pid_n
    offs_k_for_mask = tl.arange(0, BLOCK_SIZE_K)
    for tile_id in tl.range(start_pid, total_tasks, NUM_SMS, flatten=True):
        pid_m = tile_id // num_pid_n
        pid_n = tile_id % num_pid_n
        offs_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_bn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        offs_am = tl.where(offs_am < M, offs_am, 0)
        offs_bn = tl.where(offs_bn < N, offs_bn, 0)
        offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_SIZE_M), BLOCK_SIZE_M)
        offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_SIZE_N), BLOCK_SIZE_N)
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_SIZE_K + tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
            b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
            a = tl.load(a_ptrs, mask=offs_k_for_mask[None, :] < K - ki * BLOCK_SIZE_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k_for_mask[:, None] < K - ki * BLOCK_SIZE_K, other=0.0)
            accumulator = tl.dot(a, b, accumulator)
        offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=c_mask)


CPU_CONFIG = (16, 16, 16, 1, 1)
CPU_NUM_SMS = 3
GPU_CONFIG = {torch.float32: (128, 128, 32, 8, 3)}
GPU_DEFAULT = (128, 256, 64, 8, 3)


def num_sms(device: torch.device) -> int:
    if device.type == "cpu":
        return CPU_NUM_SMS
    return torch.cuda.get_device_properties(device).multi_processor_count


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    M, N, K = operands.check(variant(NAME), a, b, c)
    if M == 0 or N == 0:
        return
    bm, bn, bk, warps, stages = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG.get(a.dtype, GPU_DEFAULT)
    sms = num_sms(a.device)
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    persistent_default_precision_kernel[(min(sms, tiles),)](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, NUM_SMS=sms,
        num_warps=warps, num_stages=stages,
    )


register(Mutant(
    variant=Variant(
        name=NAME, launch=launch, dtypes=SAME_DTYPE, precision="ieee",
        blocks={"cpu": (CPU_CONFIG[:3],), "cuda": (GPU_DEFAULT[:3], GPU_CONFIG[torch.float32][:3])},
        origin="mutant of persistent (seed 000, Triton tutorial 09)", requirements=Requirements(max_offset=2**31 - 1),
        description="tl.dot at its default precision (tf32) although registered ieee",
    ),
    bug="tf32 where ieee is promised: tl.dot left at its default input precision",
    dtype="fp32",
    smallest=dict(M=1, N=1, K=1, profile="uniform"),
    why="ones and small_ints are integers below 2**11, exact in tf32; the first profile with fraction bits "
        "beyond tf32's tenth is uniform, and at 1x1x1 seed 0 truncation already errs ~6000 x the ieee bound",
    caught_as="ValueOutOfBound",
))
