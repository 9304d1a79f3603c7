"""The checks, each one module behind one protocol (check.py): what it draws, what it compiles ahead,
how it executes and how it describes a failure.

  reference      the variant on the case against the float64 product (the main property); `output`
                 is the same keeping C's values
  metamorphic    the reference check, then the relations on changed problems
  agreement      every variant that takes the case, judged against each other
  cross_backend  the kernel compiled against the same kernel interpreted (GPU only)
  replay         a repro script's recorded example, as it was found
  saved_case     `save`: the reference check with its operands written to a folder, and the folder
                 loaded and run on any kernel in this process (load_case, run_case)

An Example names the check that runs it (`get`); the battery runs BATTERY, one test each, and a run
compiles ahead what they will launch (`compile_plans`). A new check is a module here and a line
below, and its battery test.
"""

from __future__ import annotations

from gemm_fuzz.properties.checks import agreement, cross_backend, metamorphic, reference, replay, saved_case
from gemm_fuzz.properties.checks.check import Check, NothingJudged, execute

REFERENCE, OUTPUT = reference.CHECK, reference.OUTPUT
METAMORPHIC, AGREEMENT, CROSS_BACKEND, REPLAY = metamorphic.CHECK, agreement.CHECK, cross_backend.CHECK, replay.CHECK
SAVE = saved_case.CHECK
BATTERY = (REFERENCE, METAMORPHIC, AGREEMENT, CROSS_BACKEND, REPLAY)
_RUN_BY_EXAMPLES = {c.name: c for c in (REFERENCE, OUTPUT, METAMORPHIC, AGREEMENT, CROSS_BACKEND, SAVE)}


def get(name: str) -> Check:
    """The check an Example of this name runs."""
    try:
        return _RUN_BY_EXAMPLES[name]
    except KeyError:
        raise ValueError(f"unknown check {name!r}; expected one of {', '.join(_RUN_BY_EXAMPLES)}") from None


def compile_plans(target, backend, user: bool) -> list:
    """(variant, GemmCase) pairs: what the battery's tests of `target` launch on a GPU, one case per
    specialization class (none on the interpreter)."""
    if backend.interpreted:
        return []
    return [plan for check in BATTERY for plan in check.compile_plans(target, backend, user)]


__all__ = ["AGREEMENT", "BATTERY", "CROSS_BACKEND", "Check", "METAMORPHIC", "NothingJudged", "OUTPUT", "REFERENCE",
           "REPLAY", "SAVE", "compile_plans", "execute", "get"]
