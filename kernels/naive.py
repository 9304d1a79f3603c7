"""The slow, obviously-right baseline: the thread-level view of seed 000 made Triton. Each program
owns a small tile of C and accumulates outer products on CUDA cores, one K strip at a time, with
no tl.dot (so no tensor cores, no tf32, no reduced-precision accumulation). Arbitrary strides."""

import torch
import triton
import triton.language as tl

from kernels import operands, registry
from kernels.registry import SAME_DTYPE, Requirements, Variant, register


@triton.jit
def naive_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0).to(tl.float32)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0).to(tl.float32)
        # every product a[m, k] * b[k, n], summed over this strip: plain fp32 multiplies and adds
        acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


CPU_CONFIG = (16, 16, 8)
GPU_CONFIG = (32, 32, 8)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    M, N, K = operands.check(registry.get("naive"), a, b, c)
    if M == 0 or N == 0:
        return
    bm, bn, bk = CPU_CONFIG if a.device.type == "cpu" else GPU_CONFIG
    naive_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=bm, BN=bn, BK=bk, num_warps=4,
    )


register(
    Variant(
        name="naive",
        launch=launch,
        dtypes=SAME_DTYPE,
        precision="ieee",
        blocks={"cpu": (CPU_CONFIG,), "cuda": (GPU_CONFIG,)},
        origin="seed 000: the thread-level CUDA matmul, one small tile of C per program",
        requirements=Requirements(max_offset=2**31 - 1),
        description="outer products on CUDA cores, no tl.dot",
    )
)
