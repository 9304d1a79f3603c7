"""Metamorphic relations for every variant and dtype: transposition, scaling by a power of two,
zero padding of K and splitting K (properties/judge/relations.py); for a kernel with an epilogue or a
batch, the family's (properties/judge/family_relations.py): zero padding of K, one problem of a batch
alone and the batch reversed, a shifted bias, alpha and the epilogue's terms doubled; for a grouped or
MoE kernel, its groups relabelled and K padded (properties/judge/grouped_relations.py). Each example
runs the main property on the case, then reruns the kernel on the changed problems under the same
oracles and compares bit-exactly where the arithmetic is exact. The stratified cases first, each
relation's parameter taken in turn.

On a GPU K is padded and split by multiples of 16: K keeps its specialization class (and so do the
strides it sets), so the padded problem and the split's second part reuse the first run's kernel, and
its first part one compiled ahead per class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from gemm_fuzz.properties.checks.check import Check, NothingJudged
from gemm_fuzz.properties.checks.example import Example, Observation
from gemm_fuzz.properties.checks.reference import judged
from gemm_fuzz.properties.judge import family_relations, grouped_relations, relations
from gemm_fuzz.properties.launch import ahead, preconditions
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


SHIFTS = (1.0, -0.5, 2.0)


@dataclass(frozen=True)
class Relation:
    """One metamorphic relation: the Example parameter that turns it on and carries its value, whether
    a value asks for a run on this case, and the run (properties/judge/*relations.py)."""

    param: str
    run: Callable  # run(variant, launch, ops, first) or, taking a value, run(variant, launch, ops, first, value)
    takes_value: bool = True
    wanted: Callable = lambda value, case: bool(value)  # does the example ask for it on this case?


# each kind of operation's relations, in the order they run; `kind` says which kind an operation is
RELATIONS = {
    "grouped": (Relation("relabel", grouped_relations.relabel, takes_value=False),  # scaled groups: relabelled
                Relation("pad", grouped_relations.pad_k)),
    "scaled": (Relation("double_scale", family_relations.double_scale, takes_value=False),),
    "family": (Relation("pad", family_relations.pad_k),
               Relation("problem", family_relations.one_problem, wanted=lambda v, case: v is not None),
               Relation("reverse", family_relations.reversed_batch, takes_value=False,
                        wanted=lambda v, case: bool(v) and case.batch > 1),
               Relation("shift", family_relations.shift_bias),
               Relation("double", family_relations.double, takes_value=False)),
    "plain": (Relation("transpose", relations.transpose, takes_value=False),
              Relation("scale", relations.scale), Relation("pad", relations.zero_padding),
              Relation("split", relations.split_k)),
}


def kind(operation) -> str:
    """Which relations an operation has: a grouped product's, scaled codes', the family's (an epilogue or
    a batch) or the plain product's."""
    if operation.grouped:
        return "grouped"
    if operation.scaled:
        return "scaled"
    return "plain" if operation.plain else "family"


def _example(variant, case, scale: int, pad: int, split: int, problem: int = 0) -> Example:
    """The example of each of the variant's relations, with its drawn parameter (only these names: a
    relation's parameter is RELATIONS' `param`)."""
    op = variant.operation
    params = {
        "grouped": lambda: (("relabel", True), ("pad", 0 if op.scaled else pad)),
        "scaled": lambda: (("double_scale", True),),  # doubling the codes' scales
        "family": lambda: (("pad", pad),
                           *((("problem", problem % case.problems), ("reverse", True)) if op.batched else ()),
                           ("shift", SHIFTS[abs(scale) % len(SHIFTS)]), ("double", True)),
        "plain": lambda: (("transpose", not variant.requirements.contiguous),  # a transposed operand is not
                          ("scale", scale), ("pad", pad), ("split", split if case.K >= 2 else 0)),  # contiguous
    }[kind(op)]()
    return Example("metamorphic", variant.name, case, params)


@st.composite
def _examples(draw, variant, dtype: str, backend, sized: dict):
    case = draw(strategies.gemm_cases(variant, dtype, **sized))
    pad = draw(st.integers(1, 17) if backend.interpreted else st.sampled_from(GPU_PAD))
    return _example(variant, case, draw(st.sampled_from(SCALES)), pad,
                    draw(_split(case, backend.interpreted)) if case.K >= 2 else 0, draw(st.integers(0, 2**16)))


class Metamorphic(Check):
    name = "metamorphic"
    counts_reached = True
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
            found.append(_example(variant, case, SCALES[i % len(SCALES)], pad, split, i))
        return found

    def compile_plans(self, target, backend, user: bool) -> list:
        """The relations' problems on each class of the main property's pool."""
        variant = target.variant
        plans = []
        for case in strategies.pool_cases(variant, target.dtype, device_type=backend.device.type,
                                          max_dim=backend.max_dim):
            params = gpu_relations(case, bool(variant.requirements.contiguous))
            if variant.operation.grouped:  # its relations relabel groups (same shapes) and pad K
                params = {} if variant.operation.scaled else {"pad": params["pad"]}
            plans += [(variant, c) for c in (case, *relations.problems(variant, case, params))]
        return plans

    def execute(self, example, resolve, backend) -> Observation:
        variant, case, p = resolve(example.variant), example.case, example.parameters
        # on a GPU every problem the relations launch compiles at once, beside the first run
        ahead.compile_ahead(variant, [case, *relations.problems(variant, case, p)], backend)
        observed, ops, verdict = judged(variant, case, backend)
        if verdict is None:  # not run in the interpreter (a batch past the grid's limits)
            return observed
        first = relations.observed(verdict)
        run = lambda v, o: launch(v, o, backend, case.config)  # noqa: E731
        for relation in RELATIONS[kind(variant.operation)]:
            value = p.get(relation.param)
            if relation.wanted(value, case):
                relation.run(variant, run, ops, first, *((value,) if relation.takes_value else ()))
        return observed

    def describe(self, example) -> str:
        return "metamorphic relations " + ", ".join(f"{k}={v}" for k, v in example.params)

    def under_contract(self, example, variant, device) -> tuple:
        """Each relation whose problems the contract now refuses (a transposed operand once contiguity is
        declared, say) left out, as a fresh draw would leave it out; nothing left: NothingJudged."""
        params, dropped = dict(example.params), []
        for key, value in example.params:
            for problem in relations.problems(variant, example.case, {key: value}):
                why = preconditions.refusal(variant, problem, device)
                if why is not None:
                    params[key] = type(value)()  # False, 0: the relation is not run
                    dropped.append(f"{key} ({why})")
                    break
        if dropped and not any(params.values()):
            raise NothingJudged(f"the contract admits none of its relations now: {'; '.join(dropped)}")
        kept = dataclasses.replace(example, params=tuple(params.items()))
        return kept, (f"left out, the contract refusing their problems now: {'; '.join(dropped)}" if dropped else "")


CHECK = Metamorphic()
