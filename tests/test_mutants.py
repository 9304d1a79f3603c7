"""The suite's power, on deliberately wrong kernels (kernels/mutants/): with the CI profile's settings
(derandomized, 25 examples, no database) and the strategy the property tests use, every mutant is
caught, by the check its registry names, and shrinks to its registered smallest case (or to the
local minimum the registry documents). The registered
cases are checked too: the smallest fails, and the kernel is right where the bug claims not to reach.

Each search's measurements (examples and seconds to the first failure, seconds with shrinking, the
shrunk case) are attached to the test report as properties; `python -m gemm_fuzz.properties.evaluation.mutation` prints
them all as a table."""

import pytest
import torch
from hypothesis import settings

from gemm_fuzz import kernels
from gemm_fuzz.kernels import mutants
from gemm_fuzz.properties.evaluation import mutation
from gemm_fuzz.properties.judge import failures
from gemm_fuzz.properties.model.cases import raw

MUTANTS = mutants.mutants()
ON_THE_INTERPRETER = [pytest.param(m, id=m.name) for m in MUTANTS if not m.gpu_only]
GPU_ONLY = [pytest.param(m, id=m.name) for m in MUTANTS if m.gpu_only]
EVERY = [pytest.param(m, id=m.name) for m in MUTANTS]
# Arithmetic bugs, which a compiled kernel has as much as an interpreted one: caught on both backends
ARITHMETIC = ("persistent_default_precision", "tiled_fp16_accumulator", "tiled_bf16_through_fp16",
              "tiled_nan_to_zero", "tiled_int8_accumulator", "epilogue_tanh_gelu", "epilogue_activation_before_alpha")


def _caught_and_shrunk(mutant, backend, record_property):
    found = mutation.hunt(mutant, backend)
    for key in ("examples", "seconds_to_catch", "seconds", "error"):
        record_property(key, getattr(found, key))
    record_property("shrunk", found.shrunk.describe() if found.shrunk else None)
    print(found.summary())
    assert found.caught, f"{mutant.name} ({mutant.bug}) was not caught in {found.examples} examples"
    assert found.examples <= mutation.ci_settings().max_examples
    assert found.shrunk == mutation.shrink_target(mutant), (
        f"{mutant.name} shrank to {found.shrunk.describe()}, not {mutation.shrink_target(mutant).describe()}"
    )
    assert found.error == mutant.caught_as, f"{mutant.name}: {found.message}"
    assert found.seconds <= 60, f"{mutant.name}: found and shrunk in {found.seconds:.0f} s, more than a minute"


@pytest.mark.interpreter
@pytest.mark.parametrize("mutant", ON_THE_INTERPRETER)
def test_caught_and_shrunk_on_the_interpreter(mutant, backend, record_property):
    _caught_and_shrunk(mutant, backend, record_property)


@pytest.mark.gpu
@pytest.mark.parametrize("mutant", GPU_ONLY)
def test_gpu_only_mutant_caught_and_shrunk_on_the_gpu(mutant, backend, record_property):
    _caught_and_shrunk(mutant, backend, record_property)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ARITHMETIC)
def test_arithmetic_mutant_caught_on_the_gpu_too(name, backend, record_property):
    """Compiled, with the GPU's blocks and shapes up to the GPU's limit: caught by the same check (the
    shrunk case may differ from the interpreter's, as the blocks do). Up to 200 examples: with the
    GPU's larger shapes the derandomized search reaches the `specials` profile later (the NaN
    mutant: at example 122 on an H100)."""
    mutant = mutants.get(name)
    found = mutation.hunt(mutant, backend, settings(mutation.ci_settings(), max_examples=200))
    record_property("shrunk", found.shrunk.describe() if found.shrunk else None)
    assert found.caught, f"{name} ({mutant.bug}) was not caught on the GPU in {found.examples} examples"
    assert found.error == mutant.caught_as, f"{name}: {found.message}"


def _registered_cases_hold(mutant, backend):
    """The smallest case exposes the bug, with the check the registry names; so does the documented
    local minimum; the kernel is right on the case the bug claims not to reach."""
    smallest = mutation.expected_case(mutant)
    error = mutation.failure(mutant.variant, smallest, backend)
    assert type(error).__name__ == mutant.caught_as, f"{smallest.describe()}: {error!r}"
    if mutant.shrinks_to is not None:
        local = mutation.shrink_target(mutant)
        error = mutation.failure(mutant.variant, local, backend)
        assert type(error).__name__ == mutant.caught_as, f"local minimum {local.describe()}: {error!r}"
    unaffected = mutation.unaffected_case(mutant)
    if unaffected is not None:
        error = mutation.failure(mutant.variant, unaffected, backend)
        assert error is None, f"{mutant.name} fails on {unaffected.describe()}, which it claims not to reach: {error}"


@pytest.mark.interpreter
@pytest.mark.parametrize("mutant", ON_THE_INTERPRETER)
def test_registered_cases_hold_on_the_interpreter(mutant, backend):
    _registered_cases_hold(mutant, backend)


@pytest.mark.gpu
@pytest.mark.parametrize("mutant", GPU_ONLY)
def test_gpu_only_registered_cases_hold_on_the_gpu(mutant, backend):
    _registered_cases_hold(mutant, backend)


@pytest.mark.interpreter
@pytest.mark.parametrize("mutant", GPU_ONLY)
def test_gpu_only_mutant_passes_the_interpreter(mutant, backend):
    """What makes it GPU-only: on its smallest case the interpreter sees nothing wrong."""
    error = mutation.failure(mutant.variant, mutation.expected_case(mutant), backend)
    assert error is None, f"{mutant.name} is registered GPU-only but the interpreter catches it: {error}"


@pytest.mark.parametrize("mutant", EVERY)
def test_the_launcher_still_refuses_bad_operands(mutant, backend):
    a = torch.ones(4, 5, dtype=torch.float16, device=backend.device)
    b = torch.ones(5, 6, dtype=torch.float16, device=backend.device)
    c = torch.full((4, 6), float("nan"), dtype=torch.float16, device=backend.device)  # zeroing or computing C shows
    if mutant.variant.operation.batched:
        a, b, c = a[None], b[None], c[None]
    if mutant.variant.operation.grouped == "problems":  # lists of each problem's matrices
        with pytest.raises(ValueError, match=r"A\[0\] must be 2-D \(M x K\)"):
            mutant.variant.launch([a[None]], [b], [c])
        with pytest.raises(ValueError, match=r"B\[0\] has 4 rows but A\[0\] has 5 columns"):
            mutant.variant.launch([a], [b[:4]], [c])
        assert c.isnan().all(), "a refused launch wrote into C"
        return
    mismatch = r"B has 4 rows but A has 5 columns \(K\)"
    if mutant.variant.operation.grouped:  # B one matrix a group
        b = b[None].expand(2, 5, 6)
        mismatch = r"B has 4 rows a group but A has 5 columns \(K\)"
    if mutant.variant.operation.weight:  # int4 or e2m1 codes two a byte along K: 3 rows for K = 5
        b = torch.zeros(3, 6, dtype=torch.uint8, device=backend.device)
        if not mutant.variant.operation.weight_only:  # fp8 codes in A
            a = a.to(torch.float8_e4m3fn)
        mismatch = r"B has shape \(2, 6\); expected \(3, 6\) for A's K = 5 \(two codes a byte along K\)"
    before = raw(c).clone()
    with pytest.raises(ValueError, match=r"A must be [23]-D \((Bt x )?[MT] x K\)"):
        mutant.variant.launch(a[None], b, c)
    with pytest.raises(ValueError, match=mismatch):
        b_short = b[..., :2, :] if mutant.variant.operation.weight else b[..., :4, :]
        mutant.variant.launch(a, b_short, c)
    assert torch.equal(raw(c), before), "a refused launch wrote into C"  # bit for bit: NaN != NaN


def test_a_mutant_is_its_parent_plus_marked_edits():
    """The generated source is the parent's with each edit applied once, its lines marked."""
    import inspect

    mutant = mutants.get("tiled_k_mask_off_by_one")
    planted = inspect.getsource(inspect.getmodule(mutant.variant.launch))
    parent = inspect.getsource(inspect.getmodule(kernels.get("tiled").launch))
    assert planted.count("# planted: tiled_k_mask_off_by_one") == 2
    changed = [line for line in planted.splitlines() if line not in parent.splitlines()]
    assert len(changed) == 2 and all("<= K" in line for line in changed)


def test_an_edit_that_no_longer_matches_its_parent_fails_loudly():
    with pytest.raises(mutants.PlantingError, match="expects 'no such text' exactly once .* found 0 time"):
        mutants.edited("source", [mutants.Edit("no such text", "x")], "broken")
    with pytest.raises(mutants.PlantingError, match="found 2 time"):
        mutants.edited("a a", [mutants.Edit("a", "b")], "ambiguous")


def test_mutants_are_not_variants():
    names = {v.name for v in kernels.variants()}
    assert not names & {m.name for m in MUTANTS}


def test_the_registry_is_complete():
    from gemm_fuzz.properties.interpreter import races  # noqa: F401  DataRace registers on import (GPU runs too)

    assert len(MUTANTS) >= 15
    for m in MUTANTS:
        assert m.bug and "\n" not in m.bug and m.why and "\n" not in m.why
        assert m.caught_as in failures.GemmFailure._registry, f"{m.name}: unknown failure {m.caught_as}"
        assert mutation.expected_case(m).dtype in ("fp16", "bf16", "fp32", "fp8e4m3", "fp8e5m2", "int8")
        assert m.dtype in {d.split("->")[0] for d in m.all_dtypes}
        assert (m.shrinks_to is None) == (not m.shrinks_to_why)
