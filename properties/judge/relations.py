"""Metamorphic relations: run a kernel on a changed problem whose answer is known from the first one.

  transpose     (B^T A^T)^T = A B: the kernel on the transposed problem
  scale         scaling A by 2**k scales C by 2**k exactly (when nothing overflows or underflows):
                bit-exact for a deterministic kernel, whose arithmetic is the same up to the exponent
  zero padding  appending zero columns to A and zero rows to B leaves C unchanged
  split K       A[:, :K1] B[:K1] + A[:, K1:] B[K1:] = A B

Each relation runs the kernel under the same oracles as the main property (guarded buffers, the
sanitizer, the bound) and then compares: bit-exact when every run is exact, otherwise within the
sum of the runs' bounds (sound for any correct kernel). A violation raises GemmMismatch naming the
relation, the element and both values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from kernels.registry import Variant
from properties.judge import check, oracles
from properties.model.cases import Layout, Operands, guarded_input, guarded_output, unwritten_bits
from reference import bounds, numpy_ref
from reference.formats import Format, by_name


@dataclass
class Run:
    """One launch of the kernel: its result and what judged it."""

    c: np.ndarray  # float64 values of C
    value: np.ndarray  # float64 reference
    bound: np.ndarray
    exact: bool
    may_overflow: np.ndarray | None = None  # where a non-finite C is legitimate (see bounds)

    def nonfinite_allowed(self) -> np.ndarray:
        return np.zeros(self.c.shape, dtype=bool) if self.may_overflow is None else self.may_overflow


def _run(c: torch.Tensor, product: numpy_ref.Product, k: int, arith: bounds.Arithmetic, out: Format) -> Run:
    bound = bounds.elementwise(product, k, arith, out)
    may_overflow = bounds.overflow_possible(product, bound, arith, out) | bounds.partial_sums_may_overflow(
        product, bound, arith)
    return Run(numpy_ref.to_float64(c), product.value, bound, bounds.exact_expected(product, arith), may_overflow)


def observed(variant: Variant, ops: Operands) -> Run:
    """The Run of an example the main property has already judged."""
    case = ops.case
    product = numpy_ref.product(ops.a.view, ops.b.view)
    return _run(ops.c.view, product, case.K, bounds.arithmetic(case.dtype, variant.precision), by_name(case.out_dtype))


def flipped(layout: Layout) -> Layout:
    """The layout of the transpose of a matrix laid out as `layout`."""
    order = "col" if layout.order == "row" else "row"
    broadcast = {"rows": "cols", "cols": "rows"}.get(layout.broadcast, "")
    return Layout(order, layout.pad, layout.step, layout.offset, broadcast)


def solve(variant: Variant, a: np.ndarray, b: np.ndarray, layouts: tuple[Layout, Layout, Layout],
          fin: Format, fout: Format, backend, precision: str) -> Run:
    """Launch `variant` on inputs with these values and layouts; judge it like the main property."""
    shapes = (a.shape, b.shape, (a.shape[0], b.shape[1]))
    la, lb, lc = (_aligned(variant, lay, shape, fmt) for lay, shape, fmt in zip(layouts, shapes, (fin, fin, fout)))
    ga = guarded_input("A", la, fin, a, backend.device)
    gb = guarded_input("B", lb, fin, b, backend.device)
    gc = guarded_output("C", shapes[2], lc, fout, backend.device)
    ops = Operands(None, ga, gb, gc)
    check.launch(variant, ops, backend)
    oracles.canaries_intact(gc)
    oracles.input_unchanged(ga)
    oracles.input_unchanged(gb)
    product = numpy_ref.product(ga.view, gb.view)
    oracles.all_written(gc.view, product.value, unwritten_bits(fout))
    return _run(gc.view, product, a.shape[1], bounds.arithmetic(fin.name, precision), fout)


def _aligned(variant: Variant, layout: Layout, shape: tuple[int, int], fmt: Format) -> Layout:
    """`layout` with its padding redone for a new shape, when the variant needs aligned leading strides."""
    align = variant.requirements.stride_alignment
    if not align:
        return layout
    unit = max(1, align // fmt.dtype.itemsize)
    lead = max(shape[1], 1) if layout.order == "row" else max(shape[0], 1)
    return Layout(layout.order, (-lead * layout.step) % unit, layout.step, layout.offset, layout.broadcast)


def _compare(relation: str, got: np.ndarray, expected: np.ndarray, slack: np.ndarray, exact: bool,
             where: np.ndarray | None = None) -> None:
    """got == expected (exact) or |got - expected| <= slack, over the elements in `where`."""
    where = np.ones(got.shape, dtype=bool) if where is None else where
    with np.errstate(invalid="ignore"):
        same = (got == expected) | (np.isnan(got) & np.isnan(expected))
        ok = same if exact else same | (np.abs(got - expected) <= slack)
    bad = where & ~ok
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        how = "bit-exact" if exact else f"within {slack[i, j]:.9g}"
        raise oracles.GemmMismatch(
            f"metamorphic relation '{relation}' broken at C[{i}, {j}]: {got[i, j]:.9g} where {expected[i, j]:.9g} "
            f"was expected ({how}); {int(bad.sum())} of {bad.size} elements differ")


def _finite_expected(first: Run, other_may_overflow: np.ndarray) -> np.ndarray:
    """Elements where neither run may legitimately overflow: there the relation must hold."""
    return ~(first.nonfinite_allowed() | other_may_overflow)


def transpose(variant: Variant, ops: Operands, first: Run, backend) -> None:
    case = ops.case
    a, b = numpy_ref.to_float64(ops.a.view), numpy_ref.to_float64(ops.b.view)
    layouts = (flipped(case.b), flipped(case.a), flipped(case.c))
    second = solve(variant, b.T, a.T, layouts, by_name(case.dtype), by_name(case.out_dtype), backend,
                   variant.precision)
    _compare("transpose", second.c.T, first.c, first.bound + second.bound.T, first.exact and second.exact,
             _finite_expected(first, second.nonfinite_allowed().T))


def scale(variant: Variant, ops: Operands, first: Run, backend, k: int) -> bool:
    """Returns False when 2**k would overflow or underflow somewhere (the relation does not apply)."""
    case = ops.case
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)
    if not fin.is_float:
        return False
    a, b = numpy_ref.to_float64(ops.a.view), numpy_ref.to_float64(ops.b.view)
    factor = 2.0**k
    finite = [x[np.isfinite(x) & (x != 0)] for x in (a, first.value)]
    for x, fmt in zip(finite, (fin, fout)):  # scaled inputs and results stay normal and finite
        if x.size and (np.abs(x).max() * max(factor, 1) * 4 > fmt.max
                       or np.abs(x).min() * min(factor, 1) < 4 * fmt.min_normal):
            return False
    acc = bounds.arithmetic(fin.name, variant.precision).acc
    if np.nanmax(np.abs(np.where(np.isfinite(first.value), first.value, 0)), initial=0) * factor * 4 > acc.max:
        return False
    second = solve(variant, a * factor, b, (case.a, case.b, case.c), fin, fout, backend, variant.precision)
    exact = variant.deterministic or (first.exact and second.exact)
    _compare(f"scale A by 2**{k}", second.c, first.c * factor, first.bound * factor + second.bound, exact,
             _finite_expected(first, second.nonfinite_allowed()))
    return True


def zero_padding(variant: Variant, ops: Operands, first: Run, backend, extra: int) -> None:
    case = ops.case
    a, b = numpy_ref.to_float64(ops.a.view), numpy_ref.to_float64(ops.b.view)
    a2 = np.concatenate([a, np.zeros((case.M, extra))], axis=1)
    b2 = np.concatenate([b, np.zeros((extra, case.N))], axis=0)
    if case.a.broadcast == "cols" or case.b.broadcast == "rows":
        return  # zeros cannot be appended along an axis whose elements all alias one another
    second = solve(variant, a2, b2, (case.a, case.b, case.c), by_name(case.dtype), by_name(case.out_dtype),
                   backend, variant.precision)
    _compare(f"append {extra} zero columns to A and rows to B", second.c, first.c, first.bound + second.bound,
             first.exact and second.exact, _finite_expected(first, second.nonfinite_allowed()))


def split_k(variant: Variant, ops: Operands, first: Run, backend, k1: int) -> None:
    case = ops.case
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)
    a, b = numpy_ref.to_float64(ops.a.view), numpy_ref.to_float64(ops.b.view)
    layouts = (case.a, case.b, case.c)
    left = solve(variant, a[:, :k1], b[:k1], layouts, fin, fout, backend, variant.precision)
    right = solve(variant, a[:, k1:], b[k1:], layouts, fin, fout, backend, variant.precision)
    threshold = fout.overflow_threshold
    comparable = np.ones(first.c.shape, dtype=bool)
    for run in (first, left, right):  # only where every run's result is finite and cannot overflow
        comparable &= np.isfinite(run.value) & (np.abs(run.value) + run.bound < threshold) & ~run.nonfinite_allowed()
    representable = all(np.array_equal(_rounded(run.value, fout), run.value, equal_nan=True)
                        for run in (first, left, right))
    exact = first.exact and left.exact and right.exact and representable
    _compare(f"split K at {k1}", left.c + right.c, first.c, first.bound + left.bound + right.bound, exact,
             comparable)


def _rounded(x: np.ndarray, fmt: Format) -> np.ndarray:
    return numpy_ref.to_float64(torch.from_numpy(x).to(fmt.dtype))
