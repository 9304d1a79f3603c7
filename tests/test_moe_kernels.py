"""Grouped and MoE user kernels in published styles (tests/moe_kernels.py) through the whole battery: each right
one passes, each wrong twin is caught and shrinks to the case its bug needs."""

from pathlib import Path

import pytest
from user_runs import assert_caught, assert_passed, battery

KERNELS = Path(__file__).with_name("moe_kernels.py")
SCALED = Path(__file__).with_name("scaled_moe_kernels.py")  # fp8 codes with scales
RIGHT = ("vllm_fused_moe", "fbgemm_grouped_gemm", "grouped_mm_offs", "liger_moe_swiglu", "vllm_fused_moe_bias",
         "fbgemm_grouped_fp8_rowwise", "vllm_fused_moe_fp8", "kc_grouped_gemm")
# the wrong twin -> the kind of failure its shrunk case raises, and that case
CAUGHT = {
    "vllm_fused_moe_no_expert_parallel": ("out-of-bounds access",
                                          "1x1x1 fp16->fp16 * experts=2 top_k=1 route=uniform local=1:2"),
    # group 1 read at 1 * K * N past a stepped B: group 0 emptied, group 1 of one row
    "fbgemm_grouped_gemm_contiguous_b": ("out-of-bounds access",
                                         "1x1x2 fp16->fp16 A:row B:row/step2 C:row ones seed=0 groups=0,1"),
    "grouped_mm_offs_first_start_unguarded": ("out-of-bounds access", "1x1x1 fp16->fp16 * groups=1"),
    "liger_moe_swiglu_halves_swapped": ("value out of bound", "1x2x2 fp16->fp16 * experts=1 top_k=1 route=uniform"),
    # the bias loaded at the tile's unwrapped columns: past one expert's N = 1
    "vllm_fused_moe_bias_unmasked": ("out-of-bounds access", "1x1x1 fp16->fp16 * experts=1 top_k=1 route=uniform"),
    # group 1's row scaled by group 0's w_scale (the scales are powers of two: exact)
    "fbgemm_grouped_fp8_rowwise_first_group_scale": ("not bit-exact", "1x1x1 fp8e4m3->bf16 * groups=0,1"),
    # expert 0 not local: its block reads w_scale[-1]
    "vllm_fused_moe_fp8_scale_before_ep_check": ("out-of-bounds access",
                                                 "1x1x1 fp8e4m3->bf16 * experts=2 top_k=1 route=uniform local=1:2"),
    # group 0's tile stores zeros into group 2's row (group 1 empty), which group 2's program stores: right in
    # program-id order, a race on a GPU. Caught in a worker (a user kernel's default), reported as a race there
    "kc_grouped_gemm_whole_m_mask": ("data race", "2x1x1 fp16->fp16 A:row B:row C:row ones seed=0 groups=1,0,1"),
}


def _file(func: str) -> Path:
    return SCALED if "fp8" in func else KERNELS


@pytest.mark.parametrize("func", RIGHT)
def test_a_right_grouped_kernel_passes_the_battery(pytester, func):
    assert_passed(battery(pytester, f"{_file(func)}:{func}"))


@pytest.mark.parametrize("func", CAUGHT)
def test_a_wrong_grouped_twin_is_caught_and_shrunk(pytester, func):
    kind, case = CAUGHT[func]
    assert_caught(battery(pytester, f"{_file(func)}:{func}", "-k", "reference"), kind, case)
