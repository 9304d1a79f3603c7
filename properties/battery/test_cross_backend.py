"""The same kernel, compiled on the GPU and run through the interpreter (in a worker process), on
the same case: bit-equal where the arithmetic is exact, within both bounds elsewhere (GPU only). The
stratified cases run first."""

import pytest
from hypothesis import settings

from gemm_fuzz.properties.model import strategies, stratified
from gemm_fuzz.properties.run.examples import Example

EXAMPLES = max(3, settings.default.max_examples // 5)  # each example also runs in the interpreter
# interpreter-sized problems: the interpreter runs one program at a time
SIZED = dict(device_type="cuda", max_dim=96)


@pytest.mark.gpu
def test_compiled_and_interpreted_agree(target, gemm):
    variant = target.variant

    def example(case):
        return Example("cross_backend", variant.name, case)

    cases = strategies.gemm_cases(variant, target.dtype, **SIZED)
    explicit = [example(c) for c in stratified.cases(variant, target.dtype, **SIZED)]
    gemm.search(cases.map(example), explicit, variant, max_examples=EXAMPLES)
