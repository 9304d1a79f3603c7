"""User kernels in the styles people publish, each declaring its contract (`kernels.contract`), loaded
as --gemm-kernel loads a user's file by tests/test_user_contract.py. Each right kernel has a wrong
twin whose bug only one kind of case shows:

  right                wrong twin                   shown by
  tutorial_matmul      tutorial_one_group_size      a grid of more than one tile along N
  int8_matmul          int8_clamped                 an int32 result past int8's range (the contract's output)
  autotuned_matmul     autotuned_fixed_k_step       a configuration other than the default (BK = 64)
  split_k_matmul       split_k_two_way_strips       a configuration other than the default (SPLIT_K = 4)

`tutorial_undeclared` is tutorial_matmul without its precondition declared.
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import Requirements, contract

# --- Triton's matmul tutorial (03-matrix-multiplication.py): grouped tile order, a wrapper asserting
# --- a contiguous A; C in any float dtype instead of the tutorial's fixed fp16


@triton.jit
def tutorial_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                    GROUP_SIZE_M: tl.constexpr, ONE_GROUP_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    if ONE_GROUP_SIZE:
        group_size_m = GROUP_SIZE_M  # BUG: the last group is shorter when num_pid_m is not a multiple
    else:
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
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
    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def _tutorial(a, b, c, one_group_size=False):
    assert a.shape[1] == b.shape[0], "Incompatible dimensions"
    assert a.is_contiguous(), "Matrix A must be contiguous"
    M, K = a.shape
    K, N = b.shape
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
    tutorial_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                          c.stride(1), BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=8,
                          ONE_GROUP_SIZE=one_group_size)


TUTORIAL = dict(dtypes={torch.float16: (torch.float16, torch.float32), torch.float8_e4m3fn: (torch.float32,
                                                                                            torch.bfloat16)},
                blocks=(32, 32, 32), requires=Requirements(contiguous=("a",)))


@contract(**TUTORIAL)
def tutorial_matmul(a, b, c):
    _tutorial(a, b, c)


@contract(**TUTORIAL)
def tutorial_one_group_size(a, b, c):
    _tutorial(a, b, c, one_group_size=True)


@contract(dtypes={torch.float16: (torch.float16,)}, blocks=(32, 32, 32))
def tutorial_undeclared(a, b, c):
    _tutorial(a, b, c)


# --- int8 in, int32 out (the shape of a quantized GEMM before requantization) -----------------------------


@triton.jit
def int8_kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr, CLAMP: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak, mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn, mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0)
        acc += tl.dot(x, y, out_dtype=tl.int32)
    if CLAMP:
        acc = tl.minimum(tl.maximum(acc, -128), 127)  # BUG: saturates to int8 as if C were requantized
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _int8(a, b, c, clamp=False):
    M, K = a.shape
    N = b.shape[1]
    int8_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                                           BM=32, BN=32, BK=32, CLAMP=clamp)


INT8 = dict(dtypes={torch.int8: (torch.int32,)}, blocks=(32, 32, 32))


@contract(**INT8)
def int8_matmul(a, b, c):
    _int8(a, b, c)


@contract(**INT8)
def int8_clamped(a, b, c):
    _int8(a, b, c, clamp=True)


# --- split-K into C itself: SPLIT_K programs per tile add their partial sums into C with tl.atomic_add ---


@triton.jit
def split_k_kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr, STRIP_STEP: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.program_id(2) * BK, K, BK * STRIP_STEP):  # split p takes strips p, p + SPLIT_K, ...
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak, mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn, mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc = tl.dot(x, y, acc)
    tl.atomic_add(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty),
                  mask=(rm[:, None] < M) & (rn[None, :] < N), sem="relaxed")


def _split_k(a, b, c, config, strip_step=None):
    M, K = a.shape
    N = b.shape[1]
    c.zero_()
    grid = (triton.cdiv(M, config["BM"]), triton.cdiv(N, config["BN"]), config["SPLIT_K"])
    split_k_kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), BM=config["BM"], BN=config["BN"],
                         BK=config["BK"], STRIP_STEP=strip_step or config["SPLIT_K"])


SPLIT_K = dict(dtypes={torch.float16: (torch.float32, torch.float16)}, partial_sums_in_output="SPLIT_K",
               configs=[dict(BM=32, BN=32, BK=32, SPLIT_K=2), dict(BM=32, BN=32, BK=32, SPLIT_K=4)])


@contract(**SPLIT_K)
def split_k_matmul(a, b, c, config):
    _split_k(a, b, c, config)


@contract(**SPLIT_K)
def split_k_two_way_strips(a, b, c, config):
    _split_k(a, b, c, config, strip_step=2)  # BUG: strips step as if SPLIT_K were 2


# --- @triton.autotune over real tile sizes: the suite draws each configuration and pins it (no timing) ---


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64}, num_warps=4, num_stages=4),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def autotuned_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                     FIXED_K_STEP: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                     BLOCK_SIZE_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = tl.program_id(1) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    k_step: tl.constexpr = 32 if FIXED_K_STEP else BLOCK_SIZE_K  # BUG when fixed: right only for BLOCK_SIZE_K = 32
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, K, k_step):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _autotuned(a, b, c, fixed_k_step=False):
    M, K = a.shape
    N = b.shape[1]
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]), triton.cdiv(N, META["BLOCK_SIZE_N"]))  # noqa: E731
    autotuned_kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), FIXED_K_STEP=fixed_k_step)


AUTOTUNED = dict(dtypes={torch.float16: (torch.float16,), torch.bfloat16: (torch.bfloat16,)})


@contract(**AUTOTUNED)
def autotuned_matmul(a, b, c):
    _autotuned(a, b, c)


@contract(**AUTOTUNED)
def autotuned_fixed_k_step(a, b, c):
    _autotuned(a, b, c, fixed_k_step=True)
