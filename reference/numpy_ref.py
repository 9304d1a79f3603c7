"""The float64 truth: the product of the exact input values, and the sums that bound its rounding.

Inputs are already quantized to their dtype, so converting them to float64 is exact. For
integer-valued inputs with |A|.|B| below 2**53 the float64 product is exact too; otherwise it is off
by at most gamma_K(2**-53) |A|.|B|, which `reference.bounds` adds to every bound.

Non-finite inputs follow IEEE semantics element by element (computed with indicator products rather
than trusting a BLAS with them): C[i, j] is NaN if some product is NaN (a NaN factor, or 0 * Inf) or
if products of both infinite signs meet; otherwise +-Inf if some product is +-Inf. The sums over the
*finite* products are kept apart from that verdict: |A|.|B| (the bound's scale) and the positive and
negative parts, sum max(a b, 0) and sum min(a b, 0), which bound every partial sum a kernel can form
in any order (so they say where a partial sum may overflow, and with which sign).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch


@dataclass(frozen=True)
class Product:
    value: np.ndarray  # float64 M x N: A @ B with IEEE semantics for non-finite entries
    magnitude: np.ndarray  # float64 M x N: |A| @ |B| over the finite entries (the bound's scale)
    integer_inputs: bool  # every entry of A and B is a finite integer
    max_abs_input: float  # largest finite |entry| of A or B
    # A and B with their non-finite entries zeroed (for the sign parts, computed when asked for)
    finite_a: np.ndarray | None = field(default=None, repr=False, compare=False)
    finite_b: np.ndarray | None = field(default=None, repr=False, compare=False)
    # per row of A (column of B): the largest |entry| where all its entries are finite integers, else NaN
    row_integers: np.ndarray | None = field(default=None, repr=False, compare=False)
    col_integers: np.ndarray | None = field(default=None, repr=False, compare=False)
    inputs: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)  # A, B as given

    @cached_property
    def abs_sums(self) -> tuple[np.ndarray, np.ndarray]:
        """sum_k |a_ik| per row of A and sum_k |b_kj| per column of B, over finite entries."""
        return np.abs(self.finite_a).sum(axis=1), np.abs(self.finite_b).sum(axis=0)

    def inf_meets_tiny(self, tiny: float) -> np.ndarray:
        """Where some Inf of A or B multiplies a non-zero entry of magnitude below `tiny` (one that
        input rounding may turn into 0, making the product NaN)."""
        a, b = self.inputs
        small_a, small_b = (np.abs(a) < tiny) & (a != 0), (np.abs(b) < tiny) & (b != 0)
        return ((np.isinf(a).astype(np.float64) @ small_b) + (small_a.astype(np.float64) @ np.isinf(b))) > 0
    @cached_property
    def positive(self) -> np.ndarray:
        """sum over k of max(a_ik b_kj, 0) over finite products: no partial sum exceeds it."""
        return self._parts[0]

    @cached_property
    def negative(self) -> np.ndarray:
        """sum over k of min(a_ik b_kj, 0) over finite products (<= 0): no partial sum is below it."""
        return self._parts[1]

    @cached_property
    def _parts(self) -> tuple[np.ndarray, np.ndarray]:
        if self.finite_a is None:  # built by hand (tests): every term's sign unknown, both parts at full size
            return self.magnitude, -self.magnitude
        a, b = self.finite_a, self.finite_b
        ap, an, bp, bn = np.maximum(a, 0), np.minimum(a, 0), np.maximum(b, 0), np.minimum(b, 0)
        return ap @ bp + an @ bn, ap @ bn + an @ bp


def to_float64(t: torch.Tensor) -> np.ndarray:
    """Exact float64 copy of a tensor's values (any float or integer dtype, any device)."""
    return t.detach().to(device="cpu", dtype=torch.float64).numpy()


def _integer_maxima(x: np.ndarray, axis: int) -> np.ndarray:
    """Along `axis`: the largest |entry| where every entry is a finite integer, else NaN (so that no
    limit admits it)."""
    with np.errstate(invalid="ignore"):
        integral = np.isfinite(x) & (x == np.round(x))
    return np.where(integral.all(axis=axis), np.abs(np.where(integral, x, 0.0)).max(axis=axis, initial=0.0), np.nan)


def product(a: torch.Tensor, b: torch.Tensor) -> Product:
    A, B = to_float64(a), to_float64(b)
    finite_a, finite_b = np.isfinite(A), np.isfinite(B)
    rows, cols = _integer_maxima(A, 1), _integer_maxima(B, 0)
    integers = bool(np.isfinite(rows).all() and np.isfinite(cols).all())
    largest = max([np.abs(x[np.isfinite(x)]).max(initial=0.0) for x in (A, B)])
    if finite_a.all() and finite_b.all():
        return Product(A @ B, np.abs(A) @ np.abs(B), integers, largest, A, B, rows, cols, (A, B))
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
    return Product(value, magnitude, False, largest, a0, b0, rows, cols, (A, B))
