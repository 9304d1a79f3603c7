"""Codes beyond fp8 and int8 (kernels/operation.py): e2m1 (fp4) codes and E8M0 or e4m3 scales (MXFP8, MXFP4,
NVFP4), int4 codes packed eight an int32 along K or N in any nibble order (GPTQ, AWQ), float zero points
(w = q * s + z) and channel scales applied after the dot. Decoded as their specifications say, drawn as
stored, checked at the launch, and the bound sound on right kernels and failing on kernels wrong in the
ways these kernels are."""

import re

import numpy as np
import pytest
import torch
from doubles import failures, fake, first_run, launcher, worst

from gemm_fuzz.kernels import Operation, operands
from gemm_fuzz.properties.judge import family_relations
from gemm_fuzz.properties.judge.failures import NotBitExact, ValueOutOfBound
from gemm_fuzz.properties.model.cases import UNUSED_NIBBLE, Epilogue, GemmCase, materialize, packed, raw
from gemm_fuzz.reference import scaled

MX = Operation(a_scale="group", b_scale="group", group_k=32, scale_dtype="e8m0", weight="e2m1")
NV = Operation(a_scale="group", b_scale="group", group_k=16, scale_dtype="e4m3", weight="e2m1")
AWQ_ORDER = (0, 4, 1, 5, 2, 6, 3, 7)
HALF = {torch.float16: (torch.float16, torch.float32), torch.bfloat16: (torch.bfloat16, torch.float32)}


def test_e8m0_decodes_as_the_ocp_specification_says():
    """Byte e is 2**(e - 127): byte 0 is 2**-127 (not 0, as a decoder shifting e into an fp32 exponent gives),
    0xFF is NaN."""
    values = scaled.e8m0(np.arange(256))
    assert values[0] == 2.0**-127 and values[1] == 2.0**-126 and values[127] == 1.0 and values[254] == 2.0**127
    assert np.isnan(values[255]) and np.isfinite(values[:255]).all()


def test_e2m1_codes_decode_by_their_bits():
    """Sign bit 3, exponent bits 1-2 with bias 1, mantissa bit 0; exponent 0 is subnormal (0 and 0.5)."""
    for code in range(16):
        sign, e, m = code >> 3, (code >> 1) & 3, code & 1
        magnitude = m * 0.5 if e == 0 else 2.0 ** (e - 1) * (1 + m / 2)
        assert scaled.E2M1[code] == (-magnitude if sign else magnitude)
    assert scaled.E2M1.max() == 6.0


@pytest.mark.parametrize("axis, order", [(0, (0, 1)), (0, tuple(range(8))), (1, tuple(range(8))), (1, AWQ_ORDER)])
def test_packed_codes_unpack_to_themselves(axis, order):
    """Packing (the cases' encoder) and unpacking (the reference's decoder) are inverses, a partial last
    word's unused nibbles holding UNUSED_NIBBLE; element i of a word sits in nibble order[i]."""
    codes = np.random.default_rng(3).integers(0, 16, size=(13, 11))
    words = packed(codes, axis, order)
    assert words.shape[axis] == -(-codes.shape[axis] // len(order))
    assert np.array_equal(scaled.nibbles(words, axis, codes.shape[axis], order), codes)
    last = np.moveaxis(words, axis, 0)[-1].astype(np.int64) & 0xFFFFFFFF
    unused = codes.shape[axis] % len(order)
    assert ((last >> (4 * order[unused])) & 0xF == UNUSED_NIBBLE).all()
    if order == AWQ_ORDER:  # column 1 of a word in bits 16..19, as AWQ packs it
        one = np.zeros((1, 8), dtype=np.int64)
        one[0, 1] = 5
        assert int(packed(one, 1, order)[0, 0]) == 5 << 16


def test_microscaled_operands_are_stored_as_kernels_take_them():
    """MXFP8 x MXFP4: A fp8, B e2m1 two a byte along K (an odd K's unused nibble 0xF, -6), E8M0 scale bytes
    surrounded by 0xFF (NaN as E8M0: a scale read past the end shows in C); NVFP4: A e2m1 too."""
    case = GemmCase(3, 5, 33, "fp8e4m3", "bf16", profile="normal", seed=2, epilogue=Epilogue(scales="specials"))
    ops = materialize(case, operation=MX)
    assert ops.a.view.dtype == torch.float8_e4m3fn and tuple(ops.b.view.shape) == (17, 5)
    assert ops.b.view.dtype == torch.uint8 and (ops.b.view[-1] >> 4 == UNUSED_NIBBLE).all()
    for name, shape in (("a_scale", (3, 2)), ("b_scale", (2, 5))):
        guarded = ops.extras[name]
        assert guarded.view.dtype == torch.uint8 and tuple(guarded.view.shape) == shape
        outside = torch.ones(guarded.buffer.numel(), dtype=torch.bool)
        outside[[guarded.view.storage_offset() + sum(i * s for i, s in zip(idx, guarded.view.stride()))
                 for idx in np.ndindex(*shape)]] = False
        assert (raw(guarded.buffer)[outside] == 0xFF).all()
    nv = materialize(GemmCase(2, 3, 18, "fp4e2m1", "fp32", profile="normal", seed=1), operation=NV)
    assert nv.a.view.dtype == torch.uint8 and tuple(nv.a.view.shape) == (2, 9)
    assert nv.extras["a_scale"].view.dtype == torch.float8_e4m3fn and tuple(nv.extras["a_scale"].view.shape) == (2, 2)


def _decoded(op: Operation, mistake: str | None = None):
    """What a test double of `op` computes: float64 from the reference's own decoders (C's one rounding is the
    double's); `mistake`: "byte0" decodes E8M0 byte 0 as 0, "rounded" rounds scale-after-dot weights into A's
    dtype before the dot, "sub" computes a float zero point's weights as (q - z) * s."""

    def compute(a, b, c, extras):
        if mistake == "clamp":  # E8M0 exponents saturated at 2**3, as a kernel with a small exponent table
            extras = {k: v.clamp(max=130) if k.endswith("scale") else v for k, v in extras.items()}
        a2, b2, _ = scaled.dequantized(op, a, b, extras)
        if mistake == "byte0":  # byte 0 (2**-127) decoded as 0: the elements it scales vanish
            for key, x2 in (("a_scale", a2), ("b_scale", b2)):
                x2[scaled.expanded(op, key[0], (extras[key] == 0).double().numpy(), x2.shape) == 1] = 0.0
        if mistake == "rounded":
            b2 = torch.from_numpy(b2).to(a.dtype).double().numpy()
        if mistake in ("sub", "nozero"):  # (q - z) * s for q * s + z; q * s, the zero points ignored
            codes = scaled.unpacked(op, b, a2.shape[1], c.shape[1])
            s = scaled.expanded(op, "b", extras["b_scale"].double().numpy(), codes.shape)
            b2 = (codes - (scaled.zero_points(op, extras["b_zero"], codes.shape) if mistake == "sub" else 0)) * s
        if op.weight_only and mistake != "rounded" and not op.scale_after_dot:
            b2 = torch.from_numpy(b2).to(a.dtype).double().numpy()  # dequantized into A's dtype, as declared
        with np.errstate(invalid="ignore", over="ignore"):
            return a2 @ b2 * extras.get("alpha", 1.0)

    return compute


def _cases(dtype, outs, profiles=("normal", "ones", "small_ints"), shapes=((1, 1, 2), (3, 9, 34), (5, 16, 66))):
    return [GemmCase(m, n, k, dtype, out, profile=p, seed=k + i, epilogue=Epilogue(scales=s))
            for i, (m, n, k) in enumerate(shapes) for out in outs for p in profiles
            for s in ("pow2", "normal", "specials")]


def _worst_and_caught(op: Operation, dtypes, mistake: str, cases) -> tuple[float, int]:
    """The right double's worst error / bound over `cases`, and how many of them catch the one with `mistake`."""
    return (worst(fake(_decoded(op), dtypes, op, bk=32), cases),
            len(failures(fake(_decoded(op, mistake), dtypes, op, bk=32), cases)))


def test_a_right_mx_product_passes_and_one_decoding_byte_0_as_0_does_not():
    dtypes = {torch.float8_e4m3fn: (torch.bfloat16, torch.float32)}
    cases = _cases("fp8e4m3", ("bf16", "fp32"))
    assert worst(fake(_decoded(MX), dtypes, MX, bk=32), cases) <= 1.0
    # byte 0 shows where it meets a large scale in the same group (the special scales put one there) and a
    # code of at least 2 (smaller, the dequantized value is below bf16's normals, which a correct kernel may flush)
    specials = [GemmCase(m, n, k, "fp8e4m3", "fp32", profile=p, seed=seed, epilogue=Epilogue(scales="specials"))
                for m, n, k in ((1, 3, 1), (2, 4, 40)) for p in ("small_ints", "wide_ints") for seed in range(6)]
    worst_ratio, caught = _worst_and_caught(MX, dtypes, "byte0", specials)
    assert worst_ratio <= 1.0 and caught >= 3


def test_a_right_nvfp4_product_with_its_global_scale_passes():
    op = Operation(a_scale="group", b_scale="group", group_k=16, scale_dtype="e4m3", weight="e2m1", alpha=True)
    dtypes = {torch.uint8: (torch.bfloat16, torch.float32)}
    cases = _cases("fp4e2m1", ("bf16", "fp32"))
    assert worst(fake(_decoded(op), dtypes, op, bk=32), cases) <= 1.0


def test_scale_after_the_dot_is_bounded_without_rounding_the_weights():
    """Declared scale_after_dot: the weights are never rounded into A's dtype, so the bound leaves that
    rounding out, and a kernel that rounds them fails it."""
    op = Operation(weight="int8", b_scale="col", scale_after_dot=True)
    cases = _cases("fp16", ("fp32",), profiles=("normal", "small_ints"))
    worst_ratio, caught = _worst_and_caught(op, HALF, "rounded", cases)
    assert worst_ratio <= 1.0 and caught >= len(cases) // 3


@pytest.mark.parametrize("packing, order", [("k8", tuple(range(8))), ("n8", AWQ_ORDER)])
def test_int4_words_of_eight_are_drawn_decoded_and_checked_as_declared(packing, order):
    op = Operation(weight="int4", packing=packing, pack_order=order, b_scale="group", group_k=8, zero="packed",
                   scale_dtype="fp16")
    case = GemmCase(3, 13, 21, "fp16", "fp16", profile="normal", seed=4, epilogue=Epilogue(scales="normal"))
    ops = materialize(case, operation=op)
    assert ops.b.view.dtype == torch.int32 and tuple(ops.b.view.shape) == op.b_shape(21, 13)
    assert ops.extras["b_scale"].view.dtype == torch.float16
    assert worst(fake(_decoded(op), HALF, op, bk=32), _cases("fp16", ("fp16", "fp32"))) <= 1.0


def test_float_zero_points_are_added_after_the_scale():
    op = Operation(weight="int4", b_scale="group", group_k=8, zero="float", scale_dtype="fp16")
    cases = _cases("fp16", ("fp32",), profiles=("normal", "small_ints"))
    worst_ratio, caught = _worst_and_caught(op, HALF, "sub", cases)
    assert worst_ratio <= 1.0 and caught >= len(cases) // 2


def test_integer_zero_points_one_each_are_subtracted():
    op = Operation(weight="int4", b_scale="group", group_k=8, zero="int", scale_dtype="bf16")
    ops = materialize(GemmCase(3, 5, 17, "bf16", "bf16", profile="normal", seed=2), operation=op)
    zeros = ops.extras["b_zero"].view
    assert zeros.dtype == torch.int32 and tuple(zeros.shape) == (3, 5) and 0 <= zeros.min() <= zeros.max() <= 15
    cases = _cases("bf16", ("fp32",), profiles=("normal", "small_ints"))
    worst_ratio, caught = _worst_and_caught(op, HALF, "nozero", cases)
    assert worst_ratio <= 1.0 and caught >= len(cases) // 2


def test_a_launch_of_packed_codes_names_what_is_wrong():
    awq = Operation(weight="int4", packing="n8", pack_order=AWQ_ORDER, b_scale="group", group_k=8, zero="packed",
                    scale_dtype="fp16")
    variant = fake(_decoded(awq), HALF, awq, name="awq", bk=32)
    a = torch.zeros(2, 16, dtype=torch.float16)
    c = torch.full((2, 12), float("nan"), dtype=torch.float16)
    good = dict(b_scale=torch.ones(2, 12, dtype=torch.float16), b_zero=torch.zeros(2, 2, dtype=torch.int32))
    with pytest.raises(ValueError, match=re.escape("C has 12 columns (N) but B has 3 words of eight codes along N; "
                                                   "expected ceil(N / 8) = 2")):
        variant.launch(a, torch.zeros(16, 3, dtype=torch.int32), c, **good)
    with pytest.raises(TypeError, match=re.escape("b_scale has dtype float32; variant 'awq' takes float16 scales")):
        variant.launch(a, torch.zeros(16, 2, dtype=torch.int32), c, **{**good, "b_scale": torch.ones(2, 12)})
    with pytest.raises(ValueError, match=re.escape("N is known only to a multiple of 8: pass C")):
        operands.allocate_output(variant, a, torch.zeros(16, 2, dtype=torch.int32))
    mx = fake(_decoded(MX), {torch.float8_e4m3fn: (torch.float32,)}, MX, name="mx", bk=32)
    a8 = torch.zeros(2, 33).to(torch.float8_e4m3fn)
    c32 = torch.full((2, 3), float("nan"))
    with pytest.raises(TypeError, match=re.escape("a_scale has dtype float32; variant 'mx' takes uint8 scales (E8M0 "
                                                  "bytes)")):
        mx.launch(a8, torch.zeros(17, 3, dtype=torch.uint8), c32, a_scale=torch.ones(2, 2),
                  b_scale=torch.ones(2, 3, dtype=torch.uint8))
    assert torch.isnan(c).all() and torch.isnan(c32).all()


@pytest.mark.parametrize("op, dtypes, dtype", [
    (MX, {torch.float8_e4m3fn: (torch.float32,)}, "fp8e4m3"),
    (Operation(weight="int4", packing="n8", pack_order=AWQ_ORDER, b_scale="group", group_k=8, zero="packed",
               scale_dtype="fp16"), HALF, "fp16"),
    (Operation(a_scale="group", b_scale="group", group_k=16, scale_dtype="e4m3", weight="e2m1", alpha=True),
     {torch.uint8: (torch.float32,)}, "fp4e2m1"),
], ids=["mx", "awq", "nvfp4"])
def test_a_right_scaled_kernel_keeps_the_doubled_scales_relation(op, dtypes, dtype, backend):
    right = fake(_decoded(op), dtypes, op, bk=32)
    case = GemmCase(3, 11, 34, dtype, "fp32", profile="normal", seed=3, epilogue=Epilogue(scales="normal"))
    ops, first = first_run(right, case, backend)
    assert family_relations.double_scale(right, launcher(backend), ops, first)


def test_doubled_scales_catch_a_kernel_that_saturates_its_scales(backend):
    """Right on scales up to 8 (seed 8's draw: the first run passes), wrong past them: doubling shows it."""
    dtypes = {torch.float8_e4m3fn: (torch.float32,)}
    clamps = fake(_decoded(MX, "clamp"), dtypes, MX, bk=32)
    case = GemmCase(2, 3, 40, "fp8e4m3", "fp32", profile="small_ints", seed=8, epilogue=Epilogue(scales="pow2"))
    ops, first = first_run(clamps, case, backend)  # the first run passes its reference check
    with pytest.raises((NotBitExact, ValueOutOfBound), match="the relation 'double A's scales'"):
        family_relations.double_scale(clamps, launcher(backend), ops, first)
