"""The two backends the suite runs on, and the one place that chooses between them.

`activate(name)` must run before `kernels` is imported (the plugin does it first thing): it sets the
environment `kernels.mode` reads, imports the kernels, and on the interpreter probes and fixes the
interpreter's known gaps. Asking for one backend after the kernels were loaded for the other raises
`kernels.mode.BackendError` instead of running the wrong thing.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Backend:
    name: str  # "interpreter" or "cuda"
    device: torch.device  # where the tensors live
    device_name: str
    emulations: tuple[str, ...] = field(default=())
    checks: tuple[str, ...] = field(default=())  # header lines of the interpreter's checkers, self-tested

    def __repr__(self) -> str:
        return f"Backend({self.name} on {self.device_name})"

    @property
    def interpreted(self) -> bool:
        return self.name == "interpreter"

    @property
    def max_dim(self) -> int:
        """Largest M, N or K the strategies draw: the interpreter runs programs one after another."""
        return 72 if self.interpreted else 600

    def header(self, verbose: bool = False) -> list[str]:
        """The backend, the versions and, in the interpreter, one line naming the gaps emulated and the
        checkers installed; `verbose`: a line for each (what was wrong, what the fix does)."""
        import triton

        lines = [
            f"gemm backend: {self.name} on {self.device_name} ({self.device})",
            f"gemm versions: torch {torch.__version__}, triton {triton.__version__}, "
            f"python {platform.python_version()}",
        ]
        if not self.interpreted:
            return lines
        if verbose:
            lines += [f"gemm interpreter emulation: {e}" for e in self.emulations] or [
                "gemm interpreter emulation: none needed"]
            return lines + list(self.checks)
        gaps = ", ".join(e.split(":", 1)[0] for e in self.emulations) or "none needed"
        fast = next((c.split(": ", 1)[1].split(" ")[0] for c in self.checks if "fast path:" in c), "?")
        return lines + [f"gemm interpreter: gaps emulated: {gaps}; sanitizer and program scheduler on, fast path "
                        f"{fast} (-v or docs/interpreter.md say what each does)"]


_ACTIVE: Backend | None = None


def activate(requested: str = "auto") -> Backend:
    """Choose the backend for this process (idempotent for the same choice)."""
    global _ACTIVE
    if "gemm_fuzz.kernels" not in sys.modules:
        os.environ["GEMM_BACKEND"] = requested  # read by kernels.mode when the package loads
    from gemm_fuzz import kernels

    name = kernels.mode.require(requested)
    if _ACTIVE is not None and _ACTIVE.name == name:
        return _ACTIVE
    if name == "interpreter":
        from gemm_fuzz.properties.interpreter import fast, fixes, sanitizer, schedule

        emulations = tuple(fixes.apply())
        scheduler = schedule.install()  # after the fixes (it wraps them), before any sanitizer block (which wraps it)
        checks = (f"gemm sanitizer: {sanitizer.self_test()}", scheduler, fast.install())
        _ACTIVE = Backend(name, torch.device("cpu"), _cpu_name(), emulations, checks)
    else:
        _ACTIVE = Backend(name, torch.device("cuda", torch.cuda.current_device()), torch.cuda.get_device_name())
    return _ACTIVE


def current() -> Backend:
    return _ACTIVE if _ACTIVE is not None else activate(os.environ.get("GEMM_BACKEND", "auto"))


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return "CPU " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"CPU {platform.processor() or platform.machine()}"
