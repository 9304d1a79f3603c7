"""A deadline for an example run in this process, as a worker's timeout bounds one run in a child.

An example runs here for the built-in variants in the interpreter (their sanitizer refuses a stray store
before it corrupts the process). A kernel that loops forever in Python, or a path of the suite's that does,
would stall the run with no verdict: the example gets the same number of seconds a worker's does, counted as
this process's CPU time (`ITIMER_VIRTUAL`, whose SIGVTALRM nothing else here uses: pytest-timeout's signal
method takes SIGALRM), and past it raises `Overrun` where it runs. A hang in a C extension is not
interrupted; that is what a worker is for (`--gemm-isolate on`).
"""

from __future__ import annotations

import contextlib
import signal
import threading


class Overrun(BaseException):
    """The example ran past its deadline (a BaseException, so no `except Exception` of a kernel, of Triton's
    interpreter or of the suite's machinery swallows it and carries on)."""


@contextlib.contextmanager
def bounded(seconds: float):
    """Raise Overrun in the block once this process has spent `seconds` of CPU time in it; without a timer
    (not the main thread, or no setitimer) the block runs unbounded."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def fire(signum, frame):
        raise Overrun(f"past {seconds:g} s")

    previous = signal.signal(signal.SIGVTALRM, fire)
    signal.setitimer(signal.ITIMER_VIRTUAL, max(seconds, 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)
