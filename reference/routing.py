"""Routed mixture-of-experts GEMM metadata, as a real caller builds it, and its float64 product.

A router sends each of T tokens to `top_k` experts (`topk_ids`, T x top_k, with `topk_weights`). A
routed MoE GEMM (vLLM's and SGLang's fused_moe, Liger's MoE) multiplies each token's row of A by its
experts' weights, one output row per (token, k) slot, slot = token * top_k + k. Its kernel takes the
slots sorted by expert, each expert's run padded to a multiple of BLOCK_M, in vLLM's
`moe_align_block_size` format:

  sorted_token_ids        the slots of expert 0, padded, then expert 1's, ...; a padding entry holds
                          T * top_k (the number of valid slots), which no slot has
  expert_ids              one expert a block of BLOCK_M entries; -1 for an expert that is not local
                          under expert parallelism (its blocks must write zeros)
  num_tokens_post_padded  how many entries of sorted_token_ids are in use (a multiple of BLOCK_M)

sorted_token_ids may be longer than num_tokens_post_padded (callers allocate the worst case,
T * top_k + E * (BLOCK_M - 1), or a shortcut for small batches): entries past it hold padding, and a
kernel must not read past num_tokens_post_padded's blocks of expert_ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Routing:
    topk_ids: np.ndarray  # T x top_k expert ids
    topk_weights: np.ndarray  # T x top_k router weights, float64
    num_experts: int
    block_m: int
    sorted_token_ids: np.ndarray  # int64, padded with `slots`
    expert_ids: np.ndarray  # int64, one a block (-1: a non-local expert)
    num_tokens_post_padded: int
    local: np.ndarray  # num_experts bools: the experts this rank holds

    @property
    def tokens(self) -> int:
        return self.topk_ids.shape[0]

    @property
    def top_k(self) -> int:
        return self.topk_ids.shape[1]

    @property
    def slots(self) -> int:
        """Valid slots, T * top_k: also the value padding entries hold."""
        return self.topk_ids.size


def align(topk_ids, num_experts: int, block_m: int, topk_weights=None, local=None, length: int | None = None
          ) -> Routing:
    """vLLM's moe_align_block_size: the slots sorted by expert (stable: in slot order within an expert),
    each expert's run padded to a multiple of `block_m`; experts with no slot get no block. `local`: the
    experts this rank holds (default all); the others' blocks are labelled -1. `length`: the length of
    sorted_token_ids (default the worst case, T * top_k + E * (block_m - 1))."""
    ids = np.asarray(topk_ids, dtype=np.int64)
    if ids.ndim != 2:
        raise ValueError(f"topk_ids must be T x top_k, got shape {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= num_experts):
        raise ValueError(f"topk_ids must lie in [0, {num_experts}), got [{ids.min()}, {ids.max()}]")
    if block_m < 1:
        raise ValueError(f"block_m must be positive, got {block_m}")
    slots = ids.size
    local = np.ones(num_experts, dtype=bool) if local is None else np.asarray(local, dtype=bool)
    flat = ids.reshape(-1)
    runs, experts = [], []
    for e in range(num_experts):
        mine = np.flatnonzero(flat == e)
        if not mine.size:
            continue
        padded = -(-mine.size // block_m) * block_m
        runs.append(np.concatenate([mine, np.full(padded - mine.size, slots)]))
        experts += [e if local[e] else -1] * (padded // block_m)
    used = np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64)
    worst = slots + num_experts * (block_m - 1)
    length = worst if length is None else length
    if length < used.size:
        raise ValueError(f"length {length} is shorter than the {used.size} entries in use")
    sorted_ids = np.concatenate([used, np.full(length - used.size, slots)]).astype(np.int64)
    blocks = -(-length // block_m)
    expert_ids = np.concatenate([np.asarray(experts, dtype=np.int64),
                                 np.full(blocks - len(experts), -1, dtype=np.int64)])
    weights = (np.ones(ids.shape) if topk_weights is None else np.asarray(topk_weights, dtype=np.float64))
    return Routing(ids, weights, num_experts, block_m, sorted_ids, expert_ids, int(used.size), local)


def product(a: np.ndarray, w: np.ndarray, routing: Routing, weighted: bool = False) -> np.ndarray:
    """The float64 output, one row a slot (T * top_k x N): A[token] @ W[expert] for the slot's expert,
    times its router weight where `weighted`; zeros for a slot of a non-local expert. `w` is E x K x N."""
    a, w = np.asarray(a, dtype=np.float64), np.asarray(w, dtype=np.float64)
    out = np.zeros((routing.slots, w.shape[-1]))
    for slot, expert in enumerate(routing.topk_ids.reshape(-1)):
        if routing.local[expert]:
            row = a[slot // routing.top_k] @ w[expert]
            out[slot] = row * routing.topk_weights.reshape(-1)[slot] if weighted else row
    return out
