"""Cross-variant agreement (properties/checks/agreement.py): one case, every variant that takes it,
bit-equal where exact and within the sum of their bounds elsewhere; with --gemm-kernel, the user's
kernel judged by the built-in variants."""

from gemm_fuzz.properties import checks


def test_variants_agree(agreement_group, gemm):
    gemm.check(checks.AGREEMENT, agreement_group)
