"""Every verdict the same with and without the interpreter fast path (properties/interpreter/fast.py):

    python -m gemm_fuzz.properties.evaluation.verdict_identity                  # 10 examples per target, all hunts
    python -m gemm_fuzz.properties.evaluation.verdict_identity --per-target 50

Each example runs twice in this process, with the fast path on and off (`fast.switched`), and what it
gives must be identical: a pass with the same C bit for bit (NaN payloads and signed zeros included),
the same exactness and the same error ratios, or a failure of the same type with the same message.
The examples: `--per-target` derandomized draws of the property tests' strategy for every variant and
input dtype the interpreter runs (layouts, value profiles and program orders included), and every
interpreter mutant's registered smallest case and unaffected case; then mutation hunts (search and
shrink) with the CI profile's settings, whose caught case, shrunk case and message must agree.
tests/test_fast_interpreter.py runs a small version. Exit status 1 if anything differed.
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings

from gemm_fuzz.properties import checks
from gemm_fuzz.properties.checks.example import Example
from gemm_fuzz.properties.interpreter import fast
from gemm_fuzz.properties.judge.failures import GemmFailure
from gemm_fuzz.properties.launch import backends
from gemm_fuzz.properties.model import strategies
from gemm_fuzz.properties.run.runner import Runner, RunSettings

HUNTS = ("tiled_no_other", "split_k_into_c", "stream_k_late_first_owner")


def drawn_cases(variant, dtype: str, count: int, backend) -> list:
    """The first `count` cases the property tests' strategy draws for (variant, dtype), derandomized."""
    found = []

    @settings(max_examples=count, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategies.gemm_cases(variant, dtype, device_type=backend.device.type, max_dim=backend.max_dim))
    def collect(case):
        found.append(case)

    collect.hypothesis.inner_test._hypothesis_internal_add_digest = f"{variant.name}-{dtype}".encode()
    collect()
    return found


def examples(per_target: int, backend) -> list[tuple[object, Example]]:
    """(variant, example) pairs: drawn cases for every interpreter target, and the mutants' cases."""
    from gemm_fuzz import kernels
    from gemm_fuzz.kernels import mutants
    from gemm_fuzz.properties.evaluation import mutation
    from gemm_fuzz.properties.launch import targets

    chosen = []
    for target in targets.targets(kernels.variants()):
        if target.variant.runs_on(backend.name):
            for case in drawn_cases(target.variant, target.dtype, per_target, backend):
                chosen.append((target.variant, checks.OUTPUT.example(target.variant.name, case)))
    for mutant in mutants.mutants():
        if not mutant.gpu_only:
            for case in (mutation.expected_case(mutant), mutation.unaffected_case(mutant)):
                if case is not None:
                    chosen.append((mutant.variant, checks.OUTPUT.example(mutant.name, case)))
    return chosen


def verdict(runner: Runner, variant, example: Example) -> tuple:
    """What one example gives: ("pass", C's bytes, exact, error ratio, torch ratio) or (failure type, message)."""
    try:
        observed = runner.run_once(example, variant)
    except GemmFailure as failure:
        return (type(failure).__name__, str(failure))
    values = np.ascontiguousarray(observed.values)
    return ("pass", values.shape, values.tobytes(), observed.exact, observed.error_ratio, observed.torch_ratio)


def differences(chosen: list[tuple[object, Example]], backend) -> list[str]:
    """The examples whose verdicts differ with the fast path on and off, described. Every example runs
    with it on, then every one with it off: switching it on re-runs its start-up probe, which costs more
    than an example, and with it on an example replays the recipes earlier ones recorded, as in a run."""
    verdicts = {}
    with Runner(RunSettings(backend=backend.name), backend) as runner:
        for on in (True, False):
            with fast.switched(on):
                verdicts[on] = [verdict(runner, variant, example) for variant, example in chosen]
    return [f"{example.variant} on {example.case.describe()}: fast path gives {_short(on)}, plain interpreter "
            f"{_short(off)}" for (_, example), on, off in zip(chosen, verdicts[True], verdicts[False]) if on != off]


def hunt_differences(names: tuple[str, ...], backend) -> list[str]:
    """Mutation hunts whose outcome (caught, example count, shrunk case, failure and message) differs."""
    from gemm_fuzz.kernels import mutants
    from gemm_fuzz.properties.evaluation import mutation

    found = []
    for name in names:
        mutant = mutants.get(name)
        outcomes = []
        for on in (True, False):
            with fast.switched(on):
                h = mutation.hunt(mutant, backend)
            outcomes.append((h.caught, h.examples, h.shrunk, h.error, h.message))
        if outcomes[0] != outcomes[1]:
            found.append(f"hunt for {name}: fast path {outcomes[0]}, plain interpreter {outcomes[1]}")
    return found


def _short(v: tuple) -> str:
    if v[0] == "pass":
        return f"a pass (exact={v[3]}, error ratio {v[4]!r}, torch ratio {v[5]!r}, C {hash(v[2]):x})"
    return f"{v[0]}: {v[1].splitlines()[0]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemm_fuzz.properties.evaluation.verdict_identity",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-target", type=int, default=10, help="drawn examples per variant and dtype")
    parser.add_argument("--hunt", action="append", help=f"mutants to hunt (default: {', '.join(HUNTS)})")
    args = parser.parse_args(argv)
    for message in ("overflow encountered", "invalid value encountered"):  # NaN and Inf inputs, as in pytest
        warnings.filterwarnings("ignore", message=message, category=RuntimeWarning)
    backend = backends.activate("interpreter")
    chosen = examples(args.per_target, backend)
    found = differences(chosen, backend)
    hunts = tuple(args.hunt or HUNTS)
    found += hunt_differences(hunts, backend)
    print(f"{len(chosen)} examples and {len(hunts)} hunts, each with the fast path on and off: "
          f"{len(found)} differ")
    print("\n".join(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
