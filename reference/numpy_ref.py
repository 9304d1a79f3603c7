"""The float64 truth: the product of the exact input values, and |A|.|B| for error bounds.

Inputs are already quantized to their dtype, so converting them to float64 is exact. For
integer-valued inputs with |A|.|B| below 2**53 the float64 product is exact too; otherwise it is off
by at most gamma_K(2**-53) |A|.|B|, which `reference.bounds` adds to every bound.

Non-finite inputs follow IEEE semantics element by element (computed with indicator products rather
than trusting a BLAS with them): C[i, j] is NaN if some product is NaN (a NaN factor, or 0 * Inf) or
if products of both infinite signs meet; otherwise +-Inf if some product is +-Inf.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Product:
    value: np.ndarray  # float64 M x N: A @ B
    magnitude: np.ndarray  # float64 M x N: |A| @ |B| over finite entries (the bound's scale)
    integer_inputs: bool  # every entry of A and B is a finite integer
    max_abs_input: float  # largest finite |entry| of A or B


def to_float64(t: torch.Tensor) -> np.ndarray:
    """Exact float64 copy of a tensor's values (any float or integer dtype, any device)."""
    return t.detach().to(device="cpu", dtype=torch.float64).numpy()


def product(a: torch.Tensor, b: torch.Tensor) -> Product:
    A, B = to_float64(a), to_float64(b)
    finite_a, finite_b = np.isfinite(A), np.isfinite(B)
    integers = bool(finite_a.all() and finite_b.all() and np.all(A == np.round(A)) and np.all(B == np.round(B)))
    largest = max([np.abs(x[np.isfinite(x)]).max(initial=0.0) for x in (A, B)])
    if finite_a.all() and finite_b.all():
        return Product(A @ B, np.abs(A) @ np.abs(B), integers, largest)
    a0, b0 = np.where(finite_a, A, 0.0), np.where(finite_b, B, 0.0)
    value = a0 @ b0
    magnitude = np.abs(a0) @ np.abs(b0)

    def hits(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (x.astype(np.float64) @ y.astype(np.float64)) > 0

    nan = hits(np.isnan(A), np.ones_like(B, dtype=bool)) | hits(np.ones_like(A, dtype=bool), np.isnan(B))
    nan |= hits(np.isinf(A), B == 0) | hits(A == 0, np.isinf(B))
    pos_a, neg_a = A > 0, A < 0
    pos_b, neg_b = B > 0, B < 0
    inf_a_pos, inf_a_neg = np.isposinf(A), np.isneginf(A)
    inf_b_pos, inf_b_neg = np.isposinf(B), np.isneginf(B)
    plus = hits(inf_a_pos, pos_b) | hits(inf_a_neg, neg_b) | hits(pos_a, inf_b_pos) | hits(neg_a, inf_b_neg)
    minus = hits(inf_a_pos, neg_b) | hits(inf_a_neg, pos_b) | hits(pos_a, inf_b_neg) | hits(neg_a, inf_b_pos)
    nan |= plus & minus
    value = np.where(plus, np.inf, value)
    value = np.where(minus, -np.inf, value)
    value = np.where(nan, np.nan, value)
    magnitude = np.where(np.isfinite(value), magnitude, np.inf)
    return Product(value, magnitude, False, largest)
