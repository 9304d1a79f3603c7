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

import hashlib
import importlib
import importlib.util
import inspect
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

from kernels import operands
from kernels.registry import Requirements, Variant

DEFAULT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DEFAULT_BLOCK = (16, 32, 16)
SIGNATURES = ("plain", "leetgpu")


class KernelSpecError(ValueError):
    """A --gemm-kernel specification that cannot be loaded."""


@dataclass(frozen=True)
class KernelRef:
    """Where a user's kernel lives, resolved: enough for another process to load the same kernel."""

    spec: str  # /absolute/path.py:FUNC, or module:FUNC
    signature: str | None  # as given on the command line (None: the function's own attribute)
    path: str  # the file that defines it
    digest: str  # the first 8 hex digits of the file's sha256 (a repro says when it changed)

    @property
    def func(self) -> str:
        return self.spec.rsplit(":", 1)[1]

    @property
    def name(self) -> str:
        """The kernel's identity: its file (where it is and what it holds) and function, so two kernels
        never share one."""
        where = hashlib.sha256(f"{self.path}\n{self.digest}".encode()).hexdigest()[:8]
        return f"user:{Path(self.path).stem}.{self.func}#{where}"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:8]


def _exec_file(spec: str, path: Path):
    name = f"gemm_user_kernel_{path.stem}_{hashlib.sha256(f'{path}:{_digest(path)}'.encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, str(path.parent))  # so the file can import its neighbours
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as e:
        raise KernelSpecError(f"--gemm-kernel {spec!r}: {e.filename}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # noqa: BLE001  the user's module raised while being imported
        raise KernelSpecError(f"--gemm-kernel {spec!r}: importing {_where_raised(e, path)} raised "
                              f"{type(e).__name__}: {e}") from None
    finally:
        sys.path.remove(str(path.parent))
    sys.modules[name] = module
    return module


def _where_raised(error: BaseException, path: Path) -> str:
    """file:line of the deepest frame of the user's file in an exception's traceback."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path]
    return f"{path}:{frames[-1].lineno}" if frames else str(path)


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
        module, canonical = _exec_file(spec, path), f"{path}:{func}"
    else:
        try:
            module = importlib.import_module(where)
        except SyntaxError as e:
            raise KernelSpecError(f"--gemm-kernel {spec!r}: {e.filename}:{e.lineno}: syntax error: {e.msg}") from None
        except ImportError as e:
            raise KernelSpecError(f"--gemm-kernel {spec!r}: cannot import module {where!r}: {e}") from None
        except Exception as e:  # noqa: BLE001
            raise KernelSpecError(f"--gemm-kernel {spec!r}: importing module {where!r} raised "
                                  f"{type(e).__name__}: {e}") from None
        path, canonical = Path(module.__file__).resolve(), spec
    if not hasattr(module, func):
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise KernelSpecError(f"--gemm-kernel {spec!r}: {where} has no {func!r}; it defines {', '.join(defined)}")
    fn = getattr(module, func)
    if not callable(fn):
        raise KernelSpecError(f"--gemm-kernel {spec!r}: {func} is a {type(fn).__name__}, not a function")
    return fn, func, canonical, path


def _attribute(fn, name, default, valid, spec: str, expected: str):
    value = getattr(fn, name, default)
    if not valid(value):
        raise KernelSpecError(f"--gemm-kernel {spec!r}: {name} = {value!r}; expected {expected}")
    return value


def _dtype_tuple(value) -> bool:
    return isinstance(value, (tuple, list)) and bool(value) and all(isinstance(d, torch.dtype) for d in value)


_LOADED: dict[str, tuple[Variant, KernelRef]] = {}


def load(spec: str, signature: str | None = None) -> Variant:
    """The user's kernel as a Variant named by its identity (`KernelRef.name`); registered in this
    process so `loaded(name)` finds it."""
    fn, func, canonical, path = _import(spec)
    ref = KernelRef(canonical, signature, str(path), _digest(path))
    if ref.name in _LOADED:
        return _LOADED[ref.name][0]
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
    name = ref.name
    requirements = Requirements(contiguous=("a", "b", "c")) if signature == "leetgpu" else Requirements()
    variant_dtypes = {d: (d,) for d in dtypes}

    def launch(a, b, c, config=None):
        M, N, K = operands.check(variant, a, b, c)
        if signature == "leetgpu":
            fn(a, b, c, M, K, N)  # LeetGPU: A is M x N, B is N x K, C is M x K
        else:
            fn(a, b, c)

    variant = Variant(name=name, launch=launch, dtypes=variant_dtypes, precision=precision,
                      configs={device: (dict(zip(("BM", "BN", "BK"), block)),) for device in ("cpu", "cuda")},
                      origin=f"user kernel {spec}",
                      requirements=requirements, description=f"{signature} signature")
    _LOADED[name] = (variant, ref)
    return variant


def loaded(name: str) -> tuple[Variant, KernelRef] | None:
    """A user kernel loaded in this process, by identity."""
    return _LOADED.get(name)
