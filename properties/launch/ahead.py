"""Compiling ahead: the kernels examples will launch, compiled in parallel threads before they run.

Triton compiles a kernel the first time it is launched with a new specialization (about 0.5 s on
an H100), one launch after another. `compile_ahead(variant, cases)` instead runs the variant's
launcher on each case's operands with every Triton launch turned into a warm-up (compile, do not
run) inside Triton's `AsyncCompileMode`, which hands each compilation to a thread pool; it returns at
once. Each kernel enters its JIT cache as its compilation ends (Triton 3.9 keeps a placeholder there
meanwhile, which a launch waits on), and Triton's disk cache, so a later launch of the same
specialization, in this process or another, does not compile it again. Triton
releases the GIL while it compiles: on an H100 host, 12 kernels compiled in 0.8 s this way against
5.4 s one after another.

A launcher that calls something other than Triton launches (a torch op on C, an assertion on its
operands) runs as usual; one that raises on a case is left alone here: the example itself will
report it. On the interpreter there is nothing to compile and this does nothing.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace

_MODE = None  # the AsyncCompileMode every compilation ahead goes through (never exited: it would wait)
_QUEUED: set[tuple[str, str]] = set()  # (variant, case) pairs already handed over


def _async_mode():
    global _MODE
    if _MODE is None:
        from triton.runtime._async_compile import AsyncCompileMode

        _MODE = AsyncCompileMode(ThreadPoolExecutor(max_workers=os.cpu_count() or 4,
                                                    thread_name_prefix="gemm-compile-ahead"))
    return _MODE


@contextmanager
def _warm_launches():
    """Within the block, a Triton launch compiles its kernel in the background and does not run it."""
    from triton.runtime import _async_compile
    from triton.runtime.jit import JITFunction

    run = JITFunction.run

    def warm_only(self, *args, grid, warmup, **kwargs):
        kernel = run(self, *args, grid=grid, warmup=True, **kwargs)
        future = getattr(kernel, "future", None)
        if future is not None:  # into the kernel's cache once compiled (Triton 3.6 leaves that to the waiter)
            future.add_done_callback(lambda _, kernel=kernel: _finish(kernel))
        return kernel

    JITFunction.run = warm_only
    token = _async_compile.active_mode.set(_async_mode())
    try:
        yield
    finally:
        _async_compile.active_mode.reset(token)
        JITFunction.run = run


def _finish(kernel) -> None:
    try:
        kernel.result()
    except Exception:  # noqa: BLE001  a failed compilation: the launch that needs the kernel reports it
        pass


def hash_triton_in_background() -> None:
    """Start computing, in a thread, the hash of Triton's own compiler and library (`triton_key`: about
    0.35 s on an H100 host, mostly reading libtriton) that Triton computes once per process the first time
    it looks a kernel up: a process about to launch compiled kernels then has it ready for its first
    launch (hashlib and file reads release the GIL). Without it, or on a Triton without it, nothing."""
    try:
        from triton.runtime.cache import triton_key
    except ImportError:
        return
    threading.Thread(target=_quietly, args=(triton_key,), name="gemm-triton-key", daemon=True).start()


def _quietly(work) -> None:
    try:
        work()
    except Exception:  # noqa: BLE001  the first lookup computes it again and reports what goes wrong
        pass


def compile_ahead(variant, cases, backend) -> int:
    """Start compiling what `variant` launches on each of `cases` (GemmCases); returns how many cases
    were handed over (those seen before are not)."""
    if backend.interpreted:
        return 0
    from gemm_fuzz.properties.model.cases import materialize
    from gemm_fuzz.reference.formats import by_name

    fresh = []
    for case in cases:
        key = (variant.name, case.to_json())
        if key not in _QUEUED:
            _QUEUED.add(key)
            fresh.append(case)
    if not fresh:
        return 0
    with _warm_launches():
        for case in fresh:
            operation = variant.operation_in(backend.device.type, by_name(case.dtype).dtype, case.config)
            ops = materialize(replace(case, profile="ones", specials=False), backend.device, operation)
            try:
                variant.launch(ops.a.view, ops.b.view, ops.c.view, config=dict(case.config) or None, **ops.keywords())
            except Exception:  # noqa: BLE001  the example itself reports what the launcher raises
                pass
    return len(fresh)
