"""Every process the suite starts dies with the process that started it, whatever ends that one.

CI systems cancel a job with SIGTERM, then SIGKILL; neither lets Python run its exit handlers, and a
child busy in a kernel that never returns reads no pipe, so it would spin on. Two things end it:

  - the kernel's parent-death signal (Linux's PR_SET_PDEATHSIG): set between fork and exec by `popen`
    for the child it starts, and by `die_with_parent` in the child for a child of its own (a worker
    under compute-sanitizer is compute-sanitizer's child); SIGKILL arrives the moment the parent dies;
  - a watchdog thread in the child that ends it once its parent is gone (where the signal is not
    available, or the parent was a thread that may end first, as with pytest-xdist's workers).

A child knows it was started by the suite from GEMM_PARENT, which `popen` sets and the child removes
(a program it runs in turn is not the suite's). A `gemm-fuzz` started from a shell is left alone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

PARENT = "GEMM_PARENT"  # set in a child's environment by popen: "this process is the suite's child"
_PR_SET_PDEATHSIG = 1
_POLL = 0.25  # seconds between the watchdog's looks at its parent
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _kill_me_with_parent() -> None:
    """Between fork and exec (and in a child itself): SIGKILL when the parent dies."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def popen(command: list[str], *, env: dict | None = None, **options) -> subprocess.Popen:
    """subprocess.Popen for a child that dies with this process (see the module docstring). Call it from a
    thread that lives as long as the child (the parent-death signal follows the thread that forked)."""
    env = dict(os.environ if env is None else env, **{PARENT: str(os.getpid())})
    if _LIBC is not None:
        options["preexec_fn"] = _kill_me_with_parent
    return subprocess.Popen(command, env=env, **options)


def die_with_parent(always: bool = False) -> bool:
    """In a child: end this process as soon as its parent is gone. Acts only in a child the suite started
    (`popen`), or with `always` (a pytest-xdist worker); returns whether it does."""
    started_by_suite = os.environ.pop(PARENT, None) is not None
    if not (started_by_suite or always):
        return False
    parent = os.getppid()
    if started_by_suite and _LIBC is not None:
        _kill_me_with_parent()  # the parent may be compute-sanitizer, itself the suite's child
    if parent == 1:  # orphaned before this ran
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_POLL)
        os._exit(1)

    threading.Thread(target=watch, name="gemm-die-with-parent", daemon=True).start()
    return True
