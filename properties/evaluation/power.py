"""How much of the time one drawn example exposes each mutant: the suite's power per draw.

For every mutant and every input dtype its bug applies to, N examples are drawn from the strategy the
property tests use for that dtype (derandomized: the same draws every run), and each is run through
the runner; the share that fails is the mutant's per-draw detection rate. With 25 examples per test
(the CI profile), a rate p misses a bug with probability (1 - p)**25: below 0.1% from p = 0.25.
The mutant's correct parent runs on the same draws too, and must never fail.

    python -m gemm_fuzz.properties.evaluation.power [--draws 100] [--mutant 'tiled_*']   # a Markdown table
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, given, settings

from gemm_fuzz.properties import checks
from gemm_fuzz.properties.judge.failures import GemmFailure
from gemm_fuzz.properties.launch import backends
from gemm_fuzz.properties.model import strategies
from gemm_fuzz.properties.run.hypothesis_profiles import CI_EXAMPLES
from gemm_fuzz.properties.run.runner import Runner, RunSettings
from gemm_fuzz.reference.formats import by_name


@dataclass(frozen=True)
class Power:
    mutant: str
    dtype: str
    draws: int
    caught: int
    parent_failures: int  # the correct parent failing on the same draws: must be 0

    @property
    def rate(self) -> float:
        return self.caught / self.draws if self.draws else 0.0


def measure(mutant, dtype: str, draws: int, backend: backends.Backend | None = None, parent_too: bool = True) -> Power:
    """The mutant's detection rate over `draws` derandomized draws of `dtype` cases ("in->out" draws
    only that output dtype); with `parent_too`, the correct parent runs on every draw as well."""
    from gemm_fuzz import kernels

    backend = backend or backends.current()
    parent = kernels.get(mutant.parent)
    variant = mutant.variant
    source, _, out = dtype.partition("->")
    if out:  # only draws whose C is `out`
        variant = dataclasses.replace(variant, dtypes={by_name(source).dtype: (by_name(out).dtype,)})
    counts = {"draws": 0, "caught": 0, "parent": 0}

    def fails(runner, variant, case) -> bool:
        try:
            runner.run_once(checks.REFERENCE.example(variant.name, case), variant)
        except GemmFailure as e:
            return e.kernel_fault
        return False

    with Runner(RunSettings(backend=backend.name), backend) as runner:
        @settings(max_examples=draws, derandomize=True, database=None, phases=[Phase.generate], deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=strategies.gemm_cases(variant, source, device_type=backend.device.type,
                                                   max_dim=backend.max_dim, big_batches=True))
        def draw(case):
            counts["draws"] += 1
            counts["caught"] += fails(runner, mutant.variant, case)
            counts["parent"] += parent_too and fails(runner, parent, case)

        draw.hypothesis.inner_test._hypothesis_internal_add_digest = f"power {mutant.name} {dtype}".encode()
        draw()
    return Power(mutant.name, dtype, counts["draws"], counts["caught"], counts["parent"])


def table(powers: list[Power], bugs: dict[str, str]) -> str:
    lines = [f"| mutant | bug | dtype | caught in | per draw | {CI_EXAMPLES} examples miss it |",
             "|---|---|---|---|---|---|"]
    for p in powers:
        miss = (1 - p.rate) ** CI_EXAMPLES
        lines.append(f"| `{p.mutant}` | {bugs[p.mutant]} | {p.dtype} | {p.caught} of {p.draws} | {p.rate:.0%} | "
                     f"{miss:.1e} |" + (f" **the correct parent failed {p.parent_failures} times** |"
                                         if p.parent_failures else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemm_fuzz.properties.evaluation.power",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=100, help="examples drawn per mutant and dtype (default 100)")
    parser.add_argument("--mutant", action="append", help="mutant name globs (repeatable; default all)")
    args = parser.parse_args(argv)
    backend = backends.activate()
    import warnings

    for message in ("overflow encountered", "invalid value encountered"):
        warnings.filterwarnings("ignore", message=message, category=RuntimeWarning)
    from gemm_fuzz.kernels import mutants

    chosen = [m for m in mutants.mutants() if m.gpu_only != backend.interpreted
              and (not args.mutant or any(fnmatch.fnmatchcase(m.name, g) for g in args.mutant))]
    powers = []
    for m in chosen:
        for dtype in m.all_dtypes:
            powers.append(measure(m, dtype, args.draws, backend))
            print(f"{m.name} {dtype}: {powers[-1].caught}/{powers[-1].draws}", flush=True)
    print(f"\nbackend: {backend.name} on {backend.device_name}; {args.draws} derandomized draws per mutant and dtype\n")
    print(table(powers, {m.name: m.bug for m in chosen}))
    return 1 if any(p.parent_failures for p in powers) else 0


if __name__ == "__main__":
    raise SystemExit(main())
