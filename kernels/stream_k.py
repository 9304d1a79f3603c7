"""Stream-K (as in CUTLASS and tritonbench): a persistent grid that splits the K-iterations of all
tiles evenly among its programs, so the last wave is never a fraction of the machine. A program's
share can start or end in the middle of a tile; such a tile is finished by a fix-up step:

  a program whose share ends inside a tile (before its last K-iteration) writes its partial sum
  to its workspace slot, then raises its flag;
  the program that owns a tile's last K-iteration waits for the flags of every earlier program that
  touched the tile, adds their partials to its own, and stores the tile.

Each program walks its share backwards, from its last iteration to its first, so the partial it
publishes is computed first and the tile it finishes (which waits on its left neighbour's partial)
last: waits are short instead of chaining every program behind the one before it (walking forwards
made the whole grid run one program at a time: 0.02x torch.matmul on an H100). The finisher always
has the highest program id among a tile's contributors, so waits only point at lower ids: the
interpreter, which runs programs in id order, never waits, and on the GPU all programs of the
persistent grid are resident at once. Arbitrary strides.
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import dtypes, machine, registry
from gemm_fuzz.kernels.registry import INT32_OFFSETS, register_precisions


@triton.jit
def _partial_tile(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  pid_m, pid_n, k_first, k_last,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr, ACC: tl.constexpr):
    """The sum over K-iterations [k_first, k_last) of one tile, in the accumulator's dtype."""
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = k_first * BK + tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=ACC)
    for ki in range(k_first, k_last):
        k_left = K - ki * BK
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (tl.arange(0, BK)[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(tl.arange(0, BK)[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    return acc


@triton.jit
def stream_k_kernel(
    a_ptr, b_ptr, c_ptr, partials_ptr, flags_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    iters_per_tile, iters_per_program,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr, ACC: tl.constexpr,
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
                            pid_m, pid_n, k_first, k_last, BM, BN, BK, PRECISION, ACC)
        if k_last < iters_per_tile:
            # my share ends inside this tile: publish the partial sum for its finisher
            slot = partials_ptr + pid * BM * BN + tile_m[:, None] * BN + tile_n[None, :]
            tl.store(slot, acc)
            tl.debug_barrier()  # every thread's partial is written before the flag goes up
            tl.atomic_xchg(flags_ptr + pid, 1, sem="release")
        else:
            # I own the tile's last iteration: add the partials of the earlier programs that touched it
            first_owner = tile_first // iters_per_program
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


# `programs` is the persistent grid's size (None: the GPU's SM count); the interpreter's default
# 3 programs make shares split tiles
CONFIGS = {
    "cpu": (dict(BM=16, BN=16, BK=16, programs=3, num_warps=1, num_stages=1),
            dict(BM=16, BN=16, BK=16, programs=2, num_warps=1, num_stages=1),
            dict(BM=32, BN=16, BK=16, programs=5, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=128, BN=128, BK=64, programs=None, num_warps=8, num_stages=3),
             dict(BM=128, BN=128, BK=64, programs=100, num_warps=8, num_stages=3),
             dict(BM=64, BN=64, BK=32, programs=None, num_warps=4, num_stages=4)),
    "cuda/fp32": (dict(BM=128, BN=128, BK=32, programs=None, num_warps=8, num_stages=3),
                  dict(BM=64, BN=64, BK=32, programs=77, num_warps=4, num_stages=4)),
}


def programs(device: torch.device, chosen: int | None) -> int:
    return chosen if chosen is not None else machine.multiprocessors(device)


def make_launch(name: str, precision: str):
    @registry.launcher(name)
    def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict) -> None:
        bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
        iters_per_tile = max(1, triton.cdiv(K, bk))  # K = 0 still needs one (all-masked) pass to write zeros
        total = triton.cdiv(M, bm) * triton.cdiv(N, bn) * iters_per_tile
        grid = min(programs(a.device, cfg["programs"]), total)
        iters_per_program = triton.cdiv(total, grid)
        partials = torch.empty((grid, bm, bn), dtype=dtypes.accumulator_torch(a.dtype), device=a.device)
        flags = torch.zeros((grid,), dtype=torch.int32, device=a.device)
        stream_k_kernel[(grid,)](
            a, b, c, partials, flags, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            iters_per_tile, iters_per_program,
            BM=bm, BN=bn, BK=bk, PRECISION=precision, ACC=dtypes.accumulator(a.dtype),
            **registry.options(cfg),
        )

    return launch


register_precisions("stream_k", make_launch, CONFIGS, INT32_OFFSETS,
                    origin="Stream-K (CUTLASS, tritonbench): K-iterations of all tiles split evenly over a persistent grid",
                    description="persistent grid, even split of K-iterations, partial tiles fixed up through a workspace")
