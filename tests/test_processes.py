"""No process the suite starts outlives the run: SIGTERM or SIGKILL to pytest (or to gemm-fuzz) while an
example worker spins in a kernel that never returns leaves nothing behind after 5 s: not the example
worker, not pytest-xdist's workers, not a campaign's children (properties/run/children.py).

Each scenario runs in a process of its own that adopts orphans (Linux's PR_SET_CHILD_SUBREAPER), so
whatever the killed run left behind is found among its descendants, and then cleaned up."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

FAULTS = Path(__file__).parent / "fault_kernels.py"

# Starts the run, waits until an example worker has spun for 6 s of CPU time (past its start-up), kills the run
# with the signal, then reports the descendants still there after GRACE seconds (and kills them).
SCENARIO = r"""
import ctypes, json, os, signal, subprocess, sys, time
GRACE = 5.0
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans come to this process

def descendants():
    parents = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(pid)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    found, frontier = {}, [os.getpid()]
    while frontier:
        p = frontier.pop()
        for child, (parent, ticks) in parents.items():
            if parent == p and child not in found:
                found[child] = ticks
                frontier.append(child)
    return found

def cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline").read().replace("\0", " ")
    except OSError:
        return ""

command, signum, needle = json.loads(sys.argv[1])
run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.monotonic() + 240
spinning = False
while time.monotonic() < deadline and run.poll() is None and not spinning:
    time.sleep(0.5)
    spinning = any(ticks > 600 and needle in cmdline(pid) for pid, ticks in descendants().items())
if not spinning:
    print(json.dumps({"error": f"nothing ran the hanging kernel (exit {run.poll()})"}))
    sys.exit(0)
run.send_signal(signum)
run.wait()
killed = time.monotonic()
left = descendants()
while left and time.monotonic() - killed < GRACE:
    time.sleep(0.1)
    while True:  # reap what was adopted and has ended
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    left = descendants()
report = {"left": [cmdline(p)[:200] for p in left], "seconds": time.monotonic() - killed}
for pid in left:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
print(json.dumps(report))
"""


def _pytest(n: int) -> list[str]:
    return [sys.executable, "-m", "pytest", "-n", str(n), "-p", "no:cacheprovider", "--gemm-kernel",
            f"{FAULTS}:loop_forever", "--gemm-backend", "interpreter", "--gemm-dtype", "fp16,bf16",
            "-k", "test_matches_float64_reference", "--gemm-timeout", "600", "--gemm-repros", ""]


def _campaign(report: Path) -> list[str]:
    return [sys.executable, "-m", "gemm_fuzz.properties.campaign", "--kernel", f"{FAULTS}:loop_forever", "--backend",
            "interpreter", "--dtype", "fp16", "--dtype", "bf16", "--workers", "2", "--budget", "10m",
            "--timeout", "600", "--report", str(report)]


def _watch() -> list[str]:
    return [sys.executable, "-m", "gemm_fuzz.properties.campaign", "--watch", f"{FAULTS}:loop_forever", "--backend",
            "interpreter", "--workers", "2", "--", "-k", "test_matches_float64_reference and fp16"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="adopting orphans (PR_SET_CHILD_SUBREAPER) is Linux's")
@pytest.mark.parametrize("run,signum", [
    pytest.param("pytest -n 2", signal.SIGTERM, id="pytest-xdist-SIGTERM"),
    pytest.param("pytest -n 2", signal.SIGKILL, id="pytest-xdist-SIGKILL"),
    pytest.param("pytest", signal.SIGKILL, id="pytest-SIGKILL"),
    pytest.param("gemm-fuzz --workers 2", signal.SIGKILL, id="gemm-fuzz-SIGKILL"),
    pytest.param("gemm-fuzz --watch", signal.SIGKILL, id="gemm-fuzz-watch-SIGKILL"),
])
def test_no_process_outlives_a_killed_run(run, signum, tmp_path):
    command = {"pytest -n 2": _pytest(2), "pytest": _pytest(0),
               "gemm-fuzz --workers 2": _campaign(tmp_path / "report"), "gemm-fuzz --watch": _watch()}[run]
    spinning = "properties.watch" if run == "gemm-fuzz --watch" else "properties.run.worker"  # runs the kernel
    done = subprocess.run([sys.executable, "-c", SCENARIO, json.dumps([command, int(signum), spinning])],
                          capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in report, report
    assert report["left"] == [], f"still running {report['seconds']:.1f} s after {signum.name}: {report['left']}"
