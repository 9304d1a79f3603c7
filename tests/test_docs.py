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


def test_the_architecture_draws_the_layers_of_the_contract():
    """docs/architecture.md lists the layers of pyproject.toml's import-linter contract, top to bottom."""
    import tomllib

    layers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
    contract = [[m.strip().removeprefix("gemm_fuzz.").replace(".", "/") for m in layer.split("|")] for layer in layers]
    doc = (ROOT / "docs" / "architecture.md").read_text()
    drawing = doc[doc.index("<!-- layers"):].split("```")[1].strip().splitlines()
    heads = [re.match(r"\S+(?:\s*\|\s*\S+)*", line).group(0) for line in drawing if line and not line.startswith(" ")]
    drawn = [[part.strip().removesuffix(".py") for part in head.split("|")] for head in heads]
    assert drawn == contract


def test_every_file_the_documents_name_exists():
    for doc in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        for path in re.findall(r"\b((?:kernels|properties|reference|tests)/[\w/]+\.py)\b", doc.read_text()):
            assert (ROOT / path).exists(), f"{doc.name} names {path}, which does not exist"
