"""The same kernel compiled on the GPU and interpreted, on the same case (properties/checks/cross_backend.py;
GPU only)."""

import pytest

from gemm_fuzz.properties import checks


@pytest.mark.gpu
def test_compiled_and_interpreted_agree(target, gemm):
    gemm.check(checks.CROSS_BACKEND, target)
