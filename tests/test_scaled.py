"""Scaled operands (kernels/operation.py: fp8 and int8 codes with fp32 scales): declared where they are
written, their scales checked at the launch, the dequantized float64 reference right for every
granularity, and its bound sound on a right kernel and failing on kernels wrong in the ways scaled
kernels are."""

import re

import numpy as np
import pytest
import torch
from doubles import failures, fake, worst

from gemm_fuzz.kernels import Operation, contract
from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.properties.judge.failures import NotBitExact, ValueOutOfBound
from gemm_fuzz.properties.model.cases import Epilogue, GemmCase, Layout, materialize
from gemm_fuzz.properties.run import runner
from gemm_fuzz.reference import scaled

FP8 = {torch.float8_e4m3fn: (torch.bfloat16, torch.float16, torch.float32)}
INT8 = {torch.int8: (torch.float16, torch.bfloat16, torch.float32)}
BLOCK = Operation(a_scale="group", b_scale="block", group_k=8, group_n=4)


def _loop_scales(op: Operation, a_scale, b_scale, M, N, K):
    """Each element's scale, by the granularity's definition, one element at a time."""
    sa, sb = np.zeros((M, K)), np.zeros((K, N))
    for m in range(M):
        for k in range(K):
            where = {"tensor": (0,), "row": (m,), "group": (m, k // op.group_k)}[op.a_scale]
            sa[m, k] = a_scale[where]
    for k in range(K):
        for n in range(N):
            where = {"tensor": (0,), "col": (n,), "group": (k // op.group_k, n),
                     "block": (k // op.group_k, n // op.group_n)}[op.b_scale]
            sb[k, n] = b_scale[where]
    return sa, sb


def _scaled_product(op: Operation, wrong=None):
    """What a test double of `op` computes with torch: partial dots of codes per K group in float64, each scaled,
    summed (C's one rounding is the double's). `wrong(sa, sb)` may change the per-element scales used."""

    def compute(a, b, c, scales):
        M, K = a.shape
        N = b.shape[1]
        sa, sb = _loop_scales(op, scales["a_scale"].double().numpy(), scales["b_scale"].double().numpy(), M, N, K)
        if wrong is not None:
            sa, sb = wrong(sa, sb)
        return torch.from_numpy(a.double().numpy() * sa) @ torch.from_numpy(b.double().numpy() * sb)

    return compute


def _cases(dtype="fp8e4m3", out="fp32", profiles=("normal", "uniform", "small_ints")):
    for i, (m, n, k) in enumerate([(1, 1, 1), (5, 9, 17), (16, 7, 33), (3, 13, 8)]):
        for scales in ("pow2", "normal", "specials"):
            layouts = dict(a_scale=Layout("col", pad=i), b_scale=Layout(step=1 + i % 2))
            yield GemmCase(m, n, k, dtype, out, profile=profiles[i % len(profiles)], seed=i,
                           epilogue=Epilogue(scales=scales, **layouts))


# --- the declaration ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("declared, message", [
    (dict(a_scale="row"), "a_scale='row' with b_scale=None; expected both operands scaled, or neither"),
    (dict(a_scale="token", b_scale="col"), "a_scale='token'; expected 'tensor' (one for A); 'row'"),
    (dict(a_scale="row", b_scale="row"), "b_scale='row'; expected 'tensor' (one for B); 'col'"),
    (dict(a_scale="group", b_scale="group", group_k=0), "group_k=0; expected a positive int"),
    (dict(a_scale="row", b_scale="col", batched=True), "scaled operands with a gated or batched operation"),
])
def test_a_wrong_scaled_operation_fails_where_it_is_declared(declared, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Operation(**declared)


def test_a_contract_refuses_scales_on_operands_that_are_not_codes():
    scaled_op = Operation(a_scale="row", b_scale="col")
    with pytest.raises(ValueError, match=re.escape("input dtype torch.float16 is not one the suite tests as scaled")):
        contract(dtypes={torch.float16: (torch.float16,)}, operation=scaled_op)
    with pytest.raises(ValueError, match=re.escape("int8 inputs into int32 is not a pair the suite tests; int8 codes "
                                                   "go into float16, bfloat16, float32")):
        contract(dtypes={torch.int8: (torch.int32,)}, operation=scaled_op)
    assert contract(dtypes=INT8, operation=scaled_op)


def test_scale_shapes_follow_their_granularity():
    op = Operation(a_scale="group", b_scale="block", group_k=32, group_n=16)
    assert op.scale_shape("a", 5, 40, 65) == (5, 3) and op.scale_shape("b", 5, 40, 65) == (3, 3)
    op = Operation(a_scale="tensor", b_scale="group", group_k=32)
    assert op.scale_shape("a", 5, 40, 65) == (1,) and op.scale_shape("b", 5, 40, 65) == (3, 40)
    assert Operation(a_scale="row", b_scale="col").scale_shape("b", 5, 40, 65) == (40,)
    assert Operation(a_scale="row", b_scale="col").extras() == ("a_scale", "b_scale")


@pytest.mark.parametrize("change, error, message", [
    (lambda x: {**x, "a_scale": x["a_scale"][:, :1]}, ValueError, "a_scale has shape (5, 1); expected (5, 3)"),
    (lambda x: {**x, "b_scale": x["b_scale"].half()}, TypeError,
     "b_scale has dtype float16; variant 'fake' takes float32 scales"),
    (lambda x: {**x, "b_scale": x["b_scale"].flatten()}, ValueError,
     "b_scale must be 2-D (ceil(K / group_k) x ceil(N / group_n))"),
    (lambda x: {"a_scale": x["a_scale"]}, TypeError, "missing extra(s) b_scale"),
])
def test_a_launch_with_wrong_scales_names_the_scale(change, error, message):
    variant = fake(_scaled_product(BLOCK), FP8, BLOCK)
    a, b = torch.zeros(5, 17).to(torch.float8_e4m3fn), torch.zeros(17, 6).to(torch.float8_e4m3fn)
    c = torch.full((5, 6), float("nan"))
    scales = {"a_scale": torch.ones(5, 3), "b_scale": torch.ones(3, 2)}
    with pytest.raises(error, match=re.escape(message)):
        variant.launch(a, b, c, **change(scales))
    assert torch.isnan(c).all()  # nothing written


def test_a_kernel_that_needs_whole_groups_says_so():
    op = Operation(a_scale="group", b_scale="group", group_k=8, k_multiple_of_group=True)
    a, b = torch.zeros(2, 12).to(torch.float8_e4m3fn), torch.zeros(12, 3).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match=re.escape("K = 12 is not a multiple of group_k = 8")):
        fake(_scaled_product(op), FP8, op).launch(a, b, torch.zeros(2, 3), a_scale=torch.ones(2, 2),
                                                  b_scale=torch.ones(2, 3))


# --- the reference and its bound --------------------------------------------------------------------------


@pytest.mark.parametrize("op", [BLOCK, Operation(a_scale="tensor", b_scale="group", group_k=5),
                                Operation(a_scale="row", b_scale="col")])
def test_the_dequantized_reference_is_each_elements_code_times_its_own_scale(op):
    case = GemmCase(6, 9, 17, "fp8e4m3", "fp32", profile="normal", seed=4, epilogue=Epilogue(scales="normal"))
    ops = materialize(case, operation=op)
    a_scale, b_scale = ops.extras["a_scale"].view, ops.extras["b_scale"].view
    a2, b2, _ = scaled.dequantized(op, ops.a.view, ops.b.view, {"a_scale": a_scale, "b_scale": b_scale})
    sa, sb = _loop_scales(op, a_scale.double().numpy(), b_scale.double().numpy(), 6, 9, 17)
    assert np.array_equal(a2, ops.a.view.double().numpy() * sa) and np.array_equal(b2, ops.b.view.double().numpy() * sb)


@pytest.mark.parametrize("op", [BLOCK, Operation(a_scale="row", b_scale="col")])
@pytest.mark.parametrize("out", ["fp32", "bf16"])
def test_a_right_scaled_product_stays_within_the_bound(op, out):
    assert worst(fake(_scaled_product(op), FP8, op), _cases(out=out)) <= 1.0


@pytest.mark.parametrize("name, wrong", [
    # the block's scale of the next group along K: where one group follows another
    ("next group", lambda sa, sb: (sa, np.concatenate([sb[8:], sb[-8:]])[:len(sb)])),
    ("a scale per column", lambda sa, sb: (np.broadcast_to(sa[:1], sa.shape), sb)),
    ("b scale forgotten", lambda sa, sb: (sa, np.ones_like(sb))),
])
def test_a_kernel_using_the_wrong_scales_is_caught(name, wrong):
    caught = failures(fake(_scaled_product(BLOCK, wrong=wrong), FP8, BLOCK), _cases())
    assert caught and any(isinstance(e, ValueOutOfBound) for e in caught), f"{name}: {caught}"


def test_power_of_two_scales_of_integer_codes_are_judged_bit_for_bit():
    op = Operation(a_scale="row", b_scale="col")
    case = GemmCase(5, 7, 9, "int8", "fp32", profile="small_ints", seed=3, epilogue=Epilogue(scales="pow2"))
    assert runner.check(fake(_scaled_product(op), INT8, op), case).exact
    with pytest.raises(NotBitExact):
        runner.check(fake(_scaled_product(op, wrong=lambda sa, sb: (sa * (1 + 2.0**-20), sb)), INT8, op), case)


def test_an_infinite_scale_leaves_only_its_elements_unjudged():
    op = Operation(a_scale="row", b_scale="col")
    a, b = torch.ones(3, 4).to(torch.float8_e4m3fn), torch.ones(4, 2).to(torch.float8_e4m3fn)
    a_scale, b_scale = torch.tensor([1.0, float("inf"), 2.0]), torch.tensor([1.0, float("nan")])
    scales = {"a_scale": a_scale, "b_scale": b_scale}
    term = scaled.product_term(op, *scaled.scaled_product(op, a, b, scales), 4, "fp8e4m3")
    assert term.free.tolist() == [[False, False], [True, True], [False, False]]
    assert np.isnan(term.value[:, 1]).all() and term.value[2, 0] == 8.0  # a NaN scale's column is NaN


# --- weight-only codes (w4a16, w8a16) ---------------------------------------------------------------------

W4 = Operation(weight="int4", b_scale="group", group_k=8, zero="packed")
HALF = {torch.float16: (torch.float16, torch.float32)}


@pytest.mark.parametrize("declared, message", [
    (dict(weight="int3", b_scale="col"), "weight='int3'; expected 'int4' (w4a16), 'int8' (w8a16), 'e2m1'"),
    (dict(weight="int4", a_scale="row", b_scale="col"), "int4 weights with a_scale='row'; expected a_scale=None"),
    (dict(weight="int4", b_scale="block"), "weight-only codes with b_scale='block'"),
    (dict(weight="int8", b_scale="col", zero="packed"), "zero='packed' with weight='int8'"),
    (dict(weight="int8", b_scale="col", packing="n8"), "packing='n8' with weight='int8'"),
    (dict(weight="int4", b_scale="col", packing="k8", pack_order=(0, 1, 2, 3)), "pack_order=(0, 1, 2, 3)"),
    (dict(weight="int4", b_scale="col", pack_order=(1, 0, 2, 3, 4, 5, 6, 7)), "with packing='k2'"),
    (dict(weight="int4", b_scale="col", scale_dtype="e5m2"), "scale_dtype='e5m2'; expected one of fp32, fp16"),
    (dict(weight="int4", b_scale="group", zero="float", scale_dtype="e8m0"), "float zero points in fp32, fp16"),
    (dict(weight="int4", b_scale="group", scale_after_dot=True), "scale_after_dot; expected weight-only int4"),
    (dict(scale_dtype="fp16"), "scale_dtype='fp16' without scales"),
    (dict(weight="e2m1", a_scale="group"), "weight='e2m1' without b_scale"),
])
def test_a_wrong_weight_only_operation_fails_where_it_is_declared(declared, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Operation(**declared)


def _w4(wrong_zero=None):
    """What a test double of W4 computes: w = (q - z) * s rounded to A's dtype, then A @ W in float64 (C's one
    rounding is the double's); `wrong_zero` replaces every zero point."""

    def compute(a, b, c, extras):
        K = a.shape[1]
        codes = scaled.unpacked(W4, b, K, b.shape[1])
        zeros = scaled.zero_points(W4, extras["b_zero"], codes.shape) if wrong_zero is None else wrong_zero
        s = scaled.expanded(W4, "b", extras["b_scale"].double().numpy(), codes.shape)
        w = torch.from_numpy((codes - zeros) * s).to(a.dtype).double()
        return a.double() @ w

    return compute


def test_int4_codes_and_zero_points_unpack_as_declared():
    codes = np.arange(7 * 10).reshape(7, 10) % 16  # K = 7: the last byte's high nibble unused
    padded = np.vstack([codes, np.zeros((1, 10), dtype=np.int64)])
    b = torch.from_numpy(padded[0::2] | (padded[1::2] << 4)).to(torch.uint8)
    assert np.array_equal(scaled.unpacked(W4, b, 7, b.shape[1]), codes)
    zeros = np.arange(16).reshape(1, 16) % 16  # one group, N = 16: two words
    words = [sum(int(zeros[0, 8 * j + i]) << (4 * i) for i in range(8)) for j in range(2)]
    b_zero = torch.tensor([[w - 2**32 if w >= 2**31 else w for w in words]], dtype=torch.int32)
    assert np.array_equal(scaled.zero_points(W4, b_zero, (5, 16)), np.broadcast_to(zeros, (5, 16)))
    assert (scaled.zero_points(Operation(weight="int4", b_scale="col"), None, (2, 3)) == 8).all()


def test_a_weight_only_launch_names_what_is_wrong():
    variant = fake(_w4(), HALF, W4, name="w4_fake")
    a, c = torch.zeros(2, 9, dtype=torch.float16), torch.full((2, 3), float("nan"), dtype=torch.float16)
    good = dict(b_scale=torch.ones(2, 3), b_zero=torch.zeros(2, 1, dtype=torch.int32))
    with pytest.raises(TypeError, match=re.escape("B has dtype float16; variant 'w4_fake' takes int4 codes stored as "
                                                  "uint8")):
        variant.launch(a, torch.zeros(9, 3, dtype=torch.float16), c, **good)
    with pytest.raises(ValueError, match=re.escape("B has shape (4, 3); expected (5, 3) for A's K = 9 (two codes a "
                                                   "byte along K)")):
        variant.launch(a, torch.zeros(4, 3, dtype=torch.uint8), c, **good)
    with pytest.raises(ValueError, match=re.escape("b_zero has shape (2, 3) and dtype int32; expected (2, 1) int32")):
        variant.launch(a, torch.zeros(5, 3, dtype=torch.uint8), c, **{**good, "b_zero": torch.zeros(2, 3).int()})
    assert torch.isnan(c).all()


def test_a_right_w4a16_product_passes_and_one_ignoring_its_zero_points_does_not():
    cases = [GemmCase(m, n, k, "fp16", out, profile=p, seed=k, epilogue=Epilogue(scales=s))
             for m, n, k in [(1, 1, 1), (3, 9, 17), (5, 16, 33)] for out in ("fp16", "fp32")
             for p in ("ones", "normal", "small_ints") for s in ("pow2", "normal", "specials")]
    assert worst(fake(_w4(), HALF, W4, name="w4_fake"), cases) <= 1.0
    assert len(failures(fake(_w4(wrong_zero=0.0), HALF, W4, name="w4_fake"), cases)) >= len(cases) // 2


def test_int8_weights_are_signed_codes_with_no_zero_point():
    op = Operation(weight="int8", b_scale="col")
    b = torch.tensor([[-128, 127], [3, -1]], dtype=torch.int8)
    a = torch.ones(1, 2, dtype=torch.float16)
    a2, b2, _ = scaled.dequantized(op, a, b, {"b_scale": torch.tensor([0.5, 2.0])})
    assert b2.tolist() == [[-64.0, 254.0], [1.5, -2.0]]
    case = GemmCase(3, 5, 7, "fp16", "fp32", profile="normal", seed=1, epilogue=Epilogue(scales="normal"))
    ops = materialize(case, operation=op)
    assert ops.b.view.dtype == torch.int8 and tuple(ops.extras) == ("b_scale",)


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_a_kernel_needing_whole_groups_is_only_drawn_whole_groups(device_type):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from gemm_fuzz.properties.model import strategies

    op = Operation(a_scale="group", b_scale="group", group_k=48, k_multiple_of_group=True)
    variant = Variant("whole", fake(_scaled_product(op), FP8, op).launch, FP8, "ieee",
                      {"cpu": (dict(BM=16, BN=16, BK=16),), "cuda": (dict(BM=64, BN=64, BK=32),)}, "a test double",
                      operation=op)

    @settings(max_examples=40, deadline=None, database=None)
    @given(st.data())
    def check(data):
        case = data.draw(strategies.gemm_cases(variant, "fp8e4m3", device_type=device_type, max_dim=200))
        assert case.K % 48 == 0 and case.K >= 48

    check()


def test_what_a_scaled_case_reached_is_counted():
    from gemm_fuzz import kernels
    from gemm_fuzz.properties.report import reached

    w4 = kernels.get("w4a16")
    case = GemmCase(3, 5, 33, "fp16", "fp16", profile="normal", epilogue=Epilogue(scales="specials"))
    found = reached.features(case, w4, "cpu")
    assert {"scales specials", "K spans 2+ groups", "K ends in a partial group", "odd K: half a byte unused"} <= found
    assert not {"K spans 2+ groups", "odd K: half a byte unused"} & reached.features(case.replace(K=32), w4, "cpu")
    assert {"scales pow2", "scales normal", "odd K: half a byte unused"} <= reached.expected(w4, "cpu", "fp16")
    assert not any("scales" in f for f in reached.expected(kernels.get("tiled"), "cpu", "fp16"))


def test_an_underflow_a_huge_scale_multiplies_is_within_the_bound(backend):
    """block_fp8 computes dot * a_scale * b_scale in fp32: with a_scale the smallest subnormal (2**-149) the
    partial underflows to 0, and b_scale (fp32's largest) would have made it -2**-23. A right kernel does
    this; the bound counts the loss (it did not: this case, drawn by the specials, failed)."""
    from gemm_fuzz import kernels
    from gemm_fuzz.properties.judge import oracles
    from gemm_fuzz.properties.launch import launching

    variant = kernels.get("block_fp8")
    case = GemmCase(15, 7, 1, "fp8e4m3", "bf16", profile="mixed_magnitudes", seed=5,
                    epilogue=Epilogue(b_scale=Layout(order="col"), scales="specials"))
    ops = materialize(case, backend.device, variant.operation)
    assert ops.extras["a_scale"].view[10].item() == 2.0**-149 and ops.extras["b_scale"].view.max().item() > 3e38
    launching.launch(variant, ops, backend)
    oracles.against_reference(ops, variant.precision)
