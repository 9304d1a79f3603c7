"""Grouped and MoE user kernels in published styles (tests/moe_kernels.py) through the whole battery: each right
one passes, each wrong twin is caught and shrinks to the case its bug needs."""

from pathlib import Path

import pytest

KERNELS = Path(__file__).with_name("moe_kernels.py")
FAST = ["--gemm-backend", "interpreter", "-p", "no:cacheprovider", "--hypothesis-profile", "ci", "--gemm-repros", ""]
RIGHT = ("vllm_fused_moe", "fbgemm_grouped_gemm", "grouped_mm_offs", "liger_moe_swiglu")
# the wrong twin -> the kind of failure its shrunk case raises, and that case
CAUGHT = {
    "vllm_fused_moe_no_expert_parallel": ("out-of-bounds access",
                                          "1x1x1 fp16->fp16 * experts=2 top_k=1 route=uniform local=1:2"),
    # group 1 read at 1 * K * N past a stepped B: group 0 emptied, group 1 of one row
    "fbgemm_grouped_gemm_contiguous_b": ("out-of-bounds access",
                                         "1x1x2 fp16->fp16 A:row B:row/step2 C:row ones seed=0 groups=0,1"),
    "grouped_mm_offs_first_start_unguarded": ("out-of-bounds access", "1x1x1 fp16->fp16 * groups=1"),
    "liger_moe_swiglu_halves_swapped": ("value out of bound", "1x2x2 fp16->fp16 * experts=1 top_k=1 route=uniform"),
}


@pytest.mark.parametrize("func", RIGHT)
def test_a_right_grouped_kernel_passes_the_battery(pytester, func):
    result = pytester.runpytest_subprocess("--gemm-kernel", f"{KERNELS}:{func}", *FAST, timeout=900)
    assert result.ret == 0, result.stdout.str()[-3000:]


@pytest.mark.parametrize("func", CAUGHT)
def test_a_wrong_grouped_twin_is_caught_and_shrunk(pytester, func):
    kind, case = CAUGHT[func]
    result = pytester.runpytest_subprocess("--gemm-kernel", f"{KERNELS}:{func}", *FAST, "-k", "reference", timeout=900)
    assert result.ret == 1, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([f"*{kind}*", f"*case: {case}"])
