"""What a run tests: (variant, input dtype) pairs, chosen by dtype selector and variant glob.

Dtype selectors name what a user thinks of as a dtype: fp32 inputs are `fp32` on variants that
promise ieee and `tf32` on variants that promise tf32; `fp8` means both fp8 formats; `fp4` (fp4e2m1)
is e2m1 codes in A (MXFP4, NVFP4).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.reference.formats import name_of

SELECTORS = ("fp16", "bf16", "fp32", "tf32", "fp8e4m3", "fp8e5m2", "int8", "fp4e2m1")
ALIASES = {"fp8": ("fp8e4m3", "fp8e5m2"), "fp4": ("fp4e2m1",)}


@dataclass(frozen=True)
class Target:
    variant: Variant
    dtype: str  # input dtype name (fp32 for tf32 too)

    def __repr__(self) -> str:
        return f"Target({self.id})"

    @property
    def selector(self) -> str:
        return "tf32" if self.dtype == "fp32" and self.variant.precision == "tf32" else self.dtype

    @property
    def id(self) -> str:
        return f"{self.variant.name}-{self.selector}"


def resolve(name: str) -> Variant:
    """A variant by name: built in, a mutant, or a user's kernel loaded in this process."""
    from gemm_fuzz import kernels

    if name.startswith("user:"):
        from gemm_fuzz.properties.launch import user_kernel

        found = user_kernel.loaded(name)
        if found is None:
            raise KeyError(f"{name!r} is a user kernel that is not loaded in this process")
        return found[0]
    try:
        return kernels.get(name)
    except KeyError as builtin_error:
        from gemm_fuzz.kernels import mutants

        try:
            return mutants.variant(name)
        except KeyError:
            raise builtin_error from None


def selector_of(example: dict) -> str:
    """The dtype selector an example (as a dict) belongs to: its input dtype, or tf32 for fp32 inputs
    of a variant that promises tf32."""
    dtype = example["case"]["dtype"]
    if dtype != "fp32" or not example["variant"]:
        return dtype
    try:
        return "tf32" if resolve(example["variant"]).precision == "tf32" else dtype
    except KeyError:
        return dtype


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
