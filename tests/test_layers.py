"""The layers of pyproject.toml's import-linter contract hold: a module imports only from the layers
below its own, imports inside functions included (docs/architecture.md draws them). import-linter finds
gemm_fuzz where Python would, and this suite's environment may hold the default editable install, whose
import hook hides the folders from it (`tox -e lint` installs in strict editable mode instead). So the
contract is checked on the checkout's own files through a tree of links laid out as they install
(gemm_fuzz/kernels -> kernels, ...), and shown to fail on an upward import planted in a copy of one
folder."""

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


def _checkout(tmp_path: Path, copied: tuple[str, ...] = ()) -> Path:
    """The checkout laid out as it installs: gemm_fuzz/kernels -> ROOT/kernels, ... (links to the checkout's
    own folders), the folders in `copied` copied instead, to plant an import in."""
    (tmp_path / "gemm_fuzz").mkdir()
    for top in ("kernels", "properties", "reference"):
        if top in copied:
            shutil.copytree(ROOT / top, tmp_path / "gemm_fuzz" / top, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (tmp_path / "gemm_fuzz" / top).symlink_to(ROOT / top, target_is_directory=True)
    return tmp_path


def test_the_layers_hold(tmp_path):
    run = _lint(_checkout(tmp_path))
    assert run.returncode == 0 and "Contracts: 1 kept, 0 broken." in run.stdout, run.stdout[-3000:] + run.stderr


def test_an_upward_import_breaks_them(tmp_path):
    tree = _checkout(tmp_path, copied=("reference",))  # the import planted reaches properties/ through its link
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
