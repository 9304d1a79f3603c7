"""What a kernel that raised on a case may have meant: the features of the operands it was given,
each with the contract declaration (`kernels.contract`) that would keep such cases from being drawn.

A launcher that raises on a case its variant declared it accepts fails the example (a refusal it did
not declare, or a bug); the hint lets the author tell which, and fix the contract in one line.
"""

from __future__ import annotations

import torch

from gemm_fuzz.kernels.registry import Variant

_ALIGNMENT = 16  # bytes: what vectorised loads and tensor descriptors commonly need


def _dtype(d: torch.dtype) -> str:
    return f"torch.{str(d).removeprefix('torch.')}"


def layout(name: str, t: torch.Tensor) -> str:
    """How a non-contiguous operand departs from row-major, in words."""
    if t.dim() == 1:
        return f"{name} with stride {t.stride(0)}"
    if t.dim() == 3 and t[0].is_contiguous():
        return f"{name} with batch stride {t.stride(0)} (strides {t.stride()})"
    s0, s1 = t.stride()[-2:]
    if 0 in (s0, s1):
        return f"{name} broadcast (strides {(s0, s1)}: a zero stride)"
    if 1 not in (s0, s1):
        return f"{name} with inner stride {min(s0, s1)} (strides {(s0, s1)})"
    if s0 == 1 and t.shape[1] > 1:
        return f"{name} column-major (strides {(s0, s1)})"
    return f"{name} with a padded leading dimension (strides {(s0, s1)} for {t.shape[1]} columns)"


def hint(variant: Variant, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, extras: dict | None = None) -> str:
    """' on <features>; if that is a precondition, declare <declaration>' ('' when nothing stands out)."""
    if isinstance(a, list):  # problems: lists of matrices, whose layouts the case states
        return ""
    req = variant.requirements
    operands = {"a": a, "b": b, "c": c, **{k: v for k, v in (extras or {}).items() if isinstance(v, torch.Tensor)}}
    strided = [n for n, t in operands.items() if t.numel() > 1 and not t.is_contiguous() and n not in req.contiguous]
    if strided:
        features = " and ".join(layout(n.upper() if len(n) == 1 else n, operands[n]) for n in strided)
        contiguous = tuple(sorted(set(req.contiguous) | set(strided)))
        return f" on {features}; if that is a precondition, declare requires=Requirements(contiguous={contiguous!r})"
    misaligned = [n for n, t in operands.items() if t.numel() and t.data_ptr() % _ALIGNMENT]
    if misaligned and not req.stride_alignment:
        features = " and ".join(f"{n.upper() if len(n) == 1 else n} at a data pointer not {_ALIGNMENT}-byte aligned "
                                f"(storage offset {operands[n].storage_offset()})" for n in misaligned)
        return (f" on {features}; if that is a precondition, declare "
                f"requires=Requirements(stride_alignment={_ALIGNMENT})")
    default = variant.dtypes[a.dtype][0]
    if c.dtype != default:
        return (f" on C of {_dtype(c.dtype)} for {_dtype(a.dtype)} inputs; if the kernel writes only "
                f"{_dtype(default)}, declare dtypes={{{_dtype(a.dtype)}: ({_dtype(default)},)}}")
    return ""


def refusal(variant: Variant, case, device: torch.device) -> str | None:
    """Why `variant`'s contract, as declared now, does not admit `case` (a repro script's, recorded
    under an earlier contract), or None when it does: dtypes, configuration, then the operands' checks
    its launcher makes."""
    from gemm_fuzz.kernels import operands
    from gemm_fuzz.properties.model.cases import materialize
    from gemm_fuzz.reference.formats import by_name

    dtype, out = by_name(case.dtype).dtype, by_name(case.out_dtype).dtype
    if dtype not in variant.dtypes:
        return f"it declares no {_dtype(dtype)} inputs (dtypes {', '.join(_dtype(d) for d in variant.dtypes)})"
    if out not in variant.dtypes[dtype]:
        return f"it declares no C of {_dtype(out)} for {_dtype(dtype)} inputs"
    try:
        variant.config(device.type, dtype, dict(case.config) or None)
        ops = materialize(case, device, variant.operation_in(device.type, dtype, case.config))
        operands.check(variant, ops.a.view, ops.b.view, ops.c.view, ops.keywords())
    except (TypeError, ValueError) as e:
        return str(e)
    return None
