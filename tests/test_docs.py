"""Figures the documents quote that the code can check: they change with the code, so a test says when."""

import re
import subprocess
import sys
from pathlib import Path

from gemm_fuzz.kernels import mutants

ROOT = Path(__file__).resolve().parent.parent


def test_readme_gives_the_number_of_tests_the_command_collects():
    # as in a fresh clone: no repro scripts of earlier runs to replay (each would be one test more)
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "--gemm-repros", ""], capture_output=True, text=True, cwd=ROOT, timeout=600)
    collected = int(re.search(r"(\d+) tests? collected", run.stdout).group(1))
    assert f"The command collects {collected} tests" in (ROOT / "README.md").read_text()


def test_the_documents_count_the_mutants_there_are():
    count = len(mutants.mutants())
    assert f"declares {count} deliberately wrong kernels" in (ROOT / "docs" / "mutants.md").read_text()
    assert f"{count} planted bugs" in (ROOT / "README.md").read_text()
