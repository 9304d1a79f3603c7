"""Metamorphic relations for every variant and dtype (properties/checks/metamorphic.py): transposition,
scaling by a power of two, zero padding of K and splitting K."""

from gemm_fuzz.properties import checks


def test_metamorphic_relations(target, gemm):
    gemm.check(checks.METAMORPHIC, target)
