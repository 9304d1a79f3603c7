"""Each metamorphic relation holds for a correct kernel and breaks on a kernel wrong in its way, even
where a single run passes every other oracle."""

import itertools

import pytest
from doubles import fake, first_run, launcher

from gemm_fuzz.kernels.dtypes import ALL_DTYPES
from gemm_fuzz.kernels.registry import Requirements
from gemm_fuzz.properties.judge import oracles, relations
from gemm_fuzz.properties.judge.failures import NotBitExact, ValueOutOfBound
from gemm_fuzz.properties.launch import launching
from gemm_fuzz.properties.model.cases import COL, GemmCase, Layout, materialize


def _product(compute):
    """What a test double computes in torch: `compute(a, b) -> float64 C`, from A and B in float64."""
    return lambda a, b, c, extras: compute(a.double(), b.double())


RIGHT = fake(_product(lambda a, b: a @ b), ALL_DTYPES, name="right")
# needs 16-byte aligned leading strides (as TMA does): the relations re-pad what they launch
ALIGNED = fake(_product(lambda a, b: a @ b), ALL_DTYPES, name="right_aligned",
               requirements=Requirements(stride_alignment=16))


def test_a_right_kernel_keeps_every_relation(backend):
    for case in (GemmCase(5, 7, 9, "fp16", "fp16", profile="small_ints", seed=1),
                 GemmCase(5, 7, 9, "fp32", "fp32", a=COL, profile="normal", seed=2)):
        ops, first = first_run(RIGHT, case, backend)
        relations.transpose(RIGHT, launcher(backend), ops, first)
        assert relations.scale(RIGHT, launcher(backend), ops, first, k=-1)
        relations.zero_padding(RIGHT, launcher(backend), ops, first, extra=3)
        relations.split_k(RIGHT, launcher(backend), ops, first, k1=4)


def test_transpose_catches_a_kernel_wrong_only_for_column_major_a(backend):
    # right for a row-major A; the transposed problem's A (= B^T) is column-major
    wrong = fake(_product(lambda a, b: a @ b + (0 if a.stride(1) == 1 or a.shape[1] == 1 else 1)), ALL_DTYPES,
                 name="col_major_bug")
    ops, first = first_run(wrong, GemmCase(3, 4, 5, "fp16", "fp16", seed=0), backend)
    with pytest.raises(NotBitExact, match=r"C\[0, 0\] = 6 where the relation 'transpose' is exactly 5"):
        relations.transpose(wrong, launcher(backend), ops, first)


def test_scale_catches_a_kernel_that_is_not_deterministic(backend):
    # within the bound on every run, but a different last bit each time: not bit-reproducible
    calls = itertools.count()
    noisy = fake(_product(lambda a, b: (a @ b) * (1 + 2**-30 * (next(calls) % 2))), ALL_DTYPES, name="noisy")
    ops, first = first_run(noisy, GemmCase(4, 4, 8, "fp32", "fp32", profile="normal", seed=3), backend)
    with pytest.raises(NotBitExact, match=r"where the relation 'scale A by 2\*\*1' is exactly"):
        relations.scale(noisy, launcher(backend), ops, first, k=1)


def test_zero_padding_and_split_k_catch_a_kernel_wrong_for_some_k(backend):
    # right unless K % 4 == 1 (a remainder path with a bug)
    wrong = fake(_product(lambda a, b: a @ b + (1 if a.shape[1] % 4 == 1 else 0)), ALL_DTYPES,
                 name="k_remainder_bug")
    ops, first = first_run(wrong, GemmCase(2, 3, 8, "fp16", "fp16", seed=0), backend)
    with pytest.raises((NotBitExact, ValueOutOfBound), match="the relation 'append 1 zero columns to A and rows to B'"):
        relations.zero_padding(wrong, launcher(backend), ops, first, extra=1)
    with pytest.raises((NotBitExact, ValueOutOfBound), match="the relation 'split K at 1'"):
        relations.split_k(wrong, launcher(backend), ops, first, k1=1)


def test_scale_does_not_apply_where_it_would_overflow(backend):
    case = GemmCase(2, 2, 4, "fp16", "fp16", profile="near_overflow", seed=0)
    ops, first = first_run(RIGHT, case, backend)
    assert not relations.scale(RIGHT, launcher(backend), ops, first, k=3)
    integers = first_run(RIGHT, GemmCase(2, 2, 4, "int8", "int32"), backend)
    assert not relations.scale(RIGHT, launcher(backend), *integers, k=1)


def test_scale_does_not_apply_where_products_or_b_leave_the_normal_range(backend):
    """Scaling A by 2**-1 with subnormal-range B (or products near the accumulator's smallest normal)
    would make a correct kernel round differently by one ulp: the relation must decline."""
    ops, first = first_run(RIGHT, GemmCase(2, 2, 4, "fp16", "fp16", profile="subnormal", seed=0), backend)
    assert not relations.scale(RIGHT, launcher(backend), ops, first, k=-1)
    ops = materialize(GemmCase(2, 2, 4, "fp16", "fp16"), backend.device)  # A all ones: only B is near the edge
    ops.b.view.fill_(1.5 * 2.0**-12)  # 6x fp16's smallest normal; halved, 3x: within the 4x margin
    ops.b.snapshot()  # the new values are the inputs
    launching.launch(RIGHT, ops, backend)
    first = relations.observed(oracles.against_reference(ops, RIGHT.precision))
    assert not relations.scale(RIGHT, launcher(backend), ops, first, k=-1)
    assert relations.scale(RIGHT, launcher(backend), ops, first, k=1)  # doubling keeps everything normal


def test_flipped_layouts_describe_the_transpose():
    for layout in (COL, relations.Layout("row", pad=2, broadcast="rows")):
        flip = relations.flipped(layout)
        assert flip.strides(4, 3) == tuple(reversed(layout.strides(3, 4)))


@pytest.mark.parametrize("variant,case", [
    (RIGHT, GemmCase(5, 7, 33, "fp16", "fp16", a=COL, profile="normal", seed=3)),
    (RIGHT, GemmCase(3, 4, 20, "fp32", "fp32", b=COL, profile="small_ints", seed=4)),
    # leading dimensions padded to 16 bytes; the relations' other K, and the transpose, need other pads
    (ALIGNED, GemmCase(5, 7, 33, "fp16", "fp16", a=Layout(pad=7), b=Layout("col", pad=7), c=Layout(pad=1),
                       profile="normal", seed=3)),
    (ALIGNED, GemmCase(3, 4, 21, "fp32", "fp32", a=Layout(pad=3), b=Layout("col", pad=3), profile="small_ints",
                       seed=4))], ids=["fp16-right", "fp32-right", "fp16-aligned", "fp32-aligned"])
def test_the_problems_compiled_ahead_are_the_ones_the_relations_launch(variant, case, backend):
    """On a GPU the relations' problems are compiled ahead from `relations.problems`: each must be laid
    out as the relation lays out what it launches (the same shapes, strides and storage offsets), or
    the compilations ahead miss. Also for a variant that needs aligned leading strides, for which both
    re-pad the layouts for the new shapes."""
    launched = []

    def record(variant, ops):
        launched.append(tuple((tuple(t.shape), t.stride(), t.storage_offset(), t.dtype)
                              for t in (ops.a.view, ops.b.view, ops.c.view)))
        launching.launch(variant, ops, backend)

    ops, first = first_run(variant, case, backend)
    params = {"transpose": True, "pad": 16, "split": 16}
    relations.transpose(variant, record, ops, first)
    relations.zero_padding(variant, record, ops, first, extra=params["pad"])
    relations.split_k(variant, record, ops, first, k1=params["split"])
    ahead = []
    problems = relations.problems(variant, case, params)
    for problem in problems:
        placed = materialize(problem, backend.device)
        ahead.append(tuple((tuple(t.shape), t.stride(), t.storage_offset(), t.dtype)
                           for t in (placed.a.view, placed.b.view, placed.c.view)))
    assert len(launched) == 4 and ahead == launched
    if variant.requirements.stride_alignment:  # the re-padding is compared: some problem's pads differ from the case's
        assert any((p.a.pad, p.b.pad, p.c.pad) != (case.a.pad, case.b.pad, case.c.pad) for p in problems)
