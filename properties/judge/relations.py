"""Metamorphic relations: run a kernel on a changed problem whose answer is known from the first one.

  transpose     (B^T A^T)^T = A B: the kernel on the transposed problem
  scale         scaling A by 2**k scales C by 2**k exactly (when nothing overflows or underflows):
                bit-exact for a deterministic kernel, whose arithmetic is the same up to the exponent
  zero padding  appending zero columns to A and zero rows to B leaves C unchanged
  split K       A[:, :K1] B[:K1] + A[:, K1:] B[K1:] = A B

Each relation runs the kernel under the memory oracles of the main property (guarded buffers, the
sanitizer) and then compares through the one comparison (properties.judge.compare): bit-exact when
every run is exact, otherwise within the sum of the runs' bounds (sound for any correct kernel),
skipping only elements where some run may legitimately differ in kind (an overflow whose sign or
NaN depends on the order of summation). A violation raises a failure naming the relation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch

from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.properties.judge import compare, oracles
from gemm_fuzz.properties.model.cases import (
    SCALES,
    Epilogue,
    GemmCase,
    Layout,
    Operands,
    Vector,
    guarded_extra,
    guarded_input,
    guarded_output,
    operand_format,
)
from gemm_fuzz.reference import bounds, numpy_ref
from gemm_fuzz.reference.formats import Format, by_name

Launch = Callable[[Variant, Operands], None]


@dataclass
class Run:
    """One launch of the kernel: its result (float64) and what a correct kernel may return there."""

    c: np.ndarray
    allowance: bounds.Allowance

    @property
    def exact(self) -> np.ndarray:
        """Per element: the run's arithmetic is exact there."""
        return self.allowance.exact

    @property
    def bound(self) -> np.ndarray:
        return self.allowance.bound


def observed(verdict: oracles.Verdict) -> Run:
    """The Run of an example the main property has already judged."""
    return Run(verdict.values, verdict.allowance)


def paired(expected: np.ndarray, runs: list[Run], exact: np.ndarray | bool | None = None,
           free: np.ndarray | None = None) -> bounds.Allowance:
    """The allowance for comparing one computed result with another: within the sum of the runs'
    bounds, bit-exactly where `exact` (default: where every run is exact), not judged where some run is
    ambiguous or not judged (or in `free`)."""
    ambiguous = np.zeros(expected.shape, dtype=bool) if free is None else free.copy()
    for run in runs:  # where a run may differ in kind, or no verdict on it is sound
        ambiguous |= run.allowance.ambiguous()
        if run.allowance.free is not None:
            ambiguous |= run.allowance.free
    if exact is None:
        exact = np.logical_and.reduce([run.exact for run in runs])
    none = np.zeros(expected.shape, dtype=bool)
    return bounds.Allowance(expected, sum(run.bound for run in runs), np.broadcast_to(exact, expected.shape),
                            none, none, none, ambiguous)


def flipped(layout: Layout) -> Layout:
    """The layout of the transpose of a matrix laid out as `layout`."""
    order = "col" if layout.order == "row" else "row"
    broadcast = {"rows": "cols", "cols": "rows"}.get(layout.broadcast, "")
    return Layout(order, layout.pad, layout.step, layout.offset, broadcast)


@dataclass(frozen=True)
class Extras:
    """What a problem of an epilogue operation has besides A and B: its inputs' values (float64) and
    where every extra sits (bias, c_in, residual, and pre, the second output), and its scalars."""

    values: dict[str, np.ndarray]
    layouts: dict[str, Layout | Vector]
    scalars: dict[str, float]

    @classmethod
    def of(cls, ops: Operands) -> Extras | None:
        """The extras of a launched problem, as they are (None for C = A @ B)."""
        if not (ops.operation.has_epilogue or ops.operation.scaled):
            return None
        epilogue = ops.case.epilogue or Epilogue() if ops.case is not None else Epilogue()
        layouts = {name: getattr(epilogue, name) for name in ("bias", "c_in", "residual", "pre", *SCALES)}
        layouts["b_zero"] = epilogue.b_scale  # packed zero points sit as the scales do
        values = {name: numpy_ref.to_float64(g.view) for name, g in ops.extras.items() if name != "pre"}
        return cls(values, layouts, dict(ops.scalars))

    def replace(self, values: dict | None = None, layouts: dict | None = None, scalars: dict | None = None) -> Extras:
        return Extras({**self.values, **(values or {})}, {**self.layouts, **(layouts or {})},
                      {**self.scalars, **(scalars or {})})


def solve(variant: Variant, launch: Launch, a: np.ndarray, b: np.ndarray,
          layouts: tuple[Layout, Layout, Layout], fin: Format, fout: Format, device, config=(),
          extras: Extras | None = None, n: int | None = None) -> Run:
    """Launch `variant` on inputs with these values and layouts (and an epilogue's `extras`; batched
    operands are 3-D) under the memory oracles (`config`: the configuration `launch` runs, for the
    bound); a second output is judged against its reference here. `n`: C's columns where B's shape
    does not give them (codes packed along N)."""
    op = variant.operation
    fa, fb = (operand_format(op, operand, fin) for operand in "ab")  # codes as stored
    n = n if n is not None else b.shape[-1] // (2 if op.gated else 1)
    shapes = (a.shape, b.shape, (*a.shape[:-1], n))
    la, lb, lc = (_aligned(variant, lay, shape, fmt) for lay, shape, fmt in zip(layouts, shapes, (fa, fb, fout)))
    ga = guarded_input("A", la, fa, a, device)
    gb = guarded_input("B", lb, fb, b, device)
    gc = guarded_output("C", shapes[2], lc, fout, device)
    guarded = {}
    if extras is not None:
        for name, values in extras.values.items():
            guarded[name] = guarded_extra(name, extras.layouts[name], op, fout, values, device)
        if op.pre_activation:
            guarded["pre"] = guarded_output("pre", (*a.shape[:-1], b.shape[-1]), extras.layouts["pre"], fout, device)
    ops = Operands(None, ga, gb, gc, guarded, dict(extras.scalars) if extras else {}, op)
    launch(variant, ops)
    oracles.memory(ops)
    product = oracles.product_of(ops)
    partials = oracles.output_partials(variant, fin.name, config, torch.device(device).type)
    allow, got = oracles.outputs(ops, variant.precision, product, partials)["C"]
    return Run(got, allow)


def _aligned(variant: Variant, layout: Layout, shape: tuple[int, ...], fmt: Format) -> Layout:
    """`layout` with its padding redone for a new shape, when the variant needs aligned leading strides."""
    align = variant.requirements.stride_alignment
    if not align:
        return layout
    unit = max(1, align // fmt.dtype.itemsize)
    rows, cols = shape[-2:]
    lead = max(cols, 1) if layout.order == "row" else max(rows, 1)
    return replace(layout, pad=(-lead * layout.step) % unit)


def problems(variant: Variant, case: GemmCase, params: dict) -> list[GemmCase]:
    """The problems the relations in `params` launch besides the first, as cases (their values aside,
    laid out as `solve` lays them out): what a GPU compiles ahead, in parallel, before the relations run."""
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)

    def laid_out(m: int, n: int, k: int, a: Layout, b: Layout, c: Layout) -> GemmCase:
        a, b, c = (_aligned(variant, lay, shape, fmt) for lay, shape, fmt in
                   ((a, (m, k), fin), (b, (k, n), fin), (c, (m, n), fout)))
        groups = case.groups
        if groups is not None and groups.problems:  # K padded: every problem's K by as much
            groups = replace(groups, dims=tuple((pn, pk + k - case.K) for pn, pk in groups.dims))
        return replace(case, M=m, N=n, K=k, a=a, b=b, c=c, groups=groups)

    found = []
    if params.get("transpose"):
        found.append(laid_out(case.N, case.M, case.K, flipped(case.b), flipped(case.a), flipped(case.c)))
    if params.get("pad"):
        found.append(laid_out(case.M, case.N, case.K + params["pad"], case.a, case.b, case.c))
    if params.get("split"):
        k1 = params["split"]
        found += [laid_out(case.M, case.N, k, case.a, case.b, case.c) for k in (k1, case.K - k1)]
    return found


def _judge(relation: str, got: np.ndarray, allow: bounds.Allowance) -> None:
    compare.values(got, allow, against=f"the relation '{relation}'")


def transpose(variant: Variant, launch: Launch, ops: Operands, first: Run) -> None:
    case = ops.case
    a, b = numpy_ref.to_float64(ops.a.view), numpy_ref.to_float64(ops.b.view)
    layouts = (flipped(case.b), flipped(case.a), flipped(case.c))
    second = solve(variant, launch, b.T, a.T, layouts, by_name(case.dtype), by_name(case.out_dtype), ops.c.view.device,
                   case.config)
    second_t = Run(second.c.T, _transposed(second.allowance))
    _judge("transpose", second_t.c, paired(first.c, [first, second_t]))


def _transposed(allow: bounds.Allowance) -> bounds.Allowance:
    return bounds.Allowance(allow.expected.T, allow.bound.T, allow.exact.T, allow.pos_inf.T, allow.neg_inf.T,
                            allow.nan.T, None if allow.free is None else allow.free.T)


def scale(variant: Variant, launch: Launch, ops: Operands, first: Run, k: int) -> bool:
    """Returns False when 2**k would overflow or underflow somewhere (the relation does not apply)."""
    case = ops.case
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)
    if not fin.is_float:
        return False
    a, b = numpy_ref.to_float64(ops.a.view), numpy_ref.to_float64(ops.b.view)
    factor = 2.0**k
    ref = first.allowance.reference
    finite = [x[np.isfinite(x) & (x != 0)] for x in (a, b, ref)]
    for x, fmt in zip(finite, (fin, fin, fout)):  # inputs, products and results stay normal and finite
        if x.size and (np.abs(x).max() * max(factor, 1) * 4 > fmt.max
                       or np.abs(x).min() * min(factor, 1) < 4 * fmt.min_normal):
            return False
    products = [np.abs(a).max(initial=0) * np.abs(b).max(initial=0), _smallest_product(a, b)]
    acc = bounds.arithmetic(fin.name, variant.precision).acc
    largest, smallest = products
    if largest * max(factor, 1) * 4 > acc.max or (smallest and smallest * min(factor, 1) < 4 * acc.min_normal):
        return False
    if np.nanmax(np.abs(np.where(np.isfinite(ref), ref, 0)), initial=0) * factor * 4 > acc.max:
        return False
    second = solve(variant, launch, a * factor, b, (case.a, case.b, case.c), fin, fout, ops.c.view.device,
                   case.config)
    # a deterministic kernel does the same arithmetic up to the exponent: bit-exact everywhere
    exact = variant.deterministic | (first.exact & second.exact)
    scaled = Run(first.c * factor, bounds.Allowance(
        first.allowance.expected * factor, first.bound * factor, first.exact, first.allowance.pos_inf,
        first.allowance.neg_inf, first.allowance.nan))
    _judge(f"scale A by 2**{k}", second.c, paired(scaled.c, [scaled, second], exact))
    return True


def _smallest_product(a: np.ndarray, b: np.ndarray) -> float:
    """The smallest non-zero |a||b| over the entries (0 when there is none): a scaled-down product
    must stay normal in the accumulator, or it rounds differently."""
    x = np.abs(a[np.isfinite(a) & (a != 0)])
    y = np.abs(b[np.isfinite(b) & (b != 0)])
    return float(x.min() * y.min()) if x.size and y.size else 0.0


def zero_padding(variant: Variant, launch: Launch, ops: Operands, first: Run, extra: int) -> None:
    case = ops.case
    if case.a.broadcast == "cols" or case.b.broadcast == "rows":
        return  # zeros cannot be appended along an axis whose elements all alias one another
    a, b = numpy_ref.to_float64(ops.a.view), numpy_ref.to_float64(ops.b.view)
    a2 = np.concatenate([a, np.zeros((case.M, extra))], axis=1)
    b2 = np.concatenate([b, np.zeros((extra, case.N))], axis=0)
    second = solve(variant, launch, a2, b2, (case.a, case.b, case.c), by_name(case.dtype), by_name(case.out_dtype),
                   ops.c.view.device, case.config)
    _judge(f"append {extra} zero columns to A and rows to B", second.c, paired(first.c, [first, second]))


def split_k(variant: Variant, launch: Launch, ops: Operands, first: Run, k1: int) -> None:
    case = ops.case
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)
    a, b = numpy_ref.to_float64(ops.a.view), numpy_ref.to_float64(ops.b.view)
    layouts = (case.a, case.b, case.c)
    device = ops.c.view.device
    left = solve(variant, launch, a[:, :k1], b[:k1], layouts, fin, fout, device, case.config)
    right = solve(variant, launch, a[:, k1:], b[k1:], layouts, fin, fout, device, case.config)
    runs = (first, left, right)
    threshold = fout.overflow_threshold
    outside = np.zeros(first.c.shape, dtype=bool)  # only where every run's result is finite and cannot overflow
    for run in runs:
        ref = run.allowance.reference
        with np.errstate(invalid="ignore"):
            outside |= ~np.isfinite(ref) | (np.abs(ref) + run.bound >= threshold)
    # bit-exact only where each run is exact and its result needs no rounding, so the sum of two is the third
    representable = np.logical_and.reduce([
        run.exact & (_rounded(run.allowance.reference, fout) == run.allowance.reference) for run in runs])
    with np.errstate(invalid="ignore"):
        total = left.c + right.c
    _judge(f"split K at {k1}", total, paired(first.c, list(runs), representable, outside))


def _rounded(x: np.ndarray, fmt: Format) -> np.ndarray:
    return numpy_ref.to_float64(torch.from_numpy(x).to(fmt.dtype))
