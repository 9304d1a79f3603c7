"""The failures of a run grouped into distinct bugs, for the end-of-run summary: one kernel bug
usually fails several tests (the reference, agreement, the relations) on several dtypes, and each
such failure is one entry of pytest's report; the summary names each bug once.

Two failures are the same bug when they are of one kernel and happen at one place: for an
out-of-bounds access, the same load or store of the same operand at the same line of the kernel;
for a refusal, a crash or a hang, the same message; for a wrong value, the same shrunk case up to
its dtypes and seed (the shape, the layouts and the value profile that expose it).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Bug:
    variant: str
    site: str  # where it happens (see the module docstring)
    kinds: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    example: str = ""  # the first failure's headline
    repro: str = ""  # the first failure's repro script

    def lines(self) -> list[str]:
        where = f"{', '.join(self.tests)}; dtypes {', '.join(self.dtypes)}"
        out = [f"{' and '.join(self.kinds)}: {self.variant} at {self.site}", f"  in {where}", f"  {self.example}"]
        if self.repro:
            out.append(f"  repro: python {self.repro}")
        return out


def site(failure, case) -> str:
    """Where a failure happens, as far as telling bugs apart goes."""
    from properties.judge.failures import Crashed, LauncherRefused, OutOfBoundsAccess, TimedOut

    fields = failure.fields
    if isinstance(failure, OutOfBoundsAccess) and fields.get("line"):
        return f"the {fields['op']} of {fields['operand']} at {fields['line']}"
    if isinstance(failure, (LauncherRefused, Crashed, TimedOut)) or case is None:
        return failure.message.splitlines()[0] if failure.message else failure.kind
    return (f"{case.M}x{case.N}x{case.K} A:{case.a.describe()} B:{case.b.describe()} C:{case.c.describe()} "
            f"{case.profile}{'+specials' if case.specials else ''}")


def record(failure, test: str, headline: str) -> dict:
    """One failure of one test, as plain data (it travels from xdist workers in the test report)."""
    case = getattr(failure, "case", None)
    return {"variant": failure.context.get("variant", "?"), "site": site(failure, case), "kind": failure.kind,
            "test": test, "dtype": case.dtype if case is not None else "?", "headline": headline,
            "repro": str(getattr(failure, "repro", "") or "")}


def group(records: list[dict]) -> list[Bug]:
    """Records grouped by (kernel, site), in the order first seen."""
    bugs: dict[tuple[str, str], Bug] = {}
    for r in records:
        bug = bugs.get((r["variant"], r["site"]))
        if bug is None:
            bug = bugs[(r["variant"], r["site"])] = Bug(r["variant"], r["site"], example=r["headline"],
                                                        repro=r["repro"])
        for values, value in ((bug.kinds, r["kind"]), (bug.tests, r["test"]), (bug.dtypes, r["dtype"])):
            if value not in values:
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
