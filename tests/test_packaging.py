"""The suite claims one top-level import name, gemm_fuzz: a user's repository keeps its own `kernels`,
`properties` or `reference` package importable with the plugin active, and every package of this
repository is installed under that name."""

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from templates import MASKED

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_of_the_repository_is_installed_under_gemm_fuzz():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {"gemm_fuzz." + str(p.parent.relative_to(ROOT)).replace("/", ".")
             for top in ("kernels", "properties", "reference") for p in (ROOT / top).rglob("__init__.py")}
    assert set(config["packages"]) == found
    assert config["package-dir"] == {f"gemm_fuzz.{top}": top for top in ("kernels", "properties", "reference")}


def test_only_gemm_fuzz_is_importable_at_the_top_level(tmp_path):
    code = ("import importlib.util, gemm_fuzz.properties.plugin, gemm_fuzz.kernels\n"
            "print([name for name in ('kernels', 'properties', 'reference') if importlib.util.find_spec(name)])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.stdout.strip() == "[]", run.stderr[-2000:]


USER_TEST = textwrap.dedent("""
    import sys

    import torch

    from kernels.mm import matmul


    def test_the_users_own_kernels_package_is_the_one_imported():
        assert sys.modules["kernels"].__file__.endswith("kernels/__init__.py")
        assert "properties" not in sys.modules and "reference" not in sys.modules
        a = torch.ones(3, 4, dtype=torch.float16)
        b = torch.ones(4, 5, dtype=torch.float16)
        c = torch.empty(3, 5, dtype=torch.float16)
        matmul(a, b, c)
        assert torch.equal(c, torch.full((3, 5), 4.0, dtype=torch.float16))
""")


def test_a_users_own_kernels_package_works_beside_the_plugin(pytester):
    pytester.mkpydir("kernels")
    (pytester.path / "kernels" / "mm.py").write_text(MASKED)
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_mm.py").write_text(USER_TEST)
    result = pytester.runpytest_subprocess("tests/test_mm.py", "--gemm-kernel", "kernels/mm.py:matmul",
                                           "--gemm-backend", "interpreter", "--gemm-dtype", "fp16", "-p",
                                           "no:cacheprovider", "--hypothesis-profile", "ci",
                                           "-k", "users_own or float64", timeout=900)
    result.assert_outcomes(passed=2)
