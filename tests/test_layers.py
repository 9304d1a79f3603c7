"""The layers of pyproject.toml's import-linter contract hold: a module imports only from the layers
below its own, imports inside functions included (docs/architecture.md draws them). The contract is
checked on a copy of the source laid out as it installs (gemm_fuzz/kernels, ...), and shown to fail on
an upward import planted in that copy."""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), str(ROOT / "pyproject.toml")], capture_output=True, text=True, cwd=tree,
                          env={"PYTHONPATH": str(tree), "PATH": ""}, timeout=300)


def _installed_layout(tmp_path: Path) -> Path:
    for top in ("kernels", "properties", "reference"):
        shutil.copytree(ROOT / top, tmp_path / "gemm_fuzz" / top, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_the_layers_hold(tmp_path):
    run = _lint(_installed_layout(tmp_path))
    assert run.returncode == 0 and "Contracts: 1 kept, 0 broken." in run.stdout, run.stdout[-3000:] + run.stderr


def test_an_upward_import_breaks_them(tmp_path):
    tree = _installed_layout(tmp_path)
    with (tree / "gemm_fuzz" / "reference" / "formats.py").open("a") as f:
        f.write("\n\ndef _planted():\n    from gemm_fuzz.properties.run import runner  # inside a function\n")
    run = _lint(tree)
    assert run.returncode != 0
    assert "gemm_fuzz.reference is not allowed to import gemm_fuzz.properties.run" in run.stdout, run.stdout[-3000:]


def test_every_package_is_in_a_layer():
    """A new package of properties/ must be placed among the layers (or it escapes the contract)."""
    layers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
    named = {module.strip() for layer in layers for module in layer.split("|")}
    found = {f"gemm_fuzz.properties.{p.parent.name}" for p in (ROOT / "properties").glob("*/__init__.py")}
    found |= {f"gemm_fuzz.properties.{p.stem}" for p in (ROOT / "properties").glob("*.py") if p.stem != "__init__"}
    assert found <= named, sorted(found - named)
