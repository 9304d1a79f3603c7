"""Past failures replayed first: the example a repro script recorded (properties/report/repros.py),
run the way it was found (in its recorded mode and timeout, where this backend allows them), with a
user's kernel under its identity now (its file may have changed since). Nothing is drawn and nothing
shrunk: the recorded example is the whole test.

A script whose case the kernel's contract no longer admits (a precondition declared since, a dtype
dropped), or whose kernel needs a GPU here, judges nothing: `NothingJudged` says why (the plugin
skips the test with that reason). The recorded example is re-derived under the contract as it is now
(`Check.under_contract`): a metamorphic relation whose problem the contract now refuses (a transposed
operand once contiguity is declared) is left out, with a warning saying so.
"""

from __future__ import annotations

import dataclasses
import warnings

from gemm_fuzz.properties.checks.check import Check, NothingJudged
from gemm_fuzz.properties.checks.example import Example
from gemm_fuzz.properties.launch import preconditions, targets, user_kernel

SANITIZED = ("sanitize", "racecheck")  # modes that run compute-sanitizer, on a GPU only


def with_variant(example: Example, old: str, new: str) -> Example:
    """`example` with a variant name replaced (a user's kernel whose file changed has a new identity)."""
    peers = tuple(new if p == old else p for p in example.parameters.get("peers", ()))
    params = tuple((k, peers if k == "peers" else v) for k, v in example.params)
    return dataclasses.replace(example, variant=new if example.variant == old else example.variant, params=params)


def recorded_example(record: dict) -> Example:
    """The recorded example, its user kernel (loaded here) under the identity it has now."""
    example = Example.from_dict(record["example"])
    kernel = record.get("kernel")
    if kernel:
        current = user_kernel.load(kernel["spec"], kernel.get("signature")).name
        example = with_variant(example, example.variant, current)
    return example


def recorded_mode(record: dict, backend: str) -> tuple[str, float]:
    """The mode and per-example timeout a script recorded, on `backend` (compute-sanitizer only where
    there is a GPU)."""
    mode = record["mode"]
    if mode in SANITIZED and backend != "cuda":
        mode = "worker"
    return mode, record.get("timeout", 120.0)


def admitted(record: dict, backend) -> tuple[Example, str]:
    """The recorded example under its kernel's identity and contract as they are now, and what of it was
    left out ('' nothing); NothingJudged when the contract no longer admits it or it needs a GPU here.
    The pytest replay and the repro script both take this one path."""
    from gemm_fuzz.properties import checks

    example = recorded_example(record)
    if not example.variant:
        return example, ""
    variant = targets.resolve(example.variant)
    if not variant.runs_on(backend.name):
        raise NothingJudged(f"{example.variant} needs a CUDA GPU")
    why = preconditions.refusal(variant, example.case, backend.device)
    if why is not None:
        raise NothingJudged(f"the contract no longer admits its case: {why}")
    return checks.get(example.check).under_contract(example, variant, backend.device)


class Replay(Check):
    name = "replay"
    searched = False

    def variant(self, repro):
        return None

    def settings(self, repro, current):
        """The run's settings with the recorded mode and timeout."""
        mode, timeout = recorded_mode(repro.record, current.backend)
        return dataclasses.replace(current, mode=mode, timeout=timeout)

    def stratified(self, repro, backend) -> list:
        try:
            example, left_out = admitted(repro.record, backend)
        except NothingJudged as e:
            raise NothingJudged(f"{repro.path.name}: {e}") from None
        if left_out:
            warnings.warn(f"{repro.path.name}: {left_out}", UserWarning, stacklevel=1)
        return [example]

    def describe(self, example) -> str:
        return "the replay of a repro script"


CHECK = Replay()
