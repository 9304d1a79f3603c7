"""The suite's power, measured on the deliberately wrong kernels of `kernels.mutants`.

`hunt(mutant)` runs Hypothesis with the CI profile's settings (derandomized, 25 examples, no
database), whatever profile is loaded, over the strategy the suite draws for the mutant's dtype,
each example through the runner as the property tests run it (so shrinking, its time bound and the
final simplification are the suite's own), and reports how many examples and seconds it took to
find the first failure, the total with shrinking, and the case reported.

    python -m gemm_fuzz.properties.evaluation.mutation     # a Markdown table: every mutant, the suite and the baseline

The table also runs the fixed-grid baseline of `properties.evaluation.baseline` on every mutant the
interpreter can show, one subprocess each.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from hypothesis import Phase, given
from hypothesis import settings as hypothesis_settings

from gemm_fuzz.properties import checks
from gemm_fuzz.properties.checks.example import Example
from gemm_fuzz.properties.judge.failures import GemmFailure
from gemm_fuzz.properties.launch import backends
from gemm_fuzz.properties.model import strategies
from gemm_fuzz.properties.model.cases import GemmCase
from gemm_fuzz.properties.run import hypothesis_profiles as _profiles  # noqa: F401  (registers the "ci" profile)
from gemm_fuzz.properties.run.runner import Runner, RunSettings
from gemm_fuzz.reference.formats import by_name, name_of


def ci_settings() -> hypothesis_settings:
    """The CI profile (derandomized, 25 examples, no example database), one bug reported."""
    phases = tuple(p for p in Phase if p is not Phase.explain)
    return hypothesis_settings(hypothesis_settings.get_profile("ci"), database=None, phases=phases,
                               report_multiple_bugs=False)


def case_of(mutant, fields=None) -> GemmCase:
    """A GemmCase in the mutant's dtype (default output dtype) from its registered fields."""
    dtype = by_name(mutant.dtype).dtype
    data = {"dtype": mutant.dtype, "out_dtype": name_of(mutant.variant.dtypes[dtype][0])}
    data.update(mutant.smallest if fields is None else fields)
    return GemmCase.from_dict(data)


def expected_case(mutant) -> GemmCase:
    """The smallest case that exposes the mutant, as registered."""
    return case_of(mutant)


def shrink_target(mutant) -> GemmCase:
    """Where shrinking must land: the smallest case, or the documented local minimum (`shrinks_to`)."""
    return case_of(mutant, mutant.shrinks_to) if mutant.shrinks_to is not None else expected_case(mutant)


def unaffected_case(mutant) -> GemmCase | None:
    """The smallest case with the changes under which the mutant is right, if it declares them."""
    if mutant.unaffected is None:
        return None
    return case_of(mutant, {**mutant.smallest, **mutant.unaffected})


def _runner(backend: backends.Backend) -> Runner:
    return Runner(RunSettings(backend=backend.name), backend)


def failure(variant, case: GemmCase, backend: backends.Backend) -> GemmFailure | None:
    """What the main property raises on this case (a wrong result, an out-of-bounds access, a crash), or None."""
    with _runner(backend) as runner:
        try:
            runner.run_once(checks.REFERENCE.example(variant.name, case), variant)
        except GemmFailure as e:
            return e
    return None


def strategy(mutant, backend: backends.Backend):
    """The strategy the property tests draw from for this mutant's dtype on this backend."""
    return strategies.gemm_cases(mutant.variant, mutant.dtype, device_type=backend.device.type,
                                 max_dim=backend.max_dim, big_batches=True)


@dataclass(frozen=True)
class Hunt:
    """What one search found."""

    mutant: str
    caught: bool
    examples: int | None  # test-function calls up to and including the first failing one
    seconds_to_catch: float | None  # until the first failure
    seconds: float  # in all, shrinking and simplification included
    shrunk: GemmCase | None
    error: str | None  # the failure class the reported case raises
    message: str | None

    def summary(self) -> str:
        if not self.caught:
            return f"{self.mutant}: NOT caught in {self.examples} examples ({self.seconds:.1f} s)"
        return (f"{self.mutant}: caught after {self.examples} example(s) in {self.seconds_to_catch:.2f} s, "
                f"shrunk in {self.seconds:.2f} s to {self.shrunk.describe()} ({self.error})")


def hunt(mutant, backend: backends.Backend | None = None, settings: hypothesis_settings | None = None) -> Hunt:
    """Search for a failing example of `mutant` and shrink it (see the module docstring)."""
    backend = backend or backends.current()
    # The search counts its own calls (the runner's PropertyRun counts them too): its source seeds the
    # derandomized draws, and with them every mutant's registered smallest case, so `search` keeps its
    # text (its Example named by the string "reference") unless the catalog's cases are re-derived with it.
    calls = 0
    first: tuple[int, float] | None = None  # (examples, seconds) at the first failure
    start = time.perf_counter()
    with _runner(backend) as runner:
        prop = runner.property(mutant.name)

        @(settings or ci_settings())
        @given(case=strategy(mutant, backend))
        def search(case):
            nonlocal calls, first
            calls += 1
            try:
                prop.run(Example("reference", mutant.name, case), mutant.variant)
            except GemmFailure:
                if first is None:
                    first = (calls, time.perf_counter() - start)
                raise

        search.hypothesis.inner_test._hypothesis_internal_add_digest = mutant.name.encode()
        try:
            search()
        except GemmFailure:
            pass
    seconds = time.perf_counter() - start
    if prop.failure is None:
        return Hunt(mutant.name, False, calls, None, seconds, None, None, None)
    return Hunt(mutant.name, True, first[0], first[1], seconds, prop.example.case, type(prop.failure).__name__,
                str(prop.failure))


def rows(backend: backends.Backend | None = None, baseline: bool = True) -> list[dict]:
    """One row per mutant: what the suite found on this backend (GPU-only mutants are searched only on a
    GPU) and, if asked, the fixed-grid baseline's verdict (it runs on the interpreter, GPU-only mutants
    left out)."""
    from gemm_fuzz.kernels import mutants
    from gemm_fuzz.properties.evaluation import baseline as fixed_grid

    backend = backend or backends.current()
    everything = mutants.mutants()
    verdicts = {}
    if baseline:
        verdicts = fixed_grid.run_all_isolated([m.name for m in everything if not m.gpu_only])
    table = []
    for mutant in everything:
        searched = mutant.gpu_only == (not backend.interpreted)
        table.append({
            "mutant": mutant.name, "bug": mutant.bug, "dtype": mutant.dtype, "gpu_only": mutant.gpu_only,
            "expected": shrink_target(mutant), "smallest": expected_case(mutant),
            "hunt": hunt(mutant, backend) if searched else None,
            "baseline": verdicts.get(mutant.name),
        })
    return table


def _suite_cell(row: dict) -> str:
    h: Hunt | None = row["hunt"]
    if h is None:
        return "GPU-only: searched on a GPU" if row["gpu_only"] else "searched on the interpreter"
    if not h.caught:
        return f"**no** ({h.examples} examples, {h.seconds:.1f} s)"
    registered = "as registered" if h.shrunk == row["expected"] else f"**not** {row['expected'].describe()}"
    if row["expected"] != row["smallest"]:
        registered += f": a local minimum, the smallest is `{row['smallest'].describe()}`"
    return (f"yes: example {h.examples}, {h.seconds_to_catch:.2f} s; {h.seconds:.2f} s with shrinking; "
            f"`{h.shrunk.describe()}` ({registered}; {h.error})")


def _baseline_cell(row: dict) -> str:
    verdict = row["baseline"]
    if verdict is None:
        return "n/a (GPU-only)" if row["gpu_only"] else "not run"
    return ("yes" if verdict.caught else "no") + f" ({verdict.outcome})"


def markdown(table: list[dict]) -> str:
    lines = ["| mutant | bug class | dtype | caught by the suite (examples, seconds, shrunk case) "
             "| caught by the baseline |", "|---|---|---|---|---|"]
    for row in table:
        lines.append(f"| `{row['mutant']}` | {row['bug']} | {row['dtype']} | {_suite_cell(row)} | "
                     f"{_baseline_cell(row)} |")
    lines += ["", "Examples count Hypothesis's calls of the test function up to the first failure. The baseline "
              "has no view of memory outside the tensors: a crash is glibc aborting on the heap an "
              "out-of-bounds store corrupted, and a read past a tensor's end fails or passes with whatever "
              "lies there (tests/test_baseline.py says which verdicts are such luck)."]
    return "\n".join(lines)


def main() -> None:
    backend = backends.activate()
    print(f"backend: {backend.name} on {backend.device_name}; Hypothesis profile ci (derandomized, "
          f"{ci_settings().max_examples} examples)\n")
    print(markdown(rows(backend)))


if __name__ == "__main__":
    main()
