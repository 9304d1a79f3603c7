"""Hypothesis profiles.

  dev       the default on a workstation: random, a few dozen examples per test
  ci        used when the CI environment variable is set: derandomized (the same examples every run),
            no example database (verdicts depend on nothing but the code), no deadline
  campaign  thousands of examples per test, for long searches (`tox -e campaign`, `gemm-fuzz`)
  triage    the ci examples without shrinking: every failing target's first failure, fast

Choose one explicitly with `--hypothesis-profile NAME`. None has the `explain` phase, which re-runs
a failing example many times to annotate the report with lines that point into this suite.

Hypothesis now and then draws a literal constant found in the source of any local module loaded (a
user's kernel file among them). The suite's own files are left out of that: their constants would
move every derandomized example, and with them the smallest case each mutant registers, whenever
the suite's code changed, and differ with the modules a process happens to have loaded.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings


def _leave_out_the_suites_constants() -> None:
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # a Hypothesis without the feature
        return
    original = getattr(providers, "is_local_module_file", None)
    if original is None or getattr(original, "leaves_out_the_suite", False):
        return
    root = str(Path(__file__).resolve().parents[2]) + os.sep  # the package's root (with tests/ in a checkout)
    planted = str(Path(tempfile.gettempdir()).resolve() / "gemm-mutants-")  # kernels.mutants' generated files

    def is_local_module_file(path: str) -> bool:
        return original(path) and not str(Path(path).resolve()).startswith((root, planted))

    is_local_module_file.leaves_out_the_suite = True
    providers.is_local_module_file = is_local_module_file


_leave_out_the_suites_constants()

# The interpreter takes tenths of a second per example: slowness is expected, not a defect. The
# `gemm` fixture is function-scoped on purpose: it holds one test's shrinking budget.
_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
_PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]
CI_EXAMPLES = 25  # examples per test in the ci profile (and triage, which runs the same ones)

settings.register_profile("dev", max_examples=30, deadline=None, suppress_health_check=_QUIET, phases=_PHASES)
settings.register_profile("ci", max_examples=CI_EXAMPLES, deadline=None, derandomize=True, database=None,
                          suppress_health_check=_QUIET, phases=_PHASES)
settings.register_profile("campaign", max_examples=2000, deadline=None, suppress_health_check=_QUIET,
                          phases=_PHASES)
settings.register_profile("triage", max_examples=CI_EXAMPLES, deadline=None, derandomize=True, database=None,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate], suppress_health_check=_QUIET)
PROFILES = ("dev", "ci", "campaign", "triage")


def default_profile() -> str:
    return "ci" if os.environ.get("CI") else "dev"


def load_default() -> str:
    name = default_profile()
    settings.load_profile(name)
    return name
