"""The checks that judge one launch. Each raises a typed failure (properties.judge.failures) whose
message names the operand, the first offending coordinates and the values.

  memory      canaries_intact (nothing outside C written), input_unchanged, all_written
  values      against_reference: C against the float64 product under the sound allowance of
              `reference.bounds` (bit-exact on exact cases), through the one comparison of
              properties.judge.compare
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gemm_fuzz.properties import phases
from gemm_fuzz.properties.judge import compare, diagnosis
from gemm_fuzz.properties.judge.failures import InputModified, NotWritten, WriteOutsideC, WrongValue
from gemm_fuzz.properties.model.cases import SCALES, Guarded, Operands, raw, signed, unwritten_bits
from gemm_fuzz.reference import bounds, epilogue, grouped, numpy_ref, scaled, torch_ref
from gemm_fuzz.reference.formats import by_name, name_of
from gemm_fuzz.reference.numpy_ref import to_float64


def _where(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


@phases.timed("oracles")
def all_written(c: torch.Tensor, reference: np.ndarray, unwritten: int, name: str = "C") -> None:
    """No element of an output still holds the pre-fill bit pattern (a NaN whose payload no arithmetic makes)."""
    left = raw(c) == signed(unwritten, c.element_size())  # compared where C lives
    if left.any():
        left = left.cpu().numpy()
        at = _where(left)
        raise NotWritten(
            f"{name}[{', '.join(map(str, at))}] still holds its pre-fill (bits {unwritten:#x}): the kernel never wrote "
            f"it, or computed it from {name}'s own unwritten contents; {int(left.sum())} of {left.size} elements are "
            f"unwritten, and the reference there is {reference[at]:.9g}", index=at, count=int(left.sum()),
            total=left.size, operand=name)


def _position(g: Guarded, index: int) -> str:
    """Where a buffer index lies relative to the view: before, after, or inside its padding."""
    first = int(np.argmax(g.elements)) if g.elements.any() else len(g.elements)
    last = len(g.elements) - 1 - int(np.argmax(g.elements[::-1])) if g.elements.any() else -1
    if index < first:
        return f"{first - index} element(s) before {g.name}'s first element"
    if index > last:
        return f"{index - last} element(s) after {g.name}'s last element"
    return f"inside {g.name}'s padding, {index - first} elements from its first element"


def _coordinates(g: Guarded, index: int) -> tuple[int, ...]:
    """The coordinates of the view's element stored at a buffer index (the first, if aliased)."""
    grid = np.full((), g.view.storage_offset(), dtype=np.int64)
    for n, stride in zip(g.view.shape, g.view.stride()):
        grid = grid[..., None] + np.arange(n, dtype=np.int64) * stride
    return _where(grid == index)


def canaries_intact(c: Guarded) -> None:
    """Nothing outside an output's elements changed: not the guard bands, not its padding."""
    changed = c.changed()
    outside = changed[~c.elements[changed]]
    if outside.size:
        first = int(outside[0])
        raise WriteOutsideC(
            f"a write outside {c.name}: buffer offset {first} changed ({_position(c, first)}); "
            f"{outside.size} element(s) outside {c.name} were overwritten", offset=first, count=int(outside.size),
            operand=c.name)


def input_unchanged(g: Guarded) -> None:
    """The kernel wrote nothing into an input's buffer (its elements, padding or guard bands)."""
    changed = g.changed()
    if changed.size:
        first = int(changed[0])
        where = f"{g.name}{list(_coordinates(g, first))}" if g.elements[first] else _position(g, first)
        raise InputModified(
            f"a write into input {g.name}: buffer offset {first} changed ({where}); {changed.size} element(s) changed",
            operand=g.name, offset=first, count=int(changed.size))


@phases.timed("oracles")
def memory(ops: Operands) -> None:
    """The memory oracles, in the order their findings are most telling: nothing written outside an
    output, nothing written into an input (A, B, then the extras)."""
    for g in ops.outputs():
        canaries_intact(g)
    inputs = ops.inputs()
    if inputs and bool(torch.stack([(raw(g.buffer) != raw(g.before)).any() for g in inputs]).any()):  # one wait
        for g in inputs:
            input_unchanged(g)


@dataclass(frozen=True)
class Verdict:
    """What the value oracles found on a passing launch."""

    exact: bool  # every element judged bit-exact
    error_ratio: float  # largest |C - reference| / bound; 0 on exact cases
    allowance: bounds.Allowance
    values: np.ndarray  # C as float64


@phases.timed("oracles")
def reference_allowance(product: numpy_ref.Product, k: int, dtype: str, precision: str,
                        out_dtype: str, partials: int = 0) -> bounds.Allowance:
    """What a correct kernel may return; `partials`: the partial sums per element it adds in C's dtype."""
    return bounds.allowance(product, k, bounds.arithmetic(dtype, precision, partials), by_name(out_dtype))


def output_partials(variant, dtype: str, config, device_type: str) -> int:
    """The partial sums per element of C `variant` adds in C's dtype on `dtype` inputs in `config`
    ((key, value) pairs; () the default) on a device of `device_type` ("cpu": the interpreter)."""
    if variant.partial_sums_in_output is None:
        return 0
    return variant.output_partials(variant.config(device_type, by_name(dtype).dtype, dict(config) or None))


def against_reference(ops: Operands, precision: str, product: numpy_ref.Product | None = None,
                      partials: int = 0) -> Verdict:
    """Every oracle on a finished launch: memory, all written, and C (and a second output) against the
    float64 reference of the operation."""
    memory(ops)
    if product is None:
        product = product_of(ops)
    allow, got = outputs(ops, precision, product, partials)["C"]
    try:
        ratio = compare.values(got, allow)
    except WrongValue as e:  # the worst element's inputs and the step its value fits (tf32 operands, say)
        diagnosis.explain(e, ops, precision, partials)
        raise
    return Verdict(bool(allow.exact.all()), ratio, allow, got)


@phases.timed("reference")
def allowances(ops: Operands, precision: str, product: numpy_ref.Product, partials: int = 0) -> dict:
    """What a correct kernel may store in each output ("C", and "pre" where the operation has it), from
    `product_of(ops)`."""
    dtype, out = name_of(ops.a.view.dtype), by_name(name_of(ops.c.view.dtype))
    k = ops.a.view.shape[-1]
    arith = bounds.arithmetic(dtype, precision, partials)
    op = ops.operation
    if op.grouped:
        return {"C": _grouped_allowance(ops, arith, out)}
    if not (op.has_epilogue or op.scaled):
        return {"C": bounds.allowance(product, k, arith, out)}
    if op.scaled:  # `product` is of the dequantized operands (product_of); the bound needs the codes and scales
        parts = scaled.dequantized(op, ops.a.view, ops.b.view, _scales(ops))[2]
        term = scaled.product_term(op, product, parts, k, dtype)
    else:
        term = epilogue.product_term(product, k, arith)
    values = {name: to_float64(g.view) for name, g in ops.extras.items() if name not in ("pre", "b_zero", *SCALES)}
    return epilogue.allowances(term, op, values, ops.scalars, out)


def _grouped_allowance(ops: Operands, arith: bounds.Arithmetic, out) -> bounds.Allowance:
    """Each group's rows as the 2-D product they are (reference/grouped.py), from the case's groups."""
    from gemm_fuzz.properties.model import grouped as groups_of

    a, b, op = ops.a.view, ops.b.view, ops.operation
    n = ops.c.view.shape[-1]
    found, rows = groups_of.group_rows(ops.case, op.block_m)
    parts = []
    for g in found:
        if not g.local:
            parts.append((g.c_rows, grouped.zeros(len(g.c_rows), n)))
            continue
        tokens = torch.as_tensor(g.a_rows, device=a.device)
        k, n_g = g.k if g.k is not None else a.shape[-1], g.n if g.n is not None else b.shape[-1]
        values = {"bias": to_float64(ops.extras["bias"].view[g.group])} if op.bias else {}
        parts.append((g.c_rows, grouped.group_allowance(a.index_select(0, tokens)[:, :k], b[g.group][:k, :n_g], arith,
                                                        out, op, g.weights if op.routed_weight else None,
                                                        _group_scales(ops, tokens, g.group), values, ops.scalars)))
    return grouped.stacked(parts, rows, n)


def _group_scales(ops: Operands, tokens: torch.Tensor, group: int) -> dict[str, torch.Tensor] | None:
    """A group's scales: A's at its rows (one for A: that one), B's of the group."""
    if not ops.operation.scaled:
        return None
    a_scale, b_scale = ops.extras["a_scale"].view, ops.extras["b_scale"].view
    rows = a_scale if ops.operation.a_scale == "tensor" else a_scale.index_select(0, tokens)
    return {"a_scale": rows, "b_scale": b_scale[group:group + 1] if b_scale.dim() == 1 else b_scale[group]}


def _scales(ops: Operands) -> dict[str, torch.Tensor]:
    return {name: g.view for name, g in ops.extras.items() if name in (*SCALES, "b_zero")}


@phases.timed("reference")
def product_of(ops: Operands) -> numpy_ref.Product:
    """The float64 product a launch's outputs are judged against: of A and B, or of their dequantized
    values (scaled operands)."""
    if ops.operation.grouped:  # judged group by group (allowances)
        return None
    if ops.operation.scaled:
        return scaled.scaled_product(ops.operation, ops.a.view, ops.b.view, _scales(ops))[0]
    return numpy_ref.product(ops.a.view, ops.b.view)


def outputs(ops: Operands, precision: str, product: numpy_ref.Product, partials: int = 0) -> dict:
    """The launch's outputs all written, and a second output within what a correct kernel may store:
    each output's allowance and values (float64) by name ("C", "pre"); raises the first finding. C's
    values are left to the caller to judge (against the reference, or against another run)."""
    allow = allowances(ops, precision, product, partials)
    unwritten = unwritten_bits(by_name(name_of(ops.c.view.dtype)))
    outputs = {"C": ops.c, **({"pre": ops.extras["pre"]} if "pre" in ops.extras else {})}
    with phases.timed("oracles"):
        host = {name: g.view.cpu() for name, g in outputs.items()}  # one copy back each: the checks run on the host
        for name, h in host.items():
            all_written(h, allow[name].reference, unwritten, name)
        got = {name: to_float64(h) for name, h in host.items()}
    if "pre" in got:
        compare.values(got["pre"], allow["pre"], name="pre")
    return {name: (allow[name], got[name]) for name in outputs}


@phases.timed("reference")
def torch_error_ratio(ops: Operands, reference: np.ndarray, mine: np.ndarray) -> float | None:
    """The kernel's largest error against torch.matmul's (native dtype, same device, same inputs),
    over the elements where all three of C, torch's result and the float64 `reference` are finite;
    None where torch is exact there."""
    theirs = to_float64(torch_ref.on_device(ops.a.view, ops.b.view, ops.c.view.dtype))
    finite = np.isfinite(reference) & np.isfinite(mine) & np.isfinite(theirs)
    torch_error = np.abs(theirs[finite] - reference[finite]).max(initial=0.0)
    if torch_error == 0:
        return None
    return float(np.abs(mine[finite] - reference[finite]).max() / torch_error)
