"""Watch mode: edit the kernel, save, read the verdict.

    gemm-fuzz --watch my_matmul.py:matmul [--backend auto] [-- PYTEST ARGS]

Each run of the battery happens in a process started, and warmed, before it is needed: Python,
torch, Triton and the suite imported, the interpreter's probes and fixes done (on a GPU its CUDA
context made), waiting for the save. When the kernel's file, or a file of the user's tree it imports,
is saved, the waiting process runs the battery on the kernel with pytest (its verdict lines, the
failures in the usual short form, their repro paths), its examples in that process (`--gemm-isolate
off`: the process is the isolation), and the next one starts warming while the user reads. The
example database persists between runs (Hypothesis's default profile: a failure found once is the
first example tried after the next save); Triton's on-disk cache keeps the kernels of unchanged files
compiled. A kernel that hangs (the whole battery past `timeout` seconds) or crashes costs that run,
never the watch; Ctrl-C ends it. (A forked copy of one warm process would be quicker still, but
neither OpenMP's thread pool nor a CUDA context survives a fork.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL = 0.2  # seconds between looks at the watched files
SETTLE = 0.1  # an editor's save may take several writes: wait this long after the last change


def _repository(path: Path) -> Path:
    from gemm_fuzz.properties.launch import user_kernel

    where = user_kernel._where(path)
    return path.parent if where == path.name else Path(str(path)[: -len(where)])


def watched(kernel_file: Path, modules: dict | None = None) -> list[Path]:
    """The kernel's file and the files of its tree (its repository, or its directory) that the modules
    loaded (`modules`: sys.modules after a run) come from."""
    root = _repository(kernel_file)
    found = {kernel_file}
    for module in list((modules or {}).values()):
        file = getattr(module, "__file__", None)
        if file and file.endswith(".py") and Path(file).is_absolute():  # torch._ops says "_ops.py"
            path = Path(file).resolve()
            if path.is_relative_to(root) and "site-packages" not in path.parts and path.is_file():
                found.add(path)
    return sorted(found)


def _stamp(files: list[Path]) -> tuple:
    stamps = []
    for f in files:
        try:
            s = f.stat()
            stamps.append((str(f), s.st_mtime_ns, s.st_size))
        except FileNotFoundError:
            stamps.append((str(f), None, None))
    return tuple(stamps)


def serve(spec: str, backend: str, report: Path, extra: list[str]) -> int:
    """The waiting process: warm up (the battery's modules import what pytest's plugin needs), wait for a
    line on stdin, run the battery once, report the files the kernel loaded, exit with pytest's status."""
    import hypothesis  # noqa: F401
    import pytest

    from gemm_fuzz.properties.launch import backends

    backends.activate(backend)  # before Triton loads: the interpreter's language, or the GPU's context
    if backend == "cuda":
        import torch

        torch.cuda.init()
    import gemm_fuzz.properties.battery.test_agreement  # noqa: F401
    import gemm_fuzz.properties.battery.test_metamorphic  # noqa: F401
    import gemm_fuzz.properties.battery.test_properties  # noqa: F401

    if not sys.stdin.readline():  # the watch ended before this run was needed
        return 0
    args = ["--gemm-kernel", spec, "--gemm-backend", backend, "--gemm-isolate", "off", "-p", "no:cacheprovider",
            "-p", "no:xdist", "-q", "--no-header", *extra]
    code = pytest.main(args)
    report.write_text("\n".join(str(p) for p in watched(Path(spec.rsplit(":", 1)[0]).resolve(), sys.modules)))
    return int(code)


class _Next:
    """The process that will run the next battery, started (and warming) ahead of the save."""

    def __init__(self, spec: str, backend: str, report: Path, extra: list[str]):
        command = [sys.executable, "-m", "gemm_fuzz.properties.watch", spec, backend, str(report), *extra]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, start_new_session=True, text=True)

    def run(self, timeout: float) -> tuple[str, float]:
        """Start the battery; its verdict in words and the seconds from here to its end."""
        start = time.perf_counter()
        sys.stdout.flush()
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            return f"timed out: the battery ran past {timeout:.0f} s (the kernel hangs?); stopped", timeout
        seconds = time.perf_counter() - start
        if code < 0:
            return f"crashed: the battery's process died of signal {-code}", seconds
        words = {0: "passed", 1: "FAILED", 2: "interrupted", 3: "internal error", 4: "usage error", 5: "nothing ran"}
        return words.get(code, f"exit status {code}"), seconds

    def stop(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


def watch(spec: str, backend: str = "auto", extra: list[str] | None = None, timeout: float = 600.0,
          runs: int | None = None) -> int:
    """Rerun the battery on every save until Ctrl-C (or `runs` runs, for tests). Returns 0, or 130 on Ctrl-C."""
    kernel_file = Path(spec.rsplit(":", 1)[0]).resolve()
    if not kernel_file.is_file():
        print(f"gemm-fuzz --watch: {kernel_file} is not a file; expected PATH.py:FUNC", file=sys.stderr)
        return 2
    backend = _backend(backend)
    report = Path(os.environ.get("TMPDIR", "/tmp")) / f"gemm-watch-{os.getpid()}.files"
    print(f"gemm-fuzz --watch: {spec} on {backend}. Save the kernel (or a file it imports) to rerun the battery; "
          "Ctrl-C ends.", flush=True)
    files, done, stamp = [kernel_file], 0, None
    following = _Next(spec, backend, report, extra or [])
    try:
        while runs is None or done < runs:
            if _stamp(files) == stamp:
                time.sleep(POLL)
                continue
            time.sleep(SETTLE)
            before = _stamp(files)  # a save during the run shows against these
            current, following = following, None
            try:
                verdict, seconds = current.run(timeout)
            except KeyboardInterrupt:
                current.stop()
                raise
            done += 1
            if runs is None or done < runs:
                following = _Next(spec, backend, report, extra or [])  # warms while the verdict is read
            found = [Path(p) for p in report.read_text().splitlines() if p] if report.exists() else files
            stamp = before if found == files else _stamp(found)
            files = found
            print(f"gemm-fuzz --watch: {verdict} in {seconds:.1f} s from the save ({time.strftime('%H:%M:%S')}); "
                  f"watching {len(files)} file(s)", flush=True)
    except KeyboardInterrupt:
        print("\ngemm-fuzz --watch: ended", flush=True)
        return 130
    finally:
        if following is not None:
            following.stop()
        report.unlink(missing_ok=True)
    return 0


def _backend(requested: str) -> str:
    """The backend a child will use, chosen without touching the GPU (torch.cuda.is_available does not
    make a context)."""
    if requested != "auto":
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "interpreter"


if __name__ == "__main__":  # the waiting process (_Next)
    sys.exit(serve(sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4:]))
