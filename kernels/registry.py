"""The table of facts about every kernel variant, read by the generic test machinery.

Modelled on PyTorch's OpInfo: adding a variant is one file in `kernels/` that defines a kernel, a
launcher `launch(a, b, c)` writing `a @ b` into the preallocated `c`, and one `register(Variant(...))`.
Every property of the suite then covers it, aimed at its own block shape and limited to what it
declares it supports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

BlockShape = tuple[int, int, int]  # (BM, BN, BK)

# The input -> output dtypes most variants take: the output in the input's dtype.
SAME_DTYPE = {torch.float16: (torch.float16,), torch.bfloat16: (torch.bfloat16,), torch.float32: (torch.float32,)}


@dataclass(frozen=True)
class Requirements:
    """What a variant needs from its operands and machine. The launcher rejects anything else."""

    cuda: bool = False  # only runs compiled (no interpreter path)
    min_capability: tuple[int, int] | None = None  # e.g. (9, 0) for Hopper-only features
    stride_alignment: int | None = None  # bytes: base pointer and leading stride must be multiples
    max_offset: int | None = None  # largest element offset any operand may reach (int32 index math)
    contiguous: tuple[str, ...] = ()  # operands ("a", "b", "c") that must be contiguous row-major
    positive_strides: bool = False  # no zero strides (the kernel tells the compiler strides > 0)
    contiguous_dim: bool = False  # each operand has one dimension of stride 1 (tensor descriptors)


@dataclass(frozen=True)
class Variant:
    name: str
    launch: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]
    # input dtype -> output dtypes accepted for it (the first is the default output)
    dtypes: Mapping[torch.dtype, tuple[torch.dtype, ...]]
    precision: str  # what fp32 inputs get in tl.dot: "ieee" or "tf32"
    # block shapes (BM, BN, BK) the launcher may use, per device type ("cpu" = interpreter, "cuda")
    blocks: Mapping[str, tuple[BlockShape, ...]]
    origin: str  # the seed document (and section) the kernel comes from
    requirements: Requirements = field(default_factory=Requirements)
    description: str = ""
    # the same inputs always give the same bits (false for atomics whose order varies run to run)
    deterministic: bool = True

    def __repr__(self) -> str:
        return f"Variant({self.name!r})"

    def _repr_pretty_(self, printer, cycle) -> None:  # how Hypothesis prints a falsifying example
        printer.text(repr(self))

    def __post_init__(self):
        if self.precision not in ("ieee", "tf32"):
            raise ValueError(f"variant {self.name!r}: precision must be 'ieee' or 'tf32', got {self.precision!r}")
        for dev, shapes in self.blocks.items():
            if dev not in ("cpu", "cuda") or not shapes or any(len(s) != 3 for s in shapes):
                raise ValueError(f"variant {self.name!r}: blocks[{dev!r}] must be a non-empty tuple of (BM, BN, BK)")

    @property
    def input_dtypes(self) -> tuple[torch.dtype, ...]:
        return tuple(self.dtypes)

    def block_shapes(self, device_type: str) -> tuple[BlockShape, ...]:
        return self.blocks.get(device_type) or next(iter(self.blocks.values()))

    def runs_on(self, backend: str) -> bool:
        return not (self.requirements.cuda and backend == "interpreter")


_REGISTRY: dict[str, Variant] = {}


def register(variant: Variant) -> Variant:
    if variant.name in _REGISTRY:
        raise ValueError(f"variant {variant.name!r} is registered twice")
    _REGISTRY[variant.name] = variant
    return variant


FP32_ONLY = {torch.float32: (torch.float32,)}


def register_precisions(name: str, make_launch: Callable[[str, str], Callable], dtypes, **facts) -> None:
    """Register `name` promising ieee fp32 and `name_tf32`, the same kernel computing fp32 in tf32.

    `make_launch(variant_name, precision)` builds the launcher for one of them."""
    register(Variant(name=name, launch=make_launch(name, "ieee"), dtypes=dtypes, precision="ieee", **facts))
    tf32 = f"{name}_tf32"
    register(Variant(name=tf32, launch=make_launch(tf32, "tf32"), dtypes=FP32_ONLY, precision="tf32", **facts))


def variants() -> list[Variant]:
    """All registered variants, in name order."""
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def get(name: str) -> Variant:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "(none)"
        raise KeyError(f"no variant named {name!r}; registered variants: {known}") from None
