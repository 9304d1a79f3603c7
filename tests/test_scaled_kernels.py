"""User kernels of scaled and quantized GEMMs, in the styles people publish: DeepSeek/vLLM block fp8, FBGEMM's
row-wise fp8 and torchao's int8 w8a8 (tests/scaled_kernels.py), AWQ's int4 (tests/weight_kernels.py), MXFP4
weights, MXFP8 x MXFP4 through tl.dot_scaled and NVFP4 (tests/mx_kernels.py), GPTQ's and AWQ's int4 words and an
int8 kernel scaling after the dot (tests/packed_weight_kernels.py). Each declares its operation (`contract(
operation=Operation(...))`) and passes the battery, while its wrong twin is caught with the kind of failure its
bug makes and the case it shrinks to."""

from pathlib import Path

import pytest
from user_runs import assert_caught, assert_passed, battery

from gemm_fuzz.properties.launch import user_kernel

KERNELS = Path(__file__).parent / "scaled_kernels.py"


def test_each_contract_becomes_a_variant_computing_its_scaled_product():
    block = user_kernel.load(f"{KERNELS}:block_fp8_matmul")
    assert block.operation.describe() == ("C = A @ B; A, B scaled: a_scale group, b_scale block, group_k 32, "
                                          "group_n 32")
    assert user_kernel.load(f"{KERNELS}:int8_scaled_matmul").operation.keywords() == {
        "a_scale": "a_scale", "b_scale": "b_scale"}


@pytest.mark.parametrize("func", ["block_fp8_matmul", "rowwise_fp8_matmul", "int8_scaled_matmul"])
def test_a_right_scaled_kernel_passes_the_battery(pytester, func):
    result = battery(pytester, f"{KERNELS}:{func}")
    assert_passed(result)
    result.stdout.fnmatch_lines(["* passed*"])


# the wrong twin -> the kind of failure its shrunk case raises, and that case
CAUGHT = {
    "block_fp8_matmul_scale_per_tile": ("out-of-bounds access", "1x1x17 fp8e4m3->bf16 *"),
    "rowwise_fp8_matmul_scale_mask_missing": ("out-of-bounds access", "1x1x1 fp8e4m3->bf16 *"),
    "int8_scaled_matmul_even_k_by_parity": ("out-of-bounds access", "1x1x2 int8->fp16 *"),
}


@pytest.mark.parametrize("func", CAUGHT)
def test_a_wrong_twin_is_caught_and_shrunk(pytester, func):
    kind, case = CAUGHT[func]
    assert_caught(battery(pytester, f"{KERNELS}:{func}", "-k", "reference"), kind, case)


WEIGHTS = Path(__file__).parent / "weight_kernels.py"


def test_a_right_int4_weight_kernel_passes_the_battery(pytester):
    assert_passed(battery(pytester, f"{WEIGHTS}:awq_w4a16_matmul"))


def test_a_wrong_int4_weight_kernel_is_caught_and_shrunk(pytester):
    func = "awq_w4a16_matmul_zero_shift_by_index"  # column 1's zero point from the wrong bits
    assert_caught(battery(pytester, f"{WEIGHTS}:{func}", "-k", "reference"), "not bit-exact", "1x2x1 fp16->fp16 *")


MX = Path(__file__).parent / "mx_kernels.py"
PACKED = Path(__file__).parent / "packed_weight_kernels.py"


@pytest.mark.parametrize("kernel", [f"{MX}:mxfp4_weight_matmul", f"{MX}:mxfp8_mxfp4_matmul", f"{MX}:nvfp4_matmul",
                                    f"{PACKED}:gptq_w4a16_matmul", f"{PACKED}:awq_n8_w4a16_matmul",
                                    f"{PACKED}:w8a16_scale_after_dot"], ids=lambda k: k.split(":")[1])
def test_a_right_microscaled_or_packed_kernel_passes_the_battery(pytester, kernel):
    result = battery(pytester, kernel)
    assert_passed(result)
    result.stdout.fnmatch_lines(["* passed*"])


# the wrong twin -> the kind of failure its shrunk case raises, and that case
CAUGHT_FAMILY = {
    f"{MX}:mxfp4_weight_matmul_scale_byte0_zero": ("value out of bound",
                                                   "1x1x3 bf16->bf16 * scales:specials"),
    f"{MX}:mxfp8_mxfp4_matmul_b_scale_mask_missing": ("out-of-bounds access", "1x1x1 fp8e4m3->bf16 *"),
    f"{MX}:nvfp4_matmul_group_of_32": ("not bit-exact", "1x1x18 fp4e2m1->bf16 *"),
    f"{PACKED}:gptq_w4a16_matmul_group_off_by_one": ("not bit-exact", "1x1x33 fp16->fp16 *"),
    f"{PACKED}:awq_n8_w4a16_matmul_zero_identity_order": ("not bit-exact", "1x2x1 fp16->fp16 *"),
    f"{PACKED}:w8a16_scale_after_dot_scale_unmasked": ("out-of-bounds access", "1x1x1 fp16->fp16 *"),
}


@pytest.mark.parametrize("kernel", CAUGHT_FAMILY, ids=lambda k: k.split(":")[1])
def test_a_wrong_microscaled_or_packed_twin_is_caught_and_shrunk(pytester, kernel):
    kind, case = CAUGHT_FAMILY[kernel]
    assert_caught(battery(pytester, kernel, "-k", "reference"), kind, case)
