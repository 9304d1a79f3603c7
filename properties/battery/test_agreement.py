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
the float64 reference. The stratified cases of the focus (or of each variant in turn) run first."""

import dataclasses

from hypothesis import settings
from hypothesis import strategies as st

from gemm_fuzz import kernels
from gemm_fuzz.properties import battery
from gemm_fuzz.properties.model import strategies, stratified
from gemm_fuzz.properties.run.examples import Example
from gemm_fuzz.reference.formats import by_name

EXAMPLES = max(4, settings.default.max_examples // 3)  # each example runs every variant
PEERS_ON_GPU = 3


def _variants(dtype: str, backend):
    torch_dtype = by_name(dtype).dtype
    return [v for v in kernels.variants() if torch_dtype in v.dtypes and v.runs_on(backend.name)]


def _sized(backend, **more) -> dict:
    return dict(device_type=backend.device.type, max_dim=min(backend.max_dim, 40), tiles=2, **more)


def _example(focus, case, peers) -> Example:
    return Example("agreement", focus.name if focus else "", case, (("peers", tuple(v.name for v in peers)),))


def _gpu_judged(focus, backend) -> bool:
    """A user's kernel on a GPU: judged by one of the plainest built-ins, on a few classes."""
    return focus is not None and not backend.interpreted


@st.composite
def _examples(draw, dtype: str, focus, backend):
    peers = _variants(dtype, backend)
    if _gpu_judged(focus, backend):
        judges = [v for v in peers if v.name in battery.GPU_JUDGES]
        sized = _sized(backend, compile_budget=battery.GPU_AGREEMENT_CLASSES)
        case = draw(strategies.gemm_cases(focus, dtype, **sized))
        return _example(focus, case, [focus, draw(st.sampled_from(judges))] if judges else [focus])
    # any variant's cases: those of the most demanding ones (aligned, contiguous) are taken by all
    source = focus or draw(st.sampled_from(peers))
    case = draw(strategies.gemm_cases(source, dtype, **_sized(backend)))
    if focus is None:  # every variant runs in its default configuration; a focus in the case's
        case = dataclasses.replace(case, config=())
    if not backend.interpreted:
        peers = draw(strategies.some_peers(peers, [v for v in (focus, source) if v], PEERS_ON_GPU))
    return _example(focus, case, peers)


def _explicit(dtype: str, focus, backend) -> list[Example]:
    """The focus's stratified cases (without a focus, the i-th of the i-th variant's, in turn), judged by
    every peer in the interpreter and on a GPU by a judge (a user's kernel) or the first peers."""
    peers = _variants(dtype, backend)
    if _gpu_judged(focus, backend):
        judges = [v for v in peers if v.name in battery.GPU_JUDGES]
        cases = stratified.cases(focus, dtype, **_sized(backend, compile_budget=battery.GPU_AGREEMENT_CLASSES))
        return [_example(focus, c, [focus, judges[i % len(judges)]] if judges else [focus])
                for i, c in enumerate(cases)]
    sources = [focus] if focus else peers
    lists = {v.name: stratified.cases(v, dtype, **_sized(backend)) for v in sources}
    found = []
    for i in range(max(len(cases) for cases in lists.values())):
        source = sources[i % len(sources)]
        case = lists[source.name][i % len(lists[source.name])]
        if focus is None:  # every variant in its default configuration, as drawn
            case = dataclasses.replace(case, config=())
        first = peers[:PEERS_ON_GPU]
        chosen = peers if backend.interpreted else [v for v in peers if v in (focus, source) or v in first]
        found.append(_example(focus, case, chosen))
    return found


def test_variants_agree(agreement_group, backend, gemm):
    dtype, focus = agreement_group.dtype, agreement_group.focus
    gemm.search(_examples(dtype, focus, backend), _explicit(dtype, focus, backend), focus, max_examples=EXAMPLES)
