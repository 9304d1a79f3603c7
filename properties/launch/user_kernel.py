"""Bring your own kernel: load `PATH.py:FUNC` (or `module:FUNC`) as a Variant the whole suite tests.

FUNC(a, b, c) writes a @ b into the preallocated c (a is M x K, b is K x N, c is M x N, any strides, on
the backend's device, c of an output dtype the contract accepts for the inputs). A contract that
declares an operation (kernels/operation.py: an epilogue, a batch) has FUNC take its extras by
keyword. What FUNC takes, computes and needs is its contract (`kernels.contract`, a decorator on
FUNC): dtypes and output dtypes, precision, blocks, configurations, preconditions, split-K into C,
determinism, signature, operation.
An `@triton.autotune`d kernel that FUNC launches brings its own configuration space: each example
runs one configuration of its list, pinned, untimed (`kernels.autotuning.pinned`).

The file is imported only after the backend is chosen, so a plain @triton.jit kernel inside it runs
in the interpreter unchanged. The wrapper validates operands like the built-in launchers, so bad
input is refused before the user's function is called.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import inspect
import sys
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import KernelInterface

from gemm_fuzz.kernels import autotuning, contracts, operands
from gemm_fuzz.kernels.contracts import SIGNATURES
from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.properties.judge.failures import NotWritten
from gemm_fuzz.properties.launch import kernel_spec
from gemm_fuzz.properties.model.cases import raw, signed, unwritten_bits
from gemm_fuzz.reference.formats import by_dtype

# attributes FUNC once declared its facts with; the contract holds them now
_RETIRED = {"supported_dtypes": "dtypes={torch.float16: (torch.float16,), ...}", "precision": "precision=...",
            "block_shape": "blocks=(BM, BN, BK)", "signature": "signature=..."}
# what an autotuner's configuration may call the tile sizes
_BLOCK_NAMES = {"BM": ("BM", "BLOCK_M", "BLOCK_SIZE_M"), "BN": ("BN", "BLOCK_N", "BLOCK_SIZE_N"),
                "BK": ("BK", "BLOCK_K", "BLOCK_SIZE_K")}
_LOADED: dict[str, tuple[Variant, KernelRef]] = {}  # the user kernels loaded in this process, by identity
_DECLARED: dict[str, contracts.Contract] = {}  # and the contract each declares (with the signature given), by identity
_SEEN: dict[Path, str | None] = {}  # the files of the loaded kernels' trees, with their contents' digests when loaded
_MODULE_PREFIX = "gemm_user_kernel_"  # a kernel's file imported by path is the module of this name (and a digest)


class KernelSpecError(ValueError):
    """A --gemm-kernel specification that cannot be loaded."""


@dataclass(frozen=True)
class KernelRef:
    """Where a user's kernel lives, resolved: enough for another process to load the same kernel."""

    spec: str  # /absolute/path.py:FUNC, or module:FUNC
    signature: str | None  # as given on the command line (None: the function's own attribute)
    path: str  # the file that defines it
    digest: str  # 8 hex digits of a sha256 of the file's content: what a repro script compares to say it changed
    where: str  # the file's path inside its repository (or its name, outside one): with FUNC, its identity

    @property
    def func(self) -> str:
        return self.spec.rsplit(":", 1)[1]

    def to_dict(self) -> dict:
        """What RunSettings.kernel holds: enough for a worker or a repro script to load the same kernel."""
        return dataclasses.asdict(self)

    @property
    def name(self) -> str:
        """The kernel's identity: its function and where its file is in its repository, in 8 hex digits.
        Two kernels named `matmul` in two files never share it; one kernel keeps it across edits (a failure
        found before a fix is the first example tried after it) and across checkouts (the derandomized
        `ci` examples, seeded by the test's id, are the same on every machine)."""
        where = hashlib.sha256(self.where.encode()).hexdigest()[:8]
        return f"user:{Path(self.path).stem}.{self.func}#{where}"


_REPOSITORY_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg", "tox.ini")


def _where(path: Path) -> str:
    """`path` relative to the nearest directory above it that looks like a repository's root, else its name."""
    for root in path.parents:
        if any((root / marker).exists() for marker in _REPOSITORY_MARKERS):
            return path.relative_to(root).as_posix()
    return path.name


def _repository(path: Path) -> Path:
    """The directory `_where` measures from: the nearest repository's root above `path`, else its directory."""
    where = _where(path)
    return path.parent if where == path.name else Path(str(path)[: -len(where)])


def _of_tree(module, root: Path) -> Path | None:
    """The file a module of the user's tree under `root` comes from (not the suite's, not an installed
    package's); None for any other module."""
    file = getattr(module, "__file__", None)
    if not (file and file.endswith(".py") and Path(file).is_absolute()):  # torch._ops says "_ops.py"
        return None
    if getattr(module, "__name__", "").startswith("gemm_fuzz."):  # the suite, even when installed from root
        return None
    path = _resolved(file)
    return path if path.is_relative_to(root) and "site-packages" not in path.parts and path.is_file() else None


@functools.cache
def _resolved(file: str) -> Path:
    return Path(file).resolve()  # 50 us each, for the thousand modules tree() looks at


def tree(kernel_file: Path) -> list[Path]:
    """The kernel's file and the files of its tree (its repository, or its directory) that the modules
    loaded in this process come from: what an edit of the kernel may change."""
    root = _repository(kernel_file)
    return sorted({kernel_file} | {p for m in list(sys.modules.values()) if (p := _of_tree(m, root)) is not None})


def _contents(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def refresh() -> bool:
    """Whether a file of a loaded kernel's tree changed, in content, since it was loaded (or last
    refreshed). If one did, the loaded kernels and every module of their trees are dropped, so that
    loading imports them as they are now (a long-lived process: watch mode and its workers); a file
    saved unchanged keeps them, compiled."""
    files = {f for _, ref in _LOADED.values() for f in tree(Path(ref.path))}
    changed = any(f in _SEEN and _contents(f) != _SEEN[f] for f in files)
    if changed:
        roots = {_repository(Path(ref.path)) for _, ref in _LOADED.values()}
        for name, module in list(sys.modules.items()):
            if name.startswith(_MODULE_PREFIX) or any(_of_tree(module, root) is not None for root in roots):
                del sys.modules[name]
        _LOADED.clear()
        _DECLARED.clear()
        _SEEN.clear()
    else:
        _SEEN.update({f: _contents(f) for f in files if f not in _SEEN})
    return changed


def _digest(path: Path) -> str:
    """What the file holds, in 8 hex digits."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:8]


def _exec_file(spec: str, path: Path):
    name = f"{_MODULE_PREFIX}{path.stem}_{hashlib.sha256(f'{path}:{_digest(path)}'.encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, str(path.parent))  # so the file can import its neighbours
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as e:
        raise KernelSpecError(f"{spec!r}: {e.filename}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # noqa: BLE001  the user's module raised while being imported
        raise KernelSpecError(f"{spec!r}: importing {_where_raised(e, path)} raised "
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
    try:
        where, func, path = kernel_spec.split(spec)
    except ValueError as e:
        raise KernelSpecError(str(e)) from None
    if not func.isidentifier():
        raise KernelSpecError(f"{spec!r}: {func!r} is not a function name")
    if path is not None:
        if not path.is_file():
            raise KernelSpecError(f"{spec!r}: no file {path}")
        module, canonical = _exec_file(spec, path), kernel_spec.canonical(spec)
    else:
        try:
            module = importlib.import_module(where)
        except SyntaxError as e:
            raise KernelSpecError(f"{spec!r}: {e.filename}:{e.lineno}: syntax error: {e.msg}") from None
        except ImportError as e:
            hint = ""
            local = Path.cwd() / (where.replace(".", "/") + ".py")
            if isinstance(e, ModuleNotFoundError) and e.name == where.split(".")[0] and local.is_file():
                # the `pytest` and `gemm-fuzz` commands do not put the current folder on sys.path
                hint = (f"; {local.name} is in this folder, which is not on Python's import path: pass it as a "
                        f"path ({where.replace('.', '/')}.py:{func}), or put the folder on it (PYTHONPATH=., or "
                        "`python -m pytest`, which does)")
            raise KernelSpecError(f"{spec!r}: cannot import module {where!r}: {e}{hint}") from None
        except Exception as e:  # noqa: BLE001
            raise KernelSpecError(f"{spec!r}: importing module {where!r} raised "
                                  f"{type(e).__name__}: {e}") from None
        path, canonical = Path(module.__file__).resolve(), spec
    if not hasattr(module, func):
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise KernelSpecError(f"{spec!r}: {where} has no {func!r}; it defines {', '.join(defined)}")
    fn = getattr(module, func)
    if isinstance(fn, KernelInterface):  # the kernel itself, not the Python function that launches it
        kind = "an @triton.autotune'd kernel" if isinstance(fn, Autotuner) else "a @triton.jit kernel"
        launchers = sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_")
                           and getattr(v, "__module__", None) == module.__name__)
        raise KernelSpecError(f"{spec!r}: {func} is {kind}; pass the Python function that launches it, called as "
                              "FUNC(a, b, c)" + (f" (in {where}: {', '.join(launchers)})" if launchers else ""))
    if not callable(fn):
        raise KernelSpecError(f"{spec!r}: {func} is a {type(fn).__name__}, not a function")
    return fn, func, canonical, path


def _autotuner(fn, spec: str) -> Autotuner | None:
    """The @triton.autotune'd kernel FUNC launches: a global of its module that FUNC names, or a helper
    of the same module that FUNC calls does."""
    module_globals = getattr(fn, "__globals__", {})
    found, seen, codes = {}, set(), [getattr(fn, "__code__", None)]
    while codes:
        code = codes.pop()
        if code is None or code in seen:
            continue
        seen.add(code)
        codes += [c for c in code.co_consts if inspect.iscode(c)]  # lambdas and nested functions
        for name in code.co_names:
            value = module_globals.get(name)
            if isinstance(value, Autotuner):
                found[name] = value
            elif inspect.isfunction(value) and value.__globals__ is module_globals:
                codes.append(value.__code__)
    if len(found) > 1:
        raise KernelSpecError(f"{spec!r}: {fn.__name__} launches {len(found)} autotuned kernels "
                              f"({', '.join(sorted(found))}); the suite pins one configuration list")
    return next(iter(found.values()), None)


def _space(tuner: Autotuner, blocks: tuple[int, int, int]) -> tuple[list[dict], set[str]]:
    """The autotuner's configurations as the registry's dicts (BM, BN, BK added where the kernel names
    its tiles otherwise), and the keys the autotuner itself sets."""
    space, keys = [], set()
    for config in tuner.configs:
        values = autotuning.as_dict(config)
        keys |= set(values)
        tiles = {}
        for name, aliases in _BLOCK_NAMES.items():
            tiles[name] = next((values[a] for a in aliases if a in values), blocks["MNK".index(name[1])])
        space.append({**values, **tiles})
    return space, keys


def load(spec: str, signature: str | None = None) -> Variant:
    """The user's kernel as a Variant named by its identity (`KernelRef.name`); registered in this
    process so `loaded(name)` finds it. `signature` (from the command line) overrides the contract's."""
    fn, func, canonical, path = _import(spec)
    ref = KernelRef(canonical, signature, str(path), _digest(path), _where(path))
    if ref.name in _LOADED and _LOADED[ref.name][1] == ref:  # an edited file is loaded again
        return _LOADED[ref.name][0]
    retired = [n for n in _RETIRED if n in getattr(fn, "__dict__", {})]
    if retired:
        raise KernelSpecError(f"{spec!r}: {func}.{retired[0]} is no longer read; declare it in the "
                              f"contract: @gemm_fuzz.kernels.contract({_RETIRED[retired[0]]}) on {func}")
    if signature is not None and signature not in SIGNATURES:
        raise KernelSpecError(f"kernel signature {signature!r}; expected one of {', '.join(SIGNATURES)}")
    declared = contracts.of(fn)
    if signature is not None:
        declared = replace(declared, signature=signature)
    tuner = _autotuner(fn, spec)
    if tuner is not None and declared.configs:
        raise KernelSpecError(f"{spec!r}: {func} declares configs and launches an autotuned kernel; "
                              "the autotuner's list is its configuration space, so leave configs out")
    configs, tuner_keys = _space(tuner, declared.blocks) if tuner is not None else (declared.configs, set())
    leetgpu = declared.signature == "leetgpu"
    names = declared.operation.keywords()  # the extras, by the keywords FUNC takes them as
    if not binds(fn, leetgpu, names, bool(declared.configs)):
        raise KernelSpecError(
            f"{spec!r}: {func}{inspect.signature(fn)} cannot be called as "
            f"{expected_call(leetgpu, names, bool(declared.configs))} (the {declared.signature} signature"
            + (", with declared configs" if declared.configs else "")
            + (f", computing {declared.operation.describe()}" if names else "") + ")")
    call = caller(fn, func, leetgpu, names, bool(declared.configs), tuner, tuner_keys)

    def launch(a, b, c, config=None, **extras):
        M, N, K = operands.check(variant, a, b, c, extras)
        call(a, b, c, (M, N, K), variant.config(*operands.device_and_dtype(a), config), extras)

    described = f"{declared.signature} signature" + (f", autotuned over {len(configs)} configurations"
                                                     if tuner is not None else "")
    try:
        variant = declared.variant(ref.name, launch, configs, f"user kernel {spec}", described)
    except ValueError as e:
        raise KernelSpecError(f"{spec!r}: {e}") from None
    _LOADED[ref.name] = (variant, ref)
    _DECLARED[ref.name] = declared
    _SEEN.update({f: _contents(f) for f in tree(Path(ref.path))})  # refresh() compares with these (path: resolved)
    return variant


def expected_call(leetgpu: bool, names: dict, takes_config: bool) -> str:
    """How the suite calls FUNC, in words: `FUNC(a, b, c, *, bias, config)`, LeetGPU's `solve(...)`."""
    call = "solve(a, b, c, M, N, K)" if leetgpu else "FUNC(a, b, c)"
    keywords = [*names.values(), *(["config"] if takes_config else [])]
    if names:  # the extras by keyword
        return call[:-1] + ", *, " + ", ".join(keywords) + ")"
    return call[:-1] + ", config)" if takes_config else call


def binds(fn, leetgpu: bool, names: dict, takes_config: bool) -> bool:
    """Can FUNC be called as `expected_call` says?"""
    keywords = {**{k: None for k in names.values()}, **({"config": None} if takes_config else {})}
    try:
        inspect.signature(fn).bind(*range(6 if leetgpu else 3), **keywords)
    except (TypeError, ValueError):
        return False
    return True


def caller(fn, func: str, leetgpu: bool, names: dict, takes_config: bool, tuner: Autotuner | None,
           tuner_keys: set[str]):
    """`call(a, b, c, (M, N, K), config, extras)`: FUNC called as the suite calls it, with the extras by the
    keywords it takes them as, `config=` where it takes one, an autotuned kernel pinned to `config`; a
    FUNC that returns its result instead of writing c is told so."""

    def call(a, b, c, dims, config, extras):
        M, N, K = dims
        args = (a, b, c, M, K, N) if leetgpu else (a, b, c)  # LeetGPU: A is M x N, B is N x K, C is M x K
        given = {names[e]: v for e, v in extras.items()}
        if tuner is not None:
            with autotuning.pinned(tuner, {k: v for k, v in config.items() if k in tuner_keys}):
                returned = fn(*args, **given)
        elif takes_config:
            returned = fn(*args, config=config, **given)
        else:
            returned = fn(*args, **given)
        if isinstance(returned, torch.Tensor) and isinstance(c, torch.Tensor):
            _returned_instead_of_writing(func, returned, c)

    return call


def _returned_instead_of_writing(func: str, returned: torch.Tensor, c: torch.Tensor) -> None:
    """FUNC returned a tensor of its own and left every element of the c it was given at the suite's
    pre-fill: the mistake of a FUNC written as `return kernel_output`, said as such."""
    if c.numel() == 0 or (returned.numel() and returned.untyped_storage().data_ptr() == c.untyped_storage().data_ptr()):
        return
    if not bool((raw(c) == signed(unwritten_bits(by_dtype(c.dtype)), c.element_size())).all()):
        return
    raise NotWritten(f"{func} returned a {str(returned.dtype).removeprefix('torch.')} tensor of shape "
                     f"{tuple(returned.shape)} and wrote nothing into the c it was given: the suite reads that c, "
                     "as torch's out= functions do; write the result into c (c.copy_(result), or launch the kernel "
                     "with c as its output)", index=(0,) * c.dim(), count=c.numel(), total=c.numel(), operand="C")


def loaded(name: str) -> tuple[Variant, KernelRef] | None:
    """A user kernel loaded in this process, by identity."""
    return _LOADED.get(name)


def declared(name: str) -> contracts.Contract | None:
    """The contract a user kernel loaded in this process declares (its signature the one it is called
    with), by identity: what a saved case records of it (properties/checks/saved_case.py)."""
    return _DECLARED.get(name)
