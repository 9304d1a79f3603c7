"""Past failures are replayed first: every repro script in the repro directory (--gemm-repros) of a
kernel under test in this run must now pass, replayed the way it was found (in its recorded mode and
timeout, where this backend allows them). A script whose case the kernel's contract no longer admits
(a precondition declared since, a dtype dropped), or whose dtype this run does not select, is skipped
with the reason; one that passes now is named at the end of the run."""

import dataclasses

import pytest

from gemm_fuzz.properties.run import preconditions, targets, user_kernel
from gemm_fuzz.properties.run import runner as runner_module

PASSED = "gemm_replay_passed"  # the user property a replay that passes leaves on its report


def test_replays_a_past_failure(corpus_case, backend, gemm, gemm_runner, request):
    example = corpus_case.example
    if corpus_case.record.get("kernel"):  # the kernel under test, perhaps edited since: its identity now
        recorded = corpus_case.record["kernel"]
        current = user_kernel.load(recorded["spec"], recorded.get("signature")).name
        example = runner_module.with_variant(example, example.variant, current)
    if example.variant:
        variant = targets.resolve(example.variant)
        if not variant.runs_on(backend.name):
            pytest.skip(f"{corpus_case.path.name}: {example.variant} needs a CUDA GPU")
        why = preconditions.refusal(variant, example.case, backend.device)
        if why is not None:
            pytest.skip(f"{corpus_case.path.name}: the contract no longer admits its case: {why}")
    recorded = runner_module.RunSettings.for_replay(corpus_case.record, backend.name)
    settings = dataclasses.replace(gemm_runner.settings, mode=recorded.mode, timeout=recorded.timeout)
    if settings == gemm_runner.settings:
        gemm.run(example)
    else:
        with runner_module.Runner(settings, backend) as replay:
            replay.property(corpus_case.path.stem, record=False).run(example)
    request.node.user_properties.append((PASSED, str(corpus_case.path)))
