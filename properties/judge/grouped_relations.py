"""Metamorphic relations of grouped and MoE kernels (kernels/operation.py: `grouped`), run on a changed
problem whose answer follows from the first run's.

  relabel   ragged: the groups in reverse order, each group's rows and B moved with it, give C's row
            blocks in reverse order; routed: expert e renamed E - 1 - e (its weights and its being
            local moved with it, the metadata aligned again) gives C as it was. A kernel that treats
            the first or last group (expert) differently, or indexes B by a wrong group, fails it.
  pad K     zero columns appended to A and zero rows to every group's B leave C as it was (problems:
            after each problem's own K columns and rows). Not for scaled groups: a scale of the new K
            group multiplies the zeros, and an infinite or NaN scale makes them NaN.
Scales and a bias move with their groups: B's scales and the bias a group each, A's scales with its rows.
Problems (tutorial 08's form) are relabelled as ragged groups are, each with its own N and K.

The second run is laid out as the first (B's groups packed where they overlapped), under the memory
oracles, every row written; it is compared with the first, moved as the relation moves it, within
both runs' bounds (each the first's, the same arithmetic on the same rows), bit-exact where exact.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.properties.judge import compare, oracles
from gemm_fuzz.properties.judge.relations import Launch, Run, paired
from gemm_fuzz.properties.model import grouped
from gemm_fuzz.properties.model.cases import Groups, Operands, unwritten_bits
from gemm_fuzz.reference import bounds
from gemm_fuzz.reference import routing as aligned
from gemm_fuzz.reference.formats import by_name, name_of
from gemm_fuzz.reference.numpy_ref import to_float64

_ROWWISE = ("expected", "bound", "exact", "pos_inf", "neg_inf", "nan", "free", "reference")


def _rows(run: Run, index: np.ndarray) -> Run:
    """The run's results and allowance with C's rows taken at `index`."""
    allow = run.allowance
    fields = {name: None if getattr(allow, name) is None else getattr(allow, name)[index] for name in _ROWWISE}
    return Run(run.c[index], bounds.Allowance(**fields))


def _second(variant: Variant, launch: Launch, ops: Operands, case, a, b, metadata, mine: Run, relation: str,
            given: dict | None = None) -> None:
    """Launch on the changed problem (its scales and bias `given`, moved) and compare with `mine`, the
    first run's answer moved as the relation moves it."""
    case = replace(case, b=replace(case.b, batch_gap=max(case.b.batch_gap, 0)))
    second_ops = grouped.operands(case, ops.c.view.device, ops.operation, a, b, metadata, given)
    launch(variant, second_ops)
    oracles.memory(second_ops)
    oracles.all_written(second_ops.c.view, mine.allowance.reference,
                        unwritten_bits(by_name(name_of(second_ops.c.view.dtype))))
    got = to_float64(second_ops.c.view)
    second = Run(got, mine.allowance)
    compare.values(got, paired(mine.c, [mine, second]), against=f"the relation '{relation}'")


def _extras(ops: Operands) -> dict:
    """The scales and bias as stored (float64), by name."""
    return {name: to_float64(ops.extras[name].view) for name in ("a_scale", "b_scale", "bias") if name in ops.extras}


def _moved_extras(ops: Operands, rows: np.ndarray | None) -> dict | None:
    """The scales and bias as stored, moved with the groups: B's scales and the bias in reverse group
    order, A's scales at `rows` (None: as they are)."""
    op = ops.operation
    found = _extras(ops)
    if not found:
        return None
    if rows is not None and op.a_scale not in (None, "tensor"):
        found["a_scale"] = found["a_scale"][rows]
    return {name: v[::-1] if name != "a_scale" else v for name, v in found.items()}


def relabel(variant: Variant, launch: Launch, ops: Operands, first: Run) -> None:
    case, op = ops.case, ops.operation
    a, b = to_float64(ops.a.view), to_float64(ops.b.view)
    if not case.groups.routed:
        sizes, starts = case.groups.sizes, case.groups.starts()
        rows = np.concatenate([np.arange(starts[g], starts[g + 1]) for g in reversed(range(len(sizes)))]
                              + [np.zeros(0, dtype=int)])
        moved = replace(case, groups=Groups(len(sizes), sizes=sizes[::-1], dims=case.groups.dims[::-1]))
        metadata = None if case.groups.problems else grouped.group_index(sizes[::-1], op.ragged_index)
        _second(variant, launch, ops, moved, a[rows], b[::-1], metadata, _rows(first, rows),
                "the groups in reverse order", _moved_extras(ops, rows))
        return
    r = grouped.routing(case, op.block_m)
    renamed = aligned.align(r.num_experts - 1 - r.topk_ids, r.num_experts, r.block_m, r.topk_weights, r.local[::-1],
                            len(r.sorted_token_ids) if case.groups.shortcut else None)
    _second(variant, launch, ops, case, a, b[::-1], renamed, first, "expert e renamed E - 1 - e",
            _moved_extras(ops, None))


def pad_k(variant: Variant, launch: Launch, ops: Operands, first: Run, extra: int) -> None:
    case, op = ops.case, ops.operation
    if case.a.broadcast == "cols" or case.b.broadcast == "rows":
        return  # zeros cannot be appended along an axis whose elements all alias one another
    a, b = to_float64(ops.a.view), to_float64(ops.b.view)
    if case.groups.problems:
        _pad_problems(variant, launch, ops, first, extra, a, b)
        return
    a2 = np.concatenate([a, np.zeros((a.shape[0], extra))], axis=-1)
    b2 = np.concatenate([b, np.zeros((b.shape[0], extra, b.shape[-1]))], axis=-2)
    padded = replace(case, K=case.K + extra)
    metadata = (grouped.routing(case, op.block_m) if case.groups.routed
                else grouped.group_index(case.groups.sizes, op.ragged_index))
    _second(variant, launch, ops, padded, a2, b2, metadata, first, f"append {extra} zero columns to A and rows to B",
            _extras(ops) or None)


def _pad_problems(variant: Variant, launch: Launch, ops: Operands, first: Run, extra: int, a, b) -> None:
    """Problems: `extra` zero columns after each problem's K columns of A, zero rows after its K rows of
    B; poison elsewhere, as in the first run."""
    case = ops.case
    groups = replace(case.groups, dims=tuple((n, k + extra) for n, k in case.groups.dims))
    padded = replace(case, K=case.K + extra, groups=groups)
    a2, b2 = np.zeros((case.M, padded.K)), np.zeros((groups.count, padded.K, case.N))
    starts = groups.starts()
    for g, (n, k) in enumerate(case.groups.dims):
        rows = slice(starts[g], starts[g + 1])
        a2[rows, :k], b2[g, :k, :n] = a[rows, :k], b[g, :k, :n]  # the zeros after them stay
    a2, b2 = grouped.outside_poisoned(padded, a2, b2)
    _second(variant, launch, ops, padded, a2, b2, None, first,
            f"append {extra} zero columns to each problem's A and rows to its B")
