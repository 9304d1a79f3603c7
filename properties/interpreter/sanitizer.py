"""An exact out-of-bounds detector for Triton's CPU interpreter.

    with sanitizer.bounds_checked():
        kernel[grid](...)          # or any launcher that runs Triton kernels

Every lane of a load, store, atomic or tensor-descriptor access that is not masked off must address
one element of the tensor argument its pointer was derived from: the byte address
data_ptr + itemsize * sum(i_d * stride_d) for valid indices i. Padding between rows, guard bands
around a view and the elements of another argument are all out of bounds, however safe the memory.
Offending accesses are refused before they run (the plain interpreter writes straight into the host
heap) and raise `OutOfBoundsAccess`.

A store in which two active lanes address the same element raises `DuplicateStore` (unless the block
allows them, `bounds_checked(duplicate_stores=True)`): which lane's value lands is unspecified, even
where the values agree (kernels that alias rows to fake a batch dimension), and such stores have
corrupted output on some GPUs. Atomics are exempt: lanes of one atomic add to one element are defined.

Provenance: the pointer handle of each tensor argument is tagged at launch with the argument's
extent, and the tag follows the pointer through addptr, splat, broadcast, expand_dims, reshape,
trans, where, cat, join, split and pointer bitcasts, and from a descriptor's (or 3.6 block
pointer's) base to the pointers it materialises. Tensors a kernel reaches through pointers it loads
(tutorial 08's arrays of data pointers) are named to the block (`bounds_checked(reached=...)`): an
integer cast to a pointer that is one of their data pointers is tagged with that tensor's extent. Any
other pointer that lost its tag may address an element of any tensor argument or named tensor.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from gemm_fuzz.properties.interpreter.tensor_arguments import TensorArgument
from gemm_fuzz.properties.judge.failures import DuplicateStore, GemmFailure, OutOfBoundsAccess

_TAG = "bounds_checked.origin"  # key in TensorHandle.attr: tuple of the _Extents a pointer may address


class SanitizerUnavailable(RuntimeError):
    """bounds_checked() was entered while Triton's interpreter is not in use."""


# ---------------------------------------------------------------------------------------------------
# extents


@functools.lru_cache(maxsize=512)
def _membership(shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """bool over element offsets [0, span]: True where an element of the view lies."""
    if any(n == 0 for n in shape):
        return np.zeros(0, dtype=bool)
    span = sum((n - 1) * s for n, s in zip(shape, strides))
    offsets = np.zeros((), dtype=np.int64)
    for n, s in zip(shape, strides):
        offsets = offsets[..., None] + np.arange(n, dtype=np.int64) * s
    member = np.zeros(span + 1, dtype=bool)
    member[offsets.ravel()] = True
    member.flags.writeable = False
    return member


@dataclass(frozen=True, eq=False)
class _Extent(TensorArgument):
    """One tensor argument of a launch and what its pointer may address: `member`, over the element offsets
    of its span, True at its elements."""

    member: np.ndarray = field(default=None, repr=False, compare=False)

    @property
    def span(self) -> int:
        return len(self.member) - 1

    def contains(self, addr: np.ndarray, access: int) -> np.ndarray:
        """Per lane: does an `access`-byte access at byte address `addr` (int64) hit only elements?"""
        d = addr - self.ptr
        if access == self.itemsize:
            q, r = np.divmod(d, self.itemsize)
            ok = (r == 0) & (q >= 0) & (q <= self.span)
            if ok.all():
                return self.member[q]
            ok[ok] = self.member[q[ok]]
            return ok
        # a pointer bitcast to another element width: every element touched must belong
        unit = min(access, self.itemsize)
        count = max(1, access // self.itemsize)
        q = np.floor_divide(d, self.itemsize)
        ok = (d % unit == 0) & (q >= 0) & (q + count - 1 <= self.span)
        for j in range(count):
            ok[ok] = self.member[q[ok] + j]
        return ok

    def describe(self) -> str:
        return f"shape {self.shape}, strides {self.strides}, element span [0, {self.span}]"

    def where(self, byte_offset: int) -> tuple[str, tuple[int, ...] | None]:
        """Words for where a byte offset falls relative to this tensor, and its coordinates if in the span."""
        if byte_offset % self.itemsize:
            return (f"byte offset {byte_offset} is not a multiple of the itemsize {self.itemsize}", None)
        q = byte_offset // self.itemsize
        if q < 0:
            return (f"{_count(-q, 'element')} before the data pointer", None)
        if q > self.span:
            return (f"{_count(q - self.span, 'element')} past the last element", None)
        coords, rest = [0] * len(self.shape), q
        for d in sorted(range(len(self.shape)), key=lambda d: -self.strides[d]):
            if self.strides[d] > 0 and self.shape[d] > 1:
                coords[d], rest = divmod(rest, self.strides[d])
        coords = tuple(coords)
        if rest:
            return (f"inside the span but between elements, near {list(coords)}", coords)
        if any(i >= n for i, n in zip(coords, self.shape)):
            return (f"inside the span but not an element: it falls at {list(coords)}, outside shape {self.shape} "
                    "(padding)", coords)
        return (f"inside the span but not an element (near {list(coords)})", coords)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _extent(name: str, tensor, handle) -> _Extent | None:
    from triton.runtime.jit import TensorWrapper

    base = tensor.base if isinstance(tensor, TensorWrapper) else tensor  # triton.reinterpret(...)
    try:
        shape, strides = tuple(int(n) for n in base.shape), tuple(int(s) for s in base.stride())
    except (AttributeError, TypeError):
        return None
    if any(s < 0 for s in strides):
        return None
    itemsize = max(1, handle.dtype.element_ty.primitive_bitwidth // 8)
    return _Extent(name, int(handle.data.reshape(-1)[0]), itemsize, shape, strides, _membership(shape, strides))


# ---------------------------------------------------------------------------------------------------
# state


class _Launch:
    def __init__(self, kernel: str, filename: str):
        self.kernel = kernel
        self.filename = filename
        self.names: dict[int, str] = {}  # id(host argument) -> kernel parameter name
        self.keep: list = []  # the named host arguments, so their ids stay theirs
        self.extents: list[_Extent] = []
        self.reached: list[_Extent] = []  # tensors reached through loaded pointers (also in `extents`)
        self.violation: OutOfBoundsAccess | None = None

    def name(self, value, name: str) -> None:
        if isinstance(value, tuple):
            for i, v in enumerate(value):
                self.name(v, f"{name}[{i}]")
        elif hasattr(value, "block_shape") and hasattr(value, "base"):  # a host TensorDescriptor
            self.name(value.base, name)
        elif hasattr(value, "data_ptr"):
            self.names[id(value)] = name
            self.keep.append(value)


class _State:
    def __init__(self):
        self.contexts: list[BoundsChecked] = []  # open bounds_checked() blocks, innermost last
        self.launch: _Launch | None = None
        self.op: str | None = None  # set while a descriptor or atomic access runs through masked load/store
        self.saved: dict = {}  # (owner, attribute) -> what was there before install


_state = _State()


# ---------------------------------------------------------------------------------------------------
# checking


def _lanes(addrs: np.ndarray, mask) -> tuple[np.ndarray, np.ndarray | None]:
    """The active lanes' addresses, and the mask (broadcast to the block) when there is one."""
    if mask is None:
        return addrs.reshape(-1), None
    m = np.asarray(mask if isinstance(mask, np.ndarray) else mask.data, dtype=bool)  # 3.6 passes bare arrays
    if m.shape != addrs.shape:
        m = np.broadcast_to(m, addrs.shape)
    return addrs[m], m


def _check(builder, ptrs, mask, op: str) -> None:
    launch = _state.launch
    if launch is None:
        return
    addrs = np.asarray(ptrs.data)
    lanes, m = _lanes(addrs, mask)
    if lanes.size == 0:
        return
    tag = ptrs.attr.get(_TAG)
    candidates = tag if tag is not None else launch.extents
    access = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    addr = lanes.astype(np.int64)  # user-space addresses are below 2**63
    ok = None
    for extent in candidates:
        hit = extent.contains(addr, access)
        ok = hit if ok is None else ok | hit
    if ok is not None and ok.all():
        return
    bad = np.ones(addr.shape, dtype=bool) if ok is None else ~ok
    _refuse(builder, launch, _state.op or op, addrs, m, addr, access, bad, tag)


def _kernel_line(launch: _Launch) -> str | None:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == launch.filename:
            return f"{os.path.basename(launch.filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _refuse(builder, launch, op, addrs, m, addr, access, bad, tag) -> None:
    first = int(np.flatnonzero(bad)[0])
    position = first if m is None else int(np.flatnonzero(m.reshape(-1))[first])
    lane = tuple(int(i) for i in np.unravel_index(position, addrs.shape))
    a = int(addr[first])
    if tag is not None and len(tag) == 1:
        extent, operand = tag[0], tag[0].name
    else:  # report against the nearest candidate
        pool = tag if tag is not None else launch.extents
        extent = min(pool, key=lambda e: max(e.ptr - a, a - e.ptr - e.span * e.itemsize, 0), default=None)
        operand = ("a pointer of unknown provenance" if tag is None
                   else "a pointer into one of " + ", ".join(e.name for e in tag))
    pid = tuple(int(i) for i in builder.grid_idx)
    line = _kernel_line(launch)
    block = "x".join(str(n) for n in addrs.shape)
    active = addr.size
    text = f"out-of-bounds {op} in kernel '{launch.kernel}'"
    text += f" at {line}" if line else ""
    text += f", program id {pid}: operand {operand}, lane {list(lane)} of a {block} block"
    fields = dict(kernel=launch.kernel, op=op, operand=operand, program_id=pid, lane=lane, line=line)
    if extent is not None:
        byte_offset = a - extent.ptr
        where, coords = extent.where(byte_offset)
        offset = byte_offset // extent.itemsize
        others = [e.name for e in launch.extents if e is not extent and e.contains(np.array([a]), access)[0]]
        text += (f", at element offset {offset} from {extent.name}'s data pointer ({where})"
                 + (f", which is an element of {', '.join(others)}" if others else "")
                 + f"; {extent.name} has {extent.describe()}")
        fields.update(offset=offset, byte_offset=byte_offset, coordinates=coords, shape=extent.shape,
                      strides=extent.strides, span=extent.span)
        if tag is None:
            text += " (the nearest tensor argument)"
    else:
        text += f", at address {a:#x}; the kernel has no tensor arguments"
    text += f"; {int(bad.sum())} of {_count(active, 'active lane')} are out of bounds"
    error = OutOfBoundsAccess(text, **fields)
    if launch.violation is None:
        launch.violation = error
    for context in _state.contexts:
        context.violations.append(error)
    raise error


# ---------------------------------------------------------------------------------------------------
# patches


def _tag_of(handle):
    attr = getattr(handle, "attr", None)
    return attr.get(_TAG) if attr else None


def _set_tag(handle, tag) -> None:
    if tag is not None and hasattr(handle, "attr"):
        handle.attr[_TAG] = tag


def _merge(a, b):
    if a is None or b is None:  # some lanes have no provenance
        return None
    return a if a is b else tuple(dict.fromkeys(a + b))


def _follows(original, source: int):
    """An op whose result addresses what its argument number `source` did."""

    def op(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        tag = _tag_of(args[source]) if len(args) > source else None
        if tag is not None:
            for handle in out if isinstance(out, tuple) else (out,):
                _set_tag(handle, tag)
        return out

    return op


def _joins(original, first: int, second: int):
    """An op whose lanes come from two pointer operands (where, cat, join)."""

    def op(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        if len(args) > second:
            _set_tag(out, _merge(_tag_of(args[first]), _tag_of(args[second])))
        return out

    return op


def _as_op(original, name: str):
    """Name the masked loads and stores an op runs through (descriptor, block pointer, atomic)."""

    def op(self, *args, **kwargs):
        outer, _state.op = _state.op, _state.op or name
        try:
            return original(self, *args, **kwargs)
        finally:
            _state.op = outer

    return op


# Hooks only some supported Triton releases have: their absence elsewhere is expected.
_VERSION_SPECIFIC = {
    "create_atomic_load": "3.9", "create_atomic_store": "3.9",  # 3.6 routes atomic loads through rmw
    "create_tensor_pointer_load": "3.6", "create_tensor_pointer_store": "3.6",  # block pointers, removed in 3.9
}

# ATOMIC_OP members by the tl.atomic_* function that emits them
_RMW_NAMES = {"ADD": "add", "FADD": "add", "MAX": "max", "UMAX": "max", "MIN": "min", "UMIN": "min",
              "AND": "and", "OR": "or", "XOR": "xor", "XCHG": "xchg"}


def _hook_create_masked_load(original):
    def op(self, ptrs, mask, *args, **kwargs):
        _check(self, ptrs, mask, "load")
        return original(self, ptrs, mask, *args, **kwargs)
    return op


def _hook_create_masked_store(original):
    def op(self, ptrs, value, mask, *args, **kwargs):
        _check(self, ptrs, mask, "store")
        if _state.op is None and not any(c.duplicate_stores for c in _state.contexts):  # a plain tl.store
            _check_distinct(self, ptrs, mask)
        return original(self, ptrs, value, mask, *args, **kwargs)
    return op


def _check_distinct(builder, ptrs, mask) -> None:
    """Refuse a store in which two active lanes address one element."""
    launch = _state.launch
    if launch is None:
        return
    addrs = np.asarray(ptrs.data)
    lanes, m = _lanes(addrs, mask)
    if lanes.size < 2:
        return
    unique, first, counts = np.unique(lanes, return_index=True, return_counts=True)
    if unique.size == lanes.size:
        return
    a = int(unique[np.argmax(counts > 1)])
    positions = np.flatnonzero(addrs.reshape(-1) == a)
    if m is not None:
        positions = positions[m.reshape(-1)[positions]]
    shown = [list(int(i) for i in np.unravel_index(p, addrs.shape)) for p in positions[:2]]
    pid = tuple(int(i) for i in builder.grid_idx)
    line = _kernel_line(launch)
    extent = next((e for e in launch.extents if e.contains(np.array([a], dtype=np.int64), 1)[0]), None)
    element = ""
    if extent is not None:
        coords = extent.where(a - extent.ptr)[1]
        element = f", {extent.name}{list(coords) if coords is not None else ''}"
    text = (f"duplicate-lane store in kernel '{launch.kernel}'" + (f" at {line}" if line else "")
            + f", program id {pid}: lanes {shown[0]} and {shown[1]} of a {'x'.join(map(str, addrs.shape))} block "
            f"store to one element{element} ({int((counts > 1).sum())} elements written by several lanes); which "
            "lane's value lands is unspecified, even where they agree; declare duplicate_stores=True in the "
            "contract if the kernel means it")
    error = DuplicateStore(text, kernel=launch.kernel, program_id=pid, lanes=shown, line=line)
    for context in _state.contexts:
        context.violations.append(error)
    raise error


def _hook_create_atomic_rmw(original):
    def op(self, rmw_op, ptr, val, mask, *args, **kwargs):
        _check(self, ptr, mask, "atomic " + _RMW_NAMES.get(str(rmw_op).rsplit(".", 1)[-1], str(rmw_op)))
        return original(self, rmw_op, ptr, val, mask, *args, **kwargs)
    return op


def _hook_create_atomic_cas(original):
    def op(self, ptr, *args, **kwargs):
        _check(self, ptr, None, "atomic cas")
        return original(self, ptr, *args, **kwargs)
    return op


def _hook_materialize_pointers(original):
    def op(self, *args, **kwargs):
        ptrs, masks = original(self, *args, **kwargs)
        _set_tag(ptrs, _tag_of(self.base))
        return ptrs, masks
    return op


def _hook_implicit_cvt(original):
    def cvt(arg):
        out = original(arg)
        launch = _state.launch
        if launch is not None and hasattr(arg, "data_ptr") and hasattr(out, "handle"):
            extent = _extent(launch.names.get(id(arg), f"argument #{len(launch.extents)}"), arg, out.handle)
            if extent is not None:
                launch.extents.append(extent)
                _set_tag(out.handle, (extent,))
        return out
    return cvt


def _hook_init_args_hst(original):
    def op(self, args_dev, kwargs):
        args_hst, kwargs_hst = original(self, args_dev, kwargs)
        launch = _state.launch
        if launch is not None:
            for name, value in zip(self.arg_names, args_hst):
                launch.name(value, name)
            for name, value in kwargs_hst.items():
                launch.name(value, name)
        return args_hst, kwargs_hst
    return op


def _hook_int_to_ptr(original):
    def op(self, src, dst_type):
        out = original(self, src, dst_type)
        launch = _state.launch
        if launch is not None and launch.reached:
            values = np.unique(np.asarray(out.data).astype(np.int64))
            tag = tuple(e for e in launch.reached if e.ptr in values)
            if tag and {e.ptr for e in tag} >= set(values.tolist()):
                _set_tag(out, tag)
        return out
    return op


def _reached_extent(name: str, t) -> _Extent:
    shape, strides = tuple(int(n) for n in t.shape), tuple(int(x) for x in t.stride())
    return _Extent(name, int(t.data_ptr()), t.element_size(), shape, strides, _membership(shape, strides))


def _hook_grid_call(original):
    def call(self, *args, **kwargs):
        if not _state.contexts:
            return original(self, *args, **kwargs)
        code = getattr(self.fn, "__code__", None)
        launch = _Launch(getattr(self.fn, "__name__", "?"), code.co_filename if code else "")
        launch.reached = [_reached_extent(name, t) for context in _state.contexts
                          for name, t in context.reached.items()]
        launch.extents.extend(launch.reached)
        outer, _state.launch = _state.launch, launch
        try:
            return original(self, *args, **kwargs)
        except Exception:
            if launch.violation is not None:  # the interpreter wrapped it in InterpreterError
                raise launch.violation from None
            raise
        finally:
            _state.launch = outer
    return call


def _patches(interp) -> dict:
    builder = interp.InterpreterBuilder
    saved = {}

    def patch(owner, name, make):
        if name in owner.__dict__:
            saved[(owner, name)] = make(owner.__dict__[name])
        elif name not in _VERSION_SPECIFIC:
            import triton

            raise SanitizerUnavailable(
                f"Triton {triton.__version__}'s interpreter has no {owner.__name__}.{name}, which the sanitizer hooks "
                "to check memory accesses: this Triton release is not supported (3.6 and 3.9 are)")

    patch(builder, "create_masked_load", _hook_create_masked_load)
    patch(builder, "create_masked_store", _hook_create_masked_store)
    patch(builder, "create_atomic_rmw", _hook_create_atomic_rmw)
    patch(builder, "create_atomic_cas", _hook_create_atomic_cas)
    for name, op in [("create_atomic_load", "atomic load"), ("create_atomic_store", "atomic store"),  # 3.9
                     ("create_descriptor_load", "descriptor load"), ("create_descriptor_store", "descriptor store"),
                     ("create_tensor_pointer_load", "block pointer load"),  # 3.6
                     ("create_tensor_pointer_store", "block pointer store")]:
        patch(builder, name, lambda original, op=op: _as_op(original, op))

    for name, source in [("create_addptr", 0), ("create_splat", 1), ("create_broadcast", 0),
                         ("create_expand_dims", 0), ("create_reshape", 0), ("create_trans", 0),
                         ("create_bitcast", 0), ("create_split", 0), ("create_unsplat", 0), ("create_gather", 0)]:
        patch(builder, name, lambda original, source=source: _follows(original, source))
    patch(builder, "create_int_to_ptr", _hook_int_to_ptr)  # an alias of create_bitcast in the class
    patch(builder, "ternary_op", lambda original: _joins(original, 1, 2))  # select(cond, x, y) lands here
    patch(builder, "create_cat", lambda original: _joins(original, 0, 1))
    patch(builder, "create_join", lambda original: _joins(original, 0, 1))

    patch(interp.TensorDescHandle, "materialize_pointers", _hook_materialize_pointers)
    if hasattr(interp, "BlockPointerHandle"):  # 3.6
        patch(interp.BlockPointerHandle, "materialize_pointers", _hook_materialize_pointers)

    # module global: GridExecutor and the descriptor branch of _implicit_cvt look it up at call time
    patch(interp, "_implicit_cvt", _hook_implicit_cvt)

    patch(interp.GridExecutor, "_init_args_hst", _hook_init_args_hst)
    patch(interp.GridExecutor, "__call__", _hook_grid_call)
    return saved


def _interpreter_module():
    if os.environ.get("TRITON_INTERPRET", "0").strip().lower() not in ("1", "true", "on", "yes"):
        raise SanitizerUnavailable(
            "bounds_checked() needs Triton's CPU interpreter (TRITON_INTERPRET=1 set before triton is imported, "
            "e.g. backends.activate('interpreter')); compiled kernels cannot be checked"
        )
    from triton.language import standard
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    if isinstance(standard.zeros, JITFunction):
        raise SanitizerUnavailable("triton was imported before TRITON_INTERPRET was set, so kernels are compiled, "
                                   "not interpreted; choose the interpreter before importing triton")
    return interpreter


def _install() -> None:
    interp = _interpreter_module()
    saved = {}
    for (owner, name), wrapper in _patches(interp).items():
        saved[(owner, name)] = owner.__dict__[name]
        wrapper.__sanitizer__ = True
        setattr(owner, name, wrapper)
    _state.saved = saved


def _uninstall() -> None:
    for (owner, name), original in _state.saved.items():
        if getattr(owner.__dict__.get(name), "__sanitizer__", False):
            setattr(owner, name, original)
        # else: someone patched over ours since; ours stays in their chain, inert without a context
    _state.saved = {}


class BoundsChecked:
    """Context manager: kernels launched inside run with every memory access bounds-checked.

    `violations` lists what was refused. A violation raises OutOfBoundsAccess from the launch; if a
    launcher turned it into another exception, leaving the block raises the recorded violation instead.
    """

    def __init__(self, duplicate_stores: bool = False, reached: dict | None = None):
        self.violations: list[GemmFailure] = []
        self.duplicate_stores = duplicate_stores
        self.reached = dict(reached or {})  # name -> tensor a kernel reaches through a pointer it loads

    def __enter__(self) -> BoundsChecked:
        if not _state.contexts:
            _install()
        _state.contexts.append(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        _state.contexts.remove(self)
        if not _state.contexts:
            _uninstall()
        if exc is not None and not isinstance(exc, (OutOfBoundsAccess, DuplicateStore)) and self.violations:
            raise self.violations[0] from exc
        return False


def bounds_checked(duplicate_stores: bool = False, reached: dict | None = None) -> BoundsChecked:
    """`with bounds_checked(): ...` bounds-checks every Triton kernel launched in the block (interpreter only);
    `duplicate_stores`: two lanes of one store may write one element; `reached`: name -> tensor, tensors the
    kernels reach through data pointers they load (not arguments)."""
    return BoundsChecked(duplicate_stores, reached)


def checkpoint():
    """A function that forgets every violation recorded after this call: for a launch tried another way
    first (together.py), whose refusals are found again, as they happen, when it runs one by one."""
    launch = _state.launch
    violation = launch.violation if launch is not None else None
    counts = [(context, len(context.violations)) for context in _state.contexts]

    def rewind() -> None:
        if launch is not None:
            launch.violation = violation
        for context, count in counts:
            del context.violations[count:]

    return rewind


def hooks() -> int:
    """How many interpreter functions the sanitizer hooks in this Triton release (raises
    SanitizerUnavailable, naming the hook and the version, where a required one is missing)."""
    return len(_patches(_interpreter_module()))


def self_test() -> str:
    """Check that the hooks are present and that they catch: a load one element past a tensor must be
    refused, a load inside it must not. Returns a line for the header; raises SanitizerUnavailable."""
    import torch
    import triton

    from gemm_fuzz.properties.interpreter.fixes import copy_kernel

    count = hooks()
    x, y = torch.zeros(4), torch.zeros(8)
    with bounds_checked():
        copy_kernel[(1,)](x, y, N=4)
        try:
            copy_kernel[(1,)](x, y, N=8)
        except OutOfBoundsAccess:
            return f"{count} interpreter hooks checked; a planted out-of-bounds load was caught"
    raise SanitizerUnavailable(f"the sanitizer's {count} hooks on Triton {triton.__version__} did not catch a load "
                               "past the end of a tensor: this Triton release is not supported (3.6 and 3.9 are)")


def installed() -> bool:
    """Whether the patches are in place (some bounds_checked() block is open)."""
    return bool(_state.contexts)
