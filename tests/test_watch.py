"""Watch mode (properties/watch.py): the battery reruns when the kernel, or a file of its tree it imports, is
saved; a hanging or crashing kernel costs one run, never the watch."""

import os
import re
import subprocess
import sys
import time

import pytest
from templates import MASKED

pytestmark = pytest.mark.interpreter

HELPER_IMPORTED = MASKED.replace("from gemm_fuzz.kernels import contract",
                                 "from gemm_fuzz.kernels import contract\nimport blocks  # noqa: F401")


def _watch(directory, spec: str, runs: int, *extra: str, timeout: float = 600.0,
           processes: int | None = None) -> subprocess.Popen:
    script = (f"import sys\nfrom gemm_fuzz.properties import watch\n"
              f"sys.exit(watch.watch({spec!r}, 'interpreter', {list(extra)!r}, timeout={timeout}, runs={runs}, "
              f"processes={processes}))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("GEMM_BACKEND", "TRITON_INTERPRET")}  # as in a shell
    return subprocess.Popen([sys.executable, "-c", script], cwd=directory, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)


def _verdicts(process: subprocess.Popen, count: int, on_verdict=None, output: list | None = None) -> list[str]:
    """The first `count` verdict lines; every line printed goes to `output` too."""
    found = []
    deadline = time.monotonic() + 600
    for line in process.stdout:
        if output is not None:
            output.append(line.rstrip("\n"))
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
    assert [v.split(": ")[1].split(" ")[0] for v in found] == ["passed", "passed"], found
    assert "watching 2 file(s)" in found[1], found  # the kernel and blocks.py
    assert process.returncode == 0


def test_each_run_judges_the_files_as_saved(tmp_path):
    """The warm processes run every battery: a fix saved in a file the kernel imports, then a bug saved in the
    kernel's own file, each shows in the next verdict (the tree is imported afresh, not kept)."""
    (tmp_path / "scale.py").write_text("FACTOR = 2.0\n")
    kernel = tmp_path / "scaled.py"
    kernel.write_text("import scale\n\n\ndef matmul(a, b, c):\n"
                      "    c.copy_((a.float() @ b.float() * scale.FACTOR).to(c.dtype))\n")
    process = _watch(tmp_path, "scaled.py:matmul", 3, "-k", "reference and fp16")

    def save(n):
        time.sleep(0.5)
        if n == 1:
            (tmp_path / "scale.py").write_text("FACTOR = 1.0\n")
        elif n == 2:
            kernel.write_text(kernel.read_text().replace("* scale.FACTOR", "* scale.FACTOR + 1"))

    output = []
    found = _verdicts(process, 3, save, output)
    assert [v.split(": ")[1].split(" ")[0] for v in found] == ["FAILED", "passed", "FAILED"], found
    repros = [line for line in output if "repro: python " in line]
    assert repros and all(f"{tmp_path}/repros/" in line for line in repros), repros  # every run's, not only the first
    assert process.returncode == 0


def test_the_processes_share_the_battery_each_test_once(tmp_path):
    """Two warm processes claim the tests between them: the same tests pass, each once, as in one process."""
    (tmp_path / "my_matmul.py").write_text(MASKED)
    ran = {}
    for processes in (1, 2):
        output = []
        found = _verdicts(_watch(tmp_path, "my_matmul.py:matmul", 1, "-k", "fp16 or fp32", processes=processes), 1,
                          output=output)
        assert "passed (" in found[0], output
        ran[processes] = sorted(line.split(" (")[0] for line in output if re.match(r"(PASSED|SKIPPED) ", line))
    assert ran[2] == ran[1] and len(ran[1]) == len(set(ran[1])) >= 6, ran


def test_a_kernel_that_does_not_load_says_why_once_and_a_fix_is_picked_up(tmp_path):
    kernel = tmp_path / "broken.py"
    kernel.write_text("def matmul(a, b, c)\n    pass\n")  # the colon forgotten

    def fix(n):
        time.sleep(0.5)
        kernel.write_text("def matmul(a, b, c):\n    c.copy_(a.float() @ b.float())\n")

    output = []
    found = _verdicts(_watch(tmp_path, "broken.py:matmul", 2, "-k", "reference and fp16", processes=2), 2, fix, output)
    assert "usage error" in found[0] and "passed" in found[1], found
    said = [line for line in output if "syntax error" in line]
    assert len(said) == 1 and "broken.py:1" in said[0], output


def test_a_hanging_kernel_costs_one_run_and_a_crashing_one_too(tmp_path):
    (tmp_path / "hangs.py").write_text("def matmul(a, b, c):\n    while True:\n        pass\n")
    (tmp_path / "crashes.py").write_text("import os\n\ndef matmul(a, b, c):\n    os.abort()\n")
    hung = _verdicts(_watch(tmp_path, "hangs.py:matmul", 1, "-k", "reference and fp16", timeout=15), 1)
    assert "timed out: the battery ran past 15 s" in hung[0], hung
    crashes = tmp_path / "crashes.py"

    def fix(n):
        time.sleep(0.5)
        crashes.write_text("def matmul(a, b, c):\n    c.copy_(a.float() @ b.float())\n")

    crashed = _verdicts(_watch(tmp_path, "crashes.py:matmul", 2, "-k", "reference and fp16"), 2, fix)
    assert "crashed: a battery process died of signal 6" in crashed[0], crashed
    assert "passed" in crashed[1], crashed  # a fresh process took the next run


def test_watching_a_file_that_is_not_there_says_so(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gemm_fuzz.properties.campaign", "--watch", "nothere.py:matmul"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "nothere.py is not a file; expected PATH.py:FUNC" in done.stderr, done.stderr


def test_arguments_after_the_separator_go_to_pytest_only_with_watch(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gemm_fuzz.properties.campaign", "--budget", "1s", "--", "-x"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "arguments after -- go to pytest, with --watch only" in done.stderr, done.stderr

