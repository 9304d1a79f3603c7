"""Grouped and MoE user kernels of fp8 codes with scales (kernels/operation.py's `grouped` with a_scale and
b_scale), in the styles of published ones, each called as its real caller calls it. Each right kernel has a
wrong twin with one bug a real author could write, which only one kind of case shows:

  right                        wrong twin                                    shown by
  fbgemm_grouped_fp8_rowwise   fbgemm_grouped_fp8_rowwise_first_group_scale  a group past the first with rows: its
                                                                             columns scaled by group 0's w_scale
  vllm_fused_moe_fp8           vllm_fused_moe_fp8_scale_before_ep_check      a non-local expert (id -1): its block
                                                                             reads B's scale at expert -1, before
                                                                             b_scale's first element

FBGEMM's grouped_gemm_fp8_rowwise scales each row of the fp32 accumulator by x_scale[m] and each column by
w_scale[g, n]; vLLM's fused_moe with use_fp8_w8a8 and per-tensor quantization multiplies it by the activation's
scale and the expert's weight scale (E,), after the expert-parallel check, then by the router weight.
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import Operation, contract

FP8 = {torch.float8_e4m3fn: (torch.bfloat16, torch.float16, torch.float32)}

# --- FBGEMM grouped_gemm_fp8_rowwise (fbgemm_gpu/experimental/gemm/triton_gemm/grouped_gemm.py), without TMA: a
# --- persistent grid walks the groups over m_sizes; w_scale is (G, N), read flat at g * N + n


@triton.jit
def _fbgemm_grouped_fp8(a_ptr, b_ptr, c_ptr, m_sizes, a_scale_ptr, b_scale_ptr, G, N, K, stride_am, stride_ak,
                        stride_bg, stride_bk, stride_bn, stride_cm, stride_cn, stride_as, stride_bsg, stride_bsn,
                        NUM_SMS: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                        BLOCK_SIZE_K: tl.constexpr, FIRST_GROUP_SCALE: tl.constexpr):
    tidx = tl.program_id(0)
    M_end_offset = 0
    iterated_tiles = 0
    for g in tl.range(G):
        m_start_offset = M_end_offset
        m_size = tl.load(m_sizes + g)
        M_end_offset = m_start_offset + m_size
        if m_size > 0:
            num_m_tiles = tl.cdiv(m_size, BLOCK_SIZE_M)
            num_n_tiles = tl.cdiv(N, BLOCK_SIZE_N)
            num_tiles = num_m_tiles * num_n_tiles
            while tidx >= iterated_tiles and tidx < iterated_tiles + num_tiles:
                gidx = tidx - iterated_tiles
                tile_m_idx = gidx % num_m_tiles
                tile_n_idx = gidx // num_m_tiles
                offs_am = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
                offs_bn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
                offs_k = tl.arange(0, BLOCK_SIZE_K)
                rows = (m_start_offset + offs_am).to(tl.int64)
                b_group = b_ptr + g * stride_bg
                accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
                for k_offset in range(0, K, BLOCK_SIZE_K):
                    a = tl.load(a_ptr + rows[:, None] * stride_am + (k_offset + offs_k)[None, :] * stride_ak,
                                mask=(offs_am[:, None] < m_size) & ((k_offset + offs_k)[None, :] < K), other=0.0)
                    b = tl.load(b_group + (k_offset + offs_k)[:, None] * stride_bk + offs_bn[None, :] * stride_bn,
                                mask=((k_offset + offs_k)[:, None] < K) & (offs_bn[None, :] < N), other=0.0)
                    accumulator += tl.dot(a, b)
                a_scale = tl.load(a_scale_ptr + rows * stride_as, mask=offs_am < m_size, other=0.0)
                if FIRST_GROUP_SCALE:
                    b_scale = tl.load(b_scale_ptr + offs_bn * stride_bsn, mask=offs_bn < N, other=0.0)
                else:
                    b_scale = tl.load(b_scale_ptr + g * stride_bsg + offs_bn * stride_bsn, mask=offs_bn < N,
                                      other=0.0)
                c = (accumulator * a_scale[:, None] * b_scale[None, :]).to(c_ptr.dtype.element_ty)
                tl.store(c_ptr + rows[:, None] * stride_cm + offs_bn[None, :] * stride_cn, c,
                         mask=(offs_am[:, None] < m_size) & (offs_bn[None, :] < N))
                tidx += NUM_SMS
            iterated_tiles += num_tiles


ROWWISE = Operation(grouped="ragged", ragged_index="sizes", a_scale="row", b_scale="col",
                    names={"group_index": "m_sizes", "a_scale": "x_scale", "b_scale": "w_scale"})


def _fbgemm_fp8(a, b, c, m_sizes, x_scale, w_scale, first_group_scale):
    G, K, N = b.shape
    assert m_sizes.shape == (G,) and x_scale.shape == (a.shape[0],) and w_scale.shape == (G, N)
    _fbgemm_grouped_fp8[(4,)](a, b, c, m_sizes, x_scale, w_scale, G, N, K, a.stride(0), a.stride(1), b.stride(0),
                              b.stride(1), b.stride(2), c.stride(0), c.stride(1), x_scale.stride(0),
                              w_scale.stride(0), w_scale.stride(1), NUM_SMS=4, BLOCK_SIZE_M=16, BLOCK_SIZE_N=32,
                              BLOCK_SIZE_K=32, FIRST_GROUP_SCALE=first_group_scale)


@contract(dtypes=FP8, blocks=(16, 32, 32), operation=ROWWISE)
def fbgemm_grouped_fp8_rowwise(a, b, c, *, m_sizes, x_scale, w_scale):
    _fbgemm_fp8(a, b, c, m_sizes, x_scale, w_scale, False)


@contract(dtypes=FP8, blocks=(16, 32, 32), operation=ROWWISE)
def fbgemm_grouped_fp8_rowwise_first_group_scale(a, b, c, *, m_sizes, x_scale, w_scale):
    _fbgemm_fp8(a, b, c, m_sizes, x_scale, w_scale, True)


# --- vLLM fused_moe_kernel with use_fp8_w8a8, per-tensor scales: a1_scale (1,), w_scale (E,) read at the block's
# --- expert; the twin reads it before the expert-parallel early return, at expert -1


@triton.jit
def _fused_moe_fp8(a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, topk_weights_ptr, sorted_token_ids_ptr,
                   expert_ids_ptr, num_tokens_post_padded_ptr, N, K, EM, num_valid_tokens,
                   stride_am, stride_ak, stride_be, stride_bk, stride_bn, stride_cm, stride_cn, stride_bse,
                   BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                   top_k: tl.constexpr, SCALE_BEFORE_EP_CHECK: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    num_tokens_post_padded = tl.load(num_tokens_post_padded_ptr)
    if pid_m * BLOCK_SIZE_M >= num_tokens_post_padded:
        return
    offs_token_id = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M).to(tl.int64)
    offs_token = tl.load(sorted_token_ids_ptr + offs_token_id)
    token_mask = offs_token < num_valid_tokens

    off_experts = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    if SCALE_BEFORE_EP_CHECK:
        b_scale = tl.load(b_scale_ptr + off_experts * stride_bse)
    if off_experts == -1:
        offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        c_ptrs = c_ptr + stride_cm * offs_token[:, None] + stride_cn * offs_cn[None, :]
        c_mask = token_mask[:, None] & (offs_cn[None, :] < N)
        tl.store(c_ptrs, tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=c_ptr.dtype.element_ty), mask=c_mask)
        return
    if not SCALE_BEFORE_EP_CHECK:
        b_scale = tl.load(b_scale_ptr + off_experts * stride_bse)
    a_scale = tl.load(a_scale_ptr)

    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N).to(tl.int64)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_token[:, None] // top_k * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + off_experts * stride_be + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < K - k * BLOCK_SIZE_K), other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator += tl.dot(a, b)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    accumulator = accumulator * a_scale * b_scale
    moe_weight = tl.load(topk_weights_ptr + offs_token, mask=token_mask, other=0)
    accumulator = (accumulator * moe_weight[:, None]).to(c_ptr.dtype.element_ty)

    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_token[:, None] + stride_cn * offs_cn[None, :]
    c_mask = token_mask[:, None] & (offs_cn[None, :] < N)
    tl.store(c_ptrs, accumulator, mask=c_mask)


MOE_FP8 = Operation(grouped="routed", block_m=16, routed_weight=True, expert_parallel=True, a_scale="tensor",
                    b_scale="tensor")


def _invoke_fused_moe_fp8(a, b, c, a_scale, b_scale, topk_weights, sorted_token_ids, expert_ids,
                          num_tokens_post_padded, top_k, scale_before_ep_check):
    assert a_scale.numel() == 1 and b_scale.shape == (b.shape[0],)
    EM, N = sorted_token_ids.shape[0], b.shape[2]
    grid = (triton.cdiv(EM, 16) * triton.cdiv(N, 32),)
    _fused_moe_fp8[grid](a, b, c, a_scale, b_scale, topk_weights, sorted_token_ids, expert_ids,
                         num_tokens_post_padded, N, b.shape[1], EM, a.shape[0] * top_k, a.stride(0), a.stride(1),
                         b.stride(0), b.stride(1), b.stride(2), c.stride(0), c.stride(1), b_scale.stride(0),
                         BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, top_k=top_k,
                         SCALE_BEFORE_EP_CHECK=scale_before_ep_check)


@contract(dtypes=FP8, blocks=(16, 32, 32), operation=MOE_FP8)
def vllm_fused_moe_fp8(a, b, c, *, a_scale, b_scale, sorted_token_ids, expert_ids, num_tokens_post_padded,
                       topk_weights, top_k):
    _invoke_fused_moe_fp8(a, b, c, a_scale, b_scale, topk_weights, sorted_token_ids, expert_ids,
                          num_tokens_post_padded, top_k, False)


@contract(dtypes=FP8, blocks=(16, 32, 32), operation=MOE_FP8)
def vllm_fused_moe_fp8_scale_before_ep_check(a, b, c, *, a_scale, b_scale, sorted_token_ids, expert_ids,
                                             num_tokens_post_padded, topk_weights, top_k):
    _invoke_fused_moe_fp8(a, b, c, a_scale, b_scale, topk_weights, sorted_token_ids, expert_ids,
                          num_tokens_post_padded, top_k, True)
