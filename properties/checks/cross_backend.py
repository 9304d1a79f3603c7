"""The same kernel compiled on the GPU and run through the interpreter (in a worker process), on the
same case: bit-equal where the arithmetic is exact, within both runs' bounds elsewhere (GPU only). Each
side runs as an `output` example, where the runner's settings put it (the interpreted one always in a
worker). The stratified cases first, on interpreter-sized problems (the interpreter runs one program
at a time). A kernel with an epilogue is judged by its operation's bound (C's; a second output is
judged by each side's own run)."""

from __future__ import annotations

import dataclasses
import time

from gemm_fuzz.properties import phases
from gemm_fuzz.properties.checks.check import Check
from gemm_fuzz.properties.checks.example import Example, Observation
from gemm_fuzz.properties.judge import compare, oracles
from gemm_fuzz.properties.judge.failures import GemmFailure, SuiteError
from gemm_fuzz.properties.judge.relations import Run, paired
from gemm_fuzz.properties.model import strategies, stratified
from gemm_fuzz.properties.model.cases import materialize
from gemm_fuzz.reference.formats import by_name

SIZED = dict(device_type="cuda", max_dim=96)


class CrossBackend(Check):
    name = "cross_backend"
    share, minimum = 5, 3  # each example also runs in the interpreter

    def _example(self, target):
        return lambda case: Example(self.name, target.variant.name, case)

    def examples(self, target, backend):
        return strategies.gemm_cases(target.variant, target.dtype, **SIZED).map(self._example(target))

    def stratified(self, target, backend) -> list:
        return [self._example(target)(c) for c in stratified.cases(target.variant, target.dtype, **SIZED)]

    def run(self, example, runner, variant, timeout: float, deadline: float | None) -> Observation:
        start = time.perf_counter()
        context = dict(variant=example.variant, case=example.case.describe(), check=self.describe(example))
        output = dataclasses.replace(example, check="output")
        try:
            sides = [runner.output(runner.backend.name, output, variant, timeout),
                     runner.output("interpreter", output, variant, timeout)]
            compiled, interpreted = (side.values for side in sides)
            resolved = variant or runner.resolve(example.variant)
            case = example.case
            ops = materialize(case, "cpu", resolved.operation_in(runner.backend.device.type, by_name(case.dtype).dtype,
                                                                    case.config))
            product = oracles.product_of(ops)
            partials = oracles.output_partials(resolved, case.dtype, case.config, runner.backend.device.type)
            allow = oracles.allowances(ops, resolved.precision, product, partials)["C"]
            runs = [Run(interpreted, allow), Run(compiled, allow)]
            compare.values(compiled, paired(interpreted, runs), against="the interpreted kernel")
        except GemmFailure as failure:
            failure.with_context(**context)
            raise
        except Exception as error:  # noqa: BLE001  the judging above is the suite's own code
            raise SuiteError.of(error).with_context(**context) from error
        observed = Observation(bool(allow.exact.all()), None, time.perf_counter() - start)
        for side in sides:  # where the time went: both runs' phases (the interpreted one's in its worker)
            phases.add(observed.phases, side.phases)
        return observed

    def describe(self, example) -> str:
        return "compiled against interpreted"


CHECK = CrossBackend()
