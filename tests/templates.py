"""Kernel sources the tests write out as users' files, each bug planted with the mutants' declared
edits (gemm_fuzz.kernels.mutants.edited):

  TILED    the fixture template (tests/tiled_kernel.py): a right tiled kernel, its contract, `matmul`
           and a LeetGPU-style `solve`
  README   README's example kernel (tests/readme_kernel.py), K masked and M and N not
  MASKED   README's kernel with its loads masked along M and N too: right
"""

from pathlib import Path

from gemm_fuzz.kernels.mutants import Edit, edited

HERE = Path(__file__).parent
TILED = (HERE / "tiled_kernel.py").read_text()
README = (HERE / "readme_kernel.py").read_text()
MASKED = edited(README, (Edit("mask=(k + rk)[None, :] < K, other", "mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other"),
                         Edit("mask=(k + rk)[:, None] < K, other", "mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other"),
                         Edit("  # K is masked; M and N are not (seed 004's pattern)", "")),
                "masked")
