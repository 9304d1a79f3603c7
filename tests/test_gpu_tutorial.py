"""Triton's matmul tutorial with its published CUDA autotune list, unchanged, on a GPU: four of its
configurations need more shared memory than an H100 has. The autotuner prunes them; the suite does the
same (properties/model/runnable.py): the battery passes and the coverage report names each with the
reason, instead of failing every example that drew one."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

TUTORIAL = Path(__file__).parent / "tutorial_03.py"


def test_the_tutorials_autotuned_kernel_passes_and_its_oversized_configurations_are_named(pytester, backend):
    result = pytester.runpytest_subprocess("--gemm-kernel", f"{TUTORIAL}:matmul", "--gemm-backend", "cuda",
                                           "-p", "no:cacheprovider", "--hypothesis-profile", "ci", timeout=900)
    out = result.stdout.str()
    assert result.ret == 0, out[-4000:]
    result.stdout.fnmatch_lines(["*GEMM coverage*", "user:tutorial_03.matmul#*-fp16: config * not runnable on "
                                 f"{backend.device_name}: shared memory, required *, hardware limit *"])
