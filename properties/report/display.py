"""A failing example as a kernel author reads it: what was wrong, where, the case in one line and
the command that replays it, in about fifteen lines, with no frames of the suite's own machinery
(the repro script holds the full detail; `--tb=long` shows pytest's own report)."""

from __future__ import annotations

MAX_MESSAGE_LINES = 9


def lines(failure) -> list[str]:
    """One failure, short."""
    context = failure.context
    head = f"{failure.kind}: {context.get('variant', '?')} on {context.get('case', '?')}"
    body = failure.message.splitlines()
    if len(body) > MAX_MESSAGE_LINES:
        body = body[:MAX_MESSAGE_LINES] + [f"... ({len(body) - MAX_MESSAGE_LINES} more lines in the repro's output)"]
    out = [head]
    if context.get("check"):
        out.append(f"  check: {context['check']}")
    out += ["  " + line for line in body]
    repro = getattr(failure, "repro", None)
    if repro is not None:
        out.append(f"  repro: python {repro}")
    return out


def _failures(error: BaseException) -> list | None:
    """The suite's failures in an exception (Hypothesis groups distinct bugs), or None if another
    exception is among them (then pytest's own report is the right one)."""
    from properties.judge.failures import GemmFailure

    if isinstance(error, GemmFailure):
        return [error]
    if isinstance(error, BaseExceptionGroup):
        found = []
        for inner in error.exceptions:
            sub = _failures(inner)
            if sub is None:
                return None
            found += sub
        return found
    return None


def headline(failure) -> str:
    """The reason, for pytest's one-line short summary."""
    return f"{failure.kind}: {failure.message.splitlines()[0] if failure.message else ''}"


def longrepr(error: BaseException, path: str):
    """A pytest report body for a failing test whose exception is the suite's, else None."""
    from _pytest._code.code import ExceptionChainRepr, ReprEntryNative, ReprFileLocation, ReprTraceback

    found = _failures(error)
    if not found:
        return None
    text: list[str] = []
    if len(found) > 1:
        text.append(f"{len(found)} distinct failures:")
    for failure in found:
        text += lines(failure)
    entry = ReprEntryNative([line + "\n" for line in text])
    crash = ReprFileLocation(path, 0, headline(found[0]) + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""))
    return ExceptionChainRepr([(ReprTraceback([entry], None, "native"), crash, None)])
