"""What a run tests: (variant, input dtype) pairs, chosen by dtype selector and variant glob.

Dtype selectors name what a user thinks of as a dtype: fp32 inputs are `fp32` on variants that
promise ieee and `tf32` on variants that promise tf32; `fp8` means both fp8 formats.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from kernels.registry import Variant
from reference.formats import name_of

SELECTORS = ("fp16", "bf16", "fp32", "tf32", "fp8e4m3", "fp8e5m2", "int8")
ALIASES = {"fp8": ("fp8e4m3", "fp8e5m2")}


@dataclass(frozen=True)
class Target:
    variant: Variant
    dtype: str  # input dtype name (fp32 for tf32 too)

    def __repr__(self) -> str:
        return f"Target({self.id})"

    def _repr_pretty_(self, printer, cycle) -> None:  # how Hypothesis prints a falsifying example
        printer.text(repr(self))

    @property
    def selector(self) -> str:
        return "tf32" if self.dtype == "fp32" and self.variant.precision == "tf32" else self.dtype

    @property
    def id(self) -> str:
        return f"{self.variant.name}-{self.selector}"


def resolve(name: str, kernel_spec: str | None = None, signature: str | None = None) -> Variant:
    """A variant by name: built in, a mutant, or the user's kernel (`user:FUNC` with kernel_spec)."""
    import kernels

    if name.startswith("user:"):
        if not kernel_spec:
            raise KeyError(f"{name!r} is a user kernel, but no kernel specification (PATH.py:FUNC) was given")
        from properties.run import user_kernel

        return user_kernel.load(kernel_spec, signature)
    try:
        return kernels.get(name)
    except KeyError as builtin_error:
        from kernels import mutants

        try:
            return mutants.variant(name)
        except KeyError:
            raise builtin_error from None


def parse_selectors(names: list[str] | None) -> tuple[str, ...]:
    """Expand aliases and refuse unknown names with the list of valid ones."""
    if not names:
        return SELECTORS
    chosen: list[str] = []
    for name in names:
        for part in name.split(","):
            part = part.strip().lower()
            if part in ALIASES:
                chosen += ALIASES[part]
            elif part in SELECTORS:
                chosen.append(part)
            else:
                valid = ", ".join(SELECTORS + tuple(ALIASES))
                raise ValueError(f"unknown dtype {part!r}; expected one of {valid}")
    return tuple(dict.fromkeys(chosen))


def targets(variants: list[Variant], selectors: tuple[str, ...] = SELECTORS,
            globs: list[str] | None = None) -> list[Target]:
    chosen = []
    for v in variants:
        if globs and not any(fnmatch.fnmatchcase(v.name, g) for g in globs):
            continue
        for dtype in v.dtypes:
            t = Target(v, name_of(dtype))
            if t.selector in selectors:
                chosen.append(t)
    return chosen
