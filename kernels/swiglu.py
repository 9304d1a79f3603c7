"""A fused SwiGLU projection, as Liger-Kernel's MoE kernels compute it: B (K x 2N) holds the gate
columns, then the up columns; one program computes both halves of a tile,

    pre = A @ B                 (M x 2N, stored for the backward pass)
    C   = silu(A @ B_gate) * (A @ B_up)   (M x N)

in fp32 (silu as x * sigmoid(x)), each stored once in C's dtype."""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import registry
from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.kernels.registry import INT32_OFFSETS, Variant, register

DTYPES = {torch.float16: (torch.float16, torch.float32), torch.bfloat16: (torch.bfloat16, torch.float32),
          torch.float32: (torch.float32,)}


@triton.jit
def swiglu_kernel(
    a_ptr, b_ptr, c_ptr, pre_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_pm, stride_pn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    gate = tl.zeros((BM, BN), dtype=tl.float32)
    up = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0)
        b_mask = ((k + offs_k)[:, None] < K) & (offs_n[None, :] < N)
        b_rows = b_ptr + (k + offs_k)[:, None] * stride_bk
        b_gate = tl.load(b_rows + offs_n[None, :] * stride_bn, mask=b_mask, other=0.0)
        b_up = tl.load(b_rows + (N + offs_n)[None, :] * stride_bn, mask=b_mask, other=0.0)
        gate = tl.dot(a, b_gate, gate, input_precision=PRECISION, out_dtype=tl.float32)
        up = tl.dot(a, b_up, up, input_precision=PRECISION, out_dtype=tl.float32)
    inside = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    pre_rows = pre_ptr + offs_m[:, None] * stride_pm
    tl.store(pre_rows + offs_n[None, :] * stride_pn, gate.to(pre_ptr.dtype.element_ty), mask=inside)
    tl.store(pre_rows + (N + offs_n)[None, :] * stride_pn, up.to(pre_ptr.dtype.element_ty), mask=inside)
    out = gate * tl.sigmoid(gate) * up
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, out.to(c_ptr.dtype.element_ty),
             mask=inside)


CONFIGS = {
    "cpu": (dict(BM=16, BN=16, BK=16, num_warps=1, num_stages=1), dict(BM=32, BN=16, BK=32, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=3), dict(BM=128, BN=64, BK=64, num_warps=8, num_stages=3)),
    "cuda/fp32": (dict(BM=64, BN=32, BK=32, num_warps=4, num_stages=3),),
}


@registry.launcher("swiglu")
def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict, *,
           pre: torch.Tensor) -> None:
    grid = (triton.cdiv(M, cfg["BM"]), triton.cdiv(N, cfg["BN"]))
    swiglu_kernel[grid](
        a, b, c, pre, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1), pre.stride(0), pre.stride(1),
        BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], PRECISION="ieee", **registry.options(cfg),
    )


register(Variant(name="swiglu", launch=launch, dtypes=DTYPES, precision="ieee", configs=CONFIGS,
                 origin="Liger-Kernel's fused MoE: pre = x @ W_gate_up, post = silu(gate) * up",
                 requirements=INT32_OFFSETS, description="gated: silu(A @ B_gate) * (A @ B_up), the product kept",
                 operation=Operation(activation="silu", gated="concat", pre_activation=True)))
