"""A user's kernel with the tile sizes people write for a GPU (64 x 64 x 32), for the CPU speed
benchmark (properties/evaluation/cpu_speed.py): loaded as `--gemm-kernel` loads a user's file,
it runs fewer, larger programs than the built-in variants' small interpreter tiles."""

import triton
import triton.language as tl

from gemm_fuzz.kernels import contract


@triton.jit
def _kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, y, input_precision="ieee")
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@contract(blocks=(64, 64, 32))
def matmul(a, b, c):
    grid = (triton.cdiv(a.shape[0], 64), triton.cdiv(b.shape[1], 64))
    _kernel[grid](a, b, c, a.shape[0], b.shape[1], a.shape[1], *a.stride(), *b.stride(), *c.stride(),
                  BM=64, BN=64, BK=32)

