"""Metamorphic relations for every variant and dtype: transposition, scaling by a power of two,
zero padding of K and splitting K (properties/judge/relations.py). Each example runs the main property
on the case, then reruns the kernel on the changed problems under the same oracles and compares
bit-exactly where the arithmetic is exact. The stratified cases first, each relation's parameter taken
in turn.

On a GPU K is padded and split by multiples of 16: K keeps its specialization class (and so do the
strides it sets), so the padded problem and the split's second part reuse the first run's kernel, and
its first part one compiled ahead per class.
"""

from __future__ import annotations

from hypothesis import strategies as st

from gemm_fuzz.properties.checks.check import Check
from gemm_fuzz.properties.checks.example import Example, Observation
from gemm_fuzz.properties.checks.reference import judged
from gemm_fuzz.properties.judge import relations
from gemm_fuzz.properties.launch import ahead
from gemm_fuzz.properties.launch.launching import launch
from gemm_fuzz.properties.model import strategies, stratified

GPU_PAD = (16, 32)
GPU_SPLIT_STEP = 16
SCALES = (1, -1, 3)


def gpu_relations(case, contiguous: bool) -> dict:
    """The relations' parameters whose problems a GPU compiles ahead for a case of a class."""
    return {"transpose": not contiguous, "pad": GPU_PAD[0], "split": GPU_SPLIT_STEP if case.K > GPU_SPLIT_STEP else 0}


def _split(case, interpreted: bool):
    if not interpreted and case.K > GPU_SPLIT_STEP:
        step = GPU_SPLIT_STEP
        return st.integers(1, (case.K - 1) // step).map(lambda n: n * step)
    return st.integers(1, case.K - 1)


def _example(variant, case, scale: int, pad: int, split: int) -> Example:
    params = (("transpose", not variant.requirements.contiguous),  # a transposed operand is not contiguous
              ("scale", scale), ("pad", pad), ("split", split if case.K >= 2 else 0))
    return Example("metamorphic", variant.name, case, params)


@st.composite
def _examples(draw, variant, dtype: str, backend, sized: dict):
    case = draw(strategies.gemm_cases(variant, dtype, **sized))
    pad = draw(st.integers(1, 17) if backend.interpreted else st.sampled_from(GPU_PAD))
    return _example(variant, case, draw(st.sampled_from(SCALES)), pad,
                    draw(_split(case, backend.interpreted)) if case.K >= 2 else 0)


class Metamorphic(Check):
    name = "metamorphic"
    share, minimum = 3, 4  # each example is five or six launches

    def _sized(self, backend) -> dict:
        return dict(device_type=backend.device.type, max_dim=min(backend.max_dim, 40), tiles=2)

    def examples(self, target, backend):
        return _examples(target.variant, target.dtype, backend, self._sized(backend))

    def stratified(self, target, backend) -> list:
        found = []
        variant = target.variant
        for i, case in enumerate(stratified.cases(variant, target.dtype, **self._sized(backend))):
            if backend.interpreted:
                pad, split = 1 + i % 17, max(1, case.K // 2)
            else:
                pad = GPU_PAD[i % len(GPU_PAD)]
                split = gpu_relations(case, bool(variant.requirements.contiguous))["split"]
            found.append(_example(variant, case, SCALES[i % len(SCALES)], pad, split))
        return found

    def compile_plans(self, target, backend, user: bool) -> list:
        """The relations' problems on each class of the main property's pool."""
        variant = target.variant
        plans = []
        for case in strategies.pool_cases(variant, target.dtype, device_type=backend.device.type,
                                          max_dim=backend.max_dim):
            params = gpu_relations(case, bool(variant.requirements.contiguous))
            plans += [(variant, c) for c in (case, *relations.problems(variant, case, params))]
        return plans

    def execute(self, example, resolve, backend) -> Observation:
        variant, case, p = resolve(example.variant), example.case, example.parameters
        # on a GPU every problem the relations launch compiles at once, beside the first run
        ahead.compile_ahead(variant, [case, *relations.problems(variant, case, p)], backend)
        observed, ops, verdict = judged(variant, case, backend)
        first = relations.observed(verdict)
        run = lambda v, o: launch(v, o, backend, case.config)  # noqa: E731
        if p.get("transpose"):
            relations.transpose(variant, run, ops, first)
        if p.get("scale"):
            relations.scale(variant, run, ops, first, k=p["scale"])
        if p.get("pad"):
            relations.zero_padding(variant, run, ops, first, extra=p["pad"])
        if p.get("split"):
            relations.split_k(variant, run, ops, first, k1=p["split"])
        return observed

    def describe(self, example) -> str:
        return "metamorphic relations " + ", ".join(f"{k}={v}" for k, v in example.params)


CHECK = Metamorphic()
