"""A ragged grouped GEMM in the form of FBGEMM's Triton grouped_gemm over m_sizes (and of
torch._grouped_mm's use): A's rows split into G consecutive groups of m_sizes[g] rows (0 allowed),
group g multiplied by B[g], into C's same rows. A persistent kernel: a fixed number of programs walk
the groups in order, each taking every NUM_PROGRAMS-th tile of the tiles the groups hold, so how many
tiles a group has is known only on the device. Rows and columns masked against the group's own size."""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import registry
from gemm_fuzz.kernels.dtypes import GROUPED_DTYPES
from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.kernels.registry import Requirements, Variant, register

OPERATION = Operation(grouped="ragged", ragged_index="sizes")


@triton.jit
def ragged_kernel(
    a_ptr, b_ptr, c_ptr, m_sizes_ptr, G, N, K,
    stride_am, stride_ak, stride_bg, stride_bk, stride_bn, stride_cm, stride_cn,
    NUM_PROGRAMS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    tidx = tl.program_id(0)
    num_n_tiles = tl.cdiv(N, BN)
    iterated_tiles = 0
    m_end = 0
    b_group = b_ptr  # B[g]: advanced a group at a time, so no offset g * stride_bg is formed in 32 bits
    for g in range(G):
        m_start = m_end
        m_size = tl.load(m_sizes_ptr + g)
        m_end = m_start + m_size
        num_tiles = tl.cdiv(m_size, BM) * num_n_tiles
        # this program's tiles of group g: every NUM_PROGRAMS-th tile overall
        while (tidx >= iterated_tiles) & (tidx < iterated_tiles + num_tiles):
            gidx = tidx - iterated_tiles
            tile_m = gidx // num_n_tiles
            tile_n = gidx % num_n_tiles
            offs_m = tile_m * BM + tl.arange(0, BM)  # rows of the group
            offs_n = tile_n * BN + tl.arange(0, BN)
            offs_k = tl.arange(0, BK)
            rows = (m_start + offs_m).to(tl.int64)
            a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak
            b_ptrs = b_group + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(0, tl.cdiv(K, BK)):
                k_left = K - k * BK
                a = tl.load(a_ptrs, mask=(offs_m[:, None] < m_size) & (offs_k[None, :] < k_left), other=0.0)
                b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
                acc = tl.dot(a, b, acc, input_precision="ieee")
                a_ptrs += BK * stride_ak
                b_ptrs += BK * stride_bk
            c_ptrs = c_ptr + rows[:, None] * stride_cm + offs_n[None, :] * stride_cn
            tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < m_size) & (offs_n[None, :] < N))
            tidx += NUM_PROGRAMS
        iterated_tiles += num_tiles
        b_group += stride_bg


CONFIGS = {  # on the CPU few programs, so that each walks several tiles and groups
    "cpu": (dict(BM=16, BN=16, BK=16, PROGRAMS=3, num_warps=1, num_stages=1),
            dict(BM=32, BN=16, BK=16, PROGRAMS=1, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=64, BN=64, BK=32, PROGRAMS=132, num_warps=4, num_stages=3),
             dict(BM=128, BN=128, BK=64, PROGRAMS=264, num_warps=8, num_stages=3)),
}


@registry.launcher("ragged")
def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict, *,
           group_index: torch.Tensor) -> None:
    ragged_kernel[(cfg["PROGRAMS"],)](
        a, b, c, group_index, b.shape[0], N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), b.stride(2), c.stride(0), c.stride(1),
        NUM_PROGRAMS=cfg["PROGRAMS"], BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], **registry.options(cfg),
    )


register(Variant(name="ragged", launch=launch, dtypes=GROUPED_DTYPES, precision="ieee", configs=CONFIGS,
                 origin="FBGEMM's Triton grouped_gemm over m_sizes (persistent, groups walked on the device)",
                 requirements=Requirements(), description="ragged groups of A's rows, empty groups allowed",
                 operation=OPERATION))
