"""One launch of a kernel under test, and whatever it raises classified.

`launch` runs a variant on its operands (in the interpreter with every memory access bounds-checked
before it happens, on a GPU synchronized); anything the launch raises that is not an oracle's verdict
becomes a typed failure (`classify`): a configuration this device cannot run for lack of resources,
a fault on the GPU, an interpreter limitation when Triton's interpreter itself failed, otherwise the
launcher's refusal, placed at the line of the kernel's (or launcher's) file it came from.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from pathlib import Path

import torch

from gemm_fuzz import reference
from gemm_fuzz.kernels import operands
from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.properties import phases
from gemm_fuzz.properties.interpreter import sanitizer
from gemm_fuzz.properties.judge.failures import (
    REPORT_TO,
    Crashed,
    GemmFailure,
    InterpreterLimitation,
    LauncherRefused,
    NotRunnable,
    SuiteError,
    chain,
)
from gemm_fuzz.properties.launch import backends, preconditions
from gemm_fuzz.properties.model import grouped
from gemm_fuzz.properties.model.cases import Operands
from gemm_fuzz.reference.formats import name_of


def launch(variant: Variant, ops: Operands, backend: backends.Backend, config=()) -> None:
    """Run the variant (in `config`, (key, value) pairs of its configuration space; () the default); in
    the interpreter every memory access is bounds-checked before it happens. Whatever the launch raises
    besides an oracle's verdict becomes a typed failure."""
    chosen = dict(config) or None
    extras = ops.keywords()
    a, b, c = arguments(ops)
    try:
        if backend.interpreted:
            # problems: the lists' matrices are reached through pointers the kernel loads
            reached = {f"{name}[{g}]": t for name, ts in zip("ABC", (a, b, c)) if isinstance(ts, list)
                       for g, t in enumerate(ts)}
            with phases.launching(), sanitizer.bounds_checked(variant.duplicate_stores, reached):
                variant.launch(a, b, c, config=chosen, **extras)
        else:
            with phases.launching():
                variant.launch(a, b, c, config=chosen, **extras)
                torch.cuda.synchronize()
    except GemmFailure:
        raise
    except Exception as error:  # noqa: BLE001  the kernel's or the interpreter's, classified below
        failure = classify(error, backend.name)
        if isinstance(failure, NotRunnable):  # the configuration, for the strategies to draw no more
            failure.fields.update(variant=variant.name, dtype=name_of(ops.a.view.dtype), config=list(config),
                                  device=backend.device_name)
            failure.message += f" (on {backend.device_name})"
            failure.args = (failure.message,)
        if isinstance(failure, LauncherRefused):  # name the case's features and what would exclude them
            failure.message += preconditions.hint(variant, a, b, c, extras)
            failure.args = (failure.message,)
        raise failure from error


_INTERPRETER_FILES = (os.path.join("triton", "runtime", "interpreter.py"), os.path.join("triton", "_C"))
# where a frame is not the kernel's or its launcher's: Python's library, installed packages (Triton's,
# torch's), the suite's own machinery; the deepest frame elsewhere is the line a failure is placed at
_NOT_THE_KERNELS = tuple(dict.fromkeys(
    [sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    + [str(Path(__file__).resolve().parents[1]) + os.sep, str(Path(reference.__file__).resolve().parent) + os.sep]))


# what the CUDA driver says when a block asks for more registers or threads than a multiprocessor has
_LAUNCH_RESOURCES = "too many resources requested for launch"


def lack_of_resources(error: BaseException) -> str | None:
    """The resource a configuration lacks, when `error` is one of those Triton's autotuner prunes a
    configuration for (triton.runtime.autotuner: OutOfResources, and ptxas refusing a kernel that uses
    too much shared memory or too many registers), or the driver's launch refusal; else None."""
    from triton.runtime.errors import OutOfResources, PTXASError

    if isinstance(error, OutOfResources):
        return f"{error.name}, required {error.required}, hardware limit {error.limit}"
    text = str(error)
    if isinstance(error, PTXASError) and ("too much" in text or "too many" in text):
        return next((line.strip() for line in text.splitlines() if "too m" in line), text.strip())
    if _LAUNCH_RESOURCES in text:
        return _LAUNCH_RESOURCES
    return None


def classify(error: BaseException, backend: str) -> GemmFailure:
    """An exception from a launch: the interpreter's own failure, a fault on the GPU, or the launcher's
    (kernel's) refusal."""
    root = error
    for root in chain(error):  # the interpreter wraps the kernel's exception in InterpreterError
        if root.__cause__ is None:
            break
    frames = traceback.extract_tb(root.__traceback__)
    where = next((f for f in reversed(frames) if "site-packages" not in f.filename or "triton" in f.filename), None)
    inside = where is not None and where.filename.endswith(_INTERPRETER_FILES[0])
    text = f"{type(root).__name__}: {root}".strip()
    short = lack_of_resources(root)
    if short is not None:
        return NotRunnable(f"the configuration cannot run for lack of resources: {short}", reason=short)
    if backend == "cuda" and ("CUDA error" in text or "illegal" in text.lower()):
        return Crashed(f"the kernel faulted on the GPU: {text}", error=type(root).__name__, detail=str(root))
    if backend == "interpreter" and inside and not isinstance(root, AssertionError):
        return InterpreterLimitation(
            f"{text} (Triton's interpreter itself failed, in {where.name} at interpreter.py:{where.lineno}): a "
            "gap of the CPU interpreter, not a verdict on the kernel; run it on a GPU (--gemm-backend cuda)",
            error=type(root).__name__, detail=str(root))
    if frames and os.path.realpath(frames[-1].filename) == os.path.realpath(operands.__file__):
        # the suite's own check of what it built, before the kernel's launcher ran: never the launcher's doing
        return SuiteError(f"the suite built operands the contract refuses: {text}\n{REPORT_TO}",
                          error=type(root).__name__, detail=str(root))
    kernel_frame = next((f for f in reversed(frames) if not f.filename.startswith(_NOT_THE_KERNELS)), None)
    line = f"{os.path.basename(kernel_frame.filename)}:{kernel_frame.lineno}" if kernel_frame else ""
    return LauncherRefused(f"the launcher raised {text}" + (f" at {line}" if line else ""), error=type(root).__name__,
                           detail=str(root), line=line)


def arguments(ops: Operands) -> tuple:
    """What FUNC receives as a, b and c: the operands' views, or (problems) the lists of each problem's."""
    if ops.case is not None and ops.case.groups is not None and ops.case.groups.problems:
        return grouped.views(ops)
    return ops.a.view, ops.b.view, ops.c.view


def accepts(variant: Variant, ops: Operands) -> bool:
    """Does the variant's launcher take these operands (dtypes, layouts, alignment)?"""
    try:
        operands.check(variant, *arguments(ops), ops.keywords())
    except (TypeError, ValueError):
        return False
    return True
