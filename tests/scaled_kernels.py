"""User kernels of scaled GEMMs (kernels/operation.py's scaled operands: fp8 or int8 codes with fp32 scales) in
the styles people publish, each declaring its scales with `contract(operation=Operation(a_scale=, b_scale=))`.
Each computes partial dots of the codes and scales them afterwards. Each right kernel has a wrong twin with one bug
a real author could write, which only one kind of case shows:

  right                 wrong twin                              shown by
  block_fp8_matmul      block_fp8_matmul_scale_per_tile         K past one BLOCK_K (a group of 32 spans two K tiles
                                                                of 16: the second tile reads the next group's scale,
                                                                or past a_scale's and b_scale's last column)
  rowwise_fp8_matmul    rowwise_fp8_matmul_scale_mask_missing   N not a multiple of the tile's BLOCK_N (b_scale read
                                                                past its end; C itself may still be right)
  int8_scaled_matmul    int8_scaled_matmul_even_k_by_parity     K even but not a multiple of BLOCK_K = 32 (unmasked
                                                                K loads past each row of A and column of B)
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import Operation, contract

# --- DeepSeek-V3 / vLLM's _w8a8_block_fp8_matmul (vllm/model_executor/layers/quantization/utils/fp8_utils.py):
# --- grouped tile order, rows and columns wrapped `% M` / `% N`, K masked, A scaled per 1 x group_k group and
# --- B per group_k x group_n block, each K tile's dot scaled as it is added. vLLM's weight is (N, K) and its
# --- scales (N / group_n, K / group_k); here B is (K, N), its scales (K / group_k, N / group_n)

BLOCK_FP8 = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=16, BLOCK_SIZE_K=16, GROUP_SIZE_M=2)  # BLOCK_K divides group_k


@triton.jit
def _w8a8_block_fp8_matmul(A, B, C, As, Bs, M, N, K, group_n, group_k, stride_am, stride_ak, stride_bk, stride_bn,
                           stride_cm, stride_cn, stride_As_m, stride_As_k, stride_Bs_k, stride_Bs_n,
                           BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                           GROUP_SIZE_M: tl.constexpr, SCALE_PER_TILE: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = A + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = B + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    As_ptrs = As + offs_am * stride_As_m
    offs_bsn = offs_bn // group_n
    Bs_ptrs = Bs + offs_bsn * stride_Bs_n

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)

        if SCALE_PER_TILE:  # BUG: the K tile's index taken for its group's, right only where BLOCK_K == group_k
            offs_ks = k
        else:
            k_start = k * BLOCK_SIZE_K
            offs_ks = k_start // group_k
        a_s = tl.load(As_ptrs + offs_ks * stride_As_k)
        b_s = tl.load(Bs_ptrs + offs_ks * stride_Bs_k)

        accumulator += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    c = accumulator.to(C.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = C + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def _block_fp8(a, b, c, a_scale, b_scale, group_k=32, group_n=32, scale_per_tile=False):
    assert a.shape[-1] == b.shape[0]
    assert triton.cdiv(a.shape[-1], group_k) == a_scale.shape[-1] and a.shape[0] == a_scale.shape[0]
    M, K = a.shape
    N = b.shape[1]
    assert triton.cdiv(K, group_k) == b_scale.shape[0] and triton.cdiv(N, group_n) == b_scale.shape[1]
    cfg = BLOCK_FP8
    assert group_k % cfg["BLOCK_SIZE_K"] == 0 and group_n % cfg["BLOCK_SIZE_N"] == 0
    grid = (triton.cdiv(M, cfg["BLOCK_SIZE_M"]) * triton.cdiv(N, cfg["BLOCK_SIZE_N"]),)
    _w8a8_block_fp8_matmul[grid](a, b, c, a_scale, b_scale, M, N, K, group_n, group_k, a.stride(0), a.stride(1),
                                 b.stride(0), b.stride(1), c.stride(0), c.stride(1), a_scale.stride(0),
                                 a_scale.stride(1), b_scale.stride(0), b_scale.stride(1), **cfg,
                                 SCALE_PER_TILE=scale_per_tile, num_warps=1, num_stages=1)


BLOCK = dict(dtypes={torch.float8_e4m3fn: (torch.bfloat16, torch.float16, torch.float32)}, blocks=(16, 16, 16),
             operation=Operation(a_scale="group", b_scale="block", group_k=32, group_n=32))


@contract(**BLOCK)
def block_fp8_matmul(a, b, c, a_scale, b_scale):
    _block_fp8(a, b, c, a_scale, b_scale)


@contract(**BLOCK)
def block_fp8_matmul_scale_per_tile(a, b, c, a_scale, b_scale):
    _block_fp8(a, b, c, a_scale, b_scale, scale_per_tile=True)


# --- FBGEMM's row-wise fp8 GEMM (fbgemm_gpu/experimental/gemm/triton_gemm/fp8_gemm.py, _kernel_matmul_fp8_row):
# --- @triton.autotune keyed on M, N, K, the weight B taken as (N, K) (here b.T), all of K into one fp32
# --- accumulator, then one scale per row of A and one per column of C, their loads masked


def _fp8_row_config(m, n, k, group):  # FBGEMM's shape of configuration, blocks the interpreter runs fast
    return triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": group}, num_stages=1, num_warps=1)


@triton.autotune(configs=[_fp8_row_config(16, 16, 16, 8), _fp8_row_config(32, 16, 32, 1),
                          _fp8_row_config(16, 32, 16, 2)], key=["M", "N", "K"])
@triton.jit
def _kernel_matmul_fp8_row(A, B, C, M, N, K, A_scale, B_scale, stride_am, stride_ak, stride_bn, stride_bk,
                           stride_cm, stride_cn, stride_as, stride_bs, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, MASK_B_SCALE: tl.constexpr):
    # matrix multiplication
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    # re-order program ID for better L2 performance
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = min(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // (group_size)
    # do matrix multiplication
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ram = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
    rbn = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    # pointers
    A = A + (ram[:, None] * stride_am + rk[None, :] * stride_ak)
    B = B + (rk[:, None] * stride_bk + rbn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_remaining = K - k * BLOCK_K
        a = tl.load(A, mask=rk[None, :] < k_remaining, other=0.0)
        b = tl.load(B, mask=rk[:, None] < k_remaining, other=0.0)
        acc = tl.dot(a, b, acc, out_dtype=tl.float32)
        A += BLOCK_K * stride_ak
        B += BLOCK_K * stride_bk

    # invert scaling
    a_scale = tl.load(A_scale + rm * stride_as, mask=rm < M)
    if MASK_B_SCALE:
        b_scale = tl.load(B_scale + rn * stride_bs, mask=rn < N)
    else:  # BUG: the N tail's scales loaded too, past the end of B_scale (their columns are never stored)
        b_scale = tl.load(B_scale + rn * stride_bs)
    scale = a_scale[:, None] * b_scale[None, :]
    acc *= scale

    acc = acc.to(C.dtype.element_ty)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    C = C + (rm[:, None] * stride_cm + rn[None, :] * stride_cn)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    tl.store(C, acc, mask=mask)


def _matmul_fp8_row(a, b, c, a_scale, b_scale, mask_b_scale=True):
    w = b.T  # FBGEMM's weight, (N, K)
    assert a.dtype == torch.float8_e4m3fn and w.dtype == a.dtype, "fp8 e4m3 inputs expected"
    assert a.dim() == 2 and w.dim() == 2 and a.shape[1] == w.shape[1], "incompatible dimensions"
    M, K = a.shape
    N = w.shape[0]
    assert a_scale.shape == (M,) and b_scale.shape == (N,), "one scale per row of A and per column of C"
    assert a_scale.dtype == torch.float32 and b_scale.dtype == torch.float32, "fp32 scales expected"
    assert c.shape == (M, N) and c.dtype in (torch.bfloat16, torch.float16, torch.float32)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)  # noqa: E731
    _kernel_matmul_fp8_row[grid](a, w, c, M, N, K, a_scale, b_scale, a.stride(0), a.stride(1), w.stride(0),
                                 w.stride(1), c.stride(0), c.stride(1), a_scale.stride(0), b_scale.stride(0),
                                 MASK_B_SCALE=mask_b_scale)


ROWWISE = dict(dtypes={torch.float8_e4m3fn: (torch.bfloat16, torch.float16, torch.float32)}, blocks=(16, 16, 16),
               operation=Operation(a_scale="row", b_scale="col"))


@contract(**ROWWISE)
def rowwise_fp8_matmul(a, b, c, a_scale, b_scale):
    _matmul_fp8_row(a, b, c, a_scale, b_scale)


@contract(**ROWWISE)
def rowwise_fp8_matmul_scale_mask_missing(a, b, c, a_scale, b_scale):
    _matmul_fp8_row(a, b, c, a_scale, b_scale, mask_b_scale=False)


# --- torchao's int_scaled_matmul (torchao/kernel/intmm_triton.py, scaled_matmul_kernel_with_block_pointers),
# --- w8a8: int8 codes into an int32 accumulator, K counted down with EVEN_K choosing unmasked loads, then the
# --- suffix Inductor generates: acc in fp32 times a per-row (per-token) and a per-column (per-channel) scale

INT8 = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=32, GROUP_M=8)


@triton.jit
def scaled_matmul_kernel(a_ptr, b_ptr, c_ptr, s1_ptr, s2_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                         stride_cm, stride_cn, stride_s1m, stride_s2n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
                         ACC_TYPE: tl.constexpr = tl.int32):
    # based on triton.ops.matmul
    pid = tl.program_id(0)
    grid_m = (M + BLOCK_M - 1) // BLOCK_M
    grid_n = (N + BLOCK_N - 1) // BLOCK_N
    # re-order program ID for better L2 performance
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = min(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // (group_size)

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ram = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
    rbn = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    A = a_ptr + (ram[:, None] * stride_am + rk[None, :] * stride_ak)
    B = b_ptr + (rk[:, None] * stride_bk + rbn[None, :] * stride_bn)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC_TYPE)
    for k in range(K, 0, -BLOCK_K):
        if EVEN_K:
            a = tl.load(A)
            b = tl.load(B)
        else:
            a = tl.load(A, mask=rk[None, :] < k, other=0)
            b = tl.load(B, mask=rk[:, None] < k, other=0)
        acc += tl.dot(a, b, out_dtype=ACC_TYPE)
        A += BLOCK_K * stride_ak
        B += BLOCK_K * stride_bk

    # rematerialize rm and rn to save registers
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    idx_m = rm[:, None]
    idx_n = rn[None, :]
    mask = (idx_m < M) & (idx_n < N)

    # the suffix: a per-row and a per-column scale, broadcast
    tmp0 = tl.load(s1_ptr + tl.broadcast_to(idx_m * stride_s1m, mask.shape), mask, eviction_policy="evict_last")
    tmp1 = tl.load(s2_ptr + tl.broadcast_to(idx_n * stride_s2n, mask.shape), mask, eviction_policy="evict_last")
    tmp2 = acc.to(tl.float32) * tmp0 * tmp1
    tl.store(c_ptr + (idx_m * stride_cm + idx_n * stride_cn), tmp2.to(c_ptr.dtype.element_ty), mask)


def _int_scaled_matmul(a, b, c, a_scale, b_scale, even_k_by_parity=False):
    M, K = a.shape
    K2, N = b.shape
    assert K == K2 and M > 0 and N > 0 and K > 0
    assert a.dtype == torch.int8 and b.dtype == torch.int8
    assert a_scale.shape == (M,) and b_scale.shape == (N,)
    cfg = INT8
    if even_k_by_parity:  # BUG: K's parity taken for "K is a multiple of BLOCK_K"
        even_k = K % 2 == 0
    else:
        even_k = K % cfg["BLOCK_K"] == 0
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    scaled_matmul_kernel[grid](a, b, c, a_scale, b_scale, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                               c.stride(0), c.stride(1), a_scale.stride(0), b_scale.stride(0), **cfg, EVEN_K=even_k,
                               num_warps=1, num_stages=1)


W8A8 = dict(dtypes={torch.int8: (torch.float16, torch.bfloat16, torch.float32)}, blocks=(16, 16, 32),
            operation=Operation(a_scale="row", b_scale="col"))


@contract(**W8A8)
def int8_scaled_matmul(a, b, c, a_scale, b_scale):
    _int_scaled_matmul(a, b, c, a_scale, b_scale)


@contract(**W8A8)
def int8_scaled_matmul_even_k_by_parity(a, b, c, a_scale, b_scale):
    _int_scaled_matmul(a, b, c, a_scale, b_scale, even_k_by_parity=True)
