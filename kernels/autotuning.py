"""Running an `@triton.autotune`d kernel with one configuration of its list, and no timing.

Triton's Autotuner times every configuration for each new key, which the interpreter cannot do
meaningfully and which would test only the configuration the timing picks. With a one-element
list it runs that configuration directly (`Autotuner.run` skips the benchmark), so `pinned` narrows
the list for the duration of a launch. The suite uses it for the built-in `autotuned` variant and
for a user's autotuned kernel alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import triton
from triton.runtime.autotuner import Autotuner

# what a configuration dict may set besides the kernel's own meta-parameters
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def as_dict(config: triton.Config) -> dict:
    """A triton.Config as the plain dict the suite records in a case."""
    options = {name: getattr(config, name) for name in LAUNCH_OPTIONS if getattr(config, name, None) is not None}
    return {**config.kwargs, **options}


def as_config(values: Mapping) -> triton.Config:
    options = {name: values[name] for name in LAUNCH_OPTIONS if name in values}
    return triton.Config({k: v for k, v in values.items() if k not in LAUNCH_OPTIONS}, **options)


@contextmanager
def pinned(autotuner: Autotuner, values: Mapping) -> Iterator[None]:
    """Within the block, `autotuner` runs the configuration `values` (its kernel arguments and launch
    options), untimed."""
    saved = autotuner.configs
    # the listed configuration itself where it is one of the list (it keeps its pre_hook)
    autotuner.configs = [next((c for c in saved if as_dict(c) == dict(values)), None) or as_config(values)]
    try:
        yield
    finally:
        autotuner.configs = saved
