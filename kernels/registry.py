"""The table of facts about every kernel variant, read by the generic test machinery.

Modelled on PyTorch's OpInfo: adding a variant is one file in `kernels/` that defines a kernel, a
launcher `launch(a, b, c, config=None)` writing `a @ b` into the preallocated `c`, and one
`register(Variant(...))`. Every property of the suite then covers it, aimed at its own block shapes,
drawing from its own configuration space and limited to what it declares it supports.

A variant's configuration space is a tuple of configurations per device type ("cpu" is the
interpreter, "cuda" compiled; "cuda/fp32" and the like override it for one input dtype), the first
being the default. A configuration is a dict of what the launcher lets vary: tile sizes BM, BN, BK,
and where they apply num_warps, num_stages, GROUP_M, SPLIT_K, the program count, ... The strategies
draw one per example (shrinking to the default); `launch(..., config=None)` runs the default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

from gemm_fuzz.kernels.declaration import keywords_checked
from gemm_fuzz.kernels.operation import PLAIN, Operation

BlockShape = tuple[int, int, int]  # (BM, BN, BK)
Config = Mapping[str, object]

# The input -> output dtypes most variants take: the output in the input's dtype.
SAME_DTYPE = {torch.float16: (torch.float16,), torch.bfloat16: (torch.bfloat16,), torch.float32: (torch.float32,)}


@keywords_checked("requirements")
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
    launch: Callable[..., None]  # launch(a, b, c, config=None)
    # input dtype -> output dtypes accepted for it (the first is the default output)
    dtypes: Mapping[torch.dtype, tuple[torch.dtype, ...]]
    precision: str  # what fp32 inputs get in tl.dot: "ieee" or "tf32"
    # configurations per device type ("cpu", "cuda", or "cuda/<input dtype>"), the first the default
    configs: Mapping[str, tuple[Config, ...]]
    origin: str  # the seed document (and section) the kernel comes from
    requirements: Requirements = field(default_factory=Requirements)
    description: str = ""
    # the same inputs always give the same bits (false for atomics whose order varies run to run)
    deterministic: bool = True
    # split-K into C itself: each element of C is the sum of up to S partial sums added with atomics in
    # C's dtype, each addition rounding there. None: C is written once; an int: S; a str: the
    # configuration key that holds S (e.g. "SPLIT_K")
    partial_sums_in_output: int | str | None = None
    operation: Operation = PLAIN  # what it computes beyond C = A @ B (kernels/operation.py)
    # two lanes of one store may write one element (kernels that alias rows): not a finding when declared
    duplicate_stores: bool = False

    def __repr__(self) -> str:
        return f"Variant({self.name!r})"

    def __post_init__(self):
        if self.precision not in ("ieee", "tf32"):
            raise ValueError(f"variant {self.name!r}: precision must be 'ieee' or 'tf32', got {self.precision!r}")
        for where, options in self.configs.items():
            if where.split("/")[0] not in ("cpu", "cuda") or not options:
                raise ValueError(f"variant {self.name!r}: configs[{where!r}] must be a non-empty tuple of "
                                 "configurations for 'cpu', 'cuda' or 'cuda/<dtype>'")
            for option in options:
                if not {"BM", "BN", "BK"} <= set(option):
                    raise ValueError(f"variant {self.name!r}: configuration {dict(option)} lacks BM, BN or BK")
                block = self.operation.block_m
                if isinstance(block, str) and not (isinstance(option.get(block), int) and option[block] >= 1):
                    raise ValueError(f"variant {self.name!r}: block_m names configuration key {block!r}, but "
                                     f"configuration {dict(option)} has no positive int there")
                partials = self.partial_sums_in_output
                if isinstance(partials, str) and not (isinstance(option.get(partials), int) and option[partials] >= 1):
                    raise ValueError(f"variant {self.name!r}: partial_sums_in_output names configuration key "
                                     f"{partials!r}, but configuration {dict(option)} has no positive int there")
        partials = self.partial_sums_in_output
        if partials is not None:
            if not isinstance(partials, (int, str)) or isinstance(partials, bool) or (
                    isinstance(partials, int) and partials < 1):
                raise ValueError(f"variant {self.name!r}: partial_sums_in_output must be a count >= 1 or the name "
                                 f"of a configuration key, got {partials!r}")
            if self.deterministic:
                raise ValueError(f"variant {self.name!r}: partial sums added with atomics arrive in any order; "
                                 "such a variant is not deterministic")
            if self.operation.has_epilogue:
                raise ValueError(f"variant {self.name!r}: an epilogue applies to the whole sum, so partial sums "
                                 "cannot be added into C with atomics")
        if not isinstance(self.operation, Operation):
            raise ValueError(f"variant {self.name!r}: operation={self.operation!r}; expected "
                             "gemm_fuzz.kernels.Operation(...)")
        try:
            self.operation.check_dtypes(self.dtypes)
        except ValueError as e:
            raise ValueError(f"variant {self.name!r}: {e}") from None

    def configs_for(self, device_type: str, dtype: torch.dtype | None = None) -> tuple[Config, ...]:
        """The configurations the launcher takes on this device for this input dtype, default first."""
        if dtype is not None:
            from gemm_fuzz.reference.formats import by_dtype

            specific = self.configs.get(f"{device_type}/{by_dtype(dtype).name}")
            if specific:
                return specific
        return self.configs.get(device_type) or next(iter(self.configs.values()))

    def config(self, device_type: str, dtype: torch.dtype, chosen: Config | None = None) -> dict:
        """The configuration to launch: the default, or `chosen` checked against the space's keys."""
        default = dict(self.configs_for(device_type, dtype)[0])
        if not chosen:
            return default
        unknown = set(chosen) - set(default)
        if unknown:
            raise ValueError(f"variant {self.name!r} has no configuration key(s) {', '.join(sorted(unknown))}; "
                             f"its configurations set {', '.join(default)}")
        return {**default, **chosen}

    def operation_in(self, device_type: str, dtype: torch.dtype, chosen=()) -> Operation:
        """The operation as one launch in configuration `chosen` ((key, value) pairs or a dict; () the
        default) computes it: a routed block size named by a configuration key resolved to its int."""
        if not isinstance(self.operation.block_m, str):
            return self.operation
        block = self.config(device_type, dtype, dict(chosen) or None)[self.operation.block_m]
        return dataclasses.replace(self.operation, block_m=int(block))

    def output_partials(self, config: Config) -> int:
        """S, the partial sums of one element of C added in C's dtype under the (full) `config`; 0 when
        C is written once."""
        partials = self.partial_sums_in_output
        if partials is None:
            return 0
        return int(config[partials]) if isinstance(partials, str) else partials

    def block_shapes(self, device_type: str) -> tuple[BlockShape, ...]:
        """Every (BM, BN, BK) of the device's configurations, for aiming shapes at tile boundaries."""
        shapes = [(int(c["BM"]), int(c["BN"]), int(c["BK"]))
                  for where, options in self.configs.items() if where.split("/")[0] == device_type for c in options]
        return tuple(dict.fromkeys(shapes)) or tuple(
            dict.fromkeys((int(c["BM"]), int(c["BN"]), int(c["BK"])) for c in next(iter(self.configs.values()))))

    def runs_on(self, backend: str) -> bool:
        return not (self.requirements.cuda and backend == "interpreter")


_REGISTRY: dict[str, Variant] = {}
_CAPTURE: list[list[Variant]] = []  # open capture() blocks, innermost last


def register(variant: Variant) -> Variant:
    """Add a variant to the registry (inside `capture()`, to the block's list instead)."""
    if _CAPTURE:
        _CAPTURE[-1].append(variant)
        return variant
    if variant.name in _REGISTRY:
        raise ValueError(f"variant {variant.name!r} is registered twice")
    _REGISTRY[variant.name] = variant
    return variant


class capture:
    """`with capture() as found:` collects the variants a module registers while it is imported, without
    registering them (a mutant is its parent module, edited and imported again)."""

    def __enter__(self) -> list[Variant]:
        _CAPTURE.append([])
        return _CAPTURE[-1]

    def __exit__(self, *exc) -> bool:
        _CAPTURE.pop()
        return False


FP32_ONLY = {torch.float32: (torch.float32,)}
INT32_OFFSETS = Requirements(max_offset=2**31 - 1)  # what kernels indexing in 32-bit arithmetic need
LAUNCH_OPTIONS = ("num_warps", "num_stages")  # what a configuration may set for the launch itself


def launcher(name: str, validate: Callable[[Config], object] | None = None):
    """The launcher of the variant registered as `name`, from its body `body(a, b, c, M, N, K, cfg, **extras)`,
    after what every launcher does first: the operands (and the extras its operation takes, by keyword)
    checked against the variant's declaration, naming the first one at fault (nothing is written before),
    nothing launched for an empty C, and the configuration resolved (the one given, checked by `validate`
    first if given, over the default)."""

    def wrap(body: Callable[..., None]) -> Callable[..., None]:
        def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, config: Config | None = None,
                   **extras) -> None:
            from gemm_fuzz.kernels import operands

            variant = get(name)
            M, N, K = operands.check(variant, a, b, c, extras)
            if operands.empty(c):
                return
            if config is not None and validate is not None:
                validate(config)
            body(a, b, c, M, N, K, variant.config(*operands.device_and_dtype(a), config), **extras)

        launch.__module__ = body.__module__  # the kernel's module (a mutant re-imports it, edited)
        return launch

    return wrap


def options(config: Config) -> dict:
    """The launch options (num_warps, num_stages) a configuration sets."""
    return {key: config[key] for key in LAUNCH_OPTIONS if key in config}


def register_precisions(name: str, make_launch: Callable[[str, str], Callable], configs, requirements: Requirements,
                        *, origin: str, description: str, dtypes=None, **facts) -> None:
    """Register `name` promising ieee fp32 and `name_tf32`, the same kernel computing fp32 in tf32, over
    `dtypes` (default every pair the suite tests, kernels.dtypes.ALL_DTYPES).

    `make_launch(variant_name, precision)` builds the launcher for one of them."""
    from gemm_fuzz.kernels.dtypes import ALL_DTYPES

    facts = dict(configs=configs, requirements=requirements, origin=origin, description=description, **facts)
    register(Variant(name=name, launch=make_launch(name, "ieee"), dtypes=dtypes or ALL_DTYPES, precision="ieee",
                     **facts))
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
