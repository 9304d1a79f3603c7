"""A grouped case's tensors (kernels/operation.py: `grouped`): A, B as one matrix a group (G x K x N),
C, and the metadata the kernel's real caller builds.

  ragged  A's M rows in the case's groups; `group_index` as the operation says (sizes, ends, starts)
  routed  the router's choices drawn from the case's seed (properties/model/routing.py), aligned into
          vLLM's moe_align_block_size metadata for the kernel's block size (reference/routing.py):
          sorted_token_ids of the worst-case length (or, `shortcut`, only as long as in use),
          expert_ids, num_tokens_post_padded; topk_weights where the kernel multiplies by them

  problems  tutorial 08's form: problem g is A's rows of group g, first K_g columns, times B[g]'s first
          K_g rows and N_g columns, into C's rows of group g, first N_g columns; FUNC receives the G
          matrices of each as lists of views (`views`). Around each problem, A and B hold poison and C
          its sentinel (C's elements are the problems' alone: a write past a problem's columns is a write
          outside C); a matrix with no element has data pointer 0, as torch gives an empty tensor.

Every metadata tensor is a guarded int32 input: a read past its end reads poison (and the interpreter's
sanitizer names it), a write to it is a changed input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.properties.model import routing as router
from gemm_fuzz.properties.model.cases import (
    ROW,
    SCALES,
    Epilogue,
    GemmCase,
    Layout,
    Operands,
    Vector,
    _extra_shapes,
    _problem_values,
    extra_values,
    guarded_extra,
    guarded_input,
    guarded_output,
    poison,
    scale_shape,
    scale_values,
)
from gemm_fuzz.reference import bounds
from gemm_fuzz.reference import routing as aligned
from gemm_fuzz.reference.formats import by_name

INT32 = by_name("int32")
FP32 = by_name("fp32")


def routing(case: GemmCase, block_m: int) -> aligned.Routing:
    """The routed case's metadata, as moe_align_block_size builds it for `block_m`."""
    g = case.groups
    rng = np.random.default_rng([case.seed, 14])
    ids = router.topk_ids(rng, case.M, g.count, g.top_k, g.route)
    weights = router.weights(rng, ids.shape)
    in_use = aligned.align(ids, g.count, block_m).num_tokens_post_padded
    length = in_use if g.shortcut else None
    return aligned.align(ids, g.count, block_m, weights, g.local_experts(), length)


@dataclass(frozen=True)
class GroupRows:
    """One group with rows: its index (expert), C's rows, A's rows (tokens, routed), whether it is local,
    and its rows' router weights (routed; None for ragged groups)."""

    group: int
    c_rows: np.ndarray
    a_rows: np.ndarray
    local: bool
    weights: np.ndarray | None
    n: int | None = None  # problems: the group's own N and K (None: the case's)
    k: int | None = None


def group_rows(case: GemmCase, block_m: int | None) -> tuple[list[GroupRows], int]:
    """Every group with rows, in order, and C's row count: how the reference and the loop of 2-D problems
    split a grouped case."""
    if not case.groups.routed:
        starts = case.groups.starts()
        dims = case.groups.dims or [(None, None)] * case.groups.count
        found = [GroupRows(g, np.arange(lo, hi), np.arange(lo, hi), True, None, *dims[g])
                 for g, (lo, hi) in enumerate(zip(starts[:-1], starts[1:])) if hi > lo]
        return found, case.M
    r = routing(case, block_m)
    experts, weights = r.topk_ids.reshape(-1), r.topk_weights.reshape(-1)
    found = []
    for e in np.unique(experts):
        slots = np.flatnonzero(experts == e)
        found.append(GroupRows(int(e), slots, slots // r.top_k, bool(r.local[e]), weights[slots]))
    return found, r.slots


def group_index(sizes: tuple[int, ...], form: str) -> np.ndarray:
    """Where the ragged groups are, as `form` (kernels/operation.py: RAGGED_INDEXES) says."""
    ends = np.cumsum(sizes, dtype=np.int64)
    return {"sizes": np.asarray(sizes, dtype=np.int64), "ends": ends,
            "starts": np.concatenate([[0], ends])}[form]


def values(case: GemmCase, operation: Operation) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (G x K x N; gated, 2N) in float64, drawn as a batch's problems are (group g's B is
    problem g's)."""
    fmt, out = by_name(case.dtype), by_name(case.out_dtype)
    exact_bits = bounds.exact_sum_bits(case.dtype)
    n = operation.n_columns(case.N)
    pairs = [_problem_values(case, fmt, out, exact_bits, n, (p,)) for p in range(case.groups.count)]
    return np.array(pairs[0][0]), np.stack([b for _, b in pairs])


def materialize(case: GemmCase, device: torch.device, operation: Operation, values_too: bool = True) -> Operands:
    """A grouped case's operands and metadata on `device`; `operation.block_m` resolved to an int."""
    g = case.groups
    va, vb = (values(case, operation) if values_too
              else ((case.M, case.K), (g.count, case.K, operation.n_columns(case.N))))
    if g.problems:
        return operands(case, device, operation, *outside_poisoned(case, va, vb), None)
    found = routing(case, operation.block_m) if g.routed else group_index(g.sizes, operation.ragged_index)
    return operands(case, device, operation, va, vb, found)


def problem_mask(case: GemmCase) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Problems: where A (M x K), B (G x K x N) and C (M x N) hold a problem's elements."""
    g = case.groups
    a, b = np.zeros((case.M, case.K), dtype=bool), np.zeros((g.count, case.K, case.N), dtype=bool)
    c = np.zeros((case.M, case.N), dtype=bool)
    starts = g.starts()
    for p, (n, k) in enumerate(g.dims):
        a[starts[p]:starts[p + 1], :k] = True
        b[p, :k, :n] = True
        c[starts[p]:starts[p + 1], :n] = True
    return a, b, c


def outside_poisoned(case: GemmCase, va, vb):
    """Problems: A's and B's values with poison wherever no problem's element lies."""
    if not isinstance(va, np.ndarray):
        return va, vb
    ma, mb, _ = problem_mask(case)
    fill = poison(by_name(case.dtype))
    return np.where(ma, va, fill), np.where(mb, vb, fill)


def views(ops: Operands) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """Problems: the lists FUNC receives, A[g] (M_g x K_g), B[g] (K_g x N_g), C[g] (M_g x N_g), views of the
    operands' buffers with their leading dimensions."""
    g = ops.case.groups
    starts = g.starts()
    found = ([], [], [])

    def sub(guarded, shape, at):
        v = guarded.view
        return torch.as_strided(guarded.buffer, shape, v.stride()[-2:], v.storage_offset() + at)

    for p, (n, k) in enumerate(g.dims):
        m, row = int(g.sizes[p]), int(starts[p])
        found[0].append(sub(ops.a, (m, k), row * ops.a.view.stride(0)))
        found[1].append(sub(ops.b, (k, n), p * ops.b.view.stride(0)))
        found[2].append(sub(ops.c, (m, n), row * ops.c.view.stride(0)))
    return found


def operands(case: GemmCase, device: torch.device, operation: Operation, va, vb,
             metadata: np.ndarray | aligned.Routing, given: dict | None = None) -> Operands:
    """Guarded A (`va`), B (`vb`: values, or shapes for poison), C, the metadata, the scales and the bias
    (`given`, float64 by name; None: drawn from the case's seed) and alpha, laid out as `case` says:
    ragged, `metadata` is the group index; routed, the aligned routing."""
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)
    a = guarded_input("A", case.a, fin, va, device)
    b = guarded_input("B", case.b, fin, vb, device)
    routed = isinstance(metadata, aligned.Routing)
    members = problem_mask(case)[2] if case.groups.problems else None
    c = guarded_output("C", (metadata.slots if routed else case.M, case.N), case.c, fout, device, members)
    if metadata is None:  # problems: no metadata, the lists are built at the launch (views)
        return Operands(case, a, b, c, {}, {}, operation)
    placed, epilogue = {}, case.epilogue or Epilogue()
    if operation.scaled or operation.bias:  # scales (A's by its rows, B's a group each), a bias a group
        if given:
            drawn = dict(given)
        elif isinstance(va, np.ndarray):
            drawn = {**(scale_values(case, operation) if operation.scaled else {}), **extra_values(case, operation)}
        else:  # shapes: poison throughout
            drawn = {**{n: scale_shape(case, operation, n) for n in SCALES if operation.scaled},
                     **_extra_shapes(case, operation)}
        placed = {name: guarded_extra(name, _group_layout(getattr(epilogue, name)) if name == "bias"
                                      else getattr(epilogue, name), operation, fout, v, device)
                  for name, v in drawn.items()}
    scalars = {"alpha": epilogue.alpha} if operation.alpha else {}

    def guarded(name: str, array: np.ndarray, fmt=INT32):
        return guarded_input(name, Vector() if array.ndim == 1 else ROW, fmt, np.asarray(array, dtype=np.float64),
                             device)

    if not routed:
        return Operands(case, a, b, c, {"group_index": guarded("group_index", metadata), **placed}, scalars,
                        operation)
    extras = {**placed, "sorted_token_ids": guarded("sorted_token_ids", metadata.sorted_token_ids),
              "expert_ids": guarded("expert_ids", metadata.expert_ids),
              "num_tokens_post_padded": guarded("num_tokens_post_padded",
                                                np.array([metadata.num_tokens_post_padded]))}
    if operation.routed_weight:
        extras["topk_weights"] = guarded("topk_weights", metadata.topk_weights, FP32)
    return Operands(case, a, b, c, extras, {"top_k": metadata.top_k, **scalars}, operation)


def _group_layout(bias: Vector) -> Layout:
    """A bias a group (G x N) laid out as its drawn vector says along N, the groups one after another."""
    return Layout(step=max(bias.stride, 1), offset=bias.offset, broadcast="cols" if bias.stride == 0 else "")
