"""The failures of a run grouped into distinct bugs, for the end-of-run summary: one kernel bug
usually fails several tests (the reference, agreement, the relations) on several dtypes and layouts,
and each such failure is one entry of pytest's report; the summary names each bug once, with the
shrunk cases that show it.

Two failures are the same bug when they are of one kernel and happen at one place, as each kind
says (`GemmFailure.site`, properties/judge/failures.py): for an out-of-bounds access, the same load or
store of the same operand at the same line of the kernel; for a data race, the same pair of accesses;
for a launcher that raised, the same exception with the same words at the same line (the case's
features the hint names aside); for a crash or a hang, the same message; for a wrong value (out of
bound or not bit-exact, one kind), an element never written, a write outside C or into an input, the
kind itself: the kernel has no line to tell those apart by, so their cases are listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CASES_SHOWN = 4  # cases listed under a bug; the rest are counted


@dataclass
class Bug:
    variant: str
    site: str  # where it happens (see the module docstring)
    kinds: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    cases: list[str] = field(default_factory=list)  # the shrunk cases that show it
    example: str = ""  # the first failure's headline
    repro: str = ""  # the first failure's repro script

    def lines(self) -> list[str]:
        where = f"{', '.join(self.tests)}; dtypes {', '.join(self.dtypes)}"
        out = [f"{' and '.join(self.kinds)}: {self.variant} at {self.site}", f"  in {where}", f"  {self.example}"]
        shown = self.cases[:CASES_SHOWN]
        more = len(self.cases) - len(shown)
        out += [f"  case: {case}" for case in shown] + ([f"  and {more} more case(s)"] if more else [])
        if self.repro:
            out.append(f"  repro: python {self.repro}")
        return out


def record(failure, test: str) -> dict:
    """One failure of one test, as plain data (it travels from xdist workers in the test report)."""
    case = getattr(failure, "case", None)
    return {"variant": failure.context.get("variant", "?"), "site": failure.site(), "kind": failure.kind,
            "test": test, "dtype": case.dtype if case is not None else "?", "headline": failure.headline(),
            "case": case.describe() if case is not None else failure.context.get("case", ""),
            "repro": str(getattr(failure, "repro", "") or "")}


def group(records: list[dict]) -> list[Bug]:
    """Records grouped by (kernel, site), in the order first seen."""
    bugs: dict[tuple[str, str], Bug] = {}
    for r in records:
        bug = bugs.get((r["variant"], r["site"]))
        if bug is None:
            bug = bugs[(r["variant"], r["site"])] = Bug(r["variant"], r["site"], example=r["headline"],
                                                        repro=r["repro"])
        for values, value in ((bug.kinds, r["kind"]), (bug.tests, r["test"]), (bug.dtypes, r["dtype"]),
                              (bug.cases, r.get("case", ""))):
            if value and value not in values:
                values.append(value)
    for bug in bugs.values():
        bug.dtypes.sort()
    return list(bugs.values())


def summary(records: list[dict]) -> list[str]:
    """The summary's lines: each distinct bug once, numbered."""
    out = []
    for i, bug in enumerate(group(records), 1):
        first, *rest = bug.lines()
        out += [f"{i}. {first}", *("  " + line for line in rest)]
    return out
