"""The tiled GEMM of seed 002 with a fused epilogue, as cuBLASLt orders it:

    C = gelu(alpha * (A @ B) + beta * C_in + bias[n])

in fp32 on the accumulator, then one cast to C's dtype. gelu is erf's (tl.math.erf); the bias has
C's dtype and any stride (0: one value for every column); beta == 0 means C_in is not read (BLAS), so
NaN there never reaches C. `epilogue` is the fused tail, shared with `persistent_epilogue`.
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import registry
from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.kernels.registry import INT32_OFFSETS, Variant, register

OPERATION = Operation(alpha=True, beta=True, bias="n", activation="gelu")
DTYPES = {torch.float16: (torch.float16, torch.float32), torch.bfloat16: (torch.bfloat16, torch.float32),
          torch.float32: (torch.float32,)}


@triton.jit
def epilogue(acc, offs_m, offs_n, M, N, cin_ptr, stride_im, stride_in, bias_ptr, stride_bias, alpha, beta):
    """alpha * acc + beta * C_in + bias, through erf's gelu, in fp32 (rows offs_m, columns offs_n)."""
    inside = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    y = acc * alpha
    if beta != 0:  # BLAS: beta == 0 means C_in is not read
        c_in = tl.load(cin_ptr + offs_m[:, None] * stride_im + offs_n[None, :] * stride_in, mask=inside, other=0.0)
        y += beta * c_in.to(tl.float32)
    bias = tl.load(bias_ptr + offs_n * stride_bias, mask=offs_n < N, other=0.0)
    y += bias.to(tl.float32)[None, :]
    return 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476))


@triton.jit
def tiled_epilogue_kernel(
    a_ptr, b_ptr, c_ptr, cin_ptr, bias_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_im, stride_in, stride_bias,
    alpha, beta,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=tl.float32)
    out = epilogue(acc, offs_m, offs_n, M, N, cin_ptr, stride_im, stride_in, bias_ptr, stride_bias, alpha, beta)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, out.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


CONFIGS = {
    "cpu": (dict(BM=16, BN=32, BK=16, num_warps=1, num_stages=1), dict(BM=32, BN=16, BK=32, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=128, BN=128, BK=64, num_warps=4, num_stages=4), dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=3)),
    "cuda/fp32": (dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=3),),
}


@registry.launcher("tiled_epilogue")
def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict, *,
           bias: torch.Tensor, c_in: torch.Tensor, alpha: float, beta: float) -> None:
    grid = (triton.cdiv(M, cfg["BM"]), triton.cdiv(N, cfg["BN"]))
    tiled_epilogue_kernel[grid](
        a, b, c, c_in, bias, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        c_in.stride(0), c_in.stride(1), bias.stride(0), float(alpha), float(beta),
        BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], PRECISION="ieee", **registry.options(cfg),
    )


register(Variant(name="tiled_epilogue", launch=launch, dtypes=DTYPES, precision="ieee", configs=CONFIGS,
                 origin="seed 002's tiled matmul with cuBLASLt's fused epilogue (bias, gelu, alpha, beta)",
                 requirements=INT32_OFFSETS, description="2-D grid; gelu(alpha * AB + beta * C_in + bias) in fp32",
                 operation=OPERATION))
