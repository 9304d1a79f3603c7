"""The float64 truth of a fused epilogue, and a sound bound on what a correct kernel returns.

What is computed (kernels/operation.py declares it): y = alpha * P + beta * C_in + bias (or Inductor's
alpha * P + beta * bias), C = act(y) + residual; gated, C = act(P_gate) * P_up. P is the product,
whose accumulation error `reference.bounds.accumulation` bounds. The bound is carried through each
step as a `Term`: its exact value (float64, IEEE for non-finite ones), a bound on how far a correct
kernel's intermediate can be from it, where it is exact, and where no verdict is sound ("free").

  scale, add   |x'y' - xy| and |x' + y' - (x + y)| from the operands' bounds, plus one rounding in the
               epilogue's arithmetic (fp32, or C's dtype) and the scalar's own rounding to it (a kernel
               receives alpha and beta as fp32)
  activation   L * err + E: L is the activation's largest slope over [y - err, y + err], computed in
               float64 from its derivative and its critical points (not a constant); E is what a
               float implementation of it may add (`IMPLEMENTATION`, in units of the arithmetic's u)
  product      |a'b' - ab| <= err_a (|b| + err_b) + |a| err_b, plus one rounding (gated kernels)
  output       one rounding to C's dtype, as for the plain product

Exact where every step is: integer values within the arithmetic's exact range, integer scalars, no
activation or relu, so integer profiles with relu and integer bias are judged bit for bit. An element
where an intermediate can overflow the epilogue's arithmetic, where the product's class (finite, Inf,
NaN) depends on the order of summation, or where relu meets NaN (tl.maximum drops it, torch keeps
it) is not judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from gemm_fuzz.reference import bounds
from gemm_fuzz.reference.formats import FORMATS, Format
from gemm_fuzz.reference.numpy_ref import Product

SCALAR_U = 2.0**-24  # a kernel receives a Python float as fp32
_EVAL_SLACK = 1.0 + 2.0**-30  # float64 evaluation of the bound rounds too, and critical points are numeric

# What a float implementation of each activation may add to the exact value at y, in units of u (the
# epilogue arithmetic's unit roundoff): u * (relative |act(y)| + per_input |y| + absolute), plus the
# format's smallest normal (exp flushes its subnormal results to zero on a GPU). Measured worst cases
# of the forms kernels use are a few u (libdevice's erf, exp, tanh: 2 ulp; sigmoid as 1/(1 + exp(-x))
# or 0.5 tanh(x/2) + 0.5; tanh as 2 sigmoid(2x) - 1; gelu's 0.5 x (1 + erf(x / sqrt 2)), whose
# 1 + erf cancels for x < 0 and leaves |x| times erf's absolute error): the constants keep a margin.
IMPLEMENTATION = {  # activation: (relative, per_input, absolute)
    None: (0.0, 0.0, 0.0),
    "relu": (0.0, 0.0, 0.0),
    "leaky_relu": (2.0, 0.0, 0.0),
    "sigmoid": (8.0, 0.0, 1.0),
    "tanh": (8.0, 0.0, 4.0),
    "silu": (8.0, 1.0, 0.0),
    "gelu": (8.0, 8.0, 0.0),  # torch's fp32 erf on the CPU: 5 u of absolute error near x = -3
    "gelu_tanh": (8.0, 2.0, 0.0),
}
_K = math.sqrt(2.0 / math.pi)
_C = 0.044715


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _erf(x):
    return torch.special.erf(torch.from_numpy(np.asarray(x, dtype=np.float64))).numpy()


def apply(activation: str | None, x: np.ndarray, slope: float = 0.01) -> np.ndarray:
    """The activation in float64, IEEE for non-finite x (gelu(-inf) = -inf * 0 = NaN, as float code gives)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        if activation is None:
            return x
        if activation == "relu":
            return np.where(np.isnan(x), np.nan, np.maximum(x, 0.0))
        if activation == "leaky_relu":
            return np.where(x >= 0, x, slope * x)
        if activation == "sigmoid":
            return _sigmoid(x)
        if activation == "tanh":
            return np.tanh(x)
        if activation == "silu":
            return x * _sigmoid(x)
        if activation == "gelu":
            return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
        if activation == "gelu_tanh":
            return 0.5 * x * (1.0 + np.tanh(_K * (x + _C * x**3)))
    raise ValueError(f"unknown activation {activation!r}")


def derivative(activation: str | None, x: np.ndarray, slope: float = 0.01) -> np.ndarray:
    """The activation's derivative in float64 (relu's and leaky_relu's: that of the side x is on)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        if activation is None:
            return np.ones_like(x)
        if activation == "relu":
            return (x > 0).astype(np.float64)
        if activation == "leaky_relu":
            return np.where(x > 0, 1.0, slope)
        if activation == "sigmoid":
            s = _sigmoid(x)
            return s * (1 - s)
        if activation == "tanh":
            return 1 - np.tanh(x) ** 2
        if activation == "silu":
            s = _sigmoid(x)
            return s * (1 + x * (1 - s))
        if activation == "gelu":
            return 0.5 * (1 + _erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        if activation == "gelu_tanh":
            t = np.tanh(_K * (x + _C * x**3))
            return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _K * (1 + 3 * _C * x * x)
    raise ValueError(f"unknown activation {activation!r}")


def _extremum(f, lo: float, hi: float, sign: float) -> float:
    """Where f has its largest (sign 1) or smallest (sign -1) value on [lo, hi], by golden-section search."""
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(200):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if sign * f(a) > sign * f(b):
            hi = b
        else:
            lo = a
    return (lo + hi) / 2


def _critical_points() -> dict:
    """Where each smooth activation's derivative has its extrema (besides 0 for sigmoid and tanh, whose
    derivatives fall away from 0 on both sides)."""
    found = {"sigmoid": (0.0,), "tanh": (0.0,), "gelu": (-math.sqrt(2.0), math.sqrt(2.0))}
    for name in ("silu", "gelu_tanh"):
        f = lambda x, name=name: float(derivative(name, np.array(x)))  # noqa: E731
        found[name] = (_extremum(f, -4.0, -0.5, -1.0), _extremum(f, 0.5, 4.0, 1.0))
    return found


CRITICAL = _critical_points()


def largest_slope(activation: str | None, lo: np.ndarray, hi: np.ndarray, slope: float = 0.01) -> np.ndarray:
    """max |act'| over [lo, hi], elementwise (over the whole line where an end is not finite)."""
    if activation is None:
        return np.ones(np.shape(lo))
    if activation in ("relu", "leaky_relu"):
        down = slope if activation == "leaky_relu" else 0.0
        with np.errstate(invalid="ignore"):
            return np.maximum(np.where(hi > 0, 1.0, 0.0), np.where(lo < 0, down, 0.0))
    ends = [np.abs(derivative(activation, np.nan_to_num(x, nan=0.0), slope)) for x in (lo, hi)]
    found = np.maximum(ends[0], ends[1])
    for c in CRITICAL.get(activation, ()):
        with np.errstate(invalid="ignore"):
            inside = (lo <= c) & (c <= hi)
        found = np.where(inside, np.maximum(found, abs(float(derivative(activation, np.array(c), slope)))), found)
    unbounded = ~(np.isfinite(lo) & np.isfinite(hi))
    if unbounded.any():
        everywhere = max([abs(float(derivative(activation, np.array(c), slope))) for c in CRITICAL[activation]]
                         + [float(np.abs(derivative(activation, np.array([-1e300, 1e300]), slope)).max())])
        found = np.where(unbounded, everywhere, found)
    return found * _EVAL_SLACK


@dataclass(frozen=True)
class Term:
    """One intermediate of the epilogue: the exact value and how far a correct kernel's can be from it."""

    value: np.ndarray  # float64, IEEE for non-finite values
    err: np.ndarray  # |computed - value| <= err where value is finite
    exact: np.ndarray  # bool: the computed value equals `value` exactly
    free: np.ndarray  # bool: no verdict is sound here


@dataclass(frozen=True)
class Arithmetic:
    """The epilogue's arithmetic: its format (fp32, or C's) and what it keeps exact."""

    fmt: Format

    @property
    def u(self) -> float:
        return self.fmt.u

    @property
    def exact_limit(self) -> float:
        return float(self.fmt.exact_integer_limit)

    def settle(self, value: np.ndarray, err: np.ndarray, exact: np.ndarray, free: np.ndarray) -> Term:
        """A step's result: exact only as an integer the arithmetic holds; free where it can overflow."""
        with np.errstate(invalid="ignore"):
            exact = exact & np.isfinite(value) & (value == np.round(value)) & (np.abs(value) <= self.exact_limit)
            free = free | (np.isfinite(value) & (np.abs(value) + err >= self.fmt.overflow_threshold))
        err = np.where(exact, 0.0, err)
        return Term(value, err, exact, free)


def product_term(product: Product, k: int, arith: bounds.Arithmetic) -> Term:
    """The accumulated product, before anything rounds it to C: its error is the accumulation's; it is
    free where its class depends on the order of summation (an overflow)."""
    err = bounds.accumulation(product, k, arith)
    classes = bounds.allowance(product, k, arith, arith.acc)
    exact = bounds.exact_expected(product, arith)
    return Term(product.value, np.where(exact, 0.0, err), exact, classes.ambiguous())


def constant(values: np.ndarray) -> Term:
    """An operand the kernel reads as it is (bias, C_in, residual: converted exactly to the arithmetic)."""
    values = np.asarray(values, dtype=np.float64)
    none = np.zeros(values.shape, dtype=bool)
    return Term(values, np.zeros(values.shape), np.ones(values.shape, dtype=bool), none)


def scale(t: Term, s: float, ar: Arithmetic) -> Term:
    """s * t, s a Python float the kernel receives as fp32."""
    with np.errstate(invalid="ignore", over="ignore"):
        value = s * t.value
        size = abs(s) * (np.abs(t.value) + t.err)
        err = abs(s) * t.err + (ar.u + (0.0 if _holds(s, ar.fmt) else max(SCALAR_U, ar.u))) * size
    integral = float(s).is_integer() and _holds(s, ar.fmt)
    return ar.settle(value, err, t.exact & integral, t.free)


def _holds(s: float, fmt: Format) -> bool:
    return float(torch.tensor(s, dtype=torch.float64).to(fmt.dtype).double()) == s and \
        float(torch.tensor(s, dtype=torch.float64).to(torch.float32).double()) == s


def add(x: Term, y: Term, ar: Arithmetic) -> Term:
    with np.errstate(invalid="ignore", over="ignore"):
        value = x.value + y.value
        err = x.err + y.err + ar.u * (np.abs(value) + x.err + y.err)
    return ar.settle(value, err, x.exact & y.exact, x.free | y.free)


def multiply(x: Term, y: Term, ar: Arithmetic) -> Term:
    """x * y; free where an infinite factor meets one that may be 0 (or of either sign): an activation
    that underflows to 0 in the kernel's arithmetic times Inf is NaN there, -Inf in float64."""
    with np.errstate(invalid="ignore", over="ignore"):
        value = x.value * y.value
        err = x.err * (np.abs(y.value) + y.err) + np.abs(x.value) * y.err
        err = err + ar.u * (np.abs(value) + err)
        unsure = (np.isinf(x.value) & (np.abs(y.value) <= y.err)) | (np.isinf(y.value) & (np.abs(x.value) <= x.err))
    return ar.settle(value, err, x.exact & y.exact, x.free | y.free | unsure)


def activate(t: Term, activation: str | None, ar: Arithmetic, slope: float = 0.01) -> Term:
    """act(t): the slope over t's interval times its error, plus the implementation's own error."""
    if activation is None:
        return t
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(t.value)
        value = apply(activation, t.value, slope)
        lo, hi = np.where(finite, t.value - t.err, t.value), np.where(finite, t.value + t.err, t.value)
        spread = np.where(finite, largest_slope(activation, lo, hi, slope) * t.err, 0.0)
        relative, per_input, absolute = IMPLEMENTATION[activation]
        size = np.where(np.isfinite(value), np.abs(value), 0.0)
        own = ar.u * (relative * (size + spread) + per_input * np.where(finite, np.abs(t.value) + t.err, 0.0)
                      + absolute) + 4 * ar.fmt.min_normal * (activation != "leaky_relu")
        err = spread + np.where(finite, own, 0.0)
    exact = t.exact if activation == "relu" else np.zeros(value.shape, dtype=bool)
    free = t.free | ((activation == "relu") & np.isnan(t.value))  # relu(NaN): 0 (tl.maximum) or NaN (torch)
    if activation in ("gelu", "gelu_tanh"):  # x * (1 + erf(...)) before the halving: up to 2|x| (torch's order)
        with np.errstate(invalid="ignore", over="ignore"):
            free = free | (finite & (2 * (np.abs(t.value) + t.err) >= ar.fmt.overflow_threshold))
    if activation in ("gelu", "gelu_tanh", "silu"):  # at -Inf: -Inf * 0 (NaN), or 0 where a kernel guards it
        free = free | np.isneginf(t.value)
    return ar.settle(value, err, exact, free)


def finish(t: Term, out: Format) -> bounds.Allowance:
    """What a correct kernel may store: t rounded once to C's dtype (bit-exact where t is exact)."""
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(t.value)
        magnitude = np.where(finite, np.abs(t.value), 0.0)
        bound = np.where(finite, (t.err + out.u * (magnitude + t.err) + out.min_subnormal / 2) * _EVAL_SLACK, 0.0)
        rounded = torch.from_numpy(np.ascontiguousarray(t.value)).to(out.dtype).to(torch.float64).numpy()
        expected = np.where(t.exact, rounded, t.value)
        threshold = out.overflow_threshold
        pos_inf = (finite & (t.value + bound >= threshold)) | np.isposinf(t.value)
        neg_inf = (finite & (t.value - bound <= -threshold)) | np.isneginf(t.value)
    nan = np.isnan(t.value)
    return bounds.Allowance(expected, bound, t.exact, pos_inf & ~t.exact, neg_inf & ~t.exact, nan & ~t.exact,
                            t.free.copy(), reference=t.value)


def arithmetic(epilogue_dtype: str, out: Format) -> Arithmetic:
    return Arithmetic(FORMATS["fp32"] if epilogue_dtype == "fp32" else out)


def halves(t: Term, gated: str) -> tuple[Term, Term]:
    """The gate's and the up projection's columns of a gated product."""
    n = t.value.shape[-1] // 2
    pick = (lambda x: (x[..., :n], x[..., n:])) if gated == "concat" else (lambda x: (x[..., 0::2], x[..., 1::2]))
    parts = [pick(getattr(t, name)) for name in ("value", "err", "exact", "free")]
    return Term(*(p[0] for p in parts)), Term(*(p[1] for p in parts))


def converted(t: Term, ar: Arithmetic) -> Term:
    """The accumulator's value as the epilogue's arithmetic holds it (one rounding unless that is fp32)."""
    if ar.fmt.name == "fp32":
        return t
    with np.errstate(invalid="ignore", over="ignore"):
        err = t.err + ar.u * (np.abs(t.value) + t.err) + ar.fmt.min_subnormal / 2
    return ar.settle(t.value, err, t.exact, t.free)


def _bias(values: np.ndarray, axis: str) -> np.ndarray:
    """A bias vector as it broadcasts over C: one per column ("n") or per row ("m")."""
    return values[None, :] if axis == "n" else values[:, None]


def allowances(p: Term, op, extras: dict, scalars: dict, out: Format) -> dict[str, bounds.Allowance]:
    """What a correct kernel computing `op` (a kernels.operation.Operation, read by its fields) may store
    in C and, where it has one, in its second output `pre`, from the accumulated product `p`
    (`product_term`, or reference.scaled's for scaled operands) and the extras' values (float64: bias,
    c_in, residual) and scalars (alpha, beta)."""
    ar = arithmetic(op.epilogue_dtype, out)
    found = {}
    if op.gated:
        if op.pre_activation:
            found["pre"] = finish(p, out)
        gate, up = (converted(h, ar) for h in halves(p, op.gated))
        c = multiply(activate(gate, op.activation, ar, op.slope), up, ar)
    else:
        y = _linear(converted(p, ar), op, extras, scalars, ar)
        if op.pre_activation:
            found["pre"] = finish(y, out)
        c = activate(y, op.activation, ar, op.slope)
    if op.residual:
        c = add(c, constant(extras["residual"]), ar)
    return {"C": finish(c, out), **found}


def _linear(p: Term, op, extras: dict, scalars: dict, ar: Arithmetic) -> Term:
    """alpha * P + beta * C_in + bias (or alpha * P + beta * bias), BLAS's zeros as declared."""
    alpha, beta = scalars.get("alpha", 1.0), scalars.get("beta", 1.0)
    if op.alpha and alpha == 0 and op.alpha_zero_skips_ab:
        y = constant(np.zeros(p.value.shape))
    else:
        y = scale(p, alpha, ar) if op.alpha else p
    skip_beta = op.beta and beta == 0 and op.beta_zero_skips_c_in
    if op.has_c_in and not skip_beta:
        y = add(y, scale(constant(extras["c_in"]), beta, ar), ar)
    if op.bias:
        bias = constant(np.broadcast_to(_bias(np.asarray(extras["bias"], dtype=np.float64), op.bias), y.value.shape))
        if op.beta and op.beta_scales == "bias":
            bias = None if skip_beta else scale(bias, beta, ar)
        if bias is not None:
            y = add(y, bias, ar)
    return y
