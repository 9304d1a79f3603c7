"""Running examples in a worker process, so that a crash or a hang costs one example, never the run.

On a GPU an illegal memory access poisons the CUDA context of its process: every later call fails.
A kernel that never terminates blocks its process in the driver, where no Python timeout reaches.
Run in a `Worker` (a child running `properties.worker`), the example that crashed or hung fails with
its case, the worker is replaced, and the next example runs in a fresh process with a fresh context.

The same workers serve the compute-sanitizer mode (the child runs under `compute-sanitizer --tool
memcheck` with PyTorch's caching allocator off, so small overruns are not hidden inside cached
blocks) and cross-backend comparison (an interpreter worker next to compiled kernels).
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from properties.worker import ANSWER

MEMCHECK = ("compute-sanitizer", "--tool", "memcheck", "--leak-check", "no", "--print-limit", "20",
            "--destroy-on-device-error", "kernel")


class WorkerCrashed(AssertionError):
    """The process running the example died (a segfault, an aborted heap, a lost CUDA context)."""


class KernelTimeout(AssertionError):
    """The example did not finish within the time limit (a kernel that never terminates)."""


class GpuMemoryError(AssertionError):
    """compute-sanitizer's memcheck reported an access outside an allocation."""


class WorkerFailure(AssertionError):
    """The example raised in the worker (the kernel itself, or its launcher)."""


@dataclass
class Answer:
    status: str  # "pass" or "fail"
    payload: dict
    log: list[str] = field(default_factory=list)  # what the worker printed meanwhile (sanitizer reports)


class Worker:
    """A child process that runs examples for this one, started on first use and after a crash."""

    def __init__(self, backend: str, *, kernel_spec: str | None = None, sanitize: bool = False,
                 caching_allocator: bool = False, start_timeout: float = 600.0):
        self.backend = backend
        self.kernel_spec = kernel_spec
        self.sanitize = sanitize
        self.caching_allocator = caching_allocator  # under sanitize: keep PyTorch's cache (to show what it hides)
        self.start_timeout = start_timeout
        self.process: subprocess.Popen | None = None
        self.lines: queue.Queue = queue.Queue()
        self.restarts = 0

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "properties.worker", "--backend", self.backend]
        if self.kernel_spec:
            cmd += ["--kernel", self.kernel_spec]
        return list(MEMCHECK) + cmd if self.sanitize else cmd

    def _start(self) -> None:
        env = dict(os.environ, GEMM_BACKEND=self.backend, PYTHONUNBUFFERED="1")
        if self.sanitize and not self.caching_allocator:
            env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"  # else cached blocks hide small overruns
        self.process = subprocess.Popen(self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, bufsize=1, env=env,
                                        start_new_session=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, args=(self.process, self.lines), daemon=True).start()
        ready, log = self._read_answer(self.start_timeout)
        if ready is None:
            output = "\n".join(log[-30:])
            self.close()
            raise RuntimeError(f"the {self.backend} worker did not start:\n{output}")

    @staticmethod
    def _pump(process: subprocess.Popen, lines: queue.Queue) -> None:
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)  # end of output: the process is gone

    def _read_answer(self, timeout: float) -> tuple[dict | None, list[str]]:
        """The next answer, and the other lines printed before it; (None, lines) at EOF or timeout."""
        deadline = time.monotonic() + timeout
        log = []
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return None, log + ["<timeout>"]
            if line is None:
                return None, log
            if line.startswith(ANSWER):
                return json.loads(line[len(ANSWER):]), log
            log.append(line)

    def run(self, variant: str, case, *, timeout: float, output: Path | None = None) -> Answer:
        """Run one example. Raises KernelTimeout or WorkerCrashed (and replaces the worker)."""
        if self.process is None or self.process.poll() is not None:
            self._start()
        request = {"variant": variant, "case": json.loads(case.to_json()), "output": str(output) if output else None}
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # the process died; reading says how
        payload, log = self._read_answer(timeout)
        if payload is None:
            timed_out = log[-1:] == ["<timeout>"]
            code = self.close()
            self.restarts += 1
            tail = "\n".join(line for line in log[-25:] if line != "<timeout>")
            where = f"variant {variant!r} on {case.describe()}"
            if timed_out:
                raise KernelTimeout(f"{where}: no result after {timeout:.0f} s (a kernel that never terminates?); "
                                    f"the worker was killed and replaced\n{tail}")
            raise WorkerCrashed(f"{where}: the worker process died (exit code {code}); a fresh one takes the next "
                                f"example\n{tail}")
        if payload.get("context_lost"):
            self.close()
            self.restarts += 1
        return Answer(payload["status"], payload, log)

    def close(self) -> int | None:
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            try:
                process.stdin.close()
                process.wait(timeout=5)
            except (subprocess.TimeoutExpired, OSError):
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        return process.returncode


def memcheck_errors(log: list[str]) -> list[str]:
    """compute-sanitizer's error reports in a worker's output."""
    reports = [line for line in log if line.startswith("=========") and "COMPUTE-SANITIZER" not in line]
    return [line for line in reports if line.strip("= ").strip()]


# --- dispatch used by the tests: in this process, or in a worker -----------------------------------

_SETTINGS = {"isolate": False, "sanitize": False, "timeout": 300.0, "kernel_spec": None}
_WORKERS: dict[tuple, Worker] = {}


def configure(*, isolate: bool, sanitize: bool = False, timeout: float = 300.0, kernel_spec: str | None = None):
    _SETTINGS.update(isolate=isolate or sanitize, sanitize=sanitize, timeout=timeout, kernel_spec=kernel_spec)


def settings() -> dict:
    return dict(_SETTINGS)


def worker(backend: str, *, sanitize: bool = False) -> Worker:
    key = (backend, sanitize, _SETTINGS["kernel_spec"])
    if key not in _WORKERS:
        _WORKERS[key] = Worker(backend, kernel_spec=_SETTINGS["kernel_spec"], sanitize=sanitize)
    return _WORKERS[key]


@atexit.register
def _close_workers() -> None:
    for w in _WORKERS.values():
        w.close()


def _raise_failure(payload: dict) -> None:
    from properties.interpreter.sanitizer import OutOfBoundsAccess
    from properties.judge.oracles import GemmMismatch

    kind = {"GemmMismatch": GemmMismatch, "OutOfBoundsAccess": OutOfBoundsAccess}.get(payload["error"], WorkerFailure)
    raise kind(payload["message"])


def run_example(variant, case, backend):
    """`properties.judge.check.check`, in this process or (when configured) in a worker."""
    from properties.judge import check

    if not _SETTINGS["isolate"]:
        return check.check(variant, case, backend)
    start = time.perf_counter()
    answer = worker(backend.name, sanitize=_SETTINGS["sanitize"]).run(variant.name, case, timeout=_SETTINGS["timeout"])
    errors = memcheck_errors(answer.log) if _SETTINGS["sanitize"] else []
    if errors:
        raise GpuMemoryError(f"variant {variant.name!r} on {case.describe()}: compute-sanitizer memcheck "
                             "(caching allocator off) reports:\n" + "\n".join(errors[:12]))
    if answer.status != "pass":
        _raise_failure(answer.payload)
    return check.Observation(variant.name, case, answer.payload["exact"], answer.payload["error_ratio"],
                             time.perf_counter() - start, answer.payload.get("torch_ratio"))


def output_of(backend: str, variant, case, *, timeout: float = 600.0) -> np.ndarray:
    """C computed by `variant` on `case` in a `backend` worker, as float64 (the example must pass)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.npy"
        answer = worker(backend).run(variant.name, case, timeout=timeout, output=path)
        if answer.status != "pass":
            _raise_failure(answer.payload)
        return np.load(path)
