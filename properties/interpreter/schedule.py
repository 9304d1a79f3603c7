"""Program-order fuzzing for Triton's CPU interpreter.

The interpreter runs a launch's programs one after another in program-id order, so a kernel that is
right only in that order passes here and fails now and then on a GPU. Inside

    with schedule.ordered(order):
        kernel[grid](...)          # or any launcher that runs Triton kernels

the programs of every launch run as cooperative tasks (greenlets) under a schedule drawn from
`order`: 0 is program-id order (failures shrink to it), any other integer seeds a deterministic draw
of the order in which programs start and, at every switch point, of which runnable program goes on.
The same `order` gives the same interleaving every time.

Switch points, before and after the access: every atomic (add, max, xchg, cas, ..., atomic load
and store) and every volatile load. Plain loads and stores never switch: what a GPU's weak memory
makes of them is the race detector's business (races.py). A program *spins* when it repeats a
switch-point access (same operation, addresses and operands) with no other memory access in between,
its previous one changed nothing there, and the values are still those it saw: it then waits until
some program changes them. When every live program waits, the launch raises `Deadlock`, naming each
program, what it waits on and where.

Memory stays sequentially consistent: an outcome only a GPU's weak memory allows (a relaxed flag
seen before the data written ahead of it) never happens here; the race detector reports its cause.
Not modelled either: residency. Every program of the launch may run at once (a persistent grid
sized to the machine); a kernel that waits on a program that could not be resident deadlocks on a
GPU, not here. A spin on a plain (non-volatile) load has no switch point and loops forever, as in
the plain interpreter (on a GPU the compiler may hoist the load out of the loop). A bounded poll
(re-read an unchanged flag at most n times, then give up) is taken for a spin.

`install()` runs once per process, best at interpreter activation next to fixes.apply() (ordered()
and races.checked() call it if nothing did), and before any bounds_checked() block opens: it
replaces GridExecutor.__call__ by the same code with its grid loop replaced (argument copying and the
wrapping of exceptions kept) and wraps the builder's loads, stores and atomics around what is
installed (the fixes' patches); the sanitizer's per-block patches then wrap these. Outside ordered()
and races.checked() the loop is Triton's own, in program-id order, no greenlet is made, and each
memory operation costs one extra test.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import random
import sys
from collections import deque
from dataclasses import dataclass

import numpy as np

from gemm_fuzz.properties.interpreter import tensor_arguments, together
from gemm_fuzz.properties.judge.failures import ConcurrencyError, Deadlock, GridTooLarge


@dataclass(frozen=True)
class Waiter:
    """A program that waits for a value no running program changes."""

    program_id: tuple[int, int, int]
    op: str  # the access it repeats: "atomic add", "atomic cas", "volatile load", ...
    operand: str | None  # kernel argument the first lane addresses
    offset: int | None  # element offset of the first lane from that argument's data pointer
    coordinates: tuple[int, ...] | None
    line: str | None  # "file:line" in the kernel source
    value: object  # what the first lane keeps reading

    def describe(self) -> str:
        where = f" at {self.line}" if self.line else ""
        target = (f"{self.operand}, element offset {self.offset}"
                  + (f" {list(self.coordinates)}" if self.coordinates is not None else "")
                  if self.operand else "an address outside every tensor argument")
        return f"program {self.program_id}{where} spins on {self.op} of {target}, which stays {self.value}"


class SchedulerUnavailable(RuntimeError):
    """The scheduler was asked for while kernels are compiled, or on an interpreter it cannot patch."""


# ---------------------------------------------------------------------------------------------------
# one launch: its programs, tensor arguments and source sites


class Launch:
    """One kernel launch as the scheduler and the race detector see it."""

    def __init__(self, fn, grid: tuple[int, int, int], host: dict):
        code = getattr(fn, "__code__", None)
        self.kernel = getattr(fn, "__name__", "?")
        self.filename = code.co_filename if code else ""
        self.programs = [(x, y, z) for x in range(grid[0]) for y in range(grid[1]) for z in range(grid[2])]
        self.arguments = tensor_arguments.of_launch(host)
        self.sites: list[tuple[str, str | None]] = []  # (op, "file:line") by site id
        self._site_ids: dict[tuple[str, str | None], int] = {}

    def line(self) -> str | None:
        """file:line of the innermost kernel-source frame of the running program."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.filename:
                return f"{os.path.basename(self.filename)}:{frame.f_lineno}"
            frame = frame.f_back
        return None

    def site(self, op: str) -> int:
        key = (op, self.line())
        site = self._site_ids.get(key)
        if site is None:
            site = self._site_ids[key] = len(self.sites)
            self.sites.append(key)
        return site

    def locate(self, addr: int) -> tuple[str | None, int | None, tuple[int, ...] | None]:
        """(operand, element offset, coordinates) of a byte address; an element of an operand wins."""
        best = (None, None, None)
        for operand in self.arguments:
            if operand.ptr <= addr < operand.end:
                offset, coords = operand.locate(addr)
                if coords is not None:
                    return operand.name, offset, coords
                if best[0] is None:
                    best = (operand.name, offset, None)
        return best


# ---------------------------------------------------------------------------------------------------
# memory accesses


@dataclass(eq=False)
class Access:
    """The active lanes of one load, store or atomic."""

    op: str  # "load", "store", "volatile load", "atomic add", "atomic cas", "atomic load", ...
    addrs: np.ndarray  # byte addresses (uint64) of the lanes not masked off, flattened
    itemsize: int
    reads: bool
    writes: bool
    strong: bool = False  # atomic or volatile
    rmw: bool = False  # a read-modify-write: it continues release sequences
    sem: str | None = None  # atomics: "relaxed", "acquire", "release" or "acq_rel"
    scope: str | None = None  # atomics: "gpu", "cta" or "sys"
    wrote: np.ndarray | None = None  # a cas: per lane, whether it swapped
    operands: bytes = b""  # an atomic's value (and cas's comparand): repeating it must repeat these too

    def describe(self) -> str:
        if self.sem is None:
            return self.op
        return f"{self.op} ({self.sem}" + (f", {self.scope} scope)" if self.scope != "gpu" else ")")


_SEM = {"RELAXED": "relaxed", "ACQUIRE": "acquire", "RELEASE": "release", "ACQUIRE_RELEASE": "acq_rel"}
_SCOPE = {"GPU": "gpu", "CTA": "cta", "SYSTEM": "sys"}
_RMW = {"ADD": "add", "FADD": "add", "MAX": "max", "UMAX": "max", "MIN": "min", "UMIN": "min",
        "AND": "and", "OR": "or", "XOR": "xor", "XCHG": "xchg"}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _member(enum, table: dict) -> str:
    name = str(enum).rsplit(".", 1)[-1]
    return table.get(name, name.lower())


def _access(op: str, ptrs, mask, **kinds) -> Access:
    addrs = np.asarray(ptrs.data)
    if mask is None:
        lanes = addrs.reshape(-1)
    else:
        m = np.asarray(mask if isinstance(mask, np.ndarray) else mask.data, dtype=bool)  # 3.6 passes bare arrays
        lanes = addrs[np.broadcast_to(m, addrs.shape)]
    itemsize = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    return Access(op, lanes.astype(np.uint64, copy=False), itemsize, **kinds)


# ---------------------------------------------------------------------------------------------------
# the schedule of one launch


@dataclass(eq=False)
class _Previous:
    """A program's latest switch-point access, to tell a spin."""

    op: str
    operands: bytes
    addrs: np.ndarray
    memops: int  # the program's memory-access count when it ran
    unchanged: bool  # it left the values as it found them
    after: np.ndarray  # the values right after it


@dataclass(eq=False)
class _Task:
    index: int  # position in program-id order
    program_id: tuple[int, int, int]
    greenlet: object = None
    done: bool = False
    memops: int = 0
    previous: _Previous | None = None
    waiting: tuple[Access, np.ndarray, str | None] | None = None  # spinning on: access, values seen, line


@dataclass(frozen=True)
class RunRecord:
    """How one launch ran under ordered()."""

    kernel: str
    starts: tuple[tuple[int, int, int], ...]  # program ids in the order they started
    steps: tuple[tuple[int, int, int], ...]  # the running program after every switch to another one
    waits: int  # how many times a program was found spinning and made to wait


class _Run:
    def __init__(self, launch: Launch, rng: random.Random | None, observers: list):
        self.launch = launch
        self.rng = rng  # None: program-id order
        self.tasks = [_Task(i, pid) for i, pid in enumerate(launch.programs)]
        self.observers = [observer.launch(launch) for observer in observers]
        self.current: _Task | None = None
        self.starts: list[_Task] = []
        self.steps: list[_Task] = []
        self.waits = 0
        self.verdict: ConcurrencyError | None = None
        self.hub = None

    # in a program's greenlet ------------------------------------------------------------------------

    def access(self, access: Access, perform):
        task = self.current
        task.memops += 1
        if access.strong:
            self._switch_point(task, access)
            before = _values(access)
        result = perform()
        if access.strong:
            after = _values(access)
            task.previous = _Previous(access.op, access.operands, access.addrs, task.memops,
                                      np.array_equal(before, after), after)
        if self.observers:
            site = self.launch.site(access.describe())
            try:
                for observer in self.observers:
                    observer.access(task.index, access, site)
            except ConcurrencyError as e:
                self.verdict = e  # a jitted helper between here and the grid loop wraps it in InterpreterError
                raise
        if access.strong:
            self.hub.switch()  # others may act on it before this program goes on
        return result

    def _switch_point(self, task: _Task, access: Access) -> None:
        last = task.previous
        if (last is not None and last.unchanged and last.memops == task.memops - 1 and last.op == access.op
                and last.operands == access.operands and np.array_equal(last.addrs, access.addrs)
                and np.array_equal(_values(access), last.after)):
            task.waiting = (access, last.after, self.launch.line())
            self.waits += 1
        self.hub.switch()

    # in the launching greenlet -----------------------------------------------------------------------

    def execute(self, fn, args: dict, builder) -> None:
        import greenlet

        self.hub = greenlet.getcurrent()
        order = list(range(len(self.tasks)))
        if self.rng is not None:
            self.rng.shuffle(order)
        pending = deque(self.tasks[i] for i in order)
        try:
            while (task := self._pick(pending)) is not None:
                if task.greenlet is None:
                    pending.popleft()
                    self.starts.append(task)
                    task.greenlet = greenlet.greenlet(functools.partial(fn, **args), parent=self.hub)
                if task is not self.current:
                    self.steps.append(task)
                self.current = task
                builder.set_grid_idx(*task.program_id)
                task.greenlet.switch()
                if task.greenlet.dead:
                    task.done = True
                    for observer in self.observers:
                        observer.finished(task.index)
        except Exception:
            if self.verdict is not None:
                raise self.verdict from None
            raise
        finally:
            for task in self.starts:
                if not task.greenlet.dead:
                    task.greenlet.throw()  # GreenletExit unwinds the suspended program
            self.current = None

    def _runnable(self, task: _Task) -> bool:
        if task.done:
            return False
        if task.waiting is not None:
            access, seen, _ = task.waiting
            if np.array_equal(_values(access), seen):
                return False
            task.waiting = None
        return True

    def _pick(self, pending: deque) -> _Task | None:
        candidates = [t for t in self.starts if self._runnable(t)]
        if pending:
            candidates.append(pending[0])
        if not candidates:
            live = [t for t in self.starts if not t.done]
            if live:
                self.verdict = self._deadlock(live)
                raise self.verdict
            return None
        if self.rng is None:
            return self.current if self.current in candidates else min(candidates, key=lambda t: t.index)
        return self.rng.choice(candidates)

    def _deadlock(self, live: list[_Task]) -> Deadlock:
        waiting = []
        for task in live:
            access, seen, line = task.waiting
            operand, offset, coords = self.launch.locate(int(access.addrs[0]))
            value = seen[0].item() if seen.size else None
            waiting.append(Waiter(task.program_id, access.op, operand, offset, coords, line, value))
        finished = sum(t.done for t in self.starts)
        text = (f"deadlock in kernel '{self.launch.kernel}': every live program waits for a value that only another "
                f"waiting program could change ({finished} of {len(self.tasks)} programs had finished):\n  "
                + "\n  ".join(w.describe() for w in waiting))
        return Deadlock(text, kernel=self.launch.kernel, waiting=tuple(waiting), finished=finished)

    def record(self) -> RunRecord:
        return RunRecord(self.launch.kernel, tuple(t.program_id for t in self.starts),
                         tuple(t.program_id for t in self.steps), self.waits)


def _values(access: Access) -> np.ndarray:
    """The memory at the access's lanes now, as unsigned integers of its width."""
    dtype = np.dtype(_UINT.get(access.itemsize, np.uint8))
    n = access.addrs.shape
    return _INTERP._interpreter.load(access.addrs, np.ones(n, dtype=bool), np.zeros(n, dtype=dtype), dtype)


# ---------------------------------------------------------------------------------------------------
# contexts


class Ordered:
    """Context manager: launches inside run their programs under the schedule `order` draws.

    `runs` lists, per launch, the order programs started in and the program run after every switch."""

    def __init__(self, order: int):
        if not isinstance(order, int) or isinstance(order, bool):
            raise TypeError(f"order must be an int (0: program-id order, any other: a drawn schedule), got {order!r}")
        self.order = order
        self.runs: list[RunRecord] = []
        self._rng = None if order == 0 else random.Random(order)

    def __enter__(self) -> Ordered:
        if _INTERP is None:
            install()
        _state.contexts.append(self)
        return self

    def __exit__(self, *exc) -> bool:
        _state.contexts.remove(self)
        return False


def ordered(order: int) -> Ordered:
    """`with ordered(order): ...` runs every launch in the block under the schedule drawn from `order`
    (0: program-id order)."""
    return Ordered(order)


def observe(observer) -> None:
    """Have `observer.launch(launch)` called at each launch; what it returns gets `access(program index,
    Access, site id)` after every load, store and atomic, and `finished(program index)`."""
    if _INTERP is None:
        install()
    _state.observers.append(observer)


def forget(observer) -> None:
    _state.observers.remove(observer)


class _State:
    def __init__(self):
        self.contexts: list[Ordered] = []  # open ordered() blocks, innermost last
        self.observers: list = []
        self.run: _Run | None = None  # the launch whose programs are running as tasks
        self.inside: bool = False  # an atomic load or store runs through the masked load or store
        self.grid_only: int = 0  # open grid_only() blocks: launches check their grid and run no program


_state = _State()


# ---------------------------------------------------------------------------------------------------
# the grid loop


def _run_programs(fn, args: dict, grid: tuple[int, int, int], host: dict) -> None:
    builder = _INTERP.interpreter_builder
    context = _state.contexts[-1] if _state.contexts else None
    if together.worth_trying(fn, grid, _state.observers) and together.run(
            fn, args, grid, tensor_arguments.of_launch(host), builder):
        if context is not None:
            context.runs.append(_ran_whole(fn, grid, context._rng))
        return
    if context is None and not _state.observers:  # Triton's own loop
        for x in range(grid[0]):
            for y in range(grid[1]):
                for z in range(grid[2]):
                    builder.set_grid_idx(x, y, z)
                    fn(**args)
        return
    run = _Run(Launch(fn, grid, host), context._rng if context else None, _state.observers)
    outer, _state.run = _state.run, run
    try:
        run.execute(fn, args, builder)
    finally:
        _state.run = outer
        if context is not None:
            context.runs.append(run.record())


def _ran_whole(fn, grid: tuple[int, int, int], rng: random.Random | None) -> RunRecord:
    """The record of a launch whose programs had no switch point, so that each ran to its end once started
    (together.py ran them at once): started in the drawn order, with the draws _Run makes (a shuffle, then
    one choice among one candidate per start), so later launches draw what they would have."""
    programs = [(x, y, z) for x in range(grid[0]) for y in range(grid[1]) for z in range(grid[2])]
    order = list(range(len(programs)))
    if rng is not None:
        rng.shuffle(order)
        for i in order:
            rng.choice([i])
    starts = tuple(programs[i] for i in order)
    return RunRecord(getattr(fn, "__name__", "?"), starts, starts, 0)


# the most programs a CUDA grid takes along axes 0, 1 and 2 (compute capability 3.0 and later)
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def _check_grid(grid: tuple[int, int, int]) -> None:
    """A grid CUDA would refuse fails here too: the interpreter runs any grid, a GPU does not."""
    for axis, (count, limit) in enumerate(zip(grid, GRID_LIMITS)):
        if count > limit:
            raise GridTooLarge(
                f"the launch's grid {tuple(grid)} has {count} programs along axis {axis}; CUDA allows at most {limit} "
                "there, so this launch fails on every NVIDIA GPU (a batch on grid axis 1 or 2 stops at 65535 "
                "problems: put it on axis 0, or loop over it in the kernel)", grid=list(grid), axis=axis,
                limit=limit)


@contextlib.contextmanager
def grid_only():
    """Launches inside check their grid against CUDA's limits and run no program: how the interpreter
    takes a problem too large to run program by program (a batch past 65535 problems)."""
    install()
    _state.grid_only += 1
    try:
        yield
    finally:
        _state.grid_only -= 1


def _grid_call(self, *args_dev, **kwargs):
    """GridExecutor.__call__ of Triton 3.6 and 3.9, its grid loop replaced by _run_programs."""
    import triton

    interp = _INTERP
    argspec = inspect.getfullargspec(self.fn)
    kwargs = {k: v for k, v in kwargs.items() if k in argspec.args or k in argspec.kwonlyargs}
    args_hst, kwargs_hst = self._init_args_hst(args_dev, kwargs)
    for hook in self.pre_run_hooks:
        hook(*args_hst, **kwargs_hst)
    patch_scope = interp._patch_lang(self.fn)
    try:
        host = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
        args = {name: arg if name in self.constexprs else interp._implicit_cvt(arg) for name, arg in host.items()}
        grid = self.grid(args) if callable(self.grid) else self.grid
        assert len(grid) <= 3, "grid must have at most 3 dimensions"
        grid = tuple(grid) + (1,) * (3 - len(grid))
        _check_grid(grid)
        if _state.grid_only:
            self._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)
            return
        interp.interpreter_builder.set_grid_dim(*grid)
        try:
            _run_programs(self.fn, args, grid, host)
        except (ConcurrencyError, GridTooLarge):
            raise
        except Exception as e:
            if triton.knobs.compilation.front_end_debugging:
                raise
            raise interp.InterpreterError(repr(e)) from e
    finally:
        patch_scope.restore()
    self._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)


# ---------------------------------------------------------------------------------------------------
# builder hooks


def _through(original, make_access):
    """Route a builder memory operation through the running launch's schedule, if there is one."""

    @functools.wraps(original)
    def op(self, *args, **kwargs):
        run = _state.run
        if run is None or _state.inside:
            return original(self, *args, **kwargs)
        access, perform = make_access(lambda: original(self, *args, **kwargs), *args, **kwargs)
        return run.access(access, perform)

    return op


def _load(perform, ptrs, mask, other, *rest, **kwargs):
    volatile = bool(kwargs["is_volatile"] if "is_volatile" in kwargs else (rest[-1] if rest else False))
    return _access("volatile load" if volatile else "load", ptrs, mask, reads=True, writes=False,
                   strong=volatile), perform


def _store(perform, ptrs, value, mask, *rest, **kwargs):
    return _access("store", ptrs, mask, reads=False, writes=True), perform


def _rmw(perform, rmw_op, ptr, val, mask, sem, scope):
    access = _access("atomic " + _member(rmw_op, _RMW), ptr, mask, reads=True, writes=True, strong=True, rmw=True,
                     sem=_member(sem, _SEM), scope=_member(scope, _SCOPE), operands=_bytes(val))
    return access, perform


def _cas(perform, ptr, cmp, val, sem, scope):
    access = _access("atomic cas", ptr, None, reads=True, writes=True, strong=True, rmw=True,
                     sem=_member(sem, _SEM), scope=_member(scope, _SCOPE), operands=_bytes(cmp) + _bytes(val))

    def swapped():
        old = perform()
        access.wrote = (np.asarray(old.data) == np.broadcast_to(np.asarray(cmp.data), np.shape(old.data))).reshape(-1)
        return old

    return access, swapped


def _bytes(handle) -> bytes:
    return np.ascontiguousarray(handle.data).tobytes()


def _nested(perform):
    """Run an atomic load or store whose body goes through the masked load or store hooks."""

    def run():
        outer, _state.inside = _state.inside, True
        try:
            return perform()
        finally:
            _state.inside = outer

    return run


def _atomic_load(perform, ptr, mask, sem, scope):
    return _access("atomic load", ptr, mask, reads=True, writes=False, strong=True, sem=_member(sem, _SEM),
                   scope=_member(scope, _SCOPE)), _nested(perform)


def _atomic_store(perform, ptr, val, mask, sem, scope):
    return _access("atomic store", ptr, mask, reads=False, writes=True, strong=True, sem=_member(sem, _SEM),
                   scope=_member(scope, _SCOPE), operands=_bytes(val)), _nested(perform)


_HOOKS = {"create_masked_load": _load, "create_masked_store": _store, "create_atomic_rmw": _rmw,
          "create_atomic_cas": _cas}
_HOOKS_IF_PRESENT = {"create_atomic_load": _atomic_load, "create_atomic_store": _atomic_store}  # Triton 3.9


# ---------------------------------------------------------------------------------------------------
# installation


_INTERP = None  # triton.runtime.interpreter, once installed
_HEADER: str | None = None


def _interpreter_module():
    if os.environ.get("TRITON_INTERPRET", "0").strip().lower() not in ("1", "true", "on", "yes"):
        raise SchedulerUnavailable("the program scheduler needs Triton's CPU interpreter (TRITON_INTERPRET=1 set "
                                   "before triton is imported, e.g. backends.activate('interpreter'))")
    from triton.language import standard
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    if isinstance(standard.zeros, JITFunction):
        raise SchedulerUnavailable("triton was imported before TRITON_INTERPRET was set, so kernels are compiled, "
                                   "not interpreted; choose the interpreter before importing triton")
    return interpreter


def _require(interp, version: str) -> None:
    """Everything the scheduler patches or calls must be there, under the names it knows."""
    need = {
        "GridExecutor": ("__call__", "_init_args_hst", "_restore_args_dev"),
        "InterpreterBuilder": ("set_grid_idx", "set_grid_dim", *_HOOKS),
    }
    missing = [f"{owner}.{name}" for owner, names in need.items() for name in names
               if name not in getattr(interp, owner).__dict__]
    missing += [name for name in ("_patch_lang", "_implicit_cvt", "interpreter_builder", "InterpreterError",
                                  "_interpreter") if not hasattr(interp, name)]
    if not missing and not hasattr(interp._interpreter, "load"):
        missing.append("_interpreter.load")
    if missing:
        raise SchedulerUnavailable(f"the program scheduler cannot install on Triton {version}: its interpreter has "
                                   f"no {', '.join(missing)} (renamed or removed; properties/interpreter/schedule.py "
                                   "needs them)")
    call = interp.GridExecutor.__dict__["__call__"]
    if getattr(call, "__module__", None) != interp.__name__ or call.__qualname__ != "GridExecutor.__call__":
        raise SchedulerUnavailable(
            f"GridExecutor.__call__ is already replaced by {call.__module__}.{call.__qualname__}; schedule.install() "
            "must run first (at interpreter activation, before any bounds_checked() block is open)")


def install() -> str:
    """Patch the interpreter for ordered() and races.checked(), then probe that it took. Idempotent;
    returns the header line."""
    global _INTERP, _HEADER
    if _HEADER is not None:
        return _HEADER
    interp = _interpreter_module()
    import triton

    _require(interp, triton.__version__)
    builder = interp.InterpreterBuilder
    hooks = {name: make for name, make in {**_HOOKS, **_HOOKS_IF_PRESENT}.items() if name in builder.__dict__}
    saved = {(builder, name): builder.__dict__[name] for name in hooks}
    saved[(interp.GridExecutor, "__call__")] = interp.GridExecutor.__dict__["__call__"]
    for name, make in hooks.items():  # around whatever is there: the interpreter fixes' patches included
        setattr(builder, name, _through(builder.__dict__[name], make))
    interp.GridExecutor.__call__ = _grid_call
    _INTERP = interp
    try:
        _probe(triton.__version__)
    except BaseException:
        for (owner, name), original in saved.items():
            setattr(owner, name, original)
        _INTERP = None
        raise
    _HEADER = (f"gemm program scheduler: installed on Triton {triton.__version__} (cooperative programs inside "
               "ordered() and races.checked(); switch points at atomics and volatile loads)")
    return _HEADER


def _probe(version: str) -> None:
    """Run two tiny kernels under the scheduler: a ticket counter (drawn orders must reorder programs,
    order 0 must not) and a spin-wait on a later program (a wait must not block the interpreter)."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def tickets(counter_ptr, seen_ptr):
        ticket = tl.atomic_add(counter_ptr, 1)
        tl.store(seen_ptr + ticket, tl.program_id(0))

    @triton.jit
    def wait_for_last(flag_ptr, out_ptr, LAST: tl.constexpr):
        if tl.program_id(0) == LAST:
            tl.atomic_xchg(flag_ptr, 1, sem="release")
        else:
            seen = tl.atomic_add(flag_ptr, 0, sem="acquire")
            tries = 0
            while seen == 0 and tries < 100:  # bounded, so a broken scheduler fails the probe instead of hanging
                seen = tl.atomic_add(flag_ptr, 0, sem="acquire")
                tries += 1
            tl.store(out_ptr + tl.program_id(0), seen)

    def run_tickets(order: int) -> list[int]:
        counter, seen = torch.zeros(1, dtype=torch.int32), torch.full((3,), -1, dtype=torch.int32)
        with ordered(order):
            tickets[(3,)](counter, seen)
        return seen.tolist()

    fail = f"the program scheduler does not work on Triton {version}: "
    in_order = run_tickets(0)
    if in_order != [0, 1, 2]:
        raise SchedulerUnavailable(fail + f"order 0 ran programs as {in_order}, not in program-id order "
                                   "(GridExecutor.__call__ or InterpreterBuilder.set_grid_idx)")
    if all(run_tickets(order) == [0, 1, 2] for order in range(1, 16)):
        raise SchedulerUnavailable(fail + "no drawn order reordered programs (GridExecutor.__call__ or "
                                   "InterpreterBuilder.create_atomic_rmw is not intercepted)")
    for order in range(4):
        flag, out = torch.zeros(1, dtype=torch.int32), torch.zeros(3, dtype=torch.int32)
        with ordered(order):
            wait_for_last[(3,)](flag, out, LAST=2)
        if out[:2].tolist() != [1, 1]:
            raise SchedulerUnavailable(fail + f"under order {order} a program waiting for program 2's flag read "
                                       f"{out[:2].tolist()} (spin-waits are not switch points: "
                                       "InterpreterBuilder.create_atomic_rmw)")
