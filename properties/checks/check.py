"""The Check protocol: one kind of check is one module, with one interface.

  examples(subject, backend)   what it draws: a Hypothesis strategy of Examples
  stratified(subject, backend) the explicit Examples it runs first (properties/model/stratified.py)
  compile_plans(target, backend, user)
                               what it compiles ahead on a GPU: (variant, GemmCase) pairs
  execute(example, resolve, backend)
                               how it executes, in one process (here or in a worker)
  run(example, runner, ...)    where: by default through the runner, here or in a worker; a check that
                               spans processes (compiled against interpreted) overrides it
  describe(example)            how it names itself in a failure's report

A subject is what a battery test is parametrized by: a Target for most checks, an AgreementGroup
for agreement, a repro script for a replay. Checks are registered once (properties/checks/__init__.py);
an Example names its check, and the runner and the worker dispatch on the check, never on a name.
"""

from __future__ import annotations

import contextlib

from gemm_fuzz.properties import phases
from gemm_fuzz.properties.judge.failures import GemmFailure, SuiteError


class NothingJudged(Exception):
    """Nothing could be judged here: every example was left out as an interpreter limitation, or a
    replayed case is no longer admitted (the plugin skips the test with the reason)."""


class Check:
    name: str = ""  # the Example.check that names it (in workers, repro scripts and the corpus)
    climb = False  # steer the search toward the largest error / bound (hypothesis.target)
    searched = True  # Hypothesis draws its examples; else only its explicit ones run, as they are
    share = 1  # it draws max(minimum, the profile's max_examples // share) examples (1: the profile's own)
    minimum = 0
    counts_reached = False  # its examples count toward the target's reached features (one variant on a case)

    def example(self, variant: str, case, params: tuple = ()):
        """An Example of this check (the one way to name a check in an Example)."""
        from gemm_fuzz.properties.checks.example import Example

        return Example(self.name, variant, case, params)

    def variant(self, subject):
        """The variant whose examples these are (the one judged), if there is one."""
        return getattr(subject, "variant", None)

    def max_examples(self, profile_examples: int) -> int | None:
        return None if self.share == 1 else max(self.minimum, profile_examples // self.share)

    def examples(self, subject, backend):
        raise NotImplementedError

    def stratified(self, subject, backend) -> list:
        return []

    def compile_plans(self, target, backend, user: bool) -> list:
        return []

    def execute(self, example, resolve, backend):
        raise NotImplementedError

    def describe(self, example) -> str:
        raise NotImplementedError

    def under_contract(self, example, variant, device) -> tuple:
        """A recorded example re-derived under the variant's contract as it is now (a replay's): (the
        example, what was left out of it, in words); raises NothingJudged when nothing of it is left."""
        return example, ""

    def settings(self, subject, current):
        """The runner settings its examples run under: the run's own (a replay: its recorded mode)."""
        return current

    def run(self, example, runner, variant, timeout: float, deadline: float | None):
        """Run `example` where the runner's settings say (here, or in a worker)."""
        return runner.execute(example, variant, timeout, deadline)


def _interpreter_checks(example, backend):
    """In the interpreter, every launch of the example runs its programs in the case's order and under
    the race detector (the sanitizer wraps each launch)."""
    if not backend.interpreted:
        return contextlib.nullcontext()
    from gemm_fuzz.properties.interpreter import races, schedule

    stack = contextlib.ExitStack()
    stack.enter_context(schedule.ordered(example.case.order))
    stack.enter_context(races.checked())
    return stack


def execute(check: Check, example, resolve, backend):
    """Run one example of `check` in this process, recording where its time went. Raises a GemmFailure
    with its context filled in; anything else that raises is the suite's own code: a SuiteError, never
    the kernel's failure (what the kernel runs is classified in properties/launch/launching.py).
    `resolve(name) -> Variant` finds variants by name."""
    context = dict(variant=example.variant or "(peers)", case=example.case.describe(), check=check.describe(example))
    try:
        with phases.recording() as record, _interpreter_checks(example, backend):
            observed = check.execute(example, resolve, backend)
        observed.phases = record
        return observed
    except GemmFailure as failure:
        failure.with_context(**context)
        raise
    except Exception as error:  # noqa: BLE001
        raise SuiteError.of(error).with_context(**context) from error
