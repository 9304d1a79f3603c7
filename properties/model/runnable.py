"""The configurations this device cannot run, learnt as examples run.

A configuration whose kernel cannot compile or launch here for lack of resources (shared memory,
registers, threads per block) is one Triton's autotuner prunes: benchmarking it fails, so it is given
infinite time and never chosen, and the kernel as used never runs it. The suite does the same: the
first example that meets such a configuration is left out (properties.judge.failures.NotRunnable),
the configuration is recorded here, and the strategies draw it no more for that kernel and input
dtype (on this device: the record lives in the process that draws). Every other error of a
configuration stays a failure. The run's coverage report lists what was recorded, with the reason.
"""

from __future__ import annotations

from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.reference.formats import by_name

# (variant name, input dtype name, index in the variant's configurations for the device) -> reason
_RECORDED: dict[tuple[str, str, int], str] = {}


def index(variant: Variant, device_type: str, dtype: str, config) -> int:
    """The position in the variant's configuration space of a case's configuration ((key, value) pairs;
    () is the default, the first)."""
    space = variant.configs_for(device_type, by_name(dtype).dtype)
    full = variant.config(device_type, by_name(dtype).dtype, dict(config) or None)
    return next((i for i, c in enumerate(space) if dict(c) == full), 0)


def record(variant: Variant, device_type: str, dtype: str, config, reason: str) -> None:
    _RECORDED[(variant.name, dtype, index(variant, device_type, dtype, config))] = reason


def blocked(variant: Variant, dtype: str) -> frozenset[int]:
    """The indices of the configurations recorded as not runnable for this kernel and input dtype."""
    return frozenset(i for (name, d, i) in _RECORDED if name == variant.name and d == dtype)


def reasons(variant: Variant, dtype: str) -> dict[int, str]:
    return {i: r for (name, d, i), r in _RECORDED.items() if name == variant.name and d == dtype}


def usable(index: int, count: int, skip: frozenset[int]) -> int:
    """`index` if it is runnable, else the next runnable index after it (cyclically); `index` when none is."""
    for step in range(count):
        candidate = (index + step) % count
        if candidate not in skip:
            return candidate
    return index


def forget() -> None:
    """Drop every record (tests)."""
    _RECORDED.clear()
