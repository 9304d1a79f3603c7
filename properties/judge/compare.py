"""The one comparison every value oracle uses: values against a `reference.bounds.Allowance`.

The float64 reference, a metamorphic relation (the second run against the first, transformed),
agreement between variants and compiled-against-interpreted all build an Allowance and call
`values`; a violation raises `NotBitExact` (where the element must be bit-exact) or
`ValueOutOfBound`, with one message shape: the worst element, what was allowed there, and how many
elements are outside; then a table of the few worst elements (WORST_SHOWN), one a line (also in the
failure's field `worst`).
"""

from __future__ import annotations

import numpy as np

from gemm_fuzz.properties import phases
from gemm_fuzz.properties.judge.failures import NotBitExact, ValueOutOfBound
from gemm_fuzz.reference.bounds import Allowance

WORST_SHOWN = 4  # elements in a value failure's table of the worst


def _fmt(x: float) -> str:
    return f"{x:.9g}"


def accepted(got: np.ndarray, allow: Allowance) -> np.ndarray:
    """Per element: is `got` acceptable under `allow`?"""
    expected = allow.expected
    with np.errstate(invalid="ignore"):
        ok = (got == expected) | (np.isnan(got) & np.isnan(expected))
        finite = np.isfinite(got) & np.isfinite(expected)
        inexact = (finite & (np.abs(got - expected) <= allow.bound)) | (np.isposinf(got) & allow.pos_inf) \
            | (np.isneginf(got) & allow.neg_inf) | (np.isnan(got) & allow.nan)
    ok |= inexact & ~allow.exact
    if allow.free is not None:
        ok |= allow.free
    return ok


def _allowed_text(allow: Allowance, at: tuple[int, ...]) -> str:
    """What was acceptable at one element, in words."""
    e = allow.expected[at]
    if allow.exact[at]:
        return f"exactly {_fmt(e)}"
    options = [f"{_fmt(e)} +- {_fmt(allow.bound[at])}"] if np.isfinite(e) else [_fmt(e)]
    options += [name for name, mask in (("+Inf", allow.pos_inf), ("-Inf", allow.neg_inf), ("NaN", allow.nan))
                if mask[at] and name.lower().lstrip("+") != str(e).lower().lstrip("+")]
    return " or ".join(options)


def _at(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape))


def _name(name: str, at: tuple[int, ...]) -> str:
    return f"{name}[{', '.join(map(str, at))}]"


def worst(got: np.ndarray, allow: Allowance, bad: np.ndarray, err: np.ndarray, ratio: np.ndarray,
          count: int = WORST_SHOWN) -> list[tuple[int, ...]]:
    """Up to `count` wrong elements, worst first, in the order the message's first line picks its one: where
    bit-exactness is due, the largest differences; then the largest finite error / bound; then non-finite
    values where another is due, in index order."""
    exact_bad = bad & allow.exact
    finite_bad = bad & ~allow.exact & np.isfinite(err)
    rest = bad & ~exact_bad & ~finite_bad
    picked: list[int] = []
    for mask, key in ((exact_bad, np.nan_to_num(err, nan=np.inf)), (finite_bad, ratio), (rest, None)):
        flat = np.flatnonzero(mask)
        if key is not None:  # largest first; among equals, the first in index order (as argmax picks)
            flat = flat[np.lexsort((flat, -key.ravel()[flat]))]
        picked += flat[:count - len(picked)].tolist()
        if len(picked) >= count:
            break
    return [_at(i, bad.shape) for i in picked]


def _table(name: str, got: np.ndarray, allow: Allowance, err: np.ndarray, ratio: np.ndarray,
           found: list[tuple[int, ...]]) -> tuple[str, list[dict]]:
    """The worst elements as a table, one a line (got, expected, what is allowed around it, error / bound),
    and as fields."""
    rows, fields = [], []
    for at in found:
        g, e, exact = float(got[at]), float(allow.expected[at]), bool(allow.exact[at])
        finite = np.isfinite(g) and np.isfinite(e)
        if exact:
            allowed = "exactly"
        elif np.isfinite(e):
            allowed = f"+- {allow.bound[at]:.3g}"
        else:
            allowed = _allowed_text(allow, at)
        times = f"{ratio[at]:.3g}" if finite and not exact else "-"
        rows.append(("  " + _name(name, at), _fmt(g), _fmt(e), allowed, times))
        fields.append(dict(index=at, got=g, expected=e, exact=exact, bound=float(allow.bound[at]),
                           ratio=float(ratio[at]) if finite and not exact else None))
    header = ("worst", "got", "expected", "allowed", "error / bound")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in [header, *rows]]
    return "\n".join(lines), fields


@phases.timed("oracles")
def values(got: np.ndarray, allow: Allowance, *, against: str = "the float64 reference", name: str = "C") -> float:
    """Judge float64 values `got` against `allow`. Returns the largest |got - expected| / bound over the
    finite elements compared that need not be bit-exact (0 if there are none); raises NotBitExact
    (where some element that must be bit-exact is not) or ValueOutOfBound."""
    ok = accepted(got, allow)
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.abs(got - allow.expected)
        ratio = np.where(np.isfinite(err) & (allow.bound > 0), err / np.where(allow.bound > 0, allow.bound, 1), 0.0)
    judged = ~allow.exact if allow.free is None else ~allow.exact & ~allow.free
    if ok.all():
        return float(ratio[judged & np.isfinite(ratio)].max(initial=0.0))
    bad = ~ok
    exact_bad = bad & allow.exact
    count, total = int(bad.sum()), bad.size
    found = worst(got, allow, bad, err, ratio)  # the first line's element is the worst
    table, shown = _table(name, got, allow, err, ratio, found)
    at = found[0]
    g, e = got[at], allow.expected[at]
    if exact_bad.any():  # the sharper verdict: the largest difference where bit-exactness is due
        raise NotBitExact(
            f"{_name(name, at)} = {_fmt(g)} where {against} is exactly {_fmt(e)}; {count} of {total} elements are "
            f"wrong, {int(exact_bad.sum())} of them where the arithmetic is exact and every correct kernel is "
            f"bit-exact\n{table}", index=at, got=float(g), expected=float(e), count=count, total=total,
            against=against, operand=name, worst=shown)
    fields = dict(index=at, got=float(g), expected=float(e), count=count, total=total, against=against,
                  operand=name, worst=shown)
    if np.isfinite(g) and np.isfinite(e):
        detail = f"error {_fmt(err[at])} = {ratio[at]:.3g} x the bound"
        fields.update(bound=float(allow.bound[at]), ratio=float(ratio[at]))
    elif not np.isfinite(g) and np.isfinite(e):
        detail = ("a non-finite value where a finite one is due: a read of poisoned memory (NaN surrounds A "
                  "and B), or an overflow no order of summation produces")
    elif np.isfinite(g):
        detail = "a finite value where every correct kernel gives a non-finite one"
    else:
        detail = "not the non-finite value every correct kernel produces here"
    raise ValueOutOfBound(
        f"{_name(name, at)} = {_fmt(g)} where {against} is {_fmt(e)}; allowed: {_allowed_text(allow, at)} "
        f"({detail}); {count} of {total} elements are outside what is allowed\n{table}", **fields)
