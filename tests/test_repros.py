"""A repro script replays exactly what found its failure, through the same runner, from any
directory: a failure only the sanitizer sees still fails, a relation's failure fails as that
relation, a hang replays in a worker with its timeout; it passes once the bug is gone."""

import hashlib
import subprocess
import sys
import textwrap

import pytest
from templates import TILED

from gemm_fuzz.kernels import mutants
from gemm_fuzz.kernels.mutants import Edit, edited
from gemm_fuzz.properties.checks.example import Example
from gemm_fuzz.properties.judge.failures import GemmFailure, TimedOut
from gemm_fuzz.properties.launch import user_kernel
from gemm_fuzz.properties.model.cases import GemmCase
from gemm_fuzz.properties.report import repros
from gemm_fuzz.properties.run.runner import Runner, RunSettings


def _replay(path, *args, cwd="/"):
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=600, cwd=cwd)


def _failure(settings, backend, example, variant=None) -> GemmFailure:
    with Runner(settings, backend) as runner, pytest.raises(GemmFailure) as found:
        runner.run_once(example, variant)
    return found.value


def _kernel(path) -> dict:
    ref = user_kernel.loaded(user_kernel.load(f"{path}:matmul").name)[1]
    return ref.to_dict()


@pytest.mark.interpreter
def test_a_failure_only_the_sanitizer_sees_replays_as_a_failure(backend, tmp_path):
    # grouped_k_mask_only computes C right and reads rows of A that do not exist
    example = Example("reference", "grouped_k_mask_only", GemmCase(17, 1, 1, "fp16", "fp16"))
    settings = RunSettings(backend=backend.name)
    failure = _failure(settings, backend, example, mutants.get("grouped_k_mask_only").variant)
    path = repros.write(tmp_path / "repros", example, settings, failure)
    replay = _replay(path)  # from another directory
    assert replay.returncode == 1 and "out-of-bounds load" in replay.stdout, replay.stdout + replay.stderr


RIGHT_UNLESS_A_IS_COLUMN_MAJOR = textwrap.dedent("""
    import torch

    def matmul(a, b, c):
        c.copy_((a.double() @ b.double()).to(c.dtype))
        if a.stride(0) == 1 and a.shape[0] > 1 and a.shape[1] > 1:
            c[0, 0] += 1  # a bug only a column-major A shows: the transposed problem's A is B^T
""")


def test_a_relation_failure_replays_as_that_relation_until_the_kernel_is_fixed(backend, tmp_path):
    source = tmp_path / "mine.py"
    source.write_text(RIGHT_UNLESS_A_IS_COLUMN_MAJOR)
    kernel = _kernel(source)
    name = user_kernel.load(f"{source}:matmul").name
    example = Example("metamorphic", name, GemmCase(3, 4, 5, "fp16", "fp16"),
                      (("transpose", True), ("scale", 1), ("pad", 1), ("split", 2)))
    settings = RunSettings(backend=backend.name, mode="worker", timeout=120, kernel=kernel)
    failure = _failure(settings, backend, example)
    assert "the relation 'transpose'" in failure.message
    path = repros.write(tmp_path / "repros", example, settings, failure)
    replay = _replay(path)
    assert replay.returncode == 1 and "the relation 'transpose'" in replay.stdout, replay.stdout + replay.stderr
    source.write_text(RIGHT_UNLESS_A_IS_COLUMN_MAJOR.replace("c[0, 0] += 1", "pass"))  # the fix
    replay = _replay(path)
    assert replay.returncode == 0 and "PASS" in replay.stdout and "changed since" in replay.stdout, replay.stdout


def test_a_hang_replays_in_a_worker_with_its_timeout(backend, tmp_path):
    source = tmp_path / "mine.py"
    source.write_text("def matmul(a, b, c):\n    while True:\n        pass\n")
    example = Example("reference", user_kernel.load(f"{source}:matmul").name, GemmCase(2, 2, 2, "fp16", "fp16"))
    settings = RunSettings(backend=backend.name, mode="worker", timeout=8, kernel=_kernel(source))
    failure = _failure(settings, backend, example)
    assert isinstance(failure, TimedOut)
    path = repros.write(tmp_path / "repros", example, settings, failure)
    replay = _replay(path)
    assert replay.returncode == 1 and "timed out" in replay.stdout and "no result after 8 s" in replay.stdout


def test_every_script_records_the_kernel_by_absolute_path_and_hash(backend, tmp_path):
    source = tmp_path / "mine.py"
    source.write_text(RIGHT_UNLESS_A_IS_COLUMN_MAJOR)
    settings = RunSettings(backend=backend.name, kernel=_kernel(source))
    example = Example("reference", user_kernel.load(f"{source}:matmul").name, GemmCase(2, 2, 2, "fp16", "fp16"))
    path = repros.write(tmp_path / "repros", example, settings, TimedOut("planted"))
    record = repros.read(path).record
    assert record["kernel"]["spec"] == f"{source.resolve()}:matmul" and len(record["kernel"]["digest"]) == 8
    assert record["kernel"]["digest"] == hashlib.sha256(source.read_bytes()).hexdigest()[:8]  # what it held
    assert record["mode"] == "process" and record["example"]["check"] == "reference"


# the tutorial's wrapper asserting a contiguous A, its contract not saying so (DECLARED says it, as the hint asks)
ASSERTION = '    assert a.is_contiguous(), "Matrix A must be contiguous"\n'
ASSERTS_CONTIGUOUS_A = edited(TILED, (Edit("    M, K = a.shape\n", ASSERTION + "    M, K = a.shape\n"),
                                      Edit("@contract(blocks=(16, 16, 16))", "@contract(blocks=(16, 16, 16)DECLARED)"),
                                      Edit("import contract", "import Requirements, contract")), "asserts_contiguous_a")
CI = ["--gemm-backend", "interpreter", "-p", "no:cacheprovider", "--hypothesis-profile", "ci"]


def test_replays_follow_the_contract_and_are_never_targets(pytester):
    """The suite's hint says to declare the precondition; once it is declared, the scripts of the earlier
    failures, whose cases the contract no longer admits, are skipped with the reason instead of failing
    every later run; a dtype not selected is skipped saying so; and no replay is a row of the targets."""
    undeclared = ASSERTS_CONTIGUOUS_A.replace("DECLARED", "")
    pytester.makepyfile(my_kernel=undeclared)
    first = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "--gemm-dtype", "fp16",
                                          "-k", "float64", *CI, timeout=900)
    assert first.ret == 1 and "declare requires=Requirements(contiguous=('a',))" in " ".join(first.stdout.lines)
    scripts = sorted((pytester.path / "repros").glob("*.py"))
    assert scripts
    declared = ASSERTS_CONTIGUOUS_A.replace("DECLARED", ", requires=Requirements(contiguous=('a',))")
    pytester.makepyfile(my_kernel=declared)
    second = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "--gemm-dtype", "fp16",
                                           "-k", "float64 or replays", "-rs", *CI, timeout=900)
    assert second.ret == 0, second.stdout.str()[-3000:]
    second.stdout.fnmatch_lines([f"SKIPPED * {scripts[0].name}: the contract no longer admits its case: A has *"
                                 "needs A contiguous*"])
    rows = [line for line in second.stdout.lines if line.startswith(tuple(s.stem for s in scripts))]
    assert rows == [], rows  # replays are no targets
    bf16 = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "--gemm-dtype", "bf16",
                                         "-k", "replays", "-rs", *CI, timeout=900)
    bf16.stdout.fnmatch_lines([f"SKIPPED * {scripts[0].name}: its inputs are fp16, not among this run's dtypes (bf16)"])


def test_a_replay_that_passes_now_says_so(pytester):
    pytester.makepyfile(my_kernel=ASSERTS_CONTIGUOUS_A.replace("DECLARED", ""))
    pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "--gemm-dtype", "fp16", "-k", "float64",
                                  *CI, timeout=900)
    fixed = TILED  # the assertion gone
    pytester.makepyfile(my_kernel=fixed)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "--gemm-dtype", "fp16",
                                           "-k", "replays", *CI, timeout=900)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*GEMM replays: past failures that pass now*",
                                 "*/repros/*.py passes now: the failure it recorded no longer reproduces*"])


def test_with_no_repro_folder_the_skip_says_why(pytester):
    pytester.makepyfile(my_kernel=ASSERTS_CONTIGUOUS_A.replace("DECLARED", ""))
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "--gemm-dtype", "fp16",
                                           "--gemm-repros", "", "-k", "replays", "-rs", *CI, timeout=900)
    result.stdout.fnmatch_lines(["SKIPPED * repro scripts are neither written nor replayed (--gemm-repros '')"])
    assert "None" not in result.stdout.str()


def test_one_failing_assert_is_one_bug_and_the_table_shows_the_shrunk_case(pytester):
    """The assert fails on every layout the hint names in its own words (column-major, strided,
    broadcast A), in three tests: one bug, its cases listed; the targets table's last column is the case
    the failure was reported on (shrunk), not the first failing example's."""
    pytester.makepyfile(my_kernel=ASSERTS_CONTIGUOUS_A.replace("DECLARED", ""))
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "--gemm-dtype", "fp16",
                                           "-k", "not replays", *CI, timeout=900)
    out = result.stdout.str()
    assert result.ret == 1
    assert "GEMM failures: 1 distinct bug" in out, out[out.find("GEMM failures"):]
    result.stdout.fnmatch_lines(["1. launcher refused the case: user:my_kernel.matmul#* at the launcher raising "
                                 "AssertionError: Matrix A must be contiguous at my_kernel.py:*"])
    reported = {line.split(" on ", 1)[1] for line in result.stdout.lines
                if line.startswith("launcher refused the case: user:my_kernel.matmul#") and " on " in line}
    row = next(line for line in result.stdout.lines if line.startswith("user:my_kernel.matmul#") and "failed" in line)
    assert any(row.endswith(case) for case in reported), (row, reported)


ASSERTS_CONTIGUOUS = edited(TILED, (Edit("    M, K = a.shape\n",
                                         "    assert a.is_contiguous(), 'Matrix A must be contiguous'\n"
                                         "    M, K = a.shape\n"),), "asserts_contiguous")
DECLARED = ASSERTS_CONTIGUOUS.replace(
    "from gemm_fuzz.kernels import contract", "from gemm_fuzz.kernels import Requirements, contract").replace(
    "@contract(blocks=(16, 16, 16))", "@contract(blocks=(16, 16, 16), requires=Requirements(contiguous=('a',)))")


@pytest.mark.interpreter
def test_replays_follow_the_contract_declared_since_they_were_recorded(pytester):
    """The launcher asserts A is contiguous; the first run fails and records repros, among them a metamorphic
    one that transposes A. Once the user declares the precondition, as the hint says, the next run replays
    the metamorphic repro without its transposition (a line says so), skips those whose case the contract
    refuses, and nothing is reported as the launcher refusing; the scripts say the same by themselves."""
    assert DECLARED != ASSERTS_CONTIGUOUS
    args = ["--gemm-kernel", "my_kernel.py:matmul", "--gemm-backend", "interpreter", "--gemm-dtype", "fp16",
            "-p", "no:cacheprovider", "--hypothesis-profile", "ci", "-rs"]
    pytester.makepyfile(my_kernel=ASSERTS_CONTIGUOUS)
    first = pytester.runpytest_subprocess(*args, timeout=900)
    assert first.ret == 1 and "declare requires=Requirements(contiguous=('a',))" in first.stdout.str()
    scripts = sorted((pytester.path / "repros").glob("*.py"))
    metamorphic = next(p for p in scripts if "-metamorphic-" in p.name)
    assert "transpose=True" in metamorphic.read_text()
    pytester.makepyfile(my_kernel=DECLARED)
    second = pytester.runpytest_subprocess(*args, "-k", "replays", timeout=900)
    out = " ".join(second.stdout.str().split())
    assert second.ret == 0, out[-3000:]
    assert "launcher refused" not in out and "internal error" not in out
    assert f"{metamorphic.name}: left out, the contract refusing their problems now: transpose" in out
    assert "the contract no longer admits its case" in out  # the others' cases transposed A itself
    replayed = _replay(metamorphic, cwd=pytester.path)
    assert replayed.returncode == 0 and "note: left out" in replayed.stdout, replayed.stdout + replayed.stderr
    refused = [p for p in scripts if p != metamorphic]
    assert refused and all(_replay(p, cwd=pytester.path).returncode == 2 for p in refused)


@pytest.mark.interpreter
def test_the_suites_own_operand_check_is_never_the_launchers_refusal(backend):
    """Operands the contract refuses reaching a launch are the suite's doing: an internal error, not the kernel's."""
    import torch

    from gemm_fuzz import kernels
    from gemm_fuzz.kernels import operands
    from gemm_fuzz.properties.judge.failures import SuiteError
    from gemm_fuzz.properties.launch import launching

    variant = kernels.get("tiled")
    a = torch.zeros(4, 3)
    try:
        operands.check(variant, a, torch.zeros(2, 4), torch.zeros(4, 4))
    except ValueError as error:
        failure = launching.classify(error, backend.name)
    assert isinstance(failure, SuiteError) and "the suite built operands the contract refuses" in failure.message
