"""Problems of their own shapes through device arrays of pointers (kernels/operation.py's grouped="problems",
Triton tutorial 08's form): what the contract and the cases take and refuse, the built-in `pointer_array`
under its reference, relations and the loop-of-2-D peer, a planted bug each of those catches, the sanitizer
following a pointer the kernel loads to the one matrix it addresses, and tutorial-08-style user kernels
(tests/pointer_array_kernels.py): the right one passes the battery, each wrong twin is caught and shrunk."""

import dataclasses
import importlib
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from doubles import judged_grouped, launcher, unjudged_run
from user_runs import assert_caught, assert_passed, battery

from gemm_fuzz import kernels
from gemm_fuzz.kernels import Operation, mutants
from gemm_fuzz.kernels.mutants import Edit
from gemm_fuzz.properties.checks import grouped_loop
from gemm_fuzz.properties.interpreter import sanitizer
from gemm_fuzz.properties.judge import agreement, grouped_relations, oracles
from gemm_fuzz.properties.judge.failures import NotBitExact, OutOfBoundsAccess, ValueOutOfBound, WriteOutsideC
from gemm_fuzz.properties.model import grouped, strategies
from gemm_fuzz.properties.model.cases import GemmCase, Groups, Layout

KERNELS = Path(__file__).with_name("pointer_array_kernels.py")
# three problems: padded leading dimensions, an empty one, K and N of their own
CASE = GemmCase(22, 33, 20, "fp16", "fp16", a=Layout(pad=3), b=Layout(pad=2, batch_gap=5), c=Layout(pad=1),
                groups=Groups(3, sizes=(5, 0, 17), dims=((7, 9), (3, 4), (33, 20))), profile="uniform", seed=3)


def test_problems_take_no_activation_and_are_row_major_problems_spanning_the_case():
    with pytest.raises(ValueError, match="grouped='problems' with an epilogue"):
        Operation(grouped="problems", activation="relu")
    with pytest.raises(ValueError, match="largest N and K must be the case's, 33 and 21"):
        dataclasses.replace(CASE, K=21)
    with pytest.raises(ValueError, match="row-major with unit column stride"):
        dataclasses.replace(CASE, a=Layout("col"))


def test_problems_follow_m_n_and_k_when_a_case_is_resized():
    variant = kernels.get("pointer_array")
    smaller = strategies.resized(CASE, variant, M=7, N=5, K=9)
    assert (smaller.groups.sizes, smaller.groups.dims) == ((5, 0, 2), ((5, 9), (3, 4), (5, 9)))
    larger = strategies.resized(CASE, variant, K=30)
    assert larger.groups.dims == ((7, 9), (3, 4), (33, 30))


def test_each_problem_is_a_view_of_its_own_shape_and_leading_dimension(backend):
    ops = grouped.materialize(CASE, backend.device, kernels.get("pointer_array").operation)
    a, b, c = grouped.views(ops)
    assert [tuple(t.shape) for t in a] == [(5, 9), (0, 4), (17, 20)]
    assert [tuple(t.shape) for t in b] == [(9, 7), (4, 3), (20, 33)]
    assert {t.stride() for t in a} == {(23, 1)} and {t.stride() for t in c} == {(34, 1)}
    assert torch.isnan(ops.a.view[:5, 9:]).all()  # poison beside problem 0's columns


def test_the_built_in_passes_its_reference_relations_and_the_loop_of_2d_problems(backend):
    judged_grouped(kernels.get("pointer_array"), CASE, backend)


def _last_problem_reads_the_first_b():
    """pointer_array with the last problem's B pointer taken from problem 0's slot."""
    line = "            b_ptr = tl.load(b_ptrs + g).to(tl.pointer_type(IN))\n"
    edit = Edit(line, "            b_ptr = tl.load(b_ptrs + tl.where(g == G - 1, 0, g)).to(tl.pointer_type(IN))\n")
    (variant,) = [v for v in mutants.plant(importlib.import_module("gemm_fuzz.kernels.pointer_array"), (edit,),
                                           "pointer_array_last_reads_first_b") if v.name == "pointer_array"]
    return dataclasses.replace(variant, name="pointer_array_last_reads_first_b")


def test_relabelling_and_the_loop_of_2d_problems_each_catch_a_kernel_that_mistreats_the_last_problem(backend):
    wrong = _last_problem_reads_the_first_b()
    case = GemmCase(2, 1, 1, "fp16", "fp16", groups=Groups(2, sizes=(1, 1), dims=((1, 1), (1, 1))),
                    profile="small_ints", seed=2)
    ops, first = unjudged_run(wrong, case, backend)
    with pytest.raises((NotBitExact, ValueOutOfBound), match="reverse order"):
        grouped_relations.relabel(wrong, launcher(backend), ops, first)
    with pytest.raises((NotBitExact, ValueOutOfBound)):
        agreement.judge({wrong.name: first, grouped_loop.NAME: grouped_loop.run(ops, backend)})


def test_a_store_past_a_problems_columns_is_a_write_outside_c_even_inside_cs_rows(backend):
    ops = grouped.materialize(CASE, backend.device, kernels.get("pointer_array").operation)
    ops.c.view[0, 7] = 1.0  # C's row 0 belongs to problem 0, of 7 columns
    with pytest.raises(WriteOutsideC):
        oracles.memory(ops)


@triton.jit
def _read_through_loaded_pointer(ptrs, out, AT: tl.constexpr):
    p = tl.load(ptrs).to(tl.pointer_type(tl.float32))
    tl.store(out, tl.load(p + AT))


@pytest.mark.interpreter
def test_a_loaded_pointer_addresses_only_its_own_matrix_even_where_another_lies_next_to_it(backend):
    buffer = torch.arange(8, dtype=torch.float32)
    first, second = buffer[:4].view(2, 2), buffer[4:].view(2, 2)
    ptrs, out = torch.tensor([first.data_ptr()], dtype=torch.int64), torch.zeros(1)
    reached = {"A[0]": first, "A[1]": second}
    with sanitizer.bounds_checked(reached=reached):
        _read_through_loaded_pointer[(1,)](ptrs, out, AT=3)
    assert out.item() == 3.0
    with pytest.raises(OutOfBoundsAccess, match=r"operand A\[0\].*1 element past the last element"):
        with sanitizer.bounds_checked(reached=reached):
            _read_through_loaded_pointer[(1,)](ptrs, out, AT=4)  # A[1]'s first element


@pytest.mark.parametrize("change, error, message", [
    (lambda a, b, c: (a[0], b, c), TypeError, "a must be a non-empty list of matrices"),
    (lambda a, b, c: (a, b[:1], c), ValueError, "one matrix a problem each; got 2, 1 and 2"),
    (lambda a, b, c: (a, [b[0][:3], b[1]], c), ValueError, r"B\[0\] has 3 rows but A\[0\] has 4 columns"),
    (lambda a, b, c: ([a[0].t(), a[1]], b, c), ValueError, "unit column stride"),
    (lambda a, b, c: (a, b, [c[0], c[0][:, :2]]), ValueError, r"C\[1\] has shape \(3, 2\); expected \(2, 2\)"),
])
def test_a_problems_launcher_refuses_bad_lists_writing_nothing(backend, change, error, message):
    a = [torch.ones(3, 4, dtype=torch.float16), torch.ones(2, 5, dtype=torch.float16)]
    b = [torch.ones(4, 6, dtype=torch.float16), torch.ones(5, 2, dtype=torch.float16)]
    c = [torch.full((3, 6), float("nan"), dtype=torch.float16), torch.full((2, 2), float("nan"), dtype=torch.float16)]
    with pytest.raises(error, match=message):
        kernels.get("pointer_array").launch(*change(a, b, c))
    assert all(t.isnan().all() for t in c)


def test_the_right_tutorial_08_kernel_passes_the_battery(pytester):
    assert_passed(battery(pytester, f"{KERNELS}:tutorial_08_group_gemm"))


# the wrong twin -> the kind of failure its shrunk case raises, and that case
CAUGHT = {
    "tutorial_08_group_gemm_lda_is_k": (r"out-of-bounds load of A\[1\]",
                                        "2x1x2 fp16->fp16 A:row B:row C:row ones seed=0 problems=0x1x2,2x1x1"),
    "tutorial_08_group_gemm_first_problem_k": (r"out-of-bounds load of A\[1\]",
                                               "1x1x2 fp16->fp16 A:row B:row C:row ones seed=0 problems=0x1x2,1x1x1"),
    "tutorial_08_group_gemm_unmasked_n_store": (r"out-of-bounds store of C\[0\]",
                                                "1x1x1 fp16->fp16 A:row B:row C:row ones seed=0 problems=1x1x1"),
}


@pytest.mark.parametrize("func", CAUGHT)
def test_a_wrong_tutorial_08_twin_is_caught_and_shrunk(pytester, func):
    kind, case = CAUGHT[func]
    assert_caught(battery(pytester, f"{KERNELS}:{func}", "-k", "reference and fp16"), kind, case, regex=True)
