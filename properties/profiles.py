"""Value profiles: how the entries of A and B are drawn, from a seed, in float64 before quantization.

Listed in shrink order, simplest first: a failure shrinks toward `ones`.
  ones         every entry 1: exact, and any indexing bug shows as a wrong count
  small_ints   integers in [-r, r] with r chosen from K so that every product and partial sum is an
               integer the accumulator holds exactly: results must be bit-exact
  normal       standard normal values, quantized to the input dtype
"""

from __future__ import annotations

import math

import numpy as np

from reference.formats import Format

PROFILES = ("ones", "small_ints", "normal")
EXACT_PROFILES = ("ones", "small_ints")

# Sums stay below 2**EXACT_SUM_BITS: exact in an fp32 accumulator (24 bits) and in tf32's inputs.
EXACT_SUM_BITS = 24


def small_int_radius(fmt: Format, k: int) -> int:
    """Largest r such that K * r * r stays within the exact range and r survives quantization."""
    r = math.isqrt(max(1, 2**EXACT_SUM_BITS // max(k, 1)))
    input_limit = min(fmt.exact_integer_limit, 2**11)  # 2**11: also exact as a tf32 operand
    return max(1, min(r, input_limit, 64))


def generate(profile: str, shape: tuple[int, int], fmt: Format, k: int, rng: np.random.Generator) -> np.ndarray:
    """float64 values for one operand; the caller quantizes them to `fmt`."""
    if profile == "ones":
        return np.ones(shape)
    if profile == "small_ints":
        r = small_int_radius(fmt, k)
        return rng.integers(-r, r, size=shape, endpoint=True).astype(np.float64)
    if profile == "normal":
        values = rng.standard_normal(shape)
        if not fmt.is_float:
            return np.clip(np.round(values * 16), -fmt.max - 1, fmt.max)
        return values
    raise ValueError(f"unknown value profile {profile!r}; expected one of {', '.join(PROFILES)}")
