"""Cross-variant agreement: one case, every variant that takes it, bit-equal where exact and within
the sum of their bounds elsewhere (properties/judge/agreement.py). With --gemm-kernel, the user's kernel is
judged by the built-in variants."""

from hypothesis import given, settings
from hypothesis import strategies as st

import kernels
from kernels import operands
from properties.judge import agreement, relations
from properties.model import strategies
from properties.model.cases import materialize
from reference.formats import by_name
from reference.numpy_ref import to_float64

EXAMPLES = max(4, settings.default.max_examples // 3)  # each example runs every variant


def _variants(dtype: str, backend):
    torch_dtype = by_name(dtype).dtype
    return [v for v in kernels.variants() if torch_dtype in v.dtypes and v.runs_on(backend.name)]


def _accepts(variant, ops) -> bool:
    """Does the variant's launcher take these operands (dtypes, layouts, alignment)?"""
    try:
        operands.check(variant, ops.a.view, ops.b.view, ops.c.view)
    except (TypeError, ValueError):
        return False
    return True


@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_variants_agree(agreement_group, backend, data):
    dtype, focus = agreement_group.dtype, agreement_group.focus
    variants = ([focus] if focus else []) + _variants(dtype, backend)
    # any variant's cases: those of the most demanding ones (aligned, contiguous) are taken by all
    source = focus or data.draw(st.sampled_from(variants), label="cases drawn for")
    case = data.draw(strategies.gemm_cases(source, dtype, device_type=backend.device.type,
                                           max_dim=min(backend.max_dim, 40)), label="case")
    ops = materialize(case, backend.device)
    a, b = to_float64(ops.a.view), to_float64(ops.b.view)
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)
    runs = {}
    for v in variants:  # each launched under the memory oracles; their values are judged against each other
        if _accepts(v, ops):
            runs[v.name] = relations.solve(v, a, b, (case.a, case.b, case.c), fin, fout, backend, v.precision)
    agreement.judge(runs, case.describe(), focus.name if focus else None)


