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
def test_the_header_names_exactly_the_gaps_the_raw_interpreter_has(backend):
    """In a process without the fixes, each probe runs the interpreter as installed: the fixes applied here
    (the header's emulations) are exactly the probes that fail there, so no fix is dead code and no gap goes
    unfixed. On Triton 3.9 the known gaps are among them."""
    code = ("import os; os.environ['TRITON_INTERPRET'] = '1'\nfrom gemm_fuzz.properties.interpreter import fixes\n"
            "print(','.join(f.name for f in fixes.FIXES if not f.faithful()))")
    raw = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert raw.returncode == 0, raw.stderr[-2000:]
    failing = set(filter(None, raw.stdout.strip().split(",")))
    assert failing == {e.split(":", 1)[0] for e in backend.emulations}
    if triton.__version__.startswith("3.9"):
        assert {"loop indices", "boolean ops", "fp8 narrowing", "bf16 ops", "undefined lanes", "bf16 tl.dot"} <= failing


@pytest.mark.gpu
@pytest.mark.parametrize("fix", [f for f in fixes.FIXES if f.on_gpu], ids=lambda fix: fix.name)
def test_the_gpu_does_what_each_emulation_does(backend, fix):
    """Each probe run compiled: the GPU computes what the interpreter, fixed, computes."""
    assert fix.faithful(backend.device), f"{fix.name}: {fix.note}"












def test_round_fp32_toward_zero_keeps_overflow_finite():
    x = np.array([65520.0, 1e6, -1e6, 2049.0, 2051.0, np.inf], dtype=np.float32)
    assert fixes.round_fp32(x, torch.float16, toward_zero=True).tolist() == [65504, 65504, -65504, 2048, 2050, np.inf]
    assert fixes.round_fp32(x, torch.float16, toward_zero=False).tolist() == [np.inf, np.inf, -np.inf, 2048, 2052,
                                                                              np.inf]






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
