"""The suite's power per draw on the wrong-kernel classes its oracle was once blind to: each is exposed
by at least a quarter of single draws on its first dtype, so the CI profile's 25 examples miss it with
probability below 0.1%. docs/power.md has every dtype (`python -m gemm_fuzz.properties.evaluation.power`)."""

import pytest

from gemm_fuzz.kernels import mutants
from gemm_fuzz.properties.evaluation import power

DRAWS = 30  # derandomized: the same draws every run
CLASSES = ["tiled_output_toward_zero", "tiled_bf16_accumulator", "tiled_13_bit_accumulator",
           "persistent_default_precision", "tiled_fp16_accumulator_fp8", "tiled_inf_clamped", "tiled_overflow_to_nan"]


@pytest.mark.interpreter
@pytest.mark.parametrize("name", CLASSES)
def test_a_quarter_of_single_draws_expose_it(name, backend):
    """On the mutant's first dtype (the table in docs/power.md has every dtype, and the parent's). The
    correct parent runs on the same draws and must never fail: a rate that false positives raise would
    show nothing."""
    mutant = mutants.get(name)
    measured = power.measure(mutant, mutant.all_dtypes[0], DRAWS, backend, parent_too=True)
    assert measured.parent_failures == 0, (f"{name}'s parent {mutant.parent} on {mutant.all_dtypes[0]} fails "
                                           f"{measured.parent_failures} of {measured.draws} draws")
    assert measured.rate >= 0.25, f"{name} on {mutant.all_dtypes[0]}: caught in {measured.caught} of {measured.draws}"
