"""Triton's matmul tutorial (03-matrix-multiplication.py) as its readers use it: an @triton.autotune'd
kernel over the tutorial's published list of CUDA configurations (on a GPU; a small list of the same
shape in the interpreter), grouped tile order, rows and columns wrapped `% M` / `% N`, K masked, an
optional fused leaky_relu, fp16 out, and a wrapper that asserts A contiguous. Loaded as --gemm-kernel
loads a user's file.

On an H100 four of the sixteen CUDA configurations need more shared memory than it has (the fp8 ones
with BLOCK_SIZE_K = 128 and four stages): the autotuner prunes them, and so must the suite."""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import Requirements, contract


def _config(m, n, k, stages, warps):
    return triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8},
                         num_stages=stages, num_warps=warps)


# the tutorial's CUDA list, in its order: eight for fp16, then eight it names good for fp8 inputs
CUDA_CONFIGS = [
    _config(128, 256, 64, 3, 8), _config(64, 256, 32, 4, 4), _config(128, 128, 32, 4, 4), _config(128, 64, 32, 4, 4),
    _config(64, 128, 32, 4, 4), _config(128, 32, 32, 4, 4), _config(64, 32, 32, 5, 2), _config(32, 64, 32, 5, 2),
    _config(128, 256, 128, 3, 8), _config(256, 128, 128, 3, 8), _config(256, 64, 128, 4, 4),
    _config(64, 256, 128, 4, 4), _config(128, 128, 128, 4, 4), _config(128, 64, 64, 4, 4), _config(64, 128, 64, 4, 4),
    _config(128, 32, 64, 4, 4),
]
INTERPRETER_CONFIGS = [_config(32, 32, 32, 1, 1), _config(16, 32, 16, 1, 1), _config(32, 16, 32, 1, 1)]


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@triton.autotune(configs=CUDA_CONFIGS if torch.cuda.is_available() else INTERPRETER_CONFIGS, key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr):
    # which tile: programs walk GROUP_SIZE_M rows of tiles column by column, for L2 reuse
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    # rows and columns past the edge wrap around (their results are never stored); K is masked
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":  # fused while the accumulator is still fp32
        accumulator = leaky_relu(accumulator)
    c = accumulator.to(tl.float16)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def launch(a, b, c, activation=""):
    assert a.shape[1] == b.shape[0], "Incompatible dimensions"
    assert a.is_contiguous(), "Matrix A must be contiguous"
    M, K = a.shape
    K, N = b.shape
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), ACTIVATION=activation)


@contract(dtypes={torch.float16: (torch.float16,)}, requires=Requirements(contiguous=("a",)))
def matmul(a, b, c):
    launch(a, b, c)
