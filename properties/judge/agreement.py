"""Cross-variant agreement: one case, every variant that accepts it, judged against each other.

Two results agree when they are bit-equal (where both variants' arithmetic is exact) or within the
sum of their two bounds elsewhere, element by element (NaN matching NaN; a non-finite value where a
partial sum may overflow the accumulator matches anything). The majority is the largest
group of variants that agree with more than half of the others; a variant outside it is named, with
the first element where it differs from the majority.
"""

from __future__ import annotations

import numpy as np

from properties.judge.oracles import GemmMismatch
from properties.judge.relations import Run


def _agree(x: Run, y: Run) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        same = (x.c == y.c) | (np.isnan(x.c) & np.isnan(y.c))
        if x.exact and y.exact:
            return same
        overflowed = (~np.isfinite(x.c) & x.nonfinite_allowed()) | (~np.isfinite(y.c) & y.nonfinite_allowed())
        return same | overflowed | (np.abs(x.c - y.c) <= x.bound + y.bound)


def judge(runs: dict[str, Run], case_text: str, focus: str | None = None) -> None:
    """Raise GemmMismatch naming the variants that differ from the majority (with `focus`, only if
    that variant is among them: a user's kernel judged by its peers)."""
    names = list(runs)
    if len(names) < 2:
        return
    agree = {(p, q): _agree(runs[p], runs[q]).all() for p in names for q in names if p != q}
    support = {p: sum(agree[p, q] for q in names if q != p) for p in names}
    majority = [p for p in names if support[p] * 2 >= len(names) - 1]
    outliers = [p for p in names if p not in majority]
    if focus is not None:
        outliers = [p for p in outliers if p == focus]
    if not outliers:
        return
    if not majority:
        raise GemmMismatch(f"on {case_text}: no majority among {', '.join(names)}; every variant disagrees with "
                           "most of the others")
    lines = []
    for p in outliers:
        anchor = max(majority, key=lambda q: support[q])
        i, j = (int(v) for v in np.argwhere(~_agree(runs[p], runs[anchor]))[0])
        lines.append(f"  {p}: C[{i}, {j}] = {runs[p].c[i, j]:.9g} where {anchor} (with the majority) has "
                     f"{runs[anchor].c[i, j]:.9g}")
    raise GemmMismatch(f"on {case_text}: {len(outliers)} of {len(names)} variants differ from the majority "
                       f"({', '.join(majority)}):\n" + "\n".join(lines))
