"""Routed MoE metadata (reference/routing.py) as vLLM's moe_align_block_size builds it, from router outputs
of every shape the strategies draw (properties/model/routing.py): every valid slot in exactly one block of its
expert, padding marked by the slot count, experts in order, non-local experts' blocks labelled -1; and a
fused_moe kernel's loop over those blocks, written in numpy, computes the reference product."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_fuzz.properties.model.routing import DISTRIBUTIONS, topk_ids, weights
from gemm_fuzz.reference import routing


def _fused_moe_loop(a, w, r: routing.Routing, weighted: bool) -> np.ndarray:
    """What a fused_moe kernel computes, block by block: the rows its block's entries name, times its
    expert's weights; padding entries skipped; a non-local expert's block writes zeros."""
    out = np.full((r.slots, w.shape[-1]), np.nan)
    for block in range(r.num_tokens_post_padded // r.block_m):
        entries = r.sorted_token_ids[block * r.block_m:(block + 1) * r.block_m]
        valid = entries[entries < r.slots]
        expert = r.expert_ids[block]
        for slot in valid:
            if expert == -1:
                out[slot] = 0.0
                continue
            row = a[slot // r.top_k] @ w[expert]
            out[slot] = row * r.topk_weights.reshape(-1)[slot] if weighted else row
    return out


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


@settings(max_examples=150, deadline=None, database=None)
@given(router_outputs(), st.sampled_from([1, 4, 16]), st.integers(0, 8), st.booleans())
def test_aligned_metadata_is_what_a_fused_moe_kernel_expects(drawn, block_m, slack, weighted):
    ids, weights, experts, local = drawn
    worst = ids.size + experts * (block_m - 1)
    r = routing.align(ids, experts, block_m, weights, local, length=worst + slack * block_m)
    used = r.sorted_token_ids[:r.num_tokens_post_padded]
    assert r.num_tokens_post_padded % block_m == 0
    assert sorted(used[used < r.slots].tolist()) == list(range(r.slots))  # each valid slot exactly once
    assert (r.sorted_token_ids[r.num_tokens_post_padded:] == r.slots).all()  # padding past the end
    assert len(r.expert_ids) == -(-len(r.sorted_token_ids) // block_m)
    flat = ids.reshape(-1)
    previous = -1
    for block in range(r.num_tokens_post_padded // block_m):
        entries = used[block * block_m:(block + 1) * block_m]
        owners = set(flat[entries[entries < r.slots]].tolist())
        assert len(owners) == 1, "a block holds one expert's slots, at least one"
        (owner,) = owners
        assert owner >= previous  # experts in order
        previous = owner
        assert r.expert_ids[block] == (owner if local[owner] else -1)
    rng = np.random.default_rng(1)
    a, w = rng.normal(size=(ids.shape[0], 5)), rng.normal(size=(experts, 5, 3))
    np.testing.assert_array_equal(_fused_moe_loop(a, w, r, weighted), routing.product(a, w, r, weighted))


def test_an_expert_with_no_token_gets_no_block_and_padding_holds_the_slot_count():
    r = routing.align([[2, 0], [2, 2]], num_experts=4, block_m=2, length=10)
    assert r.sorted_token_ids.tolist() == [1, 4, 0, 2, 3, 4, 4, 4, 4, 4]
    assert r.expert_ids.tolist() == [0, 2, 2, -1, -1] and r.num_tokens_post_padded == 6


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_each_distribution_draws_valid_expert_ids(distribution):
    ids = topk_ids(np.random.default_rng(3), 20, 6, 6 if distribution == "all" else 2, distribution)
    assert ids.shape == (20, 6 if distribution == "all" else 2) and ids.min() >= 0 and ids.max() < 6
    distinct = all(len(set(row)) == len(row) for row in ids.tolist())
    assert distinct or distribution == "repeated"
    if distribution == "one":
        assert len(set(ids.reshape(-1).tolist())) == 2


def test_align_refuses_ids_out_of_range_and_metadata_too_short():
    with pytest.raises(ValueError, match=r"topk_ids must lie in \[0, 3\)"):
        routing.align([[3]], num_experts=3, block_m=4)
    with pytest.raises(ValueError, match="length 2 is shorter than the 4 entries in use"):
        routing.align([[0], [0], [0]], num_experts=1, block_m=4, length=2)
