"""Router outputs for routed MoE cases (properties/model/grouped.py aligns them into the kernel's metadata):
which experts each token goes to, aimed at where MoE kernels break. Distributions:

  uniform   each token's top_k distinct experts at random
  one       every token to the same experts (the others get no token, the busy ones many blocks)
  skewed    most tokens to a few experts (Zipf-like), some experts empty
  all       top_k = E: every token to every expert
  repeated  a token may name one expert twice (routers that sample with replacement)
"""

from __future__ import annotations

import numpy as np

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
