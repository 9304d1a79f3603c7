"""The float64 truth of a product of scaled operands, and a sound bound on what a correct kernel holds
before its epilogue (kernels/operation.py declares the scales).

Dequantization is exact in float64: an fp8 or int8 code (at most 8 significant bits) times an fp32
scale (24) needs 32 bits; an int4 code less its zero point, 5. So the reference is the float64 product
of A' = A * a_scale and B' = B * b_scale, with IEEE semantics for non-finite values (a NaN scale makes
every element it reaches NaN, as a kernel's partial * NaN does).

A kernel computes partial dots of codes and multiplies each by its scales afterwards, per K tile or
once at the end, in fp32. Whatever its tiling, each product a'b' passes through at most K additions in
the accumulator (`reference.bounds.accumulation` over A' and B', with the tensor cores' alignment scaled
by the scales) and at most K + 2 further fp32 roundings (two scale multiplications and the addition of
its partial to the running sum, at most once per element of K), each under 2**-24 relative, and an
underflow's absolute error each. Weight-only codes (w4a16, w8a16) are dequantized into A's dtype before
the dot: each weight rounds there once (its unit roundoff, and 0 where it underflows).

Exact where every scale is a power of two (each scaling exact), the codes' partial sums stay within the
accumulator's exact range, and the row of A' and column of B' are integers whose sums fp32 holds
exactly. Not judged: elements an infinite scale (or a weight past A's dtype) reaches (partial * Inf is
NaN or Inf depending on whether the partial cancelled to 0), and elements where a partial scaled by one
scale first, or the product of the two scales (the kernel's choice), may overflow fp32 though the
result would not.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from gemm_fuzz.reference import bounds
from gemm_fuzz.reference.formats import FORMATS, by_name
from gemm_fuzz.reference.numpy_ref import Product, product, to_float64

FP32 = FORMATS["fp32"]
_EVAL_SLACK = 1.0 + 2.0**-40  # float64 evaluation of the bound rounds too


def expanded(op, operand: str, scale: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The scale of every element of A (operand "a", M x K) or B ("b", K x N), float64."""
    rows, cols = shape
    s = np.asarray(scale, dtype=np.float64)
    granularity = op.a_scale if operand == "a" else op.b_scale
    if granularity == "tensor":
        return np.broadcast_to(s.reshape(1, 1), shape)
    if granularity == "row":
        return np.broadcast_to(s[:, None], shape)
    if granularity == "col":
        return np.broadcast_to(s[None, :], shape)
    k_groups = np.arange(cols if operand == "a" else rows) // op.group_k
    if operand == "a":  # group: (M, K groups)
        return s[:, k_groups]
    if granularity == "group":  # (K groups, N)
        return s[k_groups, :]
    return s[k_groups][:, np.arange(cols) // op.group_n]  # block: (K groups, N groups)


def unpacked(op, b: torch.Tensor, K: int) -> np.ndarray:
    """Weight-only B's codes, K x N, as float64 integers (int4: two a byte along K, even k low)."""
    stored = to_float64(b).astype(np.int64)
    if op.weight != "int4":
        return stored.astype(np.float64)
    codes = np.empty((2 * stored.shape[0], stored.shape[1]), dtype=np.int64)
    codes[0::2], codes[1::2] = stored & 0xF, (stored >> 4) & 0xF
    return codes[:K].astype(np.float64)


def zero_points(op, b_zero: torch.Tensor | None, shape: tuple[int, int]) -> np.ndarray:
    """Each weight's zero point: 8 (int4's default), 0 (int8), or unpacked from b_zero (K groups x N)."""
    if b_zero is None:
        return np.full(shape, 8.0 if op.weight == "int4" else 0.0)
    words = to_float64(b_zero).astype(np.int64) & 0xFFFFFFFF
    per_group = np.stack([(words >> (4 * i)) & 0xF for i in range(8)], axis=-1).reshape(words.shape[0],
                                                                                     8 * words.shape[1])
    rows = np.arange(shape[0]) // op.group_k if op.b_scale == "group" else np.zeros(shape[0], dtype=np.int64)
    return per_group[rows][:, :shape[1]].astype(np.float64)


def dequantized(op, a: torch.Tensor, b: torch.Tensor, scales: dict):
    """A' and B' as float64 arrays, exactly, and what the bound needs: the codes the dot multiplies and
    each element's scale (weight-only: the dequantized weights themselves, scale 1, as the dot takes
    them). `scales`: a_scale, b_scale and b_zero where the operation has them."""
    K = a.shape[-1]
    if op.weight:
        a2, codes = to_float64(a), unpacked(op, b, K)
        sb = expanded(op, "b", to_float64(scales["b_scale"]), codes.shape)
        with np.errstate(invalid="ignore", over="ignore"):
            b2 = (codes - zero_points(op, scales.get("b_zero"), codes.shape)) * sb
        return a2, b2, (a2, b2, np.ones(a2.shape), np.ones(b2.shape))
    sa = expanded(op, "a", to_float64(scales["a_scale"]), tuple(a.shape))
    sb = expanded(op, "b", to_float64(scales["b_scale"]), tuple(b.shape))
    codes_a, codes_b = to_float64(a), to_float64(b)
    with np.errstate(invalid="ignore", over="ignore"):
        return codes_a * sa, codes_b * sb, (codes_a, codes_b, sa, sb)


def scaled_product(op, a, b, scales: dict) -> tuple[Product, tuple]:
    """The float64 product of the dequantized operands, and what its bound needs (codes and scales)."""
    a2, b2, parts = dequantized(op, a, b, scales)
    return product(torch.from_numpy(np.ascontiguousarray(a2)), torch.from_numpy(np.ascontiguousarray(b2))), parts


def _scale_products(op, sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
    """The largest a_scale * b_scale an element's partials are multiplied by, over its K groups (a kernel
    may form that product first: Inf there makes partial * Inf Inf or NaN)."""
    K = sa.shape[-1]
    grouped = "group" in (op.a_scale, op.b_scale) or op.b_scale == "block"
    largest = np.zeros((sa.shape[0], sb.shape[-1]))
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(0, K, op.group_k if grouped else max(K, 1)):
            largest = np.fmax(largest, np.abs(np.multiply.outer(sa[:, k], sb[k, :])))
    return largest


def product_term(op, prod: Product, parts: tuple, k: int, dtype: str):
    """The scaled product before the epilogue (`op`'s scales), as reference.epilogue's Term: value, error
    bound, exact and free elements."""
    from gemm_fuzz.reference.epilogue import Term

    codes_a, codes_b, sa, sb = parts
    arith = bounds.arithmetic(dtype)
    fmt = by_name(dtype)
    if op.weight:  # each weight rounded into A's dtype before the dot (to 0 where it underflows)
        arith = replace(arith, input_u=fmt.u, input_tiny=fmt.min_normal)
    with np.errstate(invalid="ignore", over="ignore"):
        fa, fb, ua, ub = (np.where(np.isfinite(x), np.abs(x), 0.0) for x in (codes_a, codes_b, sa, sb))
        aligned = None
        if arith.align_floor:  # a tensor core aligns a subnormal code by the smallest normal exponent
            floor = arith.align_floor
            lift = lambda x: np.where((x < floor) & (x != 0), floor, x)  # noqa: E731
            aligned = (lift(fa) * ua) @ (lift(fb) * ub)
        err = bounds.accumulation(prod, k, arith, aligned=aligned if aligned is not None else prod.magnitude)
        P = prod.magnitude
        steps = k + 2
        g = bounds.gamma(steps, FP32.u)
        err = (err + g * (P + err) + steps * (1 + g) * FP32.min_normal) * _EVAL_SLACK
        # intermediates: a partial scaled by one of its scales first, and the codes' own partial sums
        once = np.maximum((fa * ua) @ fb, fa @ (fb * ub))
        overflow = np.maximum(once, P + err) * (1 + 2 * g) >= FP32.overflow_threshold
        overflow |= _scale_products(op, sa, sb) >= FP32.overflow_threshold  # a_scale * b_scale first
        inf_scale = np.isinf(sa).any(axis=-1)[:, None] | np.isinf(sb).any(axis=-2)[None, :]
        if op.weight:  # a weight past A's dtype's range is Inf there
            inf_scale = inf_scale | (fb * (1 + fmt.u) >= fmt.overflow_threshold).any(axis=-2)[None, :]
        classes = bounds.allowance(prod, k, arith, FP32)  # the scaled sums are fp32
    free = classes.ambiguous() | (overflow & np.isfinite(prod.value)) | inf_scale
    exact = np.zeros(P.shape, bool)
    if all(_powers_of_two(s) for s in (sa, sb)):  # integer dequantized values whose sums every step holds
        rows, cols = np.isfinite(prod.row_integers), np.isfinite(prod.col_integers)
        if op.weight:  # weights that A's dtype holds exactly
            cols = cols & (prod.col_integers <= fmt.exact_integer_limit)
        exact = rows[:, None] & cols[None, :] & (P <= 2.0**FP32.p) & (fa @ fb <= 2.0**arith.exact_bits)
    return Term(prod.value, np.where(exact, 0.0, err), exact, free)


def _powers_of_two(s: np.ndarray) -> bool:
    """Every finite non-zero entry a power of two (0 and non-finite ones do not spoil exactness here:
    the product's own classes handle them)."""
    finite = s[np.isfinite(s) & (s != 0)]
    mantissa, _ = np.frexp(finite)
    return bool(np.all(np.abs(mantissa) == 0.5))
