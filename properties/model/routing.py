"""Router outputs to draw routed MoE cases from (reference/routing.py builds the kernel's metadata from them):
which experts each token goes to, aimed at where MoE kernels break. Distributions:

  uniform   each token's top_k distinct experts at random
  one       every token to the same experts (the others get no token, the busy ones many blocks)
  skewed    most tokens to a few experts (Zipf-like), some experts empty
  all       top_k = E: every token to every expert
  repeated  a token may name one expert twice (routers that sample with replacement)
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

DISTRIBUTIONS = ("uniform", "one", "skewed", "all", "repeated")


def topk_ids(rng: np.random.Generator, tokens: int, experts: int, top_k: int, distribution: str) -> np.ndarray:
    """T x top_k expert ids drawn by `distribution` (top_k <= experts; "all" takes top_k = experts)."""
    if distribution == "all":
        return np.tile(np.arange(experts), (tokens, 1))
    if distribution == "repeated":
        return rng.integers(0, experts, size=(tokens, top_k))
    if distribution == "one":
        chosen = rng.permutation(experts)[:top_k]
        return np.tile(chosen, (tokens, 1))
    popularity = np.ones(experts) if distribution == "uniform" else 1.0 / np.arange(1, experts + 1) ** 2
    popularity = popularity[rng.permutation(experts)]
    ids = np.zeros((tokens, top_k), dtype=np.int64)
    for t in range(tokens):
        ids[t] = rng.choice(experts, size=top_k, replace=False, p=popularity / popularity.sum())
    return ids


def weights(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Router weights (a softmax's top_k probabilities) in (0, 1], exactly fp32 values, as kernels read them."""
    return rng.uniform(0.0, 1.0, size=shape).astype(np.float32).astype(np.float64)


@st.composite
def router_outputs(draw, max_tokens: int = 40, max_experts: int = 9):
    """(topk_ids, topk_weights, experts, local): a router's choices, their weights, and the experts this
    rank holds under expert parallelism (all of them, or a contiguous share)."""
    experts = draw(st.integers(1, max_experts))
    distribution = draw(st.sampled_from(DISTRIBUTIONS))
    top_k = experts if distribution == "all" else draw(st.integers(1, min(experts, 4)))
    tokens = draw(st.integers(0, max_tokens))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    ids = topk_ids(rng, tokens, experts, top_k, distribution)
    drawn = weights(rng, ids.shape)
    local = np.ones(experts, dtype=bool)
    if draw(st.booleans()):  # expert parallelism: this rank holds experts [lo, hi)
        lo = draw(st.integers(0, experts - 1))
        hi = draw(st.integers(lo + 1, experts))
        local[:] = False
        local[lo:hi] = True
    return ids, drawn, experts, local
