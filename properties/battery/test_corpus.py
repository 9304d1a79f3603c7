"""Past failures are replayed first: every repro script in the repro directory (--gemm-repros) whose
kernel is under test must now pass."""

import pytest

from properties.model.cases import GemmCase
from properties.run import targets


def test_replays_a_past_failure(corpus_case, backend, request):
    user = request.config._gemm_user
    try:
        if user is not None and corpus_case.variant == user.name:
            variant = user
        else:
            variant = targets.resolve(corpus_case.variant, corpus_case.kernel, corpus_case.signature)
    except (KeyError, ValueError) as e:
        pytest.skip(f"{corpus_case.path.name}: its kernel is not available here ({e})")
    if not variant.runs_on(backend.name):
        pytest.skip(f"{corpus_case.path.name}: {variant.name} needs a CUDA GPU")
    from properties.run import isolation

    isolation.run_example(variant, GemmCase.from_dict(corpus_case.case), backend)
