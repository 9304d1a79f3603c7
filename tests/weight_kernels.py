"""User kernels of weight-only GEMMs (kernels/operation.py's `weight="int4"`: w4a16, fp16 or bf16 A times int4 codes
with fp32 group scales and packed zero points) in the style AWQ and GPTQ kernels are published in, each declaring its
weights with `contract(operation=Operation(weight=, b_scale=, group_k=, zero=))`. Each dequantizes every K tile of
codes into A's dtype, w = (q - z) * s, before the dot. Each right kernel has a wrong twin with one bug a real author
could write, which only one kind of case shows:

  right                 wrong twin                              shown by
  awq_w4a16_matmul      awq_w4a16_matmul_zero_shift_by_index    N past the first column of eight (each zero point
                                                                unpacked from bit n % 8 instead of 4 * (n % 8); only
                                                                zero points all 0 or all 15 hide it)

The right kernel zeroes the weights past K: their codes read 0, yet (0 - z) * s is a weight, Inf for a
scale that large, and A's masked zeros times Inf are NaN (the form vLLM's gptq_awq kernel has; the
suite's scale specials found it on an H100 in the built-in w4a16).
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import Operation, contract

# --- vLLM's fused_moe_kernel_gptq_awq (vllm/model_executor/layers/fused_moe/fused_moe.py) and AWQ's Triton GEMM,
# --- without the experts: grouped tile order over a 1-D grid, rows, columns and K masked, int4 codes two a byte
# --- along K unpacked with shifts and masks, one fp32 scale row and one int32 row of zero points (eight along N)
# --- per K tile (BLOCK_SIZE_K divides the group), the weights dequantized into A's dtype before tl.dot

AWQ = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=16, BLOCK_SIZE_K=16, GROUP_SIZE_M=2)  # BLOCK_SIZE_K divides group_k
GROUP_K = 32


@triton.jit
def _awq_w4a16_kernel(a_ptr, b_ptr, c_ptr, b_scale_ptr, b_zp_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                      stride_cm, stride_cn, stride_bsk, stride_bsn, stride_bzk, stride_bzn, group_k: tl.constexpr,
                      BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                      GROUP_SIZE_M: tl.constexpr, ZP_SHIFT_BY_INDEX: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_bn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + (offs_k[:, None] // 2) * stride_bk + offs_bn[None, :] * stride_bn
    b_shifter = (offs_k[:, None] % 2) * 4  # even k in the low nibble
    if ZP_SHIFT_BY_INDEX:  # BUG: the column's index within its int32 taken for its bit offset
        b_zp_shifter = offs_bn % 8
    else:
        b_zp_shifter = (offs_bn % 8) * 4
    mask_m = offs_am < M
    mask_n = offs_bn < N

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        mask_k = offs_k < K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0)
        b = (b.to(tl.int32) >> b_shifter) & 0xF

        offs_ks = (k * BLOCK_SIZE_K) // group_k  # one group a K tile
        b_scale = tl.load(b_scale_ptr + offs_ks * stride_bsk + offs_bn * stride_bsn, mask=mask_n, other=0.0)
        b_zp = tl.load(b_zp_ptr + offs_ks * stride_bzk + (offs_bn // 8) * stride_bzn, mask=mask_n, other=0)
        b_zp = (b_zp >> b_zp_shifter) & 0xF  # masked after the shift: a word may be negative

        b = ((b - b_zp[None, :]).to(tl.float32) * b_scale[None, :]).to(a.dtype)
        b = tl.where(mask_k[:, None], b, 0.0)  # past K the codes read 0, yet (0 - z) * s is a weight
        accumulator = tl.dot(a, b, acc=accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += (BLOCK_SIZE_K // 2) * stride_bk

    c = accumulator.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + stride_cm * offs_am[:, None] + stride_cn * offs_bn[None, :]
    tl.store(c_ptrs, c, mask=mask_m[:, None] & mask_n[None, :])


def _awq_w4a16(a, b, c, b_scale, b_zero, zp_shift_by_index=False):
    M, K = a.shape
    N = b.shape[1]
    assert b.dtype == torch.uint8 and b.shape[0] == triton.cdiv(K, 2)
    assert tuple(b_scale.shape) == (triton.cdiv(K, GROUP_K), N)
    assert tuple(b_zero.shape) == (triton.cdiv(K, GROUP_K), triton.cdiv(N, 8))
    cfg = AWQ
    assert GROUP_K % cfg["BLOCK_SIZE_K"] == 0 and cfg["BLOCK_SIZE_K"] % 2 == 0
    grid = (triton.cdiv(M, cfg["BLOCK_SIZE_M"]) * triton.cdiv(N, cfg["BLOCK_SIZE_N"]),)
    _awq_w4a16_kernel[grid](a, b, c, b_scale, b_zero, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), b_scale.stride(0), b_scale.stride(1), b_zero.stride(0),
                            b_zero.stride(1), group_k=GROUP_K, **cfg, ZP_SHIFT_BY_INDEX=zp_shift_by_index,
                            num_warps=1, num_stages=1)


W4A16 = dict(dtypes={torch.float16: (torch.float16,), torch.bfloat16: (torch.bfloat16,)}, blocks=(16, 16, 16),
             operation=Operation(weight="int4", b_scale="group", group_k=GROUP_K, zero="packed"))


@contract(**W4A16)
def awq_w4a16_matmul(a, b, c, b_scale, b_zero):
    _awq_w4a16(a, b, c, b_scale, b_zero)


@contract(**W4A16)
def awq_w4a16_matmul_zero_shift_by_index(a, b, c, b_scale, b_zero):
    _awq_w4a16(a, b, c, b_scale, b_zero, zp_shift_by_index=True)
