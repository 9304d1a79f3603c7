"""The tests' template of a user's kernel file: a tiled kernel masked on all three axes, right, with its
contract and a LeetGPU-style `solve` beside `matmul`. Tests write it out as a user's file and plant
their bug in it as the mutants are planted (gemm_fuzz.kernels.mutants.edited), through
tests/templates.py."""

import triton
import triton.language as tl

from gemm_fuzz.kernels import contract


@triton.jit
def _kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr,
            BK: tl.constexpr):
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        kk = k + tl.arange(0, BK)
        x = tl.load(a + m[:, None] * sam + kk[None, :] * sak, mask=(m[:, None] < M) & (kk[None, :] < K), other=0.0)
        y = tl.load(b + kk[:, None] * sbk + n[None, :] * sbn, mask=(kk[:, None] < K) & (n[None, :] < N), other=0.0)
        acc = tl.dot(x, y, acc, input_precision="ieee")
    tl.store(c + m[:, None] * scm + n[None, :] * scn, acc.to(c.dtype.element_ty),
             mask=(m[:, None] < M) & (n[None, :] < N))


@contract(blocks=(16, 16, 16))
def matmul(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    _kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](a, b, c, M, N, K, *a.stride(), *b.stride(),
                                                      *c.stride(), BM=16, BN=16, BK=16)


def solve(a, b, c, M, N, K):  # LeetGPU: A is M x N, B is N x K, C is M x K, all contiguous
    _kernel[(triton.cdiv(M, 16), triton.cdiv(K, 16))](a, b, c, M, K, N, N, 1, K, 1, K, 1, BM=16, BN=16, BK=16)
