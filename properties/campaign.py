"""The fuzzing campaign: every selected (variant, dtype) pair, for a time budget.

    gemm-fuzz --budget 10m [--backend auto] [--dtype fp16] [--variant 'tiled*'] [--report reports/NAME]

The budget is shared evenly among the targets. Each target runs Hypothesis in rounds (so it stops
on time) against one shared example database, so a failure found in one round is replayed first in
the next run. A failure is shrunk to its smallest case and printed; the run exits non-zero.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROUND = 20  # examples per Hypothesis round


@dataclass
class TargetResult:
    target_id: str
    examples: int = 0
    exact: int = 0
    seconds: float = 0.0
    worst_ratio: float = 0.0
    worst_case: str = ""
    failure: str = ""
    failing_case: object = None
    ratios: list[float] = field(default_factory=list)


def parse_budget(text: str) -> float:
    """'90s', '10m', '1h', '1h30m' or plain seconds -> seconds."""
    match = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or not match or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"invalid budget {text!r}; expected e.g. 90s, 10m, 1h30m")
    h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return h * 3600 + m * 60 + s


def run_target(target, backend, seconds: float, database) -> TargetResult:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import target as climb

    from properties import check, strategies

    result = TargetResult(target.id)
    strategy = strategies.gemm_cases(target.variant, target.dtype, device_type=backend.device.type,
                                     max_dim=backend.max_dim)
    last_case = []

    @settings(max_examples=ROUND, deadline=None, database=database, print_blob=False,
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def example(case):
        last_case[:] = [case]
        observed = check.check(target.variant, case, backend)
        climb(observed.error_ratio, label="error / bound")
        result.examples += 1
        result.exact += observed.exact
        result.ratios.append(observed.error_ratio)
        if observed.error_ratio >= result.worst_ratio:
            result.worst_ratio, result.worst_case = observed.error_ratio, case.describe()

    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            example()
        except Exception as e:  # the shrunk failure: Hypothesis re-raises it last
            result.failure = f"{type(e).__name__}: {e}"
            result.failing_case = last_case[0] if last_case else None
            break
    result.seconds = time.monotonic() - start
    return result


def summary_markdown(results: list[TargetResult], backend, budget: float) -> str:
    lines = [
        "# GEMM fuzzing campaign",
        "",
        *[f"- {line}" for line in backend.header()],
        f"- budget: {budget:.0f} s over {len(results)} targets",
        "",
        "| target | examples | exact | examples/s | worst error/bound | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        rate = r.examples / r.seconds if r.seconds else 0.0
        verdict = "FAIL" if r.failure else "ok"
        lines.append(f"| {r.target_id} | {r.examples} | {r.exact} | {rate:.1f} | {r.worst_ratio:.3g} | {verdict} |")
    failures = [r for r in results if r.failure]
    for r in failures:
        lines += ["", f"## {r.target_id}: failure", "", "```", r.failure.strip(), "```"]
        if r.failing_case is not None:
            lines += ["", "Shrunk case (JSON):", "", "```json", r.failing_case.to_json(), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gemm-fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=parse_budget, default=parse_budget("10m"),
                        help="total time, e.g. 90s, 10m, 1h (default 10m)")
    parser.add_argument("--backend", choices=("auto", "interpreter", "cuda"), default="auto")
    parser.add_argument("--dtype", action="append", help="input dtypes (repeatable): fp16, bf16, fp32, tf32, ...")
    parser.add_argument("--variant", action="append", help="variant name globs (repeatable)")
    parser.add_argument("--report", type=Path, default=None, help="report directory (default reports/<time>)")
    args = parser.parse_args(argv)

    from properties import backends  # chooses the backend before the kernels load

    backend = backends.activate(args.backend)
    from hypothesis.database import DirectoryBasedExampleDatabase

    import kernels
    from properties import targets

    try:
        selectors = targets.parse_selectors(args.dtype)
    except ValueError as e:
        parser.error(f"--dtype: {e}")
    chosen = targets.targets(kernels.variants(), selectors, args.variant)
    chosen = [t for t in chosen if t.variant.runs_on(backend.name)]
    if not chosen:
        parser.error("no variant and dtype match the selection on this backend")
    report = args.report or Path("reports") / time.strftime("campaign-%Y%m%d-%H%M%S")
    report.mkdir(parents=True, exist_ok=True)
    database = DirectoryBasedExampleDatabase(".hypothesis/campaign")

    print("\n".join(backend.header()))
    print(f"campaign: {len(chosen)} targets, {args.budget:.0f} s, report in {report}")
    share = args.budget / len(chosen)
    results = []
    for i, t in enumerate(chosen, 1):
        r = run_target(t, backend, share, database)
        results.append(r)
        verdict = "FAIL" if r.failure else "ok"
        print(f"[{i}/{len(chosen)}] {t.id:<24} {r.examples:>6} examples {r.seconds:7.1f} s  "
              f"worst error/bound {r.worst_ratio:.3g}  {verdict}", flush=True)
        if r.failure:
            print("    " + r.failure.strip().splitlines()[0])
    (report / "summary.md").write_text(summary_markdown(results, backend, args.budget))
    failed = [r for r in results if r.failure]
    print(f"campaign: {sum(r.examples for r in results)} examples, {len(failed)} failing target(s); "
          f"summary in {report / 'summary.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
