"""A failing example as a kernel author reads it: what was wrong, where, the case in one line and
the command that replays it, in about twenty lines at most (a wrong value: its worst elements, a
small case's inputs and the step its value fits), with no frames of the suite's own machinery
(the repro script holds the full detail; `--tb=long` shows pytest's own report)."""

from __future__ import annotations

import textwrap

from gemm_fuzz.properties.judge.failures import statements

MAX_MESSAGE_LINES = 16  # a value failure: 3 statements, its worst elements (5), inputs and the step (8)
WIDTH = 110  # a message's lines are wrapped to this many characters


def _body(message: str) -> list[str]:
    """The message one statement a line, wrapped to WIDTH."""
    out = []
    for line in message.splitlines():
        indent = " " * (len(line) - len(line.lstrip()))
        for part in statements(line.strip()):
            out += textwrap.wrap(part, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                                 break_long_words=False, break_on_hyphens=False) or [""]
    return out


def lines(failure) -> list[str]:
    """One failure, short."""
    context = failure.context
    head = f"{failure.kind}: {context.get('variant', '?')} on {context.get('case', '?')}"
    if failure.blame == "suite":  # the traceback, whole: it is what a report of the suite's bug needs
        body = failure.message.splitlines()
    else:
        body = _body(failure.message)
    if len(body) > MAX_MESSAGE_LINES and failure.blame != "suite":
        body = body[:MAX_MESSAGE_LINES] + [f"... ({len(body) - MAX_MESSAGE_LINES} more lines in the repro's output)"]
    out = [head]
    if context.get("check"):
        out += textwrap.wrap(f"check: {context['check']}", WIDTH, initial_indent="  ", subsequent_indent="    ")
    out += ["  " + line for line in body]
    repro = getattr(failure, "repro", None)
    if repro is not None:
        out.append(f"  repro: python {repro}")
    saved = getattr(failure, "saved", None)  # --gemm-save-cases: its operands, to load_case and run_case
    if saved is not None:
        out.append(f"  saved: {saved}")
    elif getattr(failure, "saved_error", None):
        out.append(f"  saved: not saved ({failure.saved_error})")
    return out


def failures(error: BaseException) -> list | None:
    """The suite's failures in an exception (Hypothesis groups distinct bugs), or None if another
    exception is among them (then pytest's own report is the right one)."""
    from gemm_fuzz.properties.judge.failures import GemmFailure

    if isinstance(error, GemmFailure):
        return [error]
    if isinstance(error, BaseExceptionGroup):
        found = []
        for inner in error.exceptions:
            sub = failures(inner)
            if sub is None:
                return None
            found += sub
        return found
    return None


def longrepr(found: list, path: str):
    """A pytest report body for a test that failed with the suite's failures `found`."""
    from _pytest._code.code import ExceptionChainRepr, ReprEntryNative, ReprFileLocation, ReprTraceback

    text: list[str] = []
    if len(found) > 1:
        text.append(f"{len(found)} distinct failures:")
    for failure in found:
        text += lines(failure)
    entry = ReprEntryNative([line + "\n" for line in text])
    crash = ReprFileLocation(path, 0, found[0].headline() + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""))
    return ExceptionChainRepr([(ReprTraceback([entry], None, "native"), crash, None)])
