"""A launch's programs run together, as one program over a leading axis of program ids, where that
gives the memory the programs would leave one by one.

Triton's interpreter runs a launch program after program; each program makes the same few dozen
builder calls per K step, on small blocks, so a launch of 40 programs costs 40 times the Python
around every numpy call. Here every handle that depends on the program id carries a leading axis of
size P (the launch's program count, in program-id order): `tl.program_id` gives each program's id,
elementwise arithmetic, casts, loads and stores broadcast over it, shape ops (splat, broadcast,
expand_dims, reshape, trans, cat, join, split) keep it in front, and everything else (tl.dot,
dot_scaled, reductions and scans, gather, the transcendental functions) runs per program on its
slice, through the same code as one by one. Handles that no program id reached stay as they are.

The result is the memory the programs would leave one by one, in any order, provided they share none:
no byte one program stores is loaded or stored by another (checked exactly at the end, over every
active lane, from what the launch loaded and stored), and every program takes the same branch at
each Python `if`, `while` and `range` on a tensor. Otherwise, or at anything the lockstep run does
not model (an atomic, a volatile load, a device print, a tensor descriptor, an access outside the
launch's tensor arguments, any exception), the memory the launch wrote is put back, what the
sanitizer recorded is forgotten, and the programs run one by one as before: so a kernel's failure
(an out-of-bounds lane, a data race, a deadlock, an assertion) is found and reported by the same code,
with the same program id and message. Programs that share no memory are what the race detector
accepts without a happens-before chain, so it has nothing to report; the scheduler's drawn start order
is drawn as it would have been (schedule.py).

A kernel whose programs never run together (their branches differ, they use atomics) stops being
tried after a few launches. Installed with the fast path (fast.py; GEMM_INTERPRETER_FAST=0 turns both
off) and probed at start-up: a probe kernel must leave bit-identical outputs together and one by one.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools

import numpy as np

from gemm_fuzz.properties.judge.failures import chain

# at most this many programs run together (each handle holds P blocks) ...
MAX_PROGRAMS = 512
# ... and at most this many elements in one handle (all programs' blocks)
MAX_ELEMENTS = 1 << 22
# a kernel that could not run together this many times (and never could) is run one by one from then on
GIVE_UP_AFTER = 3
# an output is saved before its first store, to be put back if the programs then run one by one
MAX_SAVED_BYTES = 1 << 28
# the written bytes of a group of nearby stores are tracked in one array over their span; a wider span
# is run one by one
MAX_WRITTEN_SPAN = 1 << 24


_MISSING = object()


class _Apart(Exception):
    """The programs cannot run together (here): run them one by one."""

    def __init__(self, reason: str, lasting: bool = False):
        super().__init__(reason)
        self.lasting = lasting  # a property of the kernel's code, not of this launch


class TogetherUnavailable(RuntimeError):
    """Running programs together is not possible on this interpreter, or changes its results."""


# ---------------------------------------------------------------------------------------------------
# state


class _Access:
    __slots__ = ("addrs", "mask", "itemsize", "writes", "together", "lo", "hi")

    def __init__(self, addrs, mask, itemsize, writes, together, lo, hi):
        self.addrs, self.mask, self.itemsize, self.writes = addrs, mask, itemsize, writes
        self.together, self.lo, self.hi = together, lo, hi  # together: a leading program axis


class _State:
    def __init__(self):
        self.installed = False
        self.enabled = False
        self.active = False  # inside a launch whose programs run together
        self.programs = 0  # P
        self.ids: list[np.ndarray] = []  # per grid axis, (P, 1) int32
        self.accesses: list[_Access] = []
        self.arguments: list = []  # the launch's tensor arguments
        self.saved: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # operand index -> (its bytes, their copy)
        self.kernels: dict = {}  # kernel function -> [launches run together, launches run one by one]
        self.launches = [0, 0]  # [together, one by one after trying]: for tests and measurements
        self.handle = None  # the class of handles with a program axis
        self.tensor_handle = None
        self.interp = self.tl = None
        self.saved_builder: dict = {}
        self.saved_patch_lang = None
        self.reason: str | None = None  # why the last launch tried ran one by one
        self.patches: list = []  # (owner, name, value) set on triton.language while a launch runs together
        self.min_max: dict = {}  # "min"/"max" -> ours
        self.namespaces: dict = {}  # id -> (a module namespace given our min and max, the names added)


_state = _State()


def _together(h) -> bool:
    return type(h) is _state.handle


def _mark(h):
    """h (made by a builder method from handles with a program axis) has one too."""
    if type(h) is _state.tensor_handle:
        if h.data.ndim == 0 or h.data.shape[0] != _state.programs:
            raise _Apart("a builder result without the program axis")
        if h.data.size > MAX_ELEMENTS:
            raise _Apart("blocks too large to hold for every program at once")
        h.__class__ = _state.handle
    elif type(h) is tuple:
        for x in h:
            _mark(x)
    elif h is not None and type(h) is not _state.handle:
        raise _Apart(f"a builder result of type {type(h).__name__}")
    return h


def _of(h, p: int):
    """Program p's handle."""
    if type(h) is _state.handle:
        return _state.tensor_handle(h.data[p], h.dtype, h.attr)
    if type(h) in (list, tuple):
        return type(h)(_of(x, p) for x in h)
    return h


def _stacked(outs: list):
    first = outs[0]
    if first is None:
        if any(o is not None for o in outs):
            raise _Apart("programs returned different kinds of results")
        return None
    if type(first) is tuple:
        return tuple(_stacked([o[i] for o in outs]) for i in range(len(first)))
    if not isinstance(first, _state.tensor_handle) or any(o.data.shape != first.data.shape for o in outs):
        raise _Apart("programs returned results of different shapes")
    return _mark(_state.tensor_handle(np.stack([o.data for o in outs]), first.dtype))


def _any_together(args, kwargs) -> bool:
    handle = _state.handle
    for a in args:
        if type(a) is handle or (type(a) in (list, tuple) and any(type(x) is handle for x in a)):
            return True
    return bool(kwargs) and any(type(v) is handle for v in kwargs.values())


def _same_rank(args) -> bool:
    """Do the handle arguments hold blocks of one rank per program (so numpy broadcasts them right)?"""
    ranks = {a.data.ndim - (type(a) is _state.handle) for a in args if isinstance(a, _state.tensor_handle)}
    return len(ranks) <= 1


def _full(h, shape: tuple) -> np.ndarray:
    """h's data over `shape`: as it is where it has that shape already (as one by one), else a copy (Triton
    3.6's store refuses the read-only views broadcast_to makes)."""
    if h.data.shape == shape:
        return h.data
    return np.ascontiguousarray(np.broadcast_to(h.data, shape))


# ---------------------------------------------------------------------------------------------------
# builder methods


def _per_program(original):
    def op(self, *args, **kwargs):
        if not _state.active or not _any_together(args, kwargs):
            return original(self, *args, **kwargs)
        return _stacked([original(self, *_of(args, p), **{k: _of(v, p) for k, v in kwargs.items()})
                         for p in range(_state.programs)])
    return op


def _elementwise(original):
    """Exact per element, whatever the shape: numpy broadcasts the program axis."""
    per_program = _per_program(original)

    def op(self, *args, **kwargs):
        if not _state.active or not _any_together(args, kwargs):
            return original(self, *args, **kwargs)
        if kwargs or not _same_rank(args):
            return per_program(self, *args, **kwargs)
        return _mark(original(self, *args))
    return op


# numpy functions whose results are correctly rounded, so the same for any array layout
_EXACT_UNARY = frozenset(getattr(np, name) for name in ("negative", "absolute", "floor", "ceil", "sqrt"))


def _unary(original):
    per_program = _per_program(original)
    elementwise = _elementwise(original)

    def op(self, arg, fn, *rest, **kwargs):
        if not _state.active:
            return original(self, arg, fn, *rest, **kwargs)
        return (elementwise if fn in _EXACT_UNARY else per_program)(self, arg, fn, *rest, **kwargs)
    return op


def _shape_op(original, together_version):
    per_program = _per_program(original)

    def op(self, *args, **kwargs):
        if not _state.active or not _any_together(args, kwargs):
            return original(self, *args, **kwargs)
        if kwargs:
            return per_program(self, *args, **kwargs)
        out = together_version(*args)
        return per_program(self, *args) if out is NotImplemented else out
    return op


def _splat(ret_ty, arg):
    if arg.data.shape[1:] != (1,):
        return NotImplemented
    shape = (_state.programs,) + tuple(int(n) for n in ret_ty.shape)
    lead = arg.data.reshape((_state.programs,) + (1,) * (len(shape) - 1))
    dtype = _state.interp._get_np_dtype(arg.dtype)
    return _state.handle(np.broadcast_to(lead, shape).astype(dtype), arg.dtype.scalar)


def _broadcast(arg, shape):
    if arg.data.ndim != len(shape) + 1:  # numpy would line the program axis up with a block axis
        return NotImplemented
    return _state.handle(np.broadcast_to(arg.data, (_state.programs,) + tuple(shape)), arg.dtype.scalar)


def _expand_dims(arg, axis):
    return _state.handle(np.expand_dims(arg.data, axis + 1 if axis >= 0 else axis), arg.dtype.scalar)


def _reshape(arg, shape, allow_reorder):
    return _state.handle(arg.data.reshape((_state.programs,) + tuple(shape)), arg.dtype.scalar)


def _trans(arg, perm):
    if arg.data.ndim != len(perm) + 1:
        return NotImplemented
    return _state.handle(np.transpose(arg.data, (0,) + tuple(p + 1 for p in perm)), arg.dtype.scalar)


def _cat(lhs, rhs):
    if not _same_rank((lhs, rhs)):
        return NotImplemented
    left, right = (h.data if _together(h) else np.broadcast_to(h.data, (_state.programs,) + h.data.shape)
                   for h in (lhs, rhs))
    return _state.handle(np.concatenate([left, right], axis=1), lhs.dtype.scalar)


def _join(lhs, rhs):
    if not _same_rank((lhs, rhs)):
        return NotImplemented
    shape = np.broadcast_shapes(lhs.data.shape, rhs.data.shape)
    return _state.handle(np.stack([_full(lhs, shape), _full(rhs, shape)], axis=-1), lhs.dtype.scalar)


def _split(val):
    return (_state.handle(val.data[..., 0], val.dtype.scalar), _state.handle(val.data[..., 1], val.dtype.scalar))


def _program_id(original):
    def op(self, axis):
        if not _state.active or self.grid_dim[axis] == 1:
            return original(self, axis)
        return _state.handle(_state.ids[axis].copy(), _state.tl.int32)
    return op


def _apart(original, reason: str):
    def op(self, *args, **kwargs):
        if _state.active:
            raise _Apart(reason, lasting=True)
        return original(self, *args, **kwargs)
    return op


def _memory(original, writes: bool):
    """A masked load or store: broadcast to one shape, bounds-checked against the launch's tensor arguments
    before it runs, and recorded for the check that programs share no memory."""

    def op(self, ptrs, *args, **kwargs):
        if not _state.active:
            return original(self, ptrs, *args, **kwargs)
        if writes:
            value, mask, rest = args[0], args[1], args[2:]
            handles = (ptrs, value, mask)
        else:
            mask, other, rest = args[0], args[1], args[2:]
            volatile = kwargs.get("is_volatile", rest[-1] if rest else False)
            if volatile:
                raise _Apart("a volatile load", lasting=True)
            handles = (ptrs, mask) if other is None else (ptrs, mask, other)
        together = any(_together(h) for h in handles)
        itemsize = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        if not together:
            m = np.broadcast_to(np.asarray(mask.data, dtype=bool), ptrs.data.shape)
            if writes and m.any():
                raise _Apart("every program stores to the same addresses")
            _note(ptrs.data, m, itemsize, writes, False)
            return original(self, ptrs, *args, **kwargs)
        # an unmasked load or store makes its mask like the pointers (np.ones_like): it has the program axis too
        ndim = max(h.data.ndim for h in handles if _together(h))
        if any(h.data.ndim not in (ndim, ndim - 1) or (h.data.ndim == ndim and not _together(h)
                                                       and h.data.shape[0] != _state.programs) for h in handles):
            raise _Apart("a memory access with operands of different ranks")
        shape = np.broadcast_shapes(*(h.data.shape for h in handles))
        if np.prod(shape) > MAX_ELEMENTS:
            raise _Apart("blocks too large to hold for every program at once")
        full = [_state.tensor_handle(_full(h, shape), h.dtype, h.attr) for h in handles]
        _note(full[0].data, full[1 if not writes else 2].data.astype(bool, copy=False), itemsize, writes, True)
        if writes:
            return original(self, full[0], full[1], full[2], *rest, **kwargs)
        out = original(self, full[0], full[1], full[2] if other is not None else None, *rest, **kwargs)
        return _mark(out)
    return op


def _note(addrs: np.ndarray, mask: np.ndarray, itemsize: int, writes: bool, together: bool) -> None:
    """Check that the access stays inside the launch's tensor arguments (saving the bytes of those it writes
    the first time), and record it."""
    lanes = addrs[mask]  # the mask has the pointers' shape (both callers broadcast it)
    if lanes.size == 0:
        return
    lo, hi = int(lanes.min()), int(lanes.max()) + itemsize
    # the arguments a store may change: one that holds every lane, else each one some lane falls in
    touched = [i for i, o in enumerate(_state.arguments) if o.ptr <= lo and hi <= o.end][:1]
    if not touched:
        touched = [i for i, o in enumerate(_state.arguments) if lo < o.end and o.ptr < hi]
        inside = np.zeros(lanes.shape, dtype=bool)
        for i in touched:
            o = _state.arguments[i]
            inside |= (lanes >= o.ptr) & (lanes + itemsize <= o.end)
        if not inside.all():
            raise _Apart("an access outside the launch's tensor arguments")
    if writes:
        for i in touched:
            if i not in _state.saved:
                o = _state.arguments[i]
                if o.end - o.ptr > MAX_SAVED_BYTES:
                    raise _Apart("an output too large to save before the first store")
                view = np.ctypeslib.as_array((ctypes.c_uint8 * (o.end - o.ptr)).from_address(o.ptr))
                _state.saved[i] = (view, view.copy())
    _state.accesses.append(_Access(addrs, mask, itemsize, writes, together, lo, hi))


# builder method -> how it runs together; a method not named here makes programs run one by one
_KINDS = {
    "create_get_program_id": _program_id,
    "create_masked_load": functools.partial(_memory, writes=False),
    "create_masked_store": functools.partial(_memory, writes=True),
    "unary_op": _unary,
    "create_splat": lambda o: _shape_op(o, _splat),
    "create_broadcast": lambda o: _shape_op(o, _broadcast),
    "create_expand_dims": lambda o: _shape_op(o, _expand_dims),
    "create_reshape": lambda o: _shape_op(o, _reshape),
    "create_trans": lambda o: _shape_op(o, _trans),
    "create_cat": lambda o: _shape_op(o, _cat),
    "create_join": lambda o: _shape_op(o, _join),
    "create_split": lambda o: _shape_op(o, _split),
}
_ELEMENTWISE = (
    ["cast_impl", "create_si_to_fp", "create_ui_to_fp", "create_fp_to_si", "create_fp_to_ui", "create_fp_ext",
     "create_fp_trunc", "create_int_cast", "create_fp_to_fp", "create_bitcast", "create_int_to_ptr",
     "create_ptr_to_int", "binary_op", "ternary_op", "create_idiv", "create_sdiv", "create_udiv", "create_srem",
     "create_urem", "create_ashr", "create_umulhi", "create_clampf", "create_select", "create_fma", "create_fabs",
     "create_fneg", "create_iabs", "create_floor", "create_ceil", "create_sqrt", "create_precise_sqrt",
     "create_rsqrt", "create_addptr", "create_assert", "create_assume", "create_precise_divf",
     "create_approx_divf"]
    + [f"create_{op}" for op in ("fadd", "fmul", "fdiv", "frem", "fsub", "mul", "add", "sub", "shl", "lshr",
                                 "minsi", "minui", "minimumf", "minnumf", "maxsi", "maxui", "maximumf", "maxnumf",
                                 "and", "xor", "or")]
    + [f"create_icmp{c}" for c in ("SLE", "SLT", "SGE", "SGT", "ULE", "ULT", "UGE", "UGT", "EQ", "NE")]
    + [f"create_fcmp{c}" for c in ("OLT", "OGT", "OLE", "OGE", "OEQ", "ONE", "ULT", "UGT", "ULE", "UGE", "UEQ",
                                   "UNE")])
_PER_PROGRAM = ["create_dot", "create_dot_scaled", "create_gather", "create_histogram", "create_unsplat",
                "create_erf", "create_cos", "create_sin", "create_exp", "create_exp2", "create_log", "create_log2"]
# left as they are (name prefixes): no handle in, or, for the unmasked load and store, only calls of the
# masked ones, which see the program axis
_UNTOUCHED = ("set_grid_idx", "set_grid_dim", "get_", "create_make_range", "create_get_num_programs",
              "create_barrier", "create_load", "create_store")


def _kind(name: str):
    if name in _KINDS:
        return _KINDS[name]
    if name in _ELEMENTWISE:
        return _elementwise
    if name in _PER_PROGRAM:
        return _per_program
    what = name.removeprefix("create_").replace("_", " ")
    return lambda original: _apart(original, f"{what} (not run together)")


# ---------------------------------------------------------------------------------------------------
# the language around the builder, while a launch runs together


def _decided(t, convert):
    data = t.handle.data
    first = data.reshape(-1)[0] if data.size else None
    if data.size and not (data == first).all():
        raise _Apart("programs take different branches")
    return convert(first)


def _language_patches() -> list[tuple[object, str, object]]:
    tl = _state.tl
    tensor = tl.tensor
    bool_, index, transpose = tensor.__bool__, tensor.__index__, tensor.__dict__.get("T")

    def to_bool(self):
        if not _together(self.handle):
            return bool_(self)
        if self.handle.data[0].size != 1:  # a block: the interpreter takes any block for true
            return True
        return _decided(self, bool)

    def to_index(self):
        return _decided(self, int) if _together(self.handle) else index(self)

    def T(self):  # noqa: N802
        if not _together(self.handle):
            return transpose.fget(self)
        data = np.transpose(self.handle.data, (0,) + tuple(range(self.handle.data.ndim - 1, 0, -1)))
        shape = list(self.type.shape)
        shape[-1], shape[-2] = shape[-2], shape[-1]
        return tl.core.tensor(_state.handle(data, self.handle.dtype), tl.core.block_type(self.dtype, shape))

    patches = [(tensor, "__bool__", to_bool), (tensor, "__index__", to_index)]
    if isinstance(transpose, property):
        patches.append((tensor, "T", property(T)))

    def static_print(*args, **kwargs):
        raise _Apart("tl.static_print (printed once per program)", lasting=True)

    patches.append((tl, "static_print", static_print))
    for module in (tl, tl.core):
        for name in ("reduce", "associative_scan"):
            if hasattr(module, name):
                patches.append((module, name, _per_program_tensors(getattr(module, name))))
    return patches


def _apply_patches() -> None:
    for owner, name, value in _state.patches:
        setattr(owner, name, value)


def _patch_lang_and_ours(original):
    """The interpreter patches triton.language again at every device-function call (tl.cdiv, tl.sum, a
    kernel's helpers) and never restores it: ours go back on top."""

    def patch_lang(fn):
        scope = original(fn)
        if _state.active:
            _apply_patches()
            _patch_globals(fn.__globals__)
        return scope
    return patch_lang


def _min_max(builtin, second_if: str):
    """Python's min or max of two values, one a tensor with the program axis: Python keeps the first unless
    `second < first` (min; `>` for max) holds, and decides that per program. Exact where every program keeps
    the same one, or where both are scalars of one type (a tl.where then picks per program); otherwise the
    programs run one by one."""

    def choose(*args, **kwargs):
        tl = _state.tl
        if (not _state.active or kwargs or len(args) != 2
                or not any(isinstance(x, tl.tensor) and _together(x.handle) for x in args)):
            return builtin(*args, **kwargs)
        first, second = args
        test = second < first if second_if == "<" else second > first
        value = test.value if isinstance(test, tl.constexpr) else test
        if not isinstance(value, tl.tensor) or not _together(value.handle):
            return second if test else first
        data = value.handle.data
        if data[0].size != 1 or data.all():  # a block: the interpreter takes any block for true
            return second
        if not data.any():
            return first
        if (isinstance(first, tl.tensor) and isinstance(second, tl.tensor) and first.type == second.type
                and not first.type.is_block()):
            return tl.where(value, second, first)
        raise _Apart(f"programs take different branches (Python's {builtin.__name__})")
    return choose


def _patch_globals(namespace: dict) -> None:
    """Python's min and max, in the module of a function the launch runs (unless it defines its own)."""
    if id(namespace) in _state.namespaces:
        return
    added = [name for name in _state.min_max if name not in namespace]
    for name in added:
        namespace[name] = _state.min_max[name]
    _state.namespaces[id(namespace)] = (namespace, added)


def _unpatch_globals() -> None:
    for namespace, added in _state.namespaces.values():
        for name in added:
            namespace.pop(name, None)
    _state.namespaces = {}


def _per_program_tensors(original):
    """A reduction or scan (the interpreter's numpy over an axis): per program."""

    def op(input, *args, **kwargs):
        tensors = input if isinstance(input, tuple) else (input,)
        if not any(_together(t.handle) for t in tensors):
            return original(input, *args, **kwargs)
        tl = _state.tl
        outs = []
        for p in range(_state.programs):
            mine = tuple(tl.core.tensor(_of(t.handle, p), t.type) for t in tensors)
            outs.append(original(mine if isinstance(input, tuple) else mine[0], *args, **kwargs))
        return _stacked_tensors(outs)
    return op


def _stacked_tensors(outs: list):
    first = outs[0]
    if isinstance(first, tuple):
        return tuple(_stacked_tensors([o[i] for o in outs]) for i in range(len(first)))
    if any(o.type != first.type for o in outs):
        raise _Apart("programs' reductions have different types")
    return _state.tl.core.tensor(_stacked([o.handle for o in outs]), first.type)


# ---------------------------------------------------------------------------------------------------
# running a launch


def worth_trying(fn, grid: tuple[int, int, int], observers) -> bool:
    """Should this launch's programs be tried together?"""
    if not _state.enabled or _state.active:
        return False
    programs = grid[0] * grid[1] * grid[2]
    if not 2 <= programs <= MAX_PROGRAMS:
        return False
    if any(not getattr(o, "accepts_programs_apart", False) for o in observers):
        return False
    together, apart = _state.kernels.get(fn, (0, 0))
    return together > 0 or apart < GIVE_UP_AFTER


def run(fn, args: dict, grid: tuple[int, int, int], arguments: list, builder) -> bool:
    """Run the launch's programs together. True: they ran, and memory holds what they wrote. False: they
    could not, and memory is as it was before the launch; run them one by one."""
    from gemm_fuzz.properties.interpreter import sanitizer

    programs = grid[0] * grid[1] * grid[2]
    ids = np.indices(grid, dtype=np.int32).reshape(3, programs)  # program-id order: x, then y, then z
    _state.ids = [ids[axis].reshape(programs, 1) for axis in range(3)]
    _state.programs, _state.accesses, _state.arguments, _state.saved = programs, [], arguments, {}
    rewind = sanitizer.checkpoint()
    patches = _state.patches = _language_patches()
    before = [(owner, name, owner.__dict__.get(name, _MISSING)) for owner, name, _ in patches]
    _apply_patches()
    _patch_globals(fn.__globals__)
    builder.set_grid_idx(0, 0, 0)
    _state.active = True
    lasting = False
    try:
        fn(**args)
        ok = _share_nothing()
        _state.reason = None if ok else "programs share memory"
    except Exception as error:  # noqa: BLE001 (any failure is found again one by one)
        ok = False
        cause = next((e for e in chain(error) if isinstance(e, _Apart)), None)
        lasting = isinstance(cause, _Apart) and cause.lasting
        _state.reason = str(cause) if cause is not None else f"{type(error).__name__}: {error}"
    finally:
        _state.active = False
        _state.patches = []
        _unpatch_globals()
        for owner, name, value in before:
            if value is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, value)
        _state.accesses, _state.arguments = [], []
    counts = _state.kernels.setdefault(fn, [0, 0])
    if ok:
        counts[0] += 1
        _state.launches[0] += 1
        _state.saved = {}
        return True
    for view, copy in reversed(list(_state.saved.values())):
        view[:] = copy
    _state.saved = {}
    rewind()
    counts[1] += GIVE_UP_AFTER if lasting else 1
    _state.launches[1] += 1
    return False


def _share_nothing() -> bool:
    """Exact: no byte a program stored is loaded or stored by another program. The stores are grouped by
    where they lie (an output, a workspace), each group's bytes tracked in one array over its span."""
    accesses = _state.accesses
    groups: list[list] = []  # [lo, hi, stores]
    for a in sorted((a for a in accesses if a.writes), key=lambda a: a.lo):
        if groups and a.lo <= groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], a.hi)
            groups[-1][2].append(a)
        else:
            groups.append([a.lo, a.hi, [a]])
    for lo, hi, stores in groups:
        if hi - lo > MAX_WRITTEN_SPAN:
            return False  # one store's lanes spread far apart: not tracked, run one by one
        owner = np.full(hi - lo, -1, dtype=np.int32)
        lanes = [_bytes(a, lo) for a in stores]
        for offsets, programs in lanes:
            owner[offsets] = programs
        for offsets, programs in lanes:
            if (owner[offsets] != programs).any():
                return False  # two programs store to one byte
        for a in accesses:
            if a.writes or a.hi <= lo or a.lo >= hi:
                continue
            offsets, programs = _bytes(a, lo)
            inside = (offsets >= 0) & (offsets < hi - lo)
            seen = owner[offsets[inside]]
            stored = seen != -1
            if programs is None:
                if stored.any():
                    return False  # every program loads a byte one of them stores
            elif (stored & (seen != programs[inside])).any():
                return False  # a program loads a byte another stores
    return True


def _bytes(access: _Access, base: int):
    """(byte offsets from base, program of each) of the access's active lanes; programs None: every program."""
    addrs = access.addrs.astype(np.int64) - base
    mask = np.broadcast_to(access.mask, addrs.shape)
    offsets = addrs[mask]
    programs = None
    if access.together:
        lead = np.arange(_state.programs, dtype=np.int32).reshape((-1,) + (1,) * (addrs.ndim - 1))
        programs = np.broadcast_to(lead, addrs.shape)[mask]
    if access.itemsize > 1:
        offsets = (offsets[:, None] + np.arange(access.itemsize)).reshape(-1)
        if programs is not None:
            programs = np.repeat(programs, access.itemsize)
    return offsets, programs


# ---------------------------------------------------------------------------------------------------
# installation


def install() -> None:
    """Wrap the interpreter's builder (after the fixes and the scheduler, before any sanitizer block) and
    probe: the probe kernels must leave the same bits together and one by one. Idempotent; the fast
    path's header line names it."""
    if _state.installed:
        _state.enabled = True
        return
    import triton.language as tl
    from triton.runtime import interpreter as interp

    _state.interp, _state.tl, _state.tensor_handle = interp, tl, interp.TensorHandle
    _state.min_max = {"min": _min_max(min, "<"), "max": _min_max(max, ">")}
    _state.handle = type("ProgramsTogether", (interp.TensorHandle,), {
        "__doc__": "A TensorHandle whose data has a leading axis over the launch's programs."})
    builder = interp.InterpreterBuilder
    for name, value in list(builder.__dict__.items()):
        if name.startswith("__") or not callable(value) or name.startswith(_UNTOUCHED):
            continue
        _state.saved_builder[name] = value
        setattr(builder, name, _kind(name)(value))
    _state.saved_patch_lang = interp._patch_lang
    interp._patch_lang = _patch_lang_and_ours(interp._patch_lang)
    _state.installed = _state.enabled = True
    try:
        _probe()
    except BaseException:
        uninstall()
        raise


def uninstall() -> None:
    builder = _state.interp.InterpreterBuilder if _state.interp else None
    for name, original in _state.saved_builder.items():
        setattr(builder, name, original)
    _state.saved_builder.clear()
    if _state.saved_patch_lang is not None:
        _state.interp._patch_lang = _state.saved_patch_lang
        _state.saved_patch_lang = None
    _state.installed = _state.enabled = False


@contextlib.contextmanager
def switched(on: bool):
    """Programs run together (on) or one by one (off) inside the block, as before after it."""
    was = _state.enabled
    _state.enabled = on and _state.installed
    try:
        yield
    finally:
        _state.enabled = was


def last_reason() -> str | None:
    """Why the last launch tried together ran one by one (None: it ran together)."""
    return _state.reason


def launches() -> tuple[int, int]:
    """(launches run together, launches tried and run one by one) in this process."""
    return tuple(_state.launches)


def _probe() -> None:
    import torch

    kernel, branchy = _probe_kernels()
    results, counts = {}, {}
    for on in (False, True):
        for fn in [fn for fn in _state.kernels if fn.__name__ in ("together_probe", "together_branchy")]:
            del _state.kernels[fn]  # a probe run before (an earlier install) must not count
        g = torch.Generator().manual_seed(0)
        with switched(on):
            before = launches()
            out = []
            for dtype in (torch.float16, torch.float32):
                a = (torch.randn(37, 29, generator=g) * 4).to(dtype)
                b = (torch.randn(29, 23, generator=g) * 4).to(dtype).T.contiguous().T  # column-major
                c = torch.full((37, 23), -1, dtype=dtype)
                rows = torch.zeros(2, 37, dtype=torch.float32)
                kernel[(3, 2)](a, b, c, rows, 37, 23, 29, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                               c.stride(0), c.stride(1), BM=16, BN=16, BK=8)
                x = torch.arange(6, dtype=torch.float32)
                branchy[(6,)](x)
                out += [c.float().numpy().copy(), rows.numpy().copy(), x.numpy().copy()]
            counts[on] = tuple(n - m for n, m in zip(launches(), before))
        results[on] = out
    for plain, joined in zip(results[False], results[True]):
        if plain.tobytes() != joined.tobytes():
            raise TogetherUnavailable("running a launch's programs together changes the probe kernels' results "
                                      "(properties/interpreter/together.py)")
    if counts[True] != (2, 2):
        raise TogetherUnavailable(f"the probe kernels ran {counts[True][0]} launches together and {counts[True][1]} "
                                  f"one by one after trying, not 2 and 2 (last: {_state.reason}; "
                                  "properties/interpreter/together.py)")


_PROBES = None


def _probe_kernels():
    global _PROBES
    if _PROBES is None:
        import triton
        import triton.language as tl

        @triton.jit
        def together_probe(a_ptr, b_ptr, c_ptr, rows_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
            pid_m = tl.program_id(0)
            pid_n = tl.program_id(1)
            offs_m = pid_m * BM + tl.arange(0, BM)
            offs_n = pid_n * BN + tl.arange(0, BN)
            offs_k = tl.arange(0, BK)
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(0, tl.cdiv(K, BK)):
                kk = k * BK + offs_k
                a = tl.load(a_ptr + offs_m[:, None] * sam + kk[None, :] * sak,
                            mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
                b = tl.load(b_ptr + kk[:, None] * sbk + offs_n[None, :] * sbn,
                            mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
                acc += tl.dot(a, b, input_precision="ieee")
            acc = tl.where(acc > 1.5, tl.exp(acc * 0.01) - 1, acc)
            c = acc.to(c_ptr.dtype.element_ty)
            tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, c,
                     mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
            if K > 0:  # the same branch in every program
                tl.store(rows_ptr + pid_n * M + offs_m, tl.sum(acc.T, axis=0), mask=offs_m < M)

        @triton.jit
        def together_branchy(x_ptr):
            pid = tl.program_id(0)
            x = tl.load(x_ptr + pid)
            if pid % 2 == 0:  # a branch on the program id: programs differ, so they run one by one
                x = x * 2 + pid
            tl.store(x_ptr + pid, tl.sqrt(x))

        _PROBES = (together_probe, together_branchy)
    return _PROBES
