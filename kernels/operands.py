"""Validation shared by every launcher: refuse what a variant cannot take, with a message that says
what was wrong and what was expected. Nothing is coerced; nothing is written before this passes."""

from __future__ import annotations

import numpy as np
import torch

from gemm_fuzz.kernels import mode
from gemm_fuzz.kernels.operation import SCALE_DTYPES
from gemm_fuzz.kernels.registry import Variant


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _element_offsets(t: torch.Tensor) -> np.ndarray:
    """Element offsets (from the data pointer) of every element of a view, in its logical order."""
    offsets = np.zeros((), dtype=np.int64)
    for n, stride in zip(t.shape, t.stride()):
        offsets = offsets[..., None] + np.arange(n, dtype=np.int64) * stride
    return offsets.ravel()


def span(t: torch.Tensor) -> tuple[int, int]:
    """[first, last] element offsets reached by a view (relative to its data pointer)."""
    if t.numel() == 0:
        return (0, -1)
    return (0, sum((n - 1) * s for n, s in zip(t.shape, t.stride())))


def _byte_ranges(t: torch.Tensor) -> np.ndarray:
    return t.data_ptr() + _element_offsets(t) * t.element_size()


def has_internal_overlap(t: torch.Tensor) -> bool:
    """Do two elements of this view share memory?"""
    if t.numel() <= 1:
        return False
    dims = sorted((s, n) for n, s in zip(t.shape, t.stride()) if n > 1)
    reach = 1
    for stride, size in dims:
        if stride < reach:
            break
        reach += stride * (size - 1)  # one past the largest offset the dimensions so far reach
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
    """What every operand must be: a tensor with data, outside autograd, of the rank `what` names."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.is_meta:
        raise ValueError(f"{name} is a meta tensor (a shape without data): a kernel needs {name}'s values; pass a "
                         "tensor on the CPU (interpreter) or on a CUDA device")
    if t.requires_grad:
        raise ValueError(f"{name} requires grad: the kernels write into C as torch's out= functions do, which "
                         f"autograd does not follow; pass {name}.detach() (no gradient flows through these kernels)")
    rank = len(what.split(" x "))
    if t.dim() != rank:
        raise ValueError(f"{name} must be {rank}-D ({what}), got {t.dim()}-D with shape {tuple(t.shape)}")


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
    """A's and B's types, shapes and dtypes (A first): M, N (C's columns) and K."""
    op = variant.operation
    batch = "Bt x " if op.batched else ""
    _check_tensor("A", a, batch + "M x K")
    _check_tensor("B", b, batch + ("K x 2N" if op.gated else "K x N"))
    (M, K), (K2, N2) = a.shape[-2:], b.shape[-2:]
    if op.weight:
        return _check_weight(variant, a, b)
    if K2 != K:
        raise ValueError(f"B has {K2} rows but A has {K} columns (K): the inner dimensions must match")
    if op.batched and a.shape[0] != b.shape[0]:
        raise ValueError(f"A holds {a.shape[0]} problems and B {b.shape[0]}: the batch sizes must match (a shared "
                         "operand is given with batch stride 0, e.g. b.expand(Bt, K, N))")
    if op.gated and N2 % 2:
        raise ValueError(f"B has {N2} columns; a gated kernel's B holds gate and up halves, an even number (2N)")
    if a.dtype not in variant.dtypes:
        accepted = ", ".join(_dtype_name(d) for d in variant.dtypes)
        raise TypeError(f"A has dtype {_dtype_name(a.dtype)}; variant {variant.name!r} takes {accepted}")
    if b.dtype != a.dtype:
        raise TypeError(
            f"B has dtype {_dtype_name(b.dtype)} but A has {_dtype_name(a.dtype)}: A and B must share one dtype"
        )
    return M, N2 // 2 if op.gated else N2, K


def _check_weight(variant: Variant, a, b) -> tuple[int, int, int]:
    """Codes in B other than A's dtype (weight-only, or e2m1 under fp8 or e2m1 A), stored (packed) as the
    operation declares: M, N, K (A's columns; A's e2m1 codes: twice its bytes)."""
    op = variant.operation
    if a.dtype not in variant.dtypes:
        accepted = ", ".join(_dtype_name(d) for d in variant.dtypes)
        raise TypeError(f"A has dtype {_dtype_name(a.dtype)}; variant {variant.name!r} takes {accepted}")
    if b.dtype != op.b_dtype:
        raise TypeError(f"B has dtype {_dtype_name(b.dtype)}; variant {variant.name!r} takes {op.weight} codes stored "
                        f"as {_dtype_name(op.b_dtype)}")
    M, K = a.shape[-2], a.shape[-1] * (2 if op.packs_a(a.dtype) else 1)
    packing = {"k2": "two codes a byte along K", "k8": "eight codes an int32 along K",
               "n8": "eight codes an int32 along N"}[op.packing]
    if op.packing == "n8":  # N's last word may be partial: C's shape says N
        if b.shape[-2] != K:
            raise ValueError(f"B has shape {tuple(b.shape)}; expected ({K}, ceil(N / 8)) for A's K = {K} ({packing})")
        return M, None, K
    N = b.shape[-1]
    expected = op.b_shape(K, N)
    if tuple(b.shape) != expected:
        what = f" ({packing})" if op.weight != "int8" else ""
        raise ValueError(f"B has shape {tuple(b.shape)}; expected {expected} for A's K = {K}{what}")
    return M, N, K


def allocate_output(variant: Variant, a, b) -> torch.Tensor:
    """A fresh M x N output in the variant's default output dtype for these inputs, once A and B pass
    (so a bad A is named before a C of A's M rows is allocated)."""
    M, N, _ = _check_inputs(variant, a, b)
    if N is None:
        raise ValueError(f"B has shape {tuple(b.shape)}, eight codes an int32 along N, so N is known only to a "
                         "multiple of 8: pass C (M x N) to say N")
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


def device_and_dtype(a) -> tuple[str, torch.dtype]:
    """Where A lives and its dtype (problems: the first problem's, as every problem's is the same)."""
    first = a[0] if isinstance(a, (list, tuple)) else a
    return first.device.type, first.dtype


def empty(c) -> bool:
    """C has no element (problems: no problem's C has one)."""
    return sum(t.numel() for t in c) == 0 if isinstance(c, (list, tuple)) else c.numel() == 0


def check(variant: Variant, a, b, c, extras: dict | None = None) -> tuple[int, int, int]:
    """Validate operands for `variant`; return (M, N, K). Raises TypeError or ValueError naming the first
    operand at fault (A, then B, then C, then the extras its operation takes, by keyword)."""
    op = variant.operation
    if op.grouped == "problems":
        return _check_problems(variant, a, b, c)
    if op.grouped:
        return _check_grouped(variant, a, b, c, extras or {})
    M, N, K = _check_inputs(variant, a, b)
    batch = (a.shape[0],) if op.batched else ()
    _check_tensor("C", c, "Bt x M x N" if op.batched else "M x N")
    if N is None:  # B's codes eight an int32 along N
        N = c.shape[-1]
        if -(-N // 8) != b.shape[-1]:
            raise ValueError(f"C has {N} columns (N) but B has {b.shape[-1]} words of eight codes along N; expected "
                             f"ceil(N / 8) = {-(-N // 8)}")
    if tuple(c.shape) != (*batch, M, N):
        raise ValueError(f"C has shape {tuple(c.shape)}; expected {'(Bt, M, N)' if batch else '(M, N)'} = "
                         f"{(*batch, M, N)} for A {tuple(a.shape)} and B {tuple(b.shape)}")
    outs = variant.dtypes[a.dtype]
    if c.dtype not in outs:
        raise TypeError(
            f"C has dtype {_dtype_name(c.dtype)}; for {_dtype_name(a.dtype)} inputs variant {variant.name!r} "
            f"writes {', '.join(_dtype_name(d) for d in outs)}"
        )
    tensors = {"A": a, "B": b, "C": c, **_check_extras(variant, extras or {}, batch, M, N, c.dtype)}
    if op.scaled:
        tensors.update(_check_scales(variant, extras or {}, M, N, K))
    _check_machine(variant, tensors)
    outputs = {name: t for name, t in tensors.items() if name in ("C", "pre")}
    for name, t in outputs.items():
        if has_internal_overlap(t):
            raise ValueError(f"{name} has strides {t.stride()} so two of its elements share memory; {name} must not "
                             "overlap itself")
        for other, u in tensors.items():
            if other != name and overlaps(t, u):
                raise ValueError(f"{name} overlaps {other} in memory; an output must not alias another operand")
    for name, t in tensors.items():
        _check_requirements(variant, name, t)
    return M, N, K


def _check_problems(variant: Variant, a, b, c) -> tuple[int, int, int]:
    """Problems (kernels/operation.py: grouped="problems"): a, b, c lists of G matrices, A[g] (M_g x K_g),
    B[g] (K_g x N_g), C[g] (M_g x N_g), each with unit column stride; returns (sum of M_g, largest N_g,
    largest K_g)."""
    for name, ts in (("a", a), ("b", b), ("c", c)):
        if not isinstance(ts, (list, tuple)) or not ts:
            raise TypeError(f"{name} must be a non-empty list of matrices, one a problem (grouped='problems'), got "
                            f"{type(ts).__name__}")
    if not len(a) == len(b) == len(c):
        raise ValueError(f"a, b and c must list one matrix a problem each; got {len(a)}, {len(b)} and {len(c)}")
    tensors, dims = {}, []
    for g, (x, y, z) in enumerate(zip(a, b, c)):
        for name, t, what in ((f"A[{g}]", x, "M x K"), (f"B[{g}]", y, "K x N"), (f"C[{g}]", z, "M x N")):
            _check_tensor(name, t, what)
            if t.numel() and t.shape[1] > 1 and t.stride(1) != 1:
                raise ValueError(f"{name} has strides {t.stride()}; a problem's matrices have unit column stride (a "
                                 "leading dimension of their own, no column-major or strided columns)")
            tensors[name] = t
        (m, k), (k2, n) = x.shape, y.shape
        if k2 != k:
            raise ValueError(f"B[{g}] has {k2} rows but A[{g}] has {k} columns: each problem's inner dimensions match")
        if tuple(z.shape) != (m, n):
            raise ValueError(f"C[{g}] has shape {tuple(z.shape)}; expected {(m, n)} for A[{g}] {tuple(x.shape)} and "
                             f"B[{g}] {tuple(y.shape)}")
        if x.dtype not in variant.dtypes or y.dtype != x.dtype or z.dtype not in variant.dtypes[x.dtype]:
            raise TypeError(f"problem {g} has A {_dtype_name(x.dtype)}, B {_dtype_name(y.dtype)}, C "
                            f"{_dtype_name(z.dtype)}; variant {variant.name!r} takes "
                            + ", ".join(f"{_dtype_name(i)} -> {'/'.join(map(_dtype_name, o))}"
                                        for i, o in variant.dtypes.items()))
        dims.append((m, n, k))
    if len({t.dtype for name, t in tensors.items() if name[0] == "A"}) > 1:
        raise TypeError("every problem's A must share one dtype")
    _check_machine(variant, tensors)
    outputs = [(name, t) for name, t in tensors.items() if name[0] == "C" and t.numel()]
    for name, t in outputs:
        for other, u in tensors.items():
            if other != name and u.numel() and overlaps(t, u):
                raise ValueError(f"{name} overlaps {other} in memory; an output must not alias another operand")
    for name, t in tensors.items():
        _check_requirements(variant, name, t)
    return sum(m for m, _, _ in dims), max(n for _, n, _ in dims), max(k for _, _, k in dims)


def _check_grouped(variant: Variant, a, b, c, extras: dict) -> tuple[int, int, int]:
    """A grouped operation's operands (kernels/operation.py: `grouped`): A (rows x K), B (G x K x N), C,
    and the metadata, int32 and one-dimensional; returns (A's rows, N, K)."""
    op = variant.operation
    routed = op.grouped == "routed"
    _check_tensor("A", a, "T x K" if routed else "M x K")
    _check_tensor("B", b, "G x K x 2N" if op.gated else "G x K x N")
    _check_tensor("C", c, "T * top_k x N" if routed else "M x N")
    (M, K), (groups, K2, N) = a.shape, b.shape
    if op.gated and N % 2:
        raise ValueError(f"B has {N} columns a group; a gated kernel's B holds gate and up halves, an even number (2N)")
    N = N // 2 if op.gated else N
    if K2 != K:
        raise ValueError(f"B has {K2} rows a group but A has {K} columns (K): the inner dimensions must match")
    if a.dtype not in variant.dtypes:
        raise TypeError(f"A has dtype {_dtype_name(a.dtype)}; variant {variant.name!r} takes "
                        + ", ".join(_dtype_name(d) for d in variant.dtypes))
    if b.dtype != a.dtype:
        raise TypeError(f"B has dtype {_dtype_name(b.dtype)} but A has {_dtype_name(a.dtype)}: they must share one")
    if c.dtype not in variant.dtypes[a.dtype]:
        raise TypeError(f"C has dtype {_dtype_name(c.dtype)}; for {_dtype_name(a.dtype)} inputs variant "
                        f"{variant.name!r} writes " + ", ".join(_dtype_name(d) for d in variant.dtypes[a.dtype]))
    tensors = {"A": a, "B": b, "C": c, **_check_extras(variant, extras, (), M, N, c.dtype, groups)}
    if op.scaled:  # a_scale by A's rows (tokens), b_scale a group each
        tensors.update(_check_scales(variant, extras, M, N, K, groups))
    top_k = extras.get("top_k", 1)
    if routed and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise TypeError(f"top_k must be a positive int, got {top_k!r}")
    rows = M * top_k if routed else M
    if tuple(c.shape) != (rows, N):
        raise ValueError(f"C has shape {tuple(c.shape)}; expected {(rows, N)}" + (f" (T * top_k = {M} * {top_k} rows)"
                                                                                if routed else ""))
    lengths = {"group_index": groups + (op.ragged_index == "starts"), "num_tokens_post_padded": 1}
    for name in ("group_index", "sorted_token_ids", "expert_ids", "num_tokens_post_padded"):
        if name in extras:
            t = extras[name]
            _check_tensor(name, t, "L")
            if t.dtype != torch.int32:
                raise TypeError(f"{name} has dtype {_dtype_name(t.dtype)}; expected int32")
            if name in lengths and t.shape[0] != lengths[name]:
                raise ValueError(f"{name} has {t.shape[0]} entries; expected {lengths[name]}")
            tensors[name] = t
    if routed:
        block = op.block_m if isinstance(op.block_m, int) else None
        ids, experts = extras["sorted_token_ids"], extras["expert_ids"]
        if block and experts.shape[0] < -(-ids.shape[0] // block):
            raise ValueError(f"expert_ids has {experts.shape[0]} entries; sorted_token_ids's {ids.shape[0]} need one "
                             f"a block of {block}, {-(-ids.shape[0] // block)}")
        if op.routed_weight:
            w = extras["topk_weights"]
            _check_tensor("topk_weights", w, "T x top_k")
            if tuple(w.shape) != (M, top_k) or w.dtype != torch.float32:
                raise ValueError(f"topk_weights is {_dtype_name(w.dtype)} {tuple(w.shape)}; expected float32 {(M, top_k)}")
            tensors["topk_weights"] = w
    _check_machine(variant, tensors)
    if has_internal_overlap(c):
        raise ValueError(f"C has strides {c.stride()} so two of its elements share memory; C must not overlap itself")
    for other, u in tensors.items():
        if other != "C" and overlaps(c, u):
            raise ValueError(f"C overlaps {other} in memory; an output must not alias another operand")
    for name, t in tensors.items():
        _check_requirements(variant, name, t)
    return M, N, K


def _check_extras(variant: Variant, extras: dict, batch: tuple, M: int, N: int, out: torch.dtype,
                  groups: int = 0) -> dict:
    """The extras of the variant's operation, by keyword: present, of their shapes and dtypes (grouped,
    `groups` G: a bias a group, G x N)."""
    op = variant.operation
    keywords = op.keywords()
    unexpected = sorted(set(extras) - set(keywords))
    if unexpected:
        takes = ", ".join(keywords) if keywords else "none"
        raise TypeError(f"unexpected extra(s) {', '.join(unexpected)}; variant {variant.name!r} takes {takes} "
                        f"({op.describe()})")
    missing = [e for e in keywords if e not in extras]
    if missing:
        raise TypeError(f"missing extra(s) {', '.join(missing)}: variant {variant.name!r} computes {op.describe()}")
    tensors = {}
    shapes = {"c_in": (*batch, M, N), "residual": (*batch, M, N), "pre": (*batch, M, op.n_columns(N)),
              "bias": (*((groups,) if groups else ()), N if op.bias == "n" else M)}
    for extra in ("alpha", "beta"):
        if extra in extras:
            value = extras[extra]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{extra} must be a Python float, got {type(value).__name__}")
    for extra, shape in shapes.items():
        if extra not in extras:
            continue
        t = extras[extra]
        matrix = ("Bt x " if batch else "") + ("M x 2N" if extra == "pre" and op.gated else "M x N")
        what = matrix if extra != "bias" else ("G x " if groups else "") + op.bias.upper()
        _check_tensor(extra, t, what)
        if tuple(t.shape) != shape:
            raise ValueError(f"{extra} has shape {tuple(t.shape)}; expected {shape}")
        want = (op.bias_dtype or out) if extra == "bias" else out
        if t.dtype != want:
            raise TypeError(f"{extra} has dtype {_dtype_name(t.dtype)}; variant {variant.name!r} takes "
                            f"{_dtype_name(want)} there")
        tensors[extra] = t
    return tensors


_SCALE_SHAPES = {("a", "tensor"): "1", ("a", "row"): "M", ("a", "group"): "M x ceil(K / group_k)",
                 ("b", "tensor"): "1", ("b", "col"): "N", ("b", "group"): "ceil(K / group_k) x N",
                 ("b", "block"): "ceil(K / group_k) x ceil(N / group_n)"}


def _check_scales(variant: Variant, extras: dict, M: int, N: int, K: int, groups: int = 0) -> dict:
    """a_scale and b_scale: fp32 tensors of the shapes their granularity gives (kernels/operation.py; B's,
    `groups` of them where grouped); b_zero: int32, packed zero points."""
    op = variant.operation
    if op.k_multiple_of_group and K % op.group_k:
        raise ValueError(f"K = {K} is not a multiple of group_k = {op.group_k}, which variant {variant.name!r} "
                         "needs (its contract says k_multiple_of_group)")
    tensors = {}
    scale_dtype = SCALE_DTYPES[op.scale_dtype]
    if op.zero:
        t = extras["b_zero"]
        _check_tensor("b_zero", t, "K groups x " + ("ceil(N / 8)" if op.zero == "packed" else "N"))
        want, what = {"float": (scale_dtype, "zero points in the scales' dtype, w = q * s + z"),
                      "int": (torch.int32, "one int4 zero point each"),
                      "packed": (torch.int32, "eight int4 zero points an int32 along N")}[op.zero]
        if tuple(t.shape) != op.zero_shape(N, K) or t.dtype != want:
            raise ValueError(f"b_zero has shape {tuple(t.shape)} and dtype {_dtype_name(t.dtype)}; expected "
                             f"{op.zero_shape(N, K)} {_dtype_name(want)} ({what})")
        tensors["b_zero"] = t
    for extra in (e for e in ("a_scale", "b_scale") if e in op.extras()):  # weight-only: b_scale alone
        t = extras[extra]
        shape = op.scale_shape(extra[0], M, N, K, groups if extra == "b_scale" else 0)
        what = _SCALE_SHAPES[extra[0], getattr(op, extra)]
        if groups and extra == "b_scale":
            what = "G" if what == "1" else f"G x {what}"
        _check_tensor(extra, t, what)
        if tuple(t.shape) != shape:
            raise ValueError(f"{extra} has shape {tuple(t.shape)}; expected {shape} ({getattr(op, extra)} scales "
                             f"of {'A' if extra == 'a_scale' else 'B'}, M, N, K = {M}, {N}, {K})")
        if t.dtype != scale_dtype:
            raise TypeError(f"{extra} has dtype {_dtype_name(t.dtype)}; variant {variant.name!r} takes "
                            f"{_dtype_name(scale_dtype)} scales" + (" (E8M0 bytes)" if op.scale_dtype == "e8m0" else ""))
        tensors[extra] = t
    return tensors


def _check_requirements(variant: Variant, name: str, t: torch.Tensor) -> None:
    req = variant.requirements
    if t.numel() == 0:
        return
    if name.lower() in req.contiguous and not t.is_contiguous():
        raise ValueError(
            f"{name} has shape {tuple(t.shape)} and strides {t.stride()}; variant {variant.name!r} needs {name} "
            f"contiguous (row-major, strides {torch.empty(t.shape, device='meta').stride()})"
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
        dim = t.dim() - 2 if t.stride(-1) == 1 else t.dim() - 1  # the leading (non-contiguous) dimension
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
