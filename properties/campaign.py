"""The fuzzing campaign: every selected (variant, dtype) pair, for a time budget.

    gemm-fuzz --budget 10m [--backend auto] [--dtype fp16] [--variant 'tiled*'] [--kernel my.py:matmul]

The budget is shared evenly among the targets (what one target overruns, the later ones give up).
Each target runs at least one example, then stops at its deadline; a failure found before it is
shrunk and simplified within what is left of the target's share (at least a second), so the whole
campaign keeps to its budget. Every example runs through the runner (properties.run.runner), as in
the tests: the main property's checks, with `hypothesis.target` climbing toward the largest
error/bound, against one example database (each target under its own key), so a failure found
once is replayed first next time. The report directory gets summary.md, plots and a repro script
per failure (properties/report/summary.py). Exit status 1 if any target failed; on Ctrl-C or
SIGTERM the report of what was done so far is written, then the exit status is 130 or 143.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TargetResult:
    target_id: str
    variant: str = ""
    dtype: str = ""  # the dtype selector (fp16, ..., tf32)
    examples: int = 0
    exact: int = 0
    seconds: float = 0.0
    worst_ratio: float | None = None  # of the passing examples
    worst_case: str = ""
    failures: int = 0  # failing examples (the failure and its shrinking steps)
    failing_ratio: float | None = None  # the largest error / bound of a failing example, where it has one
    failing_case: str = ""
    failure: object = None  # the reported GemmFailure
    example: object = None  # and its (simplified) example
    repro: Path | None = None
    kinds: dict = field(default_factory=dict)
    ratios: list[float] = field(default_factory=list)
    torch_ratios: list[float] = field(default_factory=list)
    limitations: int = 0


class Terminated(BaseException):
    """SIGTERM arrived (handled like Ctrl-C: report what was done, then exit)."""


def parse_budget(text: str) -> float:
    """'90s', '10m', '1h', '1h30m' or plain seconds -> seconds."""
    match = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or not match or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"invalid budget {text!r}; expected e.g. 90s, 10m, 1h30m")
    h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return h * 3600 + m * 60 + s


def run_target(target, runner, seconds: float, database=None) -> TargetResult:
    """Fuzz one target for `seconds` (at least one example); its failure, if any, shrunk and reported."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import target as climb

    from properties.model import strategies
    from properties.run.examples import Example
    from properties.run.runner import OutOfTime

    start = time.monotonic()
    prop = runner.property(target.id, deadline=start + seconds)
    strategy = strategies.gemm_cases(target.variant, target.dtype, device_type=runner.backend.device.type,
                                     max_dim=runner.backend.max_dim)

    @settings(max_examples=10**9, deadline=None, database=database, print_blob=False, verbosity=Verbosity.quiet,
              suppress_health_check=list(HealthCheck), phases=[p for p in Phase if p is not Phase.explain])
    @given(case=strategy)
    def example(case):
        observed = prop.run(Example("reference", target.variant.name, case), target.variant)
        climb(observed.error_ratio, label="error / bound")

    example.hypothesis.inner_test._hypothesis_internal_add_digest = target.id.encode()  # one database key per target
    result = TargetResult(target.id, target.variant.name, target.selector)
    try:
        example()
    except OutOfTime:
        pass
    except Exception:  # noqa: BLE001  the reported failure is the property's
        if prop.failure is None:
            raise
    result.failure, result.example = prop.failure, prop.example
    result.repro = getattr(prop.failure, "repro", None)
    result.seconds = time.monotonic() - start
    _fill(result, runner.stats.targets.get(target.id))
    return result


def _fill(result: TargetResult, stats) -> None:
    if stats is None:
        return
    result.examples, result.exact, result.kinds = stats.examples, stats.exact, dict(stats.kinds)
    result.worst_ratio, result.worst_case = stats.worst_ratio, stats.worst_case
    result.failures, result.failing_ratio, result.failing_case = stats.failures, stats.failing_ratio, stats.failing_case
    result.ratios, result.torch_ratios = list(stats.ratios), list(stats.torch_ratios)
    result.limitations = stats.limitations


def _on_sigterm(signum, frame):
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gemm-fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=parse_budget, default=parse_budget("10m"),
                        help="total time, e.g. 90s, 10m, 1h (default 10m)")
    parser.add_argument("--backend", choices=("auto", "interpreter", "cuda"), default="auto")
    parser.add_argument("--dtype", action="append", help="input dtypes (repeatable): fp16, bf16, fp32, tf32, ...")
    parser.add_argument("--variant", action="append", help="variant name globs (repeatable)")
    parser.add_argument("--kernel", help="fuzz your own kernel instead: PATH.py:FUNC or module:FUNC")
    parser.add_argument("--kernel-signature", choices=("plain", "leetgpu"), default=None)
    parser.add_argument("--isolate", choices=("auto", "on", "off"), default="auto",
                        help="run examples in a worker process (auto: on, except built-in variants in the interpreter)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one example may take in a worker")
    parser.add_argument("--report", type=Path, default=None, help="report directory (default reports/<time>)")
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error(f"--timeout must be positive, got {args.timeout}")
    # overflowing and NaN inputs (near_overflow, specials) make numpy say so inside the interpreter,
    # as pyproject's filterwarnings silences for pytest
    for message in ("overflow encountered", "invalid value encountered"):
        warnings.filterwarnings("ignore", message=message, category=RuntimeWarning)

    from properties.run import backends  # chooses the backend before the kernels load

    try:
        backend = backends.activate(args.backend)
    except Exception as e:  # noqa: BLE001
        parser.error(f"--backend {args.backend}: {e}")
    from hypothesis.database import DirectoryBasedExampleDatabase

    import kernels
    from properties.report import summary
    from properties.run import runner as runner_module
    from properties.run import targets, user_kernel

    try:
        selectors = targets.parse_selectors(args.dtype)
    except ValueError as e:
        parser.error(f"--dtype: {e}")
    kernel = None
    if args.kernel:
        try:
            user = user_kernel.load(args.kernel, args.kernel_signature)
        except user_kernel.KernelSpecError as e:
            parser.error(str(e))
        ref = user_kernel.loaded(user.name)[1]
        kernel = {"spec": ref.spec, "signature": ref.signature, "path": ref.path, "digest": ref.digest}
        chosen = targets.targets([user], selectors)
    else:
        chosen = targets.targets(kernels.variants(), selectors, args.variant)
    chosen = [t for t in chosen if t.variant.runs_on(backend.name)]
    if not chosen:
        parser.error("no variant and dtype match the selection on this backend")
    directory = (args.report or Path("reports") / time.strftime("campaign-%Y%m%d-%H%M%S")).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    mode = runner_module.default_mode(backend.name, kernel is not None, args.isolate)
    settings = runner_module.RunSettings(backend=backend.name, mode=mode, timeout=args.timeout,
                                         repros=str(directory / "repros"), kernel=kernel)
    database = DirectoryBasedExampleDatabase(".hypothesis/campaign")

    print("\n".join(backend.header()))
    print(f"campaign: {len(chosen)} targets, {args.budget:.0f} s, examples {settings.describe()}, "
          f"report in {directory}")
    results: list[TargetResult] = []
    status = 0
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    started = time.monotonic()
    end = started + args.budget
    runner = runner_module.Runner(settings, backend)
    current = None
    try:
        for i, t in enumerate(chosen, 1):
            current = TargetResult(t.id, t.variant.name, t.selector)
            share = max(0.0, end - time.monotonic()) / (len(chosen) - i + 1)  # an overrun shrinks later shares
            r = run_target(t, runner, share, database)
            results.append(r)
            current = None
            _print(i, len(chosen), t.id, r)
    except (KeyboardInterrupt, Terminated) as stop:
        status = 143 if isinstance(stop, Terminated) else 130
        if current is not None:  # the target under way: what its examples measured so far
            _fill(current, runner.stats.targets.get(current.target_id))
            results.append(current)
        print(f"campaign: interrupted ({'SIGTERM' if status == 143 else 'Ctrl-C'}); writing the report of what "
              "was done", flush=True)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the report short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    finally:
        runner.close()
        signal.signal(signal.SIGTERM, previous)
    elapsed = time.monotonic() - started
    (directory / "summary.md").write_text(summary.summary_markdown(results, backend, args.budget, elapsed,
                                                                   interrupted=bool(status)))
    summary.plots(results, directory)
    failed = [r for r in results if r.failure is not None]
    print(f"campaign: {sum(r.examples for r in results)} examples in {elapsed:.0f} s, {len(failed)} failing "
          f"target(s); summary in {directory / 'summary.md'}")
    return status or (1 if failed else 0)


def _print(i: int, total: int, target_id: str, r: TargetResult) -> None:
    from properties.report import stats

    verdict = "FAIL" if r.failure is not None else "ok"
    worst = stats.worst(r)[0]
    print(f"[{i}/{total}] {target_id:<24} {r.examples:>6} examples {r.seconds:7.1f} s  worst error/bound {worst}  "
          f"{verdict}", flush=True)
    if r.failure is not None:
        print(f"    {r.failure.kind}: {r.example.case.describe()}")
        print("    " + r.failure.message.strip().splitlines()[0])
        if r.repro is not None:
            print(f"    repro: python {r.repro}")


if __name__ == "__main__":
    sys.exit(main())
