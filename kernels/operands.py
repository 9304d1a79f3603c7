"""Validation shared by every launcher: refuse what a variant cannot take, with a message that says
what was wrong and what was expected. Nothing is coerced; nothing is written before this passes."""

from __future__ import annotations

import numpy as np
import torch

from gemm_fuzz.kernels import mode
from gemm_fuzz.kernels.registry import Variant


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _element_offsets(t: torch.Tensor) -> np.ndarray:
    """Element offsets (from the data pointer) of every element of a 2-D view."""
    rows = np.arange(t.shape[0], dtype=np.int64)[:, None] * t.stride(0)
    cols = np.arange(t.shape[1], dtype=np.int64)[None, :] * t.stride(1)
    return (rows + cols).ravel()


def span(t: torch.Tensor) -> tuple[int, int]:
    """[first, last] element offsets reached by a 2-D view (relative to its data pointer)."""
    if t.numel() == 0:
        return (0, -1)
    return (0, sum((n - 1) * s for n, s in zip(t.shape, t.stride())))


def _byte_ranges(t: torch.Tensor) -> np.ndarray:
    return t.data_ptr() + _element_offsets(t) * t.element_size()


def has_internal_overlap(t: torch.Tensor) -> bool:
    """Do two elements of this 2-D view share memory?"""
    if t.numel() <= 1:
        return False
    dims = sorted((s, n) for n, s in zip(t.shape, t.stride()) if n > 1)
    reach = 1
    for stride, size in dims:
        if stride < reach:
            break
        reach = stride * size
    else:
        return False  # each dimension steps past everything the smaller ones cover
    offsets = _element_offsets(t)
    return len(np.unique(offsets)) != len(offsets)


def overlaps(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Do the elements of two views share any byte?"""
    if x.numel() == 0 or y.numel() == 0:
        return False
    x0, x1 = x.data_ptr(), x.data_ptr() + (span(x)[1] + 1) * x.element_size()
    y0, y1 = y.data_ptr(), y.data_ptr() + (span(y)[1] + 1) * y.element_size()
    if x1 <= y0 or y1 <= x0:
        return False
    xs, ys = _byte_ranges(x), _byte_ranges(y)
    return _starts_inside(ys, xs, x.element_size()) or _starts_inside(xs, ys, y.element_size())


def _starts_inside(starts: np.ndarray, others: np.ndarray, width: int) -> bool:
    """Does any byte address in `starts` fall inside [o, o + width) for some o in `others`?"""
    others = np.sort(others)
    i = np.searchsorted(others, starts, side="right") - 1
    found = i >= 0
    return bool(np.any(starts[found] < others[i[found]] + width))


def _check_tensor(name: str, t, what: str) -> None:
    """What every operand must be: a 2-D tensor with data, outside autograd."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.is_meta:
        raise ValueError(f"{name} is a meta tensor (a shape without data): a kernel needs {name}'s values; pass a "
                         "tensor on the CPU (interpreter) or on a CUDA device")
    if t.requires_grad:
        raise ValueError(f"{name} requires grad: the kernels write into C as torch's out= functions do, which "
                         f"autograd does not follow; pass {name}.detach() (no gradient flows through these kernels)")
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D ({what}), got {t.dim()}-D with shape {tuple(t.shape)}")


def _check_machine(variant: Variant, tensors: dict[str, torch.Tensor]) -> None:
    """One device for every operand, the one the kernels run on, and a machine the variant runs on."""
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) != 1:
        where = ", ".join(f"{n} on {d}" for n, d in devices.items())
        raise ValueError(f"{', '.join(tensors)} must be on one device; got {where}")
    device = next(iter(devices.values()))
    backend = mode.configure()
    if backend == "cuda" and device.type != "cuda":
        raise ValueError(
            f"{' and '.join(tensors)} are on {device} but the kernels are compiled for CUDA (backend 'cuda'); "
            "move them to the GPU or use the interpreter backend"
        )
    req = variant.requirements
    if req.cuda and backend != "cuda":
        raise ValueError(f"variant {variant.name!r} needs a CUDA GPU (compiled kernels); the backend is {backend!r}")
    if req.min_capability and torch.cuda.get_device_capability(device) < req.min_capability:
        need = ".".join(map(str, req.min_capability))
        have = ".".join(map(str, torch.cuda.get_device_capability(device)))
        raise ValueError(f"variant {variant.name!r} needs compute capability >= {need}; this GPU has {have}")


def _check_inputs(variant: Variant, a, b) -> tuple[int, int, int]:
    """A's and B's types, shapes and dtypes (A first)."""
    _check_tensor("A", a, "M x K")
    _check_tensor("B", b, "K x N")
    (M, K), (K2, N) = a.shape, b.shape
    if K2 != K:
        raise ValueError(f"B has {K2} rows but A has {K} columns (K): the inner dimensions must match")
    if a.dtype not in variant.dtypes:
        accepted = ", ".join(_dtype_name(d) for d in variant.dtypes)
        raise TypeError(f"A has dtype {_dtype_name(a.dtype)}; variant {variant.name!r} takes {accepted}")
    if b.dtype != a.dtype:
        raise TypeError(
            f"B has dtype {_dtype_name(b.dtype)} but A has {_dtype_name(a.dtype)}: A and B must share one dtype"
        )
    return M, N, K


def allocate_output(variant: Variant, a, b) -> torch.Tensor:
    """A fresh M x N output in the variant's default output dtype for these inputs, once A and B pass
    (so a bad A is named before a C of A's M rows is allocated)."""
    M, N, _ = _check_inputs(variant, a, b)
    _check_machine(variant, {"A": a, "B": b})
    for name, t in (("A", a), ("B", b)):
        _check_requirements(variant, name, t)
    limit = variant.requirements.max_offset
    if limit is not None and M * N - 1 > limit:
        raise ValueError(
            f"A has {M} rows (M) and B {N} columns (N): C, M x N, would reach element offset {M * N - 1}, past "
            f"{limit}, the largest offset variant {variant.name!r} can index (32-bit offset arithmetic)"
        )
    return torch.empty((M, N), dtype=variant.dtypes[a.dtype][0], device=a.device)


def check(variant: Variant, a, b, c) -> tuple[int, int, int]:
    """Validate operands for `variant`; return (M, N, K). Raises TypeError or ValueError naming the first
    operand at fault (A, then B, then C)."""
    M, N, K = _check_inputs(variant, a, b)
    _check_tensor("C", c, "M x N")
    if tuple(c.shape) != (M, N):
        raise ValueError(f"C has shape {tuple(c.shape)}; expected (M, N) = ({M}, {N}) for A {M}x{K} and B {K}x{N}")
    outs = variant.dtypes[a.dtype]
    if c.dtype not in outs:
        raise TypeError(
            f"C has dtype {_dtype_name(c.dtype)}; for {_dtype_name(a.dtype)} inputs variant {variant.name!r} "
            f"writes {', '.join(_dtype_name(d) for d in outs)}"
        )
    _check_machine(variant, {"A": a, "B": b, "C": c})
    if has_internal_overlap(c):
        raise ValueError(f"C has strides {c.stride()} so two of its elements share memory; C must not overlap itself")
    for name, t in (("A", a), ("B", b)):
        if overlaps(c, t):
            raise ValueError(f"C overlaps {name} in memory; the output must not alias an input")
    for name, t in (("A", a), ("B", b), ("C", c)):
        _check_requirements(variant, name, t)
    return M, N, K


def _check_requirements(variant: Variant, name: str, t: torch.Tensor) -> None:
    req = variant.requirements
    if t.numel() == 0:
        return
    if name.lower() in req.contiguous and not t.is_contiguous():
        raise ValueError(
            f"{name} has shape {tuple(t.shape)} and strides {t.stride()}; variant {variant.name!r} needs {name} "
            f"contiguous (row-major, strides ({t.shape[1]}, 1))"
        )
    if req.positive_strides and 0 in t.stride():
        raise ValueError(
            f"{name} has strides {t.stride()}; variant {variant.name!r} needs every stride positive (no broadcast "
            "operands: it tells the compiler strides are > 0)"
        )
    if req.contiguous_dim and 1 not in t.stride():
        raise ValueError(
            f"{name} has strides {t.stride()}; variant {variant.name!r} needs one dimension of stride 1 "
            "(a row- or column-major operand)"
        )
    if req.stride_alignment:
        align = req.stride_alignment
        if t.data_ptr() % align:
            raise ValueError(
                f"{name}'s data pointer {t.data_ptr():#x} is not {align}-byte aligned, which variant "
                f"{variant.name!r} needs (storage offset {t.storage_offset()} elements)"
            )
        dim = 0 if t.stride(1) == 1 else 1  # the leading (non-contiguous) dimension
        leading = t.stride(dim)
        if (leading * t.element_size()) % align:
            raise ValueError(
                f"{name}'s leading stride {leading} (dimension {dim}) is {leading * t.element_size()} bytes; variant "
                f"{variant.name!r} needs it to be a multiple of {align} bytes (pad the leading dimension)"
            )
    if req.max_offset is not None and span(t)[1] > req.max_offset:
        raise ValueError(
            f"{name} reaches element offset {span(t)[1]}, past {req.max_offset}, the largest offset variant "
            f"{variant.name!r} can index (32-bit offset arithmetic)"
        )
