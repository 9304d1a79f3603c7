"""G independent GEMMs of their own M, N and K in one launch, in the form of Triton's tutorial 08 (grouped
GEMM) with masks added: the host builds device arrays of the problems' data pointers, sizes (M, N, K)
and leading dimensions; a fixed number of programs walk the problems in order, each taking every
NUM_PROGRAMS-th tile of the tiles they hold. A and B rows and columns wrap modulo the problem's M and N
(tutorial 03's loads, in bounds), K is masked, the store is masked on both axes; offsets in 64 bits."""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import registry
from gemm_fuzz.kernels.dtypes import GROUPED_DTYPES
from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.kernels.registry import Requirements, Variant, register

OPERATION = Operation(grouped="problems")
ELEMENT = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}


@triton.jit
def pointer_array_kernel(
    a_ptrs, b_ptrs, c_ptrs, sizes, lds, G,
    IN: tl.constexpr, OUT: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(G):
        gm = tl.load(sizes + g * 3)
        gn = tl.load(sizes + g * 3 + 1)
        gk = tl.load(sizes + g * 3 + 2)
        num_m_tiles = tl.cdiv(gm, BM)
        num_n_tiles = tl.cdiv(gn, BN)
        num_tiles = num_m_tiles * num_n_tiles
        while (tile_idx >= last_problem_end) & (tile_idx < last_problem_end + num_tiles):
            lda = tl.load(lds + g * 3).to(tl.int64)
            ldb = tl.load(lds + g * 3 + 1).to(tl.int64)
            ldc = tl.load(lds + g * 3 + 2).to(tl.int64)
            a_ptr = tl.load(a_ptrs + g).to(tl.pointer_type(IN))
            b_ptr = tl.load(b_ptrs + g).to(tl.pointer_type(IN))
            c_ptr = tl.load(c_ptrs + g).to(tl.pointer_type(OUT))
            tile_in_problem = tile_idx - last_problem_end
            tile_m = tile_in_problem // num_n_tiles
            tile_n = tile_in_problem % num_n_tiles
            offs_am = (tile_m * BM + tl.arange(0, BM)) % gm
            offs_bn = (tile_n * BN + tl.arange(0, BN)) % gn
            offs_k = tl.arange(0, BK)
            a_tile = a_ptr + offs_am[:, None] * lda + offs_k[None, :]
            b_tile = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for kk in range(0, tl.cdiv(gk, BK)):
                k_left = gk - kk * BK
                a = tl.load(a_tile, mask=offs_k[None, :] < k_left, other=0.0)
                b = tl.load(b_tile, mask=offs_k[:, None] < k_left, other=0.0)
                acc = tl.dot(a, b, acc, input_precision="ieee")
                a_tile += BK
                b_tile += BK * ldb
            offs_cm = tile_m * BM + tl.arange(0, BM)
            offs_cn = tile_n * BN + tl.arange(0, BN)
            c_tile = c_ptr + offs_cm[:, None] * ldc + offs_cn[None, :]
            tl.store(c_tile, acc.to(OUT), mask=(offs_cm[:, None] < gm) & (offs_cn[None, :] < gn))
            tile_idx += NUM_PROGRAMS
        last_problem_end = last_problem_end + num_tiles


CONFIGS = {  # on the CPU few programs, so that each walks several tiles and problems
    "cpu": (dict(BM=16, BN=16, BK=16, PROGRAMS=3, num_warps=1, num_stages=1),
            dict(BM=32, BN=16, BK=16, PROGRAMS=1, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=64, BN=64, BK=32, PROGRAMS=132, num_warps=4, num_stages=3),
             dict(BM=128, BN=128, BK=64, PROGRAMS=264, num_warps=8, num_stages=3)),
}


def device_arrays(a: list, b: list, c: list) -> tuple[torch.Tensor, ...]:
    """What tutorial 08's host code builds: the problems' data pointers (int64), then their sizes
    (M, N, K) and leading dimensions (lda, ldb, ldc), int32, three a problem."""
    device = a[0].device

    def pointers(ts):
        return torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64, device=device)

    sizes = [n for x, y in zip(a, b) for n in (x.shape[0], y.shape[1], x.shape[1])]
    lds = [s for x, y, z in zip(a, b, c) for s in (x.stride(0), y.stride(0), z.stride(0))]
    return (pointers(a), pointers(b), pointers(c), torch.tensor(sizes, dtype=torch.int32, device=device),
            torch.tensor(lds, dtype=torch.int32, device=device))


@registry.launcher("pointer_array")
def launch(a: list, b: list, c: list, M: int, N: int, K: int, cfg: dict) -> None:
    a_ptrs, b_ptrs, c_ptrs, sizes, lds = device_arrays(a, b, c)
    pointer_array_kernel[(cfg["PROGRAMS"],)](
        a_ptrs, b_ptrs, c_ptrs, sizes, lds, len(a), IN=ELEMENT[a[0].dtype], OUT=ELEMENT[c[0].dtype],
        NUM_PROGRAMS=cfg["PROGRAMS"], BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], **registry.options(cfg),
    )


register(Variant(name="pointer_array", launch=launch, dtypes=GROUPED_DTYPES, precision="ieee", configs=CONFIGS,
                 origin="Triton tutorial 08 (grouped GEMM over device pointer arrays), masks added",
                 requirements=Requirements(), description="G problems of their own M, N, K; empty ones allowed",
                 operation=OPERATION))
