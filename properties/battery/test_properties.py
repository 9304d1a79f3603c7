"""The central property: for every registered variant (or the user's --gemm-kernel) and every dtype
it supports, on any case the strategies draw, C is within the sound bound of the float64 reference
(bit-exact where the arithmetic is exact), every element is written, nothing outside C changes, the
inputs stay intact, and (in the interpreter) no access leaves its tensor."""

from hypothesis import given
from hypothesis import strategies as st
from hypothesis import target as climb

from properties.model import strategies
from properties.run.examples import Example


@given(data=st.data())
def test_matches_float64_reference(target, backend, gemm, data):
    case = data.draw(
        strategies.gemm_cases(target.variant, target.dtype, device_type=backend.device.type, max_dim=backend.max_dim),
        label="case",
    )
    observed = gemm.run(Example("reference", target.variant.name, case), target.variant)
    climb(observed.error_ratio, label="error / bound")  # the campaign climbs toward the worst inputs
