"""Metamorphic relations for every variant and dtype: transposition, scaling by a power of two,
zero padding of K and splitting K (see properties/judge/relations.py). Each example reruns the kernel
under the same oracles as the main property and compares bit-exactly where the arithmetic is exact.
On a GPU K is padded and split by multiples of 16 (properties/battery/__init__.py). The stratified
cases run first, with the relations' parameters taken in turn."""

from hypothesis import settings
from hypothesis import strategies as st

from gemm_fuzz.properties import battery
from gemm_fuzz.properties.model import strategies, stratified
from gemm_fuzz.properties.run.examples import Example

EXAMPLES = max(4, settings.default.max_examples // 3)  # each example is five or six launches
SCALES = (1, -1, 3)


def _split(case, interpreted: bool):
    if not interpreted and case.K > battery.GPU_SPLIT_STEP:
        step = battery.GPU_SPLIT_STEP
        return st.integers(1, (case.K - 1) // step).map(lambda n: n * step)
    return st.integers(1, case.K - 1)


def _example(variant, case, scale: int, pad: int, split: int) -> Example:
    params = (("transpose", not variant.requirements.contiguous),  # a transposed operand is not contiguous
              ("scale", scale), ("pad", pad), ("split", split if case.K >= 2 else 0))
    return Example("metamorphic", variant.name, case, params)


@st.composite
def _examples(draw, variant, dtype: str, backend, sized: dict):
    case = draw(strategies.gemm_cases(variant, dtype, **sized))
    pad = draw(st.integers(1, 17) if backend.interpreted else st.sampled_from(battery.GPU_PAD))
    return _example(variant, case, draw(st.sampled_from(SCALES)), pad,
                    draw(_split(case, backend.interpreted)) if case.K >= 2 else 0)


def _explicit(variant, dtype: str, backend, sized: dict) -> list[Example]:
    """The stratified cases, each relation's parameter taken in turn (on a GPU, of the pad and split it
    compiles ahead)."""
    found = []
    for i, case in enumerate(stratified.cases(variant, dtype, **sized)):
        if backend.interpreted:
            pad, split = 1 + i % 17, max(1, case.K // 2)
        else:
            pad = battery.GPU_PAD[i % len(battery.GPU_PAD)]
            split = battery.gpu_relations(case, bool(variant.requirements.contiguous))["split"]
        found.append(_example(variant, case, SCALES[i % len(SCALES)], pad, split))
    return found


def test_metamorphic_relations(target, backend, gemm):
    variant = target.variant
    sized = dict(device_type=backend.device.type, max_dim=min(backend.max_dim, 40), tiles=2)
    gemm.search(_examples(variant, target.dtype, backend, sized), _explicit(variant, target.dtype, backend, sized),
                variant, max_examples=EXAMPLES)
