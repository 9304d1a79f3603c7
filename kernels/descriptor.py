"""A GEMM through tensor descriptors (tl.make_tensor_descriptor; TMA on Hopper): tiles are loaded and
stored as whole blocks, the descriptor's shape does the bounds checking (loads past it read zeros,
stores past it are dropped), so the kernel needs no masks.

Except on one edge: a TMA store clips at 16-byte granularity, so when C's inner extent is not a
multiple of 16 bytes it also overwrites the memory after each row up to the next 16-byte boundary
(triton-lang/triton#11583; this suite's canaries caught it on an H100 with a 1x1x1 fp16 case).
The launcher therefore stores C through the descriptor only when its inner extent is 16-byte
aligned, and otherwise with a masked tl.store.

Tensor descriptors have rules, declared as this variant's requirements and refused by its launcher:
each operand needs one dimension of stride 1 (a row- or column-major operand; column-major ones are
described transposed and transposed back after the load), the other stride a multiple of 16 bytes,
and a 16-byte aligned base. Grouped tile order as in `grouped`."""

from dataclasses import replace

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import dtypes, registry
from gemm_fuzz.kernels.registry import INT32_OFFSETS, register_precisions


@triton.jit
def _describe(ptr, rows, cols, stride, COL_MAJOR: tl.constexpr, B_ROWS: tl.constexpr, B_COLS: tl.constexpr):
    """A descriptor over a rows x cols operand; a column-major one is described as its transpose."""
    if COL_MAJOR:
        return tl.make_tensor_descriptor(ptr, shape=[cols, rows], strides=[stride, 1], block_shape=[B_COLS, B_ROWS])
    else:
        return tl.make_tensor_descriptor(ptr, shape=[rows, cols], strides=[stride, 1], block_shape=[B_ROWS, B_COLS])


@triton.jit
def descriptor_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_a, stride_b,  # the non-unit stride of A and of B
    stride_cm, stride_cn,
    A_COL: tl.constexpr, B_COL: tl.constexpr, C_COL: tl.constexpr, C_TMA: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, PRECISION: tl.constexpr,
    ACC: tl.constexpr,
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

    acc = tl.zeros((BM, BN), dtype=ACC)
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
        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)
    out = acc.to(c_ptr.dtype.element_ty)
    if C_TMA:
        c_desc = _describe(c_ptr, M, N, stride_cn if C_COL else stride_cm, C_COL, BM, BN)
        if C_COL:
            c_desc.store([off_n, off_m], out.T)
        else:
            c_desc.store([off_m, off_n], out)
    else:  # a TMA store would overwrite up to 16 bytes past C's rows (triton-lang/triton#11583)
        offs_m = off_m + tl.arange(0, BM)
        offs_n = off_n + tl.arange(0, BN)
        tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, out,
                 mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# 128 x 256 x 64 is the fastest on the H100 (0.97x torch.matmul at 8192 x 6144 x 4096), but
# transposing a column-major operand, staging a masked store or staging a 4-byte output needs more
# shared memory than it leaves (278 KB of 227): those cases take SMALLER instead.
CONFIGS = {
    "cpu": (dict(BM=16, BN=32, BK=16, GROUP_M=2, num_warps=1, num_stages=1),
            dict(BM=32, BN=16, BK=32, GROUP_M=1, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=128, BN=256, BK=64, GROUP_M=8, num_warps=8, num_stages=3),
             dict(BM=128, BN=128, BK=64, GROUP_M=8, num_warps=8, num_stages=3),
             dict(BM=64, BN=128, BK=64, GROUP_M=4, num_warps=4, num_stages=4)),
    "cuda/fp32": (dict(BM=128, BN=128, BK=32, GROUP_M=8, num_warps=8, num_stages=3),
                  dict(BM=64, BN=64, BK=32, GROUP_M=4, num_warps=4, num_stages=4)),
}
SMALLER = dict(BM=128, BN=128, BK=64)


def _allocate_scratch(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _orientation(t: torch.Tensor) -> tuple[bool, int]:
    """(column-major?, the non-unit stride) of an operand the launcher has validated."""
    if t.stride(1) == 1:
        return False, t.stride(0)
    return True, t.stride(1)


def make_launch(name: str, precision: str):
    @registry.launcher(name)
    def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict) -> None:
        (a_col, sa), (b_col, sb), (c_col, _) = _orientation(a), _orientation(b), _orientation(c)
        inner = M if c_col else N
        c_tma = (inner * c.element_size()) % 16 == 0
        if a.device.type == "cuda":
            plain = c_tma and c.element_size() <= 2 and not (a_col or b_col or c_col)
            if cfg["BM"] * cfg["BN"] > 128 * 128 and not plain:
                cfg.update(SMALLER)  # the big tile does not fit shared memory here
            triton.set_allocator(_allocate_scratch)  # in-kernel descriptors need global scratch memory
        descriptor_kernel[(triton.cdiv(M, cfg["BM"]) * triton.cdiv(N, cfg["BN"]),)](
            a, b, c, M, N, K, sa, sb, c.stride(0), c.stride(1),
            A_COL=a_col, B_COL=b_col, C_COL=c_col, C_TMA=c_tma,
            BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], GROUP_M=cfg["GROUP_M"], PRECISION=precision,
            ACC=dtypes.accumulator(a.dtype), **registry.options(cfg),
        )

    return launch


register_precisions("descriptor", make_launch, CONFIGS, replace(INT32_OFFSETS, stride_alignment=16, contiguous_dim=True),
                    origin="Triton tutorial 09's TMA path: tl.make_tensor_descriptor loads and stores, no masks",
                    description="tensor descriptors (TMA on Hopper), row- or column-major operands; masked C store on ragged rows")
