"""The specialization pool a GPU run draws its cases from (properties/model/specialization.py): the
same in every run, plain first, every class of every component in one round, each entry followed by
its transpose; and a case fitted into an entry specializes a launch exactly as the entry's own case
does, so one compilation per entry serves every example."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_fuzz import kernels
from gemm_fuzz.properties.model import specialization, strategies
from gemm_fuzz.properties.model.specialization import Classes

# no requirements, a contiguous A (the tutorial's), tensor descriptors (alignment), one with many configurations
VARIANTS = ["tiled", "autotuned", "descriptor", "persistent"]


@pytest.mark.parametrize("name", VARIANTS)
def test_the_pool_is_fixed_plain_first_and_one_round_reaches_every_class(name):
    variant = kernels.get(name)
    size = specialization.pool_size(variant, "fp16")
    pool = specialization.pool(variant, "fp16", size)
    assert pool == specialization.pool(variant, "fp16", size) and len(pool) == size
    assert pool[0] == Classes()  # M = N = K = 1, row-major, natural strides, aligned, the defaults
    assert all(pool[i + 1] == pool[i].transposed() for i in range(1, size, 2))
    configs = len(variant.configs_for("cuda", variant_dtype := next(iter(variant.dtypes))))
    assert {e.config for e in pool} == set(range(configs))
    assert {e.out for e in pool} == set(range(len(variant.dtypes[variant_dtype])))
    for axis in range(3):
        assert {e.dims[axis] for e in pool} == set(specialization.INTEGER_CLASSES)
    for operand in "abc":
        found = [getattr(e, operand) for e in pool]
        assert {o.order for o in found} == set(specialization.ORDERS)
        assert {o.lead for o in found} == set(specialization.LEAD)
        assert {o.aligned for o in found} == {True, False}
        assert {o.inner for o in found} == set(specialization.INNER if operand != "c" else specialization.INNER[:2])


@pytest.mark.parametrize("name", VARIANTS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_fitted_case_specializes_as_its_entry_does(name, data):
    variant = kernels.get(name)
    dtype = data.draw(st.sampled_from(["fp16", "fp32"]).filter(lambda d: any(str(t).endswith(
        {"fp16": "float16", "fp32": "float32"}[d]) for t in variant.dtypes)))
    size = specialization.pool_size(variant, dtype)
    representatives = strategies.pool_cases(variant, dtype, device_type="cuda", max_dim=600)
    index = data.draw(st.integers(0, size - 1))
    drawn = data.draw(strategies.gemm_cases(variant, dtype, device_type="cpu", max_dim=600))
    drawn = dataclasses.replace(drawn, order=0)
    shapes = variant.block_shapes("cuda")
    tops = tuple(strategies.reach({s[i] for s in shapes}, 600) for i in range(3))
    fitted = specialization.fit(drawn, specialization.pool(variant, dtype, size)[index], variant, "cuda", tops)
    assert specialization.signature(fitted) == specialization.signature(representatives[index])


def test_gpu_cases_reuse_a_few_specializations_where_cpu_cases_spread():
    tiled = kernels.get("tiled")
    seen, cpu = set(), []

    @settings(max_examples=200, database=None, derandomize=True)
    @given(strategies.gemm_cases(tiled, "fp16", device_type="cuda", max_dim=600))
    def gpu(case):
        seen.add(specialization.signature(case))

    gpu()
    assert len(seen) <= specialization.pool_size(tiled, "fp16")

    @settings(max_examples=200, database=None, derandomize=True)
    @given(strategies.gemm_cases(tiled, "fp16", device_type="cpu", max_dim=72))
    def interpreter(case):
        cpu.append(specialization.signature(case))

    interpreter()
    assert len(set(cpu)) > 2 * specialization.pool_size(tiled, "fp16")
