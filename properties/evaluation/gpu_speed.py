"""How fast the suite judges a kernel on a GPU: the battery on a user's kernel, cold (Triton's cache
empty) and warm, and a campaign's examples per second once warm.

    python -m gemm_fuzz.properties.evaluation.gpu_speed                              # the bundled 64x64x32 kernel
    python -m gemm_fuzz.properties.evaluation.gpu_speed --kernel my.py:matmul --repeats 5 --campaign 60

Each battery run is `pytest --gemm-kernel KERNEL --gemm-backend cuda` in a fresh directory with the
`ci` profile (CI=1: derandomized, so every run judges the same examples), as a new process, timed
from start to exit; a cold run gets an empty TRITON_CACHE_DIR, the warm ones share one that a first,
uncounted run filled. The campaign runs `gemm-fuzz --kernel KERNEL --backend cuda --budget SECONDS`
after an uncounted one of the same length, and counts examples per second two ways: once running
(each worker's examples over the seconds its targets ran, summed over the workers) and over the whole
budget (its processes' start-up included). Each figure
is the median of `--repeats` runs; the table also gives the range and the battery's own split of
its examples' time by phase (properties/phases.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_KERNEL = str(Path(__file__).with_name("tiled_64.py")) + ":matmul"


def battery(kernel: str, cache: str, extra: list[str]) -> dict:
    """One battery run in a fresh directory: seconds, pytest's outcome line and the time split."""
    env = {**os.environ, "TRITON_CACHE_DIR": cache, "CI": "1", "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryDirectory() as where:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--gemm-kernel", kernel,
                               "--gemm-backend", "cuda", "--gemm-repros", "", "-q", *extra],
                              cwd=where, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    out = done.stdout + done.stderr
    outcome = next((line.strip("= ") for line in reversed(out.splitlines()) if re.search(r"\d+ (passed|failed)", line)),
                   "no outcome")
    split = next((line.removeprefix("GEMM time: ") for line in out.splitlines() if line.startswith("GEMM time: ")), "")
    if done.returncode not in (0, 1):
        raise RuntimeError(f"the battery exited {done.returncode}:\n{out[-4000:]}")
    return {"seconds": seconds, "outcome": outcome, "split": split, "status": done.returncode}


def campaign(kernel: str, cache: str, seconds: float, extra: list[str]) -> dict:
    """One campaign: examples, seconds it ran, examples per second."""
    env = {**os.environ, "TRITON_CACHE_DIR": cache, "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryDirectory() as where:
        done = subprocess.run([sys.executable, "-m", "gemm_fuzz.properties.campaign", "--kernel", kernel,
                               "--backend", "cuda",
                               "--budget", f"{seconds:g}s", "--report", str(Path(where) / "report"),
                               "--database", str(Path(where) / "db"), *extra],
                              cwd=where, env=env, capture_output=True, text=True)
        path = Path(where) / "report" / "results.json"
        if not path.exists():
            raise RuntimeError(f"the campaign wrote no results (exit {done.returncode}):\n{done.stdout[-4000:]}"
                               f"\n{done.stderr[-2000:]}")
        data = json.loads(path.read_text())
    examples = sum(r["examples"] for r in data["results"])
    children = data.get("workers") or [data]
    # once running: each child's examples over the seconds its targets ran (start-up and report left out)
    running = sum(sum(r["examples"] for r in c["results"]) / max(sum(r["seconds"] for r in c["results"]), 1e-9)
                  for c in children)
    return {"examples": examples, "seconds": data["elapsed"], "rate": examples / data["elapsed"], "running": running,
            "workers": len(children), "failures": sum(1 for r in data["results"] if r["failure"])}


def _median(runs: list[dict], key: str) -> str:
    values = [r[key] for r in runs]
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemm_fuzz.properties.evaluation.gpu_speed",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default=DEFAULT_KERNEL, help="PATH.py:FUNC (default: the bundled 64x64x32 kernel)")
    parser.add_argument("--repeats", type=int, default=3, help="counted runs of each measurement (default 3)")
    parser.add_argument("--campaign", type=float, default=30.0, help="seconds of each campaign run (default 30)")
    parser.add_argument("--pytest-args", default="", help="more pytest arguments for the battery, e.g. '-n 4'")
    parser.add_argument("--campaign-args", default="", help="more gemm-fuzz arguments, e.g. '--workers 1'")
    parser.add_argument("--skip", action="append", default=[], choices=("cold", "warm", "campaign"))
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.campaign <= 0:
        parser.error("--repeats must be positive and --campaign a positive number of seconds")
    extra, fuzz = args.pytest_args.split(), args.campaign_args.split()
    rows = []
    with tempfile.TemporaryDirectory() as caches:
        if "cold" not in args.skip:
            cold = [battery(args.kernel, str(Path(caches) / f"cold-{i}"), extra) for i in range(args.repeats)]
            rows.append(("battery, cold (empty Triton cache)", _median(cold, "seconds") + " s", cold[-1]["outcome"],
                         cold[-1]["split"]))
            print(f"cold: {[round(r['seconds'], 1) for r in cold]}", file=sys.stderr, flush=True)
        warm_cache = str(Path(caches) / "warm")
        if "warm" not in args.skip:
            battery(args.kernel, warm_cache, extra)  # fills the cache: not counted
            warm = [battery(args.kernel, warm_cache, extra) for _ in range(args.repeats)]
            rows.append(("battery, warm", _median(warm, "seconds") + " s", warm[-1]["outcome"], warm[-1]["split"]))
            print(f"warm: {[round(r['seconds'], 1) for r in warm]}", file=sys.stderr, flush=True)
        if "campaign" not in args.skip:
            campaign(args.kernel, warm_cache, args.campaign, fuzz)  # compiles what it draws: not counted
            runs = [campaign(args.kernel, warm_cache, args.campaign, fuzz) for _ in range(args.repeats)]
            rows.append((f"campaign, warm, {args.campaign:g} s ({runs[-1]['workers']} workers)",
                         f"{_median(runs, 'running')} examples/s running, {_median(runs, 'rate')} over the budget",
                         f"{runs[-1]['examples']} examples, {runs[-1]['failures']} failing targets", ""))
            print(f"campaign: {[round(r['running'], 1) for r in runs]} running, {[round(r['rate'], 1) for r in runs]} "
                  "over the budget", file=sys.stderr, flush=True)
    import torch
    import triton

    print(f"{torch.cuda.get_device_name()}, {os.cpu_count()} CPU cores, torch {torch.__version__}, triton "
          f"{triton.__version__}; kernel {args.kernel}; median (range) of {args.repeats} runs\n")
    print("| measurement | time | outcome | the battery's examples by phase |\n|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
