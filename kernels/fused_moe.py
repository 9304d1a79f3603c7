"""A routed mixture-of-experts GEMM in the form of vLLM's and SGLang's fused_moe_kernel: one program a
(block of BM sorted slots, BN columns) tile over moe_align_block_size's metadata (reference/routing.py).
A block's rows are gathered from A by token (slot // top_k), multiplied by its expert's weights, scaled
by the router's weights, and scattered to C by slot; padding entries (the slot count) are masked, a
non-local expert's block (expert id -1) writes zeros, and blocks past num_tokens_post_padded (the
metadata is allocated for the worst case) return at once. Offsets are 64-bit: T * top_k * N and an
expert index times its stride pass 2**31 in real models."""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import registry
from gemm_fuzz.kernels.dtypes import GROUPED_DTYPES
from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.kernels.registry import Requirements, Variant, register

OPERATION = Operation(grouped="routed", block_m="BM", routed_weight=True, expert_parallel=True)


@triton.jit
def fused_moe_kernel(
    a_ptr, b_ptr, c_ptr, topk_weights_ptr, sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr,
    N, K, EM, num_valid_tokens, top_k,
    stride_am, stride_ak, stride_be, stride_bk, stride_bn, stride_cm, stride_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
):
    # 1. which tile: GROUP_M block rows at a time, column-major inside a group (tutorial 03's order)
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(EM, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    # 2. the block's slots: blocks past the ones in use hold padding only
    num_tokens_post_padded = tl.load(num_tokens_post_padded_ptr)
    if pid_m * BM >= num_tokens_post_padded:
        return
    offs_token_id = pid_m * BM + tl.arange(0, BM).to(tl.int64)
    offs_token = tl.load(sorted_token_ids_ptr + offs_token_id).to(tl.int64)
    token_mask = offs_token < num_valid_tokens
    offs_cn = pid_n * BN + tl.arange(0, BN).to(tl.int64)
    c_ptrs = c_ptr + offs_token[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    c_mask = token_mask[:, None] & (offs_cn[None, :] < N)
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    if expert == -1:  # not this rank's expert: its slots' rows are zeros
        tl.store(c_ptrs, tl.zeros((BM, BN), dtype=c_ptr.dtype.element_ty), mask=c_mask)
        return
    # 3. gather A's rows by token, the expert's weights, and accumulate over K
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + (offs_token[:, None] // top_k) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + expert * stride_be + offs_k[:, None] * stride_bk + offs_cn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_cn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    # 4. the router's weight, then C's rows by slot
    weight = tl.load(topk_weights_ptr + offs_token, mask=token_mask, other=0.0)
    acc = acc * weight[:, None]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


CONFIGS = {
    "cpu": (dict(BM=16, BN=16, BK=16, GROUP_M=2, num_warps=1, num_stages=1),
            dict(BM=32, BN=16, BK=32, GROUP_M=1, num_warps=1, num_stages=1)),
    "cuda": (dict(BM=64, BN=64, BK=32, GROUP_M=8, num_warps=4, num_stages=3),
             dict(BM=16, BN=128, BK=64, GROUP_M=1, num_warps=4, num_stages=3)),
}


@registry.launcher("fused_moe")
def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict, *,
           sorted_token_ids: torch.Tensor, expert_ids: torch.Tensor, num_tokens_post_padded: torch.Tensor,
           topk_weights: torch.Tensor, top_k: int) -> None:
    EM = sorted_token_ids.shape[0]
    grid = (triton.cdiv(EM, cfg["BM"]) * triton.cdiv(N, cfg["BN"]),)
    fused_moe_kernel[grid](
        a, b, c, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
        N, K, EM, M * top_k, top_k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), b.stride(2), c.stride(0), c.stride(1),
        BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], GROUP_M=cfg["GROUP_M"], **registry.options(cfg),
    )


register(Variant(name="fused_moe", launch=launch, dtypes=GROUPED_DTYPES, precision="ieee", configs=CONFIGS,
                 origin="vLLM/SGLang fused_moe_kernel: moe_align_block_size metadata, gather by token, scatter by slot",
                 requirements=Requirements(), description="routed MoE, router weights, expert parallelism",
                 operation=OPERATION))
