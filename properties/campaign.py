"""The fuzzing campaign: every selected (variant, dtype) pair, for a time budget.

    gemm-fuzz --budget 10m [--backend auto] [--dtype fp16] [--variant 'tiled*'] [--kernel my.py:matmul]

The budget is shared evenly among the targets (what one target overruns, the later ones give up).
Each target runs at least one example, then stops launching kernels at its deadline (a failure is
still shrunk to the end), so a campaign overruns its budget by about one example per target. The
examples run the main property's checks, with `hypothesis.target` climbing toward the largest
error/bound, against one shared example database, so a failure found once is replayed first next
time. A failure is shrunk to its smallest case, printed, and left as a repro script; the report
directory gets summary.md, plots and the scripts (see properties/report/summary.py). Exit status 1 if any
target failed. On a GPU, examples run in a worker process, so a crashing kernel costs one target.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

ROUND = 20  # examples per Hypothesis round


class OutOfTime(BaseException):
    """A target's share of the budget is spent (not an Exception, so Hypothesis does not shrink it)."""


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
    repro: Path | None = None
    ratios: list[float] = field(default_factory=list)
    torch_ratios: list[float] = field(default_factory=list)


def parse_budget(text: str) -> float:
    """'90s', '10m', '1h', '1h30m' or plain seconds -> seconds."""
    match = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or not match or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"invalid budget {text!r}; expected e.g. 90s, 10m, 1h30m")
    h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return h * 3600 + m * 60 + s


def run_target(target, backend, seconds: float, database) -> TargetResult:
    from hypothesis import HealthCheck, Verbosity, given, settings
    from hypothesis import target as climb

    from properties.model import strategies
    from properties.run import isolation

    result = TargetResult(target.id)
    strategy = strategies.gemm_cases(target.variant, target.dtype, device_type=backend.device.type,
                                     max_dim=backend.max_dim)
    last_case = []
    failing = []  # set once an example fails: from then on every example runs, so shrinking completes
    deadline = time.monotonic() + seconds

    @settings(max_examples=ROUND, deadline=None, database=database, print_blob=False,
              verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def example(case):
        if result.examples and not failing and time.monotonic() > deadline:
            raise OutOfTime  # a BaseException: Hypothesis lets it through, ending the round at once
        last_case[:] = [case]
        try:
            observed = isolation.run_example(target.variant, case, backend)
        except Exception:
            failing.append(case)
            raise
        climb(observed.error_ratio, label="error / bound")
        result.examples += 1
        result.exact += observed.exact
        result.ratios.append(observed.error_ratio)
        if observed.torch_ratio is not None:
            result.torch_ratios.append(observed.torch_ratio)
        if observed.error_ratio >= result.worst_ratio:
            result.worst_ratio, result.worst_case = observed.error_ratio, case.describe()

    start = time.monotonic()
    while True:
        try:
            example()
        except OutOfTime:
            break
        except Exception as e:  # the shrunk failure: Hypothesis runs the minimal example last
            result.failure = f"{type(e).__name__}: {e}"
            result.failing_case = last_case[0] if last_case else None
            break
    result.seconds = time.monotonic() - start
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gemm-fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=parse_budget, default=parse_budget("10m"),
                        help="total time, e.g. 90s, 10m, 1h (default 10m)")
    parser.add_argument("--backend", choices=("auto", "interpreter", "cuda"), default="auto")
    parser.add_argument("--dtype", action="append", help="input dtypes (repeatable): fp16, bf16, fp32, tf32, ...")
    parser.add_argument("--variant", action="append", help="variant name globs (repeatable)")
    parser.add_argument("--kernel", help="fuzz your own kernel instead: PATH.py:FUNC or module:FUNC")
    parser.add_argument("--kernel-signature", choices=("plain", "leetgpu"), default=None)
    parser.add_argument("--report", type=Path, default=None, help="report directory (default reports/<time>)")
    args = parser.parse_args(argv)
    # overflowing and NaN inputs (near_overflow, specials) make numpy say so inside the interpreter,
    # as pyproject's filterwarnings silences for pytest
    for message in ("overflow encountered", "invalid value encountered"):
        warnings.filterwarnings("ignore", message=message, category=RuntimeWarning)

    from properties.run import backends  # chooses the backend before the kernels load

    try:
        backend = backends.activate(args.backend)
    except Exception as e:
        parser.error(f"--backend {args.backend}: {e}")
    from hypothesis.database import DirectoryBasedExampleDatabase

    import kernels
    from properties.report import repros, summary
    from properties.run import isolation, targets, user_kernel

    try:
        selectors = targets.parse_selectors(args.dtype)
    except ValueError as e:
        parser.error(f"--dtype: {e}")
    if args.kernel:
        try:
            chosen = targets.targets([user_kernel.load(args.kernel, args.kernel_signature)], selectors)
        except user_kernel.KernelSpecError as e:
            parser.error(str(e))
    else:
        chosen = targets.targets(kernels.variants(), selectors, args.variant)
    chosen = [t for t in chosen if t.variant.runs_on(backend.name)]
    if not chosen:
        parser.error("no variant and dtype match the selection on this backend")
    isolation.configure(isolate=backend.name == "cuda", kernel_spec=args.kernel)
    directory = args.report or Path("reports") / time.strftime("campaign-%Y%m%d-%H%M%S")
    directory.mkdir(parents=True, exist_ok=True)
    database = DirectoryBasedExampleDatabase(".hypothesis/campaign")

    print("\n".join(backend.header()))
    print(f"campaign: {len(chosen)} targets, {args.budget:.0f} s, report in {directory}")
    results = []
    end = time.monotonic() + args.budget
    for i, t in enumerate(chosen, 1):
        share = max(0.0, end - time.monotonic()) / (len(chosen) - i + 1)  # an overrun shrinks later shares
        r = run_target(t, backend, share, database)
        results.append(r)
        verdict = "FAIL" if r.failure else "ok"
        print(f"[{i}/{len(chosen)}] {t.id:<24} {r.examples:>6} examples {r.seconds:7.1f} s  "
              f"worst error/bound {r.worst_ratio:.3g}  {verdict}", flush=True)
        if r.failure:
            print("    " + r.failure.strip().splitlines()[0])
            if r.failing_case is not None:
                r.repro = repros.write(directory / "repros", t.variant.name, r.failing_case, backend.name, r.failure,
                                      args.kernel, args.kernel_signature)
                print(f"    repro: python {r.repro}")
    (directory / "summary.md").write_text(summary.summary_markdown(results, backend, args.budget))
    summary.plots(results, directory)
    failed = [r for r in results if r.failure]
    print(f"campaign: {sum(r.examples for r in results)} examples, {len(failed)} failing target(s); "
          f"summary in {directory / 'summary.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
