"""The same kernel, compiled on the GPU and run through the interpreter (in a worker process), on
the same case: bit-equal where the arithmetic is exact, within both bounds elsewhere (GPU only)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from properties.model import strategies
from properties.run.examples import Example

EXAMPLES = max(3, settings.default.max_examples // 5)  # each example also runs in the interpreter


@pytest.mark.gpu
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_compiled_and_interpreted_agree(target, backend, gemm, data):
    # interpreter-sized problems: the interpreter runs one program at a time
    case = data.draw(strategies.gemm_cases(target.variant, target.dtype, device_type="cuda", max_dim=96), label="case")
    gemm.run(Example("cross_backend", target.variant.name, case), target.variant)
