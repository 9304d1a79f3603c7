"""The torch peer: torch.matmul on the device under test, and float64 on the CPU as a second opinion.

On CUDA, torch would otherwise be free to compute fp32 in tf32 and to reduce fp16/bf16 in reduced
precision; `ieee_matmul` turns both off so the peer is held to the same bound as the kernels.
Dtypes torch cannot multiply natively on every device (int8, fp8) are upcast exactly first.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

_NATIVE = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@contextmanager
def ieee_matmul():
    m = torch.backends.cuda.matmul
    saved = (
        torch.get_float32_matmul_precision(),
        m.allow_fp16_reduced_precision_reduction,
        m.allow_bf16_reduced_precision_reduction,
    )
    torch.set_float32_matmul_precision("highest")
    m.allow_fp16_reduced_precision_reduction = False
    m.allow_bf16_reduced_precision_reduction = False
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved[0])
        m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction = saved[1:]


def on_device(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """torch.matmul where a and b live, rounded once to out_dtype."""
    with ieee_matmul():
        if a.dtype in _NATIVE and out_dtype == a.dtype:
            return torch.matmul(a, b)
        if a.dtype.is_floating_point:
            # fp8 values, and fp16/bf16 values for an fp32 output, are exact in fp32
            wide = torch.float32 if out_dtype != torch.float64 else torch.float64
            return torch.matmul(a.to(wide), b.to(wide)).to(out_dtype)
        # integers: float64 holds every int8 product and sum below 2**53 exactly
        return torch.matmul(a.to(torch.float64), b.to(torch.float64)).to(out_dtype)


def float64_cpu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The product in float64 on the CPU (the inputs' values converted exactly)."""
    return torch.matmul(a.detach().cpu().double(), b.detach().cpu().double())
