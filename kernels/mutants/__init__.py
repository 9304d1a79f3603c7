"""Deliberately wrong kernels: each is a real variant of `kernels/` with one realistic bug planted,
kept to measure the suite's power (tests/test_mutants.py) against a fixed-grid baseline
(tests/test_baseline.py).

They are not variants: `kernels.variants()` skips this package, so the property tests never see
them. Each module registers one `Mutant` (or a closely related pair) whose `variant` is a full
`kernels.registry.Variant`, so the suite's runner and strategies take it unchanged, and whose
other fields say what is wrong and the smallest case that shows it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass

from kernels.registry import Variant

CaseFields = Mapping[str, object]  # GemmCase fields other than the dtypes (layouts as Layout fields)


@dataclass(frozen=True)
class Mutant:
    variant: Variant
    bug: str  # the bug class, one line
    dtype: str  # the input dtype it is tested with ("fp32" for tf32-vs-ieee bugs)
    # The smallest case that exposes it, as GemmCase fields (M, N, K and whatever else matters;
    # the rest default: row-major, no padding, profile "ones", seed 0, the default output dtype).
    # Shrinking must land exactly here, unless `shrinks_to` says where and why it stops earlier.
    smallest: CaseFields
    why: str  # one line: why that case is the smallest
    caught_as: str  # the failure it raises there, e.g. "OutOfBoundsAccess" (the sanitizer), "NotBitExact"
    gpu_only: bool = False  # a bug the interpreter cannot show (tested with -m gpu)
    gpu_only_why: str = ""  # one line: why the interpreter cannot show it
    # Changes to `smallest` under which the kernel is right: the bug shows only where claimed.
    unaffected: CaseFields | None = None
    # Where Hypothesis's shrinking lands instead of `smallest`, when it stops in a local minimum
    # (failures that depend on the values, not monotonic in the sizes), and why.
    shrinks_to: CaseFields | None = None
    shrinks_to_why: str = ""

    @property
    def name(self) -> str:
        return self.variant.name


_MUTANTS: dict[str, Mutant] = {}


def register(mutant: Mutant) -> Mutant:
    if mutant.gpu_only != bool(mutant.gpu_only_why):
        raise ValueError(f"mutant {mutant.name!r}: a GPU-only mutant says why (gpu_only_why), and only it")
    if mutant.name in _MUTANTS:
        raise ValueError(f"mutant {mutant.name!r} is registered twice")
    _MUTANTS[mutant.name] = mutant
    return mutant


def mutants() -> list[Mutant]:
    """Every mutant, in name order."""
    return [_MUTANTS[name] for name in sorted(_MUTANTS)]


def get(name: str) -> Mutant:
    try:
        return _MUTANTS[name]
    except KeyError:
        raise KeyError(f"no mutant named {name!r}; registered mutants: {', '.join(sorted(_MUTANTS))}") from None


def variant(name: str) -> Variant:
    """The Variant of a mutant: what its launcher validates its operands against."""
    return get(name).variant


for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if not _module.startswith("_"):
        importlib.import_module(f"{__name__}.{_module}")
