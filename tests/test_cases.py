"""GemmCase is a value: JSON round-trips, tensors are derived deterministically, and every operand
sits where its layout says, surrounded by poison (A, B) or sentinels (C)."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gemm_fuzz.properties.model import profiles
from gemm_fuzz.properties.model.cases import (
    COL,
    GUARD,
    GemmCase,
    Layout,
    bits_of,
    input_values,
    materialize,
    unwritten_bits,
)
from gemm_fuzz.reference.formats import by_name

layouts = st.builds(Layout, order=st.sampled_from(["row", "col"]), pad=st.integers(0, 3), step=st.integers(1, 2),
                    offset=st.integers(0, 3), broadcast=st.sampled_from(["", "rows", "cols"]))
cases = st.builds(GemmCase, M=st.integers(0, 9), N=st.integers(0, 9), K=st.integers(0, 9),
                  dtype=st.sampled_from(["fp16", "bf16", "fp32"]), out_dtype=st.just("fp32"), a=layouts, b=layouts,
                  c=layouts.map(lambda lay: Layout(lay.order, lay.pad, lay.step, lay.offset)),
                  profile=st.sampled_from(profiles.PROFILES), specials=st.booleans(), seed=st.integers(0, 2**16))


@given(cases)
def test_json_round_trip(case):
    assert GemmCase.from_json(case.to_json()) == case


def _positions(layout: Layout, rows: int, cols: int) -> np.ndarray:
    """Where element (i, j) of a rows x cols operand sits in its buffer, as Layout's fields describe it
    (written here from that description, not from cases.py): after the guard band and `offset`, the
    elements of the inner dimension `step` apart, the outer dimension `pad` past the inner one's end;
    a broadcast dimension repeats its first row (column)."""
    i = np.zeros(rows, dtype=np.int64) if layout.broadcast == "rows" else np.arange(rows)
    j = np.zeros(cols, dtype=np.int64) if layout.broadcast == "cols" else np.arange(cols)
    if layout.order == "row":
        where = i[:, None] * (cols * layout.step + layout.pad) + j[None, :] * layout.step
    else:
        where = j[None, :] * (rows * layout.step + layout.pad) + i[:, None] * layout.step
    return GUARD + layout.offset + where


def _rounded(values: np.ndarray, fmt) -> np.ndarray:
    return torch.from_numpy(np.array(values)).to(fmt.dtype).double().numpy()


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal values, NaN matching NaN (its payload aside: torch's conversions do not keep one) and -0
    told from +0."""
    nan = np.isnan(got)
    return (np.array_equal(got, want, equal_nan=True)
            and np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan])))


def _check_placed(g, layout: Layout, shape: tuple[int, int], values: np.ndarray | None, fmt) -> None:
    """The view has `shape`, the buffer holds exactly the operand's elements at `_positions` (the
    drawn `values`, or C's pre-fill where `values` is None), and the view reads those positions."""
    assert tuple(g.view.shape) == shape
    where = _positions(layout, *shape)
    assert where.size == 0 or (where.min() >= GUARD and where.max() < g.buffer.numel() - GUARD)
    assert set(np.flatnonzero(g.elements).tolist()) == set(where.ravel().tolist())
    buffer_bits = bits_of(g.buffer)
    if values is None:
        assert np.all(buffer_bits[where] == unwritten_bits(fmt))
    else:
        assert _same(g.buffer.double().numpy()[where], _rounded(values, fmt))
    assert np.array_equal(bits_of(g.view), buffer_bits[where])  # the view reads the same positions
    for dim in (0, 1):  # a stride matters only along a dimension of two or more elements, in a non-empty operand
        if shape[dim] > 1 and min(shape) > 0:
            step = where[1, 0] - where[0, 0] if dim == 0 else where[0, 1] - where[0, 0]
            assert g.view.stride(dim) == step


@given(cases)
def test_materialize_is_deterministic_and_places_every_operand(case):
    one, two = materialize(case), materialize(case)
    va, vb = input_values(case)
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)
    for g1, g2, layout, shape, values, fmt in ((one.a, two.a, case.a, (case.M, case.K), va, fin),
                                               (one.b, two.b, case.b, (case.K, case.N), vb, fin),
                                               (one.c, two.c, case.c, (case.M, case.N), None, fout)):
        assert np.array_equal(bits_of(g1.buffer), bits_of(g2.buffer))
        _check_placed(g1, layout, shape, values, fmt)


# (shape, layout, strides, first element's position after the guard band), worked out by hand
PLACEMENTS = [
    ((3, 4), Layout(), (4, 1), 0),
    ((3, 4), Layout("col"), (1, 3), 0),
    ((3, 4), Layout(pad=2), (6, 1), 0),
    ((3, 4), Layout("col", pad=3), (1, 6), 0),
    ((3, 4), Layout(step=2), (8, 2), 0),
    ((3, 4), Layout("col", step=2), (2, 6), 0),
    ((3, 4), Layout(offset=3), (4, 1), 3),
    ((3, 4), Layout(broadcast="rows"), (0, 1), 0),
    ((3, 4), Layout("col", broadcast="cols"), (1, 0), 0),
    ((3, 4), Layout("col", pad=1, step=2, offset=1), (2, 7), 1),
    ((2, 5), Layout(pad=1, step=2, offset=2, broadcast="cols"), (11, 0), 2),
]


@pytest.mark.parametrize("operand", ["a", "b", "c"])
@pytest.mark.parametrize("shape,layout,strides,first", PLACEMENTS, ids=[p[1].describe() for p in PLACEMENTS])
def test_each_layout_places_its_operand_where_worked_out_by_hand(operand, shape, layout, strides, first):
    if operand == "c" and layout.broadcast:
        pytest.skip("C cannot be broadcast")
    rows, cols = shape
    dims = {"a": dict(M=rows, K=cols, N=2), "b": dict(K=rows, N=cols, M=2), "c": dict(M=rows, N=cols, K=2)}[operand]
    case = GemmCase(**dims, dtype="fp16", out_dtype="fp32", profile="normal", seed=11, **{operand: layout})
    g = getattr(materialize(case), operand)
    assert g.view.stride() == strides and g.view.storage_offset() == GUARD + first
    buffer = g.buffer.double().numpy()
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    where = GUARD + first + i * strides[0] + j * strides[1]
    assert np.flatnonzero(g.elements).tolist() == sorted(set(where.ravel().tolist()))
    if operand == "c":
        assert np.all(bits_of(g.buffer)[where] == unwritten_bits(by_name("fp32")))
    else:
        values = input_values(case)[0 if operand == "a" else 1]
        assert _same(buffer[where], _rounded(values, by_name("fp16")))
        assert np.isnan(np.delete(buffer, where.ravel())).all()  # every other position is poison


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
