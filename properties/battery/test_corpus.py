"""Past failures are replayed first: every repro script in the repro directory (--gemm-repros) whose
kernel and dtype are under test in this run must now pass, replayed the way it was found (in its
recorded mode and timeout, where this backend allows them)."""

import dataclasses

import pytest

from properties.run import runner as runner_module
from properties.run import targets, user_kernel


def test_replays_a_past_failure(corpus_case, backend, gemm, gemm_runner):
    example = corpus_case.example
    if corpus_case.record.get("kernel"):  # the kernel under test, perhaps edited since: its identity now
        recorded = corpus_case.record["kernel"]
        current = user_kernel.load(recorded["spec"], recorded.get("signature")).name
        example = runner_module.with_variant(example, example.variant, current)
    if example.variant and not targets.resolve(example.variant).runs_on(backend.name):
        pytest.skip(f"{corpus_case.path.name}: {example.variant} needs a CUDA GPU")
    recorded = runner_module.RunSettings.for_replay(corpus_case.record, backend.name)
    settings = dataclasses.replace(gemm_runner.settings, mode=recorded.mode, timeout=recorded.timeout)
    if settings == gemm_runner.settings:
        gemm.run(example)
    else:
        with runner_module.Runner(settings, backend) as replay:
            replay.property(corpus_case.path.stem).run(example)
