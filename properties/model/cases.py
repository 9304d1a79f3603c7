"""The case model: a GemmCase is a frozen, JSON-serialisable description of one GEMM problem, and
`materialize` derives its tensors from it deterministically.

Every operand is a strided view inside a larger 1-D buffer with a guard band on both sides:
  A, B   the guard bands and any padding hold poison (NaN for floats, the minimum for integers), so an
         unmasked read that leaks into a valid output shows;
  C      the guard bands and padding hold a sentinel, and C's own elements are pre-filled with NaN
         (or the integer minimum), so writes outside C and elements never written both show.
Each buffer is snapshotted before the launch so the oracles can compare byte for byte after it.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property

import numpy as np
import torch

from gemm_fuzz.kernels.operation import PLAIN, Operation
from gemm_fuzz.properties import phases
from gemm_fuzz.properties.model import profiles
from gemm_fuzz.properties.model.routing import DISTRIBUTIONS as ROUTES
from gemm_fuzz.reference import bounds
from gemm_fuzz.reference.formats import UINT8, Format, by_name, name_of

GUARD = 64  # elements of guard band before and after every operand


@dataclass(frozen=True)
class Layout:
    """How a logical R x C matrix sits in its buffer."""

    order: str = "row"  # "row": a row's elements are adjacent; "col": a column's are
    pad: int = 0  # extra elements in the leading dimension (lda = minimal + pad)
    step: int = 1  # distance between adjacent elements of the inner dimension (2: every other one)
    offset: int = 0  # extra storage offset in elements (misaligns the data pointer when odd)
    # "rows": every row aliases row 0 (stride 0); "cols": every column aliases column 0; "batch": every
    # problem of a batch aliases the first (batch stride 0)
    broadcast: str = ""
    # batched: elements between the end of one problem and the start of the next (negative: consecutive
    # problems overlap in memory, inputs only)
    batch_gap: int = 0

    def __post_init__(self):
        if self.order not in ("row", "col"):
            raise ValueError(f"layout order must be 'row' or 'col', got {self.order!r}")
        if self.broadcast not in ("", "rows", "cols", "batch"):
            raise ValueError(f"layout broadcast must be '', 'rows', 'cols' or 'batch', got {self.broadcast!r}")
        if self.pad < 0 or self.step < 1 or self.offset < 0:
            raise ValueError(f"layout needs pad >= 0, step >= 1, offset >= 0; got {self}")

    def strides(self, rows: int, cols: int) -> tuple[int, int]:
        if self.order == "row":
            s0, s1 = max(cols, 1) * self.step + self.pad, self.step
        else:
            s0, s1 = self.step, max(rows, 1) * self.step + self.pad
        if self.broadcast == "rows":
            s0 = 0
        elif self.broadcast == "cols":
            s1 = 0
        return s0, s1

    def batch_stride(self, rows: int, cols: int) -> int:
        """The distance between consecutive problems of a batch: past one problem's span by `batch_gap`
        (at least one element), or 0 for a broadcast one."""
        if self.broadcast == "batch":
            return 0
        s0, s1 = self.strides(rows, cols)
        span = (rows - 1) * s0 + (cols - 1) * s1 if rows and cols else 0
        return max(1, span + 1 + self.batch_gap)

    def describe(self) -> str:
        text = self.order
        if self.pad:
            text += f"+pad{self.pad}"
        if self.step != 1:
            text += f"/step{self.step}"
        if self.offset:
            text += f"@{self.offset}"
        if self.broadcast:
            text += f"|bcast-{self.broadcast}"
        if self.batch_gap:
            text += f"|gap{self.batch_gap}"
        return text


ROW = Layout()
COL = Layout("col")


@dataclass(frozen=True)
class Vector:
    """How a bias sits in its buffer: its stride (0: one value for every element) and storage offset."""

    stride: int = 1
    offset: int = 0

    def __post_init__(self):
        if self.stride < 0 or self.offset < 0:
            raise ValueError(f"a bias needs stride >= 0 and offset >= 0; got {self}")

    def describe(self) -> str:
        return f"stride{self.stride}" + (f"@{self.offset}" if self.offset else "")


# the scalars the strategies draw for alpha and beta, simplest first
SCALARS = (1.0, 0.0, -1.0, 2.0, 0.5, -0.75, 3.0, 0.1)


# the values a case's scales take (kernels/operation.py: scaled operands), simplest first:
#   pow2      powers of two from 1 to 16: every scaling exact, integer codes stay integers
#   normal    fp32 values spread over 2**-8 to 2**4, as amax / 448 calibrations give
#   specials  normal, with 0, a subnormal, the largest fp32 and NaN placed over them
SCALE_PROFILES = ("pow2", "normal", "specials")


@dataclass(frozen=True)
class Epilogue:
    """The values of a case's epilogue, for a variant whose operation has one (kernels/operation.py):
    its scalars, where its extra operands sit, and (scaled operands) how the scales are laid out and
    which values they take. Which of them the launch uses is the operation's. A 1-D scale tensor sits as
    the one row of its layout: its stride is the layout's column stride."""

    alpha: float = 1.0
    beta: float = 1.0
    bias: Vector = field(default=Vector())
    c_in: Layout = field(default=ROW)
    residual: Layout = field(default=ROW)
    pre: Layout = field(default=ROW)  # the second output
    # the bias (or, without one, C_in) holds the activations' landmarks (profiles.LANDMARKS): 0, their
    # saturation, where gelu's tanh approximation is furthest from erf's, near overflow
    landmarks: bool = False
    a_scale: Layout = field(default=ROW)
    b_scale: Layout = field(default=ROW)
    scales: str = "pow2"  # one of SCALE_PROFILES

    def __post_init__(self):
        if self.scales not in SCALE_PROFILES:
            raise ValueError(f"epilogue scales must be one of {', '.join(SCALE_PROFILES)}, got {self.scales!r}")
        for name in ("alpha", "beta"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"epilogue {name} must be finite, got {getattr(self, name)}")
        for name in ("pre",):
            if getattr(self, name).broadcast or getattr(self, name).batch_gap < 0:
                raise ValueError(f"the output {name} cannot be broadcast or overlap itself")

    def describe(self) -> str:
        """What departs from the plainest epilogue (alpha = beta = 1, plain extras), in words."""
        parts = [f"{name}={getattr(self, name):g}" for name in ("alpha", "beta") if getattr(self, name) != 1.0]
        if self.bias != Vector():
            parts.append(f"bias:{self.bias.describe()}")
        parts += [f"{name}:{getattr(self, name).describe()}"
                  for name in ("c_in", "residual", "pre", "a_scale", "b_scale") if getattr(self, name) != ROW]
        parts += [f"scales:{self.scales}"] if self.scales != "pow2" else []
        return " ".join(parts + (["landmarks"] if self.landmarks else []))

    @classmethod
    def from_dict(cls, data: dict) -> Epilogue:
        data = dict(data)
        data["bias"] = Vector(**data["bias"]) if "bias" in data else Vector()
        for name in ("c_in", "residual", "pre", "a_scale", "b_scale"):
            if name in data:
                data[name] = Layout(**data[name])
        return cls(**data)




@dataclass(frozen=True)
class Groups:
    """A grouped case's groups (kernels/operation.py: `grouped`). Ragged: the rows of A a group, in
    order (they sum to M). Routed: M tokens sent to `top_k` of `count` experts by a router drawn from
    the case's seed as `route` says (properties/model/routing.py)."""

    count: int  # G groups, or E experts
    sizes: tuple[int, ...] = ()  # ragged
    top_k: int = 0  # routed
    route: str = "uniform"  # routed: one of ROUTES
    local: tuple[int, int] = (0, 0)  # routed, expert parallelism: this rank holds experts [lo, hi); (0, 0): all
    shortcut: bool = False  # routed: sorted_token_ids only as long as in use (the small-batch path), not the worst case
    # problems (tutorial 08's form): each problem's (N_g, K_g); its M_g is its size. Problem g is A's rows of
    # group g, first K_g columns, times B[g]'s first K_g rows and N_g columns, into C's rows, first N_g columns
    dims: tuple[tuple[int, int], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "sizes", tuple(self.sizes))
        object.__setattr__(self, "local", tuple(self.local))
        object.__setattr__(self, "dims", tuple((int(n), int(k)) for n, k in self.dims))
        if self.dims and (len(self.dims) != self.count or not self.sizes or min(min(d) for d in self.dims) < 0):
            raise ValueError(f"problems: {self.count} sizes and (N, K) pairs >= 0 expected, got {self.sizes}, "
                             f"{self.dims}")
        if self.count < 1:
            raise ValueError(f"a grouped case has at least one group, got {self.count}")
        if self.sizes and (len(self.sizes) != self.count or min(self.sizes) < 0):
            raise ValueError(f"ragged groups: {self.count} sizes >= 0 expected, got {self.sizes}")
        if self.top_k:
            if self.route not in ROUTES:
                raise ValueError(f"route {self.route!r}; expected one of {', '.join(ROUTES)}")
            if not 1 <= self.top_k <= (self.count if self.route != "repeated" else 8):
                raise ValueError(f"top_k {self.top_k} for {self.count} experts")
            if self.route == "all" and self.top_k != self.count:
                raise ValueError(f"route 'all' sends every token to all {self.count} experts: top_k = {self.count}")
            lo, hi = self.local
            if (lo, hi) != (0, 0) and not 0 <= lo < hi <= self.count:
                raise ValueError(f"local experts [{lo}, {hi}) of {self.count}")

    @property
    def routed(self) -> bool:
        return self.top_k > 0

    def starts(self) -> np.ndarray:
        """Ragged groups and problems: where each group's rows begin, and the end (G + 1 offsets)."""
        return np.concatenate([[0], np.cumsum(self.sizes)]).astype(int)

    @property
    def problems(self) -> bool:
        """Independent problems of their own M, N and K (grouped="problems")."""
        return bool(self.dims)

    def spanning(self, n: int, k: int) -> Groups:
        """Problems whose largest N and K are n and k: each cut to them, and where none reaches one, the
        problem with the largest grown to it (a case's N and K resized)."""
        if not self.problems:
            return self
        dims = [[min(pn, n), min(pk, k)] for pn, pk in self.dims]
        for axis, top in ((0, n), (1, k)):
            widest = max(range(len(dims)), key=lambda g: dims[g][axis])
            dims[widest][axis] = top
        return replace(self, dims=tuple(map(tuple, dims)))

    def covering(self, m: int) -> Groups:
        """Ragged groups covering m rows: the last group grown, or the groups cut from the end."""
        if self.routed or m == sum(self.sizes):
            return self
        if m > sum(self.sizes):
            return replace(self, sizes=(*self.sizes[:-1], self.sizes[-1] + m - sum(self.sizes)))
        kept, left = [], m
        for size in self.sizes:
            kept.append(min(size, left))
            left -= kept[-1]
        return replace(self, sizes=tuple(kept))

    def local_experts(self) -> np.ndarray:
        local = np.zeros(self.count, dtype=bool)
        lo, hi = self.local if self.local != (0, 0) else (0, self.count)
        local[lo:hi] = True
        return local

    def describe(self) -> str:
        if self.problems:
            return "problems=" + ",".join(f"{m}x{n}x{k}" for m, (n, k) in zip(self.sizes, self.dims))
        if not self.routed:
            return "groups=" + ",".join(map(str, self.sizes))
        return (f"experts={self.count} top_k={self.top_k} route={self.route}"
                + (f" local={self.local[0]}:{self.local[1]}" if self.local != (0, 0) else "")
                + (" shortcut" if self.shortcut else ""))


@dataclass(frozen=True)
class GemmCase:
    M: int
    N: int
    K: int
    dtype: str  # input dtype name: fp16, bf16, fp32, fp8e4m3, fp8e5m2, int8
    out_dtype: str  # output dtype name
    a: Layout = field(default=ROW)
    b: Layout = field(default=ROW)
    c: Layout = field(default=ROW)
    profile: str = "ones"
    seed: int = 0
    specials: bool = False  # NaN, +-Inf and -0 placed over the profile's values (profiles.with_specials)
    # the order the programs of each launch run in, in the interpreter: 0 is program-id order, any
    # other value seeds a drawn schedule of cooperative programs (properties/interpreter/schedule.py)
    order: int = 0
    # the variant's configuration (its registry's configuration space), as (key, value) pairs; () is
    # the default for the device and dtype
    config: tuple[tuple[str, object], ...] = ()
    # batched: the number of problems (0: one 2-D problem); A is batch x M x K, and so on
    batch: int = 0
    epilogue: Epilogue | None = None  # for a variant whose operation has an epilogue; None: Epilogue()
    groups: Groups | None = None  # for a grouped variant: its groups, or its tokens' routing

    def __post_init__(self):
        if self.groups is not None and not self.groups.routed and sum(self.groups.sizes) != self.M:
            raise ValueError(f"ragged groups of {self.groups.sizes} rows cover {sum(self.groups.sizes)} rows, "
                             f"not M = {self.M}")
        if self.groups is not None and self.groups.problems:
            if max((n for n, _ in self.groups.dims), default=0) != self.N or max(
                    (k for _, k in self.groups.dims), default=0) != self.K:
                raise ValueError(f"problems {self.groups.dims} (N, K): their largest N and K must be the case's, "
                                 f"{self.N} and {self.K}")
            if any(lay.order != "row" or lay.step != 1 or lay.broadcast for lay in (self.a, self.b, self.c)):
                raise ValueError("problems are row-major with unit column stride (padded or offset rows allowed)")
        if self.epilogue == Epilogue():
            object.__setattr__(self, "epilogue", None)  # one way to write the plainest epilogue
        if self.batch < 0:
            raise ValueError(f"batch must be >= 0 (0: one 2-D problem), got {self.batch}")
        if not (self.batch or self.groups) and any(lay.broadcast == "batch" or lay.batch_gap for lay in self.layouts()):
            raise ValueError("a batch layout (broadcast over the batch, a gap between problems) needs batch >= 1")
        if self.c.batch_gap < 0:
            raise ValueError("C's problems cannot overlap in memory")
        if self.order < 0:
            raise ValueError(f"order must be >= 0 (0: program-id order), got {self.order}")
        if min(self.M, self.N, self.K) < 0:
            raise ValueError(f"M, N and K must be >= 0, got {self.M}, {self.N}, {self.K}")
        by_name(self.dtype), by_name(self.out_dtype)
        if self.c.broadcast:
            raise ValueError("C cannot be broadcast: two of its elements would share memory")
        if self.specials and not by_name(self.dtype).is_float:
            raise ValueError(f"{self.dtype} inputs have no NaN or Inf: specials apply to float inputs only")
        if self.profile not in profiles.available(by_name(self.dtype)):
            raise ValueError(f"value profile {self.profile!r} does not apply to {self.dtype} inputs; expected one of "
                             f"{', '.join(profiles.available(by_name(self.dtype)))}")

    def layouts(self) -> list[Layout]:
        """Every operand's layout: A, B, C, then the epilogue's matrices."""
        extra = [self.epilogue.c_in, self.epilogue.residual, self.epilogue.pre] if self.epilogue else []
        return [self.a, self.b, self.c, *extra]

    @property
    def problems(self) -> int:
        """How many problems (1 for a 2-D case)."""
        return max(self.batch, 1)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict) -> GemmCase:
        data = dict(data)
        for name in ("a", "b", "c"):
            if name in data:
                data[name] = Layout(**data[name])
        if data.get("epilogue") is not None:
            data["epilogue"] = Epilogue.from_dict(data["epilogue"])
        if data.get("groups") is not None:
            data["groups"] = Groups(**data["groups"])
        if "config" in data:
            data["config"] = tuple((str(k), v) for k, v in data["config"])
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> GemmCase:
        return cls.from_dict(json.loads(text))

    def describe(self) -> str:
        return (
            f"{self.M}x{self.N}x{self.K}" + (f" batch={self.batch}" if self.batch else "")
            + f" {self.dtype}->{self.out_dtype} A:{self.a.describe()} "
            f"B:{self.b.describe()} C:{self.c.describe()} {self.profile}{'+specials' if self.specials else ''} "
            f"seed={self.seed}"
            + (f" order={self.order}" if self.order else "")
            + (" config=" + ",".join(f"{k}={v}" for k, v in self.config) if self.config else "")
            + (f" {self.epilogue.describe()}" if self.epilogue and self.epilogue.describe() else "")
            + (f" {self.groups.describe()}" if self.groups else "")
        )

    def replace(self, **changes) -> GemmCase:
        return replace(self, **changes)


@dataclass
class Guarded:
    """One operand: a view into a guarded buffer, and what the buffer held before the launch (a copy on
    the buffer's device, so the comparison after it moves no data to the host unless something changed)."""

    name: str
    view: torch.Tensor
    buffer: torch.Tensor  # 1-D, the whole allocation
    before: torch.Tensor  # a copy of the buffer before the launch
    members: np.ndarray | None = None  # bool over the view: its elements (None: all; problems: theirs alone)

    def changed(self) -> np.ndarray:
        """Byte-level: buffer positions (element indices) whose bits differ from the snapshot."""
        return torch.nonzero(raw(self.buffer) != raw(self.before)).flatten().cpu().numpy()

    def snapshot(self) -> None:
        """Take what the buffer holds now as what it held before the launch."""
        self.before = self.buffer.clone()

    @cached_property
    def elements(self) -> np.ndarray:
        """bool over the buffer: True at the view's elements (computed when a finding needs it)."""
        elements = np.zeros(self.buffer.numel(), dtype=bool)
        index = _element_index(tuple(self.view.shape), self.view.stride(), self.view.storage_offset())
        elements[index if self.members is None else index[self.members.ravel()]] = True
        return elements


@dataclass
class Operands:
    """A case's operands, guarded: A, B, C, and the extras its variant's operation takes (by the names
    kernels/operation.py gives them: bias, c_in, residual, the second output pre; alpha and beta)."""

    case: GemmCase
    a: Guarded
    b: Guarded
    c: Guarded
    extras: dict[str, Guarded] = field(default_factory=dict)
    scalars: dict[str, float] = field(default_factory=dict)
    operation: Operation = PLAIN

    def keywords(self) -> dict:
        """What the launcher receives besides a, b and c."""
        return {**{name: g.view for name, g in self.extras.items()}, **self.scalars}

    def inputs(self) -> list[Guarded]:
        return [self.a, self.b, *(g for name, g in self.extras.items() if name != "pre")]

    def outputs(self) -> list[Guarded]:
        return [self.c, *(g for name, g in self.extras.items() if name == "pre")]


def poison(fmt: Format) -> float:
    """What surrounds A and B: NaN for floats, the most negative integer otherwise (bytes of packed int4
    codes: 0xFF, two codes 15, far from the zero point)."""
    if fmt.is_float:
        return float("nan")
    return fmt.max if fmt.dtype == torch.uint8 else -fmt.max - 1


# C's elements start as a quiet NaN with a payload no arithmetic produces (computed NaNs carry the
# canonical payload), so an element never written is told apart from one computed as NaN.
_UNWRITTEN_NAN = {16: 0x7E5A, 32: 0x7FC5A5A5}
_UNWRITTEN_BF16 = 0x7FDA
# a same-width signed integer dtype to compare raw bits in (any device, any strides)
_RAW = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def unwritten_bits(fmt: Format) -> int:
    """The bit pattern C's elements hold before the launch (as an unsigned integer)."""
    if not fmt.is_float:
        return (-int(fmt.max) - 1) & ((1 << (fmt.p + 1)) - 1)
    if fmt.name == "bf16":
        return _UNWRITTEN_BF16
    return _UNWRITTEN_NAN[torch.finfo(fmt.dtype).bits]


def raw(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bits as same-width signed integers, where it lives (a view: nothing is copied)."""
    return t.detach().view(_RAW[t.element_size()])


def signed(bits: int, width_bytes: int) -> int:
    """An unsigned bit pattern as the signed integer `raw` shows it."""
    top = 1 << (8 * width_bytes)
    return bits - top if bits >= top // 2 else bits


def bits_of(t: torch.Tensor) -> np.ndarray:
    """The raw bits of a tensor's elements as unsigned integers, in its logical shape, on the host."""
    raw = t.detach().cpu().contiguous()
    width = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32, 8: torch.uint64}[raw.element_size()]
    return raw.view(width).numpy().astype(np.uint64)


def sentinel(fmt: Format) -> float:
    """What surrounds C: a value distinct from the pre-fill."""
    return fmt.max


def _strides(shape: tuple[int, ...], layout: Layout | Vector) -> tuple[int, ...]:
    if isinstance(layout, Vector):
        return (layout.stride,)
    rows, cols = shape[-2:]
    inner = layout.strides(rows, cols)
    return (layout.batch_stride(rows, cols), *inner) if len(shape) == 3 else inner


def _place(shape: tuple[int, ...], layout: Layout | Vector) -> tuple[tuple[int, ...], int, int]:
    """Strides, first element offset and buffer size of a view laid out in a guarded buffer."""
    strides = _strides(shape, layout)
    span = sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    start = GUARD + layout.offset
    return strides, start, start + span + 1 + GUARD


def _element_index(shape: tuple[int, ...], strides: tuple[int, ...], start: int) -> np.ndarray:
    """The buffer positions of a view's elements, in its logical order."""
    index = np.full((), start, dtype=np.int64)
    for n, stride in zip(shape, strides):
        index = index[..., None] + np.arange(n, dtype=np.int64) * stride
    return index.ravel()


def _filled(size: int, value: float, fmt: Format, device) -> torch.Tensor:
    # the value converted as a float64 tensor converts, on the device
    return torch.full((size,), value, dtype=torch.float64, device=device).to(fmt.dtype)


@phases.timed("materialize")
def guarded_input(name: str, layout: Layout | Vector, fmt: Format, values: np.ndarray | tuple, device) -> Guarded:
    """An input operand holding `values` (float64, exactly representable in `fmt`, consistent with a
    broadcast layout), in a buffer on `device` whose surroundings and padding hold poison. Where the
    problems of a batch overlap in memory, each is written in turn: the later one's values stand where
    they share elements (the reference reads the operand as it is). `values` a shape: poison throughout."""
    shape = values.shape if isinstance(values, np.ndarray) else values
    strides, start, size = _place(shape, layout)
    buffer = _filled(size, poison(fmt), fmt, device)
    if isinstance(values, np.ndarray) and values.size:
        # write through a non-aliasing view: a broadcast operand stores one row (column, problem)
        drawn = _drawn_shape(shape, layout)
        host = torch.from_numpy(np.array(values[tuple(slice(0, n) for n in drawn)])).to(fmt.dtype)
        if len(shape) == 3 and layout.batch_gap < 0:
            for p in range(drawn[0]):
                torch.as_strided(buffer, drawn[1:], strides[1:], start + p * strides[0]).copy_(host[p])
        else:
            torch.as_strided(buffer, drawn, strides, start).copy_(host)
    return Guarded(name, torch.as_strided(buffer, shape, strides, start), buffer, buffer.clone())


@phases.timed("materialize")
def guarded_output(name: str, shape: tuple[int, ...], layout: Layout, fmt: Format, device,
                   members: np.ndarray | None = None) -> Guarded:
    """An output operand on `device` pre-filled with the unwritten pattern, in a buffer whose
    surroundings and padding hold the sentinel; `members` (bool over the view): only those are its
    elements, the others hold the sentinel as padding does."""
    strides, start, size = _place(shape, layout)
    buffer = _filled(size, sentinel(fmt), fmt, device)
    if all(shape):
        # the pattern's bits are what matter: written through a same-width integer view
        view = torch.as_strided(raw(buffer), shape, strides, start)
        unwritten = signed(unwritten_bits(fmt), buffer.element_size())
        if members is None:
            view.fill_(unwritten)
        else:
            view[torch.as_tensor(members, device=buffer.device)] = unwritten
    return Guarded(name, torch.as_strided(buffer, shape, strides, start), buffer, buffer.clone(), members)


def input_values(case: GemmCase, operation: Operation = PLAIN) -> tuple[np.ndarray, np.ndarray]:
    """The float64 values drawn for A (M x K) and B (K x N; gated: K x 2N), before quantization; batched,
    one such pair a problem (batch x M x K, ...)."""
    fmt, out = by_name(case.dtype), by_name(case.out_dtype)
    exact_bits = bounds.exact_sum_bits(case.dtype)
    n = operation.n_columns(case.N)
    if not case.batch:
        return _problem_values(case, fmt, out, exact_bits, n, ())
    pairs = [_problem_values(case, fmt, out, exact_bits, n, (p,)) for p in range(min(case.batch, DRAWN_PROBLEMS))]
    a, b = np.stack([a for a, _ in pairs]), np.stack([b for _, b in pairs])
    rest = case.batch - len(pairs)
    if rest:  # the others at once, without specials: a batch past the grid's limits draws in a second
        shapes = [(rest, *_drawn_shape((case.M, case.K), case.a)), (rest, *_drawn_shape((case.K, n), case.b))]
        more = [profiles.generate(case.profile, shape, fmt, case.K, np.random.default_rng([case.seed, i, rest]), out,
                                  exact_bits, operand, batched=True)
                for i, (shape, operand) in enumerate(zip(shapes, "ab"))]
        a = np.concatenate([a, np.broadcast_to(more[0], (rest, case.M, case.K))])
        b = np.concatenate([b, np.broadcast_to(more[1], (rest, case.K, n))])
    return a, b


# the problems of a batch whose values are drawn one by one (specials included); past them, at once
DRAWN_PROBLEMS = 256


def _problem_values(case: GemmCase, fmt: Format, out: Format, exact_bits: int, n: int, problem: tuple):
    a_shape = _drawn_shape((case.M, case.K), case.a)
    b_shape = _drawn_shape((case.K, n), case.b)
    a, b = (profiles.generate(case.profile, shape, fmt, case.K, np.random.default_rng([case.seed, i, *problem]),
                              out, exact_bits, operand)
            for i, (shape, operand) in enumerate(((a_shape, "a"), (b_shape, "b"))))
    if case.specials:
        a, b = profiles.with_specials(a, b, fmt, np.random.default_rng([case.seed, 2, *problem]))
    return np.broadcast_to(a, (case.M, case.K)), np.broadcast_to(b, (case.K, n))


def _drawn_shape(shape: tuple[int, ...], layout: Layout | Vector) -> tuple[int, ...]:
    """The part of an operand's values that is drawn: one row (column, problem, element) of a broadcast one."""
    if isinstance(layout, Vector):
        return (1,) if layout.stride == 0 else shape
    *batch, rows, cols = shape
    if batch and layout.broadcast == "batch":
        batch = [1]
    return (*batch, 1 if layout.broadcast == "rows" else rows, 1 if layout.broadcast == "cols" else cols)


def _extra_shapes(case: GemmCase, operation: Operation) -> dict[str, tuple[int, ...]]:
    """The shapes of the epilogue's inputs the operation has (bias, c_in, residual)."""
    batch = (case.batch,) if case.batch else ()
    groups = (case.groups.count,) if case.groups else ()  # grouped: a bias a group
    shapes = {"bias": (*groups, case.N if operation.bias == "n" else case.M), "c_in": (*batch, case.M, case.N),
              "residual": (*batch, case.M, case.N)}
    present = {"bias": operation.bias is not None, "c_in": operation.has_c_in, "residual": operation.residual}
    return {name: shape for name, shape in shapes.items() if present[name]}


SCALES = ("a_scale", "b_scale")


def scale_shape(case: GemmCase, operation: Operation, name: str) -> tuple[int, ...]:
    return operation.scale_shape(name[0], case.M, case.N, case.K, case.groups.count if case.groups else 0)


def scale_format(operation: Operation) -> Format:
    """How scales (and float zero points) are stored: their float format, or E8M0 bytes."""
    return UINT8 if operation.scale_dtype == "e8m0" else by_name({"e4m3": "fp8e4m3"}.get(operation.scale_dtype,
                                                                                           operation.scale_dtype))


def operand_format(operation: Operation, operand: str, fin: Format) -> Format:
    """How input operand "a" or "b" is stored: in its dtype, or as codes packed in bytes or int32 words."""
    if operand == "a":
        return UINT8 if operation.packs_a(fin.name) else fin
    if operation.weight:
        return {torch.uint8: UINT8, torch.int8: by_name("int8"), torch.int32: by_name("int32")}[operation.b_dtype]
    return fin


def _scale_layout(layout: Layout, values: np.ndarray | tuple) -> Layout | Vector:
    """A scale tensor's placement: a matrix's own layout, or a vector's as the one row of it."""
    shape = values.shape if isinstance(values, np.ndarray) else values
    if len(shape) >= 2:  # (grouped: a group's scales a problem of B's batch)
        return layout
    return Vector(layout.strides(1, shape[0])[1] if shape[0] > 1 else 1, layout.offset)


UNUSED_NIBBLE = 0xF  # a packed code past K or N: 15 (int4), -6 (e2m1): a kernel that uses it shows


def packed(codes: np.ndarray, axis: int, order: tuple = (0, 1)) -> np.ndarray:
    """4-bit codes packed along `axis` (nibbles.reference's inverse): element j * len(order) + i in word
    j's bits 4 * order[i]; a last partial word's unused nibbles hold UNUSED_NIBBLE. int32 words signed."""
    codes = np.moveaxis(np.asarray(codes, dtype=np.int64), axis, -1)
    n = len(order)
    full = np.full((*codes.shape[:-1], n * -(-codes.shape[-1] // n)), UNUSED_NIBBLE, dtype=np.int64)
    full[..., :codes.shape[-1]] = codes
    words = sum(full[..., i::n] << (4 * o) for i, o in enumerate(order))
    if n == 8:
        words = np.where(words >= 2**31, words - 2**32, words)
    return np.moveaxis(words, -1, axis).astype(np.float64)


E2M1_ENDS = (0x7, 0xF, 0x0, 0x8, 0x1, 0x9)  # +-6 (the largest), +-0, +-0.5 (the subnormal)
E2M1_ONE = 0x2
E2M1_MAX = 6.0


def _codes(rng, shape: tuple[int, int], kind: str, ones) -> np.ndarray:
    """Codes over their whole range, their ends among them (profile "ones": `ones`)."""
    if ones is not None:
        return np.broadcast_to(ones, shape).astype(np.int64)
    lo, hi, ends = {"int4": (0, 15, (0, 15)), "int8": (-128, 127, (-128, 127)), "e2m1": (0, 15, E2M1_ENDS)}[kind]
    codes = rng.integers(lo, hi + 1, size=shape)
    return np.where(rng.random(shape) < 0.1, rng.choice(ends, size=shape), codes)


def code_values(case: GemmCase, operation: Operation) -> dict[str, np.ndarray]:
    """Codes other than A's dtype's values, as stored (float64 integers): B ("b": int8 codes; int4 codes
    packed as `operation.packing` says; e2m1 codes two a byte along K), A's e2m1 codes where A holds them
    ("a"), int4 zero points ("b_zero": packed eight an int32 along N, or floats of the scales' format).
    Profile "ones": every weight one scale (q = z + 1; e2m1: 1.0)."""
    rng = np.random.default_rng([case.seed, 9])
    K, N = case.K, case.N
    ones = case.profile == "ones"
    kind = operation.weight
    groups = operation.zero_shape(N, K)[0] if operation.weight_only else 1
    found = {}
    if kind == "int4" and operation.zero == "float":
        zeros = np.zeros((groups, N)) if ones else rng.integers(-16, 17, size=(groups, N)) / 2.0
        found["b_zero"] = zeros
        z = np.zeros((K, N), dtype=np.int64)
    else:
        zeros = np.full((groups, N), 8) if ones else rng.integers(0, 16, size=(groups, N))
        rows = np.arange(K) // operation.group_k if operation.b_scale == "group" else np.zeros(K, dtype=np.int64)
        z = zeros[rows] if kind == "int4" else np.zeros((K, N), dtype=np.int64)
        if operation.zero == "packed":
            found["b_zero"] = packed(zeros, 1, operation.pack_order)
        elif operation.zero == "int":
            found["b_zero"] = zeros.astype(np.float64)
    one = z + 1 if kind == "int4" else E2M1_ONE if kind == "e2m1" else 1
    codes = _codes(rng, (K, N), kind, one if ones else None)
    if not ones and K and rng.random() < 0.25:  # one K group of weights all zero (their codes the zero points)
        group = rng.integers(0, -(-K // operation.group_k))
        rows = slice(group * operation.group_k, (group + 1) * operation.group_k)
        codes = codes.copy()
        codes[rows] = z[rows] if kind == "int4" else 0
    found["codes"] = codes
    if kind == "int8":
        found["b"] = codes.astype(np.float64)
    elif kind == "e2m1" or operation.packing == "k2":
        found["b"] = packed(codes, 0)
    else:
        found["b"] = packed(codes, 0 if operation.packing == "k8" else 1, operation.pack_order)
    if operation.packs_a(case.dtype):
        a_codes = _codes(np.random.default_rng([case.seed, 10]), (case.M, K), "e2m1", E2M1_ONE if ones else None)
        found["a"] = packed(a_codes, 1)
    return found


def _scale_specials(fmt: Format) -> np.ndarray:
    """0, the smallest subnormal, the largest value and NaN (E8M0 bytes: 2**-127, 2**-126, 2**127, NaN)."""
    if fmt is UINT8:
        return np.array([0x00, 0x01, 0xFE, 0xFF], dtype=np.float64)
    return np.array([0.0, fmt.min_subnormal, float(fmt.max), np.nan])


def _cancelling_extremes(case: GemmCase, operation: Operation, found: dict) -> dict:
    """One K group's E8M0 scales at the extremes, cancelling: A's 2**-127 (byte 0) against B's largest
    exponent that keeps its codes finite, or the other way round, so that a decoder reading byte 0 as 0
    loses products of order 1 (where byte 0 meets small scales, a correct kernel may flush the same
    products: they fall below bf16's normals)."""
    rng = np.random.default_rng([case.seed, 11])
    group = rng.integers(0, found["a_scale"].shape[1])
    fin = by_name(case.dtype)
    largest = {"a_scale": fin.max, "b_scale": E2M1_MAX if operation.weight == "e2m1" else fin.max}
    low, high = ("a_scale", "b_scale") if rng.random() < 0.5 else ("b_scale", "a_scale")
    found = {name: values.copy() for name, values in found.items()}
    for name, byte in ((low, 0x00), (high, 127 + 128 - math.ceil(math.log2(largest[high])))):
        if name == "a_scale":
            found[name][:, group] = byte
        else:
            found[name][group, :] = byte
    return found


def scale_values(case: GemmCase, operation: Operation) -> dict[str, np.ndarray]:
    """The values drawn for a_scale and b_scale as stored (float64, exactly in their format; E8M0: the
    bytes), by the case's scale profile."""
    profile = (case.epilogue or Epilogue()).scales
    fmt = scale_format(operation)
    e8m0 = fmt is UINT8
    found = {}
    for i, name in enumerate(n for n in SCALES if n in operation.extras()):
        shape = scale_shape(case, operation, name)
        rng = np.random.default_rng([case.seed, 7 + i])
        if profile == "pow2":  # integers stay integers
            exponents = rng.integers(0, 5, size=shape)
            values = exponents + 127.0 if e8m0 else np.exp2(exponents).astype(np.float64)
        elif e8m0:
            values = rng.integers(127 - 20, 127 + 8, size=shape).astype(np.float64)
        else:
            drawn = torch.from_numpy(np.exp2(rng.uniform(-8, 4, size=shape)))
            values = drawn.to(fmt.dtype).to(torch.float64).numpy()
        if profile == "specials" and values.size:
            where = rng.random(shape) < max(0.15, 1.0 / values.size)
            values = np.where(where, rng.choice(_scale_specials(fmt), size=shape), values)
        found[name] = values
    if e8m0 and profile == "specials" and len(found) == 2 and operation.a_scale == "group" == operation.b_scale:
        found = _cancelling_extremes(case, operation, found)
    elif e8m0 and profile == "specials" and list(found) == ["b_scale"]:
        found = _column_at_byte0(case, found)
    return found


def _column_at_byte0(case: GemmCase, found: dict) -> dict:
    """One column of B's E8M0 scales all byte 0 (2**-127), every K group: that column of C is then of
    order 2**-127, which bf16 and fp32 hold, and a decoder reading byte 0 as 0 makes it 0 (elsewhere
    2**-127 hides under the rounding of the other groups' products)."""
    column = np.random.default_rng([case.seed, 12]).integers(0, found["b_scale"].shape[1])
    found = {"b_scale": found["b_scale"].copy()}
    found["b_scale"][:, column] = 0x00
    return found


def extra_format(operation: Operation, name: str, out: Format) -> Format:
    """An epilogue input's number format: the bias's own where the operation declares one, else C's."""
    return by_name(name_of(operation.bias_dtype)) if name == "bias" and operation.bias_dtype else out


def guarded_extra(name: str, layout: Layout | Vector, operation: Operation, out: Format, values: np.ndarray | tuple,
                  device) -> Guarded:
    """An extra input (bias, c_in, residual; a_scale, b_scale) placed as `guarded_input` places A and B, in
    its format (a scale vector as the one row of its layout)."""
    if name in SCALES:
        return guarded_input(name, _scale_layout(layout, values), scale_format(operation), values, device)
    if name == "b_zero":  # zero points, laid out as b_scale is: packed int32 words, or floats as scales are
        fmt = scale_format(operation) if operation.zero == "float" else by_name("int32")  # packed or int
        return guarded_input(name, layout, fmt, values, device)
    return guarded_input({"c_in": "C_in"}.get(name, name), layout, extra_format(operation, name, out), values, device)


def extra_values(case: GemmCase, operation: Operation) -> dict[str, np.ndarray]:
    """The float64 values drawn for the epilogue's inputs (bias, c_in, residual), before quantization:
    from the case's value profile (its landmarks in the bias, or without one in C_in, when the case's
    epilogue asks); C_in all NaN where beta == 0 means it is not read."""
    epilogue, out = case.epilogue or Epilogue(), by_name(case.out_dtype)
    shapes = _extra_shapes(case, operation)
    aimed = "bias" if operation.bias else "c_in"
    found = {}
    for i, name in enumerate(("bias", "c_in", "residual")):
        if name not in shapes:
            continue
        fmt = extra_format(operation, name, out)
        rng = np.random.default_rng([case.seed, 3 + i])
        if epilogue.landmarks and name == aimed:
            values = rng.choice(profiles.landmarks(fmt), size=shapes[name])
        else:
            values = profiles.generate(case.profile, shapes[name], fmt, 1, rng, out)
        if name == "c_in" and epilogue.beta == 0 and operation.beta_zero_skips_c_in and fmt.is_float:
            values = np.full(shapes[name], np.nan)  # must not reach C
        found[name] = values
    return found


@phases.timed("materialize")
def materialize(case: GemmCase, device: torch.device | str = "cpu", operation: Operation = PLAIN,
                values: bool = True) -> Operands:
    """Build A, B, a guarded, pre-filled C and the extras of `operation` for `case` on `device`,
    deterministically. Without `values` the inputs hold poison, not drawn values: for a launch that runs
    no program (the interpreter checking a big batch's grid)."""
    device = torch.device(device)
    if operation.grouped:
        from gemm_fuzz.properties.model import grouped

        return grouped.materialize(case, device, operation, values)
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)
    batch = (case.batch,) if case.batch else ()
    if values:
        va, vb = input_values(case, operation) if not operation.packs_a(case.dtype) else (None, None)
    else:
        va, vb = (*batch, case.M, case.K), (*batch, case.K, operation.n_columns(case.N))
    codes = code_values(case, operation) if values and operation.weight else {}
    if operation.packs_a(case.dtype):  # e2m1 codes two a byte along K
        va = codes["a"] if values else operation.a_shape(case.M, case.K, case.dtype)
    a = guarded_input("A", case.a, operand_format(operation, "a", fin), va, device)
    if operation.weight:  # B holds codes, stored (packed) as the operation declares
        stored = codes["b"] if values else operation.b_shape(case.K, case.N)
        b = guarded_input("B", case.b, operand_format(operation, "b", fin), stored, device)
    else:
        b = guarded_input("B", case.b, fin, vb, device)
    c = guarded_output("C", (*batch, case.M, case.N), case.c, fout, device)
    if not (operation.has_epilogue or operation.scaled):
        return Operands(case, a, b, c, operation=operation)
    epilogue = case.epilogue or Epilogue()
    extras = {}
    if operation.scaled:
        drawn = scale_values(case, operation) if values else {n: scale_shape(case, operation, n)
                                                             for n in SCALES if n in operation.extras()}
        for name, v in drawn.items():
            extras[name] = guarded_extra(name, getattr(epilogue, name), operation, fout, v, device)
        if operation.zero:
            zeros = codes["b_zero"] if values else operation.zero_shape(case.N, case.K)
            extras["b_zero"] = guarded_extra("b_zero", epilogue.b_scale, operation, fout, zeros, device)
    for name, drawn in (extra_values(case, operation) if values else _extra_shapes(case, operation)).items():
        extras[name] = guarded_extra(name, getattr(epilogue, name), operation, fout, drawn, device)
    if operation.pre_activation:
        extras["pre"] = guarded_output("pre", (*batch, case.M, operation.n_columns(case.N)), epilogue.pre, fout,
                                       device)
    scalars = {name: getattr(epilogue, name) for name in ("alpha", "beta") if getattr(operation, name)}
    return Operands(case, a, b, c, extras, scalars, operation)
