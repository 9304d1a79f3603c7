"""A grouped product computed as a loop of plain 2-D problems: an agreement peer for grouped kernels that
shares none of their indexing. Each group's rows of A (gathered by token, routed; problems, their own K
columns) times its B (problems, its own K x N), by the built-in `tiled` kernel, under the memory oracles
and judged by its own bound; C's rows put together from the groups' (a non-local expert's slots: zeros).
With the router's weights, `tiled` writes fp32 and each row is multiplied by its weight in fp32 and
rounded to C's dtype, as fused_moe does, under the grouped reference's bound. A grouped activation has
no such loop (it would need a 2-D kernel computing it).
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
    return not (operation.has_epilogue or operation.scaled) and dtype in loop.dtypes


def run(ops: Operands, backend) -> relations.Run:
    """The loop's C and allowance for the grouped problem `ops` holds (its values as launched)."""
    case = ops.case
    loop = kernels.get(KERNEL)
    a, b = to_float64(ops.a.view), to_float64(ops.b.view)
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)
    weighted = ops.operation.routed_weight
    n = ops.c.view.shape[-1]
    found, total = grouped.group_rows(case, ops.operation.block_m)
    c = np.zeros((total, n))
    parts = []
    for g in found:
        if not g.local:
            parts.append((g.c_rows, stacking.zeros(len(g.c_rows), n)))
            continue
        k, n_g = g.k if g.k is not None else a.shape[-1], g.n if g.n is not None else n  # problems: their own
        solved = relations.solve(loop, lambda v, o: launch(v, o, backend), a[g.a_rows, :k], b[g.group][:k, :n_g],
                                 (ROW, ROW, ROW), fin, by_name("fp32") if weighted else fout, ops.c.view.device)
        if weighted:  # fl32(w * s), then C's rounding
            scaled = solved.c.astype(np.float32) * g.weights[:, None].astype(np.float32)
            c[g.c_rows] = torch.from_numpy(scaled).to(fout.dtype).double().numpy()
        else:
            c[g.c_rows, :n_g] = solved.c
        parts.append((g.c_rows, solved.allowance))
    if weighted:
        return relations.Run(c, oracles.allowances(ops, loop.precision, None)["C"])
    return relations.Run(c, stacking.stacked(parts, total, n))
