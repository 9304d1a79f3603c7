"""compute-sanitizer on compiled kernels (GPU only): the seed-004 pattern (loads masked along K
only) reads rows of A that do not exist while its output is right; memcheck finds it once PyTorch's
caching allocator is off, and every built-in variant is clean on a ragged case. A failure found so
replays under memcheck from its repro script."""

import subprocess
import sys

import pytest
import torch

from gemm_fuzz import kernels
from gemm_fuzz.kernels import mutants
from gemm_fuzz.properties.checks.example import Example
from gemm_fuzz.properties.judge.failures import MemcheckError
from gemm_fuzz.properties.model import strategies
from gemm_fuzz.properties.model.cases import GemmCase
from gemm_fuzz.properties.report import repros
from gemm_fuzz.properties.run import isolation, runner
from gemm_fuzz.reference.formats import name_of

pytestmark = pytest.mark.gpu

RAGGED = (130, 257, 65)  # one row, column and K element past a GPU tile boundary


def _run(worker, variant, case):
    answer = worker.run(Example("reference", variant.name, case).to_dict(), timeout=900)
    return answer, isolation.sanitizer_errors(answer.log)


def test_memcheck_flags_the_seed_004_pattern_with_the_caching_allocator_off(backend, capsys):
    mutant = mutants.get("grouped_k_mask_only")
    case = GemmCase(*RAGGED, "fp16", "fp16")
    runner.check(mutant.variant, case, backend)  # C is right: only a memory checker can see the bug
    plain = isolation.Worker("cuda", sanitizer="memcheck")
    cached = isolation.Worker("cuda", sanitizer="memcheck", caching_allocator=True)
    try:
        answer, errors = _run(plain, mutant.variant, case)  # memcheck stops the kernel at the bad read
        _, errors_cached = _run(cached, mutant.variant, case)
    finally:
        plain.close()
        cached.close()
    assert any("Invalid __global__ read" in line for line in errors), (errors, answer.payload, answer.log[-20:])
    # why the allocator is off: with it on, the stray reads land inside its cached segment, unseen
    assert not any("Invalid __global__ read" in line for line in errors_cached), errors_cached
    with capsys.disabled():
        print(f"\nseed-004 pattern on {case.describe()}: memcheck reports {len(errors)} line(s) with the caching "
              f"allocator off, {len(errors_cached)} with it on")


@pytest.mark.parametrize("sanitizer", ["memcheck", "racecheck"])
def test_every_builtin_variant_is_clean_under_compute_sanitizer(sanitizer, backend):
    worker = isolation.Worker("cuda", sanitizer=sanitizer)
    try:
        for v in kernels.variants():
            if v.precision != "ieee":
                continue
            dtype = "fp16" if torch.float16 in v.dtypes else name_of(next(iter(v.dtypes)))  # scaled: their codes
            case = strategies.simplest_case(v, *RAGGED, dtype, profile="normal", seed=1)
            answer, errors = _run(worker, v, case)
            assert answer.payload["status"] == "pass", answer.payload
            assert errors == [], f"{v.name}: " + "\n".join(errors)
    finally:
        worker.close()


def test_a_memcheck_failure_replays_under_memcheck_from_its_repro(backend, tmp_path):
    """Right output, stray reads: only memcheck sees it, so its repro must run under memcheck too."""
    example = Example("reference", "grouped_k_mask_only", GemmCase(*RAGGED, "fp16", "fp16"))
    settings = runner.RunSettings(backend="cuda", mode="sanitize", repros=str(tmp_path))
    with runner.Runner(settings, backend) as run, pytest.raises(MemcheckError) as found:
        run.run_once(example)
    path = repros.write(tmp_path, example, settings, found.value)
    replay = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=900, cwd="/")
    # the replay's own failure: memcheck's report of the stray reads (its header names compute-sanitizer anyway)
    assert replay.returncode == 1 and "Invalid __global__ read" in replay.stdout, replay.stdout + replay.stderr
