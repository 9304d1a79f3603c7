"""Every oracle passes a right result and fails a planted wrong one, with a message that names it."""

import numpy as np
import pytest
import torch

from properties.judge import oracles
from properties.model.cases import GemmCase, Layout, materialize, unwritten_bits
from reference import bounds, numpy_ref
from reference.formats import by_name


def _case(**kw):
    base = dict(M=5, N=7, K=9, dtype="fp16", out_dtype="fp16", profile="normal", seed=3)
    base.update(kw)
    return GemmCase(**base)


def _right(ops):
    """A correct result written into C (the way a correct kernel would)."""
    ops.c.view.copy_(torch.from_numpy(numpy_ref.product(ops.a.view, ops.b.view).value).to(ops.c.view.dtype))


def _bound(ops, precision="ieee"):
    case = ops.case
    product = numpy_ref.product(ops.a.view, ops.b.view)
    arith = bounds.arithmetic(case.dtype, precision)
    out = by_name(case.out_dtype)
    bound = bounds.elementwise(product, case.K, arith, out)
    return product, bound, bounds.overflow_possible(product, bound, arith, out)


def test_exact_passes_the_rounded_reference_and_fails_one_ulp_off():
    ops = materialize(_case(profile="small_ints"))
    _right(ops)
    product = numpy_ref.product(ops.a.view, ops.b.view)
    oracles.exact(ops.c.view, product.value, by_name("fp16"))
    ops.c.view[2, 3] = torch.nextafter(ops.c.view[2, 3], torch.tensor(np.inf, dtype=torch.float16))
    with pytest.raises(oracles.GemmMismatch, match=r"C\[2, 3\] = .* exact result .* 1 of 35 elements differ"):
        oracles.exact(ops.c.view, product.value, by_name("fp16"))


def test_exact_requires_nan_exactly_where_the_reference_is_nan():
    ops = materialize(_case(profile="small_ints"))
    _right(ops)
    product = numpy_ref.product(ops.a.view, ops.b.view)
    ops.c.view[0, 0] = float("nan")
    with pytest.raises(oracles.GemmMismatch, match=r"C\[0, 0\] = nan"):
        oracles.exact(ops.c.view, product.value, by_name("fp16"))


def test_within_bound_passes_a_right_result_and_reports_the_worst_element():
    ops = materialize(_case())
    _right(ops)
    product, bound, inf_ok = _bound(ops)
    ratio = oracles.within_bound(ops.c.view, product.value, bound, inf_ok)
    assert 0 <= ratio <= 1
    ops.c.view[4, 1] += 0.5
    ops.c.view[1, 1] += 0.01
    with pytest.raises(oracles.GemmMismatch, match=r"C\[4, 1\] = .* error bound .* x the bound\); 2 of 35"):
        oracles.within_bound(ops.c.view, product.value, bound, inf_ok)


def test_within_bound_refuses_nan_and_inf_where_the_reference_is_finite():
    ops = materialize(_case())
    _right(ops)
    product, bound, inf_ok = _bound(ops)
    ops.c.view[3, 3] = float("inf")
    with pytest.raises(oracles.GemmMismatch, match="non-finite value where the reference is finite"):
        oracles.within_bound(ops.c.view, product.value, bound, inf_ok)
    _right(ops)
    ops.c.view[3, 3] = float("nan")
    with pytest.raises(oracles.GemmMismatch, match="poisoned memory"):
        oracles.within_bound(ops.c.view, product.value, bound, inf_ok)


def test_within_bound_accepts_inf_only_where_the_result_may_overflow():
    ref = np.array([[70000.0, 1.0]])
    bound = np.array([[40.0, 1e-3]])
    fp16, arith = by_name("fp16"), bounds.arithmetic("fp16")
    product = numpy_ref.Product(ref, np.abs(ref), False, 1.0)
    inf_ok = bounds.overflow_possible(product, bound, arith, fp16)
    c = torch.tensor([[float("inf"), 1.0]], dtype=torch.float16)
    oracles.within_bound(c, ref, bound, inf_ok)
    c = torch.tensor([[float("-inf"), 1.0]], dtype=torch.float16)
    with pytest.raises(oracles.GemmMismatch):
        oracles.within_bound(c, ref, bound, inf_ok)
    c = torch.tensor([[65504.0, 1.0]], dtype=torch.float16)
    with pytest.raises(oracles.GemmMismatch, match=r"C\[0, 0\]"):
        oracles.within_bound(c, ref, bound, inf_ok)


def test_a_partial_sum_past_the_accumulator_range_may_leave_any_non_finite_value():
    # 2**127 + 2**127 - 2**127 - 2**127: exactly 0, but an fp32 accumulator overflows on the way in
    # one summation order and not in another; a correct kernel may return +-Inf or NaN there
    big = 2.0**127
    a = torch.tensor([[big, big, -big, -big], [1.0, 1.0, 1.0, 1.0]], dtype=torch.bfloat16)
    b = torch.tensor([[1.0], [1.0], [1.0], [1.0]], dtype=torch.bfloat16)
    product = numpy_ref.product(a, b)
    arith, bf16 = bounds.arithmetic("bf16"), by_name("bf16")
    bound = bounds.elementwise(product, 4, arith, bf16)
    inf_ok = bounds.overflow_possible(product, bound, arith, bf16)
    any_ok = bounds.partial_sums_may_overflow(product, bound, arith)
    assert any_ok.tolist() == [[True], [False]] and not inf_ok.any()
    for first in (float("inf"), float("-inf"), float("nan"), 0.0):
        oracles.within_bound(torch.tensor([[first], [4.0]], dtype=torch.bfloat16), product.value, bound, inf_ok, any_ok)
    with pytest.raises(oracles.GemmMismatch, match=r"C\[1, 0\] = inf"):  # |A||B| is small in row 1: no excuse
        oracles.within_bound(torch.tensor([[0.0], [float("inf")]], dtype=torch.bfloat16), product.value, bound,
                             inf_ok, any_ok)
    with pytest.raises(oracles.GemmMismatch, match=r"C\[0, 0\] = inf"):  # without the mask, the same fails
        oracles.within_bound(torch.tensor([[float("inf")], [4.0]], dtype=torch.bfloat16), product.value, bound, inf_ok)


def test_all_written_catches_an_untouched_element_but_not_a_computed_nan():
    ops = materialize(_case())
    product = numpy_ref.product(ops.a.view, ops.b.view)
    unwritten = unwritten_bits(by_name("fp16"))
    with pytest.raises(oracles.GemmMismatch, match=r"C\[0, 0\] still holds its pre-fill .*\(35 of 35 elements"):
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
        assert oracles.bits_of(value.reshape(1))[0] != unwritten_bits(by_name(out))


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
        with pytest.raises(oracles.GemmMismatch, match=f"a write outside C: buffer offset {index} changed \\({where}"):
            oracles.canaries_intact(ops.c)


def test_input_unchanged_names_the_element_written():
    ops = materialize(_case())
    oracles.input_unchanged(ops.a)
    ops.a.view[1, 2] = 0.0 if ops.a.view[1, 2] != 0 else 1.0
    with pytest.raises(oracles.GemmMismatch, match=r"a write into input A: .* \(A\[1, 2\]\)"):
        oracles.input_unchanged(ops.a)
