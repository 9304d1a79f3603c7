"""What one example is and what a passing one measured.

An `Example` names a check (properties/checks: its `name`), the variant it is about, a `GemmCase` and
the check's drawn parameters; it is a frozen, JSON-serialisable value, so a worker process, a repro
script and a replayed corpus entry run exactly what the test ran.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

from gemm_fuzz.properties.model.cases import GemmCase


@dataclass(frozen=True)
class Example:
    check: str  # the name of the check that runs it (properties.checks.get)
    variant: str  # the variant judged ('' for agreement among peers with no focus)
    case: GemmCase
    params: tuple[tuple[str, object], ...] = ()  # the check's drawn parameters, in a fixed order

    def __post_init__(self):
        from gemm_fuzz.properties import checks

        checks.get(self.check)  # an unknown name fails here, listing the known ones

    @property
    def parameters(self) -> dict:
        return dict(self.params)

    def to_dict(self) -> dict:
        return {"check": self.check, "variant": self.variant, "case": asdict(self.case),
                "params": [[k, list(v) if isinstance(v, tuple) else v] for k, v in self.params]}

    @classmethod
    def from_dict(cls, data: dict) -> Example:
        params = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in data.get("params", []))
        return cls(data["check"], data["variant"], GemmCase.from_dict(data["case"]), params)

    def key(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def describe(self) -> str:
        """The check in words, with its parameters."""
        from gemm_fuzz.properties import checks

        return checks.get(self.check).describe(self)


@dataclass
class Observation:
    """What one passing example measured."""

    exact: bool  # judged bit-exact (True) or within the bound (False)
    error_ratio: float | None  # largest |C - reference| / bound; 0 on exact cases; None where not judged so
    seconds: float
    # largest |C - reference| over torch.matmul's on the same inputs and device; None on exact cases
    # and where torch is exact
    torch_ratio: float | None = None
    values: np.ndarray | None = field(default=None, repr=False)  # C (float64), for the `output` check
    phases: dict = field(default_factory=dict)  # seconds per phase and kernels compiled (properties/phases.py)

    def to_dict(self) -> dict:
        return {"exact": self.exact, "error_ratio": self.error_ratio, "seconds": self.seconds,
                "torch_ratio": self.torch_ratio, "phases": self.phases}
