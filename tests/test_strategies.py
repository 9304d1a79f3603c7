"""The strategies shrink to plain cases and aim at each variant's block boundaries."""

from hypothesis import find, given, settings
from hypothesis import strategies as st

from gemm_fuzz import kernels
from gemm_fuzz.properties.model import strategies
from gemm_fuzz.properties.model.cases import ROW


def test_boundaries_surround_every_block_size():
    assert strategies.boundary_values({16, 32}, 72) == [1, 8, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65]
    assert strategies.boundary_values({128}, 100) == [1, 64]


def test_every_axis_reaches_four_tiles_and_a_ragged_edge_of_its_largest_block():
    assert strategies.reach({16, 32}, 72) == 129 and strategies.reach({8}, 72) == 72
    assert strategies.reach({128, 256}, 72) == 1025 and strategies.reach({4096}, 72) == strategies.REACH_LIMIT


def test_the_simplest_case_is_one_by_one_by_one_ones_row_major():
    tiled = kernels.get("tiled")
    simplest = find(strategies.gemm_cases(tiled, "fp16", device_type="cpu", max_dim=72), lambda case: True,
                    settings=settings(database=None))
    assert (simplest.M, simplest.N, simplest.K) == (1, 1, 1)
    assert (simplest.a, simplest.b, simplest.c) == (ROW, ROW, ROW)
    assert (simplest.profile, simplest.seed, simplest.out_dtype) == ("ones", 0, "fp16")


def test_a_failure_that_needs_a_ragged_k_shrinks_to_the_smallest_such_k():
    tiled = kernels.get("tiled")
    found = find(strategies.gemm_cases(tiled, "fp16", device_type="cpu", max_dim=72),
                 lambda case: case.K > 16 and case.K % 16 != 0, settings=settings(database=None, max_examples=2000))
    assert (found.M, found.N, found.K) == (1, 1, 17)


@given(st.data())
def test_cases_stay_within_the_backend_limit(data):
    tiled = kernels.get("tiled")
    case = data.draw(strategies.gemm_cases(tiled, "bf16", device_type="cpu", max_dim=40))
    shapes = tiled.block_shapes("cpu")
    limits = [strategies.reach({s[axis] for s in shapes}, 40) for axis in range(3)]
    assert 1 <= min(case.M, case.N, case.K) and all(d <= top for d, top in zip((case.M, case.N, case.K), limits))
    assert case.dtype == "bf16" and case.out_dtype in ("bf16", "fp32")


def test_some_peers_keeps_the_focus_draws_distinct_others_and_shrinks_to_the_first():
    """As the agreement battery calls it, with what it keeps (the focus, the variant whose case it is)
    among the variants: the kept ones and `count` distinct others, in the variants' order; all the
    variants when there are no more than `count` others."""
    variants = kernels.variants()
    focus = kernels.get("tiled")
    drawn = find(strategies.some_peers(variants, [focus], 3), lambda peers: True)
    assert [v.name for v in drawn] == [v.name for v in variants if v is focus or v in
                                       [w for w in variants if w is not focus][:3]]

    @settings(max_examples=60, database=None)
    @given(keep=st.lists(st.sampled_from(variants), min_size=1, max_size=2), count=st.integers(0, len(variants)),
           data=st.data())
    def check(keep, count, data):
        names = [v.name for v in data.draw(strategies.some_peers(variants, keep, count))]
        kept = {v.name for v in keep}
        assert len(names) == len(set(names)) and kept <= set(names)
        assert len(names) == min(len(kept) + count, len(variants))
        assert names == [v.name for v in variants if v.name in names]  # in the variants' order

    check()
    few = [v for v in variants if v is focus or v in variants[:3]]  # the focus and 3 others: all of them
    assert find(strategies.some_peers(few, [focus], 3), lambda peers: True) == few
    assert find(strategies.some_peers(few[:3], [few[1]], 3), lambda peers: True) == few[:3]
