"""Triton's specialization classes, and the pool of them a GPU run draws its cases from.

Triton compiles a kernel once per specialization of its launch: each integer argument is 1, a
multiple of 16, or neither, and each pointer is 16-byte aligned or not (besides the dtypes and the
constexprs). A GEMM launch passes M, N, K, six strides and three pointers; drawn independently,
they made nearly every GPU example a new compilation (about 0.5 s on an H100).

So on a GPU a case is drawn as on the CPU and then *fitted* into one entry of its target's pool: a
fixed list of `Classes`, each fixing the class of M, N and K, each operand's order, inner stride
(unit, 2, or 0 for a broadcast operand), leading stride (as the shape makes it, padded to a multiple
of 16, or padded off one) and pointer alignment, and the configuration and C's dtype. The pool's
size is the target's compile budget: however many examples run, the kernel is specialized at most
that many ways (a launcher that derives other integers from the shapes may add a few).

The pool is the same in every run (it depends on nothing but its size and the variant's choices):
  entry 0   the plainest case: M = N = K = 1, every operand row-major, natural strides, aligned, the
            default configuration and output dtype; a failure shrinks toward it;
  then      rounds of entries in which every class of every component appears at least once (so every
            class stays reachable), each entry followed by its transpose (the metamorphic transposition
            then reuses the compiled kernels).
Fitting changes a drawn case as little as it can (a size to the nearest of its class, a padding by
the fewest elements), so the sizes still fall on and around the block boundaries. The runner's final
simplification (plain layouts, dimensions bisected) is not bound to the pool.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, replace

from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.properties.model import runnable
from gemm_fuzz.properties.model.cases import GemmCase, Layout
from gemm_fuzz.reference.formats import by_name, name_of

INTEGER_CLASSES = ("1", "16", "other")  # Triton's: == 1, divisible by 16, neither
ORDERS = ("row", "col")
INNER = ("unit", "step", "bcast")  # inner stride 1, 2, or 0 (a broadcast operand)
LEAD = ("natural", "16", "other")  # leading stride as the shape makes it, padded to 16 | n, padded off it
ALIGNMENT = 16  # bytes: Triton specializes pointers on this
ROUND_ENTRIES = 3  # entries per round before their transposes: every component's classes appear in a round


@dataclass(frozen=True)
class OperandClass:
    order: str = "row"
    inner: str = "unit"
    lead: str = "natural"
    aligned: bool = True

    def transposed(self) -> OperandClass:
        return replace(self, order="col" if self.order == "row" else "row")


@dataclass(frozen=True)
class Classes:
    """One pool entry: the classes a fitted case's launch has."""

    dims: tuple[str, str, str] = ("1", "1", "1")  # M, N, K
    a: OperandClass = OperandClass()
    b: OperandClass = OperandClass()
    c: OperandClass = OperandClass()
    config: int = 0  # index into the variant's configurations for the device and dtype
    out: int = 0  # index into the output dtypes the variant takes for the input dtype

    def transposed(self) -> Classes:
        """The classes of (B^T A^T)^T's launch: N x M x K, B^T and A^T as the inputs, C^T the output."""
        m, n, k = self.dims
        return replace(self, dims=(n, m, k), a=self.b.transposed(), b=self.a.transposed(), c=self.c.transposed())


def _choices(variant: Variant, dtype: str, device_type: str) -> tuple[int, int]:
    """How many configurations and output dtypes the target has."""
    return len(variant.configs_for(device_type, by_name(dtype).dtype)), len(variant.dtypes[by_name(dtype).dtype])


def pool(variant: Variant, dtype: str, size: int, device_type: str = "cuda") -> tuple[Classes, ...]:
    """The first `size` entries of the target's pool (see the module docstring)."""
    return _pool(*_choices(variant, dtype, device_type), size)


@functools.cache  # a pool depends on nothing but these: built once, not for every case drawn
def _pool(configs: int, outs: int, size: int) -> tuple[Classes, ...]:
    width = max(ROUND_ENTRIES, configs, outs)
    entries = [Classes()]
    rounds = 0
    while len(entries) < size:
        entries += [e for entry in _round(rounds, width, configs, outs) for e in (entry, entry.transposed())]
        rounds += 1
    return tuple(entries[:size])


def pool_size(variant: Variant, dtype: str, rounds: int = 1, device_type: str = "cuda") -> int:
    """The size of a pool of the plain entry and `rounds` rounds; one round is the smallest pool in which
    every class of every component appears."""
    return 1 + 2 * rounds * max(ROUND_ENTRIES, *_choices(variant, dtype, device_type))


def _round(index: int, width: int, configs: int, outs: int) -> list[Classes]:
    """`width` entries in which each component takes each of its classes at least once, in an order of
    its own (fixed per round and component, so the pool is the same in every run)."""

    def column(name: str, values) -> list:
        values = list(values)
        spread = (values * (width // len(values) + 1))[:width]
        random.Random(f"{index}:{name}").shuffle(spread)
        return spread

    dims = [column(axis, INTEGER_CLASSES) for axis in "MNK"]
    operands = {}
    for name in "abc":
        inner = INNER if name != "c" else INNER[:2]  # C is never broadcast
        operands[name] = [OperandClass(*parts) for parts in zip(
            column(f"{name}.order", ORDERS), column(f"{name}.inner", inner), column(f"{name}.lead", LEAD),
            column(f"{name}.aligned", (True, False)))]
    config, out = column("config", range(configs)), column("out", range(outs))
    return [Classes((dims[0][i], dims[1][i], dims[2][i]), operands["a"][i], operands["b"][i], operands["c"][i],
                    config[i], out[i]) for i in range(width)]


# --- fitting a drawn case into an entry --------------------------------------------------------------


def fit_size(size: int, cls: str, top: int) -> int:
    """The size of class `cls` nearest `size` (up to `top`)."""
    if cls == "1":
        return 1
    if cls == "16":
        up = size + (-size) % 16
        return up if up <= top else max(16, size - size % 16)
    if size != 1 and size % 16:
        return size
    return size + 1 if size + 1 <= top else size - 1


def fit(case: GemmCase, entry: Classes, variant: Variant, device_type: str, tops: tuple[int, int, int]) -> GemmCase:
    """`case` changed as little as it takes for its launch to have the classes of `entry` (within what
    the variant accepts: a contiguous operand stays as it is, a descriptor's alignment is kept)."""
    m, n, k = (fit_size(size, cls, top) for size, cls, top in zip((case.M, case.N, case.K), entry.dims, tops))
    space = variant.configs_for(device_type, by_name(case.dtype).dtype)
    index = runnable.usable(entry.config % len(space), len(space), runnable.blocked(variant, case.dtype))
    outs = variant.dtypes[by_name(case.dtype).dtype]
    out = name_of(outs[entry.out % len(outs)])
    if case.groups is not None and case.groups.problems:  # sizes and strides reach the kernel in arrays
        return replace(case, out_dtype=out, config=tuple(space[index].items()) if index else ())
    shapes = {"a": (m, k, case.dtype), "b": (k, variant.operation.n_columns(n), case.dtype), "c": (m, n, out)}
    layouts = {name: _batch_kept(getattr(case, name), _fit_layout(getattr(case, name), getattr(entry, name),
                                                                   variant, name, *shapes[name]))
               for name in "abc"}
    groups = case.groups.covering(m) if case.groups is not None else None  # ragged groups cover the new M
    return replace(case, M=m, N=n, K=k, out_dtype=out, config=tuple(space[index].items()) if index else (),
                   groups=groups, **layouts)


def _batch_kept(drawn: Layout, fitted: Layout) -> Layout:
    """The fitted layout with how the drawn one's problems sit (a gap, overlapping, shared)."""
    if drawn.broadcast == "batch":
        return replace(fitted, broadcast="batch", batch_gap=drawn.batch_gap)
    return replace(fitted, batch_gap=drawn.batch_gap)


def _fit_layout(drawn: Layout, cls: OperandClass, variant: Variant, operand: str, rows: int, cols: int,
                dtype: str) -> Layout:
    req = variant.requirements
    if operand in req.contiguous:
        return Layout()
    itemsize = by_name(dtype).dtype.itemsize
    aligned_unit = max(1, ALIGNMENT // itemsize)  # elements per 16 bytes
    if req.stride_alignment:  # tensor descriptors: unit inner stride, leading stride and base kept aligned
        unit = max(1, req.stride_alignment // itemsize)
        base = max(cols if cls.order == "row" else rows, 1)
        extra = drawn.pad // unit if drawn.order == cls.order and cls.lead != "natural" else 0
        pad = (-base) % unit + unit * extra
        if cls.lead != "natural":
            pad = _fit_lead(base, pad, cls.lead, unit)
        elif base % 16 and (base + pad) % 16 == 0 and unit % 16:
            pad += unit  # as little padding as alignment needs, of the class of the dimension it spans
        return Layout(cls.order, pad=pad, offset=drawn.offset - drawn.offset % unit)  # C's dtype may have changed
    step = 2 if cls.inner == "step" and not req.contiguous_dim else 1
    broadcast = ""
    if cls.inner == "bcast" and operand != "c" and not req.positive_strides and not req.contiguous_dim:
        broadcast = "cols" if cls.order == "row" else "rows"  # the inner stride is the zero one
    lead_dim = max(cols if cls.order == "row" else rows, 1)
    base = lead_dim * step
    if cls.lead == "natural":  # unpadded, so of the class of the dimension it spans (a step of 2 aside)
        pad = 1 if base % 16 == 0 and lead_dim % 16 else 0
    else:
        pad = _fit_lead(base, drawn.pad, cls.lead, 1)
    offset = drawn.offset
    if cls.aligned:
        offset -= offset % aligned_unit
    elif offset % aligned_unit == 0:
        offset += 1
    return Layout(cls.order, pad=pad, step=step, offset=offset, broadcast=broadcast)


def _fit_lead(base: int, pad: int, lead: str, unit: int) -> int:
    """The padding, moved in steps of `unit` elements, that gives a leading stride of class `lead`."""
    if unit % 16 == 0:  # every aligned leading stride is a multiple of 16 already
        return pad
    while ((base + pad) % 16 == 0) != (lead == "16") or base + pad == 1:
        pad += unit
    return pad


def signature(case: GemmCase) -> tuple:
    """The classes Triton specializes a launch on that passes the case's M, N, K, strides and
    pointers: what `fit` aims at, and what tests count."""

    def cls(value: int) -> str:
        return "1" if value == 1 else "16" if value % 16 == 0 else "other"

    strides = []
    aligned = []
    for layout, (rows, cols), dtype in ((case.a, (case.M, case.K), case.dtype), (case.b, (case.K, case.N), case.dtype),
                                        (case.c, (case.M, case.N), case.out_dtype)):
        strides += [cls(s) for s in layout.strides(rows, cols)]
        aligned.append(layout.offset * by_name(dtype).dtype.itemsize % ALIGNMENT == 0)
    return (cls(case.M), cls(case.N), cls(case.K), *strides, *aligned, case.out_dtype, case.config)
