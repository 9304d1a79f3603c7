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
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property

import numpy as np
import torch

from gemm_fuzz.properties import phases
from gemm_fuzz.properties.model import profiles
from gemm_fuzz.reference import bounds
from gemm_fuzz.reference.formats import Format, by_name

GUARD = 64  # elements of guard band before and after every operand


@dataclass(frozen=True)
class Layout:
    """How a logical R x C matrix sits in its buffer."""

    order: str = "row"  # "row": a row's elements are adjacent; "col": a column's are
    pad: int = 0  # extra elements in the leading dimension (lda = minimal + pad)
    step: int = 1  # distance between adjacent elements of the inner dimension (2: every other one)
    offset: int = 0  # extra storage offset in elements (misaligns the data pointer when odd)
    broadcast: str = ""  # "rows": every row aliases row 0 (stride 0); "cols": every column aliases column 0

    def __post_init__(self):
        if self.order not in ("row", "col"):
            raise ValueError(f"layout order must be 'row' or 'col', got {self.order!r}")
        if self.broadcast not in ("", "rows", "cols"):
            raise ValueError(f"layout broadcast must be '', 'rows' or 'cols', got {self.broadcast!r}")
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
        return text


ROW = Layout()
COL = Layout("col")


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

    def __post_init__(self):
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

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict) -> GemmCase:
        data = dict(data)
        for name in ("a", "b", "c"):
            if name in data:
                data[name] = Layout(**data[name])
        if "config" in data:
            data["config"] = tuple((str(k), v) for k, v in data["config"])
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> GemmCase:
        return cls.from_dict(json.loads(text))

    def describe(self) -> str:
        return (
            f"{self.M}x{self.N}x{self.K} {self.dtype}->{self.out_dtype} A:{self.a.describe()} "
            f"B:{self.b.describe()} C:{self.c.describe()} {self.profile}{'+specials' if self.specials else ''} "
            f"seed={self.seed}"
            + (f" order={self.order}" if self.order else "")
            + (" config=" + ",".join(f"{k}={v}" for k, v in self.config) if self.config else "")
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
        elements[_element_index(tuple(self.view.shape), self.view.stride(), self.view.storage_offset())] = True
        return elements


@dataclass
class Operands:
    case: GemmCase
    a: Guarded
    b: Guarded
    c: Guarded


def poison(fmt: Format) -> float:
    """What surrounds A and B: NaN for floats, the most negative integer otherwise."""
    return float("nan") if fmt.is_float else -fmt.max - 1


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


def _place(shape: tuple[int, int], layout: Layout) -> tuple[tuple[int, int], int, int]:
    """Strides, first element offset and buffer size of a view laid out in a guarded buffer."""
    rows, cols = shape
    s0, s1 = layout.strides(rows, cols)
    span = (rows - 1) * s0 + (cols - 1) * s1 if rows and cols else 0
    start = GUARD + layout.offset
    return (s0, s1), start, start + span + 1 + GUARD


def _element_index(shape: tuple[int, int], strides: tuple[int, int], start: int) -> np.ndarray:
    """The buffer positions of a view's elements, row by row."""
    return (start + np.arange(shape[0])[:, None] * strides[0] + np.arange(shape[1])[None, :] * strides[1]).ravel()


def _filled(size: int, value: float, fmt: Format, device) -> torch.Tensor:
    # the value converted as a float64 tensor converts, on the device
    return torch.full((size,), value, dtype=torch.float64, device=device).to(fmt.dtype)


@phases.timed("materialize")
def guarded_input(name: str, layout: Layout, fmt: Format, values: np.ndarray, device) -> Guarded:
    """An input operand holding `values` (float64, exactly representable in `fmt`, consistent with a
    broadcast layout), in a buffer on `device` whose surroundings and padding hold poison."""
    shape = values.shape
    strides, start, size = _place(shape, layout)
    buffer = _filled(size, poison(fmt), fmt, device)
    if values.size:
        # write through a non-aliasing view: a broadcast operand stores one row (or column)
        drawn = _drawn_shape(shape, layout)
        host = torch.from_numpy(np.array(values[: drawn[0], : drawn[1]])).to(fmt.dtype)
        torch.as_strided(buffer, drawn, strides, start).copy_(host)
    return Guarded(name, torch.as_strided(buffer, shape, strides, start), buffer, buffer.clone())


@phases.timed("materialize")
def guarded_output(name: str, shape: tuple[int, int], layout: Layout, fmt: Format, device) -> Guarded:
    """An output operand on `device` pre-filled with the unwritten pattern, in a buffer whose
    surroundings and padding hold the sentinel."""
    strides, start, size = _place(shape, layout)
    buffer = _filled(size, sentinel(fmt), fmt, device)
    if shape[0] and shape[1]:
        # the pattern's bits are what matter: written through a same-width integer view
        torch.as_strided(raw(buffer), shape, strides, start).fill_(signed(unwritten_bits(fmt), buffer.element_size()))
    return Guarded(name, torch.as_strided(buffer, shape, strides, start), buffer, buffer.clone())


def input_values(case: GemmCase) -> tuple[np.ndarray, np.ndarray]:
    """The float64 values drawn for A (M x K) and B (K x N), before quantization."""
    fmt, out = by_name(case.dtype), by_name(case.out_dtype)
    exact_bits = bounds.exact_sum_bits(case.dtype)
    a_shape = _drawn_shape((case.M, case.K), case.a)
    b_shape = _drawn_shape((case.K, case.N), case.b)
    a, b = (profiles.generate(case.profile, shape, fmt, case.K, np.random.default_rng([case.seed, i]), out, exact_bits,
                              operand) for i, (shape, operand) in enumerate(((a_shape, "a"), (b_shape, "b"))))
    if case.specials:
        a, b = profiles.with_specials(a, b, fmt, np.random.default_rng([case.seed, 2]))
    return np.broadcast_to(a, (case.M, case.K)), np.broadcast_to(b, (case.K, case.N))


def _drawn_shape(shape: tuple[int, int], layout: Layout) -> tuple[int, int]:
    rows, cols = shape
    return (1 if layout.broadcast == "rows" else rows, 1 if layout.broadcast == "cols" else cols)


@phases.timed("materialize")
def materialize(case: GemmCase, device: torch.device | str = "cpu") -> Operands:
    """Build A, B and a guarded, pre-filled C for `case` on `device`, deterministically."""
    device = torch.device(device)
    fin, fout = by_name(case.dtype), by_name(case.out_dtype)
    va, vb = input_values(case)
    a = guarded_input("A", case.a, fin, va, device)
    b = guarded_input("B", case.b, fin, vb, device)
    c = guarded_output("C", (case.M, case.N), case.c, fout, device)
    return Operands(case, a, b, c)
