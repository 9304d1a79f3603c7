"""Where a wrong value comes from: the worst element of a failure against the float64 reference,
recomputed step by step as declared and under a few plausible deviations from it.

A failure says C is outside what a correct kernel may return; it does not say why. For the worst
element this module recomputes the reference as reference/epilogue.py, reference/scaled.py and
reference/grouped.py do (the product, its scales, alpha, beta and C_in, the bias, the activation, the
residual, a router weight, the output's rounding), once as declared and once for each deviation below,
each with its own sound bound, and names the deviation that explains the kernel's value there (the
closest, in units of its own bound, where several do):

  the product     A and B truncated or rounded to tf32 (fp32 inputs); an integer accumulator of 8 or 16
                  bits (partial sums wrap)
  scales          a_scale and b_scale rounded to fp16 or bf16 first, one of them not applied, an E8M0
                  byte 0 (2**-127) read as 0; int4 weights: another zero point (none subtracted included)
  the epilogue    gelu's tanh approximation for erf's (or erf's for the approximation), the activation
                  not applied, alpha not applied or applied after the activation, C_in not added, beta
                  not applied or C_in read although beta = 0, the bias not added or added twice, the
                  residual not added, neither the activation nor the residual applied, gate and up swapped
  grouped         the router weight not applied
  the output      rounded toward zero (truncated) instead of to nearest
  the K loop      (where no deviation above fits) only the first or the last n of the K products summed
  accumulation    (where nothing above fits; it widens the bound rather than moving the value) a float
                  accumulator of fewer bits: the most it can keep for C to fit (fp16 keeps 11, bf16 8,
                  Hopper's fp8 accumulation 13), or, C infinite, fp16's range

The kernel's value at the worst element is all there is to go on, so no step can be blamed from it
alone: every step's error passes into the next, and with the later steps correct a value outside the
final bound is outside every earlier step's too. A deviation is a claim that can be checked: C fits
it or not. A deviation "fits" when the kernel's value is within that computation's bound before the
output rounding plus what rounding to C's dtype adds at the kernel's value (half an ulp of C's dtype
there; a whole one toward zero): tighter than the check's own bound, which rounds at C's largest
possible value, so that nearby bit counts stay apart. Where none fits, the declared computation's
intermediates at the element are listed, so the kernel's own can be compared with them.

Every line is computed from the worst element's row of A and column of B alone (cheap, and for a
failing example only), the declared computation is recomputed first and must reproduce the check's
reference at that element, and `explain` never raises: a diagnosis that fails, or finds its
recomputation differing from the check's, says nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from gemm_fuzz.kernels.operation import ACTIVATIONS
from gemm_fuzz.properties.judge.failures import WrongValue
from gemm_fuzz.reference import bounds, epilogue, numpy_ref, scaled
from gemm_fuzz.reference.epilogue import Term
from gemm_fuzz.reference.formats import FORMATS, Format, by_name, name_of
from gemm_fuzz.reference.numpy_ref import to_float64

SMALL_K = 16  # up to this K the worst element's row of A and column of B are shown
PREFIX_K = 256  # up to this K the K loop cut short is tried (every prefix and suffix of the products)
_SLACK = 1.0 + 2.0**-30  # float64 evaluation of a fit rounds too
_FP32 = FORMATS["fp32"]


def explain(failure: WrongValue, ops, precision: str, partials: int = 0) -> None:
    """Append to `failure`'s message the worst element's inputs (K <= SMALL_K) and one `step:` line saying
    which deviation from the declared computation explains its value (or, where none does, the
    reference's steps there). `ops`: the launch's Operands; `precision`, `partials`: as the check judged
    it. Never raises, and adds nothing it could not compute soundly."""
    try:
        lines = _lines(failure, ops, precision, partials)
    except Exception:  # noqa: BLE001  a diagnosis that fails says nothing
        return
    if lines:
        failure.message += "\n" + "\n".join(lines)
        failure.args = (failure.message,)


# --- the worst element's inputs -------------------------------------------------------------------------


@dataclass
class Element:
    """What C[at] is computed from: A's row (1 x k, as stored: codes for scaled operands), B's matrix of
    the problem or group (k x columns, as stored), the column(s) of it C[at] reads (gated: gate, up), the
    scales as dequantization takes them, the extras' values there and the router weight."""

    at: tuple[int, ...]
    a: torch.Tensor
    b: torch.Tensor
    cols: tuple[int, ...]
    a_name: str
    b_names: tuple[str, ...]
    scales: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)  # bias, c_in, residual: float64 scalars
    weight: float | None = None

    @property
    def k(self) -> int:
        """K as the check's bound takes it: A's columns (e2m1 codes two a byte: its bytes)."""
        return int(self.a.shape[-1])


def element(ops, at: tuple[int, ...]) -> Element | None:
    """The inputs of C[at] (None where no group computes it, or it is a non-local expert's zero)."""
    op = ops.operation
    a, b = ops.a.view, ops.b.view
    if op.grouped:
        return _group_element(ops, at)
    *lead, i, j = at
    lead = tuple(lead)
    cols = _columns(op, j, ops.c.view.shape[-1])
    lead_text = "".join(f"{z}, " for z in lead)
    el = Element(at, a[(*lead, slice(i, i + 1))], b[lead], cols, f"A[{lead_text}{i}, :]",
                 tuple(f"B[{lead_text}:, {c}]" for c in cols))
    if op.scaled:
        el.scales = _scales(ops, i)
    for name in ("c_in", "residual"):
        if name in ops.extras:
            el.values[name] = float(to_float64(ops.extras[name].view[at]))
    if op.bias and "bias" in ops.extras:
        el.values["bias"] = float(to_float64(ops.extras["bias"].view[j if op.bias == "n" else i]))
    return el


def _columns(op, j: int, n: int) -> tuple[int, ...]:
    if not op.gated:
        return (j,)
    return (j, n + j) if op.gated == "concat" else (2 * j, 2 * j + 1)


def _scales(ops, i: int) -> dict:
    """The scales of row i of A (one for A: that one) and B's whole."""
    op = ops.operation
    found = {name: g.view for name, g in ops.extras.items() if name in ("b_scale", "b_zero")}
    if "a_scale" in ops.extras:
        s = ops.extras["a_scale"].view
        found["a_scale"] = s if op.a_scale == "tensor" else s[i:i + 1]
    return found


def _group_element(ops, at: tuple[int, ...]) -> Element | None:
    from gemm_fuzz.properties.model import grouped as groups_of

    op = ops.operation
    a, b = ops.a.view, ops.b.view
    r, j = at
    found, _ = groups_of.group_rows(ops.case, op.block_m)
    for g in found:
        hit = np.flatnonzero(g.c_rows == r)
        if hit.size:
            break
    else:
        return None
    if not g.local:
        return None
    p = int(hit[0])
    token = int(g.a_rows[p])
    k = g.k if g.k is not None else a.shape[-1]
    n_g = g.n if g.n is not None else b.shape[-1]
    cols = _columns(op, j, ops.c.view.shape[-1])
    if max(cols) >= n_g:
        return None
    el = Element(at, a[token:token + 1, :k], b[g.group][:k, :n_g], cols, f"A[{token}, :]",
                 tuple(f"B[{g.group}, :, {c}]" for c in cols))
    if op.routed_weight and g.weights is not None:
        el.weight = float(g.weights[p])
    if op.bias and "bias" in ops.extras:
        el.values["bias"] = float(to_float64(ops.extras["bias"].view[g.group][j]))
    if op.scaled:
        a_scale, b_scale = ops.extras["a_scale"].view, ops.extras["b_scale"].view
        el.scales = {"a_scale": a_scale if op.a_scale == "tensor" else a_scale[token:token + 1],
                     "b_scale": b_scale[g.group:g.group + 1] if b_scale.dim() == 1 else b_scale[g.group]}
    return el


def _numbers(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{float(v):.6g}" for v in np.ravel(values)) + "]"


def _along_k(values: np.ndarray) -> str:
    """A scale along K: one number where it is the same for every k."""
    flat = np.ravel(values)
    if flat.size and np.all((flat == flat[0]) | (np.isnan(flat) & np.isnan(flat[0]))):
        return f"{float(flat[0]):.6g} (every k)"
    return _numbers(flat)


def input_lines(el: Element, op) -> list[str]:
    """The row of A and column(s) of B of the element (their codes and scales where the operation
    scales them), each on its line."""
    if not op.scaled:
        a = to_float64(el.a)[0]
        b = to_float64(el.b)
        tags = (" (gate)", " (up)") if op.gated else ("",)
        return [f"{el.a_name} = {_numbers(a)}"] + [f"{name}{tag} = {_numbers(b[:, c])}"
                                                   for name, tag, c in zip(el.b_names, tags, el.cols)]
    cols = list(el.cols)
    if op.weight_only:  # the codes, their zero points and scales
        a, codes, z, s = _weight_parts(op, el)
        zero = "+ zero point" if op.zero == "float" else "- zero point"
        return [f"{el.a_name} = {_numbers(a[0])}"] + [
            f"{name} = {_numbers(codes[:, c])} (codes) {zero} {_along_k(z[:, c])}, x b_scale {_along_k(s[:, c])}"
            for name, c in zip(el.b_names, cols)]
    codes_a, codes_b, sa, sb, _ = _dequantized(op, el)[2]
    out = [f"{el.a_name} = {_numbers(codes_a[0])} (codes) x a_scale {_along_k(sa[0])}"]
    for name, c in zip(el.b_names, cols):
        out.append(f"{name} = {_numbers(codes_b[:, c])} (codes) x b_scale {_along_k(sb[:, c])}")
    return out


# --- one computation of the element, declared or deviating ------------------------------------------------


@dataclass(frozen=True)
class Deviation:
    """One way a kernel may depart from the declared computation: where (the step), what, and what it
    changes (flags read by the recomputation)."""

    step: str
    text: str
    flags: dict = field(default_factory=dict)


DECLARED = Deviation("", "the declared computation")


@dataclass(frozen=True)
class Outcome:
    """The element under one computation: its value before the rounding to C, a bound on a kernel's
    distance from it there, whether a kernel must return it bit for bit, and which non-finite results
    are acceptable; `free`: no sound verdict; `steps`: the intermediates, named."""

    value: np.ndarray
    err: np.ndarray
    exact: np.ndarray
    free: np.ndarray
    pos_inf: np.ndarray
    neg_inf: np.ndarray
    nan: np.ndarray
    toward_zero: bool = False
    steps: tuple = ()


class _Context:
    """What every recomputation of one element shares."""

    def __init__(self, ops, el: Element, precision: str, partials: int):
        self.ops, self.el, self.op = ops, el, ops.operation
        self.dtype = name_of(ops.a.view.dtype)
        self.out = by_name(name_of(ops.c.view.dtype))
        self.arith = bounds.arithmetic(self.dtype, precision, partials)
        self.scalars = dict(ops.scalars)
        self.k = el.k


def _dequantized(op, el: Element, scales: dict | None = None):
    """scaled.dequantized of the element's row of A and its B (whole: packed codes unpack by column)."""
    return scaled.dequantized(op, el.a, el.b, el.scales if scales is None else scales)


def _weight_parts(op, el: Element):
    """A weight-only operation's A row, B's codes, zero points and scales (K x B's columns), float64."""
    a = scaled.a_codes(op, el.a)
    b_scale = scaled.scale_values(op, el.scales["b_scale"])
    codes = scaled.unpacked(op, el.b, a.shape[-1], b_scale.shape[-1])
    s = scaled.expanded(op, "b", b_scale, codes.shape)
    return a, codes, scaled.zero_points(op, el.scales.get("b_zero"), codes.shape), s


def _with_zero(op, el: Element, zero: float):
    """scaled.dequantized of int weights, every zero point taken as `zero`."""
    a, codes, _, s = _weight_parts(op, el)
    ones_a, ones_b = np.ones(a.shape), np.ones(s.shape)
    b2 = (codes - zero) * s
    if op.scale_after_dot:
        return a, b2, (a, codes - zero, ones_a, s, None)
    return a, b2, (a, b2, ones_a, ones_b, None)


def _product(ctx: _Context, dev: Deviation, mask: np.ndarray | None = None):
    """The accumulated product of the element's row and column(s) under `dev`: (Product or None, Term);
    `mask` (P x k, bool): P products, each of the terms it keeps (the K loop cut short)."""
    el, op, flags = ctx.el, ctx.op, dev.flags
    cols = list(el.cols)
    if op.scaled:
        a2, b2, parts = _with_zero(op, el, flags["zero"]) if "zero" in flags else _dequantized(op, el)
        codes_a, codes_b, sa, sb, weight_err = parts
        if "scales" in flags and not op.weight_only:
            sa, sb = flags["scales"](sa, "a"), flags["scales"](sb, "b")
            with np.errstate(invalid="ignore", over="ignore"):
                a2, b2 = codes_a * sa, codes_b * sb
        parts = (codes_a, codes_b[:, cols], sa, sb[:, cols], None if weight_err is None else weight_err[:, cols])
        prod = numpy_ref.product(_tensor(a2), _tensor(b2[:, cols]))
        return prod, scaled.product_term(op, prod, parts, ctx.k, ctx.dtype)
    a, b = to_float64(el.a), to_float64(el.b)[:, cols]
    if "tf32" in flags:
        a, b = flags["tf32"](a), flags["tf32"](b)
    if mask is not None:
        a = np.where(mask[:, None, :], a[None], 0.0)
        b = np.where(mask[:, :, None], b[None], 0.0)
    arith = flags.get("arith", ctx.arith)
    prod = numpy_ref.product(_tensor(a), _tensor(b))
    return prod, epilogue.product_term(prod, ctx.k, arith)


def _tensor(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(x, dtype=np.float64))  # a copy: broadcast views are read-only


def outcome(ctx: _Context, dev: Deviation, mask: np.ndarray | None = None) -> Outcome:
    """The element computed as declared but for `dev`."""
    op, out, flags = ctx.op, ctx.out, dev.flags
    prod, p = _product(ctx, dev, mask)
    steps = [("product", p)]
    if not (op.has_epilogue or op.scaled or ctx.el.weight is not None):
        arith = flags.get("arith", ctx.arith)
        allow = bounds.allowance(prod, ctx.k, arith, out)
        term = p
    else:
        term = _epilogue(ctx, p, dev, steps)
        allow = epilogue.finish(term, out)
    # the allowance's own masks say where a verdict is unsound (epilogue.finish keeps the Term's; a plain
    # product's classes are the allowance's: an Inf the accumulator's range makes possible is allowed there)
    free = allow.free if allow.free is not None else np.zeros(np.shape(term.value), dtype=bool)
    exact = np.broadcast_to(allow.exact, np.shape(term.value))
    if flags.get("toward_zero"):  # the rounding alone differs: no Inf from a finite value, no NaN
        return Outcome(term.value, term.err, exact, free, np.isposinf(term.value), np.isneginf(term.value),
                       np.isnan(term.value), True, tuple(steps))
    if "wrap" in flags:  # integer partial sums kept in fewer bits wrap: the sum modulo 2**bits, in any order
        half = 2.0 ** (flags["wrap"] - 1)
        value = np.mod(term.value + half, 2 * half) - half
        return Outcome(value, term.err, exact, free, allow.pos_inf, allow.neg_inf, allow.nan, False, tuple(steps))
    return Outcome(term.value, term.err, exact, free, allow.pos_inf, allow.neg_inf, allow.nan, False, tuple(steps))


def _epilogue(ctx: _Context, p: Term, dev: Deviation, steps: list) -> Term:
    """reference/epilogue.py's allowances (and reference/grouped.py's router weight) for one element,
    with `dev`'s flags; each intermediate appended to `steps`."""
    op, el, flags = ctx.op, ctx.el, dev.flags
    ar = epilogue.arithmetic(op.epilogue_dtype, ctx.out)
    activation = flags.get("activation", op.activation)
    if flags.get("no_activation"):
        activation = None
    if el.weight is not None:  # routed: the product times the router weight, in fp32
        if flags.get("no_weight"):
            return p
        c = epilogue.multiply(p, epilogue.constant(np.full(np.shape(p.value), el.weight)),
                              epilogue.Arithmetic(_FP32))
        steps.append(("x router weight", c))
        return c
    if op.gated:
        gate, up = _half(p, 0), _half(p, 1)
        if flags.get("swap_halves"):
            gate, up = up, gate
        gate, up = epilogue.converted(gate, ar), epilogue.converted(up, ar)
        act = epilogue.activate(gate, activation, ar, op.slope)
        steps.append((f"{activation}(gate)" if activation else "gate", act))
        c = epilogue.multiply(act, up, ar)
        steps.append(("x up", c))
    else:
        y = _linear(ctx, epilogue.converted(p, ar), dev, ar, steps)
        if flags.get("skip_after") == "linear":
            return y
        c = epilogue.activate(y, activation, ar, op.slope)
        if activation:
            steps.append((activation, c))
        if flags.get("alpha_after"):
            c = epilogue.scale(c, ctx.scalars.get("alpha", 1.0), ar)
            steps.append(("x alpha", c))
    if op.residual and not flags.get("no_residual"):
        c = epilogue.add(c, _constant(el.values["residual"], c), ar)
        steps.append(("+ residual", c))
    return c


def _half(t: Term, i: int) -> Term:
    return Term(*(x[..., i:i + 1] for x in (t.value, t.err, t.exact, t.free)))


def _constant(value: float, like: Term) -> Term:
    return epilogue.constant(np.full(np.shape(like.value), value))


def _linear(ctx: _Context, p: Term, dev: Deviation, ar, steps: list) -> Term:
    """alpha * P + beta * C_in + bias, as reference/epilogue.py's _linear, with `dev`'s flags."""
    op, el, flags = ctx.op, ctx.el, dev.flags
    alpha, beta = ctx.scalars.get("alpha", 1.0), ctx.scalars.get("beta", 1.0)
    if flags.get("no_alpha"):
        alpha = 1.0
    if op.alpha and alpha == 0 and op.alpha_zero_skips_ab and not flags.get("alpha_after"):
        y = epilogue.constant(np.zeros(np.shape(p.value)))
    elif op.alpha and not flags.get("alpha_after"):
        y = epilogue.scale(p, alpha, ar)
        steps.append(("x alpha", y))
    else:
        y = p
    skip_beta = op.beta and beta == 0 and op.beta_zero_skips_c_in
    if op.has_c_in and not flags.get("no_c_in"):
        if not skip_beta or flags.get("c_in_read"):
            y = epilogue.add(y, epilogue.scale(_constant(el.values["c_in"], y),
                                               1.0 if flags.get("no_beta") else beta, ar), ar)
            steps.append(("+ beta C_in", y))
    if op.bias and not flags.get("no_bias"):
        bias = _constant(el.values["bias"], y)
        if op.beta and op.beta_scales == "bias":
            bias = None if skip_beta else epilogue.scale(bias, 1.0 if flags.get("no_beta") else beta, ar)
        for _ in range(2 if flags.get("bias_twice") else 1 if bias is not None else 0):
            y = epilogue.add(y, bias, ar)
        if bias is not None:
            steps.append(("+ bias", y))
    return y


# --- the deviations tried -------------------------------------------------------------------------------


def _rounded(x: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    return torch.from_numpy(np.array(x, dtype=np.float64)).to(dtype).double().numpy()


def _tf32(mode: str):
    """fp32 values kept to tf32's 10 fraction bits: truncated (as an H100's tensor cores do) or rounded."""
    def keep(x: np.ndarray) -> np.ndarray:
        bits = torch.from_numpy(np.array(x, dtype=np.float64)).float().view(torch.int32)
        if mode == "rounded":
            bits = bits + 0x1000  # half of the 13 dropped bits' unit: ties away from zero
        return (bits & ~0x1FFF).view(torch.float32).double().numpy()
    return keep


def _accumulator(ctx: _Context, bits: int, acc: Format | None = None) -> Deviation:
    """Partial sums kept in `bits` significant bits (rounding), in the range of `acc` (default: the
    declared accumulator's)."""
    acc = acc or ctx.arith.acc
    arith = replace(ctx.arith, acc=acc, acc_u=2.0**-bits, exact_bits=min(bits, ctx.arith.exact_bits),
                    acc_tiny=max(acc.min_normal, ctx.arith.acc_tiny))
    return Deviation("the accumulation", f"partial sums kept in {bits} significant bits", {"arith": arith})


def _fewer_bits(ctx: _Context, got: float) -> tuple[str, Outcome] | None:
    """The narrowest float accumulator C fits: an infinite C, an fp16 one's range; a finite C, the most
    significant bits whose bound it fits, below the declared accumulator's (each bound holds the next
    narrower one's, so the first that fits is the claim: that many bits, or fewer). Words, and the fit."""
    if not ctx.arith.acc.is_float or ctx.op.scaled:
        return None
    if math.isinf(got):
        fp16 = FORMATS["fp16"]
        o = outcome(ctx, _accumulator(ctx, fp16.p, fp16))
        return (f"an fp16 accumulator: {{}}: a partial result past fp16's largest value ({fp16.max:g})?", o) \
            if fits(o, got, ctx.out, (0, 0)) else None
    for bits in range(round(-math.log2(ctx.arith.acc_u)) - 1, 3, -1):
        o = outcome(ctx, _accumulator(ctx, bits))
        if fits(o, got, ctx.out, (0, 0)):
            return (f"partial sums kept in {bits} significant bits or fewer (fp16 keeps 11, bf16 8, Hopper's fp8 "
                    "accumulation 13): {}", o)
    return None


def deviations(ctx: _Context) -> list[Deviation]:
    """The deviations that can apply to the element's operation, those that change the value first."""
    op, s = ctx.op, ctx.scalars
    found = []
    if op.scaled and not op.weight_only:
        if op.scale_dtype == "fp32":
            for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
                found.append(Deviation("scales", f"the product with a_scale and b_scale rounded to {name} first",
                                       {"scales": lambda x, _, dtype=dtype: _rounded(x, dtype)}))
        found.append(Deviation("scales", "the product without a_scale",
                               {"scales": lambda x, which: np.ones_like(x) if which == "a" else x}))
        found.append(Deviation("scales", "the product without b_scale",
                               {"scales": lambda x, which: np.ones_like(x) if which == "b" else x}))
        if op.scale_dtype == "e8m0":
            found.append(Deviation("scales", "the product with E8M0 byte 0 (2**-127) read as 0",
                                   {"scales": lambda x, _: np.where(x == 2.0**-127, 0.0, x)}))
    if op.weight == "int4" and op.zero != "float":
        declared = _weight_parts(op, ctx.el)[2][:, list(ctx.el.cols)]
        for zero in range(16):
            if np.all(declared == zero):
                continue
            text = "no zero point subtracted" if zero == 0 else f"the zero point {zero} for every k"
            if np.all(declared == declared.flat[0]):
                text += f", not {float(declared.flat[0]):g}"
            found.append(Deviation("the weights", f"the weights dequantized with {text}", {"zero": float(zero)}))
    if ctx.dtype == "fp32" and ctx.arith.name != "tf32" and not op.scaled:
        for mode in ("truncated", "rounded"):
            found.append(Deviation("the product", f"A and B {mode} to tf32 (tl.dot's default input_precision for "
                                   "fp32: pass input_precision='ieee', or declare precision 'tf32')",
                                   {"tf32": _tf32(mode)}))
    act = op.activation
    if act in ("gelu", "gelu_tanh"):
        other = "gelu_tanh" if act == "gelu" else "gelu"
        text = ("gelu's tanh approximation (erf's gelu is declared)" if act == "gelu" else
                "erf's gelu (its tanh approximation, gelu_tanh, is declared)")
        found.append(Deviation("the activation", text, {"activation": other}))
    if act:
        found.append(Deviation("the activation", f"no {act} applied", {"no_activation": True}))
        for other in ACTIVATIONS:  # another activation altogether (leaky_relu where relu is declared, say)
            if other != act and {act, other} != {"gelu", "gelu_tanh"}:
                slope = f" (slope {op.slope})" if other == "leaky_relu" else ""
                found.append(Deviation("the activation", f"{other}{slope}, not the declared {act}",
                                       {"activation": other}))
    if op.gated:
        found.append(Deviation("the gate", "the activation applied to the up half, not the gate",
                               {"swap_halves": True}))
    alpha, beta = s.get("alpha", 1.0), s.get("beta", 1.0)
    if op.alpha and alpha != 1:
        found.append(Deviation("alpha", "alpha not applied", {"no_alpha": True}))
        if act:
            found.append(Deviation("alpha", f"alpha applied after the activation (alpha * {act}(...)), not "
                                   "before it", {"alpha_after": True}))
    if op.has_c_in:
        found.append(Deviation("C_in", "C_in not added", {"no_c_in": True}))
        if beta == 0 and op.beta_zero_skips_c_in:
            found.append(Deviation("C_in", "C_in read although beta = 0 (BLAS does not read it)", {"c_in_read": True}))
    if op.beta and beta != 1:
        found.append(Deviation("beta", "beta not applied", {"no_beta": True}))
    if op.bias:
        found.append(Deviation("the bias", "the bias not added", {"no_bias": True}))
        found.append(Deviation("the bias", "the bias added twice", {"bias_twice": True}))
    if op.residual:
        found.append(Deviation("the residual", "the residual not added", {"no_residual": True}))
        if act and not op.gated:
            found.append(Deviation("the activation", f"the value before the {act}, neither it nor the residual "
                                   "applied", {"skip_after": "linear"}))
    if ctx.el.weight is not None:
        found.append(Deviation("the router weight", "the router weight not applied", {"no_weight": True}))
    if ctx.out.is_float and ctx.out.name != "fp32":
        found.append(Deviation("the output rounding", "C rounded toward zero (truncated), not to nearest",
                               {"toward_zero": True}))
    if not ctx.arith.acc.is_float and not op.scaled and not ctx.out.is_float:
        for bits in (8, 16):
            found.append(Deviation("the accumulation", f"an int{bits} accumulator (partial sums wrap past "
                                   f"{2 ** (bits - 1) - 1})", {"wrap": bits}))
    return found


# --- does a computation explain the kernel's value? -------------------------------------------------------


def _ulp(x: float, out: Format) -> float:
    """The spacing of C's dtype at x."""
    if not out.is_float:
        return 1.0
    x = abs(x)
    if x < out.min_normal:
        return out.min_subnormal
    return 2.0 ** (math.frexp(x)[1] - out.p)


def toward_zero(v: float, out: Format) -> float:
    """v rounded to C's dtype toward zero."""
    if not out.is_float:
        return float(math.trunc(v))
    r = torch.tensor(v, dtype=torch.float64).to(out.dtype)
    if abs(float(r)) > abs(v):
        ints = {1: torch.int8, 2: torch.int16, 4: torch.int32}[r.element_size()]
        r = (r.view(ints) - 1).view(out.dtype)  # one step toward zero: the magnitude's bits less one
    return float(r)


def nearest(v: float, out: Format) -> float:
    return float(torch.tensor(v, dtype=torch.float64).to(out.dtype).double())


def fits(o: Outcome, got: float, out: Format, i=()) -> bool:
    """Is the kernel's value `got` what a correct kernel computing `o` may store (element `i` of it)?"""
    v, err = float(o.value[i]), float(o.err[i])
    if bool(o.free[i]):
        return False
    if math.isnan(got):
        return math.isnan(v) or bool(o.nan[i])
    if math.isinf(got):
        return got == v or bool(o.pos_inf[i] if got > 0 else o.neg_inf[i])
    if not math.isfinite(v):
        return False
    if bool(o.exact[i]):
        return got == (toward_zero(v, out) if o.toward_zero else nearest(v, out))
    ulp = _ulp(got, out)
    if o.toward_zero:
        return abs(got - v) <= (err + ulp) * _SLACK and abs(got) <= (abs(v) + err) * _SLACK
    return abs(got - v) <= (err + ulp / 2) * _SLACK


# --- the lines ------------------------------------------------------------------------------------------


def _fmt(x: float) -> str:
    return f"{x:.9g}"


def _lines(failure: WrongValue, ops, precision: str, partials: int) -> list[str]:
    index = failure.fields.get("index")
    if index is None or "got" not in failure.fields:
        return []
    el = element(ops, tuple(int(i) for i in index))
    if el is None:
        return []
    lines = input_lines(el, ops.operation) if el.k <= SMALL_K else []
    step = step_line(ops, el, precision, partials, float(failure.fields["got"]), failure.fields.get("expected"))
    return lines + ([step] if step else [])


def step_line(ops, el: Element, precision: str, partials: int, got: float, expected=None) -> str | None:
    """The `step:` line for C[el.at] = got, or None where nothing sound can be said."""
    ctx = _Context(ops, el, precision, partials)
    name = "C[" + ", ".join(map(str, el.at)) + "]"
    declared = outcome(ctx, DECLARED)
    v = float(declared.value[0, 0])
    if expected is not None and not _same(v, float(expected), ctx.out):
        return None  # the recomputation is not the check's: say nothing
    if fits(declared, got, ctx.out, (0, 0)):
        return None  # within the declared computation's fit: nothing to blame
    found, seen = [], []
    for dev in deviations(ctx):
        o = outcome(ctx, dev)
        if fits(o, got, ctx.out, (0, 0)):
            key = float(o.value[0, 0])
            if key not in seen:  # one that predicts what an earlier one does here says nothing more
                found.append((dev, o))
                seen.append(key)
    said = f"{name} = {_fmt(got)} fits"
    against = f"against {_value(declared, ctx.out)} as declared"
    if found:  # the closest fit, in units of its own allowance
        found.sort(key=lambda fit: _distance(fit[1], got, ctx.out))
        dev, o = found[0]
        more = f" (and {len(found) - 1} other deviation{'s' * (len(found) > 2)}, less closely)" if found[1:] else ""
        return f"step: {dev.step}: {said} {dev.text}: {_value(o, ctx.out)}{more}, {against}"
    if not math.isfinite(v):
        return None  # the message already says what a finite value where a non-finite one is due means
    cut = _cut_short(ctx, got)
    if cut:
        return f"step: the K loop: {said} {cut}, {against}"
    narrower = _fewer_bits(ctx, got)
    if narrower:
        text, o = narrower
        return f"step: the accumulation: {said} {text.format(f'{_value(o, ctx.out)}, {against}')}"
    if not (math.isfinite(got) and math.isfinite(v)):
        return None  # the message already says what a non-finite value means here
    if len(declared.steps) > 1:
        return (f"step: no single deviation tried explains {name} = {_fmt(got)}; the reference there, step by "
                f"step: {_trail(declared, ctx.out)}")
    tried = ("scales rounded or left out, a zero point" if ctx.op.scaled else
             "a narrower accumulator, tf32 operands, rounding toward zero or the K loop cut short")
    return (f"step: the product: no single deviation tried ({tried}) explains {name} = {_fmt(got)} ({against}): "
            "elements of A or B summed that are not its row and column, or one of them twice?")


def _distance(o: Outcome, got: float, out: Format) -> float:
    """How far the kernel's value is from a computation's, in units of what a correct kernel may differ
    there (0 where it is that computation's exact or non-finite value)."""
    v, err = float(o.value[0, 0]), float(o.err[0, 0])
    if not (math.isfinite(v) and math.isfinite(got)):
        return 0.0
    return abs(got - v) / (err + _ulp(got, out) / 2)


def _same(v: float, expected: float, out: Format) -> bool:
    """Does the recomputed reference match the check's at the element (the rounded value where exact)?"""
    if math.isnan(v) or math.isnan(expected):
        return math.isnan(v) and math.isnan(expected)
    if math.isinf(v) or math.isinf(expected):
        return v == expected
    return abs(v - expected) <= 1e-9 * abs(expected) + _ulp(expected, out) / 2 + 1e-300


def _value(t, out: Format, i=(0, 0)) -> str:
    """A computation's value at the element: as C holds it where exact, else before its rounding to C and
    how far a correct kernel may be from it there."""
    v, err = float(t.value[i]), float(t.err[i])
    if bool(t.exact[i]):
        return f"exactly {_fmt(toward_zero(v, out) if getattr(t, 'toward_zero', False) else nearest(v, out))}"
    if not math.isfinite(v):
        return _fmt(v)
    return f"{_fmt(v)} +- {err:.3g}"


def _trail(o: Outcome, out: Format) -> str:
    """The declared computation's intermediates at the element (exact ones as C's dtype holds them)."""
    return ", ".join(f"{label} {_value(t, out)}" for label, t in o.steps if np.size(t.value) == 1)


def _cut_short(ctx: _Context, got: float) -> str | None:
    """Does C fit the sum of only the first (or the last) n of the K products? Words saying so, or None."""
    k = ctx.k
    if ctx.op.scaled or k < 1 or k > PREFIX_K:
        return None
    ks = np.arange(k)
    for first in (True, False):
        lengths = np.arange(0 if first else 1, k)  # none at all is the first 0
        if not lengths.size:
            continue
        mask = ks[None, :] < lengths[:, None] if first else ks[None, :] >= (k - lengths)[:, None]
        o = outcome(ctx, DECLARED, mask)
        hits = [int(n) for i, n in enumerate(lengths) if fits(o, got, ctx.out, (i, 0, 0))]
        if not hits:
            continue
        n = max(hits)
        if n == 0:
            return f"none of its {k} products (the K loop never runs?)"
        return (f"the sum of only the {'first' if first else 'last'} {n} of its {k} products (the "
                f"{'last' if first else 'first'} {k - n} dropped: the K loop stops early or starts late?)")
    return None
