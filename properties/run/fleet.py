"""A campaign over several processes: `gemm-fuzz --workers N` splits its targets among N child
campaigns that run side by side and merges what they report. On a GPU host the default is several
children per GPU (the host's cores over its GPUs, at most 16 each): one campaign keeps a GPU busy
for a few percent of the time, drawing and judging on one core while its kernels run for
microseconds.

Each child is a plain `gemm-fuzz` run over its share of the targets (round-robin, so every child
gets a mix of dtypes; with more children than targets each child takes one target, and a target
runs in several children, each its own search), with the whole budget, its own report directory under the parent's
(worker-I/) and CUDA_VISIBLE_DEVICES set to its GPU before it starts, so CUDA never sees another
device in it. All children use the parent's example database: a failure one of them finds is
replayed first by every later campaign that uses the same database (a directory shared between
them, or a Redis server shared between hosts). Each child writes results.json; the parent reads
them back as TargetResults and writes one summary over all of them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gemm_fuzz.properties.run import children


@dataclass(frozen=True)
class Share:
    index: int
    device: str | None  # the GPU index it is pinned to (CUDA_VISIBLE_DEVICES); None on the CPU
    target_ids: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"worker-{self.index}"


PER_GPU = 16  # at most this many children share one GPU by default


def gpu_count() -> int:
    import torch

    return max(1, torch.cuda.device_count())


def default_workers(backend: str) -> int:
    """On the cuda backend, the host's cores spread over its GPUs (at least one, at most PER_GPU each: a
    child and its example worker take turns, about a core together); one on the CPU (the interpreter is
    one core per process: ask for more with --workers)."""
    if backend != "cuda":
        return 1
    gpus = gpu_count()
    return gpus * max(1, min(PER_GPU, (os.cpu_count() or 1) // gpus))


def gpus(backend: str) -> list[str]:
    """The GPUs children may be pinned to: those this process sees (CUDA_VISIBLE_DEVICES where that is
    set); none on the CPU."""
    if backend != "cuda":
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    return [g.strip() for g in visible.split(",")] if visible else [str(i) for i in range(gpu_count())]


def child_env(children_count: int, device: str | None) -> dict[str, str]:
    """The environment of one of `children_count` children sharing this host: numpy's and torch's thread
    pools get the cores shared out (unless set already), and CUDA sees only `device` (if given)."""
    threads = str(max(1, (os.cpu_count() or 1) // children_count))
    env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, **os.environ}
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    return env


def shares(target_ids: list[str], workers: int, backend: str) -> list[Share]:
    """Targets dealt round-robin to `workers` children (with more children than targets, child I runs
    target I mod their count); on the GPU child I gets the I-th GPU this process sees (mod their
    count; through CUDA_VISIBLE_DEVICES where that is set)."""
    gpus_seen = gpus(backend)
    if workers > len(target_ids):
        dealt = [(target_ids[i % len(target_ids)],) for i in range(workers)]
    else:
        dealt = [tuple(target_ids[i::workers]) for i in range(workers)]
    return [Share(i, gpus_seen[i % len(gpus_seen)] if gpus_seen else None, ids) for i, ids in enumerate(dealt)]


def _child_command(argv: list[str], share: Share, directory: Path, until: float) -> list[str]:
    return [sys.executable, "-m", "gemm_fuzz.properties.campaign", *argv, "--workers", "1", "--until", f"{until:.3f}",
            "--report", str(directory / share.name), *[a for t in share.target_ids for a in ("--target", t)]]


def run(argv: list[str], plan: list[Share], directory: Path, until: float,
        on_line=print) -> tuple[list[dict], list[int], bool]:
    """Run the children to their end, each stopping its examples by `until` (epoch seconds: their
    start-up counts against the budget); Ctrl-C and SIGTERM are passed on to them, and they write
    their reports. Returns their results.json contents, their exit codes, and whether it was interrupted."""
    started = []
    for share in plan:
        env = {**child_env(len(plan), share.device), "PYTHONUNBUFFERED": "1"}
        log = open(directory / f"{share.name}.log", "w")  # noqa: SIM115  closed below
        started.append((share, children.popen(_child_command(argv, share, directory, until), stdout=log,
                                              stderr=subprocess.STDOUT, env=env, start_new_session=True), log))
        on_line(f"campaign: {share.name} on {'GPU ' + share.device if share.device else 'the CPU'}: "
                f"{len(share.target_ids)} target(s), log in {directory / (share.name + '.log')}")
    interrupted = False

    def forward(signum, frame):
        nonlocal interrupted
        interrupted = True
        for _, process, _ in started:
            if process.poll() is None:
                os.killpg(process.pid, signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while any(p.poll() is None for _, p, _ in started):
            time.sleep(0.2)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for _, _, log in started:
            log.close()
    results, codes = [], []
    for share, process, _ in started:
        codes.append(process.returncode)
        path = directory / share.name / "results.json"
        if path.exists():
            results.append(json.loads(path.read_text()))
        else:
            on_line(f"campaign: {share.name} wrote no results (exit code {process.returncode}); see its log")
    return results, codes, interrupted
