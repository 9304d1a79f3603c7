"""Cross-variant agreement: one case, every variant that takes it, bit-equal where exact and within
the sum of their bounds elsewhere (properties/judge/agreement.py). With a user's kernel (the focus),
it is judged by the built-in variants and only its disagreement fails.

A user's kernel is judged by one of the plainest built-ins (JUDGES) on each example: more peers would
add nothing the main property does not check (agreement holds the focus to the sum of two bounds, never
tighter than its own bound against the float64 reference), only their runs, which in the interpreter
were most of a battery's time. On a GPU its cases come from GPU_AGREEMENT_CLASSES specialization classes
and its judges' kernels are compiled ahead when the run starts. The built-in variants judge each other:
in the interpreter every variant on every example; on a GPU, where each peer costs a compilation per
specialization of the case (about 0.6 s on an H100), PEERS_ON_GPU peers drawn per example from the rest
(shrinking toward the first ones, so every peer is reached over the examples). The stratified cases of
the focus (or of each variant in turn) run first.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from hypothesis import strategies as st

from gemm_fuzz import kernels
from gemm_fuzz.kernels.operation import PLAIN, Operation
from gemm_fuzz.properties.checks import grouped_loop
from gemm_fuzz.properties.checks.check import Check
from gemm_fuzz.properties.checks.example import Example, Observation
from gemm_fuzz.properties.judge import agreement, oracles, relations
from gemm_fuzz.properties.judge.failures import GemmFailure
from gemm_fuzz.properties.launch import ahead
from gemm_fuzz.properties.launch.launching import accepts, launch
from gemm_fuzz.properties.model import strategies, stratified
from gemm_fuzz.properties.model.cases import materialize
from gemm_fuzz.reference.formats import by_name
from gemm_fuzz.reference.numpy_ref import to_float64

PEERS_ON_GPU = 3
JUDGES = ("tiled", "naive")  # a user's kernel is judged by one of these
GPU_AGREEMENT_CLASSES = 3  # on cases of this many specialization classes


@dataclass(frozen=True)
class AgreementGroup:
    """What an agreement test is about: an input dtype, the operation its variants compute (the
    focus's, where there is one), and the focus (a user's kernel) if any."""

    dtype: str
    focus: object = None  # a user's Variant: only its disagreement fails the test
    operation: Operation = PLAIN

    @property
    def id(self) -> str:
        if self.focus is not None:
            return f"{self.focus.name}-{self.dtype}"
        return f"agreement-{self.dtype}" if self.operation.plain else f"agreement-{label(self.operation)}-{self.dtype}"

    @property
    def variant(self):
        return self.focus

    def __repr__(self) -> str:
        return f"AgreementGroup({self.id})"


def same_operation(x: Operation, y: Operation) -> bool:
    """Two kernels compute the same thing, whatever keywords they take their extras as (and, grouped,
    however they say where the groups are: the index's form, the metadata's block size)."""
    def what(op: Operation) -> Operation:
        return dataclasses.replace(op, names=(), ragged_index="sizes", block_m=1 if op.grouped == "routed" else None)
    return what(x) == what(y)


def label(op: Operation) -> str:
    """A short name of an operation, for test ids: its parts, e.g. 'alpha-beta-bias-gelu'."""
    parts = [p for p, present in ((op.grouped or "", op.grouped), ("weighted", op.routed_weight),
                                   ("ep", op.expert_parallel), ("batched", op.batched), ("alpha", op.alpha),
                                   ("beta", op.beta),
                                   (f"bias{op.bias}", op.bias), (op.gated or "", op.gated),
                                   (op.activation or "", op.activation), ("residual", op.residual),
                                   ("pre", op.pre_activation)) if present]
    return "-".join(parts) or "plain"


def peers_of(dtype: str, backend, operation: Operation = PLAIN) -> list:
    """The registered variants that run here and compute `operation` on `dtype` inputs."""
    torch_dtype = by_name(dtype).dtype
    return [v for v in kernels.variants() if torch_dtype in v.dtypes and v.runs_on(backend.name)
            and same_operation(v.operation, operation)]


def _sized(backend, **more) -> dict:
    return dict(device_type=backend.device.type, max_dim=min(backend.max_dim, 40), tiles=2, **more)


def _example(focus, case, peers) -> Example:
    return Example("agreement", focus.name if focus else "", case, (("peers", tuple(v.name for v in peers)),))


def _judges(peers: list, focus) -> list:
    """Who judges a user's kernel: the plainest built-ins computing its operation."""
    return [v for v in peers if v.name in JUDGES] or [v for v in peers if v is not focus][:1]


def _judged_sized(backend) -> dict:
    """How a user's kernel's agreement cases are drawn: on a GPU, from a few specialization classes."""
    return _sized(backend) if backend.interpreted else _sized(backend, compile_budget=GPU_AGREEMENT_CLASSES)


@st.composite
def _examples(draw, dtype: str, focus, backend, operation: Operation):
    peers = peers_of(dtype, backend, operation)
    if focus is not None:
        judges = _judges(peers, focus)
        case = draw(strategies.gemm_cases(focus, dtype, **_judged_sized(backend)))
        return _example(focus, case, [focus, draw(st.sampled_from(judges))] if judges else [focus])
    # any variant's cases: those of the most demanding ones (aligned, contiguous) are taken by all; every
    # variant runs in its default configuration
    source = draw(st.sampled_from(peers))
    case = dataclasses.replace(draw(strategies.gemm_cases(source, dtype, **_sized(backend))), config=())
    if not backend.interpreted:
        peers = draw(strategies.some_peers(peers, [source], PEERS_ON_GPU))
    return _example(None, case, peers)


class Agreement(Check):
    name = "agreement"
    share, minimum = 3, 4  # each example runs every variant (a user's kernel: it and its judge)

    def examples(self, group, backend):
        return _examples(group.dtype, group.focus, backend, group.operation)

    def stratified(self, group, backend) -> list:
        dtype, focus = group.dtype, group.focus
        peers = peers_of(dtype, backend, group.operation)
        if focus is not None:
            judges = _judges(peers, focus)
            cases = stratified.cases(focus, dtype, **_judged_sized(backend))
            return [_example(focus, c, [focus, judges[i % len(judges)]] if judges else [focus])
                    for i, c in enumerate(cases)]
        lists = {v.name: stratified.cases(v, dtype, **_sized(backend)) for v in peers}
        found = []
        for i in range(max(len(cases) for cases in lists.values())):  # the i-th of the i-th variant's
            source = peers[i % len(peers)]
            # every variant in its default configuration, as drawn
            case = dataclasses.replace(lists[source.name][i % len(lists[source.name])], config=())
            first = peers[:PEERS_ON_GPU]
            chosen = peers if backend.interpreted else [v for v in peers if v is source or v in first]
            found.append(_example(None, case, chosen))
        return found

    def compile_plans(self, target, backend, user: bool) -> list:
        """A user's kernel: its judges' kernels on the classes it is judged on."""
        if not user:
            return []
        judges = _judges(peers_of(target.dtype, backend, target.variant.operation), target.variant)
        cases = strategies.pool_cases(target.variant, target.dtype, device_type=backend.device.type, max_dim=40,
                                      tiles=2, compile_budget=GPU_AGREEMENT_CLASSES)
        return [(v, dataclasses.replace(case, config=())) for case in cases for v in judges]

    def execute(self, example, resolve, backend) -> Observation:
        start = time.perf_counter()
        case = example.case
        operation = resolve(example.parameters["peers"][0]).operation
        if operation.grouped:
            return _grouped(example, resolve, backend, start)
        ops = materialize(case, backend.device, operation)
        a, b = to_float64(ops.a.view), to_float64(ops.b.view)
        extras = relations.Extras.of(ops)
        fin, fout = by_name(case.dtype), by_name(case.out_dtype)
        names = ([example.variant] if example.variant else []) + [n for n in example.parameters["peers"]
                                                                  if n != example.variant]
        # the case's configuration is the focus's; every other peer runs its default
        peers = [(name, resolve(name), case.config if name == example.variant else ()) for name in names]
        for _, v, config in peers:  # on a GPU every peer compiles at once
            ahead.compile_ahead(v, [dataclasses.replace(case, config=config)], backend)
        runs = {}
        for name, v, config in peers:  # each under the memory oracles; their values are judged against each other
            if accepts(v, ops):
                try:
                    runs[name] = relations.solve(v, lambda x, o, config=config: launch(x, o, backend, config), a, b,
                                                 (case.a, case.b, case.c), fin, fout, backend.device, config, extras)
                except GemmFailure as e:
                    e.context.setdefault("variant", name)
                    raise
        agreement.judge(runs, example.variant or None)
        return Observation(all(bool(r.exact.all()) for r in runs.values()), None, time.perf_counter() - start)

    def describe(self, example) -> str:
        focus = f" judging {example.variant}" if example.variant else ""
        return f"agreement among {', '.join(example.parameters.get('peers', ()))}{focus}"


def _grouped(example, resolve, backend, start: float) -> Observation:
    """Grouped peers: each with the metadata its own block size needs (the same values throughout), and,
    for a grouped product alone, a loop of the plain `tiled` kernel over the groups' 2-D problems."""
    case = example.case
    dtype = by_name(case.dtype).dtype
    names = ([example.variant] if example.variant else []) + [n for n in example.parameters["peers"]
                                                              if n != example.variant]
    runs, ops = {}, None
    for name in names:
        v = resolve(name)
        config = case.config if name == example.variant else ()
        ops = materialize(dataclasses.replace(case, config=config), backend.device,
                          v.operation_in(backend.device.type, dtype, config))
        if not accepts(v, ops):
            continue
        ahead.compile_ahead(v, [dataclasses.replace(case, config=config)], backend)
        try:
            launch(v, ops, backend, config)
            oracles.memory(ops)
            allow, got = oracles.outputs(ops, v.precision, None)["C"]
        except GemmFailure as e:
            e.context.setdefault("variant", name)
            raise
        runs[name] = relations.Run(got, allow)
    if ops is not None and grouped_loop.applies(ops.operation, dtype):
        runs[grouped_loop.NAME] = grouped_loop.run(ops, backend)
    agreement.judge(runs, example.variant or None)
    return Observation(all(bool(r.exact.all()) for r in runs.values()), None, time.perf_counter() - start)


CHECK = Agreement()
