"""The central property: for every registered variant (or the user's --gemm-kernel) and every dtype
it supports, on any case the strategies draw, C is within the sound bound of the float64 reference
(bit-exact where the arithmetic is exact), every element is written, nothing outside C changes, the
inputs stay intact, and (in the interpreter) no access leaves its tensor. The stratified cases
(properties/model/stratified.py) run first, then Hypothesis draws, climbing toward the worst error."""

from gemm_fuzz.properties.model import strategies, stratified
from gemm_fuzz.properties.run.examples import Example


def test_matches_float64_reference(target, backend, gemm):
    variant = target.variant
    sized = dict(device_type=backend.device.type, max_dim=backend.max_dim)

    def example(case):
        return Example("reference", variant.name, case)

    cases = strategies.gemm_cases(variant, target.dtype, **sized)
    explicit = [example(c) for c in stratified.cases(variant, target.dtype, **sized)]
    gemm.search(cases.map(example), explicit, variant, climb=True)
