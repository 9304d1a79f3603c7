"""Watch mode (properties/watch.py): the battery reruns when the kernel, or a file of its tree it imports, is
saved; a hanging or crashing kernel costs one run, never the watch."""

import subprocess
import sys
import time

import pytest
from templates import MASKED

pytestmark = pytest.mark.interpreter

HELPER_IMPORTED = MASKED.replace("from gemm_fuzz.kernels import contract",
                                 "from gemm_fuzz.kernels import contract\nimport blocks  # noqa: F401")


def _watch(directory, spec: str, runs: int, *extra: str, timeout: float = 600.0) -> subprocess.Popen:
    script = (f"import sys\nfrom gemm_fuzz.properties import watch\n"
              f"sys.exit(watch.watch({spec!r}, 'interpreter', {list(extra)!r}, timeout={timeout}, runs={runs}))\n")
    return subprocess.Popen([sys.executable, "-c", script], cwd=directory, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _verdicts(process: subprocess.Popen, count: int, on_verdict=None) -> list[str]:
    found = []
    deadline = time.monotonic() + 600
    for line in process.stdout:
        if line.startswith("gemm-fuzz --watch: ") and " from the save " in line:
            found.append(line.strip())
            if on_verdict is not None:
                on_verdict(len(found))
            if len(found) == count:
                break
        assert time.monotonic() < deadline
    process.wait(60)
    return found


def test_saving_a_file_the_kernel_imports_reruns_the_battery(tmp_path):
    (tmp_path / "blocks.py").write_text("BM = 32\n")
    (tmp_path / "my_matmul.py").write_text(HELPER_IMPORTED)
    process = _watch(tmp_path, "my_matmul.py:matmul", 2, "-k", "reference and fp16")

    def save(n):
        if n == 1:
            time.sleep(0.5)
            (tmp_path / "blocks.py").write_text("BM = 32  # saved\n")

    found = _verdicts(process, 2, save)
    assert [v.split(": ")[1].split(" in ")[0] for v in found] == ["passed", "passed"], found
    assert "watching 2 file(s)" in found[1], found  # the kernel and blocks.py
    assert process.returncode == 0


def test_a_hanging_kernel_costs_one_run_and_a_crashing_one_too(tmp_path):
    (tmp_path / "hangs.py").write_text("def matmul(a, b, c):\n    while True:\n        pass\n")
    (tmp_path / "crashes.py").write_text("import os\n\ndef matmul(a, b, c):\n    os.abort()\n")
    hung = _verdicts(_watch(tmp_path, "hangs.py:matmul", 1, "-k", "reference and fp16", timeout=15), 1)
    assert "timed out: the battery ran past 15 s" in hung[0], hung
    crashed = _verdicts(_watch(tmp_path, "crashes.py:matmul", 1, "-k", "reference and fp16"), 1)
    assert "crashed: the battery's process died of signal 6" in crashed[0], crashed


def test_watching_a_file_that_is_not_there_says_so(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gemm_fuzz.properties.campaign", "--watch", "nothere.py:matmul"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "nothere.py is not a file; expected PATH.py:FUNC" in done.stderr, done.stderr


def test_arguments_after_the_separator_go_to_pytest_only_with_watch(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gemm_fuzz.properties.campaign", "--budget", "1s", "--", "-x"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "arguments after -- go to pytest, with --watch only" in done.stderr, done.stderr

