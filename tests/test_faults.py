"""A kernel that hangs or crashes costs its own example, never the run (properties/run/isolation.py,
properties/run/runner.py): the worker is replaced, a hang or a crash is never run twice, and the
shrinking after it is bounded, so a failing test ends within twice the per-example timeout while the
others run on."""

import contextlib
import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from user_runs import junit_cases

from gemm_fuzz.properties.checks.example import Example
from gemm_fuzz.properties.judge.failures import (
    Crashed,
    GemmFailure,
    NotBitExact,
    OutOfBoundsAccess,
    SuiteError,
    TimedOut,
)
from gemm_fuzz.properties.launch import user_kernel
from gemm_fuzz.properties.model.cases import GemmCase
from gemm_fuzz.properties.run import isolation
from gemm_fuzz.properties.run.runner import Runner, RunSettings

FAULTS = Path(__file__).parent / "fault_kernels.py"
CASE = GemmCase(4, 4, 4, "fp16", "fp16")


def _kernel(func: str) -> tuple[str, dict]:
    variant = user_kernel.load(f"{FAULTS}:{func}")
    ref = user_kernel.loaded(variant.name)[1]
    return variant.name, ref.to_dict()


@contextlib.contextmanager
def _worker(backend, func: str | None = None):
    """(the variant's name, a worker for `func`'s kernel in fault_kernels.py), the worker closed after; without
    `func`, a worker for the built-in variants."""
    name, kernel = _kernel(func) if func else ("", None)
    w = isolation.Worker(backend.name, kernel=kernel)
    try:
        yield name, w
    finally:
        w.close()


def _example(name: str, case: GemmCase = CASE) -> dict:
    return Example("reference", name, case).to_dict()


def test_a_crash_costs_one_example_and_the_next_runs_in_a_fresh_worker(backend):
    with _worker(backend, "abort") as (name, w):
        with pytest.raises(Crashed, match=r"the worker process died \(killed by signal SIGABRT\)"):
            w.run(_example(name), timeout=300)
        assert w.run(_example("tiled"), timeout=300).payload["status"] == "pass"
        assert w.restarts == 1


def test_a_worker_that_cannot_start_says_why_once_and_is_not_started_again(backend, tmp_path, monkeypatch):
    """A broken environment (here a kernel file that is gone) fails every example at once with the
    worker's own words, instead of paying a worker's start-up (seconds) for each one Hypothesis tries."""
    gone = tmp_path / "gone.py"
    gone.write_text("def matmul(a, b, c):\n    pass\n")
    variant = user_kernel.load(f"{gone}:matmul")
    w = isolation.Worker(backend.name, kernel={"spec": user_kernel.loaded(variant.name)[1].spec, "signature": None})
    gone.unlink()
    with pytest.raises(RuntimeError, match="worker could not start: cannot load the kernel .*no file"):
        w.run(_example(variant.name), timeout=300)
    started = []
    monkeypatch.setattr(isolation.subprocess, "Popen", lambda *a, **k: started.append(a))
    with pytest.raises(RuntimeError, match="worker could not start: cannot load the kernel .*no file"):
        w.run(_example(variant.name), timeout=300)
    assert not started


def test_a_worker_started_early_is_adopted_by_the_first_runner_that_needs_it(backend, monkeypatch):
    """The plugin starts the worker before pytest imports torch (isolation.prestart): the runner's first
    example runs in that process, which the runner then owns; one for another backend is left alone."""
    other = "cuda" if backend.name == "interpreter" else "interpreter"
    monkeypatch.setattr(isolation, "_PRESTARTED", {})  # not those the plugin started for this process
    isolation.prestart(backend.name, None)
    isolation.prestart(other, None)
    early = {w.backend: w.process for w in isolation._PRESTARTED[(json.dumps(None), None, False)]}
    with Runner(RunSettings(backend=backend.name, mode="worker"), backend) as runner:
        runner.run_once(Example("reference", "tiled", CASE))
        assert runner.worker(backend.name).process is early[backend.name]
        assert [w.backend for w in isolation._PRESTARTED[(json.dumps(None), None, False)]] == [other]
    assert early[backend.name].poll() is not None  # closed with the runner
    leftover = isolation._PRESTARTED.pop((json.dumps(None), None, False))[0]
    leftover.close(kill=True)


def test_a_kept_worker_serves_the_next_run_with_the_kernel_as_saved(backend, monkeypatch, tmp_path):
    """Watch mode (isolation.keep_workers): a runner done with its worker parks it, and the next run's
    runner adopts the same process, which imports the user's kernel again when a file of its tree (here
    one the kernel imports) was saved changed."""
    monkeypatch.setattr(isolation, "_PRESTARTED", {})
    monkeypatch.setattr(isolation, "_KEEP", True)
    (tmp_path / "scale.py").write_text("FACTOR = 2.0\n")
    (tmp_path / "scaled.py").write_text("import scale\n\n\ndef matmul(a, b, c):\n"
                                         "    c.copy_((a.float() @ b.float() * scale.FACTOR).to(c.dtype))\n")
    variant = user_kernel.load(f"{tmp_path / 'scaled.py'}:matmul")
    settings = RunSettings(backend=backend.name, mode="worker", kernel=user_kernel.loaded(variant.name)[1].to_dict())
    example = Example("reference", variant.name, GemmCase(4, 4, 4, "fp16", "fp16"))  # ones
    first = None
    try:
        with Runner(settings, backend) as runner:
            with pytest.raises(NotBitExact):  # 8 where exactly 4 is right
                runner.run_once(example)
            first = runner.worker(backend.name).process
        assert first.poll() is None  # parked, not ended
        (tmp_path / "scale.py").write_text("FACTOR = 1.0\n")
        with Runner(settings, backend) as runner:
            runner.run_once(example)  # passes: the worker imported scale.py again
            assert runner.worker(backend.name).process is first
    finally:
        for parked in isolation._PRESTARTED.pop(isolation.Worker(backend.name, kernel=settings.kernel)._identity(), []):
            parked.close(kill=True)
        if first is not None:
            first.kill()


def test_an_output_run_in_a_worker_brings_back_c_and_where_its_time_went(backend):
    """What the compiled-against-interpreted check compares: C's values from the interpreter's worker,
    with the phases of that run (the GPU run's report counts them)."""
    with Runner(RunSettings(backend=backend.name, mode="worker"), backend) as runner:
        observed = runner.output("interpreter", Example("output", "tiled", CASE), None, timeout=300)
    assert observed.values.shape == (CASE.M, CASE.N) and observed.values.dtype.name == "float64"
    assert observed.phases.get("launch", 0) > 0 and observed.phases.get("materialize", 0) > 0


def test_a_hanging_kernel_times_out_and_the_next_example_runs(backend):
    with _worker(backend, "loop_forever") as (name, w):
        w.run(_example("tiled"), timeout=300)  # started and warm: the limit below measures the hang alone
        with pytest.raises(TimedOut, match=r"no result after 15 s"):
            w.run(_example(name), timeout=15)
        assert w.run(_example("tiled"), timeout=300).payload["status"] == "pass"


@pytest.mark.interpreter
def test_a_far_store_is_refused_in_the_interpreter_and_costs_nothing_else(backend):
    with _worker(backend, "far_out_of_bounds_write") as (name, w):
        with pytest.raises(OutOfBoundsAccess, match="out-of-bounds store"):
            isolation.verdict(w.run(_example(name), timeout=300), None)
        assert w.restarts == 0


@pytest.mark.gpu
def test_an_illegal_address_on_the_gpu_costs_one_example(backend):
    with _worker(backend, "far_out_of_bounds_write") as (name, w):
        with pytest.raises(Crashed, match="(?i)illegal|died"):
            isolation.verdict(w.run(_example(name), timeout=300), None)
        assert w.run(_example("tiled"), timeout=300).payload["status"] == "pass"  # a fresh process, a fresh context
        assert w.restarts == 1


def test_a_hanging_example_is_not_retried_and_shrinking_it_is_bounded(backend):
    """Hypothesis shrinks a failure by running smaller cases; each would hang again. The runner runs
    a hang once, gives the shrinking half a timeout in all, and reports the case that hung."""
    name, kernel = _kernel("loop_forever")
    timeout = 12.0
    with Runner(RunSettings(backend=backend.name, mode="worker", timeout=timeout, kernel=kernel), backend) as runner:
        prop = runner.property("hang")
        runner.run_once(Example("reference", "tiled", CASE))  # the worker is up: the clock below times the hang

        @settings(max_examples=20, database=None, derandomize=True)
        @given(m=st.integers(1, 40))
        def search(m):
            prop.run(Example("reference", name, GemmCase(m, 4, 4, "fp16", "fp16")))

        start = time.monotonic()
        with pytest.raises(TimedOut):
            search()
        elapsed = time.monotonic() - start
    assert elapsed <= 2 * timeout, f"a hanging example cost {elapsed:.1f} s, more than twice the {timeout} s timeout"
    assert prop.example is not None and prop.failure is not None


def _durations(report: Path) -> dict[str, tuple[str, float]]:
    return {name: (kind, seconds) for _, name, kind, seconds in junit_cases(report)}


@pytest.mark.parametrize("func, xdist, timeout", [("loop_forever", False, 16), ("abort", False, 10),
                                                  ("null_pointer", False, 10), ("loop_forever", True, 16),
                                                  ("hang", True, 16)])
def test_a_faulting_kernel_fails_only_its_own_test_within_twice_the_timeout(func, xdist, timeout, pytester, backend):
    """The kernel faults on fp16 and is right on bf16: under pytest (and pytest -n 2) the fp16 test
    fails within twice the timeout, with its case and a repro, and the bf16 test still runs and passes.
    A kernel spinning on a flag nobody raises hangs a GPU, but the interpreter's program scheduler
    sees every program waiting and reports a deadlock at once."""
    report = pytester.path / "report.xml"
    args = ["--gemm-kernel", f"{FAULTS}:{func}", "--gemm-backend", backend.name, "--gemm-dtype", "fp16,bf16",
            "-k", "test_matches_float64_reference", "--gemm-timeout", str(timeout), "-p", "no:cacheprovider",
            "--hypothesis-profile", "ci", f"--junitxml={report}"] + (["-n", "2"] if xdist else [])
    result = pytester.runpytest_subprocess(*args, timeout=600)
    outcomes = {name.split("[")[1].rsplit("-", 1)[1].rstrip("]"): value for name, value in _durations(report).items()}
    assert outcomes["fp16"][0] == "failure" and outcomes["bf16"][0] == "passed", outcomes
    assert outcomes["fp16"][1] <= 2 * timeout, f"the faulting test took {outcomes['fp16'][1]:.1f} s"
    out = result.stdout.str()
    kind = {"loop_forever": "timed out", "abort": "crashed", "null_pointer": "crashed",
            "hang": "deadlock" if backend.interpreted else "timed out"}[func]
    assert f"{kind}:" in out and "repro: python " in out, out[-3000:]


def test_the_suites_own_error_in_a_worker_is_an_internal_error_and_the_worker_lives_on(backend):
    """An exception in the suite's own code (here resolving an agreement peer that does not exist) is an
    internal error of the suite, with its traceback and where to report it: not a crash of the kernel,
    and the worker that reported it takes the next example."""
    with _worker(backend) as (_, w):
        bad = Example("agreement", "", CASE, (("peers", ("tiled", "no_such_variant")),)).to_dict()
        answer = w.run(bad, timeout=300)
        assert answer.payload["status"] == "fail"
        failure = GemmFailure.from_dict(answer.payload["failure"])
        assert isinstance(failure, SuiteError) and failure.blame == "suite" and not failure.kernel_fault
        assert "KeyError" in failure.message and "Traceback (most recent call last)" in failure.message
        assert "not a verdict on the kernel; please report it" in failure.message
        assert w.run(_example("tiled"), timeout=300).payload["status"] == "pass"
        assert w.restarts == 0


def test_the_suites_own_error_fails_its_test_once_and_is_never_run_again(backend):
    """In this process too; a test that met one reports it for every later example without running it."""
    bad = Example("agreement", "", CASE, (("peers", ("tiled", "no_such_variant")),))
    with Runner(RunSettings(backend=backend.name), backend) as runner:
        prop = runner.property("agreement-fp16")
        with pytest.raises(SuiteError, match="KeyError"):
            prop.run(bad)
        with pytest.raises(SuiteError, match="KeyError"):
            prop.run(Example("reference", "tiled", CASE))  # not run: the test already failed this way
        assert prop.ran == 1
        assert runner.stats.targets["agreement-fp16"].internal == 1
        assert runner.stats.targets["agreement-fp16"].failures == 0  # not counted against a kernel


def test_a_race_caught_in_a_worker_keeps_its_kind_in_a_parent_that_never_imported_the_detector(backend):
    """The worker's verdict is decoded by a parent that has imported nothing of the interpreter's race
    detector (as pytest's and the campaign's parents are): it is still a data race, with its fields."""
    if not backend.interpreted:
        pytest.skip("the race detector runs in the interpreter")
    script = f"""
import sys
from gemm_fuzz.properties.checks.example import Example
from gemm_fuzz.properties.judge.failures import GemmFailure
from gemm_fuzz.properties.launch import user_kernel
from gemm_fuzz.properties.model.cases import GemmCase
from gemm_fuzz.properties.run import isolation
variant = user_kernel.load({str(Path(__file__).parent / "race_kernels.py")!r} + ":split_k_plain_partials")
worker = isolation.Worker("interpreter", kernel=user_kernel.loaded(variant.name)[1].to_dict())
try:
    case = GemmCase(20, 17, 70, "fp16", "fp16", profile="small_ints", seed=3)
    isolation.verdict(worker.run(Example("reference", variant.name, case).to_dict(), timeout=300), None)
except GemmFailure as failure:
    print(type(failure).__name__, "|", failure.kind, "|", failure.operand,
          "| races imported:", "gemm_fuzz.properties.interpreter.races" in sys.modules)
finally:
    worker.close()
"""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.stdout.strip() == "DataRace | data race | ws_ptr | races imported: False", done.stdout + done.stderr


def test_every_failure_kind_is_defined_where_decoding_finds_it():
    """No module of the suite defines a kind of its own: a process decodes a failure with failures.py alone.
    Read from the source (no module imported, so it holds on every backend)."""
    import ast

    from gemm_fuzz.properties.judge import failures

    root = Path(failures.__file__).resolve()
    kinds = set(GemmFailure._registry)
    outside = []
    for top in ("kernels", "properties", "reference"):
        for path in (root.parents[2] / top).rglob("*.py"):
            if path == root:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and any(getattr(b, "id", getattr(b, "attr", None)) in kinds
                                                          for b in node.bases):
                    outside.append(f"{path.name}: {node.name}")
    assert not outside, outside


def test_a_failure_of_unknown_kind_is_an_internal_error_never_a_plain_failure():
    failure = GemmFailure.from_dict({"type": "NoSuchKind", "message": "x happened", "fields": {}})
    assert isinstance(failure, SuiteError) and failure.blame == "suite"
    assert "'NoSuchKind'" in failure.message and "x happened" in failure.message


def test_an_example_run_in_this_process_gets_a_workers_deadline(backend):
    """Built-ins run in this process in the interpreter: a launcher looping forever there times out after the
    per-example timeout (of CPU time), as it does in a worker, instead of stalling the run."""
    if not backend.interpreted:
        pytest.skip("examples run in this process only in the interpreter")
    name, _ = _kernel("loop_forever")
    variant = user_kernel.loaded(name)[0]
    start = time.monotonic()
    with Runner(RunSettings(backend=backend.name, mode="process", timeout=3), backend) as runner:
        with pytest.raises(TimedOut, match="no result after 3 s of CPU time in this process"):
            runner.run_once(Example("reference", name, CASE), variant)
        assert runner.run_once(Example("reference", "tiled", CASE)).exact  # the process goes on
    assert time.monotonic() - start < 60


def test_simplifying_a_failure_in_this_process_ends_promptly(backend):
    """The swiglu mutant reading B's rows backwards, searched and simplified in this process as the battery
    does: its out-of-bounds access chains back to itself through the interpreter's error, and the
    programs-together path once walked that chain forever (no verdict in 300 s). Interpreter only: on a GPU
    the stray read shows as a wrong value, and nothing runs together."""
    if not backend.interpreted:
        pytest.skip("the programs-together path is the interpreter's")
    from gemm_fuzz.kernels import mutants
    from gemm_fuzz.properties import checks
    from gemm_fuzz.properties.launch.targets import Target

    variant = mutants.variant("swiglu_b_rows_backwards")
    start = time.monotonic()
    with Runner(RunSettings(backend=backend.name, mode="process", timeout=30), backend) as runner:
        prop = runner.property("swiglu_b_rows_backwards-fp16")
        with pytest.raises(OutOfBoundsAccess):
            prop.check(checks.REFERENCE, Target(variant, "fp16"))
    assert time.monotonic() - start < 20  # (a hang would be cut at the 30 s deadline, and fail here)
    assert (prop.example.case.M, prop.example.case.N, prop.example.case.K) == (1, 1, 2)


def test_an_exception_chain_that_loops_is_walked_once():
    from gemm_fuzz.properties.judge.failures import chain

    first, second = ValueError("first"), KeyError("second")
    first.__cause__, second.__context__ = second, first
    assert list(chain(first)) == [first, second]
