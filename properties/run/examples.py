"""What one example is, and how it executes inside one process.

An `Example` names a check, the variant it is about, a `GemmCase` and the check's drawn parameters;
it is a frozen, JSON-serialisable value, so a worker process, a repro script and a replayed corpus
entry run exactly what the test ran. The checks:

  reference    launch the variant on the case, judge C against the float64 product (the main property)
  metamorphic  the reference check, then the relations in `params` on the same inputs
  agreement    every variant in params["peers"] on the case, judged against each other; with a
               `variant`, only that one's disagreement fails
  output       the reference check, returning C's values
  cross_backend  the kernel compiled on the GPU against the same kernel interpreted (the runner runs
               both sides, each as an `output` example)

`execute` runs one example here and now; the runner (properties.run.runner) decides where.
Anything a launch raises that is not an oracle's verdict becomes a typed failure: an interpreter
limitation when Triton's interpreter itself failed, a configuration this device cannot run when it
lacks the resources, otherwise the launcher's refusal. Anything else that raises is the suite's own
code: a SuiteError, never the kernel's failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sysconfig
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from gemm_fuzz import reference
from gemm_fuzz.kernels import operands
from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.properties.interpreter import sanitizer
from gemm_fuzz.properties.judge import agreement, oracles, relations
from gemm_fuzz.properties.judge.failures import (
    Crashed,
    GemmFailure,
    InterpreterLimitation,
    LauncherRefused,
    NotRunnable,
    SuiteError,
)
from gemm_fuzz.properties.model.cases import GemmCase, Operands, materialize
from gemm_fuzz.properties.report import phases
from gemm_fuzz.properties.run import ahead, backends, preconditions
from gemm_fuzz.reference.formats import by_name, name_of
from gemm_fuzz.reference.numpy_ref import to_float64

CHECKS = ("reference", "metamorphic", "agreement", "output", "cross_backend")


@dataclass(frozen=True)
class Example:
    check: str
    variant: str  # the variant judged ('' for agreement among peers with no focus)
    case: GemmCase
    params: tuple[tuple[str, object], ...] = ()  # the check's drawn parameters, in a fixed order

    def __post_init__(self):
        if self.check not in CHECKS:
            raise ValueError(f"unknown check {self.check!r}; expected one of {', '.join(CHECKS)}")

    @property
    def parameters(self) -> dict:
        return dict(self.params)

    def to_dict(self) -> dict:
        return {"check": self.check, "variant": self.variant, "case": asdict(self.case),
                "params": [[k, list(v) if isinstance(v, tuple) else v] for k, v in self.params]}

    @classmethod
    def from_dict(cls, data: dict) -> Example:
        params = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in data.get("params", []))
        return cls(data["check"], data["variant"], GemmCase.from_dict(data["case"]), params)

    def key(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def describe(self) -> str:
        """The check in words, with its parameters."""
        if self.check == "agreement":
            focus = f" judging {self.variant}" if self.variant else ""
            return f"agreement among {', '.join(self.parameters.get('peers', ()))}{focus}"
        if self.check == "metamorphic":
            return "metamorphic relations " + ", ".join(f"{k}={v}" for k, v in self.params)
        return {"reference": "against the float64 reference", "output": "its output",
                "cross_backend": "compiled against interpreted"}[self.check]


@dataclass
class Observation:
    """What one passing example measured."""

    exact: bool  # judged bit-exact (True) or within the bound (False)
    error_ratio: float | None  # largest |C - reference| / bound; 0 on exact cases; None where not judged so
    seconds: float
    # largest |C - reference| over torch.matmul's on the same inputs and device; None on exact cases
    # and where torch is exact
    torch_ratio: float | None = None
    values: np.ndarray | None = field(default=None, repr=False)  # C (float64), for the `output` check
    phases: dict = field(default_factory=dict)  # seconds per phase and kernels compiled (report/phases.py)

    def to_dict(self) -> dict:
        return {"exact": self.exact, "error_ratio": self.error_ratio, "seconds": self.seconds,
                "torch_ratio": self.torch_ratio, "phases": self.phases}


# --- launching -------------------------------------------------------------------------------------


def launch(variant: Variant, ops: Operands, backend: backends.Backend, config=()) -> None:
    """Run the variant (in `config`, (key, value) pairs of its configuration space; () the default); in
    the interpreter every memory access is bounds-checked before it happens. Whatever the launch raises
    besides an oracle's verdict becomes a typed failure."""
    chosen = dict(config) or None
    try:
        if backend.interpreted:
            with phases.launching(), sanitizer.bounds_checked():
                variant.launch(ops.a.view, ops.b.view, ops.c.view, config=chosen)
        else:
            with phases.launching():
                variant.launch(ops.a.view, ops.b.view, ops.c.view, config=chosen)
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
            failure.message += preconditions.hint(variant, ops.a.view, ops.b.view, ops.c.view)
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
    while root.__cause__ is not None and root.__cause__ is not root:
        root = root.__cause__  # the interpreter wraps the kernel's exception in InterpreterError
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
            f"Triton's interpreter itself failed ({text}, in {where.name} at interpreter.py:{where.lineno}); "
            "this is a gap of the CPU interpreter, not a verdict on the kernel: run it on a GPU",
            error=type(root).__name__, detail=str(root))
    kernel_frame = next((f for f in reversed(frames) if not f.filename.startswith(_NOT_THE_KERNELS)), None)
    line = f"{os.path.basename(kernel_frame.filename)}:{kernel_frame.lineno}" if kernel_frame else ""
    return LauncherRefused(f"the launcher raised {text}" + (f" at {line}" if line else ""), error=type(root).__name__,
                           detail=str(root), line=line)


# --- the checks ------------------------------------------------------------------------------------


def _reference(variant: Variant, case: GemmCase, backend) -> tuple[Observation, Operands, oracles.Verdict]:
    start = time.perf_counter()
    ops = materialize(case, backend.device)
    launch(variant, ops, backend, case.config)
    verdict = oracles.against_reference(ops, variant.precision,
                                        partials=oracles.output_partials(variant, case.dtype, case.config))
    versus_torch = None if verdict.exact else oracles.torch_error_ratio(ops, verdict.allowance.expected,
                                                                        verdict.values)
    observed = Observation(verdict.exact, verdict.error_ratio, time.perf_counter() - start, versus_torch)
    return observed, ops, verdict


def _metamorphic(variant: Variant, example: Example, backend) -> Observation:
    # on a GPU every problem the relations launch compiles at once, beside the first run
    ahead.compile_ahead(variant, [example.case, *relations.problems(variant, example.case, example.parameters)],
                        backend)
    observed, ops, verdict = _reference(variant, example.case, backend)
    first = relations.observed(verdict)
    run = lambda v, o: launch(v, o, backend, example.case.config)  # noqa: E731
    p = example.parameters
    if p.get("transpose"):
        relations.transpose(variant, run, ops, first)
    if p.get("scale"):
        relations.scale(variant, run, ops, first, k=p["scale"])
    if p.get("pad"):
        relations.zero_padding(variant, run, ops, first, extra=p["pad"])
    if p.get("split"):
        relations.split_k(variant, run, ops, first, k1=p["split"])
    return observed


def accepts(variant: Variant, ops: Operands) -> bool:
    """Does the variant's launcher take these operands (dtypes, layouts, alignment)?"""
    try:
        operands.check(variant, ops.a.view, ops.b.view, ops.c.view)
    except (TypeError, ValueError):
        return False
    return True


def _agreement(example: Example, resolve, backend) -> Observation:
    start = time.perf_counter()
    case = example.case
    ops = materialize(case, backend.device)
    a, b = to_float64(ops.a.view), to_float64(ops.b.view)
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)
    names = ([example.variant] if example.variant else []) + [n for n in example.parameters["peers"]
                                                              if n != example.variant]
    # the case's configuration is the focus's; every other peer runs its default
    peers = [(name, resolve(name), case.config if name == example.variant else ()) for name in names]
    for _, v, config in peers:  # on a GPU every peer compiles at once
        ahead.compile_ahead(v, [dataclasses.replace(case, config=config)], backend)
    runs = {}
    for name, v, config in peers:  # each launched under the memory oracles; their values are judged against each other
        if accepts(v, ops):
            try:
                runs[name] = relations.solve(v, lambda x, o, config=config: launch(x, o, backend, config), a, b,
                                             (case.a, case.b, case.c), fin, fout, backend.device, config)
            except GemmFailure as e:
                e.context.setdefault("variant", name)
                raise
    agreement.judge(runs, example.variant or None)
    return Observation(all(bool(r.exact.all()) for r in runs.values()), None, time.perf_counter() - start)


def _checks(example: Example, backend: backends.Backend):
    """In the interpreter, every launch of the example runs its programs in the case's order and under
    the race detector (the sanitizer wraps each launch)."""
    if not backend.interpreted:
        return contextlib.nullcontext()
    from gemm_fuzz.properties.interpreter import races, schedule

    stack = contextlib.ExitStack()
    stack.enter_context(schedule.ordered(example.case.order))
    stack.enter_context(races.checked())
    return stack


def execute(example: Example, resolve, backend: backends.Backend) -> Observation:
    """Run one example in this process. Raises a GemmFailure with its context filled in.
    `resolve(name) -> Variant` finds variants by name."""
    variant = resolve(example.variant) if example.variant else None
    try:
        with phases.recording() as record, _checks(example, backend):
            if example.check == "agreement":
                observed = _agreement(example, resolve, backend)
            elif example.check == "metamorphic":
                observed = _metamorphic(variant, example, backend)
            else:
                observed, ops, verdict = _reference(variant, example.case, backend)
                if example.check == "output":
                    observed.values = verdict.values
        observed.phases = record
        return observed
    except GemmFailure as failure:
        failure.with_context(variant=example.variant or "(peers)", case=example.case.describe(),
                             check=example.describe())
        raise
    except Exception as error:  # noqa: BLE001  not the kernel's: what it runs is classified in launch()
        raise SuiteError.of(error).with_context(variant=example.variant or "(peers)", case=example.case.describe(),
                                                check=example.describe()) from error
