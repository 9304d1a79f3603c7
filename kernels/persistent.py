"""The persistent GEMM of seed 000 (Triton tutorial 09): a grid of NUM_SMS programs, each looping
over the output tiles tile_id = start, start + NUM_SMS, ...; out-of-range rows and columns are
clamped to 0 with tl.where (so loads are masked on K only) and the store is masked. On the GPU
NUM_SMS is the device's multiprocessor count; in the interpreter it is 3, so each program really
runs the tile loop several times."""

import torch
import triton
import triton.language as tl

from kernels import dtypes, operands, registry
from kernels.dtypes import ALL_DTYPES
from kernels.registry import Requirements, register_precisions


@triton.jit
def persistent_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    NUM_SMS: tl.constexpr, PRECISION: tl.constexpr, ACC: tl.constexpr,
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
        # rows and columns past the edge read row/column 0 instead; their results are never stored
        offs_am = tl.where(offs_am < M, offs_am, 0)
        offs_bn = tl.where(offs_bn < N, offs_bn, 0)
        offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_SIZE_M), BLOCK_SIZE_M)
        offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_SIZE_N), BLOCK_SIZE_N)
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=ACC)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_SIZE_K + tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
            b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
            a = tl.load(a_ptrs, mask=offs_k_for_mask[None, :] < K - ki * BLOCK_SIZE_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k_for_mask[:, None] < K - ki * BLOCK_SIZE_K, other=0.0)
            accumulator = tl.dot(a, b, accumulator, input_precision=PRECISION, out_dtype=ACC)
        offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=c_mask)


# (BM, BN, BK, num_warps, num_stages)
CPU_CONFIG = (16, 16, 16, 1, 1)
CPU_NUM_SMS = 3
GPU_CONFIG = {torch.float32: (128, 128, 32, 8, 3)}
GPU_DEFAULT = (128, 256, 64, 8, 3)


def num_sms(device: torch.device) -> int:
    if device.type == "cpu":
        return CPU_NUM_SMS
    return torch.cuda.get_device_properties(device).multi_processor_count


def make_launch(name: str, precision: str):
    def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
        M, N, K = operands.check(registry.get(name), a, b, c)
        if M == 0 or N == 0:
            return
        bm, bn, bk, warps, stages = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG.get(a.dtype, GPU_DEFAULT)
        sms = num_sms(a.device)
        tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
        persistent_kernel[(min(sms, tiles),)](
            a, b, c, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, NUM_SMS=sms, PRECISION=precision,
            ACC=dtypes.accumulator(a.dtype),
            num_warps=warps, num_stages=stages,
        )

    return launch


register_precisions(
    "persistent",
    make_launch,
    ALL_DTYPES,
    blocks={"cpu": (CPU_CONFIG[:3],), "cuda": (GPU_DEFAULT[:3], GPU_CONFIG[torch.float32][:3])},
    origin="seed 000: persistent matmul over NUM_SMS programs (Triton tutorial 09)",
    requirements=Requirements(max_offset=2**31 - 1),
    description="NUM_SMS programs loop over tiles",
)
