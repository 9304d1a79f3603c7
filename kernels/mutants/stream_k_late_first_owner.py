"""stream_k whose fix-up finds a tile's first contributor by rounding up (cdiv) instead of down: when
a tile starts in the middle of a program's share, that program's partial sum is never added."""

import torch
import triton
import triton.language as tl

from kernels import operands
from kernels.mutants import Mutant, register, variant
from kernels.registry import SAME_DTYPE, Requirements, Variant

NAME = "stream_k_late_first_owner"


@triton.jit
def _partial_tile(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  pid_m, pid_n, k_first, k_last,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr):
    """The sum over K-iterations [k_first, k_last) of one tile, in fp32."""
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = k_first * BK + tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for ki in range(k_first, k_last):
        k_left = K - ki * BK
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (tl.arange(0, BK)[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(tl.arange(0, BK)[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    return acc


@triton.jit
def stream_k_late_first_owner_kernel(
    a_ptr, b_ptr, c_ptr, partials_ptr, flags_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    iters_per_tile, iters_per_program,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BN)
    total = tl.cdiv(M, BM) * num_pid_n * iters_per_tile
    start = pid * iters_per_program
    it_end = tl.minimum(start + iters_per_program, total)
    tile_m = tl.arange(0, BM)
    tile_n = tl.arange(0, BN)
    while it_end > start:  # backwards over my share, one tile segment at a time
        tile = (it_end - 1) // iters_per_tile
        tile_first = tile * iters_per_tile
        k_first = tl.maximum(start, tile_first) - tile_first
        k_last = it_end - tile_first
        pid_m = tile // num_pid_n
        pid_n = tile % num_pid_n
        acc = _partial_tile(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                            pid_m, pid_n, k_first, k_last, BM, BN, BK, PRECISION)
        if k_last < iters_per_tile:
            slot = partials_ptr + pid * BM * BN + tile_m[:, None] * BN + tile_n[None, :]
            tl.store(slot, acc)
            tl.debug_barrier()
            tl.atomic_xchg(flags_ptr + pid, 1, sem="release")
        else:
            # the programs whose shares touch this tile, up to me
            first_owner = tl.cdiv(tile_first, iters_per_program)
            for owner in range(first_owner, pid):
                while tl.atomic_add(flags_ptr + owner, 0, sem="acquire") == 0:
                    pass
                slot = partials_ptr + owner * BM * BN + tile_m[:, None] * BN + tile_n[None, :]
                acc += tl.load(slot, cache_modifier=".cg")
            offs_m = pid_m * BM + tile_m
            offs_n = pid_n * BN + tile_n
            tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
                     mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
        it_end = tile_first + k_first


CPU_CONFIG = (16, 16, 16, 1, 1)
CPU_PROGRAMS = 3
GPU_CONFIG = {torch.float32: (128, 128, 32, 8, 3)}
GPU_DEFAULT = (128, 128, 64, 8, 3)


def programs(device: torch.device) -> int:
    if device.type == "cpu":
        return CPU_PROGRAMS
    return torch.cuda.get_device_properties(device).multi_processor_count


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    M, N, K = operands.check(variant(NAME), a, b, c)
    if M == 0 or N == 0:
        return
    bm, bn, bk, warps, stages = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG.get(a.dtype, GPU_DEFAULT)
    iters_per_tile = max(1, triton.cdiv(K, bk))
    total = triton.cdiv(M, bm) * triton.cdiv(N, bn) * iters_per_tile
    grid = min(programs(a.device), total)
    iters_per_program = triton.cdiv(total, grid)
    partials = torch.empty((grid, bm, bn), dtype=torch.float32, device=a.device)
    flags = torch.zeros((grid,), dtype=torch.int32, device=a.device)
    stream_k_late_first_owner_kernel[(grid,)](
        a, b, c, partials, flags, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        iters_per_tile, iters_per_program,
        BM=bm, BN=bn, BK=bk, PRECISION="ieee", num_warps=warps, num_stages=stages,
    )


register(Mutant(
    variant=Variant(
        name=NAME, launch=launch, dtypes=SAME_DTYPE, precision="ieee",
        blocks={"cpu": (CPU_CONFIG[:3],), "cuda": (GPU_DEFAULT[:3], GPU_CONFIG[torch.float32][:3])},
        origin="mutant of stream_k (CUTLASS, tritonbench)", requirements=Requirements(max_offset=2**31 - 1),
        description="fix-up skips the first contributor of a tile that starts inside its share",
    ),
    bug="stream-K fix-up skips the first contributor: its first owner is rounded up, not down",
    dtype="fp16",
    smallest=dict(M=1, N=17, K=33),
    why="a tile must start inside a program's share: 2 tiles x 3 K-iterations over 3 programs (2 each) put "
        "tile 1's first iteration in program 1's share, whose partial is dropped",
    caught_as="NotBitExact",
    unaffected=dict(K=32),
))
