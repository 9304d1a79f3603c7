"""The float64 truth of a product of scaled operands, and a sound bound on what a correct kernel holds
before its epilogue (kernels/operation.py declares the scales).

Dequantization is exact in float64: an fp8 or int8 code (at most 8 significant bits) times an fp32
scale (24) needs 32 bits; an int4 code less its zero point, 5; an e2m1 code 2, an E8M0 scale 1. So the
reference decodes the codes (int4 and e2m1 unpacked from their bytes or int32 words, E8M0 bytes as
the OCP MX specification says) and is the float64 product of A' = A * a_scale and B' = B * b_scale,
with IEEE semantics for non-finite values (a NaN scale makes every element it reaches NaN, as a
kernel's partial * NaN does).

A kernel computes partial dots of codes and multiplies each by its scales afterwards, per K tile or
once at the end, in fp32. Whatever its tiling, each product a'b' passes through at most K additions in
the accumulator (`reference.bounds.accumulation` over A' and B', with the tensor cores' alignment scaled
by the scales) and at most K + 2 further fp32 roundings (two scale multiplications and the addition of
its partial to the running sum, at most once per element of K), each under 2**-24 relative, and an
underflow's absolute error each. Weight-only codes (w4a16, w8a16) are dequantized into A's dtype before
the dot: each weight rounds there once (its unit roundoff, and 0 where it underflows).

Exact where every scale is a power of two (each scaling exact), the codes' partial sums stay within the
accumulator's exact range, and the row of A' and column of B' are integers whose sums fp32 holds
exactly. Microscaled codes (E8M0 or e4m3 scales) may meet their scales in bf16 before the dot, as
tl.dot_scaled's emulation on Hopper does, where a value below bf16's smallest normal is flushed to 0:
counted like an input that may round to 0. Weights scaled after the dot are never rounded into A's
dtype; float zero points add q * s's fp32 rounding, which is not relative to the weight. Not judged:
elements an infinite scale (or a weight past A's dtype, or a code times its microscale past bf16's
range) reaches (partial * Inf is NaN or Inf depending on whether the partial cancelled to 0), and
elements where a partial scaled by one scale first, or the product of the two scales (the kernel's
choice), may overflow fp32 though the result would not.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from gemm_fuzz.reference import bounds
from gemm_fuzz.reference.formats import FORMATS, by_name
from gemm_fuzz.reference.numpy_ref import Product, product, to_float64

FP32, BF16 = FORMATS["fp32"], FORMATS["bf16"]
MX_SCALES = ("e8m0", "e4m3")  # microscaling: a kernel may dequantize into bf16 before the dot
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


# e2m1 (fp4): sign bit 3, magnitudes by the low three bits (OCP MX specification)
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def e8m0(stored: np.ndarray) -> np.ndarray:
    """E8M0 scale bytes as float64: byte e is 2**(e - 127), 0x00 2**-127 (not 0), 0xFF NaN."""
    e = np.asarray(stored, dtype=np.int64) & 0xFF
    return np.where(e == 0xFF, np.nan, np.exp2((e - 127).astype(np.float64)))


def scale_values(op, t: torch.Tensor) -> np.ndarray:
    """A scale (or float zero point) tensor's values in float64, as its dtype decodes them."""
    return e8m0(to_float64(t)) if op.scale_dtype == "e8m0" else to_float64(t)


def nibbles(stored: np.ndarray, axis: int, count: int, order=(0, 1)) -> np.ndarray:
    """The 4-bit fields of bytes or int32 words, unpacked along `axis`: element j * len(order) + i of the
    unpacked axis is word j's bits 4 * order[i] .. + 3; the first `count` elements."""
    words = np.moveaxis(np.asarray(stored, dtype=np.int64) & 0xFFFFFFFF, axis, -1)
    fields = np.stack([(words >> (4 * o)) & 0xF for o in order], axis=-1)
    unpacked = fields.reshape(*words.shape[:-1], words.shape[-1] * len(order))[..., :count]
    return np.moveaxis(unpacked, -1, axis)


def unpacked(op, b: torch.Tensor, K: int, N: int) -> np.ndarray:
    """B's codes, K x N, as float64: integers (int8; int4 0..15 unpacked as `op.packing` says) or e2m1
    values."""
    stored = to_float64(b)
    if op.weight == "int8":
        return stored
    if op.weight == "e2m1":
        return E2M1[nibbles(stored, 0, K)]
    layout = {"k2": (0, K, (0, 1)), "k8": (0, K, op.pack_order), "n8": (1, N, op.pack_order)}[op.packing]
    return nibbles(stored, *layout).astype(np.float64)


def a_codes(op, a: torch.Tensor) -> np.ndarray:
    """A's codes as float64: its values, or (e2m1 two a byte along K) decoded."""
    stored = to_float64(a)
    return E2M1[nibbles(stored, 1, 2 * stored.shape[1])] if op.packs_a(a.dtype) else stored


def zero_points(op, b_zero: torch.Tensor | None, shape: tuple[int, int]) -> np.ndarray:
    """Each weight's zero point, K x N: 8 (int4's default), 0 (int8, e2m1), unpacked from b_zero (eight an
    int32 along N, a row per K group), or b_zero's integers (zero="int") or floats (zero="float")."""
    if b_zero is None:
        return np.full(shape, 8.0 if op.weight == "int4" else 0.0)
    K, N = shape
    rows = np.arange(K) // op.group_k if op.b_scale == "group" else np.zeros(K, dtype=np.int64)
    if op.zero in ("float", "int"):
        return scale_values(op, b_zero)[rows] if op.zero == "float" else to_float64(b_zero)[rows]
    return nibbles(to_float64(b_zero), 1, N, op.pack_order)[rows].astype(np.float64)


def dequantized(op, a: torch.Tensor, b: torch.Tensor, scales: dict):
    """A' and B' as float64 arrays, exactly, and what the bound needs: the codes the dot multiplies and
    each element's scale (weights dequantized before the dot: the weights themselves, scale 1, as the
    dot takes them). `scales`: a_scale, b_scale and b_zero where the operation has them."""
    codes_a = a_codes(op, a)
    K = codes_a.shape[-1]
    b_scale = scale_values(op, scales["b_scale"])
    N = b_scale.shape[-1] if op.weight_only else b.shape[-1]
    codes_b = unpacked(op, b, K, N) if op.weight else to_float64(b)
    sb = expanded(op, "b", b_scale, codes_b.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        if op.weight_only:
            z = zero_points(op, scales.get("b_zero"), codes_b.shape)
            ones_a, ones_b = np.ones(codes_a.shape), np.ones(sb.shape)
            if op.zero == "float":  # q * s rounds in fp32 before z is added: its error is not relative to w
                b2 = codes_b * sb + z
                return codes_a, b2, (codes_a, b2, ones_a, ones_b, 2 * FP32.u * np.abs(codes_b * sb))
            b2 = (codes_b - z) * sb
            if op.scale_after_dot:
                return codes_a, b2, (codes_a, codes_b - z, ones_a, sb, None)
            return codes_a, b2, (codes_a, b2, ones_a, ones_b, None)
        sa = expanded(op, "a", scale_values(op, scales["a_scale"]), codes_a.shape)
        return codes_a * sa, codes_b * sb, (codes_a, codes_b, sa, sb, None)


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

    codes_a, codes_b, sa, sb, weight_err = parts
    arith = bounds.arithmetic(dtype)
    fmt = by_name(dtype)
    rounded = op.weight_only and not op.scale_after_dot
    if rounded:  # each weight scaled in fp32 and rounded into A's dtype before the dot, to its subnormals
        arith = replace(arith, input_u=fmt.u + FP32.u * (1 + fmt.u), input_tiny=fmt.min_subnormal)
    elif op.scale_dtype in MX_SCALES:  # codes and scales may meet in bf16 before the dot (tl.dot_scaled's
        # emulation on Hopper): exact, but below bf16's smallest normal possibly flushed to 0 (kept conservative)
        arith = replace(arith, input_tiny=BF16.min_normal)
    with np.errstate(invalid="ignore", over="ignore"):
        fa, fb, ua, ub = (np.where(np.isfinite(x), np.abs(x), 0.0) for x in (codes_a, codes_b, sa, sb))
        aligned = None
        if arith.align_floor:  # a tensor core aligns a subnormal code by the smallest normal exponent
            floor = arith.align_floor
            lift = lambda x: np.where((x < floor) & (x != 0), floor, x)  # noqa: E731
            aligned = (lift(fa) * ua) @ (lift(fb) * ub)
        err = bounds.accumulation(prod, k, arith, aligned=aligned if aligned is not None else prod.magnitude)
        if weight_err is not None:
            err = err + (1 + 2 * arith.input_u) * (np.abs(np.where(np.isfinite(codes_a), codes_a, 0.0))
                                                   @ np.where(np.isfinite(weight_err), weight_err, 0.0))
        P = prod.magnitude
        steps = k + 2
        g = bounds.gamma(steps, FP32.u)
        # an underflow loses at most half the smallest subnormal (fp32's gradual underflow), but a scaling
        # after it multiplies what was lost: partial * a_scale underflowing, then times b_scale (or the
        # other way round), or a_scale * b_scale underflowing, then times the partial of codes
        largest = np.maximum(ua.max(axis=-1, initial=0)[:, None], ub.max(axis=-2, initial=0)[None, :])
        tiny = steps * FP32.min_normal + FP32.min_subnormal * (steps * largest + fa @ fb)
        err = (err + g * (P + err) + (1 + g) * tiny) * _EVAL_SLACK
        # intermediates: a partial scaled by one of its scales first, and the codes' own partial sums
        once = np.maximum((fa * ua) @ fb, fa @ (fb * ub))
        overflow = np.maximum(once, P + err) * (1 + 2 * g) >= FP32.overflow_threshold
        overflow |= _scale_products(op, sa, sb) >= FP32.overflow_threshold  # a_scale * b_scale first
        inf_scale = np.isinf(sa).any(axis=-1)[:, None] | np.isinf(sb).any(axis=-2)[None, :]
        if rounded:  # a weight past A's dtype's range is Inf there
            inf_scale = inf_scale | (fb * (1 + fmt.u) >= fmt.overflow_threshold).any(axis=-2)[None, :]
        elif op.scale_dtype in MX_SCALES:  # a code times its scale past bf16's range is Inf there
            past = BF16.overflow_threshold
            inf_scale = (inf_scale | ((fa * ua) >= past).any(axis=-1)[:, None]
                         | ((fb * ub) >= past).any(axis=-2)[None, :])
        classes = bounds.allowance(prod, k, arith, FP32)  # the scaled sums are fp32
    free = classes.ambiguous() | (overflow & np.isfinite(prod.value)) | inf_scale
    exact = np.zeros(P.shape, bool)
    if all(_powers_of_two(s) for s in (sa, sb)):  # integer dequantized values whose sums every step holds
        rows, cols = np.isfinite(prod.row_integers), np.isfinite(prod.col_integers)
        if rounded:  # weights that A's dtype holds exactly
            cols = cols & (prod.col_integers <= fmt.exact_integer_limit)
        exact = rows[:, None] & cols[None, :] & (P <= 2.0**FP32.p) & (fa @ fb <= 2.0**arith.exact_bits)
    return Term(prod.value, np.where(exact, 0.0, err), exact, free)


def _powers_of_two(s: np.ndarray) -> bool:
    """Every finite non-zero entry a power of two (0 and non-finite ones do not spoil exactness here:
    the product's own classes handle them)."""
    finite = s[np.isfinite(s) & (s != 0)]
    mantissa, _ = np.frexp(finite)
    return bool(np.all(np.abs(mantissa) == 0.5))
