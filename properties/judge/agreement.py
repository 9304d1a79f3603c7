"""Cross-variant agreement: one case, every variant that accepts it, judged against each other.

Two results agree where the one comparison (properties.judge.compare) accepts one against the other:
bit-equal where both variants' arithmetic is exact, within the sum of their two bounds elsewhere,
NaN matching NaN, and elements where either may legitimately differ in kind (an overflow whose sign
depends on the order of summation) left out. The majority is the largest group of variants that
agree with more than half of the others; a variant outside it is named, with the first element
where it differs from the majority.
"""

from __future__ import annotations

import numpy as np

from gemm_fuzz.properties.judge import compare
from gemm_fuzz.properties.judge.failures import ValueOutOfBound
from gemm_fuzz.properties.judge.relations import Run, paired


def _agree(x: Run, y: Run) -> np.ndarray:
    return compare.accepted(y.c, paired(x.c, [x, y]))


def judge(runs: dict[str, Run], focus: str | None = None) -> None:
    """Raise ValueOutOfBound naming the variants that differ from the majority (with `focus`, only if
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
    if focus is not None and not majority:  # a kernel against one judge: the built-ins are the reference
        majority = [p for p in names if p != focus]
    if not majority:
        raise ValueOutOfBound(f"no majority among {', '.join(names)}; every variant disagrees with most of the others",
                              variants=names)
    lines = []
    for p in outliers:
        # agreement is not transitive: an outlier may agree with some members of the majority, so it is
        # shown beside the best-supported one it disagrees with (an outlier disagrees with more than half)
        differ = [q for q in majority if not agree[p, q]]
        anchor = max(differ or [q for q in names if q != p and not agree[p, q]], key=lambda q: support[q])
        side = "with the majority" if anchor in majority else "outside the majority too"
        at = tuple(int(v) for v in np.argwhere(~_agree(runs[anchor], runs[p]))[0])
        lines.append(f"  {p}: C[{', '.join(map(str, at))}] = {runs[p].c[at]:.9g} where {anchor} ({side}) has "
                     f"{runs[anchor].c[at]:.9g}")
    raise ValueOutOfBound(f"{len(outliers)} of {len(names)} variants differ from the majority "
                          f"({', '.join(majority)}):\n" + "\n".join(lines), outliers=outliers, majority=majority)
