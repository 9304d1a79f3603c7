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
    value: np.ndarray  # float64 M x N (batched: batch x M x N): A @ B, IEEE semantics for non-finite entries
    magnitude: np.ndarray  # float64, as value: |A| @ |B| over the finite entries (the bound's scale)
    integer_inputs: bool  # every entry of A and B is a finite integer
    max_abs_input: float  # largest finite |entry| of A or B
    # per row of A (column of B): the largest |entry| where all its entries are finite integers, else NaN
    row_integers: np.ndarray | None = field(default=None, repr=False, compare=False)
    col_integers: np.ndarray | None = field(default=None, repr=False, compare=False)
    # A and B as given, where they live (None: built by hand); the rarer sums below read them from there
    operands: tuple[torch.Tensor, torch.Tensor] | None = field(default=None, repr=False, compare=False)

    @cached_property
    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """A and B in float64 on the host."""
        return to_float64(self.operands[0]), to_float64(self.operands[1])

    @cached_property
    def finite_inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """A and B with their non-finite entries zeroed."""
        return tuple(np.where(np.isfinite(x), x, 0.0) for x in self.inputs)

    @cached_property
    def abs_sums(self) -> tuple[np.ndarray, np.ndarray]:
        """sum_k |a_ik| per row of A and sum_k |b_kj| per column of B, over finite entries."""
        a, b = self.finite_inputs
        return np.abs(a).sum(axis=-1), np.abs(b).sum(axis=-2)

    def inf_meets_tiny(self, tiny: float) -> np.ndarray:
        """Where some Inf of A or B multiplies a non-zero entry of magnitude below `tiny` (one that
        input rounding may turn into 0, making the product NaN)."""
        a, b = self.inputs
        small_a, small_b = (np.abs(a) < tiny) & (a != 0), (np.abs(b) < tiny) & (b != 0)
        return ((np.isinf(a).astype(np.float64) @ small_b) + (small_a.astype(np.float64) @ np.isinf(b))) > 0

    def aligned_magnitude(self, floor: float) -> np.ndarray:
        """|A| @ |B| over finite entries with every non-zero |entry| below `floor` taken as `floor`: the
        scale of a tensor core's truncation, which aligns a subnormal operand's product by the smallest
        normal exponent (measured on the H100: fp16 0x1.b84p0 * 0x1.1p-19 + 0x1.14p-16 * 0x1.c4p-16 summed
        to 20 bits of the first product, 5 fp32 ulps off). `magnitude` itself where no entry is that small."""
        if self.operands is None:
            return self.magnitude
        if _on_host(*self.operands):
            lifted = [np.where(np.isfinite(x), np.abs(x), 0.0) for x in self.inputs]
            small = [(x < floor) & (x != 0) for x in lifted]
            if not any(s.any() for s in small):
                return self.magnitude
            return np.where(small[0], floor, lifted[0]) @ np.where(small[1], floor, lifted[1])
        lifted = []
        for x in self.operands:
            x = x.detach().double() if x.device.type != "cpu" else torch.from_numpy(to_float64(x))
            x = torch.where(torch.isfinite(x), x.abs(), 0.0)
            lifted.append((x, (x < floor) & (x != 0)))
        if not any(bool(small.any()) for _, small in lifted):
            return self.magnitude
        a, b = (torch.where(small, floor, x) for x, small in lifted)
        return (a @ b).cpu().numpy()

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
        if self.operands is None:  # built by hand (tests): every term's sign unknown, both parts at full size
            return self.magnitude, -self.magnitude
        a, b = self.finite_inputs
        ap, an, bp, bn = np.maximum(a, 0), np.minimum(a, 0), np.maximum(b, 0), np.minimum(b, 0)
        return ap @ bp + an @ bn, ap @ bn + an @ bp


def to_float64(t: torch.Tensor) -> np.ndarray:
    """Exact float64 copy of a tensor's values (any float or integer dtype, any device)."""
    return t.detach().to(device="cpu", dtype=torch.float64).numpy()


def _f64(x):
    return x.double() if isinstance(x, torch.Tensor) else x.astype(np.float64)


def _host(*arrays) -> list[np.ndarray]:
    """numpy arrays of numpy arrays and tensors (a tensor on a GPU comes back to the host)."""
    return [x.cpu().numpy() if isinstance(x, torch.Tensor) else x for x in arrays]


def _integer_maxima(lib, x, axis: int):
    """Along `axis` (-1: a row of A; -2: a column of B): the largest |entry| where every entry is a finite
    integer, else NaN (so that no limit admits it)."""
    with np.errstate(invalid="ignore"):
        integral = lib.isfinite(x) & (x == lib.round(x))
    largest = _largest(lib, lib.abs(lib.where(integral, x, 0.0)), axis)
    return lib.where(integral.all(axis=axis), largest, float("nan"))


def _largest(lib, x, axis=None):
    """The largest entry (along `axis`), 0 where there is none."""
    return x.max(axis=axis, initial=0.0) if lib is np else x.amax(axis=axis) if axis is not None else x.amax()


# Multiply-adds up to which a GPU's operands are copied back and multiplied by numpy: two small copies
# cost less than the product's ~40 kernel launches and 4 waits on the GPU, which several processes
# sharing one GPU (a campaign's workers) take in turns. Nearly every generated case is below it.
HOST_PRODUCT = 2**20


def product(a: torch.Tensor, b: torch.Tensor) -> Product:
    """The float64 product of A and B and the facts the bound needs: numpy on the host (the
    interpreter's tensors, and a GPU's up to HOST_PRODUCT multiply-adds), else torch on the GPU, where
    only the M x N results and the per-row and per-column facts come back. A GPU's float64 products sum
    in another order than numpy's: the bound's gamma_K(2**-53) term covers any order, and integer sums
    below 2**53 are exact in all. Batched operands (batch x M x K, batch x K x N) give one product a
    problem, stacked."""
    if _on_host(a, b):
        A, B = to_float64(a), to_float64(b)
        found = _product(np, A, B, (a, b))
        vars(found)["inputs"] = (A, B)  # the cached property's value: the copies just made
        return found
    return _product(torch, a.detach().double(), b.detach().double(), (a, b))


def _on_host(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.device.type == "cpu" or 0 in (*a.shape, b.shape[-1]) or a.numel() * b.shape[-1] <= HOST_PRODUCT


def _product(lib, A, B, operands) -> Product:
    """`A` and `B` in float64, as numpy arrays (`lib` numpy) or tensors (`lib` torch)."""
    finite_a, finite_b = lib.isfinite(A), lib.isfinite(B)
    rows, cols = _integer_maxima(lib, A, -1), _integer_maxima(lib, B, -2)
    largest = [_largest(lib, lib.abs(lib.where(f, x, 0.0))) for x, f in ((A, finite_a), (B, finite_b))]
    all_finite = finite_a.all() & finite_b.all()
    if lib is torch:  # the scalars in one trip from the device
        largest[0], largest[1], all_finite = torch.stack([largest[0], largest[1], all_finite.double()]).tolist()
    largest = max(float(largest[0]), float(largest[1]))
    if all_finite:
        value, magnitude, rows, cols = _host(A @ B, lib.abs(A) @ lib.abs(B), rows, cols)
        integers = bool(np.isfinite(rows).all() and np.isfinite(cols).all())
        return Product(value, magnitude, integers, largest, rows, cols, operands)
    a0, b0 = lib.where(finite_a, A, 0.0), lib.where(finite_b, B, 0.0)

    def hits(x, y):
        return (_f64(x) @ _f64(y)) > 0

    # NaN: a NaN anywhere in A's row or B's column, 0 * Inf, or infinite products of both signs
    nan = lib.isnan(A).any(axis=-1)[..., :, None] | lib.isnan(B).any(axis=-2)[..., None, :]
    nan = nan | hits(lib.isinf(A), B == 0) | hits(A == 0, lib.isinf(B))
    pos_a, neg_a = A > 0, A < 0
    pos_b, neg_b = B > 0, B < 0
    inf_a_pos, inf_a_neg = lib.isposinf(A), lib.isneginf(A)
    inf_b_pos, inf_b_neg = lib.isposinf(B), lib.isneginf(B)
    plus = hits(inf_a_pos, pos_b) | hits(inf_a_neg, neg_b) | hits(pos_a, inf_b_pos) | hits(neg_a, inf_b_neg)
    minus = hits(inf_a_pos, neg_b) | hits(inf_a_neg, pos_b) | hits(pos_a, inf_b_neg) | hits(neg_a, inf_b_pos)
    nan = nan | (plus & minus)
    value, magnitude, plus, minus, nan, rows, cols = _host(a0 @ b0, lib.abs(a0) @ lib.abs(b0), plus, minus, nan,
                                                           rows, cols)
    value = np.where(plus, np.inf, value)
    value = np.where(minus, -np.inf, value)
    value = np.where(nan, np.nan, value)
    return Product(value, magnitude, False, largest, rows, cols, operands)
