"""The central property (properties/checks/reference.py): C within the sound bound of the float64
reference, every element written, nothing outside C changed, the inputs intact, no access outside its
tensor, for every variant (or the user's --gemm-kernel) and every dtype it supports."""

from gemm_fuzz.properties import checks


def test_matches_float64_reference(target, gemm):
    gemm.check(checks.REFERENCE, target)
