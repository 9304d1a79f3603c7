"""The flow of one example: materialize the case, launch the variant, compute the references and
the bound, and run every oracle. Used alike by the tests, the campaign and the repro scripts."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from kernels.registry import Variant
from properties.interpreter import sanitizer
from properties.judge import oracles
from properties.model.cases import GemmCase, Operands, materialize, unwritten_bits
from properties.run import backends
from reference import bounds, numpy_ref, torch_ref
from reference.formats import by_name


@dataclass(frozen=True)
class Observation:
    """What one passing example measured."""

    variant: str
    case: GemmCase
    exact: bool  # judged bit-exact (True) or within the bound (False)
    error_ratio: float  # largest |C - reference| / bound; 0 on exact cases
    seconds: float
    # largest |C - reference| over torch.matmul's on the same inputs and device; None on exact cases
    # and where torch is exact
    torch_ratio: float | None = None


def launch(variant: Variant, ops: Operands, backend: backends.Backend) -> None:
    """Run the variant; in the interpreter every memory access is bounds-checked before it happens."""
    if backend.interpreted:
        with sanitizer.bounds_checked():
            variant.launch(ops.a.view, ops.b.view, ops.c.view)
    else:
        variant.launch(ops.a.view, ops.b.view, ops.c.view)
        torch.cuda.synchronize()


def judge(variant: Variant, ops: Operands) -> tuple[bool, float, float | None]:
    """Run every oracle on a finished launch; return (exact, error ratio, error over torch.matmul's
    error, None on exact cases). Raises GemmMismatch."""
    case = ops.case
    oracles.canaries_intact(ops.c)
    oracles.input_unchanged(ops.a)
    oracles.input_unchanged(ops.b)
    product = numpy_ref.product(ops.a.view, ops.b.view)
    arith = bounds.arithmetic(case.dtype, variant.precision)
    out = by_name(case.out_dtype)
    oracles.all_written(ops.c.view, product.value, unwritten_bits(out))
    if bounds.exact_expected(product, arith):
        oracles.exact(ops.c.view, product.value, out)
        return True, 0.0, None
    try:
        ratio = _within_bound(ops, product, arith, out)
    except oracles.GemmMismatch as e:
        if arith.name == "fp32-fp32acc" and _within_tf32_bound(ops, product, out):
            e.args = (e.args[0] + "\nC is within the tf32 bound: the kernel computes fp32 in tf32 (tl.dot's default "
                      "input_precision for fp32); pass input_precision='ieee', or declare precision 'tf32'",)
        raise
    return False, ratio, torch_error_ratio(ops, product.value)


def _within_bound(ops: Operands, product, arith: bounds.Arithmetic, out) -> float:
    """The within-bound oracle under `arith`'s bound and overflow allowances."""
    bound = bounds.elementwise(product, ops.case.K, arith, out)
    return oracles.within_bound(ops.c.view, product.value, bound, bounds.overflow_possible(product, bound, arith, out),
                                bounds.partial_sums_may_overflow(product, bound, arith))


def _within_tf32_bound(ops: Operands, product, out) -> bool:
    try:
        _within_bound(ops, product, bounds.arithmetic("fp32", "tf32"), out)
    except oracles.GemmMismatch:
        return False
    return True


def check(variant: Variant, case: GemmCase, backend: backends.Backend | None = None) -> Observation:
    """Run `variant` on `case` and judge it. Raises GemmMismatch (or OutOfBoundsAccess) naming the
    variant and the case."""
    return run(variant, case, backend)[0]


def run(variant: Variant, case: GemmCase, backend: backends.Backend | None = None) -> tuple[Observation, Operands]:
    """`check`, also returning the operands (C holds the kernel's result)."""
    backend = backend or backends.current()
    start = time.perf_counter()
    ops = materialize(case, backend.device)
    try:
        launch(variant, ops, backend)
        exact, ratio, versus_torch = judge(variant, ops)
    except (oracles.GemmMismatch, sanitizer.OutOfBoundsAccess) as e:
        e.args = (f"variant {variant.name!r} on {case.describe()}:\n{e.args[0]}",) + e.args[1:]
        raise
    return Observation(variant.name, case, exact, ratio, time.perf_counter() - start, versus_torch), ops


def torch_error_ratio(ops: Operands, reference: np.ndarray) -> float | None:
    """The kernel's largest error against torch.matmul's (native dtype, same device, same inputs),
    over the elements where all three of C, torch's result and the float64 `reference` are finite;
    None where torch is exact there."""
    mine = numpy_ref.to_float64(ops.c.view)
    theirs = numpy_ref.to_float64(torch_ref.on_device(ops.a.view, ops.b.view, ops.c.view.dtype))
    finite = np.isfinite(reference) & np.isfinite(mine) & np.isfinite(theirs)
    torch_error = np.abs(theirs - reference)[finite].max(initial=0.0)
    if torch_error == 0:
        return None
    return float(np.abs(mine - reference)[finite].max() / torch_error)
