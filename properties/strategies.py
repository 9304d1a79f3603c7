"""Hypothesis strategies for GemmCases, aimed at each variant's own block boundaries.

Every choice is ordered simplest first, because Hypothesis shrinks integers toward their lower
bound, `sampled_from` toward its first element and `one_of` toward its first branch: a failure
shrinks to the plainest case that still fails.
"""

from __future__ import annotations

from hypothesis import strategies as st

from kernels.registry import Variant
from properties import profiles
from properties.cases import COL, ROW, GemmCase, Layout
from reference.formats import by_name, name_of


def boundary_values(blocks: set[int], max_dim: int) -> list[int]:
    """Sizes where masks live: 1, and b-1, b, b+1, 2b+1 around every block size b."""
    values = {1}
    for b in blocks:
        values.update({b - 1, b, b + 1, 2 * b + 1})
    return sorted(v for v in values if 1 <= v <= max_dim)


def dims(blocks: set[int], max_dim: int) -> st.SearchStrategy[int]:
    """Any size from 1 to max_dim, with extra weight on the block boundaries."""
    return st.one_of(st.integers(1, max_dim), st.sampled_from(boundary_values(blocks, max_dim)))


def layouts(variant: Variant, operand: str) -> st.SearchStrategy[Layout]:
    """Row-major first, then column-major (unless the variant needs this operand row-major)."""
    req = variant.requirements
    if operand == "c" or operand in req.row_major_only or req.unit_inner_stride:
        return st.just(ROW)
    return st.sampled_from([ROW, COL])


def output_dtypes(variant: Variant, dtype: str) -> st.SearchStrategy[str]:
    """C's dtype: the variant's default for this input first, then any other it accepts."""
    return st.sampled_from([name_of(d) for d in variant.dtypes[by_name(dtype).dtype]])


@st.composite
def gemm_cases(draw, variant: Variant, dtype: str, *, device_type: str, max_dim: int,
               value_profiles: tuple[str, ...] = profiles.PROFILES) -> GemmCase:
    """GemmCases `variant` accepts, for input dtype `dtype` on a backend with tensors on `device_type`."""
    shapes = variant.block_shapes(device_type)
    m = draw(dims({s[0] for s in shapes}, max_dim))
    n = draw(dims({s[1] for s in shapes}, max_dim))
    k = draw(dims({s[2] for s in shapes}, max_dim))
    return GemmCase(
        M=m,
        N=n,
        K=k,
        dtype=dtype,
        out_dtype=draw(output_dtypes(variant, dtype)),
        a=draw(layouts(variant, "a")),
        b=draw(layouts(variant, "b")),
        c=draw(layouts(variant, "c")),
        profile=draw(st.sampled_from(value_profiles)),
        seed=draw(st.integers(0, 2**16)),
    )
