"""Value profiles: how the entries of A and B are drawn, from a seed, in float64 before quantization.

Listed in shrink order, simplest first: a failure shrinks toward `ones`.
  ones              every entry 1: exact, and any indexing bug shows as a wrong count
  small_ints        integers in [-r, r] with r chosen from K so that every product and partial sum is an
                    integer the accumulator holds exactly: results must be bit-exact
  uniform           uniform in [-1, 1] (integers: the whole int8 range)
  normal            standard normal (integers: 16 x normal, rounded and clipped)
  mixed_magnitudes  +-2**e with e spread over half the input dtype's exponent range, so products span
                    the whole range: absorption, scaling and overflow bugs show
  near_overflow     positive values sized so that C lands around the output dtype's largest value:
                    where the exact result overflows, C must be Inf
  subnormal         half the entries subnormal in the input dtype, half near 1: flushing inputs or
                    results to zero shows
  specials          normal values with NaN, +-Inf and -0 at drawn positions: C must be NaN exactly
                    where the float64 reference is NaN, and +-Inf where it is +-Inf
Which profiles apply depends on the input dtype (`available`): integers have no subnormals or
specials, and an int32 accumulator cannot overflow at these sizes.
"""

from __future__ import annotations

import math

import numpy as np

from reference.formats import Format

PROFILES = ("ones", "small_ints", "uniform", "normal", "mixed_magnitudes", "near_overflow", "subnormal", "specials")
INTEGER_PROFILES = PROFILES[:5]

# Sums stay below 2**EXACT_SUM_BITS: exact in an fp32 accumulator (24 bits) and in tf32's inputs.
EXACT_SUM_BITS = 24


def available(fmt: Format) -> tuple[str, ...]:
    """The profiles that make sense for inputs of this format."""
    return PROFILES if fmt.is_float else INTEGER_PROFILES


def small_int_radius(fmt: Format, k: int, exact_bits: int = EXACT_SUM_BITS) -> int:
    """Largest r such that K * r * r stays within the exact range and r survives quantization."""
    r = math.isqrt(max(1, 2**exact_bits // max(k, 1)))
    input_limit = min(fmt.exact_integer_limit, 2**11)  # 2**11: also exact as a tf32 operand
    return max(1, min(r, input_limit, 64))


def _exponent(x: float) -> int:
    return math.frexp(x)[1] - 1


def generate(profile: str, shape: tuple[int, int], fmt: Format, k: int, rng: np.random.Generator,
             out: Format | None = None, exact_bits: int = EXACT_SUM_BITS) -> np.ndarray:
    """float64 values for one operand; the caller quantizes them to `fmt`."""
    if profile not in available(fmt):
        raise ValueError(f"value profile {profile!r} does not apply to {fmt.name} inputs; "
                         f"expected one of {', '.join(available(fmt))}")
    if profile == "ones":
        return np.ones(shape)
    if profile == "small_ints":
        r = small_int_radius(fmt, k, exact_bits)
        return rng.integers(-r, r, size=shape, endpoint=True).astype(np.float64)
    if profile == "uniform":
        if not fmt.is_float:
            return rng.integers(-fmt.max - 1, fmt.max, size=shape, endpoint=True).astype(np.float64)
        return rng.uniform(-1.0, 1.0, shape)
    if profile == "normal":
        values = rng.standard_normal(shape)
        return values if fmt.is_float else np.clip(np.round(values * 16), -fmt.max - 1, fmt.max)
    if profile == "mixed_magnitudes":
        if fmt.is_float:
            low, high = _exponent(fmt.min_normal) // 2, _exponent(fmt.max) // 2
        else:
            low, high = 0, 6
        signs = rng.choice([-1.0, 1.0], size=shape)
        return signs * np.exp2(rng.integers(low, high, size=shape, endpoint=True).astype(np.float64))
    if profile == "near_overflow":
        # A and B positive, so C = K * a * b lands near the output's largest value, often beyond it
        target = (out or fmt).max
        scale = min(math.sqrt(target / max(k, 1)), fmt.max / 2)
        return scale * rng.uniform(0.7, 1.4, shape)
    if profile == "subnormal":
        tiny = fmt.min_normal * rng.uniform(0.0, 1.0, shape)  # below the smallest normal
        near_one = rng.uniform(0.5, 2.0, shape)
        signs = rng.choice([-1.0, 1.0], size=shape)
        return signs * np.where(rng.random(shape) < 0.5, tiny, near_one)
    if profile == "specials":
        values = rng.standard_normal(shape)
        specials = [np.nan, -0.0] + ([np.inf, -np.inf] if _has_inf(fmt) else [])
        where = rng.random(shape) < 0.05
        if where.size:
            where.flat[rng.integers(0, where.size)] = True  # at least one special
        values[where] = rng.choice(specials, size=int(where.sum()))
        return values
    raise AssertionError(profile)


def _has_inf(fmt: Format) -> bool:
    """fp8 e4m3 (the fn variant) has no infinities: its largest pattern is NaN."""
    return fmt.name != "fp8e4m3"
