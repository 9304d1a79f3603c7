"""Measure how a GPU's tl.dot accumulates, to ground the precision classes in reference/bounds.py.

    python -m gemm_fuzz.properties.evaluation.accumulation_probe        (needs a CUDA GPU)

For each input dtype, length K and (for fp8) max_num_imprecise_acc it computes dot products whose
exact value needs many bits: one large product followed by K - 1 products 2**-d times smaller. Where
the accumulation keeps fewer than d bits relative to the running sum, the small terms are lost: the
largest d whose terms all survive is the precision the accumulator keeps. That regular pattern can
flatter an accumulator (Hopper's fp8 path keeps it exactly), so a second measurement draws random
dot products whose terms span many binades and reports the worst error relative to sum |a||b| as
bits: this is what reference/bounds.py's FP8_ACC_BITS rests on. It also reports whether fp32
accumulation truncates or rounds, how fp32 operands of a tf32 dot are rounded, and what an fp32
accumulation that overflows returns (Inf, or the largest finite value: the overflow allowances of
reference.bounds assume Inf with the sum's sign), on the ieee and the tf32 path.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

# 64 rows, as in GEMM kernels: on an H100 (Triton 3.6) a 64 x 64 fp8 tile keeps 13 bits, a 16 x 16
# one (which cannot use wgmma) all 23; main() prints both.
TILE = 64


@triton.jit
def _row_dot(a_ptr, b_ptr, c_ptr, K: tl.constexpr, MAX_IMPRECISE: tl.constexpr, TILE: tl.constexpr):
    """C = A @ B for 64 x K and K x 64 row-major operands, accumulated over K in 64-wide steps into
    one accumulator, as a GEMM's K loop does."""
    offs_m = tl.arange(0, TILE)
    offs_n = tl.arange(0, TILE)
    offs_k = tl.arange(0, 64)
    acc = tl.zeros((TILE, TILE), dtype=tl.float32)
    for k in range(0, K, 64):
        a = tl.load(a_ptr + offs_m[:, None] * K + (k + offs_k)[None, :])
        b = tl.load(b_ptr + (k + offs_k)[:, None] * TILE + offs_n[None, :])
        if MAX_IMPRECISE >= 0:
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=MAX_IMPRECISE)
        else:
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + offs_m[:, None] * TILE + offs_n[None, :], acc)


def kept_relative_bits(dtype: torch.dtype, k: int = 64, max_imprecise: int = -1) -> int:
    """Largest d such that one tl.dot of length k computes L + (k - 1) * L * 2**-d exactly: a leading
    product L = 64 (8 x 8) followed by k - 1 products 2**-d times smaller (each factor a power of two
    the input dtype holds). d reaches 23 at most: the fp32 result holds 24 bits."""
    device = torch.device("cuda")
    best = 0
    for d in range(1, 24):
        lead, small_a, small_b = 8.0, 2.0 ** (3 - (d + 1) // 2), 2.0 ** (3 - d // 2)
        a = torch.zeros(TILE, k, dtype=torch.float64)
        b = torch.zeros(k, TILE, dtype=torch.float64)
        a[:, 0], b[0, :] = lead, lead
        a[:, 1:], b[1:, :] = small_a, small_b
        qa, qb = a.to(dtype), b.to(dtype)
        if not (torch.equal(qa.double(), a) and torch.equal(qb.double(), b)):
            break  # the small factors are no longer representable in the input dtype
        c = torch.empty(TILE, TILE, dtype=torch.float32, device=device)
        _row_dot[(1,)](qa.to(device), qb.to(device), c, K=k, MAX_IMPRECISE=max_imprecise, TILE=TILE)
        if float(c[0, 0]) == 64.0 * (1 + (k - 1) * 2.0**-d):
            best = d
        else:
            break
    return best


def worst_error_bits(dtype: torch.dtype, k: int, tile: int = TILE, trials: int = 20, spread: int = 6,
                     seed: int = 0) -> float:
    """-log2 of the largest |C - exact| / sum |a||b| over random tile x k by k x tile products whose
    factors are +-2**e * (1 + m) with e uniform in [-spread, spread] (so terms span 4 * spread
    binades) and m a random fraction the dtype holds. Each term errs by about 2**-bits relative to
    sum |a||b| at worst; fp32 accumulation gives about 23 - log2(k)."""
    device = torch.device("cuda")
    g = torch.Generator().manual_seed(seed)
    worst = 0.0
    for _ in range(trials):
        operands = []
        for shape in ((tile, k), (k, tile)):
            e = torch.randint(-spread, spread + 1, shape, generator=g).double()
            m = torch.randint(0, 4, shape, generator=g).double() / 4  # 2 fraction bits: every fp8 holds them
            sign = torch.randint(0, 2, shape, generator=g).double() * 2 - 1
            operands.append((sign * 2.0**e * (1 + m)).to(dtype))
        qa, qb = operands
        exact = qa.double() @ qb.double()
        magnitude = qa.double().abs() @ qb.double().abs()
        c = torch.empty(tile, tile, dtype=torch.float32, device=device)
        _row_dot[(1,)](qa.to(device), qb.to(device), c, K=k, MAX_IMPRECISE=-1, TILE=tile)
        worst = max(worst, float(((c.cpu().double() - exact).abs() / magnitude).max()))
    return float("inf") if worst == 0 else -math.log2(worst)


def fp32_rounding(dtype: torch.dtype, k: int = 64) -> str:
    """Does accumulation round to nearest or truncate? Sum 1 + 2**-24 * (1 + 2**-1): a round-to-nearest
    adder gives 1 + 2**-23, a truncating one gives 1."""
    device = torch.device("cuda")
    a = torch.zeros(TILE, k, dtype=torch.float64)
    b = torch.zeros(k, TILE, dtype=torch.float64)
    a[:, 0], b[0, :] = 1.0, 1.0
    a[:, 1], b[1, :] = 2.0**-12, 2.0**-12 * 1.5
    c = torch.empty(TILE, TILE, dtype=torch.float32, device=device)
    _row_dot[(1,)](a.to(dtype).to(device), b.to(dtype).to(device), c, K=k, MAX_IMPRECISE=-1, TILE=TILE)
    got = float(c[0, 0])
    return {1.0: "truncates", 1.0 + 2.0**-23: "rounds to nearest"}.get(got, f"other ({got!r})")


@triton.jit
def _overflow_dot(a_ptr, b_ptr, c_ptr, PRECISION: tl.constexpr):
    offs = tl.arange(0, 16)
    a = tl.load(a_ptr + offs[:, None] * 16 + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * 16 + offs[None, :])
    tl.store(c_ptr + offs[:, None] * 16 + offs[None, :], tl.dot(a, b, input_precision=PRECISION))


def overflow(precision: str) -> dict[str, float]:
    """What fp32 tl.dot returns when its sum passes fp32's range: row 0 sums 2**127 + 2**127 (must be
    +Inf), row 1 sums -2**127 - 2**127 (-Inf), row 2 sums 2**127 + 2**127 - 2**127 - 2**127 (0 in exact
    arithmetic, +-Inf or NaN in floating point depending on the order)."""
    a = torch.zeros(16, 16)
    big = 2.0**127
    a[0, :2] = big
    a[1, :2] = -big
    a[2, :4] = torch.tensor([big, big, -big, -big])
    b = torch.zeros(16, 16)
    b[:, 0] = 1.0
    c = torch.empty(16, 16, device="cuda")
    _overflow_dot[(1,)](a.cuda(), b.cuda(), c, PRECISION=precision)
    return {"2**127 + 2**127": float(c[0, 0]), "-2**127 - 2**127": float(c[1, 0]),
            "2**127 + 2**127 - 2**127 - 2**127": float(c[2, 0])}


def main() -> None:
    from gemm_fuzz.properties.interpreter import fixes
    from gemm_fuzz.properties.launch import backends

    backend = backends.activate("cuda")
    print("\n".join(backend.header()))
    print(f"tf32 operand rounding: {fixes.tf32_dot_rounds(backend.device)}")
    for precision in ("ieee", "tf32"):
        print(f"fp32 accumulation that overflows ({precision}): {overflow(precision)}")
    print("| input dtype | K | max_num_imprecise_acc | relative bits kept (23 = all of fp32) | fp32 rounding |")
    print("|---|---|---|---|---|")
    for dtype in (torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        fp8 = dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
        for k in (64, 1024, 4096):
            for imprecise in ((-1, 0, 64) if fp8 else (-1,)):  # at most the K of one tl.dot
                rounding = fp32_rounding(dtype) if not fp8 and k == 64 else "-"
                label = "default" if imprecise < 0 else str(imprecise)
                print(f"| {str(dtype).removeprefix('torch.')} | {k} | {label} | "
                      f"{kept_relative_bits(dtype, k, imprecise)} | {rounding} |", flush=True)
    print("\nRandom terms over 24 binades: worst |C - exact| / sum |a||b|, as bits (fp32 accumulation: "
          "about 23 - log2(K))")
    print("| input dtype | K | bits, 64 x 64 tile | bits, 16 x 16 tile |")
    print("|---|---|---|---|")
    for dtype in (torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        for k in (64, 1024):
            print(f"| {str(dtype).removeprefix('torch.')} | {k} | {worst_error_bits(dtype, k):.1f} | "
                  f"{worst_error_bits(dtype, k, tile=16):.1f} |", flush=True)


if __name__ == "__main__":
    main()
