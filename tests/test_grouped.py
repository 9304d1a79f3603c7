"""Grouped and MoE GEMMs (kernels/operation.py's `grouped`): what the contract takes and refuses, the cases and
metadata the suite builds, the per-group reference, the relations and the loop-of-2-D agreement peer each failing
on a wrong kernel, the duplicate-lane store detector, and a control: a kernel that only visits its tiles in
another order must pass."""

import dataclasses
import importlib

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from doubles import judged_grouped, launcher, unjudged_run
from templates import TILED

from gemm_fuzz import kernels
from gemm_fuzz.kernels import Operation, mutants
from gemm_fuzz.kernels.contracts import Contract
from gemm_fuzz.kernels.mutants import Edit, edited
from gemm_fuzz.properties.checks import grouped_loop
from gemm_fuzz.properties.checks.reference import judged
from gemm_fuzz.properties.evaluation import mutation
from gemm_fuzz.properties.judge import agreement, grouped_relations, relations
from gemm_fuzz.properties.judge.failures import DuplicateStore, NotBitExact, ValueOutOfBound
from gemm_fuzz.properties.model import grouped
from gemm_fuzz.properties.model.cases import GemmCase, Groups, Layout


@pytest.mark.parametrize("fields, message", [
    (dict(grouped="tiles"), "grouped='tiles'"),
    (dict(grouped="routed"), "block_m"),
    (dict(grouped="routed", block_m=0), "block_m"),
    (dict(grouped="ragged", block_m=16), "without grouped='routed'"),
    (dict(grouped="ragged", ragged_index="offsets"), "ragged_index='offsets'"),
    (dict(grouped="ragged", bias="m"), "a bias along M"),
    (dict(grouped="ragged", beta=True, bias="n", beta_scales="bias"), "with a batch, beta"),
    (dict(grouped="routed", block_m=16, routed_weight=True, bias="n"), "routed_weight with alpha or a bias"),
    (dict(grouped="problems", alpha=True), "grouped='problems' with an epilogue"),
    (dict(grouped="ragged", weight="int4", b_scale="group"), "fp8 or int8 codes"),
    (dict(grouped="problems", a_scale="row", b_scale="col"), "ragged or routed groups of fp8 or int8 codes"),
    (dict(grouped="routed", block_m=16, routed_weight=True, activation="silu"), "routed_weight with an activation"),
])
def test_a_wrong_grouped_operation_is_refused_saying_what_is_expected(fields, message):
    with pytest.raises(ValueError, match=message):
        Operation(**fields)


def test_a_routed_block_size_named_by_a_configuration_key_resolves_per_configuration(backend):
    moe = kernels.get("fused_moe")
    default = moe.operation_in(backend.device.type, torch.float16)
    other = moe.configs_for(backend.device.type, torch.float16)[1]
    assert default.block_m == moe.config(backend.device.type, torch.float16)["BM"]
    assert moe.operation_in(backend.device.type, torch.float16, tuple(other.items())).block_m == other["BM"]


def test_the_metadata_is_moe_align_block_size_for_the_kernels_block_and_the_shortcut_is_shorter():
    case = GemmCase(5, 3, 4, "fp16", "fp16", groups=Groups(3, top_k=2, route="skewed", local=(1, 3)), seed=4)
    r = grouped.routing(case, 4)
    assert r.topk_ids.shape == (5, 2) and r.block_m == 4 and r.num_tokens_post_padded % 4 == 0
    assert list(r.local) == [False, True, True]
    assert len(r.sorted_token_ids) == 10 + 3 * 3  # T * top_k + E * (block_m - 1)
    short = grouped.routing(dataclasses.replace(case, groups=dataclasses.replace(case.groups, shortcut=True)), 4)
    assert len(short.sorted_token_ids) == short.num_tokens_post_padded < len(r.sorted_token_ids)


def test_ragged_group_sizes_follow_m_when_a_case_is_resized():
    from gemm_fuzz.properties.model import strategies

    ragged = kernels.get("ragged")
    case = GemmCase(9, 2, 2, "fp16", "fp16", groups=Groups(3, sizes=(4, 0, 5)))
    assert strategies.resized(case, ragged, M=6).groups.sizes == (4, 0, 2)
    assert strategies.resized(case, ragged, M=3).groups.sizes == (3, 0, 0)
    assert strategies.resized(case, ragged, M=12).groups.sizes == (4, 0, 8)
    with pytest.raises(ValueError, match="cover 8 rows, not M = 9"):
        GemmCase(9, 2, 2, "fp16", "fp16", groups=Groups(2, sizes=(4, 4)))


@pytest.mark.parametrize("name, case", [
    ("ragged", GemmCase(21, 17, 19, "fp16", "fp16", b=Layout("col", batch_gap=3), groups=Groups(4, sizes=(3, 0, 17, 1)),
                        profile="uniform", seed=3)),
    ("fused_moe", GemmCase(7, 17, 19, "fp16", "fp32", groups=Groups(4, top_k=2, local=(0, 3)), profile="uniform",
                           seed=1)),
])
def test_a_right_grouped_kernel_passes_its_reference_relations_and_the_loop_of_2d_problems(backend, name, case):
    judged_grouped(kernels.get(name), case, backend)


def _last_expert_reads_the_first():
    """fused_moe with expert 2's weights taken from expert 0 (an off-by-one in a bound check)."""
    line = "    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)\n"
    edit = Edit(line, line + "    expert = tl.where(expert == 2, 0, expert)\n")
    (variant,) = [v for v in mutants.plant(importlib.import_module("gemm_fuzz.kernels.fused_moe"), (edit,),
                                           "moe_last_expert_reads_first") if v.name == "fused_moe"]
    return dataclasses.replace(variant, name="moe_last_expert_reads_first")


def test_relabelling_the_experts_and_the_loop_of_2d_problems_each_catch_a_kernel_that_mistreats_one_expert(backend):
    wrong = _last_expert_reads_the_first()
    case = GemmCase(3, 3, 4, "fp16", "fp16", groups=Groups(3, top_k=3, route="all"), profile="small_ints", seed=2)
    ops, first = unjudged_run(wrong, case, backend)
    with pytest.raises(ValueOutOfBound, match="expert e renamed E - 1 - e"):
        grouped_relations.relabel(wrong, launcher(backend), ops, first)
    with pytest.raises(ValueOutOfBound, match="no majority|differ from the majority"):
        agreement.judge({"wrong": first, grouped_loop.NAME: grouped_loop.run(ops, backend)}, "wrong")


def test_visiting_the_tiles_in_another_order_is_not_a_bug(backend):
    """The control: fused_moe with its programs mapped to tiles in reverse order (each tile still once)
    passes the search that catches every grouped mutant."""
    control = mutants.Mutant(
        name="moe_tiles_in_reverse_order", parent="fused_moe",
        edits=(Edit("    pid = tl.program_id(0)\n", "    pid = tl.num_programs(0) - 1 - tl.program_id(0)\n"),),
        bug="none: the tiles visited in reverse order", dtype="fp16", smallest=dict(M=1, N=1, K=1), why="-",
        caught_as="-")
    found = mutation.hunt(control, backend)
    assert not found.caught, found.message
    assert found.examples >= mutation.ci_settings().max_examples, found.examples


# the tests' tiled kernel with tutorial 03's `% M` on the rows, kept for the store, masked by columns only: rows
# past M store again into rows the tile already holds, with the same values
ROWS_WRAPPED = edited(TILED, (Edit("m = tl.program_id(0) * BM + tl.arange(0, BM)",
                                   "m = (tl.program_id(0) * BM + tl.arange(0, BM)) % M"),
                              Edit("mask=(m[:, None] < M) & (kk[None, :] < K)", "mask=kk[None, :] < K"),
                              Edit("mask=(m[:, None] < M) & (n[None, :] < N)", "mask=n[None, :] < N")), "rows_wrapped")


def _variant(duplicate_stores: bool):
    contract = Contract(blocks=(16, 16, 16), duplicate_stores=duplicate_stores)
    rows_wrapped = mutants.load(ROWS_WRAPPED, "rows_wrapped").matmul
    return contract.variant(f"rows_wrapped_{duplicate_stores}",
                            lambda a, b, c, config=None, **extras: rows_wrapped(a, b, c), (), "test", "")


@pytest.mark.interpreter
def test_two_lanes_storing_one_element_are_reported_unless_the_contract_allows_them(backend):
    case = GemmCase(3, 5, 4, "fp16", "fp16", profile="small_ints")
    with pytest.raises(DuplicateStore, match=r"duplicate-lane store in kernel '_kernel' at rows_wrapped.py:\d+, "
                                             r"program id \(0, 0, 0\): lanes \[0, 0\] and \[3, 0\]"):
        judged(_variant(False), case, backend)
    observed, _, verdict = judged(_variant(True), case, backend)  # declared: the values are right
    assert verdict.exact


@pytest.mark.interpreter
def test_atomics_to_one_element_from_several_lanes_are_not_duplicate_stores(backend):
    split_k = kernels.get("split_k")
    observed, _, verdict = judged(split_k, GemmCase(17, 9, 40, "fp32", "fp32"), backend)
    assert verdict is not None


def test_grouped_values_are_each_groups_own_problem():
    case = GemmCase(4, 3, 2, "fp16", "fp16", groups=Groups(2, sizes=(1, 3)), profile="uniform", seed=5)
    a, b = grouped.values(case, kernels.get("ragged").operation)
    assert a.shape == (4, 2) and b.shape == (2, 2, 3) and not np.array_equal(b[0], b[1])


def _moe_operands(device, t=3, k=5, n=6, experts=2, top_k=2):
    a = torch.ones((t, k), dtype=torch.float16, device=device)
    b = torch.ones((experts, k, n), dtype=torch.float16, device=device)
    c = torch.full((t * top_k, n), float("nan"), dtype=torch.float16, device=device)
    moe = kernels.get("fused_moe")
    r = grouped.routing(GemmCase(t, n, k, "fp16", "fp16", groups=Groups(experts, top_k=top_k)),
                        moe.operation_in(device.type, torch.float16).block_m)
    extras = dict(sorted_token_ids=torch.tensor(r.sorted_token_ids, dtype=torch.int32, device=device),
                  expert_ids=torch.tensor(r.expert_ids, dtype=torch.int32, device=device),
                  num_tokens_post_padded=torch.tensor([r.num_tokens_post_padded], dtype=torch.int32, device=device),
                  topk_weights=torch.ones((t, top_k), dtype=torch.float32, device=device), top_k=top_k)
    return a, b, c, extras


@pytest.mark.parametrize("change, error, message", [
    (lambda a, b, c, x: (a[None], b, c, x), ValueError, r"A must be 2-D \(T x K\)"),
    (lambda a, b, c, x: (a, b[0], c, x), ValueError, r"B must be 3-D \(G x K x N\)"),
    (lambda a, b, c, x: (a, b[:, :4], c, x), ValueError, r"B has 4 rows a group but A has 5 columns"),
    (lambda a, b, c, x: (a, b, c[:5], x), ValueError, r"C has shape \(5, 6\); expected \(6, 6\) \(T \* top_k"),
    (lambda a, b, c, x: (a, b, c, {**x, "expert_ids": x["expert_ids"].long()}), TypeError,
     "expert_ids has dtype int64; expected int32"),
    (lambda a, b, c, x: (a, b, c, {**x, "top_k": 2.0}), TypeError, "top_k must be a positive int"),
    (lambda a, b, c, x: (a, b, c, {k: v for k, v in x.items() if k != "expert_ids"}), TypeError,
     "missing extra.s. expert_ids"),
    (lambda a, b, c, x: (a, b, c, {**x, "topk_weights": x["topk_weights"].half()}), ValueError,
     r"topk_weights is float16 \(3, 2\); expected float32 \(3, 2\)"),
    (lambda a, b, c, x: (a, b, a, x), ValueError, r"C has shape \(3, 5\)"),
])
def test_a_moe_launcher_refuses_bad_operands_writing_nothing(backend, change, error, message):
    a, b, c, extras = change(*_moe_operands(backend.device))
    before = c.clone()
    with pytest.raises(error, match=message):
        kernels.get("fused_moe").launch(a, b, c, **extras)
    assert torch.equal(torch.isnan(before), torch.isnan(c))


def test_a_ragged_launcher_refuses_a_group_index_of_the_wrong_length(backend):
    a = torch.ones((4, 5), dtype=torch.float16, device=backend.device)
    b = torch.ones((2, 5, 6), dtype=torch.float16, device=backend.device)
    c = torch.full((4, 6), float("nan"), dtype=torch.float16, device=backend.device)
    with pytest.raises(ValueError, match="group_index has 3 entries; expected 2"):
        kernels.get("ragged").launch(a, b, c, group_index=torch.tensor([1, 1, 2], dtype=torch.int32))
    assert torch.isnan(c).all()


def test_a_scaled_grouped_launcher_takes_b_scales_a_group_each(backend):
    from pathlib import Path

    from gemm_fuzz.properties.launch import user_kernel

    variant = user_kernel.load(f"{Path(__file__).with_name('scaled_moe_kernels.py')}:fbgemm_grouped_fp8_rowwise")
    fp8, device = torch.float8_e4m3fn, backend.device
    a, b = torch.ones(3, 4, device=device).to(fp8), torch.ones(2, 4, 5, device=device).to(fp8)
    c = torch.full((3, 5), float("nan"), dtype=torch.bfloat16, device=device)
    extras = dict(group_index=torch.tensor([1, 2], dtype=torch.int32, device=device),
                  a_scale=torch.ones(3, device=device), b_scale=torch.ones(5, device=device))
    with pytest.raises(ValueError, match=r"b_scale must be 2-D \(G x N\)"):
        variant.launch(a, b, c, **extras)
    with pytest.raises(ValueError, match=r"a_scale has shape \(2,\); expected \(3,\)"):
        variant.launch(a, b, c, **{**extras, "a_scale": torch.ones(2, device=device),
                                   "b_scale": torch.ones(2, 5, device=device)})
    assert c.isnan().all()


@triton.jit
def _ragged_alpha_bias(a_ptr, b_ptr, c_ptr, ends_ptr, bias_ptr, alpha, N, K, stride_am, stride_ak, stride_bg,
                       stride_bk, stride_bn, stride_cm, stride_cn, stride_biasg, stride_biasn,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, FIRST_BIAS: tl.constexpr):
    g, tile = tl.program_id(0), tl.program_id(1)
    start = tl.load(ends_ptr + g - 1, mask=g > 0, other=0)
    rows = tl.load(ends_ptr + g) - start
    offs_m = (tile // tl.cdiv(N, BN)) * BM + tl.arange(0, BM)
    offs_n = (tile % tl.cdiv(N, BN)) * BN + tl.arange(0, BN)
    if (tile // tl.cdiv(N, BN)) * BM < rows:
        offs_k = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = tl.load(a_ptr + (start + offs_m)[:, None] * stride_am + (k * BK + offs_k)[None, :] * stride_ak,
                        mask=(offs_m[:, None] < rows) & ((k * BK + offs_k)[None, :] < K), other=0.0)
            b = tl.load(b_ptr + g * stride_bg + (k * BK + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                        mask=((k * BK + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc, input_precision="ieee")
        which = 0 if FIRST_BIAS else g
        bias = tl.load(bias_ptr + which * stride_biasg + offs_n * stride_biasn, mask=offs_n < N, other=0.0)
        acc = alpha * acc + bias[None, :].to(tl.float32)
        tl.store(c_ptr + (start + offs_m)[:, None] * stride_cm + offs_n[None, :] * stride_cn,
                 acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < rows) & (offs_n[None, :] < N))


def _alpha_bias_variant(first_bias: bool):
    """A ragged grouped kernel computing alpha * A[rows of g] @ B[g] + bias[g] (bias[0] for every group, wrong)."""
    op = Operation(grouped="ragged", ragged_index="ends", alpha=True, bias="n")

    def launch_it(a, b, c, config=None, *, group_index, bias, alpha):
        M, K = a.shape
        G, _, N = b.shape
        grid = (G, triton.cdiv(max(M, 1), 16) * triton.cdiv(N, 16))
        _ragged_alpha_bias[grid](a, b, c, group_index, bias, alpha, N, K, a.stride(0), a.stride(1), b.stride(0),
                                 b.stride(1), b.stride(2), c.stride(0), c.stride(1), bias.stride(0), bias.stride(1),
                                 BM=16, BN=16, BK=16, FIRST_BIAS=first_bias)

    return kernels.Variant(name=f"ragged_alpha_bias{'_first' if first_bias else ''}", launch=launch_it,
                           dtypes={torch.float16: (torch.float16,)}, precision="ieee",
                           configs={"cpu": (dict(BM=16, BN=16, BK=16),), "cuda": (dict(BM=16, BN=16, BK=16),)},
                           origin="test", operation=op)


def test_alpha_and_a_bias_a_group_are_judged_group_by_group_and_move_with_their_groups(backend):
    from gemm_fuzz.properties.model.cases import Epilogue, Vector

    case = GemmCase(9, 17, 5, "fp16", "fp16", groups=Groups(3, sizes=(4, 0, 5)), profile="small_ints", seed=1,
                    epilogue=Epilogue(alpha=2.0, bias=Vector(2, 1)))
    right = _alpha_bias_variant(False)
    observed, ops, verdict = judged(right, case, backend)
    assert tuple(ops.extras["bias"].view.shape) == (3, 17) and ops.scalars["alpha"] == 2.0
    grouped_relations.relabel(right, launcher(backend), ops, relations.observed(verdict))
    grouped_relations.pad_k(right, launcher(backend), ops, relations.observed(verdict), extra=3)
    with pytest.raises((ValueOutOfBound, NotBitExact)):
        judged(_alpha_bias_variant(True), case, backend)
