"""What the examples of a run measured, per target (variant x dtype): how many ran and passed, how
many failed and of which kind, the largest error / bound ratio and the case that reached it, the
error against torch.matmul's on the same inputs. Held by the runner of each process and merged
across xdist workers by the plugin."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

from gemm_fuzz.properties import phases
from gemm_fuzz.properties.judge.failures import MEMORY_KINDS


@dataclass
class TargetStats:
    examples: int = 0  # examples run (passing and failing)
    exact: int = 0
    failures: int = 0  # failing examples (a failure and the shrinking steps after it)
    kinds: dict[str, int] = field(default_factory=dict)  # failing examples by kind
    limitations: int = 0  # examples the interpreter could not run (not the kernel's failure)
    limitation: str = ""  # the first such, in words
    internal: int = 0  # examples the suite's own code failed on (an internal error, not the kernel's)
    # configurations this device cannot run for lack of resources: feature ("config I") -> what and why
    not_runnable: dict[str, str] = field(default_factory=dict)
    not_run: int = 0  # examples left out once a failing test's shrinking budget was spent
    worst_ratio: float | None = None  # None: no passing example was judged against a bound
    worst_case: str = ""
    failing_ratio: float | None = None  # the error / bound of the failing case below, where it has one
    failing_case: str = ""  # the reported (shrunk) failing case; until one is reported, the first failing one
    reported: bool = False  # failing_case is a reported one
    seconds: float = 0.0
    ratios: list[float] = field(default_factory=list)
    torch_ratios: list[float] = field(default_factory=list)  # error / torch.matmul's, where torch errs
    reached: dict[str, int] = field(default_factory=dict)  # examples per feature reached (report/reached.py)
    wanted: list[str] = field(default_factory=list)  # the features its strategies can reach
    phases: dict[str, float] = field(default_factory=dict)  # passing examples' seconds per phase, kernels compiled

    @property
    def memory(self) -> int:
        return sum(n for kind, n in self.kinds.items() if kind in MEMORY_KINDS)

    def merge(self, other: TargetStats) -> None:
        if other.worst_ratio is not None and (self.worst_ratio is None or other.worst_ratio >= self.worst_ratio):
            self.worst_ratio, self.worst_case = other.worst_ratio, other.worst_case
        if other.failing_case and (not self.failing_case or other.reported > self.reported):
            self.failing_ratio, self.failing_case = other.failing_ratio, other.failing_case
            self.reported = other.reported
        self.limitation = self.limitation or other.limitation
        self.not_runnable = {**other.not_runnable, **self.not_runnable}
        for name in ("examples", "exact", "failures", "limitations", "internal", "not_run", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for kind, n in other.kinds.items():
            self.kinds[kind] = self.kinds.get(kind, 0) + n
        self.ratios += other.ratios
        self.torch_ratios += other.torch_ratios
        for feature, n in other.reached.items():
            self.reached[feature] = self.reached.get(feature, 0) + n
        self.wanted = sorted(set(self.wanted) | set(other.wanted))
        phases.add(self.phases, other.phases)


class Stats:
    """Per-target statistics of one process."""

    def __init__(self):
        self.targets: dict[str, TargetStats] = {}

    def _of(self, target_id: str) -> TargetStats:
        return self.targets.setdefault(target_id, TargetStats())

    def passed(self, target_id: str, observed, case_text: str) -> None:
        s = self._of(target_id)
        s.examples += 1
        s.exact += observed.exact
        s.seconds += observed.seconds
        phases.add(s.phases, observed.phases)
        if observed.exact or observed.error_ratio is None:  # exact, or not judged against a bound
            return
        s.ratios.append(observed.error_ratio)
        if observed.torch_ratio is not None:
            s.torch_ratios.append(observed.torch_ratio)
        if s.worst_ratio is None or observed.error_ratio >= s.worst_ratio:
            s.worst_ratio, s.worst_case = observed.error_ratio, case_text

    def failed(self, target_id: str, failure, seconds: float = 0.0) -> None:
        s = self._of(target_id)
        if failure.blame == "suite":
            s.internal += 1
            return
        if failure.blame == "interpreter":
            s.limitations += 1
            s.limitation = s.limitation or failure.headline()
            return
        if not failure.kernel_fault:  # a configuration this device cannot run: see not_runnable()
            return
        s.examples += 1
        s.failures += 1
        s.seconds += seconds
        s.kinds[failure.kind] = s.kinds.get(failure.kind, 0) + 1
        if not s.failing_case:
            s.failing_ratio, s.failing_case = failure.fields.get("ratio"), failure.context.get("case", "")

    def reported_failure(self, target_id: str, failure, case_text: str) -> None:
        """The failure a test reports, on its shrunk case: what the table shows for the target."""
        s = self._of(target_id)
        if not s.reported:
            s.failing_ratio, s.failing_case, s.reported = failure.fields.get("ratio"), case_text, True

    def reached(self, target_id: str, features: set[str], wanted) -> None:
        """Count an example's features; `wanted()` (what the target can reach) is asked once per target."""
        s = self._of(target_id)
        for feature in features:
            s.reached[feature] = s.reached.get(feature, 0) + 1
        if not s.wanted:
            s.wanted = sorted(wanted())

    def not_runnable(self, target_id: str, feature: str, text: str) -> None:
        """A configuration this device cannot run: `feature` is no longer expected to be reached."""
        self._of(target_id).not_runnable[feature] = text

    def left_out(self, target_id: str) -> None:
        self._of(target_id).not_run += 1

    def snapshot(self) -> dict[str, dict]:
        return {k: asdict(v) for k, v in self.targets.items()}

    def merge(self, data: dict[str, dict]) -> None:
        for target_id, values in data.items():
            self._of(target_id).merge(TargetStats(**values))


def versus_torch(ratios: list[float]) -> str:
    """'median, max' of a target's error / torch.matmul's error ratios; '-' when torch never erred."""
    if not ratios:
        return "-"
    return f"{statistics.median(ratios):.3g}, {max(ratios):.3g}"


def worst(s) -> tuple[str, str]:
    """The worst error / bound of a target and the case that reached it. A target that failed shows its
    failing examples' (a passing example's ratio would hide the failure): the largest ratio of a value
    out of bound, else "failed" (not bit-exact, a memory error, a crash: no ratio applies)."""
    if s.failures:
        ratio = "failed" if s.failing_ratio is None else f"{s.failing_ratio:.3g} (failed)"
        return ratio, s.failing_case
    return ("-" if s.worst_ratio is None else f"{s.worst_ratio:.3g}"), s.worst_case


def unreached(s) -> list[str]:
    """What a passing target's strategies can reach and none of its examples did (a TargetStats, or a
    campaign's TargetResult); nothing for a failing target, whose shrinking explores small cases."""
    if not s.examples or s.failures:
        return []
    return sorted(f for f in s.wanted if not s.reached.get(f) and f not in s.not_runnable)


def never_reached(stats: dict[str, TargetStats]) -> list[str]:
    """One line per target whose examples never reached some feature its strategies can reach, and one
    per configuration the device could not run."""
    lines = []
    for t in sorted(stats):
        if unreached(stats[t]):
            lines.append(f"{t}: never reached {', '.join(unreached(stats[t]))}")
        lines += [f"{t}: {text}" for _, text in sorted(stats[t].not_runnable.items())]
    return lines


def table(stats: dict[str, TargetStats]) -> list[str]:
    """The summary table, one line per target."""
    rows = [("target", "examples", "exact", "failures", "by kind", "error/torch's (median, max)", "worst error/bound",
             "at")]
    for target_id in sorted(stats):
        s = stats[target_id]
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(s.kinds.items())) or "-"
        if s.limitations:
            kinds += f"; {s.limitations} not runnable in the interpreter"
        if s.internal:
            kinds += f"; {s.internal} internal error(s) of the suite"
        rows.append((target_id, str(s.examples), str(s.exact), str(s.failures), kinds, versus_torch(s.torch_ratios),
                     *worst(s)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows]
