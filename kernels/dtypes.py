"""What the variants take and accumulate in: input dtype -> the output dtypes accepted for it (the
first is the default), and the accumulator each input dtype uses."""

import torch
import triton.language as tl

# fp16/bf16 in may write fp32 out (mixed precision); fp8 writes a wider float; int8 accumulates and
# writes int32, so its results are exact
ALL_DTYPES = {
    torch.float16: (torch.float16, torch.float32),
    torch.bfloat16: (torch.bfloat16, torch.float32),
    torch.float32: (torch.float32,),
    torch.float8_e4m3fn: (torch.float32, torch.float16, torch.bfloat16),
    torch.float8_e5m2: (torch.float32, torch.float16, torch.bfloat16),
    torch.int8: (torch.int32,),
}
# scaled codes (kernels/operation.py): the product of dequantized operands is a float
SCALED_DTYPES = {
    torch.float8_e4m3fn: (torch.bfloat16, torch.float16, torch.float32),
    torch.float8_e5m2: (torch.bfloat16, torch.float16, torch.float32),
    torch.int8: (torch.float16, torch.bfloat16, torch.float32),
}
# weight-only codes (w4a16, w8a16, MXFP4 weights): A's dtype -> C's
WEIGHT_ONLY_DTYPES = {torch.float16: (torch.float16, torch.float32), torch.bfloat16: (torch.bfloat16, torch.float32)}
# e2m1 codes in B (weight="e2m1") under scaled A: fp8 codes, or (A's dtype uint8) e2m1 codes two a byte
FP4_DTYPES = {torch.float8_e4m3fn: SCALED_DTYPES[torch.float8_e4m3fn],
              torch.float8_e5m2: SCALED_DTYPES[torch.float8_e5m2],
              torch.uint8: (torch.bfloat16, torch.float16, torch.float32)}

# grouped and MoE products (kernels/operation.py: `grouped`): fp16, bf16 and fp32 activations and weights
GROUPED_DTYPES = {d: ALL_DTYPES[d] for d in (torch.float16, torch.bfloat16, torch.float32)}


def dtypes_for(operation) -> dict:
    """The input -> output dtype pairs the suite tests for a kernel computing `operation`."""
    if operation.grouped and not operation.scaled:
        return GROUPED_DTYPES
    if operation.weight_only:
        return WEIGHT_ONLY_DTYPES
    if operation.weight == "e2m1":
        return FP4_DTYPES
    return SCALED_DTYPES if operation.scaled else ALL_DTYPES


def accumulator(dtype: torch.dtype):
    """The tl dtype a kernel accumulates `dtype` inputs in."""
    return tl.int32 if dtype == torch.int8 else tl.float32


def accumulator_torch(dtype: torch.dtype) -> torch.dtype:
    return torch.int32 if dtype == torch.int8 else torch.float32
