"""The bounds sanitizer refuses every planted out-of-bounds access before it runs, with a message that
names kernel, operand, program, offset and extent, and stays silent on correct kernels."""

import functools

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from templates import TILED

from gemm_fuzz import kernels
from gemm_fuzz.kernels import mutants
from gemm_fuzz.kernels.mutants import Edit
from gemm_fuzz.properties.interpreter import sanitizer
from gemm_fuzz.properties.model.cases import ROW, GemmCase, Layout, materialize
from gemm_fuzz.properties.run import runner
from gemm_fuzz.reference import numpy_ref

pytestmark = pytest.mark.interpreter

BLOCKS = (16, 32, 16)  # BM, BN, BK of the tiled kernel's launches below
A_MASK = "mask=(m[:, None] < M) & (kk[None, :] < K)"
B_MASK = "mask=(kk[:, None] < K) & (n[None, :] < N)"
BUGS = {  # each planted in the tests' tiled kernel (templates.TILED), as the mutants are planted
    # ignores A's strides
    "contiguous A": (Edit("a + m[:, None] * sam + kk[None, :] * sak", "a + m[:, None] * K + kk[None, :]"),),
    "reduction-only masks": (Edit(A_MASK, "mask=kk[None, :] < K"), Edit(B_MASK, "mask=kk[:, None] < K")),
    "no K mask": (Edit(A_MASK, "mask=m[:, None] < M"), Edit(B_MASK, "mask=n[None, :] < N")),
    "<= on M": (Edit(A_MASK, "mask=(m[:, None] <= M) & (kk[None, :] < K)"),),
    "store masked on M only": (Edit("mask=(m[:, None] < M) & (n[None, :] < N)", "mask=m[:, None] < M"),),
}


def _file(bug: str) -> str:
    return "sanitizer_" + "".join(ch if ch.isalnum() else "_" for ch in bug)


@functools.cache
def _kernel(bug: str):
    """The tiled kernel, right or with `bug` planted (in a file of its own: the sanitizer names it)."""
    return mutants.load(mutants.edited(TILED, BUGS[bug] if bug else (), _file(bug)), _file(bug))._kernel


@triton.jit
def clamped_persistent(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, PROGRAMS: tl.constexpr,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Seed 000's style: out-of-range rows and columns are clamped to 0, so only K needs a load mask."""
    tiles_n = tl.cdiv(N, BN)
    for tile in range(tl.program_id(0), tl.cdiv(M, BM) * tiles_n, PROGRAMS):
        offs_m = (tile // tiles_n) * BM + tl.arange(0, BM)
        offs_n = (tile % tiles_n) * BN + tl.arange(0, BN)
        rows = tl.where(offs_m < M, offs_m, 0)
        cols = tl.where(offs_n < N, offs_n, 0)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            rk = k * BK + tl.arange(0, BK)
            a = tl.load(a_ptr + rows[:, None] * sam + rk[None, :] * sak, mask=rk[None, :] < K, other=0.0)
            b = tl.load(b_ptr + rk[:, None] * sbk + cols[None, :] * sbn, mask=rk[:, None] < K, other=0.0)
            acc = tl.dot(a, b, acc)
        mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def split_k_atomic(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, MASK_N: tl.constexpr):
    """Each program along axis 2 adds its K strip's partial product into an fp32 C."""
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.program_id(2) * BK + tl.arange(0, BK)
    a = tl.load(a_ptr + offs_m[:, None] * sam + rk[None, :] * sak, mask=(offs_m[:, None] < M) & (rk[None, :] < K),
                other=0.0)
    b = tl.load(b_ptr + rk[:, None] * sbk + offs_n[None, :] * sbn, mask=(rk[:, None] < K) & (offs_n[None, :] < N),
                other=0.0)
    mask = offs_m[:, None] < M
    if MASK_N:
        mask = mask & (offs_n[None, :] < N)
    tl.atomic_add(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, tl.dot(a, b), mask=mask)


@triton.jit
def descriptor_copy(x_ptr, y_ptr, M, N, stride, EXTRA_ROWS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """y = x through in-kernel tensor descriptors; x's declared shape has EXTRA_ROWS rows too many."""
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M + EXTRA_ROWS, N], strides=[stride, 1], block_shape=[BM, BN])
    y_desc = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[stride, 1], block_shape=[BM, BN])
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    y_desc.store([m, n], x_desc.load([m, n]))


@triton.jit
def host_descriptor_copy(x_desc, y_desc, BM: tl.constexpr, BN: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    y_desc.store([m, n], x_desc.load([m, n]))


@triton.jit
def load_one(src_ptr, dst_ptr, delta, THROUGH_INT: tl.constexpr, MISALIGN: tl.constexpr):
    """dst[0] = *(src + delta), with the pointer's provenance dropped (int round trip) or misaligned."""
    p = src_ptr + delta
    if THROUGH_INT:
        p = (src_ptr.to(tl.int64) + delta * 2).to(tl.pointer_type(tl.float16))
    if MISALIGN:
        p = (src_ptr.to(tl.pointer_type(tl.int8)) + 1).to(tl.pointer_type(tl.float16))
    tl.store(dst_ptr, tl.load(p))


def _case(M, N, K, a=ROW, b=ROW, c=ROW, out="fp16"):
    return GemmCase(M, N, K, "fp16", out, a=a, b=b, c=c, profile="small_ints", seed=1)


def _planted(ops, bug=""):
    a, b, c = ops.a.view, ops.b.view, ops.c.view
    (M, K), N = a.shape, b.shape[1]
    bm, bn, bk = BLOCKS
    _kernel(bug)[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
        a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), BM=bm, BN=bn, BK=bk)


def _refused(launch, **expected) -> sanitizer.OutOfBoundsAccess:
    with pytest.raises(sanitizer.OutOfBoundsAccess) as info:
        with sanitizer.bounds_checked():
            launch()
    for name, value in expected.items():
        assert getattr(info.value, name) == value, f"{name}: {getattr(info.value, name)!r} != {value!r}\n{info.value}"
    return info.value


def _exact(ops):
    expected = torch.from_numpy(numpy_ref.product(ops.a.view, ops.b.view).value).to(ops.c.view.dtype)
    assert torch.equal(ops.c.view, expected)


def test_reduction_only_masks_are_flagged_on_the_first_ragged_shape_though_the_output_is_right(backend):
    # seed 004: rows 17..31 of A are read. They lie in A's guard band here, so the plain interpreter runs safely
    ops = materialize(_case(17, 32, 4))
    _planted(ops, "reduction-only masks")
    _exact(ops)
    ops = materialize(_case(17, 32, 4))
    error = _refused(lambda: _planted(ops, "reduction-only masks"), op="load", operand="a",
                     program_id=(1, 0, 0), lane=(1, 0), offset=17 * 4, shape=(17, 4), strides=(4, 1), span=67)
    message = str(error)
    for part in ("out-of-bounds load", "kernel '_kernel'", f"{_file('reduction-only masks')}.py:",
                 "program id (1, 0, 0)", "operand a,", "lane [1, 0] of a 16x16 block", "element offset 68",
                 "shape (17, 4), strides (4, 1), element span [0, 67]", "60 of 64 active lanes"):
        assert part in message, f"{part!r} missing from: {message}"


def test_store_masked_on_m_only_is_refused_before_it_writes(backend):
    ops = materialize(_case(5, 20, 8, c=Layout(pad=4)))
    error = _refused(lambda: _planted(ops, "store masked on M only"), op="store", operand="c",
                     program_id=(0, 0, 0), lane=(0, 20), offset=20, coordinates=(0, 20))
    assert "not an element: it falls at [0, 20], outside shape (5, 20) (padding)" in str(error)
    assert ops.c.changed().size == 0, "the refused store wrote into C's buffer"


def test_missing_k_mask_reads_padding(backend):
    ops = materialize(_case(5, 8, 20, a=Layout(pad=3)))
    _refused(lambda: _planted(ops, "no K mask"), op="load", operand="a", program_id=(0, 0, 0),
             lane=(0, 4), offset=20, coordinates=(0, 20))


def test_less_or_equal_for_less_on_a_mask(backend):
    ops = materialize(_case(17, 8, 8))
    _refused(lambda: _planted(ops, "<= on M"), operand="a", program_id=(1, 0, 0), lane=(1, 0), offset=17 * 8)


def test_ignored_stride_on_a_column_major_padded_a(backend):
    ops = materialize(_case(17, 8, 8, a=Layout("col", pad=3)))  # strides (1, 20): 17 rows, 3 of padding
    _refused(lambda: _planted(ops, "contiguous A"), operand="a", program_id=(0, 0, 0), lane=(2, 1),
             offset=17, coordinates=(17, 0), strides=(1, 20))


def test_out_of_bounds_atomic_add(backend):
    ops = materialize(_case(5, 20, 24, c=Layout(pad=4), out="fp32"))
    a, b, c = ops.a.view, ops.b.view, ops.c.view
    c.zero_()
    launch = lambda mask_n: split_k_atomic[(1, 1, 2)](  # noqa: E731
        a, b, c, 5, 20, 24, *a.stride(), *b.stride(), *c.stride(), BM=16, BN=32, BK=16, MASK_N=mask_n)
    _refused(lambda: launch(False), op="atomic add", operand="c_ptr", program_id=(0, 0, 0), offset=20)
    with sanitizer.bounds_checked():
        launch(True)
    _exact(ops)


def _aligned(rows, cols, stride, dtype=torch.float16):
    """A rows x cols view with row stride `stride` inside a larger, NaN-filled allocation."""
    buffer = torch.full((rows + 8, stride), float("nan"), dtype=dtype)
    view = buffer[:rows, :cols]
    view.copy_(torch.arange(rows * cols).reshape(rows, cols).to(dtype))
    return view


def test_descriptor_whose_declared_shape_exceeds_the_tensor(backend):
    x, y = _aligned(20, 32, 40), _aligned(20, 32, 40).zero_()
    launch = lambda extra: descriptor_copy[(2, 2)](x, y, 20, 32, 40, EXTRA_ROWS=extra, BM=16, BN=16)  # noqa: E731
    _refused(lambda: launch(4), op="descriptor load", operand="x_ptr", program_id=(1, 0, 0), lane=(4, 0),
             offset=20 * 40)
    with sanitizer.bounds_checked():
        launch(0)
    assert torch.equal(x, y)


def test_host_descriptor_whose_declared_shape_exceeds_the_tensor(backend):
    from triton.tools.tensor_descriptor import TensorDescriptor

    x, y = _aligned(20, 32, 40), _aligned(20, 32, 40).zero_()
    x_desc = TensorDescriptor(x, [20, 32], [40, 1], [16, 16])
    launch = lambda y_rows: host_descriptor_copy[(2, 2)](  # noqa: E731
        x_desc, TensorDescriptor(y, [y_rows, 32], [40, 1], [16, 16]), BM=16, BN=16)
    _refused(lambda: launch(21), op="descriptor store", operand="y_desc", program_id=(1, 0, 0), offset=20 * 40)
    with sanitizer.bounds_checked():
        launch(20)
    assert torch.equal(x, y)


def test_another_arguments_element_is_out_of_bounds_unless_provenance_was_lost(backend):
    src, dst = torch.arange(4, dtype=torch.float16), torch.full((1,), 7.0, dtype=torch.float16)
    into_dst = (dst.data_ptr() - src.data_ptr()) // 2
    error = _refused(lambda: load_one[(1,)](src, dst, into_dst, THROUGH_INT=False, MISALIGN=False),
                     operand="src_ptr", offset=into_dst)
    assert "which is an element of dst_ptr" in str(error)
    _refused(lambda: load_one[(1,)](src, dst, 4, THROUGH_INT=False, MISALIGN=False), operand="src_ptr", offset=4)
    # through an integer the pointer may address any argument's element, and nothing else
    with sanitizer.bounds_checked():
        load_one[(1,)](src, dst, 3, THROUGH_INT=True, MISALIGN=False)
        assert dst.item() == 3
        load_one[(1,)](src, dst, into_dst, THROUGH_INT=True, MISALIGN=False)
    error = _refused(lambda: load_one[(1,)](src, dst, 4, THROUGH_INT=True, MISALIGN=False),
                     operand="a pointer of unknown provenance")
    assert "(the nearest tensor argument)" in str(error)


def test_misaligned_lane_is_out_of_bounds(backend):
    src, dst = torch.arange(4, dtype=torch.float16), torch.zeros(1, dtype=torch.float16)
    error = _refused(lambda: load_one[(1,)](src, dst, 0, THROUGH_INT=False, MISALIGN=True), operand="src_ptr",
                     byte_offset=1)
    assert "byte offset 1 is not a multiple of the itemsize 2" in str(error)


TILED_LAYOUTS = [Layout(), Layout("col"), Layout(pad=3), Layout("col", pad=5), Layout(step=2), Layout(offset=1),
                 Layout(broadcast="rows")]


@pytest.mark.parametrize("seed", range(12))
def test_tiled_is_silent_on_random_shapes_and_layouts(seed, backend):
    rng = np.random.default_rng(seed)
    M, N, K = (int(n) for n in rng.integers(1, 40, size=3))
    pick = lambda: TILED_LAYOUTS[rng.integers(len(TILED_LAYOUTS))]  # noqa: E731
    c = [Layout(), Layout("col"), Layout(pad=2)][rng.integers(3)]
    with sanitizer.bounds_checked() as checked:
        runner.check(kernels.get("tiled"), _case(M, N, K, a=pick(), b=pick(), c=c))
    assert checked.violations == []


@pytest.mark.parametrize("layouts", [(ROW, ROW), (Layout("col", pad=3), Layout(pad=2))], ids=["row", "padded"])
def test_clamped_offsets_with_k_only_masks_are_silent(layouts, backend):
    ops = materialize(_case(17, 37, 20, a=layouts[0], b=layouts[1]))
    a, b, c = ops.a.view, ops.b.view, ops.c.view
    with sanitizer.bounds_checked():
        clamped_persistent[(3,)](a, b, c, 17, 37, 20, *a.stride(), *b.stride(), *c.stride(), PROGRAMS=3,
                                 BM=16, BN=32, BK=16)
    _exact(ops)


def test_a_launcher_that_rewraps_the_error_still_surfaces_the_violation(backend):
    ops = materialize(_case(17, 8, 8))

    def launcher():
        try:
            _planted(ops, "<= on M")
        except Exception as e:
            raise RuntimeError("launch failed") from e

    _refused(launcher, operand="a")


def test_patches_nest_and_are_restored(backend):
    from triton.runtime import interpreter

    original = interpreter.InterpreterBuilder.__dict__["create_masked_load"]
    ops = materialize(_case(17, 8, 8))
    with sanitizer.bounds_checked() as outer:
        with sanitizer.bounds_checked() as inner:
            with pytest.raises(sanitizer.OutOfBoundsAccess):
                _planted(ops, "<= on M")
        assert sanitizer.installed()
        assert len(inner.violations) == len(outer.violations) == 1
    assert not sanitizer.installed()
    assert interpreter.InterpreterBuilder.__dict__["create_masked_load"] is original
    _planted(materialize(_case(3, 3, 3)), "")  # the plain interpreter still works


def test_refuses_to_run_without_the_interpreter(backend, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(sanitizer.SanitizerUnavailable, match="needs Triton's CPU interpreter"):
        with sanitizer.bounds_checked():
            pass
    assert not sanitizer.installed()


def test_a_triton_release_without_a_hooked_function_fails_loudly(backend, monkeypatch):
    """Checking nothing silently is the failure to avoid: a renamed hook is named, with the version."""
    import triton
    from triton.runtime import interpreter

    assert sanitizer.hooks() >= 25
    monkeypatch.delattr(interpreter.InterpreterBuilder, "create_addptr")
    with pytest.raises(sanitizer.SanitizerUnavailable,
                       match=f"Triton {triton.__version__}'s interpreter has no InterpreterBuilder.create_addptr"):
        sanitizer.hooks()


def test_the_self_test_catches_a_planted_out_of_bounds_load(backend):
    assert "a planted out-of-bounds load was caught" in sanitizer.self_test()
    assert f"gemm sanitizer: {sanitizer.self_test()}" in backend.header(verbose=True)  # and the pytest header says so
