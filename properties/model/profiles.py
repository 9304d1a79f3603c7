"""Value profiles: how the entries of A and B are drawn, from a seed, in float64 before quantization.

Listed in shrink order, simplest first: a failure shrinks toward `ones`.
  ones              every entry 1: exact, and any indexing bug shows as a wrong count
  small_ints        integers in [-r, r] with r chosen from K so that every product and partial sum is an
                    integer the accumulator holds exactly: results must be bit-exact
  wide_ints         non-negative integers sized so that the sums pass what narrower arithmetic holds
                    (fp16's and bf16's significands, fp8's 13-bit accumulation, C's own precision) while
                    staying exact in the promised accumulator: an fp16, bf16 or 13-bit accumulator, a
                    dropped term or an output rounded the wrong way all break bit-exactness; for fp32
                    inputs A's entries have 12 significant bits, one more than tf32 keeps; for fp8 the
                    first product is 64 x 64 and the others odd, so partial sums past 2048 are odd
  uniform           uniform in [-1, 1] (integers: the whole int8 range)
  normal            standard normal (integers: 16 x normal, rounded and clipped)
  mixed_magnitudes  +-2**e with e spread over half the input dtype's exponent range, so products span
                    the whole range: absorption, scaling and overflow bugs show
  near_overflow     positive values sized so that C lands around the output dtype's largest value:
                    where the exact result overflows, C must be +Inf
  subnormal         half the entries subnormal in the input dtype, half near 1: flushing inputs or
                    results to zero shows

Any float profile may also carry specials (`with_specials`, a case's `specials` flag): NaN, +-Inf and
-0 in some rows of A and some columns of B, each such row (column) holding one special and zeros,
its partner entry of B (A) +-1, so C must be NaN or that exact infinity there (a clamped Inf or a
dropped NaN shows as a finite value); the rows and columns without specials keep their values (and
their exactness).

Which profiles apply depends on the input dtype (`available`): integers have no subnormals or
specials, and an int32 accumulator cannot overflow at these sizes. `WEIGHTS` sets how often the
strategies draw each (properties/model/strategies.py): the two that expose the most bugs per draw,
wide_ints and near_overflow, about a third of the time each; two float cases in three carry specials.
`python -m gemm_fuzz.properties.evaluation.power` measures what that buys.
"""

from __future__ import annotations

import math

import numpy as np

from gemm_fuzz.reference.formats import Format

PROFILES = ("ones", "small_ints", "wide_ints", "uniform", "normal", "mixed_magnitudes", "near_overflow", "subnormal")
INTEGER_PROFILES = PROFILES[:6]
WEIGHTS = {"wide_ints": 6, "near_overflow": 6}  # the others 1

# Sums stay below 2**EXACT_SUM_BITS: exact in an fp32 accumulator (24 bits) and in tf32's inputs.
EXACT_SUM_BITS = 24


# Where activations change character: 0 and -0, their steepest and most curved points, gelu's tanh
# approximation furthest from erf's (near -3 it is 10% off), their saturation (tanh near 9, sigmoid
# near 17 in fp32), exp's overflow (88), and the format's largest values.
_LANDMARKS = (0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, -3.0, -4.0, 5.5, -5.5, 9.0, -9.0, 17.0, -17.0, 20.0,
              -20.0, 88.0, -88.0, 100.0, -100.0)


def landmarks(fmt: Format) -> np.ndarray:
    """The activations' landmarks, as `fmt` holds them, and half its largest value either way."""
    return np.array([*_LANDMARKS, fmt.max / 2, -fmt.max / 2])


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


def _wide_ints(operand: str, shape, fmt: Format, k: int, rng: np.random.Generator, out: Format | None,
               exact_bits: int) -> np.ndarray:
    """Non-negative integers whose sums land between a quarter of and the exact range's top: past 2**11
    (fp16's significand) and 2**8 (bf16's) wherever the range allows, within 2**exact_bits and C's range."""
    top = 2.0**exact_bits
    if out is not None and out.is_float:
        top = min(top, out.max / 2)
    k = max(k, 1)
    if fmt.is_float and fmt.p >= 24:  # fp32: A has 12 significant bits (not tf32-exact), B is small
        if operand == "a":
            return rng.integers(2**10, 2**11, size=shape) * 2.0 + 1  # odd, in (2**11, 2**12)
        r = max(1, int(top // (k * 2**12)))
        return rng.integers(max(1, r // 2), r, size=shape, endpoint=True).astype(np.float64)
    if fmt.is_float and fmt.p <= 4:  # fp8: the first term 64 x 64 = 4096 (past 2048), then odd ones
        odd_top = min(2**fmt.p - 1, max(1, math.isqrt(max(1, int(top - 4096) // k))))
        values = rng.integers(0, (odd_top + 1) // 2, size=shape, endpoint=False) * 2.0 + 1
        along_k = shape[1] if operand == "a" else shape[0]
        if values.size and (along_k > 1 or k == 1):  # not where the operand is broadcast along K: one
            # value there repeats in every term, and 64 x (64 + odd ones) is exact in fp16
            values[(0, slice(None)) if operand == "b" else (slice(None), 0)] = 64.0
        return values
    # integers past 2**p still quantize to integers (the spacing is 2 or more there): the format's
    # largest value bounds them, and every product of two is exact in fp32
    v = max(1, min(int(fmt.max), math.isqrt(int(top // k))))
    return rng.integers(max(1, (v + 1) // 2), v, size=shape, endpoint=True).astype(np.float64)


def generate(profile: str, shape: tuple[int, ...], fmt: Format, k: int, rng: np.random.Generator,
             out: Format | None = None, exact_bits: int = EXACT_SUM_BITS, operand: str = "a",
             batched: bool = False) -> np.ndarray:
    """float64 values for one operand ("a" or "b"); the caller quantizes them to `fmt`. `batched`: shape
    is (problems, rows, cols), drawn at once (fp8's wide integers then keep to odd ones)."""
    if batched and profile == "wide_ints" and fmt.is_float and fmt.p <= 4:
        return np.stack([generate(profile, shape[1:], fmt, k, rng, out, exact_bits, operand) for _ in range(shape[0])])
    if profile not in available(fmt):
        raise ValueError(f"value profile {profile!r} does not apply to {fmt.name} inputs; "
                         f"expected one of {', '.join(available(fmt))}")
    if profile == "ones":
        return np.ones(shape)
    if profile == "small_ints":
        r = small_int_radius(fmt, k, exact_bits)
        return rng.integers(-r, r, size=shape, endpoint=True).astype(np.float64)
    if profile == "wide_ints":
        return _wide_ints(operand, shape, fmt, k, rng, out, exact_bits)
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
    raise AssertionError(profile)


def with_specials(a: np.ndarray, b: np.ndarray, fmt: Format, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Specials over any profile's values, placed so that no wrong handling of them can hide, and so
    that most of C stays finite (a bug in the arithmetic still shows beside them):
      - B's first column is zero but for one +-Inf (NaN for e4m3, which has no Inf), whose partner in A
        is +-1, so C there is exactly that Inf (a clamp to the largest finite value shows); where B has
        one column (N = 1, or B broadcast along its columns) A's last row carries the Inf instead;
      - in half the draws A's first row is zero but for one NaN, so C's first row is NaN (a dropped
        NaN shows); where A has one row, B's last column holds the NaN instead (with one row and one
        column, the NaN replaces the Inf);
      - about a third of the other rows of A and columns of B get one special of any kind (NaN, +-Inf,
        -0) in the same way. Rows and columns without specials keep their integers, exact."""
    a, b = a.copy(), b.copy()
    (M, Ka), (Kb, N) = a.shape, b.shape  # a broadcast operand is drawn as one row (column)
    if not (M and N and Ka and Kb):
        return a, b
    has_inf = fmt.name != "fp8e4m3"  # e4m3fn has no infinities
    specials = [np.nan, np.inf, -np.inf, -0.0] if has_inf else [np.nan, -0.0]
    sign = lambda: float(rng.choice([-1.0, 1.0]))  # noqa: E731
    infinity = sign() * np.inf if has_inf else np.nan

    def special_row(i: int, value: float) -> int:  # the k of B's row that meets it
        k = int(rng.integers(max(Ka, Kb)))
        a[i, :] = 0.0
        a[i, min(k, Ka - 1)] = value
        return min(k, Kb - 1)

    def special_column(j: int, value: float) -> int:  # the k of A's column that meets it
        k = int(rng.integers(max(Ka, Kb)))
        b[:, j] = 0.0
        b[min(k, Kb - 1), j] = value
        return min(k, Ka - 1)

    def partner_in_b(kb: int, j: int) -> None:  # a +-1 for a special of A, but never over one of B's
        if np.isfinite(b[kb, j]):
            b[kb, j] = sign()

    nan = rng.random() < 0.5
    nan_row = nan and (M > 1 or N == 1)
    inf_row = M - 1 if N == 1 and M > 1 else None
    for j in range(1, N):
        if rng.random() < 1 / 3:
            special_column(j, specials[int(rng.integers(len(specials)))])
    partner = 1 if nan_row and M > 1 else 0  # the row of A that meets B's Inf
    for i in range(1, M):
        if i not in (partner, inf_row) and rng.random() < 1 / 3:
            partner_in_b(special_row(i, specials[int(rng.integers(len(specials)))]), int(rng.integers(N)))
    if inf_row is not None:
        partner_in_b(special_row(inf_row, infinity), 0)
    elif not (nan and M == N == 1):  # with one element, the NaN below takes it
        k = special_column(0, infinity)
        a[partner, :] = np.where(np.isfinite(a[partner, :]), a[partner, :], 0.0)
        a[partner, k] = sign()
    if nan_row:
        partner_in_b(special_row(0, np.nan), int(rng.integers(N)))
    elif nan:
        special_column(N - 1, np.nan)
    return a, b
