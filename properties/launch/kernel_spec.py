"""How a `--gemm-kernel` specification names a kernel: `PATH.py:FUNC` (a file, by its absolute path)
or `module:FUNC`. Light on purpose (no torch, no Triton): the plugin reads it before choosing the
backend, to start the kernel's worker early (properties/run/isolation.py)."""

from __future__ import annotations

from pathlib import Path


def split(spec: str) -> tuple[str, str, Path | None]:
    """(where, FUNC, the file's absolute path or None for a module); ValueError if there is no ':'."""
    if ":" not in spec:
        raise ValueError(f"{spec!r}: expected PATH.py:FUNC or module:FUNC")
    where, func = spec.rsplit(":", 1)
    is_file = where.endswith(".py") or "/" in where or "\\" in where
    return where, func, Path(where).expanduser().resolve() if is_file else None


def canonical(spec: str) -> str:
    """The specification as a worker process is given it: a file by its absolute path."""
    where, func, path = split(spec)
    return f"{path}:{func}" if path is not None else spec
