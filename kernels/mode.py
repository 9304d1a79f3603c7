"""Which way the kernels run: Triton's CPU interpreter or compiled for a CUDA GPU.

`@triton.jit` reads TRITON_INTERPRET when a kernel is *decorated*, that is when its module is
imported. Importing `kernels` therefore decides the mode once, before any kernel module loads,
from the environment variable GEMM_BACKEND:

    auto (default)  cuda when torch sees a GPU, else interpreter
    interpreter     TRITON_INTERPRET=1; kernels run on CPU tensors
    cuda            compiled kernels; tensors must live on the GPU

Triton's own library functions (tl.zeros, tl.cdiv, ...) are decorated when `triton.language` is
first imported, so the interpreter only works if TRITON_INTERPRET was set before *triton* was
imported. `configure` checks that, and asking for another mode after the import is an error (see
`require`): never a silent mismatch.
"""

from __future__ import annotations

import os
import sys

BACKENDS = ("interpreter", "cuda")
CHOICES = ("auto",) + BACKENDS


class BackendError(RuntimeError):
    """The requested backend cannot be used in this process."""


def _env_interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def resolve(requested: str) -> str:
    """Map auto/interpreter/cuda to the backend this machine will use."""
    if requested not in CHOICES:
        raise BackendError(f"unknown backend {requested!r}; expected one of {', '.join(CHOICES)}")
    import torch

    if requested == "auto":
        if _env_interpret():
            return "interpreter"
        return "cuda" if torch.cuda.is_available() else "interpreter"
    if requested == "cuda":
        if _env_interpret():
            raise BackendError("backend 'cuda' was asked for but TRITON_INTERPRET=1 is set; unset it")
        if not torch.cuda.is_available():
            raise BackendError("backend 'cuda' was asked for but torch sees no CUDA GPU")
    return requested


def configure() -> str:
    """Decide the mode from GEMM_BACKEND and set TRITON_INTERPRET to match. Idempotent."""
    global MODE
    if MODE is None:
        MODE = resolve(os.environ.get("GEMM_BACKEND", "auto").strip().lower() or "auto")
        os.environ["GEMM_BACKEND"] = MODE
        if MODE == "interpreter":
            os.environ["TRITON_INTERPRET"] = "1"
            _check_language_interpreted()
    return MODE


def _check_language_interpreted() -> None:
    if "triton.language" not in sys.modules:
        return
    from triton.language import standard
    from triton.runtime.jit import JITFunction

    if isinstance(standard.zeros, JITFunction):
        raise BackendError(
            "triton was imported before the interpreter backend was chosen, so its library functions "
            "(tl.zeros, ...) were built for compiled mode; set GEMM_BACKEND=interpreter or TRITON_INTERPRET=1 "
            "before anything imports triton (the pytest plugin and `import gemm_fuzz.kernels` do this when they come first)"
        )


def require(requested: str) -> str:
    """The configured mode, checked against `requested` (auto accepts whichever was configured)."""
    if requested not in CHOICES:
        raise BackendError(f"unknown backend {requested!r}; expected one of {', '.join(CHOICES)}")
    current = configure()
    if requested != "auto" and requested != current:
        raise BackendError(
            f"the kernels were already loaded for the {current!r} backend, so {requested!r} cannot be used "
            "in this process; choose the backend (GEMM_BACKEND or --gemm-backend) before importing kernels"
        )
    return current


def interpreted() -> bool:
    return configure() == "interpreter"


MODE: str | None = None
