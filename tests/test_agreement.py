"""The agreement oracle names the variants that differ from the majority, and only the focus
variant when a user's kernel is judged by its peers."""

import numpy as np
import pytest

from gemm_fuzz.properties.judge import agreement, relations
from gemm_fuzz.properties.judge.failures import ValueOutOfBound
from gemm_fuzz.reference.bounds import Allowance


def _run(c, expected, bound, exact, may_overflow=None):
    shape = np.shape(expected)
    none = np.zeros(shape, dtype=bool)
    overflow = none if may_overflow is None else np.asarray(may_overflow)
    allow = Allowance(np.asarray(expected, dtype=float), np.broadcast_to(bound, shape), exact, overflow, overflow,
                      overflow)
    return relations.Run(np.asarray(c, dtype=float), allow)


def test_a_variant_that_differs_is_named():
    right = _run([[1.0, 2.0]], [[1.0, 2.0]], 0.0, True)
    wrong = _run([[1.0, 3.0]], [[1.0, 2.0]], 0.0, True)
    agreement.judge({"a": right, "b": right, "c": right})
    majority = r"1 of 3 variants differ from the majority \(a, b\):\n  c: C\[0, 1\] = 3"
    with pytest.raises(ValueOutOfBound, match=majority):
        agreement.judge({"a": right, "b": right, "c": wrong})
    agreement.judge({"a": right, "b": right, "c": wrong}, focus="a")  # only the focus is judged...
    with pytest.raises(ValueOutOfBound, match="c: C"):
        agreement.judge({"a": right, "b": right, "c": wrong}, focus="c")  # ...and here it is the outlier
    near = _run([[1.0, 2.5]], [[1.0, 2.0]], 0.3, False)
    agreement.judge({"a": near, "b": _run([[1.0, 2.0]], [[1.0, 2.0]], 0.3, False)})
    # a user's kernel against its one judge: the judge (a built-in) is the majority
    with pytest.raises(ValueOutOfBound, match=r"1 of 2 variants differ from the majority \(tiled\):\n  c: C\[0, 1\]"):
        agreement.judge({"c": wrong, "tiled": right}, focus="c")
    agreement.judge({"c": right, "tiled": right}, focus="c")


def test_an_overflow_agrees_only_where_a_partial_sum_may_overflow():
    value = [[0.0, 2.0]]
    finite = _run([[0.0, 2.0]], value, 0.1, False, [[True, False]])
    overflowed = _run([[np.inf, 2.0]], value, 0.1, False, [[True, False]])
    agreement.judge({"a": finite, "b": finite, "c": overflowed})
    wrong = _run([[0.0, np.inf]], value, 0.1, False, [[True, False]])
    with pytest.raises(ValueOutOfBound, match=r"c: C\[0, 1\] = inf"):
        agreement.judge({"a": finite, "b": finite, "c": wrong})


def test_an_outlier_is_shown_beside_a_member_of_the_majority_it_disagrees_with():
    """Agreement is not transitive: a loosely bounded variant (tf32) agrees with everyone, so it has the
    most support, yet a kernel computing fp32 in tf32 disagrees with the tight ones. The outlier is shown
    beside a tight one (the loose one agrees with it: no element to show)."""
    loose = _run([[2.0]], [[2.0]], 1.0, False)
    tight = _run([[2.0]], [[2.0]], 0.01, False)
    focus = _run([[2.5]], [[2.0]], 0.01, False)
    runs = {"loose": loose, "t1": tight, "t2": tight, "t3": tight, "focus": focus}
    with pytest.raises(ValueOutOfBound, match=r"focus: C\[0, 0\] = 2.5 where t1 \(with the majority\) has 2"):
        agreement.judge(runs, focus="focus")
