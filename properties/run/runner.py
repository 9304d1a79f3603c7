"""The runner: the only way an example runs, for the battery, the campaign, the mutation hunt, the
repro scripts and the corpus.

`Runner` owns how examples run in this process: the mode (here, in a worker process, in a worker
under compute-sanitizer), the per-example timeout, the statistics, and the repro scripts. Its
settings travel in one explicit `RunSettings` value. `Runner.property(target)` gives the object one
Hypothesis test calls for each example (`PropertyRun.run`), which bounds what a failing test costs:

  - a hang or a crash (TimedOut, Crashed) is never run twice: the same example re-raises its failure;
  - once a test has failed, its further examples (Hypothesis shrinking) get a bounded time, a hang's
    or a crash's half the timeout, any other failure's `shrink_seconds`; past it, new examples are
    left out (Hypothesis rejects them), so the smallest case found so far is reported;
  - the final failing example is simplified directly (plain layouts, `ones`, seed 0, the default
    output dtype, each dimension as small as still fails), its repro script written and named, and
    (`save_cases`) its case saved beside (`Runner.save_case`, properties/checks/saved_case.py).

An interpreter limitation (Triton's interpreter failing, not the kernel) is counted and the example
left out: it never fails the kernel.
"""

from __future__ import annotations

import copy
import dataclasses
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gemm_fuzz.properties import checks
from gemm_fuzz.properties.checks import NothingJudged, saved_case
from gemm_fuzz.properties.checks.example import Example, Observation
from gemm_fuzz.properties.judge.failures import (
    Crashed,
    GemmFailure,
    LauncherRefused,
    NotBitExact,
    TimedOut,
    ValueOutOfBound,
)
from gemm_fuzz.properties.launch import ahead, backends, targets
from gemm_fuzz.properties.model import runnable
from gemm_fuzz.properties.report import reached, repros
from gemm_fuzz.properties.report.stats import Stats
from gemm_fuzz.properties.run import hypothesis_pareto, isolation
from gemm_fuzz.properties.run.deadline import Overrun, bounded
from gemm_fuzz.reference.formats import by_name

hypothesis_pareto.install()  # every search runs through a Runner: its pareto front compares cheaply

MODES = ("process", "worker", "sanitize", "racecheck")
# the compute-sanitizer tool each GPU-only mode runs its worker under
SANITIZER = {"sanitize": "memcheck", "racecheck": "racecheck"}
SIMPLIFY_TRIES = 200  # distinct cases a failure's simplification may run (its runs are cached by case)


class OutOfTime(BaseException):
    """A property's deadline passed (not an Exception, so Hypothesis lets it through at once)."""


@dataclass(frozen=True)
class RunSettings:
    backend: str = "interpreter"  # "interpreter" or "cuda"
    mode: str = "process"  # "process": here; "worker": in a child; "sanitize" / "racecheck": in a child under
    #                        compute-sanitizer memcheck / racecheck
    timeout: float = 120.0  # seconds one example may take in a worker
    shrink_seconds: float = 45.0  # what a failing test's further examples may take, in all
    repros: str | None = None  # directory for repro scripts (None: write none)
    save_cases: str | None = None  # directory each reported failure's case is saved under (None: none saved)
    kernel: dict | None = None  # the user's kernel workers load: {spec, signature, path, digest}

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if self.mode in SANITIZER and self.backend != "cuda":
            raise ValueError(f"the {self.mode} mode runs compute-sanitizer on compiled kernels: it needs the cuda "
                             "backend")
        if self.timeout <= 0 or self.shrink_seconds < 0:
            raise ValueError(f"timeout must be positive and shrink_seconds >= 0, got {self.timeout}, "
                             f"{self.shrink_seconds}")

    def describe(self) -> str:
        if self.mode == "process":
            return "in this process"
        under = f" under compute-sanitizer {self.sanitizer}" if self.sanitizer else " process"
        return f"in a worker{under}, {self.timeout:g} s per example"

    @property
    def sanitizer(self) -> str | None:
        """The compute-sanitizer tool examples run under, if any."""
        return SANITIZER.get(self.mode)


def default_mode(backend: str, user_kernel: bool, isolate: str = "auto") -> str:
    """Where examples run: `isolate` on -> a worker, off -> here; auto -> a worker, except the built-in
    variants in the interpreter, whose sanitizer refuses a stray store before it corrupts the process."""
    if isolate == "auto":
        isolate = "off" if backend == "interpreter" and not user_kernel else "on"
    return "worker" if isolate == "on" else "process"


class Runner:
    """How examples run in this process (see the module docstring)."""

    def __init__(self, settings: RunSettings, backend: backends.Backend):
        self.settings = settings
        self.backend = backend
        self.stats = Stats()
        self._workers: dict[tuple[str, str | None], isolation.Worker] = {}
        self._ahead: set[tuple[str, object]] = set()  # (variant, case) plans handed to compile_ahead
        self._compiler: isolation.Worker | None = None  # the process that compiles ahead (a worker mode's)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for w in self._workers.values():
            w.release()
        self._workers.clear()
        if self._compiler is not None:  # what it has not compiled yet, no example needs now
            self._compiler.close(kill=True)
            self._compiler = None

    def worker(self, backend: str, sanitizer: str | None = None) -> isolation.Worker:
        key = (backend, sanitizer)
        if key not in self._workers:
            self._workers[key] = isolation.Worker(backend, sanitizer=sanitizer, kernel=self._worker_kernel())
        return self._workers[key]

    def _worker_kernel(self) -> dict | None:
        """The user's kernel as a worker loads it: {spec, signature}."""
        kernel = self.settings.kernel
        return {"spec": kernel["spec"], "signature": kernel.get("signature")} if kernel else None

    def compile_ahead(self, plans) -> None:
        """Start compiling, in parallel, what each (variant, GemmCase) in `plans` launches
        (properties/launch/ahead.py): in this process when examples run here, else in a worker process of its
        own, whose kernels reach the examples' worker through Triton's disk cache. On the interpreter,
        nothing. Each plan is handed over once."""
        if self.backend.interpreted:
            return
        plans = [(v, case) for v, case in plans if (v.name, case) not in self._ahead]
        self._ahead.update((v.name, case) for v, case in plans)
        if not plans:
            return
        if self.settings.mode == "process":
            for variant, case in plans:
                ahead.compile_ahead(variant, [case], self.backend)
            return
        named = [(v.name, dataclasses.asdict(case)) for v, case in plans if v is _safe_resolve(v.name)]
        if named:  # in a process of their own: a launcher that hangs or crashes there costs no example
            if self._compiler is None:
                self._compiler = isolation.Worker(self.backend.name, kernel=self._worker_kernel())
            self._compiler.send({"ahead": named})

    # --- one example ---------------------------------------------------------------------------

    def _resolver(self, variant):
        if variant is None:
            return targets.resolve
        return lambda name: variant if name == variant.name else targets.resolve(name)

    def _in_worker(self, example: Example, variant) -> bool:
        """A worker can run it: the mode asks for one and every variant it names loads there by name."""
        if self.settings.mode == "process":
            return False
        if variant is not None and variant is not _safe_resolve(variant.name):
            return False  # a variant built in this process (a test's double): only here
        return True

    def resolve(self, name: str):
        """A variant by name (properties/launch/targets.py)."""
        return targets.resolve(name)

    def run_once(self, example: Example, variant=None, timeout: float | None = None,
                 deadline: float | None = None) -> Observation:
        """Run one example as its check runs it, for at most `timeout` seconds in a worker (and not past
        `deadline`, monotonic); raises a GemmFailure with its context."""
        return checks.get(example.check).run(example, self, variant, timeout or self.settings.timeout, deadline)

    def execute(self, example: Example, variant, timeout: float, deadline: float | None) -> Observation:
        """Run one example in one process, where the settings say: here, or in a worker."""
        check = checks.get(example.check)
        if not self._in_worker(example, variant):
            limit = timeout if deadline is None else min(timeout, deadline - time.monotonic())
            try:
                with bounded(limit):
                    return checks.execute(check, example, self._resolver(variant), self.backend)
            except Overrun:
                raise TimedOut(f"no result after {limit:.0f} s of CPU time in this process (a kernel that never "
                               "terminates?)", seconds=limit).with_context(
                    variant=example.variant or "(peers)", case=example.case.describe(),
                    check=check.describe(example)) from None
        sanitizer = self.settings.sanitizer
        start = time.perf_counter()
        try:
            answer = self.worker(self.backend.name, sanitizer).run(example.to_dict(), timeout=timeout,
                                                                   deadline=deadline)
            observed = isolation.verdict(answer, sanitizer)
        except GemmFailure as failure:
            failure.with_context(variant=example.variant or "(peers)", case=example.case.describe(),
                                 check=check.describe(example))
            raise
        return Observation(observed["exact"], observed["error_ratio"], time.perf_counter() - start,
                           observed.get("torch_ratio"), phases=observed.get("phases", {}))

    def save_case(self, example: Example, directory: Path, failure=None, variant=None,
                  repro: Path | None = None) -> Path:
        """Save the case of `example` into `directory` (properties/checks/saved_case.py): its variant run on
        its case once more, where its examples run (here, or in a worker), its operands recorded as launched
        and C as the kernel wrote it, with the float64 reference and the allowance; a case that hung or
        crashed (`failure`: the GemmFailure reported, or a repro script's record of it) is not launched
        again. Returns the folder; SavedCaseError when it cannot hold a save."""
        directory = saved_case.prepare(directory)
        save = saved_case.example_of(example, directory, launch=saved_case.relaunched(failure))
        seen = None
        try:
            self.run_once(save, variant if variant is not None and variant.name == save.variant else None)
        except GemmFailure as found:
            seen = found
        return saved_case.finish(directory, example, failure, seen, self.settings, repro)

    def output(self, backend: str, output: Example, variant, timeout: float) -> Observation:
        """An `output` example (which must pass) run on `backend`: its observation with C's values; the
        interpreter's always in a worker."""
        if backend == self.backend.name and not self._in_worker(output, variant):
            return checks.execute(checks.OUTPUT, output, self._resolver(variant), self.backend)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "c.npy"
            answer = self.worker(backend, self.settings.sanitizer if backend == "cuda" else None).run(
                output.to_dict(), timeout=timeout, output=path)
            observed = Observation(**isolation.verdict(answer, None))
            observed.values = np.load(path)
            return observed

    # --- Hypothesis tests ----------------------------------------------------------------------

    def property(self, target_id: str, deadline: float | None = None, record: bool = True) -> PropertyRun:
        """The examples of one test (or campaign target); `record`: counted in this runner's statistics
        under `target_id` (a replayed repro script is not a target)."""
        return PropertyRun(self, target_id, deadline, record)


def check(variant, case, backend: backends.Backend | None = None) -> Observation:
    """The main property on one case, in this process: for tests and tools that judge one case."""
    backend = backend or backends.current()
    with Runner(RunSettings(backend=backend.name), backend) as runner:
        return runner.run_once(checks.REFERENCE.example(variant.name, case), variant)


def _safe_resolve(name: str):
    try:
        return targets.resolve(name)
    except KeyError:
        return None


_WRONG_VALUE = (NotBitExact, ValueOutOfBound)


def _same_kind(found: GemmFailure, first: GemmFailure) -> bool:
    """Does `found` show the bug `first` showed? A wrong value, bit-exact or not, is one kind."""
    return type(found) is type(first) or (isinstance(found, _WRONG_VALUE) and isinstance(first, _WRONG_VALUE))


def _is_final() -> bool:
    """Is this Hypothesis's last run of its minimal failing example?"""
    try:
        from hypothesis.control import current_build_context

        return bool(current_build_context().is_final)
    except Exception:  # noqa: BLE001  outside a Hypothesis test
        return False


def _reject() -> None:
    from hypothesis import reject

    reject()


class PropertyRun:
    """The examples of one Hypothesis test (or one campaign target): see the module docstring."""

    def __init__(self, runner: Runner, target_id: str, deadline: float | None = None, record: bool = True):
        self.runner = runner
        self.target_id = target_id
        self.stats = runner.stats if record else Stats()  # a replay's are its own, reported nowhere
        self.deadline = deadline  # monotonic: no new example after it (the campaign's share)
        self.first_failure: float | None = None
        self.shrink_until: float | None = None
        # example key -> its verdict: an example is run once (a hang or a crash never twice, and
        # Hypothesis, replaying a known example after the shrinking budget, gets the same answer)
        self.known: dict[str, GemmFailure | Observation] = {}
        self.failure: GemmFailure | None = None  # the final, reported failure
        self.example: Example | None = None  # and its example
        self.ran = 0  # examples run (a campaign target runs at least one, whatever its deadline)
        self.calls = 0  # calls of run(), replays of known examples included
        self.first_failing_call: int | None = None  # the call (1 = the first) that first failed
        self.internal: GemmFailure | None = None  # an internal error of the suite, once one happened
        self.database_key = target_id  # where `search` keeps its examples (the plugin: the test's node id)

    def compile_ahead(self, plans) -> None:
        """What this test's examples will launch, (variant, GemmCase) pairs: compiled ahead, in parallel
        (Runner.compile_ahead)."""
        self.runner.compile_ahead(plans)

    def check(self, check, subject) -> None:
        """One battery test: `check` (properties/checks) on `subject` (a Target, an AgreementGroup, a repro
        script), its explicit examples first, then (a searched check) Hypothesis's draws."""
        from hypothesis import settings

        backend = self.runner.backend
        explicit = check.stratified(subject, backend)
        if check.searched:
            self.search(check.examples(subject, backend), explicit, check.variant(subject), climb=check.climb,
                        max_examples=check.max_examples(settings.default.max_examples))
            return
        chosen = check.settings(subject, self.runner.settings)
        if chosen == self.runner.settings:
            for example in explicit:
                self.run(example, check.variant(subject))
            return
        with Runner(chosen, backend) as other:  # a replay in its recorded mode (a sanitizer, a timeout)
            run = other.property(self.target_id, record=False)
            for example in explicit:
                run.run(example, check.variant(subject))

    def search(self, examples, explicit: list[Example], variant=None, *, climb: bool = False,
               max_examples: int | None = None) -> None:
        """One Hypothesis test over `examples` (a strategy of Examples), the `explicit` ones run first, in
        order (properties/model/stratified.py): each example through `run`, its example database entries
        under `database_key`. `climb` steers the search toward the largest error / bound; `max_examples`
        overrides the profile's count of drawn examples."""
        from hypothesis import example, given, settings
        from hypothesis import target as steer

        def check(example):
            observed = self.run(example, variant)
            if climb and observed.error_ratio:  # an exact example scores 0: nothing to climb
                steer(observed.error_ratio, label="error / bound")

        test = given(example=examples)(check)
        for chosen in reversed(explicit):  # each decorator runs before those applied earlier
            test = example(example=chosen)(test)
        if max_examples is not None:
            test = settings(max_examples=max_examples)(test)
        test.hypothesis.inner_test._hypothesis_internal_add_digest = self.database_key.encode()
        from hypothesis.errors import FailedHealthCheck, Unsatisfiable

        try:
            test()
        except (FailedHealthCheck, Unsatisfiable) as error:  # every example was left out
            judged = self.stats.targets.get(self.target_id)
            if judged is None or judged.examples or not judged.limitations:
                raise
            raise NothingJudged(f"{judged.limitation} ({judged.limitations} example(s) tried, none runnable "
                                "in the interpreter)") from error

    def run(self, example: Example, variant=None) -> Observation:
        self.calls += 1
        try:
            return self._run(example, variant)
        except GemmFailure as failure:
            if self.first_failing_call is None:
                self.first_failing_call = self.calls
            if "case" not in failure.__dict__:  # not reported through _report (an explicit example's)
                failure.case = example.case
            # One place raises every failure, with a fresh traceback and no chained context: Hypothesis
            # tells bugs apart by the type, the line and the context of an exception, so a failure
            # replayed from memory is the same bug as the first time, and two of one kind are one bug.
            failure.__context__ = None
            raise failure.with_traceback(None) from None

    def _run(self, example: Example, variant) -> Observation:
        settings, stats = self.runner.settings, self.stats
        if self.internal is not None:  # the suite's own error: this test's every example reports it
            raise copy.copy(self.internal)
        final = _is_final()
        key = example.key()
        if key in self.known:
            known = self.known[key]
            if isinstance(known, Observation):
                return known
            failure = copy.copy(known)
            if final:
                failure = self._report(example, variant, failure, simplify=not isinstance(failure, (TimedOut, Crashed)))
            raise failure
        now = time.monotonic()
        deadline = None
        if self.first_failure is None:
            if self.deadline is not None and self.ran and now > self.deadline:
                raise OutOfTime
        elif not final:
            if now >= self.shrink_until:
                stats.left_out(self.target_id)
                _reject()
            deadline = self.shrink_until
        else:  # an explicit example after the test's first failure: the verdict is in, it is left out
            stats.left_out(self.target_id)
            _reject()
        start = time.monotonic()
        self.ran += 1
        try:
            observed = self.runner.run_once(example, variant, settings.timeout, deadline)
        except GemmFailure as failure:
            if failure.blame == "suite":  # reported once, with its traceback; never run again
                stats.failed(self.target_id, failure)
                self.internal = self._report(example, variant, failure, simplify=False)
                raise copy.copy(self.internal) from None
            if failure.blame == "device":
                failure = self._not_runnable(failure, variant)
            if not failure.kernel_fault:
                stats.failed(self.target_id, failure)
                _reject()
            fault = isinstance(failure, (TimedOut, Crashed))
            if isinstance(failure, TimedOut) and failure.seconds < settings.timeout:
                stats.left_out(self.target_id)  # cut short by the shrinking budget: not a verdict
                _reject()
            self._failed(key, failure, time.monotonic() - start, fault=fault)
            self._reached(example, variant)
            if final:
                failure = self._report(example, variant, failure, simplify=not fault)
            raise failure
        stats.passed(self.target_id, observed, example.case.describe())
        self._reached(example, variant)
        self.known[key] = observed
        return observed

    def _not_runnable(self, failure: GemmFailure, variant) -> GemmFailure:
        """Record a configuration this device cannot run (the strategies draw it no more) and leave the
        example out; when it was the last runnable one, the kernel cannot run here at all: a failure."""
        name = failure.fields["variant"]
        variant = variant if variant is not None and variant.name == name else _safe_resolve(name)
        device = self.runner.backend.device.type
        dtype, config = failure.fields["dtype"], tuple(tuple(pair) for pair in failure.fields["config"])
        runnable.record(variant, device, dtype, config, failure.fields["reason"])
        index = runnable.index(variant, device, dtype, config)
        full = variant.configs_for(device, by_name(dtype).dtype)[index]
        label = ",".join(f"{k}={v}" for k, v in full.items())
        whose = "" if self.target_id.startswith(f"{variant.name}-") else f"{variant.name} "  # a peer's
        self.stats.not_runnable(self.target_id, f"config {index}", f"{whose}config {index} ({label}) not "
                                       f"runnable on {failure.fields['device']}: {failure.fields['reason']}")
        space = variant.configs_for(device, by_name(dtype).dtype)
        if len(runnable.blocked(variant, dtype)) < len(space):
            return failure
        reasons = "; ".join(f"config {i}: {r}" for i, r in sorted(runnable.reasons(variant, dtype).items()))
        refused = LauncherRefused(f"none of the {len(space)} configurations of {variant.name} runs on "
                                  f"{failure.fields['device']} with {dtype} inputs: {reasons}")
        refused.context = dict(failure.context)
        return refused

    def _reached(self, example: Example, variant) -> None:
        """Count the features the example's case reached, for its target (properties/report/reached.py)."""
        variant = variant or _safe_resolve(example.variant)
        if variant is None or not checks.get(example.check).counts_reached:
            return
        device = self.runner.backend.device.type
        self.stats.reached(self.target_id, reached.features(example.case, variant, device),
                                  lambda: reached.expected(variant, device, example.case.dtype))

    def _failed(self, key: str, failure: GemmFailure, seconds: float, fault: bool) -> None:
        self.stats.failed(self.target_id, failure, seconds)
        now = time.monotonic()
        if self.first_failure is None:
            self.first_failure = now
            budget = self.runner.settings.timeout / 2 if fault else self.runner.settings.shrink_seconds
            self.shrink_until = now + budget
            if self.deadline is not None:
                self.shrink_until = min(self.shrink_until, max(self.deadline, now + 1.0))
        self.known[key] = failure

    def _report(self, example: Example, variant, failure: GemmFailure, simplify: bool) -> GemmFailure:
        """The final failure: simplified where it can be, with its repro script written and named."""
        if simplify:
            example, failure = self._simplify(example, variant, failure)
        settings = self.runner.settings
        if settings.repros:
            path = repros.write(Path(settings.repros), example, settings, failure)
            failure.repro = path
            try:
                from hypothesis import note

                note(f"repro: python {path}")
            except Exception:  # noqa: BLE001  outside a Hypothesis test
                pass
        if settings.save_cases:
            self._save(example, variant, failure)
        failure.case = example.case  # the case it is reported on (the summary lists bugs' cases by it)
        self.stats.reported_failure(self.target_id, failure, example.case.describe())
        self.failure, self.example = failure, example
        return failure

    def _save(self, example: Example, variant, failure: GemmFailure) -> None:
        """The reported failure's case saved under `save_cases`, in the folder named after its repro script
        (failure.saved); a save that cannot be made leaves the report as it is, saying why."""
        settings = self.runner.settings
        repro = getattr(failure, "repro", None)
        name = Path(repro).stem if repro else Path(repros.name_for(repros.record(example, settings, failure))).stem
        try:
            failure.saved = self.runner.save_case(example, Path(settings.save_cases) / name, failure, variant, repro)
        except Exception as error:  # noqa: BLE001  never in the way of the failure it would save
            failure.saved_error = f"{type(error).__name__}: {error}"

    def _simplify(self, example: Example, variant, failure: GemmFailure) -> tuple[Example, GemmFailure]:
        """Try plainer cases directly, keeping each that still fails the same way (a wrong value stays a
        wrong value, bit-exact or not; any other failure keeps its kind): plain layouts, `ones`, seed 0,
        the default output dtype, then each dimension bisected down to the smallest value that still
        fails; again until nothing changes (a smaller case may take a plainer profile). Bounded by a count
        of tries, so that the case it reaches does not depend on the machine's speed or load; time (the
        shrink budget, the campaign's deadline) only stops a simplification whose runs are slow."""
        from gemm_fuzz.properties.model import strategies

        resolved = variant or _safe_resolve(example.variant or example.parameters.get("peers", ("",))[0])
        if resolved is None:
            return example, failure
        until = time.monotonic() + max(30.0, self.runner.settings.shrink_seconds)
        if self.deadline is not None:
            until = min(until, max(self.deadline, time.monotonic() + 1.0))
        tried: dict[str, GemmFailure | None] = {}
        taken = {example.key()}  # the cases it moved to: never one again, so two changes cannot cycle

        def spent() -> bool:
            return len(tried) >= SIMPLIFY_TRIES or time.monotonic() > until

        def fails(case) -> GemmFailure | None:
            candidate = dataclasses.replace(example, case=case)
            key = candidate.key()
            if key in taken or (key not in tried and spent()):
                return None
            if key not in tried:
                try:
                    self.runner.run_once(candidate, variant, self.runner.settings.timeout)
                    tried[key] = None
                except GemmFailure as again:
                    tried[key] = again if _same_kind(again, failure) else None
            if tried[key] is not None:
                taken.add(key)
            return tried[key]

        case, changed = example.case, True
        while changed and not spent():
            changed = False
            for simplify in strategies.plainer(resolved):
                if spent():
                    break
                candidate = simplify(case)
                found = fails(candidate) if candidate != case else None
                if found is not None:
                    case, failure, changed = candidate, found, True
            for dim in ("M", "N", "K", *(("batch",) if case.batch else ())):
                # the smallest failing value, by bisection over the sizes below the failing one (a batch's:
                # those drawn, so that no batch just under the grid's limit is run program by program)
                step = resolved.operation.k_multiple(case.dtype) if dim == "K" else 1  # K whole groups, even
                sizes = (strategies.batch_sizes(case.batch) if dim == "batch"
                         else range(step, getattr(case, dim) + 1, step))
                lo, hi = 0, len(sizes) - 1  # sizes[hi] fails
                while lo < hi and not spent():
                    mid = (lo + hi) // 2
                    candidate = strategies.resized(case, resolved, **{dim: sizes[mid]})
                    found = fails(candidate)
                    if found is not None:
                        hi, case, failure, changed = mid, candidate, found, True
                    else:
                        lo = mid + 1
        return dataclasses.replace(example, case=case), failure
