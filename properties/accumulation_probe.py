"""Measure how a GPU's tl.dot accumulates, to ground the precision classes in reference/bounds.py.

    python -m properties.accumulation_probe        (needs a CUDA GPU)

For each input dtype it computes dot products whose exact value needs many bits: one product of 1
followed by small products 2**-e (exactly representable in the input dtype). Where the sum keeps
fewer than e fraction bits, the small terms are lost. The largest e whose terms all survive is the
number of fraction bits the accumulation keeps inside one tl.dot; the loss relative to |A|.|B|
gives the accumulator's effective unit roundoff. It also reports how fp32 operands of a tf32 dot
are rounded.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _row_dot(a_ptr, b_ptr, c_ptr, K: tl.constexpr, MAX_IMPRECISE: tl.constexpr):
    offs_m = tl.arange(0, 16)
    offs_k = tl.arange(0, K)
    offs_n = tl.arange(0, 16)
    a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :])
    b = tl.load(b_ptr + offs_k[:, None] * 16 + offs_n[None, :])
    if MAX_IMPRECISE >= 0:
        c = tl.dot(a, b, max_num_imprecise_acc=MAX_IMPRECISE)
    else:
        c = tl.dot(a, b)
    tl.store(c_ptr + offs_m[:, None] * 16 + offs_n[None, :], c)


def kept_fraction_bits(dtype: torch.dtype, k: int = 64, max_imprecise: int = -1) -> int:
    """Largest e such that 1 + (k - 1) * 2**-e is computed exactly by one tl.dot of length k."""
    device = torch.device("cuda")
    best = 0
    for e in range(1, 40):
        # the small term is a * b with a = b = 2**-(e/2) when representable, else split unevenly
        ea, eb = e // 2, e - e // 2
        a = torch.zeros(16, k, dtype=torch.float64)
        b = torch.zeros(k, 16, dtype=torch.float64)
        a[:, 0], b[0, :] = 1.0, 1.0
        a[:, 1:], b[1:, :] = 2.0**-ea, 2.0**-eb
        qa, qb = a.to(dtype), b.to(dtype)
        if not (torch.equal(qa.double(), a) and torch.equal(qb.double(), b)):
            break  # the small term is no longer representable in the input dtype
        c = torch.empty(16, 16, dtype=torch.float32, device=device)
        _row_dot[(1,)](qa.to(device), qb.to(device), c, K=k, MAX_IMPRECISE=max_imprecise)
        exact = 1.0 + (k - 1) * 2.0**-e
        if float(c[0, 0]) == exact:
            best = e
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
    print("| input dtype | K | fraction bits kept in one tl.dot | fp32 rounding |")
    print("|---|---|---|---|")
    for dtype, k in ((torch.float16, 64), (torch.bfloat16, 64), (torch.float8_e4m3fn, 64), (torch.float8_e5m2, 64),
                     (torch.float8_e4m3fn, 128)):
        rounding = fp32_rounding(dtype, k) if dtype in (torch.float16, torch.bfloat16) else "-"
        print(f"| {str(dtype).removeprefix('torch.')} | {k} | {kept_fraction_bits(dtype, k)} | {rounding} |")


if __name__ == "__main__":
    main()
