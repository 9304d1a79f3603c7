"""The central property: for every registered variant and every dtype it supports, on any case the
strategies draw, C is within the sound bound of the float64 reference (bit-exact where the
arithmetic is exact), every element is written, nothing outside C changes and the inputs stay intact."""

from hypothesis import given
from hypothesis import strategies as st
from hypothesis import target as climb

from properties import check, strategies


@given(data=st.data())
def test_matches_float64_reference(target, backend, data):
    case = data.draw(
        strategies.gemm_cases(target.variant, target.dtype, device_type=backend.device.type, max_dim=backend.max_dim),
        label="case",
    )
    observed = check.check(target.variant, case, backend)
    climb(observed.error_ratio, label="error / bound")
