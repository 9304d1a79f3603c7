"""The battery run on a user-style kernel as a user runs it (`pytest --gemm-kernel PATH:FUNC`), in the interpreter
under the ci profile and writing no repro scripts, what its outcome must show, and the test cases of a run's JUnit
XML report."""

import xml.etree.ElementTree as ElementTree

FAST = ["--gemm-backend", "interpreter", "-p", "no:cacheprovider", "--hypothesis-profile", "ci", "--gemm-repros", ""]


def battery(pytester, kernel, *args: str):
    """The battery on `kernel` ("PATH:FUNC") in a pytest subprocess; `args` add to FAST (a later option wins)."""
    return pytester.runpytest_subprocess("--gemm-kernel", str(kernel), *FAST, *args, timeout=900)


def assert_passed(result):
    assert result.ret == 0, result.stdout.str()[-3000:]


def assert_caught(result, kind: str, case: str, regex: bool = False):
    """The run failed, reporting a failure of `kind` and the `case` it shrank to (fnmatch patterns, or regular
    expressions with `regex`)."""
    assert result.ret == 1, result.stdout.str()[-3000:]
    if regex:
        result.stdout.re_match_lines([f".*{kind}.*", f".*case: {case}"])
    else:
        result.stdout.fnmatch_lines([f"*{kind}*", f"*case: {case}"])


def junit_cases(report) -> list[tuple[str, str, str, float]]:
    """(classname, name, outcome, seconds) of each test case in a JUnit XML report, the outcome "passed",
    "failure", "error" or "skipped"."""
    found = []
    for case in ElementTree.parse(report).iter("testcase"):
        kind = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        found.append((case.get("classname"), case.get("name"), kind, float(case.get("time"))))
    return found
