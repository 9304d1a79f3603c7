"""Metamorphic relations for every variant and dtype: transposition, scaling by a power of two,
zero padding of K and splitting K (see properties/judge/relations.py). Each example reruns the kernel
under the same oracles as the main property and compares bit-exactly where the arithmetic is exact.
On a GPU K is padded and split by multiples of 16 (properties/battery/__init__.py)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from properties import battery
from properties.model import strategies
from properties.run.examples import Example

EXAMPLES = max(4, settings.default.max_examples // 3)  # each example is five or six launches


def _split(case, interpreted: bool):
    if not interpreted and case.K > battery.GPU_SPLIT_STEP:
        step = battery.GPU_SPLIT_STEP
        return st.integers(1, (case.K - 1) // step).map(lambda n: n * step)
    return st.integers(1, case.K - 1)


@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_metamorphic_relations(target, backend, gemm, data):
    variant = target.variant
    case = data.draw(strategies.gemm_cases(variant, target.dtype, device_type=backend.device.type,
                                           max_dim=min(backend.max_dim, 40), tiles=2), label="case")
    params = (
        ("transpose", not variant.requirements.contiguous),  # a transposed operand is not contiguous
        ("scale", data.draw(st.sampled_from([1, -1, 3]), label="k")),
        ("pad", data.draw(st.integers(1, 17) if backend.interpreted else st.sampled_from(battery.GPU_PAD),
                          label="extra")),
        ("split", data.draw(_split(case, backend.interpreted), label="K1") if case.K >= 2 else 0),
    )
    gemm.run(Example("metamorphic", variant.name, case, params), variant)
