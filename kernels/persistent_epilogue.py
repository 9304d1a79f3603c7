"""A persistent GEMM with the same fused epilogue as `tiled_epilogue` (cuBLASLt's order, gelu, fp32):
a grid of one program per streaming multiprocessor (kernels.machine), each looping over the output
tiles tile_id = pid, pid + programs, ... in row-major tile order, accumulating one tile at a time and
finishing it through `tiled_epilogue.epilogue`. Its results agree with `tiled_epilogue`'s on every
case: the same operation, another schedule."""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import machine, registry
from gemm_fuzz.kernels.registry import INT32_OFFSETS, Variant, register
from gemm_fuzz.kernels.tiled_epilogue import DTYPES, OPERATION, epilogue


@triton.jit
def persistent_epilogue_kernel(
    a_ptr, b_ptr, c_ptr, cin_ptr, bias_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_im, stride_in, stride_bias,
    alpha, beta, PROGRAMS,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr,
):
    tiles_n = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * tiles_n
    for tile_id in range(tl.program_id(0), tiles, PROGRAMS):
        offs_m = (tile_id // tiles_n) * BM + tl.arange(0, BM)
        offs_n = (tile_id % tiles_n) * BN + tl.arange(0, BN)
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
    "cpu": (dict(BM=16, BN=16, BK=16, num_warps=1, num_stages=1), dict(BM=32, BN=16, BK=16, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=128, BN=128, BK=64, num_warps=8, num_stages=3), dict(BM=64, BN=128, BK=32, num_warps=4, num_stages=4)),
    "cuda/fp32": (dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=3),),
}


@registry.launcher("persistent_epilogue")
def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict, *,
           bias: torch.Tensor, c_in: torch.Tensor, alpha: float, beta: float) -> None:
    tiles = triton.cdiv(M, cfg["BM"]) * triton.cdiv(N, cfg["BN"])
    programs = min(tiles, machine.multiprocessors(a.device))
    persistent_epilogue_kernel[(programs,)](
        a, b, c, c_in, bias, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        c_in.stride(0), c_in.stride(1), bias.stride(0), float(alpha), float(beta), programs,
        BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], PRECISION="ieee", **registry.options(cfg),
    )


register(Variant(name="persistent_epilogue", launch=launch, dtypes=DTYPES, precision="ieee", configs=CONFIGS,
                 origin="tutorial 09's persistent schedule with cuBLASLt's fused epilogue (bias, gelu, alpha, beta)",
                 requirements=INT32_OFFSETS, description="one program per SM looping over tiles; the same epilogue",
                 operation=OPERATION))
