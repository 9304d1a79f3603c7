"""Every way an example can fail, as one exception hierarchy.

Each failure carries structured fields (what the oracle measured) next to its message, and travels
whole between processes (`to_dict` / `from_dict`), so a worker's verdict arrives with its type and
fields intact. The runner adds the context (variant, case, check) once, at the top of the message.
`kind` is the short name summaries count by; `blame` says whose doing it is:

  kernel       the kernel's (or its launcher's): the example fails
  interpreter  a gap of Triton's interpreter: counted, the example left out, never the kernel's failure
  device       a configuration this device lacks the resources for (Triton's autotuner prunes such a
               one): counted, the configuration drawn no more, never the kernel's failure
  suite        the suite's own code raised: the test fails as an internal error of the suite, never
               blamed on the kernel and never run again
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar


class GemmFailure(AssertionError):
    """A kernel's result, memory effects or behaviour differ from what every correct kernel does."""

    kind: ClassVar[str] = "failure"
    blame: ClassVar[str] = "kernel"  # see the module docstring
    _registry: ClassVar[dict[str, type[GemmFailure]]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        GemmFailure._registry[cls.__name__] = cls

    def __init__(self, message: str, **fields: Any):
        super().__init__(message)
        self.message = message
        self.fields = fields
        self.context: dict[str, str] = {}  # variant, case, check: set once by the runner

    def __str__(self) -> str:
        if "case" not in self.context:
            return self.message
        where = f"variant {self.context['variant']!r} on {self.context['case']}"
        check = self.context.get("check")
        return where + (f" ({check})" if check else "") + ":\n" + self.message

    @property
    def kernel_fault(self) -> bool:
        return self.blame == "kernel"

    def __getattr__(self, name: str):
        fields = self.__dict__.get("fields", {})
        if name in fields:
            return fields[name]
        raise AttributeError(name)

    def with_context(self, *, variant: str, case: str, check: str = "") -> GemmFailure:
        """Fill in where it happened (what is already set stays)."""
        for key, value in (("variant", variant), ("case", case), ("check", check)):
            self.context.setdefault(key, value)
        return self

    def site(self) -> str:
        """Where it happens, as far as telling bugs apart goes (properties/report/bugs.py): a kind whose
        failures carry a kernel line says it; for the rest the kind itself."""
        return f"{'an' if self.kind[0] in 'aeiou' else 'a'} {self.kind}"

    def headline(self) -> str:
        """The reason in a few words, for pytest's one-line short summary (which cuts it to the terminal's
        width), the bug list and the campaign's lines: the kind and the message's first statement."""
        first = statements(self.message.strip().splitlines()[0])[0] if self.message.strip() else ""
        return f"{self.kind}: {first}" if first else self.kind

    @classmethod
    def short(cls) -> str:
        """The kind in a plot's cell: two short lines at most."""
        return cls.kind.replace(" ", "\n", 1) if len(cls.kind) > 10 else cls.kind

    def to_dict(self) -> dict:
        return {"type": type(self).__name__, "message": self.message, "fields": _plain(self.fields),
                "context": self.context}

    @staticmethod
    def from_dict(data: dict) -> GemmFailure:
        """The failure `to_dict` wrote, as its own kind. Every kind is defined in this module, so a
        process that decodes one has them all; a type it does not know is the suite's internal error
        (two processes of different versions, say), never silently a plain failure."""
        cls = GemmFailure._registry.get(data["type"])
        if cls is None:
            return SuiteError(f"a failure of unknown kind {data['type']!r} came back from another process "
                              f"(its message: {data.get('message', '')!r}); the kinds known here are "
                              f"{', '.join(sorted(GemmFailure._registry))}\n{REPORT_TO}",
                              error="UnknownFailureKind", detail=data["type"])
        error = cls.__new__(cls)
        GemmFailure.__init__(error, data["message"], **data.get("fields", {}))
        error.context = dict(data.get("context", {}))
        return error


def statements(line: str) -> list[str]:
    """A line's statements: its parts between "; " outside parentheses (one inside stays in its statement)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(line):
        depth += (ch in "([{") - (ch in ")]}")
        if depth == 0 and line.startswith("; ", i):
            parts.append(line[start:i])
            start = i + 2
    return parts + [line[start:]]


def chain(error: BaseException):
    """`error`, then what it was raised from or while handling (`__cause__`, else `__context__`), each once: a
    chain can loop (a failure re-raised while handling what it was raised from), so it stops at a repeat."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _plain(value):
    """JSON-ready: tuples become lists, dataclasses dicts, numpy scalars Python numbers."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value


class WrongValue(GemmFailure):
    """A value of C differs from the reference: the kernel has no line to tell two of them apart by."""

    def site(self) -> str:
        return "a wrong value"


class ValueOutOfBound(WrongValue):
    kind = "value out of bound"

    @classmethod
    def short(cls) -> str:
        return "out of\nbound"


class NotBitExact(WrongValue):
    kind = "not bit-exact"


class NotWritten(GemmFailure):
    kind = "element never written"

    @classmethod
    def short(cls) -> str:
        return "unwritten"


class WriteOutsideC(GemmFailure):
    kind = "write outside C"


class InputModified(GemmFailure):
    kind = "input modified"


class OutOfBoundsAccess(GemmFailure):
    """A load, store or atomic addressed memory outside the tensor its pointer came from."""

    kind = "out-of-bounds access"

    @classmethod
    def short(cls) -> str:
        return "out of\nbounds"

    def headline(self) -> str:
        f = self.fields
        if not f.get("line"):
            return super().headline()
        return f"out-of-bounds {f['op']} of {f['operand']} in kernel '{f['kernel']}' at {f['line']}"

    def site(self) -> str:
        if self.fields.get("line"):
            return f"the {self.fields['op']} of {self.fields['operand']} at {self.fields['line']}"
        return super().site()


class DuplicateStore(GemmFailure):
    """Two active lanes of one store addressed the same element: the value that lands is unspecified."""

    kind = "duplicate-lane store"

    def site(self) -> str:
        return f"the store at {self.fields['line']}" if self.fields.get("line") else super().site()


class GridTooLarge(GemmFailure):
    """A launch whose grid has more programs along an axis than CUDA allows: it fails on every NVIDIA GPU
    (seen in the interpreter, before any program runs)."""

    kind = "grid past CUDA's limits"


class MemcheckError(OutOfBoundsAccess):
    """compute-sanitizer's memcheck reported an invalid access (GPU)."""


class RacecheckError(GemmFailure):
    """compute-sanitizer's racecheck reported a shared-memory hazard between threads of a block (GPU)."""

    kind = "shared-memory race"


class ConcurrencyError(GemmFailure):
    """A verdict on how a launch's programs interact (a deadlock, a data race). A launch raises it as
    itself, not wrapped in Triton's InterpreterError."""


class Deadlock(ConcurrencyError):
    """Every live program of a launch waits on a value that only another waiting program could change
    (properties/interpreter/schedule.py). Fields: kernel, waiting (a Waiter per waiting program),
    finished (programs run to completion)."""

    kind = "deadlock"


class DataRace(ConcurrencyError):
    """Two programs accessed one element, at least one writing, not both atomic, with no happens-before
    (properties/interpreter/races.py).

    Fields: kernel; operand (the kernel argument the element belongs to), offset (element offset from
    its data pointer), coordinates, address; program_id, op ("load", "store", "atomic add (relaxed)",
    "volatile load", ...) and line ("file:line") of the access that came second here; other_program_id,
    other_op and other_line of the one that came first."""

    kind = "data race"

    def headline(self) -> str:
        f = self.fields
        if not f.get("line"):
            return super().headline()
        return (f"data race on {f['operand']} in kernel '{f['kernel']}': {f['op']} at {f['line']} against "
                f"{f.get('other_op')} at {f.get('other_line')}")

    def site(self) -> str:
        if not self.fields.get("line"):
            return super().site()
        return (f"the {self.fields['op']} of {self.fields['operand']} at {self.fields['line']} against the "
                f"{self.fields.get('other_op')} at {self.fields.get('other_line')}")


class SaidOnce(GemmFailure):
    """A failure whose first line is all there is to tell two apart by (the same crash, the same hang)."""

    def site(self) -> str:
        return self.message.splitlines()[0] if self.message else self.kind


class Crashed(SaidOnce):
    kind = "crashed"


class TimedOut(SaidOnce):
    kind = "timed out"


class LauncherRefused(SaidOnce):
    """The launcher (or the kernel) raised on a case: a contract it did not declare, or a bug."""

    kind = "launcher refused the case"

    @classmethod
    def short(cls) -> str:
        return "refused"

    def site(self) -> str:
        if not self.fields.get("error"):
            return super().site()
        line = self.fields.get("line")
        return (f"the launcher raising {self.fields['error']}: {self.fields.get('detail', '')}"
                + (f" at {line}" if line else ""))


class InterpreterLimitation(GemmFailure):
    """Triton's interpreter itself failed (not the kernel's logic): the example is not runnable in the
    interpreter, never the kernel's failure; a test none of whose examples ran is skipped saying so."""

    kind = "not runnable in the interpreter"
    blame = "interpreter"


class NotRunnable(GemmFailure):
    """A configuration that cannot compile or launch on this device for lack of resources (shared
    memory, registers, threads): Triton's autotuner prunes it, so the kernel as used never runs it.
    Fields: config (its (key, value) pairs), reason, device."""

    kind = "configuration not runnable"
    blame = "device"


REPORT_TO = ("this is a bug in triton-gemm-fuzz, not a verdict on the kernel; please report it with the traceback "
             "above and the repro script (README: 'Reporting a problem with the suite')")


class SuiteError(GemmFailure):
    """The suite's own code raised while judging an example: an internal error of the suite, reported
    with its traceback, never a verdict on the kernel."""

    kind = "internal error of the suite"
    blame = "suite"

    @classmethod
    def of(cls, error: BaseException) -> SuiteError:
        import traceback

        trace = "".join(traceback.format_exception(error)).rstrip()
        return cls(f"{type(error).__name__}: {error}\n{trace}\n{REPORT_TO}", error=type(error).__name__,
                   detail=str(error))


MEMORY_KINDS = (OutOfBoundsAccess.kind, WriteOutsideC.kind, InputModified.kind)
