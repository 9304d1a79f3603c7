"""Measure how a GPU's tl.dot accumulates, to ground the precision classes in reference/bounds.py.

    python -m properties.accumulation_probe        (needs a CUDA GPU)

For each input dtype, length K and (for fp8) max_num_imprecise_acc it computes dot products whose
exact value needs many bits: one large product followed by K - 1 products 2**-d times smaller. Where
the accumulation keeps fewer than d bits relative to the running sum, the small terms are lost: the
largest d whose terms all survive is the precision the accumulator keeps. It also reports whether
fp32 accumulation truncates or rounds, and how fp32 operands of a tf32 dot are rounded.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _row_dot(a_ptr, b_ptr, c_ptr, K: tl.constexpr, MAX_IMPRECISE: tl.constexpr):
    """C = A @ B for 16 x K and K x 16 row-major operands, accumulated over K in 64-wide steps into
    one accumulator, as a GEMM's K loop does."""
    offs_m = tl.arange(0, 16)
    offs_n = tl.arange(0, 16)
    offs_k = tl.arange(0, 64)
    acc = tl.zeros((16, 16), dtype=tl.float32)
    for k in range(0, K, 64):
        a = tl.load(a_ptr + offs_m[:, None] * K + (k + offs_k)[None, :])
        b = tl.load(b_ptr + (k + offs_k)[:, None] * 16 + offs_n[None, :])
        if MAX_IMPRECISE >= 0:
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=MAX_IMPRECISE)
        else:
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + offs_m[:, None] * 16 + offs_n[None, :], acc)


def kept_relative_bits(dtype: torch.dtype, k: int = 64, max_imprecise: int = -1) -> int:
    """Largest d such that one tl.dot of length k computes L + (k - 1) * L * 2**-d exactly: a leading
    product L = 64 (8 x 8) followed by k - 1 products 2**-d times smaller (each factor a power of two
    the input dtype holds). d reaches 23 at most: the fp32 result holds 24 bits."""
    device = torch.device("cuda")
    best = 0
    for d in range(1, 24):
        lead, small_a, small_b = 8.0, 2.0 ** (3 - (d + 1) // 2), 2.0 ** (3 - d // 2)
        a = torch.zeros(16, k, dtype=torch.float64)
        b = torch.zeros(k, 16, dtype=torch.float64)
        a[:, 0], b[0, :] = lead, lead
        a[:, 1:], b[1:, :] = small_a, small_b
        qa, qb = a.to(dtype), b.to(dtype)
        if not (torch.equal(qa.double(), a) and torch.equal(qb.double(), b)):
            break  # the small factors are no longer representable in the input dtype
        c = torch.empty(16, 16, dtype=torch.float32, device=device)
        _row_dot[(1,)](qa.to(device), qb.to(device), c, K=k, MAX_IMPRECISE=max_imprecise)
        if float(c[0, 0]) == 64.0 * (1 + (k - 1) * 2.0**-d):
            best = d
        else:
            break
    return best


def fp32_rounding(dtype: torch.dtype, k: int = 64) -> str:
    """Does accumulation round to nearest or truncate? Sum 1 + 2**-24 * (1 + 2**-1): a round-to-nearest
    adder gives 1 + 2**-23, a truncating one gives 1."""
    device = torch.device("cuda")
    a = torch.zeros(16, k, dtype=torch.float64)
    b = torch.zeros(k, 16, dtype=torch.float64)
    a[:, 0], b[0, :] = 1.0, 1.0
    a[:, 1], b[1, :] = 2.0**-12, 2.0**-12 * 1.5
    c = torch.empty(16, 16, dtype=torch.float32, device=device)
    _row_dot[(1,)](a.to(dtype).to(device), b.to(dtype).to(device), c, K=k, MAX_IMPRECISE=-1)
    got = float(c[0, 0])
    return {1.0: "truncates", 1.0 + 2.0**-23: "rounds to nearest"}.get(got, f"other ({got!r})")


def main() -> None:
    from properties import backends, interpreter_fixes

    backend = backends.activate("cuda")
    print("\n".join(backend.header()))
    print(f"tf32 operand rounding: {interpreter_fixes.tf32_dot_rounds(backend.device)}")
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


if __name__ == "__main__":
    main()
