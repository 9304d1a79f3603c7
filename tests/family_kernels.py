"""User kernels of the operation family (kernels/operation.py) in the styles people publish, each declaring
what it computes with `contract(operation=Operation(...))`, loaded as --gemm-kernel loads a user's file by
tests/test_family_kernels.py. Each right kernel has a wrong twin with one bug a real author could write,
which only one kind of case shows:

  right                   wrong twin                         shown by
  tutorial_leaky_relu     tutorial_leaky_relu_in_k_loop      K past one BLOCK_SIZE_K with a negative partial sum
  tutorial_leaky_relu     tutorial_leaky_relu_after_cast     a negative result whose 0.01 * x rounds otherwise in fp16
  inductor_addmm          inductor_addmm_contiguous_bias     a bias of stride 0 (torch.addmm's broadcast input)
  fused_swiglu            fused_swiglu_unscaled_up_column    a B whose columns are not adjacent (inner stride 2)
  bmm_3d_grid             bmm_batch_on_grid_axis_2           a batch of 65536 problems (CUDA's grid axis 2 limit)
  bmm_3d_grid             bmm_batch_stride_from_shape        a second problem of an operand not packed (B strided)
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import Operation, Requirements, contract

# --- Triton's matmul tutorial (03-matrix-multiplication.py) with its fused leaky_relu: @triton.autotune,
# --- grouped tile order, rows and columns wrapped `% M` / `% N`, K masked, fp16 out, A asserted contiguous


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


def _tutorial_config(m, n, k, group):  # the tutorial's shape of configuration, blocks the interpreter runs fast
    return triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": group},
                         num_stages=1, num_warps=1)


@triton.autotune(configs=[_tutorial_config(16, 32, 16, 8), _tutorial_config(32, 16, 32, 2),
                          _tutorial_config(16, 16, 16, 1)], key=["M", "N", "K"])
@triton.jit
def tutorial_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                    GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr, FUSED_AT: tl.constexpr):
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
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
        if FUSED_AT == "k_loop":  # BUG: the activation's block indented into the K loop: each partial sum gets it
            if ACTIVATION == "leaky_relu":
                accumulator = leaky_relu(accumulator)
    # You can fuse arbitrary activation functions here while the accumulator is still in FP32!
    if FUSED_AT == "fp32":
        if ACTIVATION == "leaky_relu":
            accumulator = leaky_relu(accumulator)
    c = accumulator.to(tl.float16)
    if FUSED_AT == "fp16":  # BUG: fused after the cast: 0.01 * x computed (and 0.01 itself rounded) in fp16
        if ACTIVATION == "leaky_relu":
            c = leaky_relu(c)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def _tutorial(a, b, c, activation="leaky_relu", fused_at="fp32"):
    assert a.shape[1] == b.shape[0], "Incompatible dimensions"
    assert a.is_contiguous(), "Matrix A must be contiguous"
    M, K = a.shape
    K, N = b.shape
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
    tutorial_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                          c.stride(1), ACTIVATION=activation, FUSED_AT=fused_at)


TUTORIAL = dict(dtypes={torch.float16: (torch.float16,)}, requires=Requirements(contiguous=("a",)),
                operation=Operation(activation="leaky_relu", slope=0.01))


@contract(**TUTORIAL)
def tutorial_leaky_relu(a, b, c):
    _tutorial(a, b, c)


@contract(**TUTORIAL)
def tutorial_leaky_relu_in_k_loop(a, b, c):
    _tutorial(a, b, c, fused_at="k_loop")


@contract(**TUTORIAL)
def tutorial_leaky_relu_after_cast(a, b, c):
    _tutorial(a, b, c, fused_at="fp16")


# --- Inductor's addmm template (torch/_inductor/kernel/mm.py): grouped tile order, rows and columns wrapped,
# --- EVEN_K, the epilogue its store_output suffix generates for torch.addmm(input, mat1, mat2, beta=, alpha=):
# --- acc * alpha + input * beta, `input` one value per column, broadcast (Inductor passes its stride, 0 for
# --- an input expanded from one value)


@triton.jit
def addmm_kernel(in_ptr0, arg_A, arg_B, out_ptr0, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                 stride_cm, stride_cn, stride_in, alpha, beta, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
                 CONTIGUOUS_INPUT: tl.constexpr):
    A = arg_A
    B = arg_B
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
    ram = rm % M
    rbn = rn % N
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_idx in range(0, tl.cdiv(K, BLOCK_K)):
        a_k = rk[None, :] + k_idx * BLOCK_K
        b_k = rk[:, None] + k_idx * BLOCK_K
        if EVEN_K:
            a = tl.load(A + ram[:, None] * stride_am + a_k * stride_ak)
            b = tl.load(B + b_k * stride_bk + rbn[None, :] * stride_bn)
        else:
            a = tl.load(A + ram[:, None] * stride_am + a_k * stride_ak, mask=a_k < K, other=0.0)
            b = tl.load(B + b_k * stride_bk + rbn[None, :] * stride_bn, mask=b_k < K, other=0.0)
        acc += tl.dot(a, b, input_precision="ieee", out_dtype=tl.float32)
    # rematerialize rm and rn to save registers
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    idx_m = rm[:, None]
    idx_n = rn[None, :]
    mask = (idx_m < M) & (idx_n < N)
    # the suffix: input broadcast along the rows
    if CONTIGUOUS_INPUT:  # BUG: input indexed as if contiguous, its stride (0 for a broadcast input) dropped
        tmp0 = tl.load(in_ptr0 + tl.broadcast_to(idx_n, acc.shape), mask, eviction_policy="evict_last")
    else:
        tmp0 = tl.load(in_ptr0 + tl.broadcast_to(idx_n * stride_in, acc.shape), mask, eviction_policy="evict_last")
    tmp1 = acc * alpha + tmp0.to(tl.float32) * beta
    tl.store(out_ptr0 + idx_m * stride_cm + idx_n * stride_cn, tmp1.to(out_ptr0.dtype.element_ty), mask)


def _addmm(a, b, c, input, alpha, beta, config, contiguous_input=False):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, config["BM"]) * triton.cdiv(N, config["BN"]),)
    addmm_kernel[grid](input, a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                       c.stride(1), input.stride(0), alpha, beta, BLOCK_M=config["BM"], BLOCK_N=config["BN"],
                       BLOCK_K=config["BK"], GROUP_M=config["GROUP_M"], EVEN_K=K % config["BK"] == 0,
                       CONTIGUOUS_INPUT=contiguous_input, num_warps=1, num_stages=1)


ADDMM = dict(dtypes={torch.float16: (torch.float16,), torch.bfloat16: (torch.bfloat16,),
                     torch.float32: (torch.float32,)},
             operation=Operation(alpha=True, beta=True, beta_scales="bias", bias="n", names={"bias": "input"}),
             configs=[dict(BM=16, BN=32, BK=16, GROUP_M=8), dict(BM=32, BN=16, BK=32, GROUP_M=2)])


@contract(**ADDMM)
def inductor_addmm(a, b, c, *, input, alpha, beta, config):
    _addmm(a, b, c, input, alpha, beta, config)


@contract(**ADDMM)
def inductor_addmm_contiguous_bias(a, b, c, *, input, alpha, beta, config):
    _addmm(a, b, c, input, alpha, beta, config, contiguous_input=True)


# --- a fused SwiGLU projection over one weight W holding gate and up interleaved column by column (gate at even
# --- columns, as gpt-oss's fused MLP reads x[..., ::2] and x[..., 1::2]); one program computes both halves of a
# --- tile, C = silu(gate) * up in fp32 (Liger-Kernel's silu(a) * b), and keeps A @ W for the backward pass


@triton.jit
def swiglu_kernel(a_ptr, w_ptr, c_ptr, pre_ptr, M, N, K, stride_am, stride_ak, stride_wk, stride_wn,
                  stride_cm, stride_cn, stride_pm, stride_pn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  UNSCALED_UP: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    gate_cols = (2 * offs_n)[None, :] * stride_wn
    if UNSCALED_UP:
        up_cols = gate_cols + 1  # BUG: the next column is one element away only where W's columns are adjacent
    else:
        up_cols = gate_cols + stride_wn
    gate = tl.zeros((BM, BN), dtype=tl.float32)
    up = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0)
        w_rows = w_ptr + (k + offs_k)[:, None] * stride_wk
        w_mask = ((k + offs_k)[:, None] < K) & (offs_n[None, :] < N)
        gate = tl.dot(a, tl.load(w_rows + gate_cols, mask=w_mask, other=0.0), gate, input_precision="ieee")
        up = tl.dot(a, tl.load(w_rows + up_cols, mask=w_mask, other=0.0), up, input_precision="ieee")
    inside = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    pre_rows = pre_ptr + offs_m[:, None] * stride_pm
    tl.store(pre_rows + (2 * offs_n)[None, :] * stride_pn, gate.to(pre_ptr.dtype.element_ty), mask=inside)
    tl.store(pre_rows + (2 * offs_n + 1)[None, :] * stride_pn, up.to(pre_ptr.dtype.element_ty), mask=inside)
    out = gate * tl.sigmoid(gate) * up
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, out.to(c_ptr.dtype.element_ty),
             mask=inside)


def _swiglu(a, w, c, pre, config, unscaled_up=False):
    M, K = a.shape
    N = c.shape[1]
    grid = (triton.cdiv(M, config["BM"]), triton.cdiv(N, config["BN"]))
    swiglu_kernel[grid](a, w, c, pre, M, N, K, a.stride(0), a.stride(1), w.stride(0), w.stride(1), c.stride(0),
                        c.stride(1), pre.stride(0), pre.stride(1), BM=config["BM"], BN=config["BN"], BK=config["BK"],
                        UNSCALED_UP=unscaled_up, num_warps=1, num_stages=1)


SWIGLU = dict(dtypes={torch.float16: (torch.float16, torch.float32), torch.bfloat16: (torch.bfloat16,)},
              operation=Operation(activation="silu", gated="interleaved", pre_activation=True),
              configs=[dict(BM=16, BN=16, BK=16), dict(BM=32, BN=16, BK=32)])


@contract(**SWIGLU)
def fused_swiglu(a, b, c, *, pre, config):
    _swiglu(a, b, c, pre, config)


@contract(**SWIGLU)
def fused_swiglu_unscaled_up_column(a, b, c, *, pre, config):
    _swiglu(a, b, c, pre, config, unscaled_up=True)


# --- a batched GEMM on a 3-D grid (problem, tile row, tile column), batch strides as torch gives them


@triton.jit
def bmm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_az, stride_am, stride_ak, stride_bz, stride_bk, stride_bn,
               stride_cz, stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               BATCH_AXIS: tl.constexpr, PACKED: tl.constexpr):
    if BATCH_AXIS == 0:
        pid_z = tl.program_id(0)
        pid_m = tl.program_id(1)
        pid_n = tl.program_id(2)
    else:  # BUG (launched so): the batch on grid axis 2, which CUDA stops at 65535 programs
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        pid_z = tl.program_id(2)
    if PACKED:  # BUG: each problem found M * K elements after the last, as if the batch were packed
        a_ptr += pid_z.to(tl.int64) * M * K
        b_ptr += pid_z.to(tl.int64) * K * N
        c_ptr += pid_z.to(tl.int64) * M * N
    else:
        a_ptr += pid_z.to(tl.int64) * stride_az
        b_ptr += pid_z.to(tl.int64) * stride_bz
        c_ptr += pid_z.to(tl.int64) * stride_cz
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _bmm(a, b, c, config, batch_axis=0, packed=False):
    batch, M, K = a.shape
    N = b.shape[2]
    tiles = (triton.cdiv(M, config["BM"]), triton.cdiv(N, config["BN"]))
    grid = (batch, *tiles) if batch_axis == 0 else (*tiles, batch)
    bmm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), a.stride(2), b.stride(0), b.stride(1), b.stride(2),
                     c.stride(0), c.stride(1), c.stride(2), BM=config["BM"], BN=config["BN"], BK=config["BK"],
                     BATCH_AXIS=batch_axis, PACKED=packed, num_warps=1, num_stages=1)


BMM = dict(dtypes={torch.float16: (torch.float16, torch.float32)},
           operation=Operation(batched=True), configs=[dict(BM=16, BN=16, BK=16), dict(BM=32, BN=16, BK=32)])


@contract(**BMM)
def bmm_3d_grid(a, b, c, config):
    _bmm(a, b, c, config)


@contract(**BMM)
def bmm_batch_on_grid_axis_2(a, b, c, config):
    _bmm(a, b, c, config, batch_axis=2)


@contract(**BMM)
def bmm_batch_stride_from_shape(a, b, c, config):
    _bmm(a, b, c, config, packed=True)
