"""Test doubles and runs the tests share: a variant computed in Python where a kernel would run, how it fares
over cases (its worst error against the bound, the cases it fails), the first run and the relaunches the
metamorphic relations are handed, and a grouped variant's run judged or left unjudged."""

import torch

from gemm_fuzz.kernels import operands
from gemm_fuzz.kernels.operation import PLAIN
from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.properties.checks import grouped_loop
from gemm_fuzz.properties.checks.reference import judged
from gemm_fuzz.properties.judge import agreement, grouped_relations, oracles, relations
from gemm_fuzz.properties.judge.failures import NotBitExact, ValueOutOfBound
from gemm_fuzz.properties.launch import launching
from gemm_fuzz.properties.model import grouped
from gemm_fuzz.properties.model.cases import materialize
from gemm_fuzz.properties.run import runner
from gemm_fuzz.reference.formats import by_name


def fake(compute, dtypes, operation=PLAIN, name: str = "fake", bk: int = 16, **fields) -> Variant:
    """A variant that checks its operands as every launcher does (operands.check), then stores
    `compute(a, b, c, extras)` (a tensor or an array: C's values) into C, rounded once to C's dtype.
    `compute` writes any other output (an operation's `pre`) itself. One configuration on the CPU,
    BM = BN = 16 and BK = `bk`; `fields` go to the Variant (requirements, deterministic)."""

    def launch(a, b, c, config=None, **extras):
        operands.check(variant, a, b, c, extras)
        y = compute(a, b, c, extras)
        c.copy_(torch.as_tensor(y).to(c.dtype))

    variant = Variant(name, launch, dtypes, "ieee", {"cpu": (dict(BM=16, BN=16, BK=bk),)}, "a test double",
                      operation=operation, **fields)
    return variant


def worst(variant, cases) -> float:
    """The largest error / bound over `cases`, every one of which must pass (runner.check raises)."""
    return max(runner.check(variant, case).error_ratio or 0.0 for case in cases)


def failures(variant, cases, kinds=(ValueOutOfBound, NotBitExact)) -> list:
    """The failures of `kinds` that `cases` raise, one per failing case; any other failure is raised."""
    found = []
    for case in cases:
        try:
            runner.check(variant, case)
        except kinds as e:
            found.append(e)
    return found


def first_run(variant, case, backend):
    """The case materialized for the variant's operation and launched once: (operands, what the first run
    observed), as the relations take them."""
    ops = materialize(case, backend.device, variant.operation)
    launching.launch(variant, ops, backend)
    return ops, relations.observed(oracles.against_reference(ops, variant.precision))


def launcher(backend):
    """How the relations launch a variant again: launch(variant, operands) on `backend`."""
    return lambda variant, ops: launching.launch(variant, ops, backend)


def judged_grouped(variant, case, backend) -> None:
    """A grouped variant on `case` judged by its reference, the grouped relations (the groups relabelled, K
    padded by 5) and agreement with the loop of 2-D problems; each raises on a failure."""
    _, ops, verdict = judged(variant, case, backend)
    first = relations.observed(verdict)
    grouped_relations.relabel(variant, launcher(backend), ops, first)
    grouped_relations.pad_k(variant, launcher(backend), ops, first, extra=5)
    agreement.judge({variant.name: first, grouped_loop.NAME: grouped_loop.run(ops, backend)})


def unjudged_run(variant, case, backend) -> tuple:
    """A grouped variant's run on `case` checked by the memory oracles only: (operands, relations.Run of its C
    and what a correct kernel may store there), for a relation or agreement to judge."""
    operation = variant.operation_in(backend.device.type, by_name(case.dtype).dtype)
    ops = grouped.materialize(case, backend.device, operation)
    launching.launch(variant, ops, backend)
    oracles.memory(ops)
    allow, got = oracles.outputs(ops, variant.precision, None)["C"]
    return ops, relations.Run(got, allow)
