"""A sound elementwise bound on |C - A@B| for any correct kernel, computed in float64.

Higham (Accuracy and Stability of Numerical Algorithms, 2nd ed., section 3.5): a dot product of
length K accumulated in a format with unit roundoff u, in any order, is within gamma_K |A|.|B| of
the exact value, gamma_K = K u / (1 - K u). Around that sit:

  input rounding   tf32 rounds each fp32 operand: a' = a (1 + d), |d| <= u_in, so each product is
                   off by (2 u_in + u_in**2) |a||b| before accumulation; and an operand below fp32's
                   smallest normal may become 0 (truncated, or flushed), an absolute error of at most
                   t = 2**-126 each: t (sum_k |a_ik| + sum_k |b_kj|) + K t**2 more;
  underflow        each of the 2K accumulation steps may lose an absolute `acc_tiny` (a flushed
                   subnormal), so (2K + 1) acc_tiny more;
  the reference    numpy's float64 product is itself within gamma_K(2**-53) |A|.|B| of exact;
  output rounding  one rounding to C's dtype: u_out |s| plus half its smallest subnormal.

So, with P = |A|.|B| and e_in = 2 u_in + u_in**2:
  err_acc = (e_in + (1 + e_in) gamma_K(u_acc)) P + (2K + 1)(1 + gamma_K(u_acc)) acc_tiny
  bound   = gamma_K(2**-53) P + err_acc + u_out (|ref| + gamma_K(2**-53) P + err_acc) + tiny_out
Nothing here is tuned: every term is a worst case, so a correct kernel never exceeds it.

Split-K into C (`Arithmetic.output_partials` = S > 0): the kernel adds S partial sums p_s into C with
atomics in C's dtype. Each partial is within its share of err_acc of its exact value, so
sum |p_s| <= P + err_ref + err_acc =: s_abs. Converting p_s to C's dtype rounds once (u_out |p_s|, plus
half a subnormal), and the S - 1 additions after the first (onto a zeroed C, exact) round in C's dtype:
(1 + u_out)(1 + gamma_{S-1}(u_out)) - 1 <= gamma_S(u_out), so, in place of the output rounding above,
  bound   = err_ref + err_acc + gamma_S(u_out) s_abs + S (1 + gamma_S(u_out)) tiny_out
(an addition never underflows inexactly). Partial sums are bounded by s_abs, so integers stay exact
only up to C's own exact-integer limit, and an overflow can happen in C's range as well.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from gemm_fuzz.reference.formats import FORMATS, TF32, Format, by_name
from gemm_fuzz.reference.numpy_ref import Product

U64 = 2.0**-53
# float64 evaluation of the bound itself rounds; widen by a few ulps so the bound stays an upper bound
_EVAL_SLACK = 1.0 + 2.0**-40


@dataclass(frozen=True)
class Arithmetic:
    """How a variant computes a product for one input dtype: its precision class."""

    name: str
    input_u: float  # relative rounding of each operand before the products (0: none)
    acc: Format  # the accumulator's format
    acc_u: float  # unit roundoff of accumulation
    acc_tiny: float  # absolute error one underflowing accumulation step may add
    exact_bits: int  # sums of integers up to 2**exact_bits are computed exactly
    input_exact_limit: float  # integer operands up to this survive input rounding (inf: no input rounding)
    # an operand smaller than this may become 0 in input rounding (tf32: fp32 subnormals, which the
    # truncation or a flush to zero can lose entirely); 0: none
    input_tiny: float = 0.0
    # split-K into C: up to this many partial sums per element added in C's dtype (0: C written once)
    output_partials: int = 0
    # tensor cores align each product by its operands' exponent fields, which for a subnormal operand
    # is the format's smallest normal exponent: its truncation then errs as if the operand were this
    # large (0: no such alignment, or no subnormals)
    align_floor: float = 0.0

    @property
    def is_exact(self) -> bool:
        """Integer arithmetic: every result must match exactly."""
        return not self.acc.is_float


FP32_ACC = FORMATS["fp32"]
# Tensor cores add products into fp32 with truncation rather than rounding to nearest (Fasi, Higham,
# Mikaitis, Pranesh 2021, "Numerical behavior of NVIDIA tensor cores"): up to one ulp, 2**-23, a step.
TENSOR_CORE_ACC_U = 2.0**-23
# fp8 products accumulated by Hopper tensor cores keep fewer bits than fp32: DeepSeek-V3 (section
# 3.3.2) reports about 14. Measured on an H100 through Triton 3.6
# (python -m gemm_fuzz.properties.evaluation.accumulation_probe):
# a tl.dot on a 64 x 64 fp8 tile adds a term 2**-14 below the running sum wrongly and one 2**-13 below
# exactly (13 bits; max_num_imprecise_acc=0 restores 23), and random terms over 24 binades err by up to
# 2**-10.7 of sum |a||b| at K = 64. So each fp8 product's addition is taken to err by up to
# 2**-FP8_ACC_BITS, and integer sums to be exact only up to 2**FP8_ACC_BITS.
FP8_ACC_BITS = 13
# An fp32 operand of a tf32 dot keeps 10 fraction bits; truncation (measured on the H100, see
# properties/interpreter/fixes.py) errs by up to one tf32 ulp: 2**-10 relative.
TF32_INPUT_U = 2.0**-10


def arithmetic(input_dtype: str, precision: str = "ieee", output_partials: int = 0) -> Arithmetic:
    """The precision class of a variant for one input dtype name (fp16, bf16, fp32, int8, ...), adding
    `output_partials` partial sums per element in C's dtype (0: writing C once)."""
    return replace(_arithmetic(input_dtype, precision), output_partials=output_partials)


def _arithmetic(input_dtype: str, precision: str) -> Arithmetic:
    fmt = by_name(input_dtype)
    if not fmt.is_float:
        int32 = FORMATS["int32"]
        return Arithmetic("int32", 0.0, int32, 0.0, 0.0, 31, int(fmt.max))
    if fmt.name.startswith(("fp8", "fp4")):  # fp4: no MMA on Hopper; its scaled products bound as fp8's
        return Arithmetic(f"{fmt.name}-hopper-acc", 0.0, FP32_ACC, 2.0**-FP8_ACC_BITS, FP32_ACC.min_normal,
                          FP8_ACC_BITS, math.inf, align_floor=fmt.min_normal)
    if fmt.name == "fp32" and precision == "tf32":
        return Arithmetic("tf32", TF32_INPUT_U, FP32_ACC, TENSOR_CORE_ACC_U, FP32_ACC.min_normal, FP32_ACC.p,
                          TF32.exact_integer_limit, FP32_ACC.min_normal)
    return Arithmetic(f"{fmt.name}-fp32acc", 0.0, FP32_ACC, TENSOR_CORE_ACC_U, FP32_ACC.min_normal, FP32_ACC.p,
                      math.inf, align_floor=0.0 if fmt.name == "fp32" else fmt.min_normal)


def exact_sum_bits(input_dtype: str) -> int:
    """The largest b such that sums of integers up to 2**b are exact in every precision class of this
    input dtype (value profiles keep their integer sums below it)."""
    return min(arithmetic(input_dtype, p).exact_bits for p in ("ieee", "tf32"))


def gamma(k: int, u: float) -> float:
    if k * u >= 1:
        return np.inf
    return k * u / (1 - k * u)


def accumulation(product: Product, k: int, arith: Arithmetic, aligned: np.ndarray | None = None) -> np.ndarray:
    """Upper bound on |s - product.value| for every element, s the sum a correct kernel holds before it
    rounds to C (or, split-K into C, before its partial sums are added there): the reference's own
    error and the accumulation's. `aligned`: the scale of the accumulator's truncation where the caller
    knows it better (scaled codes); by default |A| @ |B| with subnormal operands lifted (align_floor)."""
    P = product.magnitude
    g_acc = gamma(k, arith.acc_u)
    e_in = 2 * arith.input_u + arith.input_u**2
    if aligned is None:
        aligned = product.aligned_magnitude(arith.align_floor) if arith.align_floor else P
    err_acc = e_in * P + (1 + e_in) * g_acc * aligned + (2 * k + 1) * (1 + g_acc) * arith.acc_tiny
    if arith.input_tiny:  # an operand that may round to 0 loses its whole product: |a| tiny + tiny |b| each
        rows, cols = product.abs_sums
        err_acc = err_acc + (1 + g_acc) * (arith.input_tiny * (rows[..., :, None] + cols[..., None, :])
                                           + k * arith.input_tiny**2)
    err_ref = gamma(k, U64) * P
    return err_ref + err_acc


def elementwise(product: Product, k: int, arith: Arithmetic, out: Format) -> np.ndarray:
    """Upper bound on |C - product.value| for every element, for a correct kernel."""
    P = product.magnitude
    if arith.is_exact and not out.is_float:
        return np.zeros_like(P)
    err = accumulation(product, k, arith)
    if arith.output_partials:  # S partial sums added in C's dtype (the module docstring derives it)
        g_out = gamma(arith.output_partials, out.u)
        tiny = arith.output_partials * (1 + g_out) * out.min_subnormal / 2
        return (err + g_out * (P + err) + tiny) * _EVAL_SLACK
    s_max = np.abs(np.nan_to_num(product.value, nan=0.0, posinf=0.0, neginf=0.0)) + err
    return (err + out.u * s_max + out.min_subnormal / 2) * _EVAL_SLACK


def exact_expected(product: Product, arith: Arithmetic, out: Format | None = None) -> np.ndarray:
    """Per element: must every correct kernel return exactly round(A@B) there? Yes where the row of A
    and the column of B are integers that survive input rounding and every partial sum is an integer
    the accumulator holds exactly (elements of other rows and columns do not matter); with partial
    sums added in C's dtype `out`, one C holds exactly too."""
    P = product.magnitude
    limit = 2.0**arith.exact_bits
    if arith.output_partials and out is not None:
        limit = min(limit, float(out.exact_integer_limit))
    if product.row_integers is None:  # built by hand: the whole product's facts
        whole = product.integer_inputs and product.max_abs_input <= arith.input_exact_limit
        return np.full(P.shape, whole) & (P <= limit)
    rows = product.row_integers <= arith.input_exact_limit
    cols = product.col_integers <= arith.input_exact_limit
    return rows[..., :, None] & cols[..., None, :] & (P <= limit)


@dataclass(frozen=True)
class Allowance:
    """What a correct kernel may return, element by element: `expected` within `bound` (exactly, when
    `exact`), or a non-finite value where the masks allow it. Elements in `free` are not judged."""

    expected: np.ndarray  # float64; may hold NaN and +-Inf, which then must be matched
    bound: np.ndarray  # |C - expected| <= bound where both are finite
    exact: np.ndarray  # bool per element: there C == expected, bit for bit (NaN matching NaN)
    pos_inf: np.ndarray  # +Inf is acceptable here
    neg_inf: np.ndarray  # -Inf is acceptable here
    nan: np.ndarray  # NaN is acceptable here
    free: np.ndarray | None = None  # not judged (e.g. a relation where a run may legitimately overflow)
    reference: np.ndarray | None = None  # the float64 product itself (exact cases: before rounding)

    def __post_init__(self):  # `exact` may be given as one bool for every element
        object.__setattr__(self, "exact", np.broadcast_to(np.asarray(self.exact, dtype=bool), np.shape(self.expected)))

    def ambiguous(self) -> np.ndarray:
        """Where more than one class of value (finite, +Inf, -Inf, NaN) is acceptable: two correct
        kernels may differ there (which one they give depends on the order of summation)."""
        options = np.isfinite(self.expected).astype(np.int8) + self.pos_inf + self.neg_inf + self.nan
        return options > 1


def allowance(product: Product, k: int, arith: Arithmetic, out: Format) -> Allowance:
    """What every correct kernel computing `product` with `arith` into `out` may return.

    Where exact (exact_expected): the float64 product rounded once to C's dtype, bit for bit.
    Elsewhere:
      reference NaN     NaN, and only NaN;
      reference +-Inf   that infinity; NaN too only where the finite products of the opposite sign can
                        themselves overflow the accumulator (Inf - Inf);
      reference finite  within the bound; +Inf where the result's interval reaches the overflow
                        threshold upwards (of C's dtype or the accumulator), or where the positive
                        part of the finite products (plus the bound) can overflow the accumulator in
                        some partial sum; -Inf likewise downwards; NaN only where both can happen.
    Partial sums lie between sum min(ab, 0) and sum max(ab, 0) in every summation order, so these
    allowances follow the signs of the terms: an all-positive sum never gives -Inf or NaN.
    Measured on an H100 (properties/evaluation/accumulation_probe.py): an fp32 accumulation that
    overflows gives the Inf of the sum's sign, not the largest finite value, on the ieee and the tf32
    path; 2**127 + 2**127 - 2**127 - 2**127 in one dot gives +Inf on the ieee path (a partial sum
    overflowed) and 0 on the tf32 one (its tensor-core sum holds the exponent): both are allowed here,
    +Inf because the positive part reaches the threshold, 0 because it is the exact value."""
    bound = elementwise(product, k, arith, out)
    value = product.value
    exact = exact_expected(product, arith, out)
    expected = np.where(exact, np.asarray(torch.from_numpy(value).to(out.dtype).to(torch.float64)), value)
    finite = np.isfinite(value)
    if arith.acc.is_float:
        limit = arith.acc.overflow_threshold
        if arith.output_partials:  # partial sums are also added in C's range
            limit = min(limit, out.overflow_threshold)
        can_overflow = product.magnitude + bound >= limit  # cheap test before the sign parts are computed
        if can_overflow.any():
            up = can_overflow & (product.positive + bound >= limit)
            down = can_overflow & (-product.negative + bound >= limit)
        else:
            up = down = can_overflow
    else:
        up = down = np.zeros(value.shape, dtype=bool)
    result_limit = min(out.overflow_threshold, arith.acc.overflow_threshold)
    with np.errstate(invalid="ignore"):
        pos_inf = (finite & ((value + bound >= result_limit) | up)) | np.isposinf(value)
        neg_inf = (finite & ((value - bound <= -result_limit) | down)) | np.isneginf(value)
    nan = np.isnan(value) | (finite & up & down) | (np.isposinf(value) & down) | (np.isneginf(value) & up)
    if arith.input_tiny:  # an Inf times an operand that input rounding may turn into 0 gives NaN
        nan |= ~np.isnan(value) & ~finite & product.inf_meets_tiny(arith.input_tiny)
    return Allowance(expected, bound, exact, pos_inf & ~exact, neg_inf & ~exact, nan & ~exact, reference=value)
