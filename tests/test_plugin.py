"""The pytest plugin as a user meets it: options, header, summary, --gemm-kernel on a right and a
wrong kernel (with its repro script), the LeetGPU signature, and bad input refused clearly."""

import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from templates import TILED

from gemm_fuzz.kernels.mutants import Edit, edited
from gemm_fuzz.properties import plugin
from gemm_fuzz.properties.launch import user_kernel
from gemm_fuzz.properties.run.hypothesis_profiles import CI_EXAMPLES

RIGHT = TILED  # a right kernel, as a user's file
# the bug planted as the mutants are (kernels/mutants): declared edits, each matching once, lines marked
NO_K_MASK = edited(RIGHT, (Edit("& (kk[None, :] < K), other", "& True, other"),
                           Edit("mask=(kk[:, None] < K) & (n", "mask=True & (n")), "no_k_mask")
FAST = ["--gemm-backend", "interpreter", "--gemm-dtype", "fp16", "-p", "no:cacheprovider", "--hypothesis-profile", "ci"]


def _examples(result, target: str) -> int:
    """The examples column of a target's row in the summary table."""
    row = next(line for line in result.stdout.lines if line.startswith(target))
    return int(row.split()[1])


def test_a_right_kernel_passes_the_whole_battery(pytester):
    pytester.makepyfile(my_kernel=RIGHT)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", *FAST, timeout=900)
    # property, relations, agreement; skipped: no past repros yet, and compiled-vs-interpreted needs a GPU
    result.assert_outcomes(passed=3, skipped=2)
    result.stdout.fnmatch_lines(["gemm kernel under test: user:my_kernel.matmul#* (user kernel my_kernel.py:matmul)",
                                 "*GEMM targets*", "user:my_kernel.matmul#*-fp16 * 0 *-*"])
    assert _examples(result, "user:my_kernel.matmul#") >= CI_EXAMPLES
    assert result.ret == 0


def test_a_wrong_kernel_fails_with_its_shrunk_case_and_a_repro_script(pytester):
    pytester.makepyfile(my_kernel=NO_K_MASK)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "-x", *FAST, timeout=900)
    assert result.ret == 1
    # distinct failures are reported apart: the plain layout reads past A, a broadcast one (stride 0)
    # stays in bounds but sums the wrong values
    out = result.stdout.str()
    assert "out-of-bounds access: user:my_kernel.matmul#" in out
    assert "on 1x1x1 fp16->fp16 A:row B:row C:row ones seed=0" in out
    assert "out-of-bounds load in kernel '_kernel'" in out and "repro: python " in out
    scripts = sorted((pytester.path / "repros").glob("user_my_kernel_matmul_*-fp16-*.py"))
    # one repro per reported failure (the summary of distinct bugs names them again, further indented)
    assert scripts and sum(line.startswith("  repro: python ") for line in result.stdout.lines) == len(scripts)
    for script in scripts:  # each replays on its own and fails while the bug is there
        replay = subprocess.run([sys.executable, str(script), "--backend", "interpreter"], cwd=pytester.path,
                                capture_output=True, text=True, timeout=600)
        assert replay.returncode == 1 and "FAIL: " in replay.stdout, replay.stdout + replay.stderr
    # the next run replays them first, and they still fail
    again = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "-x", *FAST, timeout=900)
    again.stdout.fnmatch_lines(["FAILED *test_replays_a_past_failure[[]user_my_kernel_matmul_*-fp16-*", "*1 failed*"])


def test_a_kernel_computing_fp32_in_tf32_disagrees_and_nothing_crashes(pytester):
    """tl.dot's default precision on fp32 is tf32, which the default (ieee) contract does not promise: the
    agreement test names the kernel against an ieee peer. It agrees with the tf32 peers, which have the
    most support: the suite once chose one of those to show it beside, found no element where they
    differ, raised an IndexError in its worker, and blamed the kernel for a crash."""
    pytester.makepyfile(my_kernel=RIGHT.replace(', input_precision="ieee"', ""))
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "-k", "agree",
                                           *FAST[:2], "--gemm-dtype", "fp32", *FAST[4:], timeout=900)
    out = result.stdout.str()
    result.assert_outcomes(failed=1, skipped=1)  # skipped: no past repro to replay
    assert "value out of bound: user:my_kernel.matmul#" in out and "differ from the majority" in out
    assert "crashed" not in out and "internal error" not in out and "IndexError" not in out


def test_a_launch_with_missing_arguments_fails_once_at_the_users_line(pytester):
    """The launch forgets C's strides: Triton's argument binding raises TypeError deep in the standard
    library (inspect.py); the failure is placed at the user's launch, one bug, never an interpreter
    limitation."""
    wrong = edited(RIGHT, (Edit("*c.stride(), BM=16, BN=16, BK=16)", "BM=16, BN=16, BK=16)"),), "no_c_strides")
    pytester.makepyfile(my_kernel=wrong)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", *FAST, timeout=900)
    out = " ".join(result.stdout.str().split())
    # the launch statement's first line, as Python names a call spanning several
    launch = "_kernel[(triton.cdiv(M, 16), triton.cdiv(N"
    written = (pytester.path / "my_kernel.py").read_text().splitlines()
    line = next(i for i, text in enumerate(written, 1) if launch in text)
    missing = "TypeError: _kernel() missing 2 required positional arguments: 'scm' and 'scn'"
    assert f"{missing} at my_kernel.py:{line}" in out
    assert "GEMM failures: 1 distinct bug" in out and "interpreter limitation" not in out and "inspect.py" not in out


def test_a_leetgpu_solve_function_is_tested_too(pytester):
    pytester.makepyfile(my_kernel=RIGHT)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:solve", "--gemm-kernel-signature",
                                           "leetgpu", *FAST, timeout=900)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert _examples(result, "user:my_kernel.solve#") >= CI_EXAMPLES


SYNTAX_ERROR = "import triton\n\ndef matmul(a, b, c)\n    pass\n"
RAISES_AT_IMPORT = "import triton\nLIMIT = 1 / 0\n\ndef matmul(a, b, c):\n    pass\n"


@pytest.mark.parametrize("args, message", [
    (["--gemm-kernel", "missing.py:f"], "*no file */missing.py"),
    (["--gemm-kernel", "broken.py:matmul"], "*broken.py:3: syntax error: expected ':'"),
    (["--gemm-kernel", "raising.py:matmul"], "*importing */raising.py:2 raised ZeroDivisionError: division by zero"),
    (["--hypothesis-profile", "nosuch"], "*--hypothesis-profile nosuch: no such profile; the suite's are dev, ci*"),
    (["--gemm-kernel", "my_kernel.py:nope"], "*has no 'nope'; it defines *matmul*solve*"),
    (["--gemm-kernel", "my_kernel.py:_kernel"], "--gemm-kernel 'my_kernel.py:_kernel': _kernel is a @triton.jit "
                                                "kernel; pass the Python function that launches it, called as "
                                                "FUNC(a, b, c) (in my_kernel.py: matmul, solve)"),
    (["--gemm-kernel", "my_kernel.py"], "*expected PATH.py:FUNC or module:FUNC"),
    (["--gemm-kernel", "my_kernel.py:solve"], "*solve(a, b, c, M, N, K) cannot be called as FUNC(a, b, c) (the plain*"),
    (["--gemm-dtype", "fp64"], "*--gemm-dtype: unknown dtype 'fp64'; expected one of fp16, bf16, fp32, tf32*"),
    (["--gemm-variant", "nothing*"], "*--gemm-variant nothing* matches no variant; registered: *tiled*"),
    (["--gemm-sanitize"], "*--gemm-sanitize runs compute-sanitizer on compiled kernels: it needs the cuda*"),
    (["--gemm-racecheck"], "*--gemm-racecheck runs compute-sanitizer on compiled kernels: it needs the cuda*"),
    (["--gemm-sanitize", "--gemm-racecheck"], "*memcheck and racecheck tools: choose one per run*"),
    (["--gemm-timeout", "0"], "*--gemm-timeout must be positive*"),
])
def test_bad_options_are_refused_with_what_was_expected(pytester, args, message):
    """One line saying what was wrong and what is expected: never INTERNALERROR or a traceback."""
    pytester.makepyfile(my_kernel=RIGHT, broken=SYNTAX_ERROR, raising=RAISES_AT_IMPORT)
    result = pytester.runpytest_subprocess("--gemm-backend", "interpreter", *args, timeout=300)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert "Traceback" not in result.stderr.str() and len(result.stderr.lines) <= 3, result.stderr.str()


@pytest.mark.interpreter
def test_asking_for_a_gpu_on_a_machine_without_one_is_a_usage_error(pytester, monkeypatch):
    for name in ("TRITON_INTERPRET", "GEMM_BACKEND"):  # a fresh shell, as a user's
        monkeypatch.delenv(name, raising=False)
    result = pytester.runpytest_subprocess("--gemm-backend", "cuda", "-p", "no:cacheprovider", timeout=300)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --gemm-backend cuda: backend 'cuda' was asked for but torch sees no CUDA GPU"])
    assert len(result.stderr.lines) <= 3 and "Traceback" not in result.stderr.str()


def test_the_plugin_works_without_xdist(pytester):
    pytester.makepyfile(my_kernel=RIGHT)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "-p", "no:xdist", "-k",
                                           "test_matches", *FAST, timeout=900)
    assert result.ret == 0 and "INTERNALERROR" not in result.stdout.str(), result.stdout.str()[-2000:]


def test_two_kernels_of_one_name_never_share_a_repro_and_the_corpus_replays_only_the_kernel_under_test(pytester):
    """A failure of one `matmul` leaves a repro named for its file and content; a later run of another
    `matmul` (and the project's own run) leaves that script out, saying so in one line; a run of the
    same kernel, edited, replays it."""
    pytester.makepyfile(wrong=NO_K_MASK, right=RIGHT)
    failing = pytester.runpytest_subprocess("--gemm-kernel", "wrong.py:matmul", "-k", "test_matches", *FAST,
                                            timeout=900)
    assert failing.ret == 1
    scripts = list((pytester.path / "repros").glob("user_wrong_matmul_*-fp16-*.py"))
    assert len(scripts) == 1
    other = pytester.runpytest_subprocess("--gemm-kernel", "right.py:matmul", "-k", "corpus", *FAST, timeout=900)
    assert other.ret == 0
    other.stdout.fnmatch_lines(["gemm corpus: 0 repro script(s) in * replayed first; 1 left out (other kernels*"])
    (pytester.path / "wrong.py").write_text(RIGHT)  # the kernel, fixed
    fixed = pytester.runpytest_subprocess("--gemm-kernel", "wrong.py:matmul", "-k", "corpus", *FAST, timeout=900)
    fixed.stdout.fnmatch_lines(["gemm corpus: 1 repro script(s) in * replayed first; 0 left out*", "*1 passed*"])


def test_attributes_the_contract_replaced_are_refused_with_the_contract_to_write(tmp_path):
    path = tmp_path / "old_style.py"
    path.write_text("def matmul(a, b, c):\n    pass\n\nmatmul.block_shape = (32, 32, 16)\n")
    with pytest.raises(user_kernel.KernelSpecError,
                       match=r"matmul.block_shape is no longer read; declare it in the contract: "
                             r"@gemm_fuzz.kernels.contract\(blocks=\(BM, BN, BK\)\)"):
        user_kernel.load(f"{path}:matmul")


def test_the_plugin_is_inert_in_other_projects(pytester):
    pytester.makepyfile(test_other="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=1)
    assert "gemm backend" not in result.stdout.str() and "GEMM targets" not in result.stdout.str()


def test_the_markers_are_registered(pytester):
    result = pytester.runpytest_subprocess("--markers", "-p", "no:cacheprovider", timeout=300)
    result.stdout.fnmatch_lines(["@pytest.mark.gpu: needs a CUDA GPU*", "@pytest.mark.interpreter: *",
                                 "@pytest.mark.slow: *", "@pytest.mark.large: *"])


@pytest.mark.parametrize("worker, visible, expected", [
    ("gw0", "0,1,2,3", "0"), ("gw5", "0,1,2,3", "1"), ("gw2", "3,7", "3"), ("", "0,1", None), ("gw1", "", None),
])
def test_each_xdist_worker_gets_its_own_gpu(worker, visible, expected):
    environ = {"PYTEST_XDIST_WORKER": worker, "CUDA_VISIBLE_DEVICES": visible}
    assert plugin.assign_gpu_for_xdist_worker(environ) == expected
    if expected is not None:
        assert environ["CUDA_VISIBLE_DEVICES"] == expected


@pytest.mark.parametrize("kernel, backend, gpus, expected", [
    ("k.py:matmul", "cuda", ["0"], 0),  # one GPU: the battery runs in this process
    ("k.py:matmul", "auto", ["0", "1", "2", "3"], 4),  # one xdist worker per GPU
    ("k.py:matmul", "interpreter", ["0"], None),  # xdist's own choice: a worker per core
    ("k.py:matmul", "auto", [], None),  # no GPU: the interpreter
    (None, "cuda", ["0"], None),  # the built-in variants: xdist's choice
])
def test_n_auto_gives_a_users_kernel_one_process_per_gpu(kernel, backend, gpus, expected, monkeypatch):
    monkeypatch.setattr(plugin, "visible_gpus", lambda: gpus)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    option = types.SimpleNamespace(gemm_kernel=kernel, gemm_backend=backend, gemm_dtype=None, gemm_variant=None)
    config = types.SimpleNamespace(option=option, known_args_namespace=option, getini=lambda name: True)
    assert plugin.pytest_xdist_auto_num_workers(config) == expected


def test_a_module_spec_from_its_own_folder_says_how_to_name_it(pytester):
    """`pytest` does not put the current folder on Python's path, so `my_kernel:matmul` cannot be imported from
    there: the error says to pass the path or put the folder on the path, and `python -m pytest` then works."""
    command = Path(sys.executable).with_name("pytest")  # the console script, as a user types it
    if not command.exists():
        command = Path(shutil.which("pytest") or "pytest")
    pytester.makepyfile(my_kernel=RIGHT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([str(command), "--gemm-kernel", "my_kernel:matmul", *FAST], cwd=pytester.path, env=env,
                            capture_output=True, text=True, timeout=900)
    err = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0 and "Traceback" not in err, err
    assert ("my_kernel.py is in this folder, which is not on Python's import path: pass it as a path "
            "(my_kernel.py:matmul), or put the folder on it (PYTHONPATH=., or `python -m pytest`") in err, err


def test_the_short_summary_names_the_failure_kind_at_80_columns(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    pytester.makepyfile(my_kernel=NO_K_MASK)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", *FAST, "-k", "reference",
                                           "-n", "2", timeout=900)
    failed = [line for line in result.stdout.lines if line.startswith("FAILED")]
    assert failed and all(line.startswith("FAILED (out-of-bounds access) ") for line in failed), result.stdout.lines
