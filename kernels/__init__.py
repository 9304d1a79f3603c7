"""Triton GEMM kernels under test, one file per variant, described in `kernels.registry`.

Importing this package first decides how kernels run (see `kernels.mode`), then loads every variant
module in this folder, so a new variant is one new file.
"""

from __future__ import annotations

import importlib
import pkgutil

import torch

from gemm_fuzz.kernels import mode, operands

mode.configure()  # before any @triton.jit below is evaluated

from gemm_fuzz.kernels.contracts import Contract, contract
from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.kernels.registry import Requirements, Variant, get, register, variants

# Modules here that are not variants.
_INFRASTRUCTURE = {"mode", "registry", "contracts", "operands", "operation", "dtypes", "autotuning", "bench", "machine", "mutants"}

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module not in _INFRASTRUCTURE and not _module.startswith("_"):
        importlib.import_module(f"{__name__}.{_module}")


def matmul(a: torch.Tensor, b: torch.Tensor, *, variant: str = "tiled", out: torch.Tensor | None = None,
           config: dict | None = None) -> torch.Tensor:
    """`a @ b` computed by the named variant (in one of its configurations; None: the default); `out`
    (M x N) is allocated when absent."""
    v = get(variant)
    if out is None:
        out = operands.allocate_output(v, a, b)
    v.launch(a, b, out, config=config)
    return out


__all__ = ["Contract", "Operation", "Requirements", "Variant", "contract", "get", "matmul", "mode", "register", "variants"]
