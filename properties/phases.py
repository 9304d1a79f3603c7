"""Where an example's time goes, so that the next bottleneck is visible: building its tensors
(materialize), compiling kernels (compile: every launch during which Triton compiled, loaded from its
disk cache, or finished compiling ahead a kernel this process had not run), running them (launch),
computing the references (reference: the float64 product, |A|.|B| and torch.matmul) and judging
(oracles: memory, all written, the bound and the comparison). Whatever an example's wall time holds
beyond these (Hypothesis drawing it, a worker's round trip, the relations' own arithmetic) is "the
rest", which whoever sums them reports.

A leaf module: `timed(phase)` around a piece of work (or as a decorator), `launching()` around a
kernel launch, `recording()` around one example.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

PHASES = ("materialize", "compile", "launch", "reference", "oracles")

_seconds: dict[str, float] = {}
_compiles = 0  # kernels this process finished compiling (or loaded from Triton's disk cache)
_active: str | None = None  # the phase being timed: a nested timing is the outer phase's
_hooked = False


@contextmanager
def timed(phase: str):
    """Charge the time of the block to `phase` (unless an outer block is already being timed)."""
    global _active
    if _active is not None:
        yield
        return
    _active, start = phase, time.perf_counter()
    try:
        yield
    finally:
        _seconds[phase] = _seconds.get(phase, 0.0) + time.perf_counter() - start
        _active = None


def _watch_compiles() -> None:
    """Count Triton's finished compilations through its documented hook, keeping any hook already set."""
    global _hooked
    if _hooked:
        return
    _hooked = True
    try:
        from triton import knobs

        previous = knobs.runtime.jit_post_compile_hook
    except (ImportError, AttributeError):  # a Triton without the hook: compiling is not told apart from launching
        return

    def counted(*args, **kwargs):
        global _compiles
        if threading.current_thread() is threading.main_thread():  # not one finished ahead in the background
            _compiles += 1
        return previous(*args, **kwargs) if previous is not None else None

    knobs.runtime.jit_post_compile_hook = counted


@contextmanager
def launching():
    """Time a launch: as `compile` when a compilation finished during it, else as `launch`."""
    _watch_compiles()
    before, start = _compiles, time.perf_counter()
    try:
        yield
    finally:
        if _active is None:
            phase = "compile" if _compiles > before else "launch"
            _seconds[phase] = _seconds.get(phase, 0.0) + time.perf_counter() - start


@contextmanager
def recording():
    """Record one example's phases: yields a dict filled on exit with seconds per phase and `compiles`."""
    _seconds.clear()
    compiles_before = _compiles
    record: dict[str, float] = {}
    try:
        yield record
    finally:
        record.update({p: round(_seconds.get(p, 0.0), 6) for p in PHASES})
        record["compiles"] = _compiles - compiles_before
        _seconds.clear()


def add(total: dict[str, float], record: dict[str, float]) -> None:
    """Sum one example's record (or another total) into `total`."""
    for key, value in record.items():
        total[key] = total.get(key, 0.0) + value


def summary(seconds: float, phases: dict[str, float]) -> str:
    """One line: the examples' wall time and its split by phase, the rest last."""
    if not seconds:
        return ""
    parts = []
    for p in PHASES:
        label = f"{p} {phases.get(p, 0.0):.1f} s"
        if p == "compile":
            label += f" ({int(phases.get('compiles', 0))} kernels)"
        parts.append(label)
    rest = max(0.0, seconds - sum(phases.get(p, 0.0) for p in PHASES))
    return f"{seconds:.1f} s in examples: " + ", ".join(parts) + f", the rest {rest:.1f} s"
