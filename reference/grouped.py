"""What a correct grouped GEMM may store (kernels/operation.py: `grouped`): each group's rows judged as
the 2-D product they are, A's rows of the group (gathered by token, routed) times the group's B, under
the sound bound of that product (bounds.py), a router weight's fp32 multiply counted as the epilogue's
(epilogue.py); then the groups' allowances put together row by row into C's. Rows no group computes
(a non-local expert's slots) must hold exact zeros.
"""

from __future__ import annotations

import numpy as np
import torch

from gemm_fuzz.reference import bounds, epilogue, numpy_ref, scaled
from gemm_fuzz.reference.formats import FORMATS, Format, name_of

_FIELDS = ("expected", "bound", "exact", "pos_inf", "neg_inf", "nan", "free", "reference")


def group_allowance(a: torch.Tensor, b: torch.Tensor, arith: bounds.Arithmetic, out: Format, op,
                    weights: np.ndarray | None = None, scales: dict | None = None, values: dict | None = None,
                    scalars: dict | None = None) -> bounds.Allowance:
    """One group's rows: A's rows `a` (R x K) times `b` (K x N, gated K x 2N), dequantized by their
    `scales` (the rows' a_scale, the group's b_scale) where the operation is scaled (scaled.py), through
    the operation's epilogue (`op`, a kernels.operation.Operation: alpha, the group's bias in `values`,
    float64, alpha in `scalars`, the activation), each row times its router weight (`weights`, R fp32
    values) where given."""
    k = a.shape[-1]
    if op.scaled:
        product, parts = scaled.scaled_product(op, a, b, scales)
        term = scaled.product_term(op, product, parts, k, name_of(a.dtype))
    else:
        product = numpy_ref.product(a, b)
        if not op.has_epilogue and weights is None:
            return bounds.allowance(product, k, arith, out)
        term = epilogue.product_term(product, k, arith)
    if weights is None:
        return epilogue.allowances(term, op, values or {}, scalars or {}, out)["C"]
    fp32 = epilogue.Arithmetic(FORMATS["fp32"])
    return epilogue.finish(epilogue.multiply(term, epilogue.constant(weights[:, None]), fp32), out)


def zeros(rows: int, cols: int) -> bounds.Allowance:
    """Rows that must hold exact zeros."""
    none = np.zeros((rows, cols), dtype=bool)
    return bounds.Allowance(np.zeros((rows, cols)), np.zeros((rows, cols)), True, none, none, none,
                            none, reference=np.zeros((rows, cols)))


def stacked(parts: list[tuple[np.ndarray, bounds.Allowance]], rows: int, cols: int) -> bounds.Allowance:
    """C's allowance from the groups' (their rows' indices into C, their allowance); every row of C must
    be some group's. A group of fewer columns (a problem of its own N) takes its rows' first columns; the
    rest of its rows are not C's elements (judged by the memory oracles, not here)."""
    full = {name: np.zeros((rows, cols), dtype=bool if name in ("exact", "pos_inf", "neg_inf", "nan", "free")
                           else np.float64) for name in _FIELDS}
    covered = np.zeros(rows, dtype=bool)
    for index, allow in parts:
        covered[index] = True
        width = np.shape(allow.expected)[-1] if np.ndim(allow.expected) == 2 else cols
        for name in _FIELDS:
            value = getattr(allow, name)
            if value is not None:
                full[name][index, :width] = value
        full["free"][index, width:] = True
    if not covered.all():
        raise ValueError(f"rows {np.flatnonzero(~covered)[:8].tolist()} of C belong to no group")
    return bounds.Allowance(**full)
