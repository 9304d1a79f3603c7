"""Watch mode: edit the kernel, save, read the verdict.

    gemm-fuzz --watch my_matmul.py:matmul [--backend auto] [--workers N] [-- PYTEST ARGS]

A few long-lived processes (`--workers`, default one per core up to 8) keep everything warm between
saves: Python, torch, Triton and the suite imported, the interpreter's probes and fixes done, on a
GPU the CUDA context made, the built-in judge's kernels and torch's own loaded by the first run, and
the interpreter worker of the compiled-against-interpreted test, started by the first run, parked
between runs. On each save every process runs the battery with pytest (`--gemm-isolate off`: the
process is the isolation), each test in the one process that claims it first, the tests that took
longest last time first, and the watch prints each test's verdict as it ends, a failure in the usual
short form with its repro path, the distinct bugs, and the verdict. Before a run each process drops
the modules of the user's tree when a file of it changed in content, so the kernel and the files it
imports are imported afresh (Triton's disk cache keeps the kernels of unchanged files compiled); a
save that changed nothing keeps them, compiled, in memory. The example database persists between
runs (Hypothesis's default profile: a failure found once is the first example tried after the next
save).

A kernel that hangs (the battery past `timeout` seconds) or crashes a process costs that run, never
the watch: the process is replaced by a fresh one, warming while the verdict is read, and so is a
process whose CUDA context a kernel broke (an illegal address is sticky). Ctrl-C ends it.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gemm_fuzz.properties.run import children, fleet

POLL = 0.2  # seconds between looks at the watched files
SETTLE = 0.1  # an editor's save may take several writes: wait this long after the last change
EXIT_WORDS = {0: "passed", 1: "FAILED", 2: "interrupted", 3: "internal error", 4: "usage error", 5: "nothing ran"}


def _stamp(files: list[Path]) -> tuple:
    stamps = []
    for f in files:
        try:
            s = f.stat()
            stamps.append((str(f), s.st_mtime_ns, s.st_size))
        except FileNotFoundError:
            stamps.append((str(f), None, None))
    return tuple(stamps)


class _Claiming:
    """A pytest plugin for one warm process of several: the tests it ran last time (`mine`) first, then
    the others, each group longest first by last time's `seconds` (new ones first); each test run by the
    process that claims it first (a file created in `claims`, which only one process can create), so the
    processes share the battery as they become free, each keeping to its tests of last time while it can;
    each test's end told to the watch, one JSON line each."""

    def __init__(self, claims: Path, seconds: dict[str, float], mine: list[str], tell):
        self.claims, self.seconds, self.mine, self.tell = claims, seconds, set(mine), tell

    @pytest.hookimpl(trylast=True)  # after -k, -m and the suite's own selection
    def pytest_collection_modifyitems(self, items) -> None:
        # the tests this process ran last time first (their kernels are loaded here), then the others
        items.sort(key=lambda item: (item.nodeid not in self.mine, -self.seconds.get(item.nodeid, float("inf"))))

    def _claim(self, item) -> bool:
        try:
            os.close(os.open(self.claims / hashlib.sha256(item.nodeid.encode()).hexdigest()[:32],
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False  # another process runs it

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session) -> bool | None:
        if session.testsfailed or session.config.option.collectonly:
            return None  # pytest's own loop reports the collection errors, or lists the tests
        for item in session.items:
            if not self._claim(item):
                continue
            # which test this process runs next is not known yet: keep the session's fixtures set up (the
            # runner), tear down the rest, as before a test of another module (or the next of this one)
            keep = next((other for other in session.items if other.parent is not item.parent), None) or \
                next((other for other in session.items if other is not item), None)
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=keep)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        return True

    def pytest_runtest_logreport(self, report) -> None:
        if report.when != "call" and report.passed:
            return
        reason = report.longrepr[2].removeprefix("Skipped: ") if report.skipped and isinstance(report.longrepr, tuple) \
            else ""
        self.tell({"test": report.nodeid, "outcome": report.outcome, "when": report.when,
                   "seconds": report.duration, "text": report.longreprtext if report.failed else "",
                   "reason": reason, "failures": getattr(report, "gemm_failures", [])})


def serve(spec: str, backend: str, files: Path, answers: int, extra: list[str]) -> int:
    """A warm process: warm up, then for each line on stdin (the run's claims directory, the last run's
    durations and the tests this process ran) run the tests of the battery it claims, telling the watch
    on the `answers` descriptor how each ended, then pytest's status; write the files of the kernel's
    tree to `files`. Ends when stdin closes, or after a run that left it unable to run another (the
    watch then starts a fresh one)."""
    from gemm_fuzz.properties.run import children, isolation

    children.die_with_parent()  # a watch killed meanwhile (SIGKILL runs no clean-up) takes this process along
    isolation.keep_workers()  # the interpreter worker of the compiled-against-interpreted test waits for the next run
    if backend == "cuda":  # that worker, warming now: whichever process claims that test has one ready
        from gemm_fuzz.properties.launch import kernel_spec

        isolation.prestart("interpreter", {"spec": kernel_spec.canonical(spec), "signature": None})
    import hypothesis  # noqa: F401

    from gemm_fuzz.properties.launch import backends

    active = backends.activate(backend)  # before Triton loads: the interpreter's language, or the GPU's context
    from gemm_fuzz.properties.launch import user_kernel
    from gemm_fuzz.properties.run.worker import context_alive

    if backend == "cuda":
        import torch

        torch.cuda.init()
        from gemm_fuzz.properties.launch import ahead

        ahead.hash_triton_in_background()
    import gemm_fuzz.properties.battery.test_agreement  # noqa: F401
    import gemm_fuzz.properties.battery.test_metamorphic  # noqa: F401
    import gemm_fuzz.properties.battery.test_properties  # noqa: F401

    kernel_file = Path(spec.rsplit(":", 1)[0]).resolve()
    args = ["--gemm-kernel", spec, "--gemm-backend", backend, "--gemm-isolate", "off", "-p", "no:cacheprovider",
            "-p", "no:xdist", "-q", "--no-header",
            "-W", "ignore::pytest.PytestAssertRewriteWarning", *extra]  # hypothesis was imported above, on purpose
    with os.fdopen(answers, "w") as answer:
        def tell(message: dict) -> None:
            answer.write(json.dumps(message) + "\n")
            answer.flush()

        for line in sys.stdin:
            run = json.loads(line)
            user_kernel.refresh()  # an edited tree is imported afresh; one saved unchanged stays compiled
            claiming = _Claiming(Path(run["claims"]), run["seconds"], run["mine"], tell)
            code = pytest.main(list(args), plugins=[claiming])  # a copy: pytest adds to the list
            files.write_text("\n".join(str(p) for p in user_kernel.tree(kernel_file)))
            healthy = context_alive(active)  # a CUDA fault (an illegal address) is sticky: then a fresh process
            tell({"done": int(code), "healthy": healthy})
            if not healthy:
                return 0
    return 0


class _Server:
    """One warm process of `count`, started (and warming) ahead of the save, on `device` (a GPU) if given."""

    def __init__(self, spec: str, backend: str, index: int, count: int, device: str | None, extra: list[str]):
        self.index = index
        base = Path(os.environ.get("TMPDIR", "/tmp")) / f"gemm-watch-{os.getpid()}-{index}"
        self.files, self.log = base.with_suffix(".files"), base.with_suffix(".log")
        read, write = os.pipe()
        command = [sys.executable, "-m", "gemm_fuzz.properties.watch", spec, backend, str(self.files), str(write),
                   *extra]
        env = fleet.child_env(count, device)  # the cores shared out, not each process taking all of them
        with open(self.log, "wb") as log:  # what pytest prints: shown when a run ends abnormally
            self.process = children.popen(command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True, text=True, pass_fds=(write,), env=env)
        os.close(write)
        self.answers, self.pending, self.logged = read, b"", 0

    def go(self, claims: Path, seconds: dict[str, float], mine: list[str]) -> None:
        self.logged = self.log.stat().st_size if self.log.exists() else 0
        try:
            self.process.stdin.write(json.dumps({"claims": str(claims), "seconds": seconds, "mine": mine}) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # it died waiting: reading says so

    def read(self) -> list[dict] | None:
        """The messages that have arrived; None once the process has closed its end (it died)."""
        chunk = os.read(self.answers, 1 << 16)
        if not chunk:
            return None
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        return [json.loads(line) for line in lines if line]

    def output(self) -> str:
        """What the process printed during this run."""
        try:
            with open(self.log, "rb") as f:
                f.seek(self.logged)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        if self.process.stdin:
            self.process.stdin.close()
        os.close(self.answers)
        self.files.unlink(missing_ok=True)
        self.log.unlink(missing_ok=True)


def _show(message: dict) -> None:
    """One test's verdict, as it ends: a failure in the suite's short form (with its repro path)."""
    path, _, test = message["test"].partition("::")
    test = f"{Path(path).name}::{test}"
    if message["outcome"] == "passed":
        print(f"PASSED {test} ({message['seconds']:.1f} s)", flush=True)
    elif message["outcome"] == "skipped":
        print(f"SKIPPED {test}: {message['reason']}", flush=True)
    else:
        what = "FAILED" if message["when"] == "call" else f"ERROR at {message['when']} of"
        print(f"{what} {test}\n{message['text']}", flush=True)


def _battery(servers: list[_Server], timeout: float, seconds: dict[str, float],
             ran: dict[str, int]) -> tuple[str, set[int]]:
    """Run the battery once across the servers, printing each test's verdict as it ends: the verdict in
    words, and the servers that cannot run the next battery. `seconds` (each test's duration last time)
    and `ran` (the server that ran it) are brought up to date."""
    claims = Path(tempfile.mkdtemp(prefix="gemm-watch-claims-"))
    try:
        for server in servers:
            server.go(claims, seconds, [test for test, index in ran.items() if index == server.index])
        waiting = {server.answers: server for server in servers}
        deadline, counts, records, codes, ended, lost = time.monotonic() + timeout, {}, [], {}, [], set()
        while waiting:
            ready, _, _ = select.select(list(waiting), [], [], max(0.0, deadline - time.monotonic()))
            if not ready:  # the battery ran past the limit: the processes still running are stopped
                lost |= {server.index for server in waiting.values()}
                ended.append(f"timed out: the battery ran past {timeout:.0f} s (the kernel hangs?); stopped")
                break
            for fd in ready:
                server = waiting[fd]
                messages = server.read()
                if messages is None:  # it died without an answer
                    code = server.process.wait()
                    lost.add(server.index)
                    del waiting[fd]
                    ended.append(f"crashed: a battery process died of signal {-code}" if code < 0
                                 else f"crashed: a battery process exited with status {code}")
                    print(server.output()[-4000:], end="", flush=True)
                    continue
                for message in messages:
                    if "done" in message:
                        codes[server.index] = message["done"]
                        if not message["healthy"]:
                            lost.add(server.index)
                        del waiting[fd]
                        continue
                    counts[message["outcome"]] = counts.get(message["outcome"], 0) + 1
                    seconds[message["test"]], ran[message["test"]] = message["seconds"], server.index
                    records += message["failures"]
                    _show(message)
    finally:
        shutil.rmtree(claims, ignore_errors=True)
    abnormal = {code for code in codes.values() if code not in (0, 1, 5)}
    for server in servers:  # a usage error (the kernel does not load) or an internal error: its message, once
        if codes.get(server.index) in abnormal:
            print(server.output().strip(), flush=True)
            break
    if records:
        from gemm_fuzz.properties.report import bugs

        found = bugs.summary(records)
        count = len(bugs.group(records))
        print(f"GEMM failures: {count} distinct bug{'s' * (count > 1)}", *found, sep="\n", flush=True)
    if not ended:
        code = max(abnormal) if abnormal else 1 if 1 in codes.values() else 0 if 0 in codes.values() else 5
        ended.append(EXIT_WORDS.get(code, f"exit status {code}"))
    tally = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
    return ended[0] + (f" ({tally})" if tally else ""), lost


def watch(spec: str, backend: str = "auto", extra: list[str] | None = None, timeout: float = 600.0,
          runs: int | None = None, processes: int | None = None) -> int:
    """Rerun the battery on every save until Ctrl-C (or `runs` runs, for tests). Returns 0, or 130 on Ctrl-C."""
    kernel_file = Path(spec.rsplit(":", 1)[0]).resolve()
    if not kernel_file.is_file():
        print(f"gemm-fuzz --watch: {kernel_file} is not a file; expected PATH.py:FUNC", file=sys.stderr)
        return 2
    backend = _backend(backend)
    count = processes or max(1, min(8, os.cpu_count() or 1))
    print(f"gemm-fuzz --watch: {spec} on {backend}, in {count} warm process{'es' * (count > 1)}. Save the kernel "
          "(or a file it imports) to rerun the battery; Ctrl-C ends.", flush=True)
    files, done, stamp, started = [kernel_file], 0, None, time.time()
    gpus = fleet.gpus(backend)
    device = [gpus[i % len(gpus)] if gpus else None for i in range(count)]  # the processes spread over the GPUs
    servers = [_Server(spec, backend, i, count, device[i], extra or []) for i in range(count)]
    durations: dict[str, float] = {}  # each test's seconds, last time it ran
    ran: dict[str, int] = {}  # the server that ran each test last time
    try:
        while runs is None or done < runs:
            if _stamp(files) == stamp:
                time.sleep(POLL)
                continue
            time.sleep(SETTLE)
            before = _stamp(files)  # a save during the run shows against these
            saved = max([s[1] / 1e9 for s in before if s[1] is not None] + [started])  # the first run: the start
            verdict, lost = _battery(servers, timeout, durations, ran)
            seconds = time.time() - saved
            done += 1
            for i in sorted(lost) if runs is None or done < runs else []:
                servers[i].stop()
                servers[i] = _Server(spec, backend, i, count, device[i], extra or [])  # warms while the verdict is read
            found = sorted({Path(p) for s in servers if s.files.exists() for p in s.files.read_text().splitlines()
                            if p} or set(files))
            stamp = before if found == files else _stamp(found)
            files = found
            print(f"gemm-fuzz --watch: {verdict} in {seconds:.1f} s from the save ({time.strftime('%H:%M:%S')}); "
                  f"watching {len(files)} file(s)", flush=True)
    except KeyboardInterrupt:
        print("\ngemm-fuzz --watch: ended", flush=True)
        return 130
    finally:
        for server in servers:
            server.stop()
    return 0


def _backend(requested: str) -> str:
    """The backend a child will use, chosen without touching the GPU (torch.cuda.is_available does not
    make a context)."""
    if requested != "auto":
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "interpreter"


if __name__ == "__main__":  # a warm process (_Server)
    sys.exit(serve(sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]))
