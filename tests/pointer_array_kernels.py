"""User kernels of group GEMMs over device arrays of pointers (kernels/operation.py's grouped="problems"): G
independent problems, each of its own M, N and K, called as FUNC(a, b, c) with lists of G tensors; the wrapper
builds the arrays of pointers, sizes and leading dimensions itself, as Triton's tutorial 08 does. The right
kernel has wrong twins with one bug a real author could write, which only one kind of case shows:

  right                      wrong twin                                   shown by
  tutorial_08_group_gemm     tutorial_08_group_gemm_lda_is_k              a problem whose A has padded rows
                                                                          (stride(0) > K): lda taken as K
                             tutorial_08_group_gemm_first_problem_k       a problem whose K differs from problem
                                                                          0's (even an empty problem 0): smaller,
                                                                          it reads past its A and B; larger, its
                                                                          sum stops at problem 0's K
                             tutorial_08_group_gemm_unmasked_n_store      a problem whose N is not a multiple of
                                                                          the tile's BN (1 x 1 x 1): the store
                                                                          writes past its columns, into C's
                                                                          padding, its next row or past C

Tutorial 08 (python/tutorials/08-grouped-gemm.py) launches a fixed grid of NUM_SM programs that walk the
problems and their tiles, each taking every NUM_SM-th tile; it assumes sizes that are multiples of the blocks
and fp16. Here it is in its published form with masks added (M rows, N columns and the K tail on the loads,
M and N on the store), the element types given as constexprs, and the autotuner's NUM_SM set by the wrapper.
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import Operation, Requirements, contract

HALF = {torch.float16: (torch.float16, torch.float32), torch.bfloat16: (torch.bfloat16, torch.float32),
        torch.float32: (torch.float32,)}
TL_DTYPES = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}
PROBLEMS = Operation(grouped="problems")
INT32_OFFSETS = Requirements(max_offset=2**31 - 1)  # offs_am * lda and ldc * offs_cm are int32, as published


def _config(m, n, k):  # blocks the interpreter runs fast
    return triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k}, num_stages=1, num_warps=1)


@triton.autotune(configs=[_config(16, 16, 16), _config(16, 32, 16), _config(32, 32, 32)], key=["group_size"])
@triton.jit
def grouped_matmul_kernel(
    # device tensors of the problems' matrices' addresses (int64)
    group_a_ptrs, group_b_ptrs, group_c_ptrs,
    # device tensor of <M, N, K> a problem, (group_size, 3) int32
    group_gemm_sizes,
    # device tensor of <lda, ldb, ldc> a problem, (group_size, 3) int32
    g_lds,
    group_size,
    NUM_SM: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    DTYPE: tl.constexpr, C_DTYPE: tl.constexpr, FIRST_PROBLEM_K: tl.constexpr, N_MASKED_STORE: tl.constexpr,
):
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    if FIRST_PROBLEM_K:  # BUG: K read once, as if the problems shared it
        gk = tl.load(group_gemm_sizes + 2)
    for g in range(group_size):
        # get the gemm size of the current problem
        gm = tl.load(group_gemm_sizes + g * 3)
        gn = tl.load(group_gemm_sizes + g * 3 + 1)
        if not FIRST_PROBLEM_K:
            gk = tl.load(group_gemm_sizes + g * 3 + 2)
        num_m_tiles = tl.cdiv(gm, BLOCK_SIZE_M)
        num_n_tiles = tl.cdiv(gn, BLOCK_SIZE_N)
        num_tiles = num_m_tiles * num_n_tiles
        # iterate through the tiles in the current gemm problem
        while (tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles):
            # pick up a tile from the current gemm problem
            k = gk
            lda = tl.load(g_lds + g * 3)
            ldb = tl.load(g_lds + g * 3 + 1)
            ldc = tl.load(g_lds + g * 3 + 2)
            a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(DTYPE))
            b_ptr = tl.load(group_b_ptrs + g).to(tl.pointer_type(DTYPE))
            c_ptr = tl.load(group_c_ptrs + g).to(tl.pointer_type(C_DTYPE))
            # figure out tile coordinates
            tile_idx_in_gemm = tile_idx - last_problem_end
            tile_m_idx = tile_idx_in_gemm // num_n_tiles
            tile_n_idx = tile_idx_in_gemm % num_n_tiles

            # do regular gemm here
            offs_am = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_bn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            offs_k = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + offs_am[:, None] * lda + offs_k[None, :]
            b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BLOCK_SIZE_K)):
                a = tl.load(a_ptrs, mask=(offs_am[:, None] < gm) & (offs_k[None, :] < k - kk * BLOCK_SIZE_K),
                            other=0.0)
                b = tl.load(b_ptrs, mask=(offs_k[:, None] < k - kk * BLOCK_SIZE_K) & (offs_bn[None, :] < gn),
                            other=0.0)
                accumulator += tl.dot(a, b, input_precision="ieee")  # not tf32: fp32 inputs stay fp32
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * ldb
            c = accumulator.to(C_DTYPE)

            offs_cm = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_cn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            c_ptrs = c_ptr + ldc * offs_cm[:, None] + offs_cn[None, :]
            if N_MASKED_STORE:
                c_mask = (offs_cm[:, None] < gm) & (offs_cn[None, :] < gn)
            else:  # BUG: only the rows masked, the columns past gn written too
                c_mask = offs_cm[:, None] < gm
            tl.store(c_ptrs, c, mask=c_mask)

            # go to the next tile by advancing NUM_SM
            tile_idx += NUM_SM

        # get ready to go to the next gemm problem
        last_problem_end = last_problem_end + num_tiles


def _group_gemm(a, b, c, *, lda_is_k=False, first_problem_k=False, n_masked_store=True):
    assert len(a) == len(b) == len(c), f"{len(a)} A, {len(b)} B and {len(c)} C matrices: one of each a problem"
    group_size = len(a)
    if group_size == 0:
        return
    device, dtype, c_dtype = a[0].device, a[0].dtype, c[0].dtype
    assert dtype in TL_DTYPES, f"A and B of {dtype}: expected one of {', '.join(map(str, TL_DTYPES))}"
    A_addrs, B_addrs, C_addrs, g_sizes, g_lds = [], [], [], [], []
    for i, (A, B, C) in enumerate(zip(a, b, c)):
        assert A.dim() == B.dim() == C.dim() == 2, f"problem {i}: A, B and C must be matrices"
        assert A.shape[1] == B.shape[0], f"problem {i}: A is {tuple(A.shape)}, B {tuple(B.shape)}: K differs"
        assert C.shape == (A.shape[0], B.shape[1]), f"problem {i}: C is {tuple(C.shape)}, expected M x N"
        assert A.dtype == B.dtype == dtype and C.dtype == c_dtype, f"problem {i}: dtypes differ from problem 0's"
        assert A.device == B.device == C.device == device, f"problem {i}: tensors on another device"
        assert all(t.stride(1) == 1 or t.shape[1] <= 1 or not t.numel() for t in (A, B, C)), \
            f"problem {i}: columns must have unit stride"
        M, K = A.shape
        K, N = B.shape
        A_addrs.append(A.data_ptr())
        B_addrs.append(B.data_ptr())
        C_addrs.append(C.data_ptr())
        g_sizes += [M, N, K]
        g_lds += [K if lda_is_k else A.stride(0), B.stride(0), C.stride(0)]  # BUG when lda_is_k: A taken as packed

    # note these are device tensors
    d_a_ptrs = torch.tensor(A_addrs, dtype=torch.int64, device=device)
    d_b_ptrs = torch.tensor(B_addrs, dtype=torch.int64, device=device)
    d_c_ptrs = torch.tensor(C_addrs, dtype=torch.int64, device=device)
    d_g_sizes = torch.tensor(g_sizes, dtype=torch.int32, device=device)
    d_g_lds = torch.tensor(g_lds, dtype=torch.int32, device=device)
    num_sm = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    grouped_matmul_kernel[(num_sm,)](d_a_ptrs, d_b_ptrs, d_c_ptrs, d_g_sizes, d_g_lds, group_size, NUM_SM=num_sm,
                                     DTYPE=TL_DTYPES[dtype], C_DTYPE=TL_DTYPES[c_dtype],
                                     FIRST_PROBLEM_K=first_problem_k, N_MASKED_STORE=n_masked_store)


@contract(dtypes=HALF, blocks=(32, 32, 32), requires=INT32_OFFSETS, operation=PROBLEMS)
def tutorial_08_group_gemm(a, b, c):
    _group_gemm(a, b, c)


@contract(dtypes=HALF, blocks=(32, 32, 32), requires=INT32_OFFSETS, operation=PROBLEMS)
def tutorial_08_group_gemm_lda_is_k(a, b, c):
    _group_gemm(a, b, c, lda_is_k=True)


@contract(dtypes=HALF, blocks=(32, 32, 32), requires=INT32_OFFSETS, operation=PROBLEMS)
def tutorial_08_group_gemm_first_problem_k(a, b, c):
    _group_gemm(a, b, c, first_problem_k=True)


@contract(dtypes=HALF, blocks=(32, 32, 32), requires=INT32_OFFSETS, operation=PROBLEMS)
def tutorial_08_group_gemm_unmasked_n_store(a, b, c):
    _group_gemm(a, b, c, n_masked_store=False)
