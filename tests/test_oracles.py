"""Every oracle passes a right result and fails a planted wrong one, with a typed failure whose
message names it; the allowance for non-finite results follows IEEE semantics and the signs of the
terms, so no wrong value hides behind an infinity."""

import numpy as np
import pytest
import torch

from gemm_fuzz.properties.judge import compare, failures, oracles
from gemm_fuzz.properties.model.cases import GemmCase, Layout, bits_of, materialize, unwritten_bits
from gemm_fuzz.reference import bounds, numpy_ref
from gemm_fuzz.reference.formats import by_name


def _case(**kw):
    base = dict(M=5, N=7, K=9, dtype="fp16", out_dtype="fp16", profile="normal", seed=3)
    base.update(kw)
    return GemmCase(**base)


def _right(ops):
    """A correct result written into C (the way a correct kernel would)."""
    ops.c.view.copy_(torch.from_numpy(numpy_ref.product(ops.a.view, ops.b.view).value).to(ops.c.view.dtype))


def _allowance(a, b, dtype="fp16", out="fp16", precision="ieee"):
    a, b = torch.tensor(a, dtype=torch.float64).to(by_name(dtype).dtype), torch.tensor(b, dtype=torch.float64).to(
        by_name(dtype).dtype)
    product = numpy_ref.product(a, b)
    return bounds.allowance(product, a.shape[1], bounds.arithmetic(dtype, precision), by_name(out))


def _judge(got, allow):
    return compare.values(np.array(got, dtype=np.float64), allow)


def test_an_exact_case_passes_the_rounded_reference_and_fails_one_ulp_off():
    ops = materialize(_case(profile="small_ints"))
    _right(ops)
    assert oracles.against_reference(ops, "ieee").exact
    ops.c.view[2, 3] = torch.nextafter(ops.c.view[2, 3], torch.tensor(np.inf, dtype=torch.float16))
    with pytest.raises(failures.NotBitExact, match=r"C\[2, 3\] = .* is exactly .*; 1 of 35 elements are wrong"):
        oracles.against_reference(ops, "ieee")


def test_within_bound_passes_a_right_result_and_reports_the_worst_element():
    ops = materialize(_case())
    _right(ops)
    verdict = oracles.against_reference(ops, "ieee")
    assert not verdict.exact and 0 <= verdict.error_ratio <= 1
    ops.c.view[4, 1] += 0.5
    ops.c.view[1, 1] += 0.01
    with pytest.raises(failures.ValueOutOfBound, match=r"C\[4, 1\] = .* x the bound\); 2 of 35 elements are outside"):
        oracles.against_reference(ops, "ieee")


def test_a_non_finite_value_where_the_reference_is_finite_fails():
    ops = materialize(_case())
    for bad in (float("inf"), float("nan")):
        _right(ops)
        ops.c.view[3, 3] = bad
        with pytest.raises(failures.ValueOutOfBound, match="non-finite value where a finite one is due"):
            oracles.against_reference(ops, "ieee")


def test_an_infinite_reference_admits_only_that_infinity():
    # A = [[+Inf, 1]], B = [[1], [2]]: every correct kernel returns +Inf
    allow = _allowance([[np.inf, 1.0]], [[1.0], [2.0]])
    _judge([[np.inf]], allow)
    for wrong in (0.0, 3.0, 65504.0, -np.inf, np.nan):
        with pytest.raises(failures.ValueOutOfBound, match=r"where the float64 reference is inf"):
            _judge([[wrong]], allow)


def test_nan_on_an_infinite_reference_only_where_the_finite_rest_can_overflow_the_other_way():
    # +Inf plus a finite part that can itself reach -Inf in fp32: Inf - Inf = NaN is legitimate
    big = 2.0**127
    allow = _allowance([[np.inf, -big, -big]], [[1.0], [1.0], [1.0]], dtype="bf16", out="bf16")
    _judge([[np.inf]], allow)
    _judge([[np.nan]], allow)
    with pytest.raises(failures.ValueOutOfBound):
        _judge([[-np.inf]], allow)
    # the same with a small finite part: NaN is wrong there
    small = _allowance([[np.inf, -1.0, -1.0]], [[1.0], [1.0], [1.0]], dtype="bf16", out="bf16")
    with pytest.raises(failures.ValueOutOfBound):
        _judge([[np.nan]], small)


def test_inf_only_where_the_result_may_overflow_and_with_its_sign():
    # C = [[90150, 300.5], [300.5, 1.5]]: 90150 overflows fp16 (and 0.5s keep it off the exact path)
    allow = _allowance([[300.0], [1.0]], [[300.5, 1.5]])
    _judge([[np.inf, 450.0], [300.5, 1.5]], allow)
    for wrong in (-np.inf, np.nan, 65504.0):
        with pytest.raises(failures.ValueOutOfBound, match=r"C\[0, 0\]"):
            _judge([[wrong, 450.0], [300.5, 1.5]], allow)


def test_a_partial_sum_past_the_accumulator_range_allows_what_its_signs_allow():
    # 2**127 + 2**127 - 2**127 - 2**127: exactly 0, but an fp32 accumulator may overflow on the way,
    # to +Inf in one order, -Inf in another, NaN in a split reduction: all legitimate
    big = 2.0**127
    allow = _allowance([[big, big, -big, -big], [1.0, 1.0, 1.0, 1.0]], [[1.0], [1.0], [1.0], [1.0]], "bf16", "bf16")
    for first in (np.inf, -np.inf, np.nan, 0.0):
        _judge([[first], [4.0]], allow)
    for precision in ("ieee", "tf32"):  # an H100 gives +Inf on the ieee path and 0 on the tf32 one
        fp32 = _allowance([[big, big, -big, -big]], [[1.0], [1.0], [1.0], [1.0]], "fp32", "fp32", precision)
        _judge([[np.inf]], fp32)
        _judge([[0.0]], fp32)
    # |A||B| is small in row 1, all integers: exact there, no excuse
    with pytest.raises(failures.NotBitExact, match=r"C\[1, 0\] = inf where the float64 reference is exactly 4"):
        _judge([[0.0], [np.inf]], allow)


def test_an_all_positive_sum_that_overflows_admits_only_plus_inf():
    # every product positive: every order of summation gives +Inf; NaN and -Inf are wrong
    a = [[2.0**126] * 8]
    allow = _allowance(a, [[1.0]] * 8, "fp32", "fp32")
    _judge([[np.inf]], allow)
    for wrong in (-np.inf, np.nan, 3.4e38):
        with pytest.raises(failures.ValueOutOfBound):
            _judge([[wrong]], allow)


def test_all_written_catches_an_untouched_element_but_not_a_computed_nan():
    ops = materialize(_case())
    product = numpy_ref.product(ops.a.view, ops.b.view)
    unwritten = unwritten_bits(by_name("fp16"))
    with pytest.raises(failures.NotWritten,
                       match=r"C\[0, 0\] still holds its pre-fill .*; 35 of 35 elements are unwritten"):
        oracles.all_written(ops.c.view, product.value, unwritten)
    _right(ops)
    ops.c.view[2, 2] = float("nan")  # a computed NaN has the canonical payload
    oracles.all_written(ops.c.view, product.value, unwritten)


@pytest.mark.parametrize("out", ["fp16", "bf16", "fp32"])
def test_all_written_prefill_differs_from_every_nan_arithmetic_makes(out):
    ops = materialize(_case(dtype=out, out_dtype=out))
    assert torch.isnan(ops.c.view).all()
    dtype = ops.c.view.dtype
    inf = torch.tensor(float("inf"), dtype=dtype)
    poison = ops.a.buffer[:1]  # what an unmasked read of A's surroundings returns
    computed = [inf * 0, inf - inf, poison + 1, (poison.float() * 2).to(dtype), torch.tensor(float("nan"), dtype=dtype)]
    for value in computed:
        assert torch.isnan(value).all()
        assert bits_of(value.reshape(1))[0] != unwritten_bits(by_name(out))


def test_canaries_name_a_write_before_after_and_inside_the_padding():
    ops = materialize(_case(c=Layout(pad=3)))
    _right(ops)
    oracles.canaries_intact(ops.c)
    start = ops.c.view.storage_offset()
    for index, where in ((start - 2, "2 element\\(s\\) before C"), (start + 6 * 10 + 7, ".*after C's last"),
                         (start + 7, "inside C's padding")):
        ops = materialize(_case(c=Layout(pad=3)))
        _right(ops)
        ops.c.buffer[index] = 1.0
        expected = f"a write outside C: buffer offset {index} changed \\({where}"
        with pytest.raises(failures.WriteOutsideC, match=expected):
            oracles.canaries_intact(ops.c)


def test_input_unchanged_names_the_element_written():
    ops = materialize(_case())
    oracles.input_unchanged(ops.a)
    ops.a.view[1, 2] = 0.0 if ops.a.view[1, 2] != 0 else 1.0
    with pytest.raises(failures.InputModified, match=r"a write into input A: .* \(A\[1, 2\]\)"):
        oracles.input_unchanged(ops.a)


def test_failures_travel_whole_between_processes():
    error = failures.ValueOutOfBound("C[0, 1] = 3 where ...", index=(0, 1), got=3.0, count=1)
    error.with_context(variant="tiled", case="1x2x3 ...", check="against the float64 reference")
    again = failures.GemmFailure.from_dict(error.to_dict())
    assert type(again) is failures.ValueOutOfBound and again.kind == "value out of bound"
    assert again.index == [0, 1] and again.got == 3.0 and str(again) == str(error)


def test_exactness_is_judged_element_by_element():
    """A NaN or a fraction in one row of A takes only that row off the exact path: the others must
    still be bit-exact (an accumulator too narrow for them shows there)."""
    a = [[1.0, np.nan], [3.0, 4.0], [0.5, 1.0]]
    allow = _allowance(a, [[1.0], [2.0]])
    assert allow.exact.tolist() == [[False], [True], [False]]
    _judge([[np.nan], [11.0], [2.5]], allow)
    with pytest.raises(failures.NotBitExact, match=r"C\[1, 0\] = 11.0078125 where the float64 reference is exactly 11"):
        _judge([[np.nan], [11.0078125], [2.5]], allow)
    _judge([[np.nan], [11.0], [2.5 + 2**-11]], allow)  # within the bound where inexact


def test_a_tf32_operand_below_the_smallest_normal_may_vanish_and_nowhere_else():
    """tf32 rounding truncates (or a tensor core flushes) an fp32 subnormal: its product may be lost
    whole, and Inf times it may be NaN. The ieee class keeps both exact."""
    tiny = 2.0**-140
    a = [[2.0**100, np.inf], [2.0**100, 1.0]]
    b = [[tiny], [tiny]]
    tf32 = _allowance(a, b, "fp32", "fp32", "tf32")
    ieee = _allowance(a, b, "fp32", "fp32", "ieee")
    _judge([[np.nan], [0.0]], tf32)  # 2**100 * tiny lost, Inf * 0 = NaN: legitimate in tf32
    for wrong in ([[np.nan], [2.0**-40]], [[np.inf], [0.0]]):
        with pytest.raises(failures.ValueOutOfBound):
            _judge(wrong, ieee)
