"""User kernels of grouped and MoE GEMMs, in the styles of published ones (kernels/operation.py's `grouped`),
each called as its real caller calls it: the suite builds the metadata. Each right kernel has a wrong twin
with one bug a real author could write, which only one kind of case shows:

  right                      wrong twin                                  shown by
  vllm_fused_moe             vllm_fused_moe_no_expert_parallel           a non-local expert (id -1): its block reads
                                                                         B at expert -1, before B's first element
  fbgemm_grouped_gemm        fbgemm_grouped_gemm_contiguous_b            B's groups not packed (a gap, a step, column-
                                                                         major): group g's weights taken at g * K * N
                                                                         read past B or another group's weights
  grouped_mm_offs            grouped_mm_offs_first_start_unguarded       any case: group 0's start read at offs[-1]
  liger_moe_swiglu           liger_moe_swiglu_halves_swapped             N past 0: silu applied to the up half
  vllm_fused_moe_bias        vllm_fused_moe_bias_unmasked                N not a multiple of the tile: the expert's
                                                                         bias read past its N columns

vLLM's and SGLang's fused_moe_kernel gathers A's rows by token and scatters C's by slot over moe_align_block_size's
metadata; FBGEMM's Triton grouped_gemm walks ragged groups over m_sizes in a persistent loop; torch._grouped_mm's
callers pass cumulative ends (offs); Liger-style MoE layers fuse the SwiGLU of the gate-up projection.
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import Operation, contract

HALF = {torch.float16: (torch.float16, torch.float32), torch.bfloat16: (torch.bfloat16, torch.float32),
        torch.float32: (torch.float32,)}

# --- vLLM / SGLang fused_moe_kernel (vllm/model_executor/layers/fused_moe/fused_moe.py): B is the experts'
# --- weights (E, N, K) read through strides, so (E, K, N) views of either layout work; offs_bn wraps modulo N for
# --- its loads (in bounds) and the store masks the columns; compute_type is C's element type


@triton.jit
def _fused_moe_kernel(a_ptr, b_ptr, c_ptr, topk_weights_ptr, sorted_token_ids_ptr, expert_ids_ptr,
                      num_tokens_post_padded_ptr, N, K, EM, num_valid_tokens,
                      stride_am, stride_ak, stride_be, stride_bk, stride_bn, stride_cm, stride_cn,
                      BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                      GROUP_SIZE_M: tl.constexpr, MUL_ROUTED_WEIGHT: tl.constexpr, top_k: tl.constexpr,
                      EXPERT_PARALLEL: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(EM, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    num_tokens_post_padded = tl.load(num_tokens_post_padded_ptr)
    if pid_m * BLOCK_SIZE_M >= num_tokens_post_padded:
        return
    offs_token_id = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M).to(tl.int64)
    offs_token = tl.load(sorted_token_ids_ptr + offs_token_id)
    token_mask = offs_token < num_valid_tokens

    off_experts = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    if EXPERT_PARALLEL:
        if off_experts == -1:
            # -----------------------------------------------------------
            # Write back zeros to the output when the expert is not
            # in the current expert parallel rank.
            offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            c_ptrs = c_ptr + stride_cm * offs_token[:, None] + stride_cn * offs_cn[None, :]
            c_mask = token_mask[:, None] & (offs_cn[None, :] < N)
            tl.store(c_ptrs, tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=c_ptr.dtype.element_ty), mask=c_mask)
            return

    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N).to(tl.int64)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_token[:, None] // top_k * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + off_experts * stride_be + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < K - k * BLOCK_SIZE_K), other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator += tl.dot(a, b, input_precision="ieee")
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    if MUL_ROUTED_WEIGHT:
        moe_weight = tl.load(topk_weights_ptr + offs_token, mask=token_mask, other=0)
        accumulator = accumulator * moe_weight[:, None]
    accumulator = accumulator.to(c_ptr.dtype.element_ty)

    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_token[:, None] + stride_cn * offs_cn[None, :]
    c_mask = token_mask[:, None] & (offs_cn[None, :] < N)
    tl.store(c_ptrs, accumulator, mask=c_mask)


FUSED_MOE = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=16, GROUP_SIZE_M=1)
MOE = Operation(grouped="routed", block_m=16, routed_weight=True, expert_parallel=True)


def _invoke_fused_moe(a, b, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k,
                      expert_parallel):
    assert topk_weights.stride(1) == 1
    assert sorted_token_ids.stride(0) == 1
    EM = sorted_token_ids.shape[0]
    N = b.shape[2]
    grid = (triton.cdiv(EM, FUSED_MOE["BLOCK_SIZE_M"]) * triton.cdiv(N, FUSED_MOE["BLOCK_SIZE_N"]),)
    _fused_moe_kernel[grid](a, b, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                            N, b.shape[1], EM, a.shape[0] * top_k,
                            a.stride(0), a.stride(1), b.stride(0), b.stride(1), b.stride(2), c.stride(0), c.stride(1),
                            MUL_ROUTED_WEIGHT=True, top_k=top_k, EXPERT_PARALLEL=expert_parallel, **FUSED_MOE)


@contract(dtypes=HALF, blocks=(16, 32, 16), operation=MOE)
def vllm_fused_moe(a, b, c, *, sorted_token_ids, expert_ids, num_tokens_post_padded, topk_weights, top_k):
    _invoke_fused_moe(a, b, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k, True)


@contract(dtypes=HALF, blocks=(16, 32, 16), operation=MOE)
def vllm_fused_moe_no_expert_parallel(a, b, c, *, sorted_token_ids, expert_ids, num_tokens_post_padded,
                                      topk_weights, top_k):
    _invoke_fused_moe(a, b, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k, False)


# --- FBGEMM's Triton grouped_gemm (fbgemm_gpu/experimental/gemm/triton_gemm/grouped_gemm.py), without TMA: a
# --- persistent grid of NUM_SMS programs walks the groups over m_sizes, each taking every NUM_SMS-th tile;
# --- B stacked (G, K, N). The twin finds group g's B at g * K * N elements, as a TMA descriptor over a packed
# --- (G * N, K) tensor would


@triton.jit
def _fbgemm_grouped_gemm(a_ptr, b_ptr, c_ptr, m_sizes, G, N, K, stride_am, stride_ak, stride_bg, stride_bk,
                         stride_bn, stride_cm, stride_cn, NUM_SMS: tl.constexpr, BLOCK_SIZE_M: tl.constexpr,
                         BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr, PACKED_B: tl.constexpr):
    tidx = tl.program_id(0)
    M_end_offset = 0
    iterated_tiles = 0
    for g in tl.range(G):
        # Move across groups.
        m_start_offset = M_end_offset
        m_size = tl.load(m_sizes + g)
        M_end_offset = m_start_offset + m_size
        if m_size > 0:
            num_m_tiles = tl.cdiv(m_size, BLOCK_SIZE_M)
            num_n_tiles = tl.cdiv(N, BLOCK_SIZE_N)
            num_tiles = num_m_tiles * num_n_tiles
            # Move across tiles.
            while tidx >= iterated_tiles and tidx < iterated_tiles + num_tiles:
                gidx = tidx - iterated_tiles
                tile_m_idx = gidx % num_m_tiles
                tile_n_idx = gidx // num_m_tiles
                offs_am = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
                offs_bn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
                offs_k = tl.arange(0, BLOCK_SIZE_K)
                rows = (m_start_offset + offs_am).to(tl.int64)
                if PACKED_B:
                    b_group = b_ptr + g * K * N
                else:
                    b_group = b_ptr + g * stride_bg
                accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
                for k_offset in range(0, K, BLOCK_SIZE_K):
                    a = tl.load(a_ptr + rows[:, None] * stride_am + (k_offset + offs_k)[None, :] * stride_ak,
                                mask=(offs_am[:, None] < m_size) & ((k_offset + offs_k)[None, :] < K), other=0.0)
                    b = tl.load(b_group + (k_offset + offs_k)[:, None] * stride_bk + offs_bn[None, :] * stride_bn,
                                mask=((k_offset + offs_k)[:, None] < K) & (offs_bn[None, :] < N), other=0.0)
                    accumulator += tl.dot(a, b, input_precision="ieee")
                c = accumulator.to(c_ptr.dtype.element_ty)
                tl.store(c_ptr + rows[:, None] * stride_cm + offs_bn[None, :] * stride_cn, c,
                         mask=(offs_am[:, None] < m_size) & (offs_bn[None, :] < N))
                tidx += NUM_SMS
            iterated_tiles += num_tiles


RAGGED_SIZES = Operation(grouped="ragged", ragged_index="sizes", names={"group_index": "m_sizes"})


def _fbgemm(a, b, c, m_sizes, packed_b):
    G, K, N = b.shape
    assert m_sizes.shape == (G,) and m_sizes.dtype == torch.int32
    _fbgemm_grouped_gemm[(4,)](a, b, c, m_sizes, G, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                               b.stride(2), c.stride(0), c.stride(1), NUM_SMS=4, BLOCK_SIZE_M=16, BLOCK_SIZE_N=32,
                               BLOCK_SIZE_K=16, PACKED_B=packed_b)


@contract(dtypes=HALF, blocks=(16, 32, 16), operation=RAGGED_SIZES)
def fbgemm_grouped_gemm(a, b, c, *, m_sizes):
    _fbgemm(a, b, c, m_sizes, False)


@contract(dtypes=HALF, blocks=(16, 32, 16), operation=RAGGED_SIZES)
def fbgemm_grouped_gemm_contiguous_b(a, b, c, *, m_sizes):
    _fbgemm(a, b, c, m_sizes, True)


# --- A kernels-community-style grouped GEMM over ragged groups of rows (m_sizes): program (t, n) walks the groups
# --- with tl.range to find the group of its t-th row tile, with 64-bit group offsets (g.to(tl.int64)) and a
# --- tl.range K loop. The twin's store mask uses A's whole M, not its group's end: a group's last tile writes
# --- zeros into the next group's first rows, which another program stores (right in program-id order: a race)


@triton.jit
def _kc_grouped_gemm(a_ptr, b_ptr, c_ptr, m_sizes_ptr, G, M, N, K, stride_am, stride_ak, stride_bg, stride_bk,
                     stride_bn, stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                     WHOLE_M_MASK: tl.constexpr):
    tile = tl.program_id(0)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    start = 0
    tiles_before = 0
    for g in tl.range(0, G):
        size = tl.load(m_sizes_ptr + g)
        tiles = tl.cdiv(size, BM)
        if (tile >= tiles_before) & (tile < tiles_before + tiles):
            end = start + size
            rows = start + (tile - tiles_before) * BM + tl.arange(0, BM)
            b_group = b_ptr + g.to(tl.int64) * stride_bg
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in tl.range(0, tl.cdiv(K, BK)):
                kk = k.to(tl.int64) * BK + ks
                a = tl.load(a_ptr + rows[:, None].to(tl.int64) * stride_am + kk[None, :] * stride_ak,
                            mask=(rows[:, None] < end) & (kk[None, :] < K), other=0.0)
                b = tl.load(b_group + kk[:, None] * stride_bk + cols[None, :] * stride_bn,
                            mask=(kk[:, None] < K) & (cols[None, :] < N), other=0.0)
                acc = tl.dot(a, b, acc, input_precision="ieee")
            row_limit = M if WHOLE_M_MASK else end
            tl.store(c_ptr + rows[:, None].to(tl.int64) * stride_cm + cols[None, :] * stride_cn,
                     acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < row_limit) & (cols[None, :] < N))
        start += size
        tiles_before += tiles


def _kc_grouped(a, b, c, m_sizes, whole_m_mask):
    M, K = a.shape
    G, _, N = b.shape
    assert m_sizes.shape == (G,) and m_sizes.dtype == torch.int32, "m_sizes must be (G,) int32"
    grid = (triton.cdiv(M, 16) + G, triton.cdiv(N, 16))  # at most one partial tile per group beyond M's tiles
    _kc_grouped_gemm[grid](a, b, c, m_sizes, G, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                           b.stride(2), c.stride(0), c.stride(1), BM=16, BN=16, BK=16, WHOLE_M_MASK=whole_m_mask)


@contract(dtypes=HALF, blocks=(16, 16, 16), operation=RAGGED_SIZES)
def kc_grouped_gemm(a, b, c, *, m_sizes):
    _kc_grouped(a, b, c, m_sizes, False)


@contract(dtypes=HALF, blocks=(16, 16, 16), operation=RAGGED_SIZES)
def kc_grouped_gemm_whole_m_mask(a, b, c, *, m_sizes):
    _kc_grouped(a, b, c, m_sizes, True)


# --- torch._grouped_mm-style callers (offs: cumulative ends of the groups): a 2-D grid of (group, tile), each
# --- program finding its group's rows from offs and leaving early past them. The twin reads group 0's start at
# --- offs[-1], an address before offs, masked in the right kernel


@triton.jit
def _grouped_mm_offs(a_ptr, b_ptr, c_ptr, offs_ptr, M, N, K, stride_am, stride_ak, stride_bg, stride_bk, stride_bn,
                     stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                     GUARD_FIRST: tl.constexpr):
    g = tl.program_id(0)
    tile = tl.program_id(1)
    if GUARD_FIRST:
        start = tl.load(offs_ptr + g - 1, mask=g > 0, other=0)
    else:
        start = tl.where(g > 0, tl.load(offs_ptr + g - 1), 0)
    end = tl.load(offs_ptr + g)
    tiles_n = tl.cdiv(N, BN)
    pid_m = tile // tiles_n
    pid_n = tile % tiles_n
    if start + pid_m * BM >= end:
        return
    rows = start + pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + ks
        a = tl.load(a_ptr + rows[:, None].to(tl.int64) * stride_am + kk[None, :] * stride_ak,
                    mask=(rows[:, None] < end) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + g.to(tl.int64) * stride_bg + kk[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None].to(tl.int64) * stride_cm + cols[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(rows[:, None] < end) & (cols[None, :] < N))


RAGGED_ENDS = Operation(grouped="ragged", ragged_index="ends", names={"group_index": "offs"})


def _grouped_mm(a, b, c, offs, guard_first):
    M, K = a.shape
    G, _, N = b.shape
    grid = (G, triton.cdiv(M, 16) * triton.cdiv(N, 16))  # no group has more rows than A
    _grouped_mm_offs[grid](a, b, c, offs, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), b.stride(2),
                           c.stride(0), c.stride(1), BM=16, BN=16, BK=16, GUARD_FIRST=guard_first)


@contract(dtypes=HALF, blocks=(16, 16, 16), operation=RAGGED_ENDS)
def grouped_mm_offs(a, b, c, *, offs):
    _grouped_mm(a, b, c, offs, True)


@contract(dtypes=HALF, blocks=(16, 16, 16), operation=RAGGED_ENDS)
def grouped_mm_offs_first_start_unguarded(a, b, c, *, offs):
    _grouped_mm(a, b, c, offs, False)


# --- A Liger-style MoE expert MLP's first GEMM: each routed slot's row times its expert's gate-up weights
# --- (E, K, 2N, gate columns first), SwiGLU fused: C = silu(A @ W_gate) * (A @ W_up); no router weight (the
# --- down projection applies it)


@triton.jit
def _moe_swiglu(a_ptr, b_ptr, c_ptr, sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr, N, K,
                num_valid_tokens, top_k, stride_am, stride_ak, stride_be, stride_bk, stride_bn, stride_cm, stride_cn,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SWAPPED: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_m * BM >= tl.load(num_tokens_post_padded_ptr):
        return
    slot = tl.load(sorted_token_ids_ptr + pid_m * BM + tl.arange(0, BM))
    valid = slot < num_valid_tokens
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    cols = pid_n * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    gate = tl.zeros((BM, BN), dtype=tl.float32)
    up = tl.zeros((BM, BN), dtype=tl.float32)
    w = b_ptr + expert * stride_be
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + ks
        a = tl.load(a_ptr + (slot // top_k)[:, None].to(tl.int64) * stride_am + kk[None, :] * stride_ak,
                    mask=valid[:, None] & (kk[None, :] < K), other=0.0)
        w_mask = (kk[:, None] < K) & (cols[None, :] < N)
        wg = tl.load(w + kk[:, None] * stride_bk + cols[None, :] * stride_bn, mask=w_mask, other=0.0)
        wu = tl.load(w + kk[:, None] * stride_bk + (cols + N)[None, :] * stride_bn, mask=w_mask, other=0.0)
        gate = tl.dot(a, wg, gate, input_precision="ieee")
        up = tl.dot(a, wu, up, input_precision="ieee")
    if SWAPPED:
        gate, up = up, gate
    h = gate * tl.sigmoid(gate) * up
    tl.store(c_ptr + slot[:, None].to(tl.int64) * stride_cm + cols[None, :] * stride_cn, h.to(c_ptr.dtype.element_ty),
             mask=valid[:, None] & (cols[None, :] < N))


SWIGLU = Operation(grouped="routed", block_m=16, gated="concat", activation="silu")


def _liger(a, b, c, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k, swapped):
    N = c.shape[1]
    grid = (triton.cdiv(sorted_token_ids.shape[0], 16), triton.cdiv(N, 16))
    _moe_swiglu[grid](a, b, c, sorted_token_ids, expert_ids, num_tokens_post_padded, N, a.shape[1], c.shape[0], top_k,
                      a.stride(0), a.stride(1), b.stride(0), b.stride(1), b.stride(2), c.stride(0), c.stride(1),
                      BM=16, BN=16, BK=16, SWAPPED=swapped)


@contract(dtypes=HALF, blocks=(16, 16, 16), operation=SWIGLU)
def liger_moe_swiglu(a, b, c, *, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k):
    _liger(a, b, c, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k, False)


@contract(dtypes=HALF, blocks=(16, 16, 16), operation=SWIGLU)
def liger_moe_swiglu_halves_swapped(a, b, c, *, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k):
    _liger(a, b, c, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k, True)


# --- vLLM fused_moe_kernel with HAS_BIAS (gpt-oss's experts carry a bias, (E, N)): the bias of the block's expert
# --- added to the fp32 accumulator before the cast; the twin loads it at the tile's unwrapped columns, unmasked


@triton.jit
def _fused_moe_bias_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, sorted_token_ids_ptr, expert_ids_ptr,
                           num_tokens_post_padded_ptr, N, K, EM, num_valid_tokens,
                           stride_am, stride_ak, stride_be, stride_bk, stride_bn, stride_cm, stride_cn,
                           stride_bbe, stride_bbn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                           BLOCK_SIZE_K: tl.constexpr, top_k: tl.constexpr, UNMASKED_BIAS: tl.constexpr):
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

    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N).to(tl.int64)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_token[:, None] // top_k * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + off_experts * stride_be + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < K - k * BLOCK_SIZE_K), other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator += tl.dot(a, b, input_precision="ieee")
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    if UNMASKED_BIAS:
        bias = tl.load(bias_ptr + off_experts * stride_bbe + offs_cn * stride_bbn)
    else:
        bias = tl.load(bias_ptr + off_experts * stride_bbe + offs_bn * stride_bbn)
    accumulator = accumulator + bias[None, :].to(tl.float32)
    c_ptrs = c_ptr + stride_cm * offs_token[:, None] + stride_cn * offs_cn[None, :]
    c_mask = token_mask[:, None] & (offs_cn[None, :] < N)
    tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=c_mask)


MOE_BIAS = Operation(grouped="routed", block_m=16, bias="n")


def _fused_moe_bias(a, b, c, bias, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k, unmasked):
    EM, N = sorted_token_ids.shape[0], b.shape[2]
    assert bias.shape == (b.shape[0], N)
    grid = (triton.cdiv(EM, 16) * triton.cdiv(N, 32),)
    _fused_moe_bias_kernel[grid](a, b, c, bias, sorted_token_ids, expert_ids, num_tokens_post_padded, N, b.shape[1],
                                 EM, a.shape[0] * top_k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                 b.stride(2), c.stride(0), c.stride(1), bias.stride(0), bias.stride(1),
                                 BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=16, top_k=top_k,
                                 UNMASKED_BIAS=unmasked)


@contract(dtypes=HALF, blocks=(16, 32, 16), operation=MOE_BIAS)
def vllm_fused_moe_bias(a, b, c, *, bias, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k):
    _fused_moe_bias(a, b, c, bias, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k, False)


@contract(dtypes=HALF, blocks=(16, 32, 16), operation=MOE_BIAS)
def vllm_fused_moe_bias_unmasked(a, b, c, *, bias, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k):
    _fused_moe_bias(a, b, c, bias, sorted_token_ids, expert_ids, num_tokens_post_padded, top_k, True)
