"""Cross-variant agreement: one case, every variant that takes it, bit-equal where exact and within
the sum of their bounds elsewhere (properties/judge/agreement.py). With --gemm-kernel, the user's kernel
is judged by the built-in variants.

In the interpreter every variant runs on every example. On a GPU each peer costs a compilation per
specialization of the case (about 0.6 s on an H100): there the built-in variants judge each other
with PEERS_ON_GPU peers drawn per example from the rest (shrinking toward the first ones, so every
peer is reached over the examples), and a user's kernel is judged by one of the plainest built-ins
(battery.GPU_JUDGES) on cases of a few specialization classes, all compiled ahead when the run
starts (properties/battery/__init__.py). More peers would add nothing the main property does not
check: agreement holds the focus to the sum of two bounds, never tighter than its own bound against
the float64 reference."""

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

import kernels
from properties import battery
from properties.model import strategies
from properties.run.examples import Example
from reference.formats import by_name

EXAMPLES = max(4, settings.default.max_examples // 3)  # each example runs every variant
PEERS_ON_GPU = 3


def _variants(dtype: str, backend):
    torch_dtype = by_name(dtype).dtype
    return [v for v in kernels.variants() if torch_dtype in v.dtypes and v.runs_on(backend.name)]


@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_variants_agree(agreement_group, backend, gemm, data):
    dtype, focus = agreement_group.dtype, agreement_group.focus
    peers = _variants(dtype, backend)
    sized = dict(device_type=backend.device.type, max_dim=min(backend.max_dim, 40), tiles=2)
    if focus is not None and not backend.interpreted:
        judges = [v for v in peers if v.name in battery.GPU_JUDGES]
        case = data.draw(strategies.gemm_cases(focus, dtype, **sized, compile_budget=battery.GPU_AGREEMENT_CLASSES),
                         label="case")
        peers = [focus, data.draw(st.sampled_from(judges), label="judged by")] if judges else [focus]
    else:
        # any variant's cases: those of the most demanding ones (aligned, contiguous) are taken by all
        source = focus or data.draw(st.sampled_from(peers), label="cases drawn for")
        case = data.draw(strategies.gemm_cases(source, dtype, **sized), label="case")
        if focus is None:  # every variant runs in its default configuration; a focus in the case's
            case = dataclasses.replace(case, config=())
        if not backend.interpreted:
            peers = data.draw(strategies.some_peers(peers, [v for v in (focus, source) if v], PEERS_ON_GPU),
                              label="peers")
    example = Example("agreement", focus.name if focus else "", case, (("peers", tuple(v.name for v in peers)),))
    gemm.run(example, focus)
