"""User kernels of the operation family, in the styles people publish (tests/family_kernels.py): Triton's
tutorial with its fused leaky_relu, Inductor's addmm template, a fused SwiGLU over an interleaved weight and
a bmm on a 3-D grid. Each declares what it computes (`contract(operation=Operation(...))`) and passes the
battery, while its wrong twin is caught, shrunk to the kind of case that shows its bug, and the repro script
the failing run writes fails again on its own, with the same kind of failure."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from user_runs import battery

from gemm_fuzz.properties.launch import user_kernel

KERNELS = Path(__file__).parent / "family_kernels.py"


def _user(name: str):
    return user_kernel.load(f"{KERNELS}:{name}")


def test_each_contract_becomes_a_variant_computing_its_operation():
    tutorial, addmm, swiglu, bmm = (_user(f) for f in ("tutorial_leaky_relu", "inductor_addmm", "fused_swiglu",
                                                        "bmm_3d_grid"))
    # the autotuner's list is the tutorial's configuration space
    assert [(c["BM"], c["BN"], c["BK"], c["GROUP_SIZE_M"]) for c in tutorial.configs_for("cpu")] == [
        (16, 32, 16, 8), (32, 16, 32, 2), (16, 16, 16, 1)]
    assert tutorial.operation.describe() == "C = leaky_relu(A @ B), slope 0.01"
    assert tutorial.requirements.contiguous == ("a",) and dict(tutorial.dtypes) == {torch.float16: (torch.float16,)}
    assert addmm.operation.describe() == "C = alpha * (A @ B) + beta * bias[n]"
    assert addmm.operation.keywords() == {"bias": "input", "alpha": "alpha", "beta": "beta"}
    assert (swiglu.operation.gated, swiglu.operation.activation) == ("interleaved", "silu")
    assert swiglu.operation.keywords() == {"pre": "pre"} and swiglu.operation.n_columns(5) == 10  # B is K x 2N
    assert bmm.operation.batched and [c["BM"] for c in bmm.configs_for("cpu")] == [16, 32]


# --- the battery ---------------------------------------------------------------------------------------------

# right kernel -> whether a built-in kernel computes its operation (an agreement peer)
RIGHT = {"tutorial_leaky_relu": False, "inductor_addmm": False, "fused_swiglu": False, "bmm_3d_grid": True}


@pytest.mark.parametrize("func", RIGHT)
def test_a_right_family_kernel_passes_the_battery(pytester, func):
    result = battery(pytester, f"{KERNELS}:{func}", "-rs")
    dtypes = len(_user(func).dtypes)
    # per dtype: the property and the relations pass, and agreement where a built-in computes the same thing;
    # skipped: no past repros, compiled-vs-interpreted (GPU only) per dtype, and agreement without a peer
    if RIGHT[func]:
        result.assert_outcomes(passed=3 * dtypes, skipped=1 + dtypes)
    else:
        result.assert_outcomes(passed=2 * dtypes, skipped=1 + 2 * dtypes)
        result.stdout.fnmatch_lines(["SKIPPED * no built-in kernel computes * agreement needs a peer"])


# the wrong twin -> the kind of its shrunk failure, the shrunk case, and what the replayed script says of it
SHRUNK = {
    # K past the first configuration's BLOCK_SIZE_K = 16 and a column whose first partial sum is negative
    "tutorial_leaky_relu_in_k_loop": ("value out of bound", "1x4x17 fp16->fp16 A:row B:row C:row small_ints seed=0",
                                      "C[[]0, 1] = 140.75 where the float64 reference is -10.66*"),
    # fused after the cast: 0.01 * -61 in fp16 lands one fp16 step past -0.61 rounded once (1.18 x the bound)
    "tutorial_leaky_relu_after_cast": ("value out of bound", "1x7x12 fp16->fp16 A:row B:row C:row small_ints seed=0",
                                       "C[[]0, 4] = -0.610351562 where the float64 reference is -0.61; *"),
    # two columns read through a bias of stride 0 (torch.addmm's input expanded from one value)
    "inductor_addmm_contiguous_bias": ("out-of-bounds access",
                                       "1x2x1 fp16->fp16 A:row B:row C:row ones seed=0 bias:stride0@1",
                                       "out-of-bounds load in kernel 'addmm_kernel' at family_kernels.py:*, * operand "
                                       "in_ptr0, * in_ptr0 has shape (2,), strides (0,), *"),
    # W's columns two elements apart: the up column is read between gate 0 and gate 1
    "fused_swiglu_unscaled_up_column": ("out-of-bounds access", "1x1x1 fp16->fp16 A:row B:row/step2 C:row ones seed=0",
                                        "out-of-bounds load in kernel 'swiglu_kernel' at family_kernels.py:*, * "
                                        "operand w_ptr, * (inside the span but between elements, *"),
    "bmm_batch_on_grid_axis_2": ("grid past CUDA's limits",
                                 "1x1x1 batch=65536 fp16->fp16 A:row B:row C:row ones seed=0",
                                 "the launch's grid (1, 1, 65536) has 65536 programs along axis 2; CUDA allows at most "
                                 "65535 there*"),
    # the second problem of a B whose problems are not packed (each is K x N with an inner stride of 2)
    "bmm_batch_stride_from_shape": ("out-of-bounds access",
                                    "1x1x2 batch=2 fp16->fp16 A:row B:row/step2 C:row ones seed=0",
                                    "out-of-bounds load in kernel 'bmm_kernel' at family_kernels.py:*, program id "
                                    "(1, 0, 0): operand b_ptr, *"),
}


@pytest.mark.parametrize("func", SHRUNK)
def test_a_wrong_family_kernel_is_caught_shrunk_and_replayed_by_its_script(pytester, func):
    kind, case, detail = SHRUNK[func]
    repros = pytester.path / "repros"
    result = battery(pytester, f"{KERNELS}:{func}", "-k", "test_matches", "--gemm-dtype", "fp16", "--gemm-repros",
                     str(repros))
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"{kind}: user:* on {case}", f"  repro: python {repros}/*.py"])
    scripts = sorted(repros.glob("*.py"))
    assert len(scripts) == 1, scripts
    replay = subprocess.run([sys.executable, str(scripts[0])], capture_output=True, text=True, timeout=600, cwd="/")
    assert replay.returncode == 1, replay.stdout + replay.stderr
    pytest.LineMatcher(replay.stdout.splitlines()).fnmatch_lines([
        f"user:* on {case}: against the float64 reference *", f"FAIL: {kind}", detail])
