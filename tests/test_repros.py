"""A repro script replays exactly what found its failure, through the same runner, from any
directory: a failure only the sanitizer sees still fails, a relation's failure fails as that
relation, a hang replays in a worker with its timeout; it passes once the bug is gone."""

import subprocess
import sys
import textwrap

import pytest

from kernels import mutants
from properties.judge.failures import GemmFailure, TimedOut
from properties.model.cases import GemmCase
from properties.report import repros
from properties.run import user_kernel
from properties.run.examples import Example
from properties.run.runner import Runner, RunSettings


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
    assert record["mode"] == "process" and record["example"]["check"] == "reference"
