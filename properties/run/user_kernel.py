"""Bring your own kernel: load `PATH.py:FUNC` (or `module:FUNC`) as a Variant the whole suite tests.

FUNC(a, b, c) writes a @ b into the preallocated c (a is M x K, b is K x N, c is M x N, any strides, on
the backend's device, c of the inputs' dtype). Optional attributes on FUNC:

    supported_dtypes  tuple of torch dtypes (default: float16, bfloat16, float32)
    precision         "ieee" or "tf32": what fp32 inputs get (default "ieee")
    block_shape       (BM, BN, BK): aims the shape strategies at its boundaries (default (16, 32, 16))
    signature         "leetgpu": FUNC is solve(a, b, c, M, N, K) in LeetGPU's naming, where A is
                      M x N and B is N x K, all contiguous (also set with --gemm-kernel-signature)

The file is imported only after the backend is chosen, so a plain @triton.jit kernel inside it runs
in the interpreter unchanged. The wrapper validates operands like the built-in launchers, so bad
input is refused before the user's function is called.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

import torch

from kernels import operands
from kernels.registry import Requirements, Variant

DEFAULT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DEFAULT_BLOCK = (16, 32, 16)
SIGNATURES = ("plain", "leetgpu")


class KernelSpecError(ValueError):
    """A --gemm-kernel specification that cannot be loaded."""


def _import(spec: str):
    if ":" not in spec:
        raise KernelSpecError(f"--gemm-kernel {spec!r}: expected PATH.py:FUNC or module:FUNC")
    where, func = spec.rsplit(":", 1)
    if not func.isidentifier():
        raise KernelSpecError(f"--gemm-kernel {spec!r}: {func!r} is not a function name")
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise KernelSpecError(f"--gemm-kernel {spec!r}: no file {path}")
        name = f"gemm_user_kernel_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent))  # so the file can import its neighbours
        try:
            module_spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise KernelSpecError(f"--gemm-kernel {spec!r}: cannot import module {where!r}: {e}") from None
    if not hasattr(module, func):
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise KernelSpecError(f"--gemm-kernel {spec!r}: {where} has no {func!r}; it defines {', '.join(defined)}")
    fn = getattr(module, func)
    if not callable(fn):
        raise KernelSpecError(f"--gemm-kernel {spec!r}: {func} is a {type(fn).__name__}, not a function")
    return fn, func


def _attribute(fn, name, default, valid, spec: str, expected: str):
    value = getattr(fn, name, default)
    if not valid(value):
        raise KernelSpecError(f"--gemm-kernel {spec!r}: {name} = {value!r}; expected {expected}")
    return value


def _dtype_tuple(value) -> bool:
    return isinstance(value, (tuple, list)) and bool(value) and all(isinstance(d, torch.dtype) for d in value)


def load(spec: str, signature: str | None = None) -> Variant:
    """The user's kernel as a Variant named `user:FUNC`."""
    fn, func = _import(spec)
    dtypes = tuple(_attribute(fn, "supported_dtypes", DEFAULT_DTYPES, _dtype_tuple, spec,
                              "a non-empty tuple of torch dtypes, e.g. (torch.float16,)"))
    precision = _attribute(fn, "precision", "ieee", lambda v: v in ("ieee", "tf32"), spec, '"ieee" or "tf32"')
    block = tuple(_attribute(fn, "block_shape", DEFAULT_BLOCK,
                             lambda v: isinstance(v, (tuple, list)) and len(v) == 3 and all(
                                 isinstance(x, int) and x > 0 for x in v), spec, "(BM, BN, BK), positive ints"))
    signature = signature or _attribute(fn, "signature", "plain", lambda v: v in SIGNATURES, spec,
                                        " or ".join(repr(s) for s in SIGNATURES))
    if signature not in SIGNATURES:
        raise KernelSpecError(f"kernel signature {signature!r}; expected one of {', '.join(SIGNATURES)}")
    expected_args = 6 if signature == "leetgpu" else 3
    try:
        inspect.signature(fn).bind(*range(expected_args))
    except TypeError:
        raise KernelSpecError(
            f"--gemm-kernel {spec!r}: {func}{inspect.signature(fn)} cannot take {expected_args} arguments; the "
            f"{signature} signature is " + ("solve(a, b, c, M, N, K)" if signature == "leetgpu" else "FUNC(a, b, c)")
        ) from None
    name = f"user:{func}"
    requirements = Requirements(contiguous=("a", "b", "c")) if signature == "leetgpu" else Requirements()
    variant_dtypes = {d: (d,) for d in dtypes}

    def launch(a, b, c):
        M, N, K = operands.check(variant, a, b, c)
        if signature == "leetgpu":
            fn(a, b, c, M, K, N)  # LeetGPU: A is M x N, B is N x K, C is M x K
        else:
            fn(a, b, c)

    variant = Variant(name=name, launch=launch, dtypes=variant_dtypes, precision=precision,
                      blocks={"cpu": (block,), "cuda": (block,)}, origin=f"user kernel {spec}",
                      requirements=requirements, description=f"{signature} signature")
    return variant
