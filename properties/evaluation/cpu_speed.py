"""Examples per second through Triton's CPU interpreter, with and without the interpreter fast path
(properties/interpreter/fast.py), on fixed campaigns:

    python -m gemm_fuzz.properties.evaluation.cpu_speed                     # every campaign, a Markdown table
    python -m gemm_fuzz.properties.evaluation.cpu_speed --campaign tiled-fp16 --examples 300 --repeats 5

A fixed campaign is what `gemm-fuzz` does for one target (the main property on Hypothesis's draws,
`hypothesis.target` climbing toward the worst error / bound), derandomized and for a fixed number of
examples, so every run and both modes run the same examples. Each (campaign, mode) runs in its own
process pinned to one core, with GEMM_INTERPRETER_FAST set to 1 or 0; there the campaign runs once
to warm up (not counted), then `--repeats` times, and the median rate counts. Rates are examples per
second of the process's CPU time (on a shared machine, wall time also counts what other processes
took). Each process also prints a digest of every verdict (pass and its error ratio, or the
failure's type and message): the two modes must agree, and the table says whether they did.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# name -> (variant name or user kernel spec, input dtype)
CAMPAIGNS = {
    "tiled-fp16": ("tiled", "fp16"),
    "stream_k-fp16": ("stream_k", "fp16"),
    "split_k-bf16": ("split_k", "bf16"),
    "user-64x64x32-fp16": (str(Path(__file__).with_name("tiled_64.py")) + ":matmul", "fp16"),
}


def _target(spec: str, dtype: str):
    from gemm_fuzz import kernels
    from gemm_fuzz.properties.launch import targets, user_kernel

    variant = user_kernel.load(spec) if ":" in spec else kernels.get(spec)  # PATH.py:FUNC: a user's kernel
    return targets.Target(variant, dtype)


def run_campaign(target, examples: int, backend) -> tuple[float, int, str]:
    """One fixed campaign: (CPU seconds, examples run, digest of every verdict)."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import target as climb

    from gemm_fuzz.properties.checks.example import Example
    from gemm_fuzz.properties.judge.failures import GemmFailure
    from gemm_fuzz.properties.model import strategies
    from gemm_fuzz.properties.run.runner import Runner, RunSettings

    verdicts = []
    runner = Runner(RunSettings(backend=backend.name, mode="process"), backend)
    prop = runner.property(target.id)
    strategy = strategies.gemm_cases(target.variant, target.dtype, device_type=backend.device.type,
                                     max_dim=backend.max_dim)

    # derandomized: the draws are seeded by `example`'s source, so its text stays as measured (docs/cpu-profile.md)
    @settings(max_examples=examples, derandomize=True, database=None, deadline=None, print_blob=False,
              verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck),
              phases=[Phase.generate, Phase.target])
    @given(case=strategy)
    def example(case):
        try:
            observed = prop.run(Example("reference", target.variant.name, case), target.variant)
        except GemmFailure as failure:
            verdicts.append(f"{case.describe()}: {type(failure).__name__}: {failure}")
            raise
        verdicts.append(f"{case.describe()}: pass {observed.exact} {observed.error_ratio!r}")
        climb(observed.error_ratio, label="error / bound")

    start = time.process_time()
    try:
        example()
    except GemmFailure:
        pass
    seconds = time.process_time() - start
    runner.close()
    return seconds, len(verdicts), hashlib.sha1("\n".join(verdicts).encode()).hexdigest()[:16]


def worker(name: str, examples: int, repeats: int, core: int) -> None:
    """Run one campaign in this process (the mode is GEMM_INTERPRETER_FAST) and print a JSON line."""
    import warnings

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})

    for message in ("overflow encountered", "invalid value encountered"):
        warnings.filterwarnings("ignore", message=message, category=RuntimeWarning)
    from gemm_fuzz.properties.launch import backends

    backend = backends.activate("interpreter")
    target = _target(*CAMPAIGNS[name])
    run_campaign(target, examples, backend)  # warm-up
    runs = [run_campaign(target, examples, backend) for _ in range(repeats)]
    print(json.dumps({"campaign": name, "fast": backend.checks[-1], "seconds": [r[0] for r in runs],
                      "examples": [r[1] for r in runs], "digests": sorted({r[2] for r in runs})}))


def measure(name: str, fast: bool, examples: int, repeats: int, core: int) -> dict:
    env = {**os.environ, "GEMM_INTERPRETER_FAST": "1" if fast else "0", "GEMM_BACKEND": "interpreter"}
    command = [sys.executable, "-m", "gemm_fuzz.properties.evaluation.cpu_speed", "--worker", name,
               "--examples", str(examples), "--repeats", str(repeats), "--core", str(core)]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"campaign {name} (fast={fast}) failed:\n{done.stdout}\n{done.stderr}")
    result = json.loads(lines[-1])
    result["rate"] = statistics.median(n / s for n, s in zip(result["examples"], result["seconds"]))
    return result


def markdown(rows: list[tuple[str, dict, dict]]) -> str:
    lines = ["| campaign | examples | plain interpreter | fast path | speed-up | same verdicts |",
             "|---|---|---|---|---|---|"]
    for name, plain, fast in rows:
        same = "yes" if plain["digests"] == fast["digests"] and len(plain["digests"]) == 1 else "**NO**"
        lines.append(f"| {name} | {fast['examples'][0]} | {plain['rate']:.1f}/s | {fast['rate']:.1f}/s | "
                     f"{fast['rate'] / plain['rate']:.1f}x | {same} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemm_fuzz.properties.evaluation.cpu_speed",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--campaign", action="append", choices=sorted(CAMPAIGNS),
                        help="a campaign to measure (repeatable; default: all)")
    parser.add_argument("--examples", type=int, default=150, help="examples per campaign run (default 150)")
    parser.add_argument("--repeats", type=int, default=3, help="counted runs per campaign and mode (default 3)")
    parser.add_argument("--core", type=int, default=0, help="the CPU core the runs are pinned to (default 0)")
    parser.add_argument("--worker", choices=sorted(CAMPAIGNS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.examples < 1 or args.repeats < 1:
        parser.error(f"--examples and --repeats must be positive, got {args.examples} and {args.repeats}")
    if args.worker:
        worker(args.worker, args.examples, args.repeats, args.core)
        return 0
    rows = []
    for name in args.campaign or list(CAMPAIGNS):
        plain = measure(name, False, args.examples, args.repeats, args.core)
        fast = measure(name, True, args.examples, args.repeats, args.core)
        print(f"{name}: plain {plain['rate']:.1f}/s, fast {fast['rate']:.1f}/s", file=sys.stderr, flush=True)
        rows.append((name, plain, fast))
    print(f"examples per second of CPU time, median of {args.repeats} runs after a warm-up, pinned to core "
          f"{args.core}; {args.examples} examples per run\n")
    print(markdown(rows))
    return 0 if all(p["digests"] == f["digests"] for _, p, f in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
