"""GemmCase is a value: JSON round-trips, tensors are derived deterministically, and every operand
sits where its layout says, surrounded by poison (A, B) or sentinels (C)."""

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from properties.model import profiles
from properties.model.cases import COL, GUARD, GemmCase, Layout, bits_of, materialize, unwritten_bits
from reference.formats import by_name

layouts = st.builds(Layout, order=st.sampled_from(["row", "col"]), pad=st.integers(0, 3), step=st.integers(1, 2),
                    offset=st.integers(0, 3), broadcast=st.sampled_from(["", "rows", "cols"]))
cases = st.builds(GemmCase, M=st.integers(0, 9), N=st.integers(0, 9), K=st.integers(0, 9),
                  dtype=st.sampled_from(["fp16", "bf16", "fp32"]), out_dtype=st.just("fp32"), a=layouts, b=layouts,
                  c=layouts.map(lambda lay: Layout(lay.order, lay.pad, lay.step, lay.offset)),
                  profile=st.sampled_from(profiles.PROFILES), specials=st.booleans(), seed=st.integers(0, 2**16))


@given(cases)
def test_json_round_trip(case):
    assert GemmCase.from_json(case.to_json()) == case


@given(cases)
def test_materialize_is_deterministic_and_places_every_operand(case):
    one, two = materialize(case), materialize(case)
    for g1, g2, layout, shape in ((one.a, two.a, case.a, (case.M, case.K)), (one.b, two.b, case.b, (case.K, case.N)),
                                  (one.c, two.c, case.c, (case.M, case.N))):
        assert np.array_equal(bits_of(g1.buffer), bits_of(g2.buffer))
        assert tuple(g1.view.shape) == shape
        assert g1.view.stride() == layout.strides(*shape)
        assert g1.view.storage_offset() == GUARD + layout.offset
        assert g1.elements.sum() == len(set((g1.view.storage_offset() + np.add.outer(
            np.arange(shape[0]) * g1.view.stride(0), np.arange(shape[1]) * g1.view.stride(1))).ravel()))


@given(cases)
def test_surroundings_hold_poison_and_sentinels(case):
    ops = materialize(case)
    for g in (ops.a, ops.b):
        assert torch.isnan(g.buffer[torch.from_numpy(~g.elements)]).all()
        assert case.specials or not torch.isnan(g.view).any()
    out = by_name(case.out_dtype)
    c_bits = bits_of(ops.c.buffer)
    assert np.all(c_bits[ops.c.elements] == unwritten_bits(out))
    assert np.all(ops.c.buffer[torch.from_numpy(~ops.c.elements)].double().numpy() == out.max)


def test_broadcast_operands_repeat_one_row_or_column():
    case = GemmCase(3, 4, 5, "fp16", "fp16", a=Layout(broadcast="rows"), b=Layout("col", broadcast="cols"),
                    profile="normal", seed=1)
    ops = materialize(case)
    assert ops.a.view.stride(0) == 0 and ops.b.view.stride(1) == 0
    assert torch.equal(ops.a.view[0], ops.a.view[2]) and torch.equal(ops.b.view[:, 0], ops.b.view[:, 3])


def test_small_ints_keep_every_partial_sum_exact_in_fp32():
    for k in (1, 16, 100, 4096):
        ops = materialize(GemmCase(4, 4, k, "fp16", "fp32", a=COL, profile="small_ints", seed=k))
        magnitude = ops.a.view.abs().double() @ ops.b.view.abs().double()
        assert magnitude.max() <= 2**24
        assert torch.equal(ops.a.view.double(), ops.a.view.double().round())


def test_refuses_invalid_cases():
    import pytest

    with pytest.raises(ValueError, match="unknown dtype name 'fp64x'"):
        GemmCase(1, 1, 1, "fp64x", "fp32")
    with pytest.raises(ValueError, match="M, N and K must be >= 0"):
        GemmCase(-1, 1, 1, "fp16", "fp16")
    with pytest.raises(ValueError, match="C cannot be broadcast"):
        GemmCase(1, 1, 1, "fp16", "fp16", c=Layout(broadcast="rows"))
    with pytest.raises(ValueError, match="value profile 'zeros' does not apply to fp16 inputs; expected one of ones"):
        GemmCase(1, 1, 1, "fp16", "fp16", profile="zeros")
    with pytest.raises(ValueError, match="int8 inputs have no NaN or Inf: specials apply to float inputs only"):
        GemmCase(1, 1, 1, "int8", "int32", specials=True)
    with pytest.raises(ValueError, match="layout order must be 'row' or 'col'"):
        Layout("diagonal")
