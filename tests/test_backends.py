"""The backend is chosen once, before the kernels load; the interpreter's known gaps are probed,
fixed and re-probed; on a GPU the emulation constants are checked against the hardware."""

import subprocess
import sys

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels.mode import BackendError
from gemm_fuzz.properties.interpreter import fixes
from gemm_fuzz.properties.launch import backends


def test_asking_for_the_other_backend_after_loading_is_an_error(backend):
    other = "cuda" if backend.name == "interpreter" else "interpreter"
    with pytest.raises(BackendError, match=f"already loaded for the '{backend.name}' backend, so '{other}'"):
        backends.activate(other)
    with pytest.raises(BackendError, match="unknown backend 'gpu'; expected one of auto, interpreter, cuda"):
        backends.activate("gpu")


def test_header_names_backend_device_and_versions(backend):
    text = "\n".join(backend.header())
    assert f"gemm backend: {backend.name} on {backend.device_name}" in text
    assert f"torch {torch.__version__}" in text and "triton " in text


@pytest.mark.interpreter
def test_the_header_says_the_interpreters_emulations_in_one_line_and_each_with_verbose(backend):
    short, verbose = backend.header(), backend.header(verbose=True)
    assert len(short) == 3, short
    assert all(e.split(":", 1)[0] in short[2] for e in backend.emulations) and "fast path " in short[2]
    assert [f"gemm interpreter emulation: {e}" for e in backend.emulations] == [
        line for line in verbose if line.startswith("gemm interpreter emulation:")]


def test_importing_triton_before_choosing_the_interpreter_is_refused():
    code = "import triton, os; os.environ['GEMM_BACKEND'] = 'interpreter'\nimport gemm_fuzz.kernels"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PATH": "", "GEMM_BACKEND": "interpreter"})
    assert run.returncode != 0
    assert "triton was imported before the interpreter backend was chosen" in run.stderr


@pytest.mark.interpreter
@pytest.mark.parametrize("fix", fixes.FIXES, ids=lambda fix: fix.name)
def test_interpreter_probes_pass_after_the_fixes(backend, fix):
    assert fix.faithful(), f"{fix.name}: {fix.note}"


@pytest.mark.interpreter
def test_the_raw_interpreter_fails_the_probes_of_the_gaps_it_has():
    """In a process without the fixes, each probe that Triton 3.9's interpreter is known to fail fails (the fix is
    no dead code); on another Triton the probes say what they say."""
    code = ("import os; os.environ['TRITON_INTERPRET'] = '1'\nfrom gemm_fuzz.properties.interpreter import fixes\n"
            "print(','.join(f.name for f in fixes.FIXES if not f.faithful()))")
    raw = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert raw.returncode == 0, raw.stderr[-2000:]
    failing = set(raw.stdout.strip().split(","))
    if triton.__version__.startswith("3.9"):
        assert {"loop indices", "boolean ops", "fp8 narrowing", "bf16 ops", "undefined lanes"} <= failing, failing


@pytest.mark.interpreter
def test_the_bf16_dot_probe_sees_the_interpreters_own_product_fail(backend):
    """In a process without the fixes, the probe runs the interpreter's raw bf16 tl.dot (which multiplied
    the raw uint16 patterns, triton-lang/triton#11584): the header names the emulation exactly where the
    raw product is wrong."""
    code = ("import os; os.environ['TRITON_INTERPRET'] = '1'\nfrom gemm_fuzz.properties.interpreter import fixes\n"
            "print('exact' if fixes.bf16_dot_is_exact() else 'wrong')")
    raw = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert raw.stdout.strip() in ("exact", "wrong"), raw.stderr[-2000:]
    assert (raw.stdout.strip() == "wrong") == any("#11584" in e for e in backend.emulations)


@pytest.mark.interpreter
def test_the_bf16_widening_probe_sees_the_interpreters_own_conversion_fail(backend):
    """The interpreter's raw bf16 -> fp32 conversion turns the subnormal 8 * 2**-133 into another number;
    the probe must have found that and the header name the fix, exactly where the raw conversion is wrong."""
    import triton.language as tl
    from triton.runtime import interpreter

    bits = np.array([8], dtype=np.uint16)  # a subnormal bf16
    raw = interpreter._convert_float(bits, tl.bfloat16, tl.float32, None).view(np.float32)[0]
    exact = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).float().item()
    assert (raw != exact) == any(e.startswith("bf16 widening") for e in backend.emulations)


@pytest.mark.gpu
def test_the_gpu_rounds_tf32_operands_the_way_the_interpreter_emulates(backend):
    assert fixes.tf32_dot_rounds(backend.device) == fixes.TF32_ROUNDING


@pytest.mark.gpu
def test_the_gpu_adds_fp16_and_bf16_atomically_as_the_interpreter_emulates(backend):
    assert fixes.half_atomic_add_is_faithful(backend.device)


@pytest.mark.gpu
def test_the_gpu_rounds_fp32_to_bf16_to_nearest_even(backend):
    assert fixes.bf16_cast_rounds_to_nearest_even(backend.device)


@pytest.mark.gpu
def test_the_gpu_widens_every_fp8_pattern_exactly_in_a_dot(backend):
    assert fixes.fp8_widening_is_exact(backend.device)


@pytest.mark.gpu
def test_the_gpu_rounds_explicit_downcasts_the_way_the_interpreter_emulates(backend):
    assert fixes.explicit_rounding_is_faithful(backend.device)


@pytest.mark.gpu
def test_the_gpu_widens_every_bf16_pattern_exactly(backend):
    assert fixes.bf16_widening_is_exact(backend.device)


@pytest.mark.gpu
def test_the_gpu_converts_integers_to_bf16_by_value_rounding_to_nearest_even(backend):
    assert fixes.integer_bf16_casts_are_faithful(backend.device)


@pytest.mark.interpreter
def test_the_integer_bf16_probe_sees_the_interpreters_own_cast_fail(backend):
    """In a process without the fixes the probe runs the interpreter's raw int32 -> bf16 cast (which gave
    1 the bit pattern 0x0001): the header names the fix exactly where the raw cast is wrong."""
    code = ("import os; os.environ['TRITON_INTERPRET'] = '1'\nfrom gemm_fuzz.properties.interpreter import fixes\n"
            "print('exact' if fixes.integer_bf16_casts_are_faithful() else 'wrong')")
    raw = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert raw.stdout.strip() in ("exact", "wrong"), raw.stderr[-2000:]
    assert (raw.stdout.strip() == "wrong") == any(e.startswith("int <-> bf16") for e in backend.emulations)


def test_round_fp32_toward_zero_keeps_overflow_finite():
    x = np.array([65520.0, 1e6, -1e6, 2049.0, 2051.0, np.inf], dtype=np.float32)
    assert fixes.round_fp32(x, torch.float16, toward_zero=True).tolist() == [65504, 65504, -65504, 2048, 2050, np.inf]
    assert fixes.round_fp32(x, torch.float16, toward_zero=False).tolist() == [np.inf, np.inf, -np.inf, 2048, 2052,
                                                                              np.inf]


@pytest.mark.gpu
def test_the_gpu_narrows_to_fp8_the_way_the_interpreter_emulates(backend):
    assert fixes.fp8_narrowing_is_faithful(backend.device)


@pytest.mark.gpu
def test_the_gpu_gives_loop_indices_32_bit_scalars(backend):
    assert fixes.loop_indices_are_scalars(backend.device)


@pytest.mark.gpu
def test_the_gpu_combines_boolean_operators_on_blocks_elementwise(backend):
    assert fixes.boolean_ops_are_elementwise(backend.device)


@pytest.mark.gpu
def test_the_gpu_multiplies_bf16_exactly(backend):
    assert fixes.bf16_dot_is_exact(backend.device)


def test_round_to_tf32_modes():
    import numpy as np

    x = np.array([1 + 2**-11, 1 + 2**-11 + 2**-12, 1 + 2**-10 + 2**-11, np.inf, np.nan], dtype=np.float32)
    assert list(fixes.round_to_tf32(x, "rz")[:3]) == [1, 1, 1 + 2**-10]
    assert list(fixes.round_to_tf32(x, "rna")[:3]) == [1 + 2**-10, 1 + 2**-10, 1 + 2**-9]
    assert list(fixes.round_to_tf32(x, "rne")[:3]) == [1, 1 + 2**-10, 1 + 2**-9]
    assert np.isinf(fixes.round_to_tf32(x)[3]) and np.isnan(fixes.round_to_tf32(x)[4])


@triton.jit
def _scalar_masked_load(x_ptr, out_ptr):
    g = tl.program_id(0)
    tl.store(out_ptr + g, tl.load(x_ptr + g - 1, mask=g > 0, other=0))  # program 0 reads other, not x[-1]


def test_a_scalar_masked_load_with_other_zero_reads_zero(backend):
    """Triton's semantic drops a falsy `other` (`other.handle if other else None`): in the interpreter a scalar
    0 is falsy, so the masked-off lane must still read 0, not the suite's poison for an `other` never given."""
    buf = torch.tensor([-7, 5, 6], dtype=torch.int32, device=backend.device)
    out = torch.full((2,), 99, dtype=torch.int32, device=backend.device)
    _scalar_masked_load[(2,)](buf[1:], out)
    assert out.tolist() == [0, 5]
