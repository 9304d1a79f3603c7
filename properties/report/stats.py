"""What the examples of a run measured, per target (variant x dtype): how many ran, how many failed,
the largest error / bound ratio and the case that reached it, the error against torch.matmul's on
the same inputs, and memory findings. Kept per process
and merged across xdist workers by the plugin."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

MEMORY_ERRORS = ("OutOfBoundsAccess", "GpuMemoryError")


@dataclass
class TargetStats:
    examples: int = 0
    exact: int = 0
    failures: int = 0  # failing examples (a failure and the shrinking steps after it)
    memory: int = 0  # of which: out-of-bounds accesses and writes outside C
    worst_ratio: float = 0.0
    worst_case: str = ""
    seconds: float = 0.0
    ratios: list[float] = field(default_factory=list)
    torch_ratios: list[float] = field(default_factory=list)  # error / torch.matmul's, where torch errs

    def merge(self, other: TargetStats) -> None:
        if other.worst_ratio >= self.worst_ratio:
            self.worst_ratio, self.worst_case = other.worst_ratio, other.worst_case
        for name in ("examples", "exact", "failures", "memory", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.ratios += other.ratios
        self.torch_ratios += other.torch_ratios


_STATS: dict[str, TargetStats] = {}


def record_pass(target_id: str, observed) -> None:
    s = _STATS.setdefault(target_id, TargetStats())
    s.examples += 1
    s.exact += observed.exact
    s.seconds += observed.seconds
    s.ratios.append(observed.error_ratio)
    if observed.torch_ratio is not None:
        s.torch_ratios.append(observed.torch_ratio)
    if observed.error_ratio >= s.worst_ratio:
        s.worst_ratio, s.worst_case = observed.error_ratio, observed.case.describe()


def record_failure(target_id: str, error: BaseException) -> None:
    s = _STATS.setdefault(target_id, TargetStats())
    s.examples += 1
    s.failures += 1
    writes_outside_c = "a write outside C" in str(error) or "a write into input" in str(error)
    s.memory += type(error).__name__ in MEMORY_ERRORS or writes_outside_c


def snapshot() -> dict[str, dict]:
    return {k: asdict(v) for k, v in _STATS.items()}


def merge(into: dict[str, TargetStats], data: dict[str, dict]) -> None:
    for target_id, values in data.items():
        into.setdefault(target_id, TargetStats()).merge(TargetStats(**values))


def local() -> dict[str, TargetStats]:
    return _STATS


def versus_torch(ratios: list[float]) -> str:
    """'median, max' of a target's error / torch.matmul's error ratios; '-' when torch never erred."""
    if not ratios:
        return "-"
    return f"{statistics.median(ratios):.3g}, {max(ratios):.3g}"


def table(stats: dict[str, TargetStats]) -> list[str]:
    """The summary table, one line per target."""
    rows = [("target", "examples", "exact", "failures", "memory", "error/torch's (median, max)", "worst error/bound",
             "at")]
    for target_id in sorted(stats):
        s = stats[target_id]
        rows.append((target_id, str(s.examples), str(s.exact), str(s.failures), str(s.memory),
                     versus_torch(s.torch_ratios), f"{s.worst_ratio:.3g}", s.worst_case))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows]
