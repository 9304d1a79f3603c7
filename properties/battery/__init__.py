"""The battery: property tests that run on every built-in variant, or on the kernel given with
--gemm-kernel (the plugin collects this folder then). Each asks for a `target`, an
`agreement_group` or a `corpus_case`, which the plugin parametrizes.

On a GPU every kernel a test launches is a compilation per specialization class (about 0.5 s on an
H100), so there the tests draw from few classes (properties/model/specialization.py) and choose their
parameters to stay among them, and `compile_plans` lists what a target's tests launch, one case per
class, for the run to compile all of it ahead, at once (properties/run/ahead.py)."""

from __future__ import annotations

# The metamorphic relations on a GPU pad K and split it by multiples of 16: K keeps its class (and so
# do the strides it sets), so the padded problem and the split's second part reuse the first run's
# kernel, and its first part one compiled ahead per class.
GPU_PAD = (16, 32)
GPU_SPLIT_STEP = 16
# A user's kernel on a GPU is judged in agreement by one of these, on cases of this many classes.
GPU_JUDGES = ("tiled", "naive")
GPU_AGREEMENT_CLASSES = 3


def gpu_relations(case, contiguous: bool) -> dict:
    """The relations' parameters whose problems a GPU compiles ahead for a case of a class."""
    return {"transpose": not contiguous, "pad": GPU_PAD[0], "split": GPU_SPLIT_STEP if case.K > GPU_SPLIT_STEP else 0}


def compile_plans(backend, variant, dtype: str, user: bool) -> list:
    """(variant, case) pairs: what a target's tests launch on a GPU (none on the interpreter): the main
    property's classes and the relations' problems on them; for a user's kernel also the agreement
    cases with the judges."""
    import dataclasses

    from gemm_fuzz import kernels
    from gemm_fuzz.properties.judge import relations
    from gemm_fuzz.properties.model import strategies
    from gemm_fuzz.reference.formats import by_name

    if backend.interpreted:
        return []
    sized = dict(device_type=backend.device.type, max_dim=backend.max_dim)
    plans = []
    for case in strategies.pool_cases(variant, dtype, **sized):
        params = gpu_relations(case, bool(variant.requirements.contiguous))
        plans += [(variant, c) for c in (case, *relations.problems(variant, case, params))]
    if user:
        judges = [kernels.get(n) for n in GPU_JUDGES if by_name(dtype).dtype in kernels.get(n).dtypes]
        for case in strategies.pool_cases(variant, dtype, device_type=backend.device.type, max_dim=40, tiles=2,
                                          compile_budget=GPU_AGREEMENT_CLASSES):
            plans += [(v, dataclasses.replace(case, config=())) for v in judges]
    return plans
