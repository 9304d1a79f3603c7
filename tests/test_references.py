"""The references agree with each other, and the bound is sound for correct arithmetic and has teeth
against wrong arithmetic."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gemm_fuzz.properties.model.cases import GemmCase, materialize
from gemm_fuzz.reference import bounds, numpy_ref, torch_ref
from gemm_fuzz.reference.formats import by_name

DTYPES = ["fp16", "bf16", "fp32"]


def cases(dtype, profiles=("ones", "small_ints", "normal")):
    return st.builds(GemmCase, M=st.integers(1, 24), N=st.integers(1, 24), K=st.integers(1, 96),
                     dtype=st.just(dtype), out_dtype=st.just(dtype), profile=st.sampled_from(profiles),
                     seed=st.integers(0, 1000))


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_numpy_and_torch_float64_agree(dtype, data):
    ops = materialize(data.draw(cases(dtype)))
    product = numpy_ref.product(ops.a.view, ops.b.view)
    t64 = torch_ref.float64_cpu(ops.a.view, ops.b.view).numpy()
    if product.integer_inputs:
        np.testing.assert_array_equal(product.value, t64)
    else:
        # both are float64 sums in some order: each within gamma_K(2**-53) |A||B| of exact
        slack = 2 * bounds.gamma(ops.case.K, bounds.U64) * product.magnitude
        assert np.all(np.abs(product.value - t64) <= slack)


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_torch_peer_on_the_device_is_within_the_bound(dtype, data, backend):
    case = data.draw(cases(dtype))
    ops = materialize(case, backend.device)
    peer = torch_ref.on_device(ops.a.view, ops.b.view, ops.c.view.dtype)
    product = numpy_ref.product(ops.a.view, ops.b.view)
    arith, out = bounds.arithmetic(dtype), by_name(dtype)
    bound = bounds.elementwise(product, case.K, arith, out)
    err = np.abs(numpy_ref.to_float64(peer) - product.value)
    assert np.all(err <= bound), f"torch.matmul exceeds the bound by {np.max(err / bound):.3g}x on {case.describe()}"


@given(case=st.builds(GemmCase, M=st.integers(1, 12), N=st.integers(1, 12), K=st.integers(1, 40),
                      dtype=st.sampled_from(DTYPES), out_dtype=st.just("fp32"),
                      profile=st.sampled_from(["ones", "small_ints", "normal", "mixed_magnitudes", "near_overflow"]),
                      specials=st.booleans(), seed=st.integers(0, 1000)))
def test_the_product_as_a_gpu_computes_it_is_the_hosts(case):
    """On a GPU the float64 product and its facts are computed with torch where the tensors live: the
    same function of A and B as numpy's (run here with torch on the CPU), NaN, Inf and exactness alike."""
    ops = materialize(case)
    A, B = numpy_ref.to_float64(ops.a.view), numpy_ref.to_float64(ops.b.view)
    host = numpy_ref._product(np, A, B, None)
    device = numpy_ref._product(torch, torch.from_numpy(A), torch.from_numpy(B), None)
    assert (device.integer_inputs, device.max_abs_input) == (host.integer_inputs, host.max_abs_input)
    np.testing.assert_array_equal(device.row_integers, host.row_integers)  # NaN where a row is not all integers
    np.testing.assert_array_equal(device.col_integers, host.col_integers)
    np.testing.assert_array_equal(np.isnan(device.value), np.isnan(host.value))
    np.testing.assert_array_equal(np.isinf(device.value) * np.sign(device.value),
                                  np.isinf(host.value) * np.sign(host.value))
    slack = 2 * bounds.gamma(case.K, bounds.U64) * host.magnitude  # two float64 sums in their own orders
    finite = np.isfinite(host.value)
    assert np.all(np.abs(device.value - host.value)[finite] <= slack[finite])
    assert np.all(np.abs(device.magnitude - host.magnitude) <= slack)


def _sequential_sum(a: np.ndarray, b: np.ndarray, acc=np.float32) -> np.ndarray:
    """Left-to-right accumulation in `acc`, the worst order for error growth."""
    out = np.zeros((a.shape[0], b.shape[1]), dtype=acc)
    for k in range(a.shape[1]):
        out = (out + (a[:, k:k + 1].astype(acc) * b[k:k + 1, :].astype(acc))).astype(acc)
    return out


@given(m=st.integers(1, 8), n=st.integers(1, 8), k=st.integers(1, 512), seed=st.integers(0, 100))
def test_bound_holds_for_fp32_sequential_accumulation(m, n, k, seed):
    ops = materialize(GemmCase(M=m, N=n, K=k, dtype="fp32", out_dtype="fp32", profile="normal", seed=seed))
    a, b = numpy_ref.to_float64(ops.a.view), numpy_ref.to_float64(ops.b.view)
    product = numpy_ref.product(ops.a.view, ops.b.view)
    bound = bounds.elementwise(product, k, bounds.arithmetic("fp32"), by_name("fp32"))
    assert np.all(np.abs(_sequential_sum(a, b).astype(np.float64) - product.value) <= bound)


def test_bound_has_teeth_tf32_arithmetic_breaks_the_ieee_bound():
    ops = materialize(GemmCase(M=16, N=16, K=64, dtype="fp32", out_dtype="fp32", profile="normal", seed=1))
    a, b = numpy_ref.to_float64(ops.a.view), numpy_ref.to_float64(ops.b.view)
    from gemm_fuzz.properties.interpreter.fixes import round_to_tf32

    a32, b32 = round_to_tf32(a.astype(np.float32)), round_to_tf32(b.astype(np.float32))
    tf32 = a32.astype(np.float64) @ b32.astype(np.float64)
    product = numpy_ref.product(ops.a.view, ops.b.view)
    ieee = bounds.elementwise(product, 64, bounds.arithmetic("fp32", "ieee"), by_name("fp32"))
    tf32_bound = bounds.elementwise(product, 64, bounds.arithmetic("fp32", "tf32"), by_name("fp32"))
    assert np.any(np.abs(tf32 - product.value) > ieee)
    assert np.all(np.abs(tf32 - product.value) <= tf32_bound)


def test_bound_has_teeth_an_fp16_accumulator_breaks_the_fp32_accumulator_bound():
    ops = materialize(GemmCase(M=8, N=8, K=512, dtype="fp16", out_dtype="fp32", profile="normal", seed=2))
    a, b = numpy_ref.to_float64(ops.a.view), numpy_ref.to_float64(ops.b.view)
    product = numpy_ref.product(ops.a.view, ops.b.view)
    bound = bounds.elementwise(product, 512, bounds.arithmetic("fp16"), by_name("fp32"))
    fp16_acc = _sequential_sum(a, b, acc=np.float16).astype(np.float64)
    assert np.any(np.abs(fp16_acc - product.value) > bound)


def _exact(a: list, b: list, dtype: torch.dtype, arith) -> list:
    """exact_expected on A @ B (nested lists, as `dtype` tensors) through numpy_ref.product, as every
    run computes it: with the per-row and per-column facts, judged element by element."""
    product = numpy_ref.product(torch.tensor(a, dtype=dtype), torch.tensor(b, dtype=dtype))
    assert product.row_integers is not None and product.col_integers is not None
    return bounds.exact_expected(product, arith).tolist()


def test_exactness_is_claimed_only_where_fp32_accumulation_is_exact():
    arith, tf32, e11 = bounds.arithmetic("fp16"), bounds.arithmetic("fp32", "tf32"), 2.0**11
    # Products as every run builds them (numpy_ref.product: per-row and per-column facts)
    assert _exact([[e11] * 4], [[e11]] * 4, torch.float16, arith) == [[True]]  # sums up to 2**24: exact in fp32
    assert _exact([[e11] * 4 + [1.0]], [[e11]] * 4 + [[2.0]], torch.float16, arith) == [[False]]  # 2**24 + 2
    assert _exact([[0.5]], [[0.5]], torch.float16, arith) == [[False]]
    assert _exact([[2048.0]], [[3.0]], torch.float32, tf32) == [[True]]
    assert _exact([[4097.0]], [[1.0]], torch.float32, tf32) == [[False]]  # 4097 does not survive tf32 rounding
    assert _exact([[1.0]], [[4097.0]], torch.float32, tf32) == [[False]]  # in B's column as in A's row
    # element by element: a row of A or column of B that is fractional spoils its own elements, and an
    # element whose sum passes 2**24 only itself
    a = [[e11] * 4 + [1.0], [1.0] * 5, [0.5] + [1.0] * 4]
    b = [[e11, 1.0, 1.0]] * 4 + [[2.0, 1.0, 0.5]]
    assert _exact(a, b, torch.float16, arith) == [[False, True, False], [True, True, False], [False, False, False]]
    # Products built by hand carry only the whole product's facts (the other branch of exact_expected)
    small = numpy_ref.Product(np.array([[2.0**24]]), np.array([[2.0**24]]), True, 2.0**11)
    big = numpy_ref.Product(np.array([[2.0**24 + 2]]), np.array([[2.0**24 + 2]]), True, 2.0**11)
    fractional = numpy_ref.Product(np.array([[0.5]]), np.array([[0.5]]), False, 0.5)
    assert bounds.exact_expected(small, arith)
    assert not bounds.exact_expected(big, arith)
    assert not bounds.exact_expected(fractional, arith)
    assert not bounds.exact_expected(numpy_ref.Product(np.array([[4097.0]]), np.array([[4097.0]]), True, 4097.0), tf32)


def test_a_subnormal_operand_widens_the_bound_by_the_tensor_cores_alignment():
    """Measured on the H100 (the grouped variant, fp16 -> fp32, K = 2): tensor cores align a subnormal
    operand's product by the smallest normal exponent and truncated the sum to 20 bits of its larger
    product, 5 fp32 ulps off. The bound scales that term by max(|a|, 2**-14) max(|b|, 2**-14)."""
    a = torch.tensor([[float.fromhex("0x1.b84p0"), float.fromhex("0x1.14p-16")]], dtype=torch.float16)
    b = torch.tensor([[float.fromhex("0x1.1p-19")], [float.fromhex("0x1.c4p-16")]], dtype=torch.float16)
    product, arith = numpy_ref.product(a, b), bounds.arithmetic("fp16")
    h100 = float.fromhex("0x1.d3d33p-19")
    error = abs(h100 - product.value[0, 0])
    assert error <= bounds.elementwise(product, 2, arith, by_name("fp32"))[0, 0]
    from dataclasses import replace
    assert error > bounds.elementwise(product, 2, replace(arith, align_floor=0.0), by_name("fp32"))[0, 0]
    # operands with no subnormal keep the bound they had; fp32's own FMA arithmetic aligns nothing
    normal = numpy_ref.product(a.clamp(min=1.0), b.clamp(min=1.0))
    assert np.array_equal(normal.aligned_magnitude(2.0**-14), normal.magnitude)
    assert bounds.arithmetic("fp32").align_floor == 0.0 and bounds.arithmetic("bf16").align_floor == 2.0**-126


def test_the_torch_ratio_compares_a_result_with_torch_matmuls_error(backend):
    from gemm_fuzz import kernels
    from gemm_fuzz.properties.judge import oracles
    from gemm_fuzz.properties.run import runner

    case = GemmCase(M=9, N=11, K=70, dtype="fp16", out_dtype="fp16", profile="normal", seed=5)
    ops = materialize(case, backend.device)
    exact = numpy_ref.product(ops.a.view, ops.b.view).value
    ops.c.view.copy_(torch_ref.on_device(ops.a.view, ops.b.view, ops.c.view.dtype))
    mine = lambda: numpy_ref.to_float64(ops.c.view)  # noqa: E731
    assert oracles.torch_error_ratio(ops, exact, mine()) == 1.0  # torch's own result
    ops.c.view.copy_(torch.from_numpy(exact).to(ops.c.view.dtype))
    assert oracles.torch_error_ratio(ops, exact, mine()) <= 1.0  # the exact product, rounded once, errs least
    assert runner.check(kernels.get("tiled"), case, backend).torch_ratio is not None
    exact_case = GemmCase(M=9, N=11, K=70, dtype="fp16", out_dtype="fp16", profile="small_ints", seed=5)
    assert runner.check(kernels.get("tiled"), exact_case, backend).torch_ratio is None  # nothing to compare


def test_a_gpus_small_products_are_computed_on_the_host_and_large_ones_where_they_live():
    """Several processes sharing one GPU take its kernels in turns: a product of up to HOST_PRODUCT
    multiply-adds is copied back and computed by numpy, a larger one by torch on the GPU."""
    def on(m, k, n):
        return numpy_ref._on_host(torch.empty((m, k), device="meta"), torch.empty((k, n), device="meta"))

    assert on(64, 128, 128) and on(1, 1, numpy_ref.HOST_PRODUCT)
    assert not on(600, 600, 600) and not on(1, 2, numpy_ref.HOST_PRODUCT)
    assert on(0, 600, 600)  # nothing to multiply


def test_the_aligned_magnitude_is_the_same_on_the_host_and_where_the_operands_live(monkeypatch):
    a = torch.tensor([[float.fromhex("0x1.b84p0"), float.fromhex("0x1.14p-16"), float("inf")]], dtype=torch.float16)
    b = torch.tensor([[float.fromhex("0x1.1p-19")], [float.fromhex("0x1.c4p-16")], [0.5]], dtype=torch.float16)
    host = numpy_ref.product(a, b).aligned_magnitude(2.0**-14)
    monkeypatch.setattr(numpy_ref, "_on_host", lambda a, b: False)  # torch's path, here on the CPU
    assert not np.array_equal(host, numpy_ref.product(a, b).magnitude)  # the floor lifted something
    np.testing.assert_array_equal(numpy_ref.product(a, b).aligned_magnitude(2.0**-14), host)
