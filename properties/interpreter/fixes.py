"""Known gaps of Triton's CPU interpreter, each probed at start-up and, where it is present and a
faithful emulation exists, fixed for this process. `apply()` returns what it applied, for the header.

  bf16 dot       tl.dot on bf16 multiplies the raw uint16 bit patterns (triton-lang/triton#11584):
                 bf16 operands are converted exactly to fp32 before the product, as the GPU does.
  tf32 dot       the interpreter ignores input_precision, so a kernel that silently computes fp32 in
                 tf32 would pass on the CPU: fp32 operands of a tf32 tl.dot are rounded to tf32 first,
                 the way the H100 does (TF32_ROUNDING below, checked on the GPU by tests/test_backends).
  bf16 ops       elementwise arithmetic, comparisons, min and max on bf16 operate on the raw uint16 bit
                 patterns (NaN == NaN, -1 > 1, 1.5 + 1.5 nonsense; no upstream issue found): bf16
                 operands are widened exactly to fp32, the op runs there, and results are rounded
                 back to nearest even, as the GPU's bf16 arithmetic rounds.
  bf16 cast      fp32 -> bf16 conversions (`.to(tl.bfloat16)`) truncate, where the GPU rounds to nearest
                 even (cvt.rn.bf16.f32): they are rounded to nearest even. No upstream issue found.
  int <-> bf16   integer -> bf16 conversions (`.to(tl.bfloat16)` of int8 weights, say) copy the integer's
                 value into the bf16 bit pattern (1 became 9.2e-41), and bf16 -> integer ones read the
                 bits as the integer; the GPU converts values (cvt.rn.bf16.s32, cvt.rzi.s32.bf16): an
                 integer is rounded once to nearest even, a bf16 truncated toward zero. No upstream
                 issue found.
  dot_scaled     Triton 3.6's interpreter has no tl.dot_scaled (its format strings reach a semantic that
                 expects constexprs, then a builder without create_dot_scaled): the formats are wrapped
                 and the product emulated as Triton 3.9's interpreter computes it, operands decoded
                 exactly (E8M0 byte 0 is 2**-127, 0xFF NaN) and multiplied in fp32. The probe checks
                 the product's values, those scales included.
  bf16 widening  bf16 -> fp32 conversions renormalize subnormals and then clamp the exponent, so a
                 subnormal bf16 comes out as another number or 0 (Inf * subnormal became NaN); the GPU
                 widens exactly (the bits are fp32's top half): they are widened exactly.
  undefined      a masked tl.load without `other` leaves masked-off lanes undefined on the GPU (their
                 registers keep whatever they held; triton-lang/triton#737), but the interpreter fills
                 them with zeros, which hides the bug: they are filled with poison instead (NaN for
                 floats, the minimum for integers), so a kernel that uses them fails visibly.
  fp8 widening   the interpreter widens fp8 operands (in tl.dot and casts) with bit arithmetic that treats
                 every pattern as a normal number: e4m3's NaN becomes 480, e5m2's Inf 131072, and
                 e5m2 subnormals come out wrong; the GPU keeps them all: fp8 values are widened
                 through a table of the exact values of all 256 patterns.
  rtne, rtz      x.to(fp16 or bf16, fp_downcast_rounding=...) rounded "rtne" half up and made NaN of every
                 value past the format's range ("rtz" too), where the GPU's cvt.rn / cvt.rz round to
                 nearest even and toward zero (the largest finite value on overflow): emulated so.
  loop bounds    Triton 3.6's interpreter calls int() on 1-element arrays, which NumPy >= 2.4 refuses
                 ('only 0-dimensional arrays can be converted'): `range(0, K, BK)` loops fail.
  loop indices   `for g in tl.range(0, G)` (and `range`) hands out Python ints where compiled code has an
                 int32 (or int64) scalar: `g.to(tl.int64)` raised AttributeError at the kernel's line, and
                 `g * stride` never wrapped at 32 bits: indices are made Triton scalars of the type the
                 compiler gives them (tl.static_range keeps its constexprs).
  boolean ops    `a and b`, `a or b` and `not a` on blocks took Python's truth of a block (always true): a
                 mask `(rows < M) and (cols < N)` lost its first half. The compiler combines tensors
                 elementwise (code_generator.visit_BoolOp): so are they.
  fp8 narrowing  fp32/fp16/bf16 -> fp8 casts (in-kernel activation quantization) rounded halves away from
                 zero, lost the carry into the exponent and did not saturate: rounded to nearest even and
                 saturated, as cvt.rn.satfinite does on the GPU (tests/test_backends checks it there).
  half atomics   tl.atomic_add on fp16 raises OverflowError where the sum overflows, and on bf16 raises
                 'Unsupported data type' (Triton 3.6 and 3.9): each lane's addition, in lane order, is
                 computed in float64 (exact for fp16; for bf16 53 >= 2 * 8 + 2 bits, so rounding twice
                 is rounding once) and rounded to nearest even, +-Inf on overflow, as atom.add.f16 and
                 atom.add.bf16 do on the GPU.

`FIXES` (at the end) is the table: each gap's probe, its fix and its header line, applied in order. Every fix
is verified after it is applied: if its probe still fails, start-up fails loudly. Loop indices and boolean
ops are rewrites of the kernel's syntax tree on top of the interpreter's own (`_kernel_rewriter`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter as _interp

from gemm_fuzz.reference import scaled

# How the GPU rounds an fp32 operand of a tf32 tl.dot: "rz" keeps the top 10 fraction bits
# (truncation), "rna" rounds to nearest with ties away, "rne" to nearest even.
TF32_ROUNDING = "rz"


def round_to_tf32(x: np.ndarray, mode: str = TF32_ROUNDING) -> np.ndarray:
    """fp32 values with their significand cut to tf32's 10 fraction bits; Inf and NaN unchanged."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    if mode == "rz":
        rounded = bits & np.uint32(0xFFFFE000)
    elif mode == "rna":
        rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    elif mode == "rne":
        rounded = (bits + np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)
    else:
        raise ValueError(f"unknown tf32 rounding {mode!r}; expected rz, rna or rne")
    return np.where(special, bits, rounded).view(np.float32)


@triton.jit
def _dot_probe(a_ptr, b_ptr, c_ptr, N: tl.constexpr, PRECISION: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs[:, None] * N + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * N + offs[None, :])
    c = tl.dot(a, b, input_precision=PRECISION)
    tl.store(c_ptr + offs[:, None] * N + offs[None, :], c)


@triton.jit
def _cast_probe(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.bfloat16))


@triton.jit
def _bf16_ops_probe(x_ptr, y_ptr, z_ptr, s_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(z_ptr + offs, (x == y).to(tl.int32) + 2 * (x < y).to(tl.int32) + 4 * (x > y).to(tl.int32))
    tl.store(s_ptr + offs, x + y)


def bf16_ops_are_faithful(device="cpu") -> bool:
    """bf16 comparisons and additions (NaN, signed zeros, signs, a sum that rounds) as torch does them."""
    x = torch.tensor([float("nan"), 0.0, -1.0, 2.0, 1.5, 256.0, -3.0, 1.0], dtype=torch.bfloat16, device=device)
    y = torch.tensor([float("nan"), -0.0, 1.0, 1.0, 1.5, 1.0, 0.5, 2.0**-8], dtype=torch.bfloat16, device=device)
    flags = torch.zeros(8, dtype=torch.int32, device=device)
    sums = torch.zeros(8, dtype=torch.bfloat16, device=device)
    _bf16_ops_probe[(1,)](x, y, flags, sums, N=8)
    expected = (x == y).int() + 2 * (x < y).int() + 4 * (x > y).int()
    return torch.equal(flags.cpu(), expected.cpu()) and torch.equal(sums.cpu().view(torch.int16),
                                                                     (x + y).cpu().view(torch.int16))


@triton.jit
def copy_kernel(x_ptr, y_ptr, N: tl.constexpr):
    """y[:N] = x[:N], unmasked: the sanitizer's self-test runs it past x's end."""
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def _loop_probe(x_ptr, K, BK: tl.constexpr):
    total = tl.zeros((BK,), dtype=tl.float32)
    for _ in range(0, K, BK):
        total += 1.0
    tl.store(x_ptr + tl.arange(0, BK), total)


def _run_dot(a: torch.Tensor, b: torch.Tensor, precision: str) -> torch.Tensor:
    c = torch.empty(a.shape, dtype=torch.float32, device=a.device)
    _dot_probe[(1,)](a, b, c, N=a.shape[0], PRECISION=precision)
    return c


def bf16_dot_is_exact(device="cpu") -> bool:
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-3, 4, (16, 16), generator=g).to(torch.bfloat16).to(device)
    b = torch.randint(-3, 4, (16, 16), generator=g).to(torch.bfloat16).to(device)
    return torch.equal(_run_dot(a, b, "ieee").cpu(), (a.double() @ b.double()).float().cpu())


def tf32_probe_operands() -> tuple[torch.Tensor, torch.Tensor]:
    """A has one non-zero per row, with fraction bits below tf32's tenth; B is the identity, so
    C = A after the GPU's tf32 rounding: row i tells how the i-th pattern rounds."""
    one = 1.0
    patterns = [
        one + 2**-11 + 2**-12,  # above half: rz -> 1, rna/rne -> 1 + 2**-10
        one + 2**-11,  # a tie: rz/rne -> 1, rna -> 1 + 2**-10
        one + 2**-10 + 2**-11,  # a tie with odd last bit: rz -> 1 + 2**-10, rna/rne -> 1 + 2**-9
        one + 2**-20,  # far below: 1 in every mode
        -(one + 2**-11 + 2**-12),  # negative: rz -> -1
    ]
    a = torch.zeros(16, 16, dtype=torch.float32)
    for i, p in enumerate(patterns):
        a[i, 0] = p
    return a, torch.eye(16, dtype=torch.float32)


def tf32_rounding_of(c: torch.Tensor) -> str | None:
    """Which rounding mode explains the probe's output (None: none does, e.g. no tf32 at all)."""
    a, _ = tf32_probe_operands()
    for mode in ("rz", "rna", "rne"):
        if torch.equal(c.cpu(), torch.from_numpy(round_to_tf32(a.numpy(), mode))):
            return mode
    return None


def tf32_dot_rounds(device="cpu") -> str | None:
    a, b = tf32_probe_operands()
    return tf32_rounding_of(_run_dot(a.to(device), b.to(device), "tf32"))


def bf16_cast_rounds_to_nearest_even(device="cpu") -> bool:
    # 375 and 377 are ties between bf16 neighbours (374, 376, 378); 1 + 3 * 2**-9 is above half
    x = torch.tensor([375.0, 377.0, 1 + 3 * 2**-9, -375.0, float("inf"), 3.0e38, 0.0, -0.0,
                      1.0, 2.0**-130, 65.0, 257.0, 259.0, 1.5, -7.0, 1e-3], device=device)
    y = torch.empty(16, dtype=torch.bfloat16, device=device)
    _cast_probe[(1,)](x, y, N=16)
    return torch.equal(y.cpu().view(torch.int16), x.cpu().to(torch.bfloat16).view(torch.int16))


def round_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 bit patterns, round to nearest even; NaN stays NaN (quiet)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, ((bits >> 16).astype(np.uint16) | np.uint16(0x0040)), rounded)


def loop_bounds_work() -> bool:
    x = torch.zeros(16)
    try:
        _loop_probe[(1,)](x, 40, BK=16)
    except Exception:
        return False
    return bool((x == 3).all())


_PRECISION = triton._C.libtriton.ir.INPUT_PRECISION


def _patch_bf16_dot() -> None:
    original = _interp.InterpreterBuilder.create_dot

    def to_fp32(h):
        if h.dtype.scalar == tl.bfloat16:  # raw bf16 bits are the top half of an fp32
            return _interp.TensorHandle((h.data.astype(np.uint32) << np.uint32(16)).view(np.float32), tl.float32)
        return h

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original(self, to_fp32(a), to_fp32(b), d, input_precision, max_num_imprecise_acc)

    _interp.InterpreterBuilder.create_dot = create_dot


def _patch_tf32_dot() -> None:
    original = _interp.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if input_precision == _PRECISION.TF32 and a.dtype.scalar == tl.float32 == b.dtype.scalar:
            a = _interp.TensorHandle(round_to_tf32(a.data), tl.float32)
            b = _interp.TensorHandle(round_to_tf32(b.data), tl.float32)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    _interp.InterpreterBuilder.create_dot = create_dot


_COMPARISONS = (np.less, np.greater, np.less_equal, np.greater_equal, np.equal, np.not_equal)


def _bf16_as_fp32(h):
    """A bf16 handle's raw bits widened exactly to an fp32 handle (the bits are fp32's top half)."""
    return _interp.TensorHandle((np.asarray(h.data).astype(np.uint32) << np.uint32(16)).view(np.float32), tl.float32)


def _patch_bf16_ops() -> None:
    builder = _interp.InterpreterBuilder
    binary, unary = builder.binary_op, builder.unary_op

    def binary_op(self, lhs, rhs, op):
        if lhs.dtype.scalar != tl.bfloat16 or rhs.dtype.scalar != tl.bfloat16:
            return binary(self, lhs, rhs, op)
        out = binary(self, _bf16_as_fp32(lhs), _bf16_as_fp32(rhs), op)
        if op in _COMPARISONS:
            return out
        return _interp.TensorHandle(round_to_bf16_bits(out.data), tl.bfloat16)

    def unary_op(self, arg, op):
        if arg.dtype.scalar != tl.bfloat16:
            return unary(self, arg, op)
        return _interp.TensorHandle(round_to_bf16_bits(unary(self, _bf16_as_fp32(arg), op).data), tl.bfloat16)

    builder.binary_op, builder.unary_op = binary_op, unary_op


def _patch_bf16_widening() -> None:
    original = _interp.InterpreterBuilder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.bfloat16 and dst_type.scalar == tl.float32:
            return _bf16_as_fp32(src)
        return original(self, src, dst_type)

    _interp.InterpreterBuilder.cast_impl = cast_impl


def bf16_widening_is_exact(device="cpu") -> bool:
    """Every bf16 bit pattern widened to fp32 in a kernel as torch widens it (NaN as NaN)."""
    x = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    y = torch.empty(x.numel(), dtype=torch.float32, device=device)
    _widen_probe[(x.numel() // 1024,)](x.to(device), y, BLOCK=1024)
    expected = x.float()
    nan = expected.isnan()
    return torch.equal(y.cpu()[~nan].view(torch.int32), expected[~nan].view(torch.int32)) and \
        bool(y.cpu()[nan].isnan().all())


@triton.jit
def _widen_probe(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.float32))


def _patch_bf16_cast() -> None:
    original = _interp.InterpreterBuilder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return _interp.TensorHandle(round_to_bf16_bits(src.data), tl.bfloat16)
        return original(self, src, dst_type)

    _interp.InterpreterBuilder.cast_impl = cast_impl


def integer_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Integers -> bf16 bit patterns, rounded once to nearest even (float64 holds int32 exactly, and
    its rounding to bf16's 8 bits is done on the exact value)."""
    mantissa, exponent = np.frexp(np.asarray(x, dtype=np.float64))
    exact = np.ldexp(np.rint(mantissa * 2.0**8), exponent - 8)  # 8 significant bits, ties to even
    return round_to_bf16_bits(exact.astype(np.float32))  # exact in fp32: no second rounding


def _patch_integer_bf16_casts() -> None:
    original = _interp.InterpreterBuilder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar.is_int() and dst_type.scalar == tl.bfloat16:
            return _interp.TensorHandle(integer_to_bf16_bits(src.data), tl.bfloat16)
        if src.dtype.scalar == tl.bfloat16 and dst_type.scalar.is_int():
            return original(self, _bf16_as_fp32(src), dst_type)  # fp32 -> int truncates toward zero
        return original(self, src, dst_type)

    _interp.InterpreterBuilder.cast_impl = cast_impl


@triton.jit
def _int_cast_probe(x_ptr, y_ptr, z_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    y = tl.load(x_ptr + offs).to(tl.bfloat16)
    tl.store(y_ptr + offs, y)
    tl.store(z_ptr + offs, y.to(tl.int32))


def integer_bf16_casts_are_faithful(device="cpu") -> bool:
    x = torch.tensor([1, -3, 127, -128, 255, 257, 259, 2**24 + 1, 2**30 + 2**22 + 1, 0, 100, -1000, 383, 385, 7, -9],
                     dtype=torch.int32, device=device)
    y = torch.empty(16, dtype=torch.bfloat16, device=device)
    z = torch.empty(16, dtype=torch.int32, device=device)
    _int_cast_probe[(1,)](x, y, z, N=16)
    expected = torch.from_numpy(integer_to_bf16_bits(x.cpu().numpy()).view(np.int16))
    truncated = y.cpu().float().to(torch.int32)
    return torch.equal(y.cpu().view(torch.int16), expected) and torch.equal(z.cpu(), truncated)


@triton.jit
def _dot_scaled_probe(a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr):
    m, k, kb = tl.arange(0, 16), tl.arange(0, 32), tl.arange(0, 16)
    a = tl.load(a_ptr + m[:, None] * 32 + k[None, :])
    b = tl.load(b_ptr + kb[:, None] * 16 + m[None, :])  # 32 x 16 e2m1 codes, two a byte along K
    a_s = tl.load(as_ptr + m[:, None] + tl.arange(0, 1)[None, :])
    b_s = tl.load(bs_ptr + m[:, None] + tl.arange(0, 1)[None, :])
    tl.store(c_ptr + m[:, None] * 16 + m[None, :], tl.dot_scaled(a, a_s, "e4m3", b, b_s, "e2m1"))


def dot_scaled_probe_operands():
    """e4m3 A and e2m1 B of small powers of two (every product and sum exact in fp32), E8M0 scales about
    1, and row 1 of A scaled by byte 0 (its codes 4: 2**-125, normal) and row 2 by 0xFF (NaN)."""
    rng = np.random.default_rng(5)
    a = torch.from_numpy(np.exp2(rng.integers(-2, 3, size=(16, 32))).astype(np.float32))
    a[1] = 4.0
    codes = rng.choice([0x1, 0x2, 0x4, 0x9, 0xA, 0xC], size=(32, 16))  # +-0.5, +-1, +-2
    b = torch.from_numpy((codes[0::2] | (codes[1::2] << 4)).astype(np.uint8))
    a_scale = torch.from_numpy(rng.integers(125, 130, size=(16, 1)).astype(np.uint8))
    a_scale[1], a_scale[2] = 0, 255
    b_scale = torch.from_numpy(rng.integers(125, 130, size=(16, 1)).astype(np.uint8))
    sa, sb = scaled.e8m0(a_scale.numpy()), scaled.e8m0(b_scale.numpy())
    expected = (a.double().numpy() * sa) @ (scaled.E2M1[codes] * sb.T)
    return a.to(torch.float8_e4m3fn), b, a_scale, b_scale, expected


def dot_scaled_is_faithful(device="cpu") -> bool:
    a, b, a_scale, b_scale, expected = dot_scaled_probe_operands()
    c = torch.empty(16, 16, device=device)
    try:
        _dot_scaled_probe[(1,)](a.to(device), b.to(device), a_scale.to(device), b_scale.to(device), c)
    except Exception:  # noqa: BLE001 (an interpreter that cannot run it at all)
        return False
    got = c.cpu().double().numpy()
    return bool(np.array_equal(np.isnan(got), np.isnan(expected))
                and np.array_equal(got[~np.isnan(got)], expected[~np.isnan(expected)]))


def _dot_scaled_operand(h, scale, fmt, k_pack: bool, rhs: bool) -> np.ndarray:
    """An operand of tl.dot_scaled as exact values (float64): e2m1 codes two a byte (along K, or along
    M or N where not k_pack), fp8 by the table of every pattern, bf16 and fp16 as they are; times its
    E8M0 scales (one per 32 along K; byte 0 2**-127, 0xFF NaN)."""
    ty = _interp._ir.ScaleDotElemTypeTY
    if fmt == ty.E2M1:
        data = np.asarray(h.data).view(np.uint8)
        axis = (-2 if k_pack else -1) if rhs else (-1 if k_pack else -2)
        value = scaled.E2M1[scaled.nibbles(data, axis, 2 * data.shape[axis])]
    elif h.dtype.scalar in (tl.float8e4nv, tl.float8e5):
        name = {tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2}[h.dtype.scalar]
        bits = torch.from_numpy(np.ascontiguousarray(np.asarray(h.data).view(np.uint8)))
        value = bits.view(name).double().numpy()
    else:
        value = np.asarray(h.data).astype(np.float64)
    if scale is None:
        return value
    s = scaled.e8m0(np.asarray(scale.data).view(np.uint8))
    s = np.repeat(s, value.shape[-2 if rhs else -1] // s.shape[-1], axis=-1)
    return value * (np.swapaxes(s, -1, -2) if rhs else s)


def _create_dot_scaled(self, lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, fast_math, lhs_k_pack,
                       rhs_k_pack, acc):
    """tl.dot_scaled where the interpreter has none (Triton 3.6): the operands decoded exactly and
    multiplied in fp32, as Triton 3.9's interpreter does."""
    with np.errstate(invalid="ignore", over="ignore"):
        x = _dot_scaled_operand(lhs, lhs_scale, lhs_format, lhs_k_pack, rhs=False).astype(np.float32)
        y = _dot_scaled_operand(rhs, rhs_scale, rhs_format, rhs_k_pack, rhs=True).astype(np.float32)
        return _interp.TensorHandle(np.matmul(x, y) + acc.data, tl.float32)


def _patch_dot_scaled() -> None:
    from triton.language import semantic

    original = semantic.TritonSemantic.dot_scaled

    def dot_scaled(self, lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, *args, **kwargs):
        wrap = lambda f: tl.constexpr(f) if isinstance(f, str) else f  # noqa: E731
        return original(self, lhs, lhs_scale, wrap(lhs_format), rhs, rhs_scale, wrap(rhs_format), *args, **kwargs)

    if not hasattr(_interp.InterpreterBuilder, "create_dot_scaled"):  # Triton 3.6
        semantic.TritonSemantic.dot_scaled = dot_scaled
        _interp.InterpreterBuilder.create_dot_scaled = _create_dot_scaled


def _poison(dtype: np.dtype):
    if np.issubdtype(dtype, np.floating):
        return np.nan
    if dtype == np.uint16:  # bf16 bits: a quiet NaN
        return 0x7FC0
    if dtype == np.uint8:  # fp8 bits: NaN in e4m3fn (0x7F); in e5m2 0x7F is NaN too
        return 0x7F
    if dtype == np.bool_:
        return True
    return np.iinfo(dtype).min


def _patch_undefined_lanes() -> None:
    from triton.language import semantic

    original = _interp.InterpreterBuilder.create_masked_load
    original_load = semantic.TritonSemantic.load

    def load(self, ptr, mask, other, *args, **kwargs):
        ret = original_load(self, ptr, mask, other, *args, **kwargs)
        # Triton passes `other.handle if other else None`: in the interpreter a scalar `other` of 0 is falsy
        # and dropped, so its masked-off lane would read the poison below; it reads `other`, as compiled
        if other is not None and mask is not None and not other:
            ret = self.where(mask, ret, self.cast(other, ret.dtype))
        return ret

    def create_masked_load(self, ptrs, mask, other, *args, **kwargs):
        if other is None:
            dtype_np = _interp._get_np_dtype(ptrs.get_element_ty())
            other = _interp.TensorHandle(np.full(np.shape(ptrs.data), _poison(dtype_np), dtype=dtype_np),
                                         ptrs.get_element_ty())
        return original(self, ptrs, mask, other, *args, **kwargs)

    semantic.TritonSemantic.load = load
    _interp.InterpreterBuilder.create_masked_load = create_masked_load


@triton.jit
def _undefined_probe(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < 1))


def masked_off_lanes_are_poisoned() -> bool:
    x = torch.ones(4)
    y = torch.zeros(4)
    _undefined_probe[(1,)](x, y, N=4)
    return bool(y[0] == 1 and torch.isnan(y[1:]).all())


# fp8 -> (fp16, bf16, fp32) by table: every fp8 bit pattern widened by torch, which is exact
_FP8 = {"fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2}
_WIDE = {"fp16": (torch.float16, np.uint16), "bf16": (torch.bfloat16, np.uint16), "fp32": (torch.float32, np.uint32)}


def _patch_fp8_widening() -> None:
    original = _interp._convert_float
    tables = {(src, dst): torch.arange(256, dtype=torch.uint8).view(_FP8[src]).to(_WIDE[dst][0]).view(
        {np.uint16: torch.int16, np.uint32: torch.int32}[_WIDE[dst][1]]).numpy().view(_WIDE[dst][1])
        for src in _FP8 for dst in _WIDE}

    def convert_float(input, input_dtype, output_dtype, rounding_mode):
        table = tables.get((input_dtype.name, output_dtype.name))
        if table is None:
            return original(input, input_dtype, output_dtype, rounding_mode)
        bits = np.frombuffer(np.ascontiguousarray(input).tobytes(), dtype=np.uint8)
        return table[bits].reshape(np.shape(input))

    _interp._convert_float = convert_float


# (fp16, bf16, fp32) -> fp8: the interpreter rounds halves away from zero, loses the carry into the exponent and
# does not saturate (REFERENCES); the GPU converts with cvt.rn.satfinite (nearest even, NaN kept, anything past
# the largest finite value clamped to it: in-kernel activation quantization relies on that)


def narrow_to_fp8(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Float values as the GPU converts them to an fp8 format: to nearest even, saturating; NaN stays NaN."""
    big = torch.finfo(dtype).max
    wide = x.float()
    return torch.where(wide.isnan(), wide, wide.clamp(-big, big)).to(dtype)


def _patch_fp8_narrowing() -> None:
    original = _interp._convert_float

    def convert_float(input, input_dtype, output_dtype, rounding_mode):
        fp8, wide = _FP8.get(output_dtype.name), _WIDE.get(input_dtype.name)
        if fp8 is None or wide is None or rounding_mode == _ROUNDING.RTZ:
            return original(input, input_dtype, output_dtype, rounding_mode)
        values = torch.from_numpy(np.ascontiguousarray(input).view({np.uint16: np.int16, np.uint32: np.int32}[
            wide[1]])).view(wide[0])
        return narrow_to_fp8(values, fp8).view(torch.uint8).numpy().reshape(np.shape(input))

    _interp._convert_float = convert_float


@triton.jit
def _narrow_probe(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(y_ptr.dtype.element_ty))


def fp8_narrowing_probe_values() -> torch.Tensor:
    """Ties of both formats, the carry into the exponent, values past the largest finite one, subnormals, signed
    zeros, Inf and NaN."""
    return torch.tensor([1.0625, 1.1875, -1.0625, 1.9375, 15.5, 0.96875, 464.0, 500.0, 1e6, -1e6, 57344.0, 61440.0,
                         2.0**-9, 2.0**-10, 3 * 2.0**-10, 2.0**-17, 1.125, 1.375, 0.0, -0.0, 240.0, 248.0, 7.0, 0.1,
                         float("inf"), float("-inf"), float("nan"), 3.0e-5, 2.0**-16, 1.5 * 2.0**-16, 448.0, -0.3])


def fp8_narrowing_is_faithful(device="cpu") -> bool:
    """fp32, fp16 and bf16 -> e4m3 and e5m2 as narrow_to_fp8 says, bit for bit (NaN: any NaN)."""
    x = fp8_narrowing_probe_values()
    for source in (torch.float32, torch.float16, torch.bfloat16):
        wide = x.to(source)
        for dtype in _FP8.values():
            y = torch.empty(x.numel(), dtype=dtype, device=device)
            with np.errstate(invalid="ignore", over="ignore"):
                _narrow_probe[(1,)](wide.to(device), y, N=x.numel())
            got, expected = y.cpu(), narrow_to_fp8(wide, dtype)
            nan = expected.float().isnan()
            if not torch.equal(got.float().isnan(), nan) or \
                    not torch.equal(got.view(torch.uint8)[~nan], expected.view(torch.uint8)[~nan]):
                return False
    return True


@triton.jit
def _fp8_dot_probe(a_ptr, b_ptr, c_ptr, M: tl.constexpr):
    rows = tl.arange(0, M)
    o = tl.arange(0, 16)
    k = tl.arange(0, 32)  # an fp8 tl.dot needs K >= 32 on the GPU
    a = tl.load(a_ptr + rows[:, None] * 32 + k[None, :])
    b = tl.load(b_ptr + k[:, None] * 16 + o[None, :])
    tl.store(c_ptr + rows[:, None] * 16 + o[None, :], tl.dot(a, b))


def fp8_widening_is_exact(device="cpu") -> bool:
    """Every fp8 bit pattern (NaN, Inf, subnormals included) times 1 in a tl.dot gives its exact value:
    row r of A (256 x 32) holds pattern r in column r % 16 and zeros elsewhere, B (32 x 16) is the
    identity over zeros, so C[r, r % 16] = pattern r (other columns may be NaN: 0 times a NaN)."""
    rows = torch.arange(256)
    identity = torch.cat([torch.eye(16), torch.zeros(16, 16)])
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        a = torch.zeros(256, 32, dtype=torch.uint8)
        a[rows, rows % 16] = torch.arange(256, dtype=torch.uint8)
        c = torch.empty(256, 16, device=device)
        with np.errstate(invalid="ignore"):
            _fp8_dot_probe[(1,)](a.view(dtype).to(device), identity.to(dtype).to(device), c, M=256)
        got, expected = c.cpu()[rows, rows % 16].double(), a[rows, rows % 16].view(dtype).double()
        if not torch.equal(torch.nan_to_num(got, nan=7.0), torch.nan_to_num(expected, nan=7.0)):
            return False
    return True


# fp32 -> fp16/bf16 with an explicit fp_downcast_rounding: the interpreter rounded half up ("rtne")
# and made NaN of every value past the format's range ("rtz" too), where the GPU's cvt.rn / cvt.rz
# round to nearest even and toward zero (the largest finite value for an overflow).
_ROUNDING = triton._C.libtriton.ir.ROUNDING_MODE
_NARROW = {"fp16": (torch.float16, torch.int16), "bf16": (torch.bfloat16, torch.int16)}


def round_fp32(x: np.ndarray, dtype: torch.dtype, toward_zero: bool) -> torch.Tensor:
    """fp32 values rounded to fp16 or bf16, to nearest even or toward zero."""
    source = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    rounded = source.to(dtype)  # to nearest even
    if toward_zero:
        past = rounded.double().abs() > source.double().abs()  # rounded away from zero (NaN: never)
        bits = rounded.view(torch.int16)
        rounded = torch.where(past, bits - 1, bits).view(dtype)  # one step toward zero: the magnitude bits
    return rounded


def _patch_explicit_rounding() -> None:
    original = _interp.InterpreterBuilder.create_fp_to_fp

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        narrow = _NARROW.get(dst_type.scalar.name)
        if src.dtype.scalar.name != "fp32" or narrow is None or rounding_mode is None:
            return original(self, src, dst_type, rounding_mode)
        rounded = round_fp32(src.data, narrow[0], rounding_mode == _ROUNDING.RTZ)
        return _interp.TensorHandle(rounded.view(narrow[1]).numpy().view(_interp._get_np_dtype(dst_type)),
                                    dst_type.scalar)

    _interp.InterpreterBuilder.create_fp_to_fp = create_fp_to_fp


@triton.jit
def _rounding_probe(x_ptr, rn_ptr, rz_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(rn_ptr + tl.arange(0, N), x.to(rn_ptr.dtype.element_ty, fp_downcast_rounding="rtne"))
    tl.store(rz_ptr + tl.arange(0, N), x.to(rz_ptr.dtype.element_ty, fp_downcast_rounding="rtz"))


def explicit_rounding_is_faithful(device="cpu") -> bool:
    """x.to(fp16 or bf16, fp_downcast_rounding=...) on ties, carries, overflow, -0, Inf, NaN and
    subnormals matches torch's round-to-nearest-even and its one-step-toward-zero correction."""
    x = torch.tensor([2049.0, 2051.0, 2047.5, -2049.0, 65519.0, 65520.0, 1e6, -1e6, 2.0**-25, -2.0**-24 * 1.5,
                      -0.0, float("inf"), -float("inf"), float("nan"), 1 + 2.0**-8 + 2.0**-9, 3.0e38, 1.0, 0.1],
                     dtype=torch.float32)
    x = torch.cat([x, torch.linspace(-3.0, 3.0, 32 - x.numel())])  # 32: tl.arange needs a power of 2
    for dtype in (torch.float16, torch.bfloat16):
        rn, rz = (torch.empty(x.numel(), dtype=dtype, device=device) for _ in range(2))
        _rounding_probe[(1,)](x.to(device), rn, rz, N=x.numel())
        for got, toward_zero in ((rn, False), (rz, True)):
            expected = round_fp32(x.numpy(), dtype, toward_zero)
            if not torch.equal(got.cpu().view(torch.int16)[~x.isnan()], expected.view(torch.int16)[~x.isnan()]) \
                    or not got.cpu()[x.isnan()].isnan().all():
                return False
    return True


def _patch_index() -> None:
    original = _interp._patch_lang_tensor

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    _interp._patch_lang_tensor = patch_lang_tensor


_HALF = {tl.float16: torch.float16, tl.bfloat16: torch.bfloat16}


def _as_float64(data: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """fp16 values or bf16 bit patterns (the interpreter's storage) as float64."""
    return torch.from_numpy(np.ascontiguousarray(data).view(np.int16)).view(dtype).double().numpy()


def _as_storage(x: np.ndarray, dtype: torch.dtype, like: np.dtype) -> np.ndarray:
    """float64 values rounded to nearest even in fp16 or bf16 (+-Inf past the range), as stored."""
    return torch.from_numpy(x).to(dtype).view(torch.int16).numpy().view(like)


def _half_atomic_add(ptrs: np.ndarray, values: np.ndarray, mask: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Every active lane adds its value at its address in lane order (lanes sharing an address one after
    another); returns what each lane found there (0 where masked off)."""
    storage, shape = values.dtype, np.shape(ptrs)
    active = np.flatnonzero(np.broadcast_to(np.asarray(mask), shape))
    ptrs, values = np.asarray(ptrs).reshape(-1), np.broadcast_to(values, shape).reshape(-1)
    old = np.zeros(ptrs.shape, dtype=storage)
    order = active[np.argsort(ptrs[active], kind="stable")]
    first = np.searchsorted(ptrs[order], ptrs[order])  # each lane's rank among the lanes of its address
    rank = np.arange(len(order)) - first
    for r in range(int(rank.max(initial=-1)) + 1):  # one round per repeated address, in lane order
        lanes = np.sort(order[rank == r])
        where, on = ptrs[lanes], np.ones(len(lanes), dtype=bool)
        found = _interp._interpreter.load(where, on, np.zeros(len(lanes), dtype=storage), storage)
        total = _as_float64(found, dtype) + _as_float64(values[lanes], dtype)
        _interp._interpreter.store(where, _as_storage(total, dtype, storage), on)
        old[lanes] = found
    return old


def _patch_half_atomic_add() -> None:
    original = _interp.InterpreterBuilder.create_atomic_rmw

    def create_atomic_rmw(self, rmw_op, ptr, val, mask, sem, scope):
        dtype = _HALF.get(val.dtype.scalar)
        if rmw_op != _interp._ir.ATOMIC_OP.FADD or dtype is None:
            return original(self, rmw_op, ptr, val, mask, sem, scope)
        old = _half_atomic_add(ptr.data, val.data, mask.data, dtype).reshape(np.shape(ptr.data))
        return _interp.TensorHandle(old, val.dtype.scalar)

    _interp.InterpreterBuilder.create_atomic_rmw = create_atomic_rmw


@triton.jit
def _atomic_add_probe(x_ptr, v_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.atomic_add(x_ptr + offs % 4, tl.load(v_ptr + offs))


def half_atomic_add_is_faithful(device="cpu") -> bool:
    """fp16: 65504 + 16 is +Inf (the sum rounds past the largest finite value), -65504 - 16 is -Inf, and
    1 + 2**-11 + 2**-11 is 1 (each addition rounds to even); bf16: the same with its own ulps."""
    cases = {torch.float16: ([65504.0, -65504.0, 1.0, 1.0, 16.0, -16.0, 2.0**-11, 2.0**-11, 0.0, 0.0, 2.0**-11, 0.0],
                             [np.inf, -np.inf, 1.0, 1.0]),
             torch.bfloat16: ([2.0**127 * 1.9921875, -1.0, 1.0, 1.0, 2.0**127 * 0.0078125, 0.0, 2.0**-8, 2.0**-8,
                               0.0, 0.0, 2.0**-8, 0.0], [np.inf, -1.0, 1.0, 1.0])}
    for dtype, (values, expected) in cases.items():
        x = torch.zeros(4, dtype=dtype, device=device)
        try:
            _atomic_add_probe[(1,)](x, torch.tensor(values + [0.0] * 4, dtype=dtype, device=device), N=16)
        except Exception:  # noqa: BLE001  the gap itself: the interpreter raises
            return False
        if x.double().cpu().tolist() != expected:
            return False
    return True


# ---------------------------------------------------------------------------------------------------
# Python's control flow in a kernel: the interpreter runs the kernel's body as Python, where the compiler
# gives some constructs Triton's meaning. Each such gap is one rewrite of the kernel's syntax tree (on top
# of the interpreter's own), enabled by its fix:
#   loop indices  `for i in range(...)` / `tl.range(...)` hand out Python ints where compiled code has a
#                 Triton scalar (`i.to(tl.int64)` raised AttributeError; `i * stride` never wrapped at 32
#                 bits as on the GPU)
#   boolean ops   `a and b`, `a or b`, `not a` on tensors took Python's truth of a block (always true), so
#                 a mask `(rows < M) and (cols < N)` became `cols < N`; the compiler combines tensors
#                 elementwise (code_generator.visit_BoolOp, visit_UnaryOp)

# the name each rewrite's function has in the rewritten kernel: a global of interpreter.py, which the
# interpreter's rewriter copies into the kernel's globals
_HELPERS = {"loop indices": "_gemm_fuzz_loop_range", "boolean ops": "_gemm_fuzz_boolean"}
_REWRITES: set[str] = set()  # the rewrites enabled


def _loop_indices(make, *args, **kwargs):
    """What `make(*args, **kwargs)` (the builtin range, or the interpreter's tl.range) iterates, each
    index a scalar of the type the compiler gives the induction variable: its bounds and step promoted
    together (code_generator.visit_For), int32 unless one of them needs 64 bits."""
    bounds = list(args[:3]) + [v for k, v in kwargs.items() if k == "step"]
    semantic = _interp.interpreter_semantic
    try:
        kind = None
        for bound in bounds:
            bound = bound.value if isinstance(bound, tl.constexpr) else bound
            dtype = semantic.to_tensor(bound).dtype
            if not dtype.is_int():
                return make(*args, **kwargs)  # the compiler refuses it; the interpreter says what it says
            kind = dtype if kind is None else semantic.integer_promote_impl(kind, dtype)
    except (TypeError, ValueError):
        return make(*args, **kwargs)
    storage = _interp._get_np_dtype(kind)
    return (tl.tensor(_interp.TensorHandle(np.array([i], dtype=storage), kind), kind)
            for i in make(*args, **kwargs))


def _boolean(method: str, *operands):
    """`a and b and ...` (method "logical_and") or `or` ("logical_or"), each operand a thunk, as the
    compiler evaluates it: Python values short-circuit, tensors are combined elementwise from the right;
    `not a` is ("__not__", a)."""
    if method == "__not__":
        value = operands[0]()
        return value.__not__() if isinstance(value, tl.tensor) else not value
    tensors, value = [], None
    for thunk in operands:
        value = thunk()
        if not isinstance(value, tl.tensor):
            if not value and method == "logical_and" or value and method == "logical_or":
                return value
        else:
            tensors.append(value)
    tensors = tensors or [value]
    while len(tensors) >= 2:
        rhs, lhs = tensors.pop(), tensors.pop()
        tensors.append(getattr(lhs, method)(rhs))
    return tensors[0]


def _kernel_rewriter():
    import ast

    def call(helper: str, args: list) -> ast.Call:
        return ast.Call(func=ast.Name(id=helper, ctx=ast.Load()), args=args, keywords=[])

    def thunk(node) -> ast.Lambda:
        none = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
        return ast.Lambda(args=none, body=node)

    class KernelRewriter(_interp.ASTTransformer):
        """The interpreter's rewriting, and each enabled one of ours (tl.static_range keeps its Python ints,
        as the compiler's constexprs)."""

        def visit_For(self, node):
            node = self.generic_visit(node)
            it = node.iter
            if "loop indices" in _REWRITES and isinstance(it, ast.Call) and (
                    (isinstance(it.func, ast.Name) and it.func.id == "range")
                    or (isinstance(it.func, ast.Attribute) and it.func.attr == "range")):
                node.iter = ast.copy_location(ast.Call(func=ast.Name(id=_HELPERS["loop indices"], ctx=ast.Load()),
                                                       args=[it.func, *it.args], keywords=it.keywords), it)
            return node

        def visit_BoolOp(self, node):
            node = self.generic_visit(node)
            if "boolean ops" not in _REWRITES:
                return node
            method = ast.Constant("logical_and" if isinstance(node.op, ast.And) else "logical_or")
            return ast.copy_location(call(_HELPERS["boolean ops"], [method, *map(thunk, node.values)]), node)

        def visit_UnaryOp(self, node):
            node = self.generic_visit(node)
            if "boolean ops" not in _REWRITES or not isinstance(node.op, ast.Not):
                return node
            return ast.copy_location(call(_HELPERS["boolean ops"], [ast.Constant("__not__"), thunk(node.operand)]),
                                     node)

    return KernelRewriter()


def _enable_rewrite(name: str, function) -> None:
    """Rewrite `name` from now on, calling `function`: the rewriter installed with the first one."""
    setattr(_interp, _HELPERS[name], function)
    if not _REWRITES:
        _interp.FunctionRewriter.ast_transformer = _kernel_rewriter()
    _REWRITES.add(name)
    _interp.InterpretedFunction.rewritten_fn.clear()  # kernels rewritten before (the probes) are again


@triton.jit
def _loop_index_probe(x_ptr, G, K, BK: tl.constexpr):
    total = tl.zeros((BK,), dtype=tl.int64)
    for g in tl.range(0, G):
        total += g.to(tl.int64)
    for k in range(0, K, BK):
        total += (k * 65536 * 65536).to(tl.int64)  # int32: wraps to 0, as compiled code does
    for s in tl.static_range(2):
        total += s  # static_range: constexprs, as the compiler unrolls it
    tl.store(x_ptr + tl.arange(0, BK), total)


def loop_indices_are_scalars(device="cpu") -> bool:
    """Loop indices are int32 scalars: `.to()` works and 32-bit products wrap (0 + 1 + 2, then 0, then 1)."""
    x = torch.zeros(16, dtype=torch.int64, device=device)
    try:
        _loop_index_probe[(1,)](x, 3, 40, BK=16)
    except Exception:  # noqa: BLE001  the gap itself: `.to` of a Python int raises
        return False
    return bool((x.cpu() == 4).all())


@triton.jit
def _boolean_probe(x_ptr, N: tl.constexpr, FLAG: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(x_ptr + offs, 1.0, mask=(offs >= 2) and (offs < 6))  # 2..5
    tl.store(x_ptr + offs, 2.0, mask=(offs == 0) or (offs == 7) or (offs == 9))  # 0 and 7
    tl.store(x_ptr + offs, 3.0, mask=FLAG and not (offs != 1))  # 1


def boolean_ops_are_elementwise(device="cpu") -> bool:
    """`and`, `or` and `not` on blocks combine lanes, as compiled code does (a 1 in lanes 2..5, 2 in 0 and 7,
    3 in 1)."""
    x = torch.zeros(8, device=device)
    with warnings.catch_warnings():  # the compiler says such operators are deprecated on blocks
        warnings.simplefilter("ignore", UserWarning)
        _boolean_probe[(1,)](x, N=8, FLAG=True)
    return x.cpu().tolist() == [2.0, 3.0, 1.0, 1.0, 1.0, 1.0, 0.0, 2.0]


# ---------------------------------------------------------------------------------------------------
# the table: each gap's probe, its fix and the header's word for it, applied in this order


@dataclass(frozen=True)
class Fix:
    name: str  # how the header and docs/interpreter.md name it
    faithful: Callable[..., bool]  # the probe, faithful(device="cpu"): does the interpreter do what the GPU does?
    patch: Callable[[], None]
    note: str  # what was wrong and what the fix does
    on_gpu: bool = True  # the probe also runs compiled: a GPU shows the emulation is what it does (-m gpu)


FIXES = (
    Fix("loop bounds", loop_bounds_work, _patch_index,
        "int() of 1-element arrays (Triton 3.6 with NumPy >= 2.4)", on_gpu=False),
    Fix("loop indices", loop_indices_are_scalars, lambda: _enable_rewrite("loop indices", _loop_indices),
        "range and tl.range indices are int32 or int64 scalars, as compiled (they were Python ints: no .to(), "
        "no 32-bit wrap)"),
    Fix("boolean ops", boolean_ops_are_elementwise, lambda: _enable_rewrite("boolean ops", _boolean),
        "`and`, `or` and `not` on tensors combine lanes, as compiled (they took a block as true: a mask "
        "`(rows < M) and (cols < N)` dropped its first half)"),
    Fix("bf16 cast", bf16_cast_rounds_to_nearest_even, _patch_bf16_cast,
        "fp32 -> bf16 rounded to nearest even, as cvt.rn.bf16.f32 does (it truncated)"),
    Fix("bf16 widening", bf16_widening_is_exact, _patch_bf16_widening,
        "bf16 -> fp32 exact (subnormals came out as other numbers or 0)"),
    Fix("tl.dot_scaled", dot_scaled_is_faithful, _patch_dot_scaled,
        "emulated, operands decoded exactly and multiplied in fp32 (Triton 3.6's interpreter has none)",
        on_gpu=False),  # Triton 3.6's Hopper lowering reads E8M0 byte 0 as 0 (fixed by triton-lang/triton#11624)
    Fix("int <-> bf16", integer_bf16_casts_are_faithful, _patch_integer_bf16_casts,
        "casts converted by value, rounded to nearest even (they copied bit patterns)"),
    Fix("bf16 ops", bf16_ops_are_faithful, _patch_bf16_ops,
        "comparisons, arithmetic, min and max computed in fp32 and rounded back (they operated on raw bit "
        "patterns: NaN == NaN, -1 > 1)", on_gpu=False),
    Fix("undefined lanes", masked_off_lanes_are_poisoned, _patch_undefined_lanes,
        "masked loads without `other` read NaN in masked-off lanes, not 0 (undefined on the GPU, "
        "triton-lang/triton#737)", on_gpu=False),  # undefined on a GPU: nothing to compare
    Fix("fp8 widening", fp8_widening_is_exact, _patch_fp8_widening,
        "exact by table (NaN became 480, Inf 131072, e5m2 subnormals were wrong)"),
    Fix("fp8 narrowing", fp8_narrowing_is_faithful, _patch_fp8_narrowing,
        "fp32, fp16 and bf16 -> fp8 round to nearest even and saturate, as cvt.rn.satfinite does (halves rounded "
        "away from zero, the carry into the exponent was lost, nothing saturated)"),
    Fix("fp_downcast_rounding", explicit_rounding_is_faithful, _patch_explicit_rounding,
        "rtne rounds ties to even, rtz gives the largest finite value on overflow (they rounded half up and "
        "made NaN)"),
    Fix("half atomics", half_atomic_add_is_faithful, _patch_half_atomic_add,
        "fp16 and bf16 atomic_add round each addition once to nearest even, +-Inf on overflow, as the GPU does "
        "(fp16 raised OverflowError, bf16 'Unsupported data type')"),
    Fix("bf16 tl.dot", bf16_dot_is_exact, _patch_bf16_dot,
        "operands converted exactly to fp32 (triton-lang/triton#11584)"),
    Fix("tf32 tl.dot", lambda device="cpu": tf32_dot_rounds(device) == TF32_ROUNDING, _patch_tf32_dot,
        f"fp32 operands rounded to tf32 ({TF32_ROUNDING}, as the H100 does)"),
)

_APPLIED: list[str] | None = None


def apply() -> list[str]:
    """Probe each gap, fix the ones present, verify the fixes. Idempotent; returns one line per fix
    applied ("name: note")."""
    global _APPLIED
    if _APPLIED is not None:
        return _APPLIED
    with warnings.catch_warnings():  # the probes overflow and make NaN on purpose
        for message in ("overflow encountered", "invalid value encountered"):
            warnings.filterwarnings("ignore", message=message, category=RuntimeWarning)
        applied = []
        for fix in FIXES:
            if fix.faithful():
                continue
            fix.patch()
            if not fix.faithful():
                raise RuntimeError(f"the interpreter's {fix.name} is still wrong after its fix ({fix.note})")
            applied.append(f"{fix.name}: {fix.note}")
        _APPLIED = applied
    return _APPLIED
