"""The battery: property tests that run on every built-in variant, or on the kernel given with
--gemm-kernel (the plugin collects this folder then). Each asks for a `target`, an
`agreement_group` or a `corpus_case`, which the plugin parametrizes."""
