"""A crashing or hanging kernel costs one example, never the run (properties/run/isolation.py), and
pytest-timeout ends a hanging test on either backend while the run goes on."""

import textwrap
from pathlib import Path

import pytest

from properties.model.cases import GemmCase
from properties.run import isolation

FAULTS = Path(__file__).parent / "fault_kernels.py"
CASE = GemmCase(4, 4, 4, "fp16", "fp16")


def _worker(backend, func: str) -> isolation.Worker:
    return isolation.Worker(backend.name, kernel_spec=f"{FAULTS}:{func}")


def test_a_crash_costs_one_example_and_the_next_runs_in_a_fresh_worker(backend):
    w = _worker(backend, "abort")
    try:
        with pytest.raises(isolation.WorkerCrashed,
                           match=r"variant 'user:abort' on 4x4x4 .*: the worker process died \(exit code -6\)"):
            w.run("user:abort", CASE, timeout=300)
        assert w.run("tiled", CASE, timeout=300).status == "pass"
        assert w.restarts == 1
    finally:
        w.close()


def test_a_hanging_kernel_times_out_and_the_next_example_runs(backend):
    w = _worker(backend, "hang")
    try:
        w.run("tiled", CASE, timeout=300)  # started and warm: the limit below measures the hang alone
        with pytest.raises(isolation.KernelTimeout, match=r"variant 'user:hang' on 4x4x4 .*no result after 15 s"):
            w.run("user:hang", CASE, timeout=15)
        assert w.run("tiled", CASE, timeout=300).status == "pass"
    finally:
        w.close()


@pytest.mark.interpreter
def test_a_far_store_is_refused_in_the_interpreter_and_costs_nothing_else(backend):
    w = _worker(backend, "far_out_of_bounds_write")
    try:
        answer = w.run("user:far_out_of_bounds_write", CASE, timeout=300)
        assert answer.status == "fail" and answer.payload["error"] == "OutOfBoundsAccess"
        assert "store" in answer.payload["message"] and w.restarts == 0
    finally:
        w.close()


@pytest.mark.gpu
def test_an_illegal_address_on_the_gpu_costs_one_example(backend):
    w = _worker(backend, "far_out_of_bounds_write")
    try:
        try:
            answer = w.run("user:far_out_of_bounds_write", CASE, timeout=300)
            assert answer.status == "fail" and answer.payload["context_lost"], answer.payload
            assert "illegal" in answer.payload["message"].lower()
        except isolation.WorkerCrashed as e:  # the driver may also take the process down
            assert "died" in str(e)
        assert w.run("tiled", CASE, timeout=300).status == "pass"  # a fresh process, a fresh context
        assert w.restarts == 1
    finally:
        w.close()


def test_pytest_timeout_fails_a_hanging_test_and_the_run_goes_on(pytester, backend):
    pytester.makepyfile(test_hang=textwrap.dedent(f"""
        import sys
        import pytest
        import torch
        sys.path.insert(0, {str(FAULTS.parent)!r})
        import fault_kernels

        @pytest.mark.timeout(15)
        def test_hangs():
            c = torch.zeros(1, device={str(backend.device)!r})
            fault_kernels.hang(None, None, c)
            if c.is_cuda:
                torch.cuda.synchronize()

        def test_after_it():
            assert True
    """))
    args = ["--gemm-backend", backend.name, "-p", "no:cacheprovider"]
    if backend.name == "cuda":
        # a hung GPU kernel blocks its process inside the driver, where no signal is handled: the
        # thread method ends that xdist worker, and xdist reports the test and starts another
        args += ["-n", "2", "--timeout-method", "thread"]
    result = pytester.runpytest_subprocess(*args, timeout=600)
    result.assert_outcomes(passed=1, failed=1)
