"""The same kernel, compiled on the GPU and run through the interpreter (in a worker process), on
the same case: bit-equal where the arithmetic is exact, within both bounds elsewhere (GPU only)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from properties.judge import check, relations
from properties.model import strategies
from properties.run import isolation

EXAMPLES = max(3, settings.default.max_examples // 5)  # each example also runs in the interpreter


@pytest.mark.gpu
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_compiled_and_interpreted_agree(target, backend, data):
    variant = target.variant
    # interpreter-sized problems: the interpreter runs one program at a time
    case = data.draw(strategies.gemm_cases(variant, target.dtype, device_type="cuda", max_dim=96), label="case")
    _, ops = check.run(variant, case, backend)
    compiled = relations.observed(variant, ops)
    interpreted = isolation.output_of("interpreter", variant, case)  # judged there by the same oracles
    with np.errstate(invalid="ignore"):
        same = (compiled.c == interpreted) | (np.isnan(compiled.c) & np.isnan(interpreted))
        ok = same if compiled.exact else same | (np.abs(compiled.c - interpreted) <= 2 * compiled.bound)
        ok |= compiled.nonfinite_allowed() & ~(np.isfinite(compiled.c) & np.isfinite(interpreted))
    if not ok.all():
        i, j = (int(x) for x in np.argwhere(~ok)[0])
        raise AssertionError(f"{variant.name} on {case.describe()}: compiled C[{i}, {j}] = {compiled.c[i, j]:.9g}, "
                             f"interpreted {interpreted[i, j]:.9g}" + (" (an exact case)" if compiled.exact else ""))
