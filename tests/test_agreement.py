"""The agreement oracle names the variants that differ from the majority, and only the focus
variant when a user's kernel is judged by its peers."""

import numpy as np
import pytest

from properties.judge import agreement, relations
from properties.judge.oracles import GemmMismatch


def test_a_variant_that_differs_is_named(backend):
    right = relations.Run(np.array([[1.0, 2.0]]), np.array([[1.0, 2.0]]), np.zeros((1, 2)), True)
    wrong = relations.Run(np.array([[1.0, 3.0]]), np.array([[1.0, 2.0]]), np.zeros((1, 2)), True)
    agreement.judge({"a": right, "b": right, "c": right}, "case")
    with pytest.raises(GemmMismatch, match=r"1 of 3 variants differ from the majority \(a, b\):\n  c: C\[0, 1\] = 3"):
        agreement.judge({"a": right, "b": right, "c": wrong}, "case")
    agreement.judge({"a": right, "b": right, "c": wrong}, "case", focus="a")  # only the focus is judged...
    with pytest.raises(GemmMismatch, match="c: C"):
        agreement.judge({"a": right, "b": right, "c": wrong}, "case", focus="c")  # ...and here it is the outlier
    near = relations.Run(np.array([[1.0, 2.5]]), np.array([[1.0, 2.0]]), np.full((1, 2), 0.3), False)
    agreement.judge({"a": near, "b": relations.Run(right.c, right.value, np.full((1, 2), 0.3), False)}, "case")


def test_an_overflow_agrees_only_where_a_partial_sum_may_overflow(backend):
    value, bound = np.array([[0.0, 2.0]]), np.full((1, 2), 0.1)
    finite = relations.Run(np.array([[0.0, 2.0]]), value, bound, False, np.array([[True, False]]))
    overflowed = relations.Run(np.array([[np.inf, 2.0]]), value, bound, False, np.array([[True, False]]))
    agreement.judge({"a": finite, "b": finite, "c": overflowed}, "case")
    wrong = relations.Run(np.array([[0.0, np.inf]]), value, bound, False, np.array([[True, False]]))
    with pytest.raises(GemmMismatch, match=r"c: C\[0, 1\] = inf"):
        agreement.judge({"a": finite, "b": finite, "c": wrong}, "case")
