"""Worker processes: an example run in a child, so that a crash or a hang costs one example, never
the run.

On a GPU an illegal memory access poisons the CUDA context of its process: every later call fails.
A kernel that never terminates blocks its process in the driver, where no Python timeout reaches;
in the interpreter a kernel can loop forever in Python or take the process down (a corrupted heap,
a null dereference in a C extension). Run in a `Worker` (a child running `gemm_fuzz.properties.run.worker`), the
example that crashed or hung fails as `Crashed` or `TimedOut` with its case, the child is replaced,
and the next example runs in a fresh process.

The same workers serve the compute-sanitizer mode (the child runs under `compute-sanitizer --tool
memcheck` with PyTorch's caching allocator off, so small overruns are not hidden inside cached
blocks) and the compiled-against-interpreted comparison (an interpreter worker beside a GPU one).
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from gemm_fuzz.properties.judge.failures import Crashed, GemmFailure, MemcheckError, RacecheckError, TimedOut
from gemm_fuzz.properties.run import children
from gemm_fuzz.properties.run.worker import ANSWER

# compute-sanitizer's command line per tool: memcheck sees invalid global and shared accesses; racecheck
# sees hazards on shared memory between the threads of one block (never global memory, never between
# programs: the interpreter's race detector covers those)
SANITIZERS = {
    "memcheck": ("compute-sanitizer", "--tool", "memcheck", "--leak-check", "no", "--print-limit", "20",
                 "--destroy-on-device-error", "kernel"),
    "racecheck": ("compute-sanitizer", "--tool", "racecheck", "--racecheck-report", "hazard", "--print-limit", "20"),
}


@dataclass
class Answer:
    payload: dict  # {"status": "pass", "observation": {...}} or {"status": "fail", "failure": {...}}
    log: list[str] = field(default_factory=list)  # what the worker printed meanwhile
    seconds: float = 0.0


class Worker:
    """A child process that runs examples for this one, started on first use and after a crash."""

    def __init__(self, backend: str, *, kernel: dict | None = None, sanitizer: str | None = None,
                 caching_allocator: bool = False, start_timeout: float = 600.0):
        self.backend = backend
        self.kernel = kernel  # a user kernel to load: {"spec": ..., "signature": ...}
        if sanitizer not in (None, *SANITIZERS):
            raise ValueError(f"unknown sanitizer {sanitizer!r}; expected one of {', '.join(SANITIZERS)}")
        self.sanitizer = sanitizer  # None, or the compute-sanitizer tool the child runs under
        self.caching_allocator = caching_allocator  # under memcheck: keep PyTorch's cache (to show what it hides)
        self.start_timeout = start_timeout
        self.process: subprocess.Popen | None = None
        self.lines: queue.Queue = queue.Queue()
        self.restarts = 0
        self.spawned = False  # a process was started for it once
        self.unable: str | None = None  # why it could not start, once it could not (a broken environment)
        self.parked = False  # its process served an earlier run of this one and waits for the next (keep_workers)

    def _identity(self) -> tuple:
        return (json.dumps(self.kernel, sort_keys=True), self.sanitizer, self.caching_allocator)

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "gemm_fuzz.properties.run.worker", "--backend", self.backend]
        if self.kernel:
            cmd += ["--kernel", json.dumps(self.kernel)]
        return list(SANITIZERS[self.sanitizer]) + cmd if self.sanitizer else cmd

    def _spawn(self) -> None:
        env = dict(os.environ, GEMM_BACKEND=self.backend, PYTHONUNBUFFERED="1")
        if self.sanitizer and not self.caching_allocator:
            env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"  # else cached blocks hide small overruns
        self.process = children.popen(self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, bufsize=1, env=env, start_new_session=True)
        self.spawned = True
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, args=(self.process, self.lines), daemon=True).start()

    def _launch(self, spare: int = 0) -> Worker | None:
        """Give this worker a process, without waiting for it: one started early if more than `spare` are
        waiting (returned), else a new one."""
        waiting = _PRESTARTED.get(self._identity(), [])
        matching = [w for w in waiting if w.backend in ("auto", self.backend)]
        early = matching[0] if len(matching) > spare else None
        if early is not None:  # started before this process imported torch: its start-up overlapped ours
            waiting.remove(early)
            self.process, self.lines, early.process, self.spawned = early.process, early.lines, None, True
            if early.parked:  # it answered 'ready' for an earlier run: it reloads an edited kernel, answers again
                try:
                    self.process.stdin.write(json.dumps({"refresh": True}) + "\n")
                    self.process.stdin.flush()
                except (BrokenPipeError, OSError):
                    pass  # it died waiting: _start reads the end of its output
        else:
            self._spawn()
        return early

    def _start(self) -> None:
        if self.unable is not None:  # it could not start before: the same reason, without the wait
            raise RuntimeError(self.unable)
        early = self._launch()
        ready, log = self._read_answer(self.start_timeout)
        if early is not None and ready is not None and ready.get("backend") not in (None, self.backend):
            self.close()  # it resolved "auto" to another backend than this process did: start the right one
            return self._start()
        if ready is None or ready.get("status") == "error":
            self.close()
            self.unable = (f"the {self.backend} worker could not start: {ready['message']}" if ready else
                           f"the {self.backend} worker did not start:\n" + "\n".join(log[-30:]))
            raise RuntimeError(self.unable)

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

    def run(self, example: dict, *, timeout: float, output: Path | None = None,
            deadline: float | None = None) -> Answer:
        """Run one example (Example.to_dict()) for at most `timeout` seconds once the worker is up, and
        not past `deadline` (monotonic). Raises TimedOut or Crashed (and replaces the worker)."""
        if self.process is None or self.process.poll() is not None:
            self._start()
        start = time.monotonic()
        if deadline is not None:
            timeout = max(0.0, min(timeout, deadline - start))
        request = {"example": example, "output": str(output) if output else None}
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # the process died; reading says how
        payload, log = self._read_answer(timeout)
        seconds = time.monotonic() - start
        if payload is None:
            timed_out = log[-1:] == ["<timeout>"]
            code = self.close(kill=timed_out)
            self.restarts += 1
            tail = "\n".join(line for line in log[-25:] if line != "<timeout>")
            if timed_out:
                raise TimedOut(f"no result after {timeout:.0f} s (a kernel that never terminates?); the worker was "
                               "killed and replaced" + (f"\n{tail}" if tail else ""), seconds=timeout)
            raise Crashed(f"the worker process died ({_exit_text(code)}); a fresh one takes the next example"
                          + (f"\n{tail}" if tail else ""), exit_code=code)
        if payload.get("context_lost"):
            self.close()
            self.restarts += 1
        return Answer(payload, log, seconds)

    def send(self, request: dict) -> None:
        """Hand the worker a request and go on, never waiting for it (started, not awaited, the first
        time, leaving the last process started early to the examples; one that has died is not started
        again)."""
        if self.process is None and not self.spawned:
            self._launch(spare=1)
        if self.process is None or self.process.poll() is not None:
            return
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def release(self) -> None:
        """Done with it: end it, or, after keep_workers(), park its process, warm, for this process's next run."""
        if not _KEEP or self.sanitizer or self.process is None or self.process.poll() is not None:
            self.close()
            return
        self.parked = True  # the next run's worker of this identity adopts its process (_launch)
        _PRESTARTED.setdefault(self._identity(), []).append(self)

    def close(self, kill: bool = False) -> int | None:
        """End the worker: ask it to finish (its stdin closes), or kill it at once (a hung one)."""
        process, self.process = self.process, None
        if process is None:
            return None
        if kill and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        if process.poll() is None:
            try:
                process.stdin.close()
                process.wait(timeout=5)
            except (subprocess.TimeoutExpired, OSError):
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        return process.returncode


# workers started before this process chose its backend, or parked by an earlier run, by identity
# (kernel, sanitizer, allocator)
_PRESTARTED: dict[tuple, list[Worker]] = {}
_KEEP = False  # keep_workers(): a released worker is parked, not ended


def keep_workers() -> None:
    """From now on a worker a run is done with stays up, parked, and the next run in this process adopts
    it (watch mode, which runs the battery again and again in one process): the worker's start-up (seconds)
    is paid once, and on adoption it reloads the user's kernel if its files changed. It still ends with
    this process."""
    global _KEEP
    _KEEP = True


def prestart(backend: str, kernel: dict | None) -> None:
    """Start a worker for examples now, without waiting for it: a process that then imports torch and
    Triton (seconds) does so at the same time as the worker, and the runner adopts the worker on first
    use (one it never uses ends when this process does). `backend` may be "auto": the worker resolves
    it as this process will, and is adopted only if both agree."""
    worker = Worker(backend, kernel=kernel)
    worker._spawn()
    _PRESTARTED.setdefault(worker._identity(), []).append(worker)
    atexit.register(worker.close, kill=True)


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def sanitizer_errors(log: list[str]) -> list[str]:
    """compute-sanitizer's error reports in a worker's output."""
    reports = [line for line in log if line.startswith("=========") and "COMPUTE-SANITIZER" not in line]
    # racecheck closes with a count ("RACECHECK SUMMARY: 0 hazards displayed"), not an error
    return [line for line in reports if line.strip("= ").strip() and "RACECHECK SUMMARY: 0 hazards" not in line]


def verdict(answer: Answer, sanitizer: str | None) -> dict:
    """The observation of a passing answer; raises the failure a worker (or its sanitizer) reported."""
    errors = sanitizer_errors(answer.log) if sanitizer else []
    if errors and sanitizer == "memcheck":
        raise MemcheckError("compute-sanitizer memcheck (caching allocator off) reports:\n" + "\n".join(errors[:12]),
                            reports=errors[:12])
    if errors:
        raise RacecheckError("compute-sanitizer racecheck reports:\n" + "\n".join(errors[:12]), reports=errors[:12])
    if answer.payload["status"] != "pass":
        raise GemmFailure.from_dict(answer.payload["failure"])
    return answer.payload["observation"]
