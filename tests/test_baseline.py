"""The fixed-grid baseline of properties/evaluation/baseline.py (Triton test_dot's style), measured on the same
mutants as the suite: its verdicts match the table below, and it is fair: it passes every correct
built-in variant, so what it misses it misses by design, not by being broken.

Each mutant's baseline runs in its own process (an out-of-bounds store can abort it); GPU-only
mutants are left out, since on the interpreter neither the baseline nor the suite can see them.
Run with -rP (or -s) to see every mutant's verdict."""

import contextlib
import io

import pytest

from gemm_fuzz import kernels
from gemm_fuzz.kernels import mutants
from gemm_fuzz.properties.evaluation import baseline

CAUGHT = {"failed assertion"}
MISSED = {"passed"}
# Memory outside the tensors: without guard bands what a read past the end returns, and whether a
# write past the end aborts the process, depend on the allocator's layout, not on the test. Observed
# here in parentheses; any outcome is luck, except a clean refusal.
HEAP_LUCK = {"passed", "failed assertion", "crashed"}

EXPECTED = {
    "grouped_group_min": CAUGHT,  # M=64: 4 tile rows, a short last group
    "grouped_k_loop_floor": CAUGHT,  # only 64x64x4 has K < BK
    "grouped_k_mask_only": MISSED,  # out-of-bounds reads whose products are never stored
    "grouped_unclamped_group": CAUGHT,
    "modulo_wrap_unmasked_store": HEAP_LUCK,  # (crashed: glibc's heap checks abort after the store)
    "persistent_default_precision": MISSED,  # tf32 errs ~1e-3, inside rtol 0.01
    "persistent_tile_chunks": CAUGHT,  # 2x2x16: one tile, 3 programs, chunks of none
    "split_k_into_c": MISSED,  # C comes zeroed
    "stream_k_late_first_owner": CAUGHT,
    "tiled_aligned_fast_path": CAUGHT,  # only 2x2x16, 64x2x64 and 64x64x4 have unaligned strides
    "tiled_bf16_through_fp16": MISSED,  # normal x 0.1 stays inside fp16's range, where bf16 -> fp16 is exact
    "tiled_floor_grid": CAUGHT,
    "tiled_fp16_accumulator": MISSED,  # fp16 rounding of these small sums stays inside atol 1e-2
    "tiled_gemv_fast_path": HEAP_LUCK,  # (failed: 1x64x64 reads A's row from past its end)
    "tiled_int8_accumulator": CAUGHT,  # int8 over its whole range wraps at once
    "tiled_k_mask_off_by_one": HEAP_LUCK,  # (failed; passed with another shape order: B's row K is past its end)
    "tiled_no_k_mask": HEAP_LUCK,  # (failed: 64x64x4 also reads B's rows 4..15, past its end)
    "tiled_nan_to_zero": MISSED,  # no NaN among its inputs
    "tiled_no_other": CAUGHT,  # the interpreter's masked-off lanes read NaN, as the suite's do
    "tiled_swapped_a_strides": CAUGHT,
    "tiled_unmasked_store": HEAP_LUCK,  # (crashed: glibc's heap checks abort after the store)
    "tiled_13_bit_accumulator": MISSED,  # 13 bits on normal x 0.1 err ~1e-4, inside rtol 0.01
    "tiled_bf16_accumulator": MISSED,  # bf16 rounding of these small sums stays inside atol 1e-2
    "tiled_fp16_accumulator_fp8": MISSED,  # fp8 products of normal x 0.1 are tiny: fp16 holds their sums
    "tiled_inf_clamped": MISSED,  # no Inf among its inputs
    "tiled_output_toward_zero": MISSED,  # one ulp of fp16, inside rtol 0.01
    "tiled_overflow_to_nan": MISSED,  # nothing overflows
    # the family: the extras as their own tests pass them (normal x 0.1, alpha = beta = 1)
    "epilogue_bias_along_m": CAUGHT,  # 2x2x16: the rows' biases differ from the columns'
    "epilogue_unmasked_bias": MISSED,  # reads past the bias whose results are never stored
    "epilogue_activation_before_alpha": MISSED,  # alpha = 1
    "epilogue_beta_zero_reads_c_in": MISSED,  # beta = 1
    "epilogue_tanh_gelu": MISSED,  # 4.7e-4 at most, inside rtol 0.01
    "bmm_batch_stride_ignored": CAUGHT,
    "bmm_batch_on_grid_axis_1": MISSED,  # two problems
    "swiglu_gate_up_swapped": CAUGHT,
    "swiglu_b_rows_backwards": HEAP_LUCK,  # (failed: the rows before B hold whatever the heap put there)
    "swiglu_pre_after_activation": CAUGHT,
    # scaled codes: scales uniform in [0.5, 1.5], contiguous
    "block_fp8_scale_per_tile": HEAP_LUCK,  # (failed: K tiles past the first read scales past each row's end)
    "block_fp8_unmasked_scale_rows": MISSED,  # reads past a_scale whose results are never stored
    "rowwise_fp8_row_scale_per_column": CAUGHT,  # 16x16x16: the columns' scales of A are other rows'
    "int8_scaled_even_k_by_parity": CAUGHT,  # 64x64x4: unmasked K reads take the next row's codes
    "w4a16_zero_shift_by_index": CAUGHT,  # zero points all 8 (0x88888888): the misshifted nibble is 4
    "w4a16_packed_rows_bounded_by_k": MISSED,  # rows past B meet A's masked-off columns (zeros)
    "mxfp4_e8m0_byte0_as_zero": MISSED,  # scales around 1: no byte 0 among them
    "mxfp4_scale_group_by_cdiv": CAUGHT,  # K = 16: elements 1..15 read the next row's scale (or past the end)
    # grouped: 4 groups of M / 4 rows; MoE: M tokens, top 2 of 4 experts, all local, worst-case metadata
    "moe_n_tail_unmasked": HEAP_LUCK,  # (crashed: N = 2 of a block of 16 columns writes far past C)
    "moe_padding_slot_stored": HEAP_LUCK,  # (crashed: padding entries name the row past C)
    "moe_non_local_block_skipped": MISSED,  # every expert local
    "moe_grid_m_n_swapped": CAUGHT,  # blocks past the first group's never written: zeros
    "ragged_tail_into_next_group": HEAP_LUCK,  # (crashed: the last group's tile writes rows past C)
    # problems: 4 contiguous problems of M x N x K, as tutorial 08's test takes them
    "pointer_array_empty_problem_tile": MISSED,  # no problem is empty
    "pointer_array_lda_as_k": MISSED,  # contiguous A: its leading dimension is K
}

ON_THE_INTERPRETER = [m.name for m in mutants.mutants() if not m.gpu_only]


def test_the_table_covers_every_mutant():
    assert sorted(EXPECTED) == sorted(ON_THE_INTERPRETER)


@pytest.mark.interpreter
def test_baseline_verdicts_on_the_mutants(record_property):
    """One test for all mutants, two subprocesses at a time (one test, so that pytest-xdist does not
    run the subprocesses once per worker)."""
    verdicts = baseline.run_all_isolated(ON_THE_INTERPRETER)
    wrong = []
    for name, verdict in sorted(verdicts.items()):
        record_property(name, verdict.outcome)
        print(f"{name}: {verdict.outcome}")
        if verdict.outcome not in EXPECTED[name]:
            wrong.append(f"{name}: {verdict.outcome} (exit {verdict.returncode}), expected one of "
                         f"{sorted(EXPECTED[name])}\n{verdict.output[-2000:]}")
    assert not wrong, "\n\n".join(wrong)


@pytest.mark.interpreter
@pytest.mark.parametrize("variant", [pytest.param(v, id=v.name) for v in kernels.variants()])
def test_baseline_passes_every_correct_variant(variant, backend):
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        code = baseline.run(variant, baseline.dtypes_of(variant), keep_going=True)
    assert code == baseline.PASSED, output.getvalue()
