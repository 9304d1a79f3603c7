"""A grouped product computed as a loop of plain 2-D problems: an agreement peer for grouped kernels that
shares none of their indexing. Each group's rows of A (gathered by token, routed) times its B, by the
built-in `tiled` kernel, under the memory oracles and judged by its own bound; C's rows put together from
the groups' (a non-local expert's slots: zeros). With the router's weights, `tiled` writes fp32 and each
row is multiplied by its weight in fp32 and rounded to C's dtype, as fused_moe does, under the grouped
reference's bound. A grouped activation has no such loop (it would need a 2-D kernel computing it).
"""

from __future__ import annotations

import numpy as np
import torch

from gemm_fuzz import kernels
from gemm_fuzz.properties.judge import oracles, relations
from gemm_fuzz.properties.launch.launching import launch
from gemm_fuzz.properties.model import grouped
from gemm_fuzz.properties.model.cases import ROW, Operands
from gemm_fuzz.reference import grouped as stacking
from gemm_fuzz.reference.formats import by_name
from gemm_fuzz.reference.numpy_ref import to_float64

NAME = "a loop of 2-D tiled problems"
KERNEL = "tiled"


def applies(operation, dtype: torch.dtype) -> bool:
    loop = kernels.get(KERNEL)
    return not operation.has_epilogue and dtype in loop.dtypes


def run(ops: Operands, backend) -> relations.Run:
    """The loop's C and allowance for the grouped problem `ops` holds (its values as launched)."""
    case = ops.case
    loop = kernels.get(KERNEL)
    a, b = to_float64(ops.a.view), to_float64(ops.b.view)
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)
    weighted = ops.operation.routed_weight
    n = ops.c.view.shape[-1]
    if case.groups.routed:
        r = grouped.routing(case, ops.operation.block_m)
        experts = r.topk_ids.reshape(-1)
        rows = {e: np.flatnonzero(experts == e) for e in np.unique(experts)}
        local = {e: bool(r.local[e]) for e in rows}
        gathered = {e: a[slots // r.top_k] for e, slots in rows.items()}
        total = r.slots
    else:
        starts = np.concatenate([[0], np.cumsum(case.groups.sizes)]).astype(int)
        rows = {g: np.arange(starts[g], starts[g + 1]) for g in range(case.groups.count) if starts[g + 1] > starts[g]}
        local = {g: True for g in rows}
        gathered = {g: a[index] for g, index in rows.items()}
        total = case.M
    c = np.zeros((total, n))
    parts = []
    for g, index in rows.items():
        if not local[g]:
            parts.append((index, stacking.zeros(len(index), n)))
            continue
        found = relations.solve(loop, lambda v, o: launch(v, o, backend), gathered[g], b[g], (ROW, ROW, ROW), fin,
                                by_name("fp32") if weighted else fout, ops.c.view.device)
        if weighted:  # fl32(w * s), then C's rounding
            scaled = found.c.astype(np.float32) * r.topk_weights.reshape(-1)[index, None].astype(np.float32)
            c[index] = torch.from_numpy(scaled).to(fout.dtype).double().numpy()
        else:
            c[index] = found.c
        parts.append((index, found.allowance))
    if weighted:
        return relations.Run(c, oracles.allowances(ops, loop.precision, None)["C"])
    return relations.Run(c, stacking.stacked(parts, total, n))
