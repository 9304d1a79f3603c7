"""The central property: the variant launched on the case, C judged against the float64 product under
the sound bound (bit-exact where the arithmetic is exact), every element written, nothing outside C
changed, the inputs intact, and (in the interpreter) no access outside its tensor. The stratified
cases first, then Hypothesis's draws, climbing toward the worst error / bound.

`output` is the same check keeping C's values (the compiled-against-interpreted check compares them).
"""

from __future__ import annotations

import time

from gemm_fuzz.properties.checks.check import Check
from gemm_fuzz.properties.checks.example import Example, Observation
from gemm_fuzz.properties.judge import oracles
from gemm_fuzz.properties.launch.launching import launch
from gemm_fuzz.properties.model import strategies, stratified
from gemm_fuzz.properties.model.cases import materialize
from gemm_fuzz.reference.formats import by_name

# The recorders of the saves under way, innermost last (properties/checks/saved_case.py): empty in every
# other run, so `judged` only tests it. A recorder sees the operands just before the launch and C just after.
CAPTURES: list = []


def judged(variant, case, backend) -> tuple[Observation, object, oracles.Verdict | None]:
    """Launch `variant` on `case` and judge it against the float64 reference: the observation, the
    operands and the verdict. In the interpreter a batch past what a CUDA grid axis other than 0 takes
    is not run program by program (minutes): its launch's grid is checked against CUDA's limits, and
    nothing else judged (verdict None); a GPU runs and judges it whole."""
    start = time.perf_counter()
    operation = variant.operation_in(backend.device.type, by_name(case.dtype).dtype, case.config)
    if backend.interpreted and case.batch > strategies.GRID_LIMIT:
        from gemm_fuzz.properties.interpreter import schedule

        ops = materialize(case, backend.device, operation, values=False)  # no program reads them
        with schedule.grid_only():
            launch(variant, ops, backend, case.config)
        return Observation(False, None, time.perf_counter() - start), ops, None
    ops = materialize(case, backend.device, operation)
    if CAPTURES:  # a save (properties/checks/saved_case.py): the operands as launched, C as written
        CAPTURES[-1].launching(variant, ops, backend)
        try:
            launch(variant, ops, backend, case.config)
        finally:
            CAPTURES[-1].launched(ops)
    else:
        launch(variant, ops, backend, case.config)
    partials = oracles.output_partials(variant, case.dtype, case.config, backend.device.type)
    verdict = oracles.against_reference(ops, variant.precision, partials=partials)
    plain = not (variant.operation.extras() or variant.operation.grouped)  # torch.matmul computes the same
    versus_torch = None if verdict.exact or not plain else oracles.torch_error_ratio(
        ops, verdict.allowance.expected, verdict.values)
    observed = Observation(verdict.exact, verdict.error_ratio, time.perf_counter() - start, versus_torch)
    return observed, ops, verdict


class Reference(Check):
    name = "reference"
    counts_reached = True
    climb = True
    keeps_values = False

    def _sized(self, backend) -> dict:
        return dict(device_type=backend.device.type, max_dim=backend.max_dim)

    def _example(self, target):
        return lambda case: Example(self.name, target.variant.name, case)

    def examples(self, target, backend):
        cases = strategies.gemm_cases(target.variant, target.dtype, big_batches=True, **self._sized(backend))
        return cases.map(self._example(target))

    def stratified(self, target, backend) -> list:
        cases = stratified.cases(target.variant, target.dtype, big_batches=True, **self._sized(backend))
        return [self._example(target)(c) for c in cases]

    def compile_plans(self, target, backend, user: bool) -> list:
        return [(target.variant, case) for case in strategies.pool_cases(
            target.variant, target.dtype, device_type=backend.device.type, max_dim=backend.max_dim)]

    def execute(self, example, resolve, backend) -> Observation:
        observed, _, verdict = judged(resolve(example.variant), example.case, backend)
        if self.keeps_values and verdict is not None:
            observed.values = verdict.values
        return observed

    def describe(self, example) -> str:
        return "against the float64 reference"


class Output(Reference):
    """The reference check, keeping C's values: what the compiled-against-interpreted check compares."""

    name = "output"
    keeps_values = True

    def compile_plans(self, target, backend, user: bool) -> list:
        return []  # no test of its own: the check that asks for it compiles what it needs

    def describe(self, example) -> str:
        return "its output"


CHECK = Reference()
OUTPUT = Output()
