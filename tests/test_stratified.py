"""The stratified cases every battery test runs before it draws (properties/model/stratified.py): on
the interpreter they reach everything a target's strategies can reach (properties/report/reached.py),
for every built-in variant and dtype, and each is a case the variant's launcher accepts; README's
example kernel, run under the derandomized `ci` profile, ends with nothing left unreached."""

import pytest
from templates import MASKED

from gemm_fuzz import kernels
from gemm_fuzz.kernels import operands
from gemm_fuzz.properties.launch import targets
from gemm_fuzz.properties.launch.launching import arguments
from gemm_fuzz.properties.model import stratified
from gemm_fuzz.properties.model.cases import materialize
from gemm_fuzz.properties.report import reached
from gemm_fuzz.reference.formats import by_name

TARGETS = [pytest.param(t, id=t.id) for t in targets.targets(kernels.variants())]


@pytest.mark.parametrize("subject", TARGETS)
def test_the_stratified_cases_reach_what_the_strategies_can(subject):
    variant, dtype = subject.variant, subject.dtype
    # the main property's (with the batches past the grid's limits), the others'
    for sized in (dict(max_dim=72, big_batches=True), dict(max_dim=40, tiles=2)):
        cases = stratified.cases(variant, dtype, device_type="cpu", **sized)
        found = set().union(*(reached.features(c, variant, "cpu") for c in cases))
        unreachable = set() if sized.get("big_batches") else {reached.BIG_BATCH}
        expected = reached.expected(variant, "cpu", dtype) - unreachable
        assert expected <= found, sorted(expected - found)
        assert cases[0] == stratified.strategies.simplest_case(variant, 1, 1, 1, dtype)  # the plainest first
        for case in cases:
            ops = materialize(case, "cpu", variant.operation_in("cpu", by_name(dtype).dtype, case.config))
            operands.check(variant, *arguments(ops), ops.keywords())  # a case the launcher takes


def test_the_stratified_cases_are_the_same_every_time():
    tiled = kernels.get("tiled")
    assert stratified.cases(tiled, "fp16", device_type="cpu", max_dim=72) == \
        stratified.cases(tiled, "fp16", device_type="cpu", max_dim=72)


def test_the_ci_profile_leaves_nothing_unreached_on_readmes_kernel(pytester, monkeypatch):
    monkeypatch.setenv("CI", "1")
    pytester.makepyfile(my_matmul=MASKED)  # README's kernel, right (its loads masked along M and N)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_matmul.py:matmul", "--gemm-backend", "interpreter",
                                           "-p", "no:cacheprovider", timeout=900)
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    assert "gemm hypothesis profile: ci" in out
    assert "GEMM coverage" not in out and "never reached" not in out, out[out.find("GEMM coverage"):]
