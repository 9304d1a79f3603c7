"""descriptor storing C through a tensor descriptor whatever its inner extent. A TMA store clips at
16-byte granularity, so when a row of C is not a multiple of 16 bytes long it also overwrites the
memory after the row, up to the next 16-byte boundary (triton-lang/triton#11583). kernels/descriptor.py
avoids it by storing such a C with a masked tl.store (C_TMA); this launcher always takes the TMA path.

GPU-only: the interpreter emulates a descriptor store element by element and clips it exactly."""

import torch
import triton
import triton.language as tl

from kernels import operands
from kernels.mutants import Mutant, register, variant
from kernels.registry import SAME_DTYPE, Requirements, Variant

NAME = "descriptor_unaligned_tma_store"


@triton.jit
def _describe(ptr, rows, cols, stride, COL_MAJOR: tl.constexpr, B_ROWS: tl.constexpr, B_COLS: tl.constexpr):
    """A descriptor over a rows x cols operand; a column-major one is described as its transpose."""
    if COL_MAJOR:
        return tl.make_tensor_descriptor(ptr, shape=[cols, rows], strides=[stride, 1], block_shape=[B_COLS, B_ROWS])
    else:
        return tl.make_tensor_descriptor(ptr, shape=[rows, cols], strides=[stride, 1], block_shape=[B_ROWS, B_COLS])


@triton.jit
def descriptor_tma_store_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_a, stride_b, stride_c,  # the non-unit stride of A, B and C
    A_COL: tl.constexpr, B_COL: tl.constexpr, C_COL: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, PRECISION: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    off_m = pid_m * BM
    off_n = pid_n * BN

    a_desc = _describe(a_ptr, M, K, stride_a, A_COL, BM, BK)
    b_desc = _describe(b_ptr, K, N, stride_b, B_COL, BK, BN)
    c_desc = _describe(c_ptr, M, N, stride_c, C_COL, BM, BN)

    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        off_k = k * BK
        if A_COL:
            a = a_desc.load([off_k, off_m]).T
        else:
            a = a_desc.load([off_m, off_k])
        if B_COL:
            b = b_desc.load([off_n, off_k]).T
        else:
            b = b_desc.load([off_k, off_n])
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    out = acc.to(c_ptr.dtype.element_ty)
    if C_COL:
        c_desc.store([off_n, off_m], out.T)
    else:
        c_desc.store([off_m, off_n], out)


CPU_CONFIG = (16, 32, 16, 2, 1, 1)
GPU_CONFIG = {torch.float32: (128, 128, 32, 8, 8, 3)}
GPU_DEFAULT = (128, 256, 64, 8, 8, 3)


def _allocate_scratch(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _orientation(t: torch.Tensor) -> tuple[bool, int]:
    """(column-major?, the non-unit stride) of an operand the launcher has validated."""
    if t.stride(1) == 1:
        return False, t.stride(0)
    return True, t.stride(1)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    M, N, K = operands.check(variant(NAME), a, b, c)
    if M == 0 or N == 0:
        return
    if a.device.type == "cpu":
        bm, bn, bk, group, warps, stages = CPU_CONFIG
    else:
        bm, bn, bk, group, warps, stages = GPU_CONFIG.get(a.dtype, GPU_DEFAULT)
        triton.set_allocator(_allocate_scratch)  # in-kernel descriptors need global scratch memory
    (a_col, sa), (b_col, sb), (c_col, sc) = _orientation(a), _orientation(b), _orientation(c)
    descriptor_tma_store_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn),)](
        a, b, c, M, N, K, sa, sb, sc,
        A_COL=a_col, B_COL=b_col, C_COL=c_col,
        BM=bm, BN=bn, BK=bk, GROUP_M=group, PRECISION="ieee", num_warps=warps, num_stages=stages,
    )


# The strategies pad every leading dimension of a descriptor operand to 16 bytes (8 fp16 elements),
# so the smallest case has each 1 x 1 operand in a row of 8.
_PADDED = {"pad": 7}

register(Mutant(
    variant=Variant(
        name=NAME, launch=launch, dtypes=SAME_DTYPE, precision="ieee",
        blocks={"cpu": (CPU_CONFIG[:3],), "cuda": (GPU_DEFAULT[:3], GPU_CONFIG[torch.float32][:3])},
        origin="mutant of descriptor (Triton tutorial 09's TMA path)",
        requirements=Requirements(max_offset=2**31 - 1, stride_alignment=16, contiguous_dim=True),
        description="C always stored through a tensor descriptor",
    ),
    bug="TMA store on a C whose rows are not a multiple of 16 bytes overwrites past each row (#11583)",
    dtype="fp16",
    smallest=dict(M=1, N=1, K=1, a=_PADDED, b=_PADDED, c=_PADDED),
    why="a 1-element fp16 row is 2 bytes: the store also writes the 14 bytes after it, C's padding "
        "(the suite's canaries caught exactly this on an H100)",
    caught_as="WriteOutsideC",
    gpu_only=True,
    gpu_only_why="the interpreter runs a descriptor store element by element and clips it exactly at C's shape",
    unaffected=dict(N=8, b={}, c={}),  # rows of 8 fp16: 16 bytes, no padding needed
))
