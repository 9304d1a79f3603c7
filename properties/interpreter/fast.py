"""A faster Triton interpreter, with every result bit-identical to the plain one.

Most of the interpreter's time went to Triton's frontend, not to numpy: each `tl` operation (`a + b`,
`tl.load`, `x[:, None]`, ...) type-checks, broadcasts and casts its operands in Python before it calls
the builder, which does the arithmetic. What the frontend decides depends only on the operands' types
and the constant arguments, and a kernel runs the same operations on the same types in every program
and every K step. So:

  recipes   the first time a builtin runs on given argument types and constants (the key), the
            builder calls it makes are recorded; afterwards they are replayed, compiled into one
            straight-line function, and the result tensors are rebuilt with the recorded types. The
            builder methods are looked up at every call, so the interpreter fixes, the sanitizer and
            the scheduler see every call as before. Value-only steps whose results nothing uses are
            left out: integer + and * check for overflow in int64 and assert only with debug=True.
            A builtin whose result is not made of its operands and the builder's results, or whose
            arguments are not plain values and tensors, is never recorded: it always runs as is.
  patching  a launch patches ~180 builtins of `triton.language` onto the interpreter: the list is taken
            once, not by inspecting the modules at every launch, and `_get_np_dtype` is memoized.
  gc        what start-up built is frozen out of the garbage collector's full collections, which the
            interpreter's many short-lived objects keep triggering (they took 15% of a campaign).

`install()` runs at interpreter activation (after the fixes and the scheduler) and probes the result:
a probe kernel must give bit-identical outputs with and without, or start-up fails naming what
differed. GEMM_INTERPRETER_FAST=0 leaves the interpreter as it is; `switched(on)` turns the fast path
on or off in one process, to compare verdicts (properties/evaluation/verdict_identity.py).
"""
from __future__ import annotations

import atexit
import contextlib
import gc
import inspect
import os

import numpy as np
from greenlet import getcurrent

from gemm_fuzz.properties.interpreter import together

ENV = "GEMM_INTERPRETER_FAST"


class FastInterpreterError(RuntimeError):
    """The fast path cannot be installed, or its probe gives other results than the plain interpreter."""


class _Uncacheable(Exception):
    """An argument the recipe key cannot describe."""


# ---------------------------------------------------------------------------------------------------
# keys: what the frontend's decisions may depend on




def _type_key(ty) -> tuple:
    hit = _state.type_keys.get(id(ty))
    if hit is not None:
        return hit[1]
    tl = _state.tl
    if isinstance(ty, tl.block_type):
        key = ("block", _type_key(ty.element_ty), tuple(int(n) for n in ty.shape))
    elif isinstance(ty, tl.pointer_type):
        key = ("pointer", _type_key(ty.element_ty), ty.address_space, bool(ty.const))
    elif type(ty) is tl.dtype:
        key = ("dtype", ty.name)
    else:
        raise _Uncacheable
    if len(_state.type_keys) > 4096:
        _state.type_keys.clear()
    _state.type_keys[id(ty)] = (ty, key)
    return key


def _key(value, inputs: list):
    """A hashable description of one argument; tensors are appended to `inputs` (their handles are the
    recipe's operands) and described by type."""
    kind = type(value)
    if kind is _state.tensor:
        inputs.append(value)
        return _type_key(value.type)
    if kind is _state.constexpr:
        return ("C", _key(value.value, inputs))
    if value is None or kind is bool or kind is int or kind is str:
        return (kind.__name__, value)
    if kind is float:
        return ("float", value.hex())  # tells -0.0 from 0.0 and keeps NaN equal to itself
    if kind is tuple or kind is list:
        return (kind.__name__,) + tuple(_key(v, inputs) for v in value)
    if kind is slice:
        return ("slice", _key(value.start, inputs), _key(value.stop, inputs), _key(value.step, inputs))
    if isinstance(value, _state.tl.dtype):
        return ("type", _type_key(value))
    raise _Uncacheable


def _aliases(inputs: list) -> tuple:
    """For each tensor argument, the first argument that is the same tensor, and the first with the same
    handle: a recipe recorded on `x * x` must not be replayed on `x * y`. () when all differ."""
    if len({id(t.handle) for t in inputs}) == len(inputs):
        return ()
    return tuple((next(j for j, u in enumerate(inputs) if u is t),
                  next(j for j, u in enumerate(inputs) if u.handle is t.handle)) for t in inputs)


# ---------------------------------------------------------------------------------------------------
# recording and replaying


class _Recorder:
    """Stands in for the builder while a builtin runs for the first time: forwards every call and
    writes it down, with each handle argument named by the slot it came from."""

    def __init__(self, builder, inputs: list):
        self._builder = builder
        self.slots: dict[int, int] = {}
        for i, tensor in enumerate(inputs):
            self.slots.setdefault(id(tensor.handle), i)
        self.count = len(inputs)
        self.keep = [t.handle for t in inputs]  # no recorded handle's id is reused while recording
        self.steps: list = []
        self.ok = True

    def __getattr__(self, name):
        value = getattr(self._builder, name)
        if not callable(value):
            return value

        def call(*args, **kwargs):
            out = value(*args, **kwargs)
            self._write(name, args, kwargs, out)
            return out

        return call

    def _template(self, value):
        if isinstance(value, _state.handles):
            slot = self.slots.get(id(value))
            if slot is None:
                self.ok = False  # a handle made outside the recorded calls
            return _Slot(slot)
        if type(value) in (list, tuple):
            items = [self._template(v) for v in value]
            return type(value)(items)
        if not _constant(value):
            self.ok = False
        return value

    def _write(self, name, args, kwargs, out) -> None:
        args = tuple(self._template(a) for a in args)
        kwargs = {k: self._template(v) for k, v in kwargs.items()}
        outs = out if type(out) is tuple else (out,)
        handles = [o for o in outs if isinstance(o, _state.handles)]
        if handles and len(handles) != len(outs):
            self.ok = False
        slots = []
        for h in handles:
            self.slots[id(h)] = self.count
            slots.append(self.count)
            self.count += 1
            self.keep.append(h)
        if name.startswith("get_") and name.endswith("_ty") and not handles:
            return  # a type getter: its result is recorded as a constant where it is used
        self.steps.append(_Step(name, args, kwargs, slots if type(out) is tuple else slots[0] if slots else None))

    def recipe(self, result, inputs: list):
        if not self.ok:
            return None
        template = self._result(result, inputs)
        if template is None:
            return None
        return _Recipe(_live(self.steps, _result_slots(template)), len(inputs), template)

    def _result(self, result, inputs: list):
        if result is None:
            return ("none",)
        if type(result) is _state.tensor:
            for j, t in enumerate(inputs):
                if t is result:
                    return ("input", j)
            slot = None if result.handle is None else self.slots.get(id(result.handle))  # None: a store's
            if slot is None and result.handle is not None:
                return None
            attrs = {k: v for k, v in vars(result).items() if k != "handle"}
            return ("tensor", slot, attrs)
        if type(result) is tuple:
            parts = [self._result(r, inputs) for r in result]
            return None if any(p is None for p in parts) else ("tuple", parts)
        return None


def _has_slot(value) -> bool:
    if type(value) is _Slot:
        return True
    return type(value) in (list, tuple) and any(_has_slot(v) for v in value)


def _slots_in(value, found: set) -> set:
    if type(value) is _Slot:
        found.add(value.index)
    elif type(value) in (list, tuple):
        for v in value:
            _slots_in(v, found)
    elif type(value) is dict:
        for v in value.values():
            _slots_in(v, found)
    return found


def _result_slots(template) -> set:
    if template[0] == "tensor":
        return {template[1]} - {None}
    if template[0] == "tuple":
        return set().union(*(_result_slots(t) for t in template[1]))
    return set()


# Builder methods that only compute a value (and fail, if at all, on types alone, which a recipe fixes):
# a recipe drops them where nothing uses their result. Integer + and * are followed by an overflow
# check of this kind whose assertion is compiled out without debug=True: it is dropped whole.
_PURE = frozenset(
    [f"get_{t}" for t in ("int1", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                          "fp16", "bf16", "fp32", "fp64", "null_value", "all_ones_value")]
    + ["create_get_program_id", "create_get_num_programs", "create_make_range", "create_splat", "create_broadcast",
       "create_expand_dims", "create_reshape", "create_trans", "create_cat", "create_join", "create_split",
       "create_unsplat", "create_addptr", "create_select", "create_fma", "create_clampf", "create_dot", "cast_impl",
       "create_si_to_fp", "create_ui_to_fp", "create_fp_to_si", "create_fp_to_ui", "create_fp_ext",
       "create_fp_trunc", "create_int_cast", "create_fp_to_fp", "create_bitcast", "create_int_to_ptr",
       "create_ptr_to_int", "create_fneg", "create_fabs", "create_iabs", "create_floor", "create_ceil"]
    + [f"create_{op}" for op in ("fadd", "fmul", "fsub", "mul", "add", "sub", "shl", "lshr", "minsi",
                                 "minui", "minimumf", "minnumf", "maxsi", "maxui", "maximumf", "maxnumf", "and",
                                 "xor", "or", "umulhi")]
    + [f"create_icmp{c}" for c in ("SLE", "SLT", "SGE", "SGT", "ULE", "ULT", "UGE", "UGT", "EQ", "NE")]
    + [f"create_fcmp{c}" for c in ("OLT", "OGT", "OLE", "OGE", "OEQ", "ONE", "ULT", "UGT", "ULE", "UGE", "UEQ",
                                   "UNE")])


def _live(steps: list, needed: set) -> list:
    """The steps the result or a side effect needs, in order."""
    kept = []
    for step in reversed(steps):
        outs = step.out if type(step.out) is list else [] if step.out is None else [step.out]
        if step.name not in _PURE or any(o in needed for o in outs):
            kept.append(step)
            _slots_in(step.args, needed)
            _slots_in(step.kwargs, needed)
    return kept[::-1]


def _constant(value) -> bool:
    """Values a recipe may keep and pass again: immutable, and not a handle."""
    if value is None or type(value) in (bool, int, float, str):
        return True
    if isinstance(value, _state.tl.core.base_type):  # Triton types (dtype, block_type, pointer_type)
        return True
    if type(value) is _state.tl.core.tuple:  # a shape
        return all(_constant(v) for v in value.values)
    return type(value).__module__.startswith("triton._C")  # the IR's enums (precision, rounding, ...)


class _Slot:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


class _Step:
    __slots__ = ("name", "args", "kwargs", "out")

    def __init__(self, name, args, kwargs, out):
        self.name = name
        self.args = args
        self.kwargs = kwargs
        self.out = out  # slot of the handle it returns, a list of slots for a tuple of handles, or None


class _Recipe:
    """Recorded builder calls, compiled into one straight-line function `replay(inputs)`: each handle is a
    local, each constant a name bound to the recorded object, and each builder method is looked up at
    the call (the sanitizer re-patches them per launch)."""

    __slots__ = ("replay", "source")

    def __init__(self, steps: list, inputs: int, result):
        names: dict = {"_B": _state.builder, "_tensor": _new_tensor}
        lines = [f"    v{i} = inputs[{i}].handle" for i in range(inputs)]
        for step in steps:
            call = f"_B.{step.name}({_source(step.args, names, star=True)}"
            if step.kwargs:
                call += ", " + ", ".join(f"{k}={_source(v, names)}" for k, v in step.kwargs.items())
            call += ")"
            if type(step.out) is int:
                lines.append(f"    v{step.out} = {call}")
            elif step.out:  # a tuple of handles
                lines.append(f"    {', '.join(f'v{o}' for o in step.out)}, = {call}")
            else:
                lines.append(f"    {call}")
        lines.append(f"    return {_result_source(result, names)}")
        self.source = "def replay(inputs):\n" + "\n".join(lines)
        exec(compile(self.source, "<fast-path recipe>", "exec"), names)
        self.replay = names["replay"]


def _source(value, names: dict, star: bool = False) -> str:
    """Python source for an argument template: slots are locals, constants are bound names."""
    if type(value) is _Slot:
        return f"v{value.index}"
    if type(value) in (list, tuple) and _has_slot(value):
        items = ", ".join(_source(v, names) for v in value)
        if star:
            return items
        return f"[{items}]" if type(value) is list else f"({items},)"
    if star:
        return ", ".join(_source(v, names) for v in value)
    name = f"c{len(names)}"
    names[name] = value
    return name


def _result_source(template, names: dict) -> str:
    kind = template[0]
    if kind == "tensor":
        name = f"c{len(names)}"
        names[name] = template[2]
        return f"_tensor({name}, {'None' if template[1] is None else f'v{template[1]}'})"
    if kind == "input":
        return f"inputs[{template[1]}]"
    if kind == "none":
        return "None"
    return "(" + "".join(_result_source(t, names) + ", " for t in template[1]) + ")"


def _new_tensor(attrs: dict, handle):
    """A tl.tensor of the recorded type (its attributes copied) around a new handle."""
    tensor = _state.tensor.__new__(_state.tensor)
    tensor.__dict__.update(attrs)
    tensor.handle = handle
    return tensor


_UNCACHEABLE = object()
_MAX_RECIPES = 20000  # distinct (builtin, argument types, constants); past it the cache starts over


class _FastPath:
    """Everything the fast path keeps, in one object: what it learnt, and what it installed."""

    def __init__(self):
        self.active = False  # installed (wrappers left in triton.language.core after uninstall() call builtins as is)
        # greenlet -> the semantic its recording runs with. Per greenlet: a recorded builtin may reach a
        # scheduler switch point (an atomic), and other programs run their own builtins meanwhile.
        self.recording: dict = {}
        self.type_keys: dict[int, tuple[object, tuple]] = {}  # id(type) -> (type, key); the type is kept alive
        self.recipes: dict = {}  # (builtin, argument keys, constants) -> recipe, or _UNCACHEABLE
        self.np_dtypes: dict[int, tuple[object, np.dtype]] = {}  # id(Triton type) -> (type, numpy dtype)
        self.wrappers: dict = {}  # builtin -> the function patched in its place
        self.builtins: dict = {}  # module or class -> [(name, builtin)], taken once
        self.saved: dict = {}  # (owner, name) -> what the fast path replaced there
        # Triton's, taken at installation: triton.language, the interpreter module, tl.tensor,
        # tl.constexpr, the interpreter's handle classes, its builder and a semantic over that builder
        self.tl = self.interp = self.tensor = self.constexpr = self.builder = self.semantic = None
        self.handles: tuple = ()
        self.header: str | None = None  # the header line, once installed (or found turned off)
        self.probe = None  # the probe kernel, built on first use


_state = _FastPath()


def _run(member, args, kwargs):
    """One call of a builtin: replayed from its recipe, recorded, or run as is."""
    if not _state.active:
        return member(*args, **kwargs, _semantic=_state.semantic)
    if _state.recording:
        semantic = _state.recording.get(getcurrent())
        if semantic is not None:  # inside a builtin being recorded: its builder calls are the outer recipe's
            return member(*args, **kwargs, _semantic=semantic)
    inputs: list = []
    try:
        key = (member, tuple([_key(a, inputs) for a in args]),
               tuple([(k, _key(v, inputs)) for k, v in kwargs.items()]) if kwargs else (),
               _aliases(inputs) if len(inputs) > 1 else ())
    except _Uncacheable:
        return member(*args, **kwargs, _semantic=_state.semantic)
    recipe = _state.recipes.get(key)
    if recipe is None:
        return _record(key, member, args, kwargs, inputs)
    if recipe is _UNCACHEABLE:
        return member(*args, **kwargs, _semantic=_state.semantic)
    return recipe.replay(inputs)


def _record(key, member, args, kwargs, inputs: list):
    recorder = _Recorder(_state.builder, inputs)
    before = [(t.handle, t.type) for t in inputs]
    me = getcurrent()
    _state.recording[me] = type(_state.semantic)(recorder)
    try:
        result = member(*args, **kwargs, _semantic=_state.recording[me])
    finally:
        del _state.recording[me]
    unchanged = all(t.handle is h and t.type is ty for t, (h, ty) in zip(inputs, before))
    recipe = recorder.recipe(result, inputs) if unchanged else None
    if len(_state.recipes) >= _MAX_RECIPES:
        _state.recipes.clear()
    _state.recipes[key] = recipe if recipe is not None else _UNCACHEABLE
    return result




def _get_np_dtype(tt_dtype):
    """The interpreter's _get_np_dtype, memoized (it builds its table at every call)."""
    hit = _state.np_dtypes.get(id(tt_dtype))
    if hit is not None:
        return hit[1]
    result = _state.saved[(_state.interp, "_get_np_dtype")](tt_dtype)
    if len(_state.np_dtypes) > 4096:
        _state.np_dtypes.clear()
    _state.np_dtypes[id(tt_dtype)] = (tt_dtype, result)
    return result


# ---------------------------------------------------------------------------------------------------
# patching triton.language per launch




def _wrapper(member):
    wrapper = _state.wrappers.get(member)
    if wrapper is None:
        def wrapper(*args, **kwargs):
            if "_semantic" in kwargs:
                kwargs = {k: v for k, v in kwargs.items() if k != "_semantic"}
            return _run(member, args, kwargs)

        _state.wrappers[member] = wrapper
    return wrapper


def _patch_attr(obj, name, member, builder, scope):
    scope.set_attr(obj, name, _wrapper(member))


def _patch_builtin(pkg, builder, scope):
    members = _state.builtins.get(pkg)
    if members is None:
        members = _state.builtins[pkg] = _builtins_of(pkg)
    present = vars(pkg)
    for name, member in members:
        wrapper = _wrapper(member)
        if present.get(name) is not wrapper:  # a device-function call inside a launch finds them patched
            scope.set_attr(pkg, name, wrapper)


def _builtins_of(pkg) -> list:
    """The builtins of a module or class, by name. A device-function call patches `triton.language.core`
    and never restores it, so a builtin there may stand behind the interpreter's patched lambda (its
    `member` default) or behind one of our wrappers."""
    found = []
    unwrap = {id(wrapper): member for member, wrapper in _state.wrappers.items()}
    for name, value in inspect.getmembers(pkg):
        if id(value) in unwrap:
            value = unwrap[id(value)]
        elif (getattr(value, "__name__", None) == "<lambda>"
              and getattr(value, "__module__", None) == _state.interp.__name__):
            value = (value.__kwdefaults__ or {}).get("member")
        if _state.tl.core.is_builtin(value):
            found.append((name, value))
    return found


# ---------------------------------------------------------------------------------------------------
# installation




def enabled_by_environment() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def install() -> str:
    """Install the fast path on the interpreter (unless GEMM_INTERPRETER_FAST=0), probe it, and return
    the header line. Idempotent."""
    if _state.header is None:
        if enabled_by_environment():
            _install()
            together.install()
            _state.header = (f"gemm interpreter fast path: on (builtins replayed from recipes keyed by argument types, "
                             "a launch's programs run together where they share no memory and take the same "
                             f"branches, start-up objects frozen out of the garbage collector; {ENV}=0 turns it off)")
        else:
            _state.header = f"gemm interpreter fast path: off ({ENV}=0)"
    return _state.header


@contextlib.contextmanager
def switched(on: bool):
    """The fast path on or off inside the block, as it was after it: to compare verdicts in one process."""
    was = installed()
    if on and not was:
        _install()
    elif not on and was:
        uninstall()
    try:
        with together.switched(on):
            yield
    finally:
        if was and not installed():
            _install()
        elif not was and installed():
            uninstall()


def _install() -> None:
    import triton
    import triton.language as tl
    from triton.language.semantic import TritonSemantic
    from triton.runtime import interpreter as interp

    missing = [name for name in ("_patch_attr", "_patch_builtin", "interpreter_builder", "TensorHandle")
               if not hasattr(interp, name)]
    if missing:
        raise FastInterpreterError(f"the interpreter fast path cannot install on Triton {triton.__version__}: its "
                                   f"interpreter has no {', '.join(missing)} (properties/interpreter/fast.py "
                                   "needs them)")
    _state.tl, _state.interp, _state.tensor, _state.constexpr = tl, interp, tl.tensor, tl.constexpr
    _state.handles = tuple(getattr(interp, name) for name in ("TensorHandle", "TensorDescHandle", "BlockPointerHandle")
                     if hasattr(interp, name))
    _state.builder = interp.interpreter_builder
    _state.semantic = TritonSemantic(_state.builder)
    expected = probe_results()
    for pkg in (tl, tl.core, tl.tensor, tl.math, tl.core.tensor_descriptor_base):
        _state.builtins[pkg] = _builtins_of(pkg)
    for name, replacement in (("_patch_attr", _patch_attr), ("_patch_builtin", _patch_builtin),
                              ("_get_np_dtype", _get_np_dtype)):
        _state.saved[(interp, name)] = getattr(interp, name)
        setattr(interp, name, replacement)
    for name, member in _state.builtins[tl.core]:  # the lambdas earlier device-function calls left there
        current = tl.core.__dict__.get(name)
        if current is not member and current is not _state.wrappers.get(member):
            _state.saved[(tl.core, name)] = current
            setattr(tl.core, name, _wrapper(member))
    _state.active = True
    try:
        for attempt in ("recording", "replaying"):
            got = probe_results()
            for what, want in expected.items():
                if got[what].dtype != want.dtype or got[what].tobytes() != want.tobytes():
                    raise FastInterpreterError(
                        f"the interpreter fast path changes results on Triton {triton.__version__}: {what} "
                        f"differs from the plain interpreter's while {attempt} (properties/interpreter/fast.py)")
    except BaseException:
        uninstall()
        raise
    # What start-up built (torch, Triton, Hypothesis) lives as long as the process: out of the garbage
    # collector's full collections, which the interpreter's many short-lived objects keep triggering.
    gc.freeze()
    atexit.register(gc.unfreeze)  # at exit they are collected as before (nanobind reports what is not)


def uninstall() -> None:
    """Put the interpreter back as it was."""
    _state.active = False
    for (owner, name), original in _state.saved.items():
        setattr(owner, name, original)
    _state.saved.clear()
    _state.recipes.clear()
    _state.np_dtypes.clear()


def installed() -> bool:
    return bool(_state.saved)


# ---------------------------------------------------------------------------------------------------
# the probe


def probe_results() -> dict[str, np.ndarray]:
    """Run the probe kernels (a masked tiled GEMM over several programs and K steps, with integer and
    float arithmetic, casts, a reduction and a where) and return their outputs by name."""
    import torch

    kernel = _probe_kernel()
    g = torch.Generator().manual_seed(0)
    out = {}
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.int8):
        a = (torch.randn(19, 37, generator=g) * 4).to(dtype)
        b = (torch.randn(37, 23, generator=g) * 4).to(dtype)
        c = torch.full((19, 23), -1, dtype=dtype)
        rows = torch.zeros(19, dtype=torch.float32)
        kernel[(2, 2)](a, b, c, rows, 19, 23, 37, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                       c.stride(0), c.stride(1), BM=16, BN=16, BK=16)
        out[f"{dtype} C"] = c.float().numpy()
        out[f"{dtype} row sums"] = rows.numpy()
    return out




def _probe_kernel():
    if _state.probe is None:
        import triton
        import triton.language as tl

        @triton.jit
        def fast_path_probe(a_ptr, b_ptr, c_ptr, rows_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
            pid_m = tl.program_id(0)
            pid_n = tl.program_id(1)
            offs_m = pid_m * BM + tl.arange(0, BM)
            offs_n = pid_n * BN + tl.arange(0, BN)
            offs_k = tl.arange(0, BK)
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(0, K, BK):
                a = tl.load(a_ptr + offs_m[:, None] * sam + (k + offs_k)[None, :] * sak,
                            mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0)
                b = tl.load(b_ptr + (k + offs_k)[:, None] * sbk + offs_n[None, :] * sbn,
                            mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
                acc += tl.dot(a, b, input_precision="ieee")
            acc = tl.where(acc > 1.5, acc * 0.5 - 1, acc)
            c = acc.to(c_ptr.dtype.element_ty)
            tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, c,
                     mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
            tl.atomic_add(rows_ptr + offs_m, tl.sum(acc, axis=1), mask=offs_m < M)

        _state.probe = fast_path_probe
    return _state.probe
