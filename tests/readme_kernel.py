"""README's example kernel, as README shows it under "# my_matmul.py" (tests/test_templates.py keeps the
two the same): K masked, M and N not, so its loads read past A's and B's edges on a ragged tile."""

import triton
import triton.language as tl

from gemm_fuzz.kernels import contract

@triton.jit
def _kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.program_id(0) * BM + tl.arange(0, BM), tl.program_id(1) * BN + tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):  # K is masked; M and N are not (seed 004's pattern)
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak, mask=(k + rk)[None, :] < K, other=0.0)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn, mask=(k + rk)[:, None] < K, other=0.0)
        acc += tl.dot(x, y, input_precision="ieee")
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))

@contract(blocks=(32, 32, 16))  # aims the shapes at its block boundaries
def matmul(a, b, c):
    grid = (triton.cdiv(a.shape[0], 32), triton.cdiv(b.shape[1], 32))
    _kernel[grid](a, b, c, a.shape[0], b.shape[1], a.shape[1], *a.stride(), *b.stride(), *c.stride(), BM=32, BN=32, BK=16)
