"""compute-sanitizer on compiled kernels (GPU only): the seed-004 pattern (loads masked along K
only) reads rows of A that do not exist while its output is right; memcheck finds it once PyTorch's
caching allocator is off, and every built-in variant is clean on a ragged case."""

import pytest

import kernels
from kernels import mutants
from properties.judge import check
from properties.model import strategies
from properties.model.cases import GemmCase
from properties.run import isolation

pytestmark = pytest.mark.gpu

RAGGED = (130, 257, 65)  # one row, column and K element past a GPU tile boundary


def _run(worker, variant, case):
    answer = worker.run(variant.name, case, timeout=900)
    return answer, isolation.memcheck_errors(answer.log)


def test_memcheck_flags_the_seed_004_pattern_with_the_caching_allocator_off(backend, capsys):
    mutant = mutants.get("grouped_k_mask_only")
    case = GemmCase(*RAGGED, "fp16", "fp16")
    check.check(mutant.variant, case, backend)  # C is right: only a memory checker can see the bug
    plain = isolation.Worker("cuda", sanitize=True)
    cached = isolation.Worker("cuda", sanitize=True, caching_allocator=True)
    try:
        answer, errors = _run(plain, mutant.variant, case)  # memcheck stops the kernel at the bad read
        _, errors_cached = _run(cached, mutant.variant, case)
    finally:
        plain.close()
        cached.close()
    assert any("Invalid __global__ read" in line for line in errors), (errors, answer.payload, answer.log[-20:])
    with capsys.disabled():
        print(f"\nseed-004 pattern on {case.describe()}: memcheck reports {len(errors)} line(s) with the caching "
              f"allocator off, {len(errors_cached)} with it on")


def test_every_builtin_variant_is_clean_under_memcheck(backend):
    worker = isolation.Worker("cuda", sanitize=True)
    try:
        for v in kernels.variants():
            if v.precision != "ieee":
                continue
            case = strategies.simplest_case(v, *RAGGED, "fp16", profile="normal", seed=1)
            answer, errors = _run(worker, v, case)
            assert answer.status == "pass", answer.payload
            assert errors == [], f"{v.name}: " + "\n".join(errors)
    finally:
        worker.close()
