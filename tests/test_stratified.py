"""The stratified cases every battery test runs before it draws (properties/model/stratified.py): on
the interpreter they reach everything a target's strategies can reach (properties/report/reached.py),
for every built-in variant and dtype, and each is a case the variant's launcher accepts; README's
example kernel, run under the derandomized `ci` profile, ends with nothing left unreached."""

import textwrap

import pytest

import kernels
from kernels import operands
from properties.model import stratified
from properties.model.cases import materialize
from properties.report import reached
from properties.run import targets

TARGETS = [pytest.param(t, id=t.id) for t in targets.targets(kernels.variants())]


@pytest.mark.parametrize("subject", TARGETS)
def test_the_stratified_cases_reach_what_the_strategies_can(subject):
    variant, dtype = subject.variant, subject.dtype
    for sized in (dict(max_dim=72), dict(max_dim=40, tiles=2)):  # the main property's, the others'
        cases = stratified.cases(variant, dtype, device_type="cpu", **sized)
        found = set().union(*(reached.features(c, variant, "cpu") for c in cases))
        assert reached.expected(variant, "cpu", dtype) <= found, sorted(reached.expected(variant, "cpu", dtype) - found)
        assert cases[0] == stratified.strategies.simplest_case(variant, 1, 1, 1, dtype)  # the plainest first
        for case in cases:
            ops = materialize(case)
            operands.check(variant, ops.a.view, ops.b.view, ops.c.view)  # a case the launcher takes


def test_the_stratified_cases_are_the_same_every_time():
    tiled = kernels.get("tiled")
    assert stratified.cases(tiled, "fp16", device_type="cpu", max_dim=72) == \
        stratified.cases(tiled, "fp16", device_type="cpu", max_dim=72)


README_KERNEL = textwrap.dedent('''
    import triton
    import triton.language as tl

    from kernels import contract

    @triton.jit
    def _kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr):
        rm, rn = tl.program_id(0) * BM + tl.arange(0, BM), tl.program_id(1) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak,
                        mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
            y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                        mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(x, y, input_precision="ieee")
        tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    @contract(blocks=(32, 32, 16))
    def matmul(a, b, c):
        grid = (triton.cdiv(a.shape[0], 32), triton.cdiv(b.shape[1], 32))
        _kernel[grid](a, b, c, a.shape[0], b.shape[1], a.shape[1], *a.stride(), *b.stride(), *c.stride(), BM=32, BN=32,
                      BK=16)
''')


def test_the_ci_profile_leaves_nothing_unreached_on_readmes_kernel(pytester, monkeypatch):
    monkeypatch.setenv("CI", "1")
    pytester.makepyfile(my_matmul=README_KERNEL)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_matmul.py:matmul", "--gemm-backend", "interpreter",
                                           "-p", "no:cacheprovider", timeout=900)
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    assert "gemm hypothesis profile: ci" in out
    assert "GEMM coverage" not in out and "never reached" not in out, out[out.find("GEMM coverage"):]
