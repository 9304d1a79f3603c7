"""User kernels of weight-only GEMMs as GPTQ and AWQ checkpoints store their int4 weights, eight codes an int32
(kernels/operation.py's `packing="k8"` and `"n8"`, `pack_order`, fp16 scales), and an int8 one that scales after the
dot (`scale_after_dot`). A is fp16 or bf16, C fp16, bf16 or fp32, both any strides; the accumulator is fp32. The
int4 kernels dequantize each K tile, w = (q - z) * s in fp32 rounded into A's dtype, before the dot; the int8 kernel
multiplies A by the codes (exact in A's dtype) and scales each column's fp32 sum once, after the K loop. Each right
kernel has a wrong twin with one bug a real author could write, which only one kind of case shows:

  right                   wrong twin                                shown by
  gptq_w4a16_matmul       gptq_w4a16_matmul_group_off_by_one        K past a group boundary (rows counted from 1:
                                                                    the group's last row reads the next group's
                                                                    scale and zero point, or past their last row
                                                                    when K is a multiple of the group)
  awq_n8_w4a16_matmul     awq_n8_w4a16_matmul_zero_identity_order   N past the first column (zero points unpacked
                                                                    in identity order, codes in AWQ's; only words
                                                                    of eight equal zero points hide it)
  w8a16_scale_after_dot   w8a16_scale_after_dot_scale_unmasked      N not a multiple of BLOCK_N (b_scale read past
                                                                    its end; C itself stays right)

Codes past K or N (the last word's unused nibbles) hold whatever the buffer holds: the kernels mask by the logical
row and column, never by the word.
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import Operation, contract

GROUP_K = 32  # published checkpoints use 128: 32 lets the interpreter reach several groups
HALF = {torch.float16: (torch.float16, torch.float32), torch.bfloat16: (torch.bfloat16, torch.float32)}
ACTIVATIONS = (torch.float16, torch.bfloat16)
OUTPUTS = (torch.float16, torch.bfloat16, torch.float32)


def _check_a_c(a, c, N):
    assert a.dim() == 2 and a.dtype in ACTIVATIONS, a.dtype
    assert c.dtype in OUTPUTS and tuple(c.shape) == (a.shape[0], N)


# --- AutoGPTQ's triton QuantLinear matmul_248_kernel (auto_gptq/nn_modules/triton_utils/kernels.py, also in
# --- GPTQ-for-LLaMa and exllama's triton path): grouped tile order over a 1-D grid, each int32 of qweight read
# --- BLOCK_SIZE_K // 8 times over (b_ptrs repeat along K) and unpacked by a per-row shifter, scales and zero points
# --- gathered per row through g_idx (k // groupsize without act-order, computed here). AutoGPTQ's v1 checkpoints
# --- store z - 1 and add 1 back; these store z. Rows and columns masked, so K need not be a multiple of 8 or 32

GPTQ = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=2)  # BLOCK_SIZE_K a multiple of 8


@triton.jit
def _gptq_kernel(a_ptr, b_ptr, c_ptr, scales_ptr, zeros_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                 stride_cm, stride_cn, stride_scales_k, stride_scales_n, stride_zeros_k, stride_zeros_n,
                 groupsize: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                 BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, ROWS_FROM_ONE: tl.constexpr):
    bits: tl.constexpr = 4
    infeatures_per_bits: tl.constexpr = 32 // bits
    maxq: tl.constexpr = 2**bits - 1
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (pid % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_bn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    # b_ptrs repeats each int32 eight times along K
    b_ptrs = b_ptr + (offs_k[:, None] // infeatures_per_bits) * stride_bk + offs_bn[None, :] * stride_bn
    scales_ptrs = scales_ptr + offs_bn[None, :] * stride_scales_n
    zeros_ptrs = zeros_ptr + (offs_bn[None, :] // infeatures_per_bits) * stride_zeros_n
    shifter = (offs_k % infeatures_per_bits) * bits
    zeros_shifter = (offs_bn % infeatures_per_bits) * bits
    mask_m = offs_am < M
    mask_n = offs_bn < N

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        rows = k * BLOCK_SIZE_K + offs_k
        mask_k = rows < K
        mask_kn = mask_k[:, None] & mask_n[None, :]
        if ROWS_FROM_ONE:  # BUG: the row counted from 1, so the group's last row lands in the next group
            g_idx = (rows + 1) // groupsize
        else:
            g_idx = rows // groupsize
        # past K every load below reads 0 (q = z = s = 0): a weight of 0, whatever the word's other nibbles hold
        scales = tl.load(scales_ptrs + g_idx[:, None] * stride_scales_k, mask=mask_kn, other=0.0)
        zeros = tl.load(zeros_ptrs + g_idx[:, None] * stride_zeros_k, mask=mask_kn, other=0)
        zeros = (zeros >> zeros_shifter[None, :]) & maxq  # masked after the shift: a word may be negative

        a = tl.load(a_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=mask_kn, other=0)
        b = (b >> shifter[:, None]) & maxq
        b = ((b - zeros).to(tl.float32) * scales.to(tl.float32)).to(a.dtype)

        accumulator = tl.dot(a, b, acc=accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += (BLOCK_SIZE_K // infeatures_per_bits) * stride_bk

    c_ptrs = c_ptr + stride_cm * offs_am[:, None] + stride_cn * offs_bn[None, :]
    tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


def _gptq_w4a16(a, b, c, b_scale, b_zero, rows_from_one=False):
    M, K = a.shape
    N = b.shape[1]
    _check_a_c(a, c, N)
    assert b.dtype == torch.int32 and tuple(b.shape) == (triton.cdiv(K, 8), N)
    assert b_scale.dtype == torch.float16 and tuple(b_scale.shape) == (triton.cdiv(K, GROUP_K), N)
    assert b_zero.dtype == torch.int32 and tuple(b_zero.shape) == (triton.cdiv(K, GROUP_K), triton.cdiv(N, 8))
    cfg = GPTQ
    assert cfg["BLOCK_SIZE_K"] % 8 == 0
    grid = (triton.cdiv(M, cfg["BLOCK_SIZE_M"]) * triton.cdiv(N, cfg["BLOCK_SIZE_N"]),)
    _gptq_kernel[grid](a, b, c, b_scale, b_zero, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                       c.stride(0), c.stride(1), b_scale.stride(0), b_scale.stride(1), b_zero.stride(0),
                       b_zero.stride(1), groupsize=GROUP_K, **cfg, ROWS_FROM_ONE=rows_from_one, num_warps=1,
                       num_stages=1)


GPTQ_CONTRACT = dict(dtypes=HALF, blocks=(16, 32, 32), operation=Operation(
    weight="int4", packing="k8", b_scale="group", group_k=GROUP_K, zero="packed", scale_dtype="fp16"))


@contract(**GPTQ_CONTRACT)
def gptq_w4a16_matmul(a, b, c, b_scale, b_zero):
    _gptq_w4a16(a, b, c, b_scale, b_zero)


@contract(**GPTQ_CONTRACT)
def gptq_w4a16_matmul_group_off_by_one(a, b, c, b_scale, b_zero):
    _gptq_w4a16(a, b, c, b_scale, b_zero, rows_from_one=True)


# --- vLLM's awq_gemm_kernel (vllm/model_executor/layers/quantization/awq_triton.py), without split-K: a 1-D grid,
# --- each int32 of qweight and qzeros spread over its eight columns by three tl.interleave, the nibbles picked by
# --- shifts in AWQ's reverse order (0, 4, 1, 5, 2, 6, 3, 7), one row of scales and zero points a K tile
# --- (BLOCK_SIZE_K divides the group). vLLM masks words by N // 8 and groups by K // group_size (N a multiple of 8,
# --- K of the group); here by ceil(N / 8), columns by N and rows by K

AWQ = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=16)  # BLOCK_SIZE_N a multiple of 8


@triton.jit
def _awq_kernel(a_ptr, b_ptr, c_ptr, zeros_ptr, scales_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                stride_cm, stride_cn, stride_zk, stride_zn, stride_sk, stride_sn, group_size: tl.constexpr,
                BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                ZEROS_IDENTITY_ORDER: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    # reverse AWQ order [0, 4, 1, 5, 2, 6, 3, 7]: column i of a word sits in nibble order[i]
    reverse_awq_order_tensor = ((tl.arange(0, 2) * 4)[None, :] + tl.arange(0, 4)[:, None]).reshape(8)
    shifts = reverse_awq_order_tensor * 4
    shifts = tl.broadcast_to(shifts[None, :], (BLOCK_SIZE_K * (BLOCK_SIZE_N // 8), 8))
    shifts = tl.reshape(shifts, (BLOCK_SIZE_K, BLOCK_SIZE_N))
    if ZEROS_IDENTITY_ORDER:  # BUG: the zero points' shifts written as GPTQ's, column i in nibble i
        zero_shifts = ((tl.arange(0, BLOCK_SIZE_N) % 8) * 4)[None, :]
    else:
        zero_shifts = shifts
    zero_shifts = tl.broadcast_to(zero_shifts, (BLOCK_SIZE_K, BLOCK_SIZE_N))

    offsets_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    masks_am = offsets_am < M
    offsets_bn = pid_n * (BLOCK_SIZE_N // 8) + tl.arange(0, BLOCK_SIZE_N // 8)  # words of qweight and qzeros
    masks_bn = offsets_bn < tl.cdiv(N, 8)
    offsets_sn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)  # columns
    masks_sn = offsets_sn < N
    offsets_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + offsets_am[:, None] * stride_am + offsets_k[None, :] * stride_ak
    b_ptrs = b_ptr + offsets_k[:, None] * stride_bk + offsets_bn[None, :] * stride_bn

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        masks_k = offsets_k < K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=masks_am[:, None] & masks_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=masks_k[:, None] & masks_bn[None, :], other=0)
        b = tl.interleave(b, b)
        b = tl.interleave(b, b)
        b = tl.interleave(b, b)

        offsets_szk = (BLOCK_SIZE_K * k) // group_size + tl.arange(0, 1)
        zeros = tl.load(zeros_ptr + offsets_szk[:, None] * stride_zk + offsets_bn[None, :] * stride_zn,
                        mask=masks_bn[None, :], other=0)
        zeros = tl.interleave(zeros, zeros)
        zeros = tl.interleave(zeros, zeros)
        zeros = tl.interleave(zeros, zeros)
        zeros = tl.broadcast_to(zeros, (BLOCK_SIZE_K, BLOCK_SIZE_N))
        scales = tl.load(scales_ptr + offsets_szk[:, None] * stride_sk + offsets_sn[None, :] * stride_sn,
                         mask=masks_sn[None, :], other=0.0)
        scales = tl.broadcast_to(scales, (BLOCK_SIZE_K, BLOCK_SIZE_N))

        b = (b >> shifts) & 0xF
        zeros = (zeros >> zero_shifts) & 0xF
        b = ((b - zeros).to(tl.float32) * scales.to(tl.float32)).to(a.dtype)
        b = tl.where(masks_k[:, None], b, 0.0)  # past K the codes read 0, yet (0 - z) * s is a weight (Inf: NaN)

        accumulator = tl.dot(a, b, acc=accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    c_ptrs = c_ptr + stride_cm * offsets_am[:, None] + stride_cn * offsets_sn[None, :]
    tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=masks_am[:, None] & masks_sn[None, :])


def _awq_w4a16(a, b, c, b_scale, b_zero, zeros_identity_order=False):
    M, K = a.shape
    N = b_scale.shape[1]
    _check_a_c(a, c, N)
    assert b.dtype == torch.int32 and tuple(b.shape) == (K, triton.cdiv(N, 8))
    assert b_scale.dtype == torch.float16 and tuple(b_scale.shape) == (triton.cdiv(K, GROUP_K), N)
    assert b_zero.dtype == torch.int32 and tuple(b_zero.shape) == (triton.cdiv(K, GROUP_K), triton.cdiv(N, 8))
    cfg = AWQ
    assert cfg["BLOCK_SIZE_N"] % 8 == 0 and GROUP_K % cfg["BLOCK_SIZE_K"] == 0
    grid = (triton.cdiv(M, cfg["BLOCK_SIZE_M"]) * triton.cdiv(N, cfg["BLOCK_SIZE_N"]),)
    _awq_kernel[grid](a, b, c, b_zero, b_scale, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                      c.stride(0), c.stride(1), b_zero.stride(0), b_zero.stride(1), b_scale.stride(0),
                      b_scale.stride(1), group_size=GROUP_K, **cfg, ZEROS_IDENTITY_ORDER=zeros_identity_order,
                      num_warps=1, num_stages=1)


AWQ_CONTRACT = dict(dtypes=HALF, blocks=(16, 32, 16), operation=Operation(
    weight="int4", packing="n8", pack_order=(0, 4, 1, 5, 2, 6, 3, 7), b_scale="group", group_k=GROUP_K, zero="packed",
    scale_dtype="fp16"))


@contract(**AWQ_CONTRACT)
def awq_n8_w4a16_matmul(a, b, c, b_scale, b_zero):
    _awq_w4a16(a, b, c, b_scale, b_zero)


@contract(**AWQ_CONTRACT)
def awq_n8_w4a16_matmul_zero_identity_order(a, b, c, b_scale, b_zero):
    _awq_w4a16(a, b, c, b_scale, b_zero, zeros_identity_order=True)


# --- vLLM's triton_scaled_mm (compressed_tensors/triton_scaled_mm.py) with A left in fp16 or bf16 (w8a16): a 2-D
# --- grid, the int8 codes cast to A's dtype (exact) for tl.dot, the per-channel fp32 scale multiplying the fp32
# --- sum once, after the K loop

W8A16 = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32)


@triton.jit
def _w8a16_kernel(a_ptr, b_ptr, c_ptr, scale_b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                  stride_cn, stride_sb, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr, SCALE_UNMASKED: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offsets_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offsets_bn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offsets_k = tl.arange(0, BLOCK_SIZE_K)
    masks_am = offsets_am < M
    masks_bn = offsets_bn < N
    a_ptrs = a_ptr + offsets_am[:, None] * stride_am + offsets_k[None, :] * stride_ak
    b_ptrs = b_ptr + offsets_k[:, None] * stride_bk + offsets_bn[None, :] * stride_bn

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        masks_k = offsets_k < K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=masks_am[:, None] & masks_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=masks_k[:, None] & masks_bn[None, :], other=0)
        accumulator = tl.dot(a, b.to(a.dtype), acc=accumulator)  # int8 codes are exact in fp16 and bf16
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    if SCALE_UNMASKED:  # BUG: the scale row loaded as a full tile; the last tile of N reads past its end
        scale_b = tl.load(scale_b_ptr + offsets_bn * stride_sb)
    else:
        scale_b = tl.load(scale_b_ptr + offsets_bn * stride_sb, mask=masks_bn, other=0.0)
    accumulator = accumulator * scale_b[None, :].to(tl.float32)

    c_ptrs = c_ptr + stride_cm * offsets_am[:, None] + stride_cn * offsets_bn[None, :]
    tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=masks_am[:, None] & masks_bn[None, :])


def _w8a16(a, b, c, b_scale, scale_unmasked=False):
    M, K = a.shape
    N = b.shape[1]
    _check_a_c(a, c, N)
    assert b.dtype == torch.int8 and b.shape[0] == K
    assert b_scale.dtype == torch.float32 and tuple(b_scale.shape) == (N,)
    cfg = W8A16
    grid = (triton.cdiv(M, cfg["BLOCK_SIZE_M"]), triton.cdiv(N, cfg["BLOCK_SIZE_N"]))
    _w8a16_kernel[grid](a, b, c, b_scale, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), b_scale.stride(0), **cfg, SCALE_UNMASKED=scale_unmasked, num_warps=1,
                        num_stages=1)


W8A16_CONTRACT = dict(dtypes=HALF, blocks=(16, 32, 32),
                      operation=Operation(weight="int8", b_scale="col", scale_after_dot=True))


@contract(**W8A16_CONTRACT)
def w8a16_scale_after_dot(a, b, c, b_scale):
    _w8a16(a, b, c, b_scale)


@contract(**W8A16_CONTRACT)
def w8a16_scale_after_dot_scale_unmasked(a, b, c, b_scale):
    _w8a16(a, b, c, b_scale, scale_unmasked=True)
