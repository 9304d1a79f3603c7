"""The checks that judge one launch. Each raises a typed failure (properties.judge.failures) whose
message names the operand, the first offending coordinates and the values.

  memory      canaries_intact (nothing outside C written), input_unchanged, all_written
  values      against_reference: C against the float64 product under the sound allowance of
              `reference.bounds` (bit-exact on exact cases), through the one comparison of
              properties.judge.compare
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gemm_fuzz.properties import phases
from gemm_fuzz.properties.judge import compare
from gemm_fuzz.properties.judge.failures import InputModified, NotWritten, ValueOutOfBound, WriteOutsideC
from gemm_fuzz.properties.model.cases import Guarded, Operands, raw, signed, unwritten_bits
from gemm_fuzz.reference import bounds, numpy_ref, torch_ref
from gemm_fuzz.reference.formats import by_name
from gemm_fuzz.reference.numpy_ref import to_float64


def _where(mask: np.ndarray) -> tuple[int, int]:
    i, j = np.argwhere(mask)[0]
    return int(i), int(j)


@phases.timed("oracles")
def all_written(c: torch.Tensor, reference: np.ndarray, unwritten: int) -> None:
    """No element of C still holds the pre-fill bit pattern (a NaN whose payload no arithmetic makes)."""
    left = raw(c) == signed(unwritten, c.element_size())  # compared where C lives
    if left.any():
        left = left.cpu().numpy()
        i, j = _where(left)
        raise NotWritten(
            f"C[{i}, {j}] still holds its pre-fill (bits {unwritten:#x}): the kernel never wrote it, or computed it "
            f"from C's own unwritten contents ({int(left.sum())} of {left.size} elements; the reference there is "
            f"{reference[i, j]:.9g})", index=(i, j), count=int(left.sum()), total=left.size)


def _position(g: Guarded, index: int) -> str:
    """Where a buffer index lies relative to the view: before, after, or inside its padding."""
    first = int(np.argmax(g.elements)) if g.elements.any() else len(g.elements)
    last = len(g.elements) - 1 - int(np.argmax(g.elements[::-1])) if g.elements.any() else -1
    if index < first:
        return f"{first - index} element(s) before {g.name}'s first element"
    if index > last:
        return f"{index - last} element(s) after {g.name}'s last element"
    return f"inside {g.name}'s padding, {index - first} elements from its first element"


def _coordinates(g: Guarded, index: int) -> tuple[int, int]:
    """The (row, column) of the view's element stored at a buffer index (the first, if aliased)."""
    (rows, cols), (s0, s1) = g.view.shape, g.view.stride()
    grid = g.view.storage_offset() + np.arange(rows)[:, None] * s0 + np.arange(cols)[None, :] * s1
    return _where(grid == index)


def canaries_intact(c: Guarded) -> None:
    """Nothing outside C's elements changed: not the guard bands, not C's padding."""
    changed = c.changed()
    outside = changed[~c.elements[changed]]
    if outside.size:
        first = int(outside[0])
        raise WriteOutsideC(
            f"a write outside C: buffer offset {first} changed ({_position(c, first)}); "
            f"{outside.size} element(s) outside C were overwritten", offset=first, count=int(outside.size))


def input_unchanged(g: Guarded) -> None:
    """The kernel wrote nothing into an input's buffer (its elements, padding or guard bands)."""
    changed = g.changed()
    if changed.size:
        first = int(changed[0])
        where = f"{g.name}{list(_coordinates(g, first))}" if g.elements[first] else _position(g, first)
        raise InputModified(
            f"a write into input {g.name}: buffer offset {first} changed ({where}); {changed.size} element(s) changed",
            operand=g.name, offset=first, count=int(changed.size))


@phases.timed("oracles")
def memory(ops: Operands) -> None:
    """The memory oracles, in the order their findings are most telling."""
    canaries_intact(ops.c)
    input_unchanged(ops.a)
    input_unchanged(ops.b)


@dataclass(frozen=True)
class Verdict:
    """What the value oracles found on a passing launch."""

    exact: bool  # every element judged bit-exact
    error_ratio: float  # largest |C - reference| / bound; 0 on exact cases
    allowance: bounds.Allowance
    values: np.ndarray  # C as float64


@phases.timed("oracles")
def reference_allowance(product: numpy_ref.Product, k: int, dtype: str, precision: str,
                        out_dtype: str, partials: int = 0) -> bounds.Allowance:
    """What a correct kernel may return; `partials`: the partial sums per element it adds in C's dtype."""
    return bounds.allowance(product, k, bounds.arithmetic(dtype, precision, partials), by_name(out_dtype))


def output_partials(variant, dtype: str, config, device_type: str) -> int:
    """The partial sums per element of C `variant` adds in C's dtype on `dtype` inputs in `config`
    ((key, value) pairs; () the default) on a device of `device_type` ("cpu": the interpreter)."""
    if variant.partial_sums_in_output is None:
        return 0
    return variant.output_partials(variant.config(device_type, by_name(dtype).dtype, dict(config) or None))


def against_reference(ops: Operands, precision: str, product: numpy_ref.Product | None = None,
                      partials: int = 0) -> Verdict:
    """Every oracle on a finished launch: memory, all written, and C against the float64 product."""
    case = ops.case
    memory(ops)
    if product is None:
        with phases.timed("reference"):
            product = numpy_ref.product(ops.a.view, ops.b.view)
    out = by_name(case.out_dtype)
    all_written(ops.c.view, product.value, unwritten_bits(out))
    allow = reference_allowance(product, case.K, case.dtype, precision, case.out_dtype, partials)
    with phases.timed("oracles"):
        got = to_float64(ops.c.view)
    try:
        ratio = compare.values(got, allow)
    except ValueOutOfBound as e:
        if case.dtype == "fp32" and precision == "ieee" and _within(got, product, case.K, "tf32", case.out_dtype):
            e.message += ("\nC is within the tf32 bound: the kernel computes fp32 in tf32 (tl.dot's default "
                          "input_precision for fp32); pass input_precision='ieee', or declare precision 'tf32'")
            e.args = (e.message,)
        raise
    return Verdict(bool(allow.exact.all()), ratio, allow, got)


def _within(got, product, k, precision, out_dtype) -> bool:
    try:
        compare.values(got, reference_allowance(product, k, "fp32", precision, out_dtype))
    except ValueOutOfBound:
        return False
    return True


@phases.timed("reference")
def torch_error_ratio(ops: Operands, reference: np.ndarray, mine: np.ndarray) -> float | None:
    """The kernel's largest error against torch.matmul's (native dtype, same device, same inputs),
    over the elements where all three of C, torch's result and the float64 `reference` are finite;
    None where torch is exact there."""
    theirs = to_float64(torch_ref.on_device(ops.a.view, ops.b.view, ops.c.view.dtype))
    finite = np.isfinite(reference) & np.isfinite(mine) & np.isfinite(theirs)
    torch_error = np.abs(theirs[finite] - reference[finite]).max(initial=0.0)
    if torch_error == 0:
        return None
    return float(np.abs(mine[finite] - reference[finite]).max() / torch_error)
