"""The contract of a user's kernel: what it takes, computes and needs, declared on the function the
suite calls and read into the same `Variant` the built-in kernels register.

    import torch
    from gemm_fuzz.kernels import Requirements, contract

    @contract(dtypes={torch.int8: (torch.int32,), torch.float16: (torch.float16, torch.float32)},
              blocks=(64, 64, 32), requires=Requirements(contiguous=("a", "b")))
    def matmul(a, b, c): ...

Every field has a default, so an undecorated FUNC(a, b, c) is tested as `Contract()` describes.
The contract is checked when it is declared: a wrong value fails at import, saying what is expected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import torch

from gemm_fuzz.kernels.declaration import refuse_unknown
from gemm_fuzz.kernels.dtypes import dtypes_for
from gemm_fuzz.kernels.operation import PLAIN, Operation
from gemm_fuzz.kernels.registry import SAME_DTYPE, BlockShape, Config, Requirements, Variant

SIGNATURES = ("plain", "leetgpu")  # FUNC(a, b, c), or LeetGPU's solve(a, b, c, M, N, K)
ATTRIBUTE = "gemm_contract"  # where `contract` leaves the Contract on the function


def _name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class Contract:
    # input dtype -> the output dtypes C may have for it, the first the default
    dtypes: Mapping[torch.dtype, tuple[torch.dtype, ...]] = field(default_factory=lambda: dict(SAME_DTYPE))
    precision: str = "ieee"  # what fp32 inputs get: "ieee" or "tf32"
    blocks: BlockShape = (16, 32, 16)  # (BM, BN, BK): aims the shapes at the tile boundaries
    # the configurations FUNC takes as `config=` (dicts with BM, BN, BK and anything else), the first
    # the default; () for a kernel with one configuration (an @triton.autotune'd one brings its own)
    configs: tuple[Config, ...] = ()
    requires: Requirements = field(default_factory=Requirements)  # the operands' preconditions
    # split-K into C: each element is the sum of up to S partials added with atomics in C's dtype (an
    # int S, or the configuration key holding it, e.g. "SPLIT_K"); None: C is written once
    partial_sums_in_output: int | str | None = None
    # the same inputs always give the same bits; None: unless partial sums are added in C
    deterministic: bool | None = None
    signature: str = "plain"
    # two lanes of one store may write one element (rows aliased on purpose): allowed, not reported
    duplicate_stores: bool = False
    # what FUNC computes beyond C = A @ B, and the keywords it takes the extras as (kernels/operation.py)
    operation: Operation = PLAIN

    def __post_init__(self):
        _check_dtypes(self.dtypes, self.operation if isinstance(self.operation, Operation) else PLAIN)
        object.__setattr__(self, "dtypes", {d: tuple(outs) for d, outs in self.dtypes.items()})
        if self.precision not in ("ieee", "tf32"):
            raise ValueError(f"contract: precision={self.precision!r}; expected 'ieee' or 'tf32'")
        if not (isinstance(self.blocks, (tuple, list)) and len(self.blocks) == 3
                and all(isinstance(x, int) and x > 0 for x in self.blocks)):
            raise ValueError(f"contract: blocks={self.blocks!r}; expected (BM, BN, BK), three positive ints")
        object.__setattr__(self, "blocks", tuple(self.blocks))
        if not isinstance(self.configs, (tuple, list)) or not all(isinstance(c, Mapping) for c in self.configs):
            raise ValueError(f"contract: configs={self.configs!r}; expected a list of dicts, e.g. "
                             "[dict(BM=64, BN=64, BK=32), dict(BM=32, BN=64, BK=32)]")
        object.__setattr__(self, "configs", tuple(dict(c) for c in self.configs))
        if not isinstance(self.requires, Requirements):
            raise ValueError(f"contract: requires={self.requires!r}; expected gemm_fuzz.kernels.Requirements(...)")
        if not isinstance(self.operation, Operation):
            raise ValueError(f"contract: operation={self.operation!r}; expected gemm_fuzz.kernels.Operation(...)")
        if not isinstance(self.duplicate_stores, bool):
            raise ValueError(f"contract: duplicate_stores={self.duplicate_stores!r}; expected True or False")
        named = ("a", "b", "c", *(e for e in self.operation.extras() if e not in ("alpha", "beta")))
        unknown = set(self.requires.contiguous) - set(named)
        if unknown:
            raise ValueError(f"contract: Requirements(contiguous={self.requires.contiguous!r}) names "
                             f"{', '.join(sorted(unknown))}; the operands are {', '.join(map(repr, named))}")
        if self.signature not in SIGNATURES:
            raise ValueError(f"contract: signature={self.signature!r}; expected one of {', '.join(SIGNATURES)}")
        if self.signature == "leetgpu" and not self.operation.plain:
            raise ValueError("contract: signature='leetgpu' takes solve(a, b, c, M, N, K) only; an operation "
                             "beyond C = A @ B needs the plain signature, FUNC(a, b, c, <extras by keyword>)")
        self.operation.check_dtypes(self.dtypes)
        if self.deterministic and self.partial_sums_in_output is not None:
            raise ValueError("contract: deterministic=True with partial_sums_in_output: partial sums added with "
                             "atomics arrive in any order, so the bits vary; leave deterministic out")

    @property
    def is_deterministic(self) -> bool:
        return self.partial_sums_in_output is None if self.deterministic is None else self.deterministic

    def variant(self, name: str, launch: Callable[..., None], configs: Sequence[Config], origin: str,
                description: str = "") -> Variant:
        """The Variant of a kernel under this contract, launched by `launch(a, b, c, config=None)` over
        `configs` (this contract's, an autotuner's, or the one its blocks describe)."""
        requires = self.requires
        if self.signature == "leetgpu":  # LeetGPU passes no strides: everything is contiguous
            requires = replace(requires, contiguous=("a", "b", "c"))
        space = tuple(configs) or (dict(zip(("BM", "BN", "BK"), self.blocks)),)
        return Variant(name=name, launch=launch, dtypes=self.dtypes, precision=self.precision,
                       configs={"cpu": space, "cuda": space}, origin=origin, requirements=requires,
                       description=description, deterministic=self.is_deterministic,
                       duplicate_stores=self.duplicate_stores,
                       partial_sums_in_output=self.partial_sums_in_output, operation=self.operation)


def _check_dtypes(dtypes, operation: Operation = PLAIN) -> None:
    example = "e.g. {torch.float16: (torch.float16, torch.float32), torch.int8: (torch.int32,)}"
    pairs = dtypes_for(operation)
    if not isinstance(dtypes, Mapping) or not dtypes:
        raise ValueError(f"contract: dtypes={dtypes!r}; expected a dict of input dtype -> output dtypes, {example}")
    for d, outs in dtypes.items():
        if d not in pairs:
            raise ValueError(f"contract: input dtype {d!r} is not one the suite tests"
                             f"{' as scaled codes' if operation.scaled else ''}; it tests "
                             f"{', '.join(_name(x) for x in pairs)}")
        if not isinstance(outs, (tuple, list)) or not outs:
            raise ValueError(f"contract: dtypes[{_name(d)}] = {outs!r}; expected a non-empty tuple of output "
                             f"dtypes, {example}")
        wrong = [o for o in outs if o not in pairs[d]]
        if wrong:
            raise ValueError(f"contract: {_name(d)} inputs into {', '.join(map(_name, wrong))} is not a pair the "
                             f"suite tests; {_name(d)} {'codes' if operation.scaled else 'inputs'} go into "
                             f"{', '.join(map(_name, pairs[d]))}")


def contract(**declared) -> Callable:
    """Decorate the function the suite calls with its Contract (the fields above, by keyword)."""
    refuse_unknown("contract", Contract, declared)
    declaration = Contract(**declared)

    def attach(fn):
        setattr(fn, ATTRIBUTE, declaration)
        return fn

    return attach


def of(fn) -> Contract:
    """The contract `fn` declares (the defaults when it declares none)."""
    found = getattr(fn, ATTRIBUTE, None)
    return found if isinstance(found, Contract) else Contract()
