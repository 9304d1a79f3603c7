"""Kernel sources the tests write out as users' files, each bug planted with the mutants' declared
edits (gemm_fuzz.kernels.mutants.edited): README's example kernel (tests/readme_kernel.py) and the
same kernel with its loads masked along M and N, which is right."""

from pathlib import Path

from gemm_fuzz.kernels.mutants import Edit, edited

README = (Path(__file__).parent / "readme_kernel.py").read_text()
# the loads masked along M and N too: a right kernel
MASKED = edited(README, (Edit("mask=(k + rk)[None, :] < K, other", "mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other"),
                         Edit("mask=(k + rk)[:, None] < K, other", "mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other")),
                "masked")
