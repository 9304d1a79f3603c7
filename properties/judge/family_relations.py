"""Metamorphic relations of the GEMM family: a kernel with an epilogue or a batch, run on a changed
problem whose answer follows from the first run's.

  pad K         zero columns appended to A and zero rows to B leave every output as it was
  one problem   problem p of a batch, launched alone, gives C[p]
  reversed      the problems in reverse order give C in reverse order
  bias shift    without an activation, adding d to the bias adds d (times beta, where beta scales the
                bias) to C along the bias's axis
  doubling      with a positively homogeneous activation (none, relu, leaky_relu), doubling alpha,
                beta, the bias and the residual doubles C
  double scale  scaled codes: doubling A's scales (B's, for weight-only codes) doubles C, exactly as
                a power of two does (an E8M0 scale: its byte plus one); without an additive extra

Each second run is judged as the first was (properties/judge/relations.py: memory oracles, outputs
written, a second output against its reference), then compared with the first through the one
comparison: within the sum of both runs' bounds, bit-exact where both are exact. Batched operands
whose problems overlap in memory are laid out packed in the second run (their values as the first
run read them).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.properties.judge import compare, relations
from gemm_fuzz.properties.judge.relations import Extras, Launch, Run, paired
from gemm_fuzz.properties.model.cases import Layout, Operands, extra_format
from gemm_fuzz.reference import bounds
from gemm_fuzz.reference.formats import by_name
from gemm_fuzz.reference.numpy_ref import to_float64

HOMOGENEOUS = (None, "relu", "leaky_relu")  # act(2y) = 2 act(y)


def _packed(layout: Layout) -> Layout:
    return replace(layout, batch_gap=max(layout.batch_gap, 0))


def _layouts(ops: Operands) -> tuple[Layout, Layout, Layout]:
    case = ops.case
    return _packed(case.a), _packed(case.b), _packed(case.c)


def _extras(ops: Operands) -> Extras | None:
    extras = Extras.of(ops)
    if extras is None:
        return None
    return extras.replace(layouts={n: _packed(lay) for n, lay in extras.layouts.items() if isinstance(lay, Layout)})


def _solve(variant: Variant, launch: Launch, ops: Operands, a, b, extras: Extras | None) -> Run:
    case = ops.case
    return relations.solve(variant, launch, a, b, _layouts(ops), by_name(case.dtype), by_name(case.out_dtype),
                           ops.c.view.device, case.config, extras, n=ops.c.view.shape[-1])


def _judge(relation: str, got: np.ndarray, allow: bounds.Allowance) -> None:
    compare.values(got, allow, against=f"the relation '{relation}'")


def _inputs(ops: Operands) -> tuple[np.ndarray, np.ndarray]:
    return to_float64(ops.a.view), to_float64(ops.b.view)


def pad_k(variant: Variant, launch: Launch, ops: Operands, first: Run, extra: int) -> None:
    case = ops.case
    if case.a.broadcast == "cols" or case.b.broadcast == "rows":
        return  # zeros cannot be appended along an axis whose elements all alias one another
    a, b = _inputs(ops)
    a2 = np.concatenate([a, np.zeros((*a.shape[:-1], extra))], axis=-1)
    b2 = np.concatenate([b, np.zeros((*b.shape[:-2], extra, b.shape[-1]))], axis=-2)
    second = _solve(variant, launch, ops, a2, b2, _extras(ops))
    _judge(f"append {extra} zero columns to A and rows to B", second.c, paired(first.c, [first, second]))


def _part(run: Run, index) -> Run:
    """The run's results and allowance at `index` (a problem, or the problems reordered)."""
    allow = run.allowance
    fields = {name: getattr(allow, name)[index] for name in ("expected", "bound", "exact", "pos_inf", "neg_inf", "nan")}
    free = None if allow.free is None else allow.free[index]
    return Run(run.c[index], bounds.Allowance(**fields, free=free))


def _batch_extras(ops: Operands, index) -> Extras | None:
    extras = _extras(ops)
    if extras is None:
        return None
    return extras.replace(values={n: v[index] for n, v in extras.values.items() if n in ("c_in", "residual")})


def one_problem(variant: Variant, launch: Launch, ops: Operands, first: Run, p: int) -> None:
    index = slice(p, p + 1)
    a, b = _inputs(ops)
    second = _solve(variant, launch, ops, a[index], b[index], _batch_extras(ops, index))
    mine = _part(first, index)
    _judge(f"problem {p} launched alone", second.c, paired(mine.c, [mine, second]))


def reversed_batch(variant: Variant, launch: Launch, ops: Operands, first: Run) -> None:
    index = slice(None, None, -1)
    a, b = _inputs(ops)
    second = _solve(variant, launch, ops, a[index], b[index], _batch_extras(ops, index))
    mine = _part(first, index)
    _judge("the problems in reverse order", second.c, paired(mine.c, [mine, second]))


def shift_bias(variant: Variant, launch: Launch, ops: Operands, first: Run, delta: float) -> bool:
    """Returns False where the relation does not apply (an activation, no bias, or beta == 0 dropping it)."""
    op = variant.operation
    if op.bias is None or op.activation is not None or op.gated:
        return False
    extras = _extras(ops)
    beta = extras.scalars.get("beta", 1.0) if op.beta and op.beta_scales == "bias" else 1.0
    if op.beta and op.beta_scales == "bias" and beta == 0 and op.beta_zero_skips_c_in:
        return False
    fmt = extra_format(op, "bias", by_name(ops.case.out_dtype))
    bias = extras.values["bias"]
    if not np.isfinite(bias).all() or np.abs(bias).max(initial=0) + abs(delta) >= fmt.max / 4:
        return False
    moved = torch.from_numpy(bias + delta).to(fmt.dtype).double().numpy()
    shift = (moved - bias) * beta
    second = _solve(variant, launch, ops, *_inputs(ops), extras.replace(values={"bias": moved}))
    along = shift[None, :] if op.bias == "n" else shift[:, None]
    with np.errstate(invalid="ignore"):
        expected = first.c + along
    none = np.zeros(first.c.shape, dtype=bool)
    _judge(f"add {delta:g} to the bias", second.c, paired(expected, [first, second], exact=none))
    return True


def double(variant: Variant, launch: Launch, ops: Operands, first: Run) -> bool:
    """Returns False where the relation does not apply (no alpha, an activation that is not positively
    homogeneous, a gated kernel, or values that doubled would overflow)."""
    op = variant.operation
    if not op.alpha or op.activation not in HOMOGENEOUS or op.gated:
        return False
    extras = _extras(ops)
    out = by_name(ops.case.out_dtype)
    # the bias is doubled with beta where beta scales it (Inductor's addmm), else on its own
    scaled_values = [n for n in ("bias", "residual") if n in extras.values
                     and not (n == "bias" and op.beta and op.beta_scales == "bias")]
    values = [first.allowance.reference, *(extras.values[n] for n in scaled_values)]
    if not all(np.isfinite(v).all() for v in values) or any(np.abs(v).max(initial=0) * 8 > out.max for v in values):
        return False
    scalars = {name: 2 * value for name, value in extras.scalars.items()}
    doubled = {name: 2 * extras.values[name] for name in scaled_values}
    second = _solve(variant, launch, ops, *_inputs(ops), extras.replace(values=doubled, scalars=scalars))
    allow = first.allowance
    scaled = Run(first.c * 2, bounds.Allowance(allow.expected * 2, allow.bound * 2, allow.exact, allow.pos_inf,
                                               allow.neg_inf, allow.nan, allow.free))
    _judge("double alpha, beta, the bias and the residual", second.c,
           paired(scaled.c, [scaled, second], first.exact & second.exact))
    return True


def double_scale(variant: Variant, launch: Launch, ops: Operands, first: Run) -> bool:
    """Returns False where the relation does not apply: an additive extra (bias, C_in, residual), an
    activation that is not positively homogeneous, float zero points (q * s + z does not double), or
    scales that doubled would leave their format (NaN, the largest) or C that doubled could overflow."""
    op = variant.operation
    if op.bias or op.has_c_in or op.residual or op.activation not in HOMOGENEOUS or op.zero == "float":
        return False
    name = "b_scale" if op.weight_only else "a_scale"
    extras = _extras(ops)
    scales = extras.values[name]
    if op.scale_dtype == "e8m0":  # bytes: 2**(e - 127); 0xFF is NaN
        if not (scales < 0xFE).all():
            return False
        doubled = scales + 1
    else:
        fmt = by_name({"e4m3": "fp8e4m3"}.get(op.scale_dtype, op.scale_dtype))
        if not np.isfinite(scales).all() or np.abs(scales).max(initial=0) * 2 > fmt.max:
            return False
        doubled = scales * 2
    out = by_name(ops.case.out_dtype)
    reference = first.allowance.reference
    if not np.isfinite(reference).all() or np.abs(reference).max(initial=0) * 4 > out.max:
        return False
    second = _solve(variant, launch, ops, *_inputs(ops), extras.replace(values={name: doubled}))
    allow = first.allowance
    scaled = Run(first.c * 2, bounds.Allowance(allow.expected * 2, allow.bound * 2, allow.exact, allow.pos_inf,
                                               allow.neg_inf, allow.nan, allow.free))
    _judge(f"double {'B' if name == 'b_scale' else 'A'}'s scales", second.c,
           paired(scaled.c, [scaled, second], first.exact & second.exact))
    return True
