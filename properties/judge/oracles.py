"""The checks that judge one launch. Each is a plain function that raises `GemmMismatch` (an
AssertionError) whose message names the operand, the first offending coordinates and the values."""

from __future__ import annotations

import numpy as np
import torch

from properties.model.cases import Guarded, bits_of
from reference.formats import Format
from reference.numpy_ref import to_float64


class GemmMismatch(AssertionError):
    """A kernel's result or memory effects differ from what every correct kernel must produce."""


def _where(mask: np.ndarray) -> tuple[int, int]:
    i, j = np.argwhere(mask)[0]
    return int(i), int(j)


def _fmt(x: float) -> str:
    return f"{x:.9g}"


def exact(c: torch.Tensor, reference: np.ndarray, out: Format) -> None:
    """C equals the float64 reference rounded once to C's dtype, element for element (NaN matches
    NaN; +0 and -0 are equal)."""
    expected = to_float64(torch.from_numpy(reference).to(out.dtype))
    got = to_float64(c)
    same = (got == expected) | (np.isnan(got) & np.isnan(expected))
    if not same.all():
        i, j = _where(~same)
        raise GemmMismatch(
            f"C[{i}, {j}] = {_fmt(got[i, j])} but the exact result rounded to {out.name} is {_fmt(expected[i, j])} "
            f"(float64 reference {_fmt(reference[i, j])}); {int((~same).sum())} of {same.size} elements differ "
            "on an exact case, where every correct kernel is bit-exact"
        )


def within_bound(c: torch.Tensor, reference: np.ndarray, bound: np.ndarray, inf_allowed: np.ndarray,
                 nonfinite_allowed: np.ndarray | None = None) -> float:
    """|C - reference| <= bound elementwise; NaN exactly where the reference is NaN; +-Inf only where
    the reference is that infinity or may overflow (`inf_allowed`: with the reference's sign); any
    non-finite value where a partial sum may overflow the accumulator (`nonfinite_allowed`). Returns
    the largest error / bound ratio."""
    got = to_float64(c)
    ref_nan = np.isnan(reference)
    both_inf = np.isinf(got) & (got == reference)
    overflow_ok = np.isinf(got) & inf_allowed & (np.sign(got) == np.sign(reference))
    if nonfinite_allowed is not None:
        overflow_ok |= ~np.isfinite(got) & nonfinite_allowed & ~np.isnan(reference)
    with np.errstate(invalid="ignore"):
        err = np.abs(got - reference)
        ok = (err <= bound) | both_inf | overflow_ok | (ref_nan & np.isnan(got))
    bad = ~ok
    if bad.any():
        # report the worst finite violation first, else the first non-finite one
        ratio = np.where(bad & np.isfinite(err), err / np.where(bound > 0, bound, np.inf), -1.0)
        i, j = np.unravel_index(int(np.argmax(ratio)), ratio.shape) if ratio.max() >= 0 else _where(bad)
        if not np.isfinite(reference[i, j]):
            detail = "the reference is non-finite there"
        elif not np.isfinite(got[i, j]):
            detail = ("a non-finite value where the reference is finite: a read of poisoned memory "
                      "(NaN surrounds A and B), or an overflow")
        else:
            detail = f"error {_fmt(err[i, j])} = {err[i, j] / bound[i, j]:.3g} x the bound"
        raise GemmMismatch(
            f"C[{i}, {j}] = {_fmt(got[i, j])} but the float64 reference is {_fmt(reference[i, j])} and the "
            f"error bound is {_fmt(bound[i, j])} ({detail}); {int(bad.sum())} of {bad.size} elements are outside "
            "the bound"
        )
    finite = np.isfinite(err) & np.isfinite(reference) & (bound > 0)
    return float((err[finite] / bound[finite]).max(initial=0.0))


def all_written(c: torch.Tensor, reference: np.ndarray, unwritten: int) -> None:
    """No element of C still holds the pre-fill bit pattern (a NaN whose payload no arithmetic makes)."""
    left = bits_of(c) == unwritten
    if left.any():
        i, j = _where(left)
        raise GemmMismatch(
            f"C[{i}, {j}] still holds its pre-fill (bits {unwritten:#x}): the kernel never wrote it, or computed it "
            f"from C's own unwritten contents ({int(left.sum())} of {left.size} elements; the reference there is "
            f"{_fmt(reference[i, j])})"
        )


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
        raise GemmMismatch(
            f"a write outside C: buffer offset {first} changed ({_position(c, first)}); "
            f"{outside.size} element(s) outside C were overwritten"
        )


def input_unchanged(g: Guarded) -> None:
    """The kernel wrote nothing into an input's buffer (its elements, padding or guard bands)."""
    changed = g.changed()
    if changed.size:
        first = int(changed[0])
        where = f"{g.name}{list(_coordinates(g, first))}" if g.elements[first] else _position(g, first)
        raise GemmMismatch(
            f"a write into input {g.name}: buffer offset {first} changed ({where}); {changed.size} element(s) changed"
        )
