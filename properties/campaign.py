"""The fuzzing campaign: every selected (variant, dtype) pair, for a time budget.

    gemm-fuzz --budget 10m [--backend auto] [--dtype fp16] [--variant 'tiled*'] [--kernel my.py:matmul]
              [--workers N] [--database DIR | redis://HOST:PORT]
    gemm-fuzz --watch my.py:matmul [--backend auto] [--workers N] [-- PYTEST ARGS]     (properties/watch.py)

The budget is shared evenly among the targets (what one target overruns, the later ones give up).
Each target runs at least one example, then stops at its deadline; a failure found before it is
shrunk and simplified within what is left of the target's share (at least a second), so the whole
campaign keeps to its budget. Every example runs through the runner (properties.run.runner), as in
the tests: the main property's checks, with `hypothesis.target` climbing toward the largest
error/bound, against one example database (each target under its own key), so a failure found
once is replayed first next time; `--database` shares it between campaigns (a directory, or a Redis
server for several hosts). With `--workers N` (default on a GPU host: one per core, at most 16 a
GPU) the targets are split among N child campaigns running side by side (properties/run/fleet.py),
their kernels compiled ahead once by the parent, and their reports are merged. The report
directory gets summary.md, results.json, plots and a repro script per failure
(properties/report/summary.py); `--save-cases DIR` saves each failure's case in DIR/<its repro script's
name>/ (properties/checks/saved_case.py). Exit status 1 if any target failed; on Ctrl-C or SIGTERM the report
of what was done so far is written, then the exit status is 130 or 143.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import re
import signal
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from gemm_fuzz.properties.report.stats import TargetStats


@dataclass(kw_only=True)
class TargetResult(TargetStats):
    """One target's campaign: its statistics (seconds: the search's wall time) and its reported failure."""

    target_id: str
    variant: str = ""
    dtype: str = ""  # the dtype selector (fp16, ..., tf32)
    failure: object = None  # the reported GemmFailure
    example: object = None  # and its (simplified) example
    repro: Path | None = None
    saved: Path | None = None  # --save-cases: the folder its failure's case was saved in
    first_failure_at: int | None = None  # the example (1 = the first run) that first failed
    state: str = "done"  # or "interrupted" (stopped part way) or "not run" (the campaign stopped before it)

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {**data, "failure": self.failure.to_dict() if self.failure is not None else None,
                "example": self.example.to_dict() if self.example is not None else None,
                "repro": str(self.repro) if self.repro else None, "saved": str(self.saved) if self.saved else None}

    @classmethod
    def from_dict(cls, data: dict) -> TargetResult:
        from gemm_fuzz.properties.checks.example import Example
        from gemm_fuzz.properties.judge.failures import GemmFailure

        failure = GemmFailure.from_dict(data["failure"]) if data["failure"] else None
        return cls(**{**data, "failure": failure, "repro": Path(data["repro"]) if data["repro"] else None,
                      "saved": Path(data["saved"]) if data.get("saved") else None,
                      "example": Example.from_dict(data["example"]) if data["example"] else None})


# On a GPU a campaign target draws from this many rounds of specialization classes: four times the
# battery's, compiled ahead in parallel when the target starts (properties/model/specialization.py).
COMPILE_ROUNDS = 4


class Terminated(BaseException):
    """SIGTERM arrived (handled like Ctrl-C: report what was done, then exit)."""


def parse_budget(text: str) -> float:
    """'90s', '10m', '1h', '1h30m' or plain seconds -> seconds."""
    match = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or not match or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"invalid budget {text!r}; expected e.g. 90s, 10m, 1h30m")
    h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return h * 3600 + m * 60 + s


def _compile_budget(target) -> int:
    from gemm_fuzz.properties.model import specialization

    return specialization.pool_size(target.variant, target.dtype, rounds=COMPILE_ROUNDS)


def compile_plans(target, backend) -> list:
    """What a campaign on `target` launches on a GPU, one case per specialization class of its pool."""
    from gemm_fuzz.properties.model import strategies

    return [(target.variant, case) for case in strategies.pool_cases(
        target.variant, target.dtype, device_type=backend.device.type, max_dim=backend.max_dim,
        compile_budget=_compile_budget(target))]


def run_target(target, runner, seconds: float, database=None, compile_ahead: bool = True) -> TargetResult:
    """Fuzz one target for `seconds` (at least one example); its failure, if any, shrunk and reported.
    On a GPU its kernels are compiled ahead first, unless `compile_ahead` is off (a fleet's children:
    their parent compiles every target's once)."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import target as climb

    from gemm_fuzz.properties import checks
    from gemm_fuzz.properties.model import strategies
    from gemm_fuzz.properties.run.runner import OutOfTime

    start = time.monotonic()
    prop = runner.property(target.id, deadline=start + seconds)
    strategy = strategies.gemm_cases(target.variant, target.dtype, device_type=runner.backend.device.type,
                                     max_dim=runner.backend.max_dim, compile_budget=_compile_budget(target),
                                     big_batches=True)
    if compile_ahead:
        runner.compile_ahead(compile_plans(target, runner.backend))

    @settings(max_examples=10**9, deadline=None, database=database, print_blob=False, verbosity=Verbosity.quiet,
              suppress_health_check=list(HealthCheck), phases=[p for p in Phase if p is not Phase.explain])
    @given(case=strategy)
    def example(case):
        _Stop.in_example = True
        try:
            _Stop.raise_if_requested()
            observed = prop.run(checks.REFERENCE.example(target.variant.name, case), target.variant)
        finally:
            _Stop.in_example = False
        if observed.error_ratio:  # an exact example scores 0: nothing to climb, and ties cost Hypothesis time
            climb(observed.error_ratio, label="error / bound")

    example.hypothesis.inner_test._hypothesis_internal_add_digest = target.id.encode()  # one database key per target
    try:
        example()
    except OutOfTime:
        pass
    except Exception:  # noqa: BLE001  the reported failure is the property's
        if prop.failure is None:
            raise
    result = TargetResult(target_id=target.id, variant=target.variant.name, dtype=target.selector,
                          first_failure_at=prop.first_failing_call)
    result.failure, result.example = prop.failure, prop.example
    result.repro = getattr(prop.failure, "repro", None)
    result.saved = getattr(prop.failure, "saved", None)
    result.seconds = time.monotonic() - start
    _fill(result, runner.stats.targets.get(target.id))
    return result


def merged(results: list[TargetResult]) -> list[TargetResult]:
    """One result per target: the searches of a target run side by side in several workers, summed
    (its seconds are the longest search's: they ran at once); its reported failure is the first found."""
    by_target: dict[str, list[TargetResult]] = {}
    for r in results:
        by_target.setdefault(r.target_id, []).append(r)
    combined = []
    for shards in by_target.values():
        if len(shards) == 1:
            combined += shards
            continue
        total = TargetStats()
        for r in shards:
            total.merge(r)
        failed = next((r for r in shards if r.failure is not None), shards[0])
        result = dataclasses.replace(failed)
        _fill(result, total)
        result.seconds = max(r.seconds for r in shards)
        combined.append(result)
    return combined


def _fill(result: TargetResult, stats: TargetStats | None) -> None:
    """A target's statistics into its result, the result's seconds (the search's wall time) kept."""
    for f in dataclasses.fields(TargetStats) if stats is not None else ():
        if f.name != "seconds":
            setattr(result, f.name, copy.copy(getattr(stats, f.name)))


class _Stop:
    """Ctrl-C and SIGTERM are raised only inside an example (or between targets): raised anywhere
    else, inside Hypothesis's engine, they could leave it in a state it asserts against."""

    requested: int | None = None
    in_example = False

    @classmethod
    def raise_if_requested(cls) -> None:
        if cls.requested is not None:
            raise Terminated if cls.requested == signal.SIGTERM else KeyboardInterrupt


def _on_signal(signum, frame):
    _Stop.requested = signum
    if _Stop.in_example:
        _Stop.raise_if_requested()


def _parser() -> argparse.ArgumentParser:
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
    parser.add_argument("--report", type=Path, default=None,
                        help="report directory (default reports/campaign-<time>, e.g. "
                             "reports/campaign-20261125-153000)")
    parser.add_argument("--workers", type=int, default=None,
                        help="child campaigns the targets are split among (default on the cuda backend: one per "
                             "core, at most 16 a GPU; else 1); with --watch, the warm processes the battery's tests "
                             "are split among (default one per core, at most 8)")
    parser.add_argument("--save-cases", type=Path, default=None, metavar="DIR",
                        help="save each failure's case (its operands as launched, C as written, the float64 "
                             "reference and allowance) in DIR/<its repro script's name>/, for "
                             "gemm_fuzz.properties.load_case and run_case")
    parser.add_argument("--database", default=".hypothesis/campaign",
                        help="the example database: a directory (default .hypothesis/campaign), or redis://HOST:PORT "
                             "to share failures between hosts")
    parser.add_argument("--watch", metavar="PATH.py:FUNC",
                        help="rerun the battery on your kernel each time its file is saved, in warm processes "
                             "(pytest arguments after --)")
    parser.add_argument("--target", action="append", help=argparse.SUPPRESS)  # a child's share, by target id
    parser.add_argument("--until", type=float, help=argparse.SUPPRESS)  # a child's deadline (epoch seconds)
    return parser


class _Refused(Exception):
    """A well-formed option the campaign cannot use: one line, no usage, exit status 2."""


def _targets(args, backend, parser) -> tuple[list, dict | None]:
    """The targets the options select on this backend, and the user's kernel as workers load it."""
    from gemm_fuzz import kernels
    from gemm_fuzz.properties.launch import targets, user_kernel

    try:
        selectors = targets.parse_selectors(args.dtype)
    except ValueError as e:
        parser.error(f"--dtype: {e}")
    kernel = None
    if args.kernel:
        try:
            user = user_kernel.load(args.kernel, args.kernel_signature)
        except user_kernel.KernelSpecError as e:
            raise _Refused(f"--kernel {e}") from None
        kernel = user_kernel.loaded(user.name)[1].to_dict()
        chosen = targets.targets([user], selectors)
    else:
        chosen = targets.targets(kernels.variants(), selectors, args.variant)
    chosen = [t for t in chosen if t.variant.runs_on(backend.name) and (not args.target or t.id in args.target)]
    if not chosen:
        parser.error("no variant and dtype match the selection on this backend")
    return chosen, kernel


def main(argv: list[str] | None = None) -> int:
    from gemm_fuzz.properties.run import children

    children.die_with_parent()  # a fleet's child campaign ends with its parent (properties/run/children.py)
    parser = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    passed = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    args = parser.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    if args.watch:
        from gemm_fuzz.properties import watch

        return watch.watch(args.watch, args.backend, passed, processes=args.workers)
    if passed:
        parser.error("arguments after -- go to pytest, with --watch only")
    if args.timeout <= 0:
        parser.error(f"--timeout must be positive, got {args.timeout}")
    # overflowing and NaN inputs (near_overflow, specials) make numpy say so inside the interpreter,
    # as pyproject's filterwarnings silences for pytest
    for message in ("overflow encountered", "invalid value encountered"):
        warnings.filterwarnings("ignore", message=message, category=RuntimeWarning)

    if args.until is not None or args.workers == 1:  # one campaign process: its worker starts beside it
        _prestart(args)
    from gemm_fuzz.properties.launch import backends  # chooses the backend before the kernels load

    try:
        backend = backends.activate(args.backend)
    except Exception as e:  # noqa: BLE001
        parser.error(f"--backend {args.backend}: {e}")
    try:
        database = _database(args.database)
    except ValueError as e:
        parser.error(f"--database {args.database}: {e}")
    try:
        chosen, kernel = _targets(args, backend, parser)
    except _Refused as e:  # one line, no usage: the option was well formed
        print(f"gemm-fuzz: error: {e}", file=sys.stderr)
        return 2
    from gemm_fuzz.properties.run import fleet

    directory = (args.report or Path("reports") / time.strftime("campaign-%Y%m%d-%H%M%S")).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    workers = args.workers or fleet.default_workers(backend.name)
    if workers > 1:
        return _run_fleet(argv, fleet.shares([t.id for t in chosen], workers, backend.name), directory, backend,
                          args.budget, chosen, kernel)
    return _run_here(args, chosen, kernel, backend, database, directory)


def _run_here(args, chosen: list, kernel: dict | None, backend, database, directory: Path) -> int:
    """The targets one after another in this process, each its share of what is left of the budget."""
    from gemm_fuzz.properties.run import runner as runner_module

    mode = runner_module.default_mode(backend.name, kernel is not None, args.isolate)
    settings = runner_module.RunSettings(backend=backend.name, mode=mode, timeout=args.timeout,
                                         repros=str(directory / "repros"), kernel=kernel,
                                         save_cases=str(args.save_cases.resolve()) if args.save_cases else None)
    print("\n".join(backend.header()))
    print(f"campaign: {len(chosen)} targets, {args.budget:.0f} s, examples {settings.describe()}, "
          f"report in {directory}")
    results: list[TargetResult] = []
    status = 0
    _Stop.requested = None
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    end = started + (args.budget if args.until is None else min(args.budget, args.until - time.time()))
    runner = runner_module.Runner(settings, backend)
    current, target_started = None, started
    try:
        for i, t in enumerate(chosen, 1):
            current = TargetResult(target_id=t.id, variant=t.variant.name, dtype=t.selector)
            target_started = time.monotonic()
            share = max(0.0, end - time.monotonic()) / (len(chosen) - i + 1)  # an overrun shrinks later shares
            r = run_target(t, runner, share, database, compile_ahead=args.until is None)
            results.append(r)
            current = None
            _print(i, len(chosen), t.id, r)
            _Stop.raise_if_requested()
    except (KeyboardInterrupt, Terminated) as stop:
        status = 143 if isinstance(stop, Terminated) else 130
        if current is not None:  # the target under way: what its examples measured so far
            _fill(current, runner.stats.targets.get(current.target_id))
            current.seconds, current.state = time.monotonic() - target_started, "interrupted"
            results.append(current)
        done = {r.target_id for r in results}
        results += [TargetResult(target_id=t.id, variant=t.variant.name, dtype=t.selector, state="not run")
                    for t in chosen if t.id not in done]
        print(f"campaign: interrupted ({'SIGTERM' if status == 143 else 'Ctrl-C'}); writing the report of what "
              "was done", flush=True)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the report short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    finally:
        runner.close()
        if not status:  # interrupted, they stay ignored until the report is written
            for s, handler in previous.items():
                signal.signal(s, handler)
    elapsed = time.monotonic() - started
    return _report(results, backend, args.budget, elapsed, directory, status)


def _prestart(args) -> None:
    """Start the examples' worker before this process imports torch (properties/run/isolation.py), when
    examples will run in one: a user's kernel, or any kernel on a GPU, unless isolation is off."""
    from gemm_fuzz.properties.launch import kernel_spec
    from gemm_fuzz.properties.run import isolation

    if args.isolate == "off" or (not args.kernel and args.backend != "cuda" and args.isolate != "on"):
        return
    try:
        kernel = args.kernel and {"spec": kernel_spec.canonical(args.kernel), "signature": args.kernel_signature}
    except ValueError:
        return  # reported once the kernel is loaded
    isolation.prestart(args.backend, kernel)
    if args.backend == "cuda" and args.until is None:  # a fleet's child compiles nothing ahead: its parent does
        isolation.prestart(args.backend, kernel)  # compiles ahead (properties/launch/ahead.py)


def _report(results: list[TargetResult], backend, budget: float, elapsed: float, directory: Path, status: int,
            workers: list[dict] | None = None) -> int:
    """summary.md, results.json and the plots; the exit status."""
    from gemm_fuzz.properties.report import stats, summary

    text = summary.summary_markdown(results, backend, budget, elapsed, interrupted=bool(status))
    missed = [(r.target_id, stats.unreached(r)) for r in results if stats.unreached(r)]
    if missed:  # what the cases never reached: a bug hiding there was not looked for
        text += "\n## What no example reached\n\n| target | never reached |\n|---|---|\n"
        text += "".join(f"| {t} | {', '.join(missing)} |\n" for t, missing in missed)
    unrunnable = [(r.target_id, why) for r in results for why in sorted(r.not_runnable.values())]
    if unrunnable:  # configurations the autotuner would prune here: never drawn again
        text += "\n## Configurations this device cannot run\n\n| target | configuration and reason |\n|---|---|\n"
        text += "".join(f"| {t} | {why} |\n" for t, why in unrunnable)
    if workers:  # which worker ran where, and how fast
        text += "\n## Workers\n\n| worker | device | targets | examples | examples/s |\n|---|---|---|---|---|\n"
        for w in workers:
            examples = sum(r["examples"] for r in w["results"])
            text += (f"| {w['worker']} | {w['device']} | {len(w['results'])} | {examples} | "
                     f"{examples / max(w['elapsed'], 1e-9):.1f} |\n")
    (directory / "summary.md").write_text(text)
    (directory / "results.json").write_text(json.dumps({
        "worker": directory.name, "device": _device(backend), "elapsed": elapsed,
        "results": [r.to_dict() for r in results], "workers": workers or []}, indent=1))
    summary.plots(results, directory)
    failed = [r for r in results if r.failure is not None]
    print(f"campaign: {sum(r.examples for r in results)} examples in {elapsed:.0f} s, {len(failed)} failing "
          f"target(s); summary in {directory / 'summary.md'}")
    return status or (1 if failed else 0)


def _device(backend) -> str:
    """What ran the examples: the GPU (with its index among the host's, where a worker was pinned) or the CPU."""
    if backend.device.type != "cuda":
        return f"CPU ({backend.device_name})"
    import torch

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return f"GPU {visible if visible is not None else torch.cuda.current_device()} ({torch.cuda.get_device_name()})"


def _run_fleet(argv: list[str], plan, directory: Path, backend, budget: float, chosen, kernel) -> int:
    """The targets split among child campaigns (properties/run/fleet.py), every target's kernels compiled
    ahead once, here, while the children start; one report over all of them."""
    from gemm_fuzz.properties.run import fleet
    from gemm_fuzz.properties.run.runner import Runner, RunSettings

    print("\n".join(backend.header()))
    print(f"campaign: {sum(len(s.target_ids) for s in plan)} targets over {len(plan)} workers, {budget:.0f} s, "
          f"report in {directory}", flush=True)
    started = time.monotonic()
    until = time.time() + budget - min(2.0, 0.1 * budget)  # time left for the merged report
    with Runner(RunSettings(backend=backend.name, mode="worker", kernel=kernel), backend) as compiler:
        compiler.compile_ahead(p for t in chosen for p in compile_plans(t, backend))
        workers, codes, interrupted = fleet.run(argv, plan, directory, until,
                                                on_line=lambda line: print(line, flush=True))
    results = merged([TargetResult.from_dict(r) for w in workers for r in w["results"]])
    for w in workers:
        for r in w["results"]:
            print(f"  {w['worker']} ({w['device']}): {r['target_id']:<24} {r['examples']:>6} examples  "
                  f"{'FAIL' if r['failure'] else 'ok'}")
    signals = [c for c in codes if c in (130, 143)]
    status = (signals[0] if signals else 130) if interrupted or signals else 0
    if any(c not in (0, 1, 130, 143) for c in codes) and not status:
        status = 1  # a worker that died: its log says why
    return _report(results, backend, budget, time.monotonic() - started, directory, status, workers)


def _database(spec: str):
    """The example database: a directory, or a Redis server (redis://HOST:PORT[/DB]) shared by hosts."""
    from hypothesis.database import DirectoryBasedExampleDatabase

    if not spec.startswith(("redis://", "rediss://")):
        return DirectoryBasedExampleDatabase(spec)
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError:
        raise ValueError("a Redis database needs the redis package: pip install 'triton-gemm-fuzz[redis]'") from None
    client = redis.Redis.from_url(spec)
    try:
        client.ping()
    except redis.exceptions.RedisError as e:
        raise ValueError(f"no Redis server answers there ({e})") from None
    return RedisExampleDatabase(client)


def _print(i: int, total: int, target_id: str, r: TargetResult) -> None:
    from gemm_fuzz.properties.report import stats

    verdict = "FAIL" if r.failure is not None else "ok"
    worst = stats.worst(r)[0]
    print(f"[{i}/{total}] {target_id:<24} {r.examples:>6} examples {r.seconds:7.1f} s  worst error/bound {worst}  "
          f"{verdict}", flush=True)
    if r.failure is not None:
        print(f"    {r.failure.kind}: {r.example.case.describe()}")
        print(f"    {r.failure.headline()}")  # the reason in a few words, whole
        if r.repro is not None:
            print(f"    repro: python {r.repro}")
        if r.saved is not None:
            print(f"    saved: {r.saved}")


if __name__ == "__main__":
    sys.exit(main())
