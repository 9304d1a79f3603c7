"""Facts about the number formats the suite meets: names, torch dtypes, significand bits, ranges.

`u` is the unit roundoff 2**-p of round-to-nearest with a p-bit significand (implicit bit counted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Format:
    name: str
    dtype: torch.dtype  # storage dtype (tf32 is stored as float32)
    p: int  # significand bits including the implicit one; for integers, value bits
    is_float: bool
    max: float  # largest finite value
    min_normal: float
    min_subnormal: float

    @property
    def u(self) -> float:
        return 2.0**-self.p if self.is_float else 0.0

    @property
    def overflow_threshold(self) -> float:
        """Smallest magnitude that rounds to infinity (round to nearest even)."""
        if not self.is_float:
            return math.inf
        return self.max + 2.0 ** (math.floor(math.log2(self.max)) - self.p)  # max + half an ulp at max

    @property
    def exact_integer_limit(self) -> int:
        """Every integer of magnitude up to this is representable."""
        return 2**self.p if self.is_float else int(self.max)


def _float(name: str, dtype: torch.dtype, p: int) -> Format:
    fi = torch.finfo(dtype)
    tiny = float(fi.smallest_normal)
    return Format(name, dtype, p, True, float(fi.max), tiny, tiny * 2.0 ** (1 - p))


def _int(name: str, dtype: torch.dtype) -> Format:
    ii = torch.iinfo(dtype)
    return Format(name, dtype, ii.bits - 1, False, float(ii.max), 1.0, 1.0)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        _float("fp64", torch.float64, 53),
        _float("fp32", torch.float32, 24),
        _float("fp16", torch.float16, 11),
        _float("bf16", torch.bfloat16, 8),
        _float("fp8e4m3", torch.float8_e4m3fn, 4),
        _float("fp8e5m2", torch.float8_e5m2, 3),
        _int("int8", torch.int8),
        _int("int32", torch.int32),
    )
}
# e2m1 (fp4) codes, two a byte along K: A stored as torch.uint8 under a scaled operation with e2m1 weights
FORMATS["fp4e2m1"] = Format("fp4e2m1", torch.uint8, 2, True, 6.0, 1.0, 0.5)
# packed int4 codes and E8M0 scales are stored as bytes (not a dtype a product is computed in: not in FORMATS)
UINT8 = _int("uint8", torch.uint8)
# tf32 is not a storage dtype: fp32 operands whose significands a tensor core keeps to 11 bits.
TF32 = Format("tf32", torch.float32, 11, True, FORMATS["fp32"].max, FORMATS["fp32"].min_normal, 2.0**-149)


def by_name(name: str) -> Format:
    if name == "tf32":
        return TF32
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown dtype name {name!r}; expected one of {', '.join(FORMATS)}, tf32") from None


def by_dtype(dtype: torch.dtype) -> Format:
    for f in FORMATS.values():
        if f.dtype == dtype:
            return f
    raise ValueError(f"no format for dtype {dtype}")


def name_of(dtype: torch.dtype) -> str:
    return by_dtype(dtype).name
