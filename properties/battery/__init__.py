"""The battery: the property tests the plugin runs on every built-in variant, or on the kernel given
with --gemm-kernel (the plugin collects this folder then). One test per check (properties/checks),
each asking for the subject the plugin parametrizes it with: a `target`, an `agreement_group` or a
`corpus_case`."""
