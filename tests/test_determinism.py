"""Under the ci profile the same code gives the same verdicts and the same shrunk cases, whatever the
order the tests run in."""

from pathlib import Path

import pytest
from user_runs import junit_cases

from gemm_fuzz.kernels import mutants
from gemm_fuzz.properties.evaluation import mutation

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.interpreter
@pytest.mark.parametrize("name", ["tiled_no_k_mask", "grouped_unclamped_group", "tiled_gemv_fast_path"])
def test_a_search_finds_and_shrinks_the_same_case_twice(name, backend):
    first, second = (mutation.hunt(mutants.get(name), backend) for _ in range(2))
    assert first.caught and second.caught
    assert (first.examples, first.shrunk, first.error) == (second.examples, second.shrunk, second.error)


def _verdicts(pytester, *extra) -> dict[str, str]:
    report = pytester.path / f"report{len(extra)}.xml"
    result = pytester.runpytest_subprocess(
        str(ROOT / "tests" / "test_oracles.py"), str(ROOT / "tests" / "test_cases.py"),
        str(ROOT / "properties" / "battery" / "test_properties.py"), "-k", "tiled- or tiled_tf32 or oracle or case",
        "--gemm-backend", "interpreter", "-p", "no:cacheprovider", f"--junitxml={report}", *extra, timeout=900)
    outcomes = {f"{classname}::{name}": kind for classname, name, kind, _ in junit_cases(report)}
    assert "gemm hypothesis profile: ci" in result.stdout.str()  # the derandomized profile ran
    return outcomes


def test_verdicts_do_not_depend_on_test_order(pytester, monkeypatch):
    monkeypatch.setenv("CI", "1")  # the derandomized ci profile
    in_order = _verdicts(pytester)
    shuffled = _verdicts(pytester, "--gemm-order-seed", "12345")
    assert len(in_order) > 20 and in_order == shuffled
    assert set(in_order.values()) <= {"passed", "skipped"}


def test_the_suites_own_constants_do_not_steer_hypothesis_but_a_users_kernel_still_does(tmp_path):
    """Hypothesis draws literal constants from local modules now and then: the suite's files (and its
    generated mutants) are left out, so its derandomized examples do not move when its code does."""
    from hypothesis.internal.conjecture import providers

    from gemm_fuzz.properties.run import hypothesis_profiles

    assert not providers.is_local_module_file(hypothesis_profiles.__file__)
    assert not providers.is_local_module_file(__file__)  # tests/ of a checkout
    user = tmp_path / "my_matmul.py"
    user.write_text("BLOCK = 48\n")
    assert providers.is_local_module_file(str(user))


def test_a_users_kernel_keeps_its_identity_across_checkouts_and_edits(tmp_path):
    """The `ci` profile seeds each test by its id, which holds the kernel's identity: a kernel checked
    out in two places, or edited, keeps it; another file at another path in its repository does not."""
    from gemm_fuzz.properties.launch import user_kernel

    source = "import torch\n\ndef matmul(a, b, c):\n    torch.matmul(a, b, out=c)\n"
    names = []
    for checkout in ("here", "there"):
        (tmp_path / checkout / "kernels").mkdir(parents=True)
        (tmp_path / checkout / "pyproject.toml").write_text("")
        (tmp_path / checkout / "kernels" / "mine.py").write_text(source)
        names.append(user_kernel.load(f"{tmp_path / checkout / 'kernels' / 'mine.py'}:matmul").name)
    (tmp_path / "here" / "kernels" / "mine.py").write_text(source + "# edited\n")
    names.append(user_kernel.load(f"{tmp_path / 'here' / 'kernels' / 'mine.py'}:matmul").name)
    (tmp_path / "here" / "mine.py").write_text(source)
    elsewhere = user_kernel.load(f"{tmp_path / 'here' / 'mine.py'}:matmul").name
    assert len(set(names)) == 1 and names[0].startswith("user:mine.matmul#"), names
    assert elsewhere != names[0]
