"""A tensor argument of an interpreted launch, as the interpreter's checkers model it: the sanitizer
(which pointers may address which elements) and the scheduler and race detector (which element a byte
address is)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TensorArgument:
    """A tensor argument of a launch."""

    name: str
    ptr: int
    itemsize: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def end(self) -> int:
        """One past the last byte of its last element."""
        return self.ptr + (sum((n - 1) * s for n, s in zip(self.shape, self.strides)) + 1) * self.itemsize

    def locate(self, addr: int) -> tuple[int, tuple[int, ...] | None]:
        """Element offset of a byte address from the data pointer, and its coordinates if an element lies there."""
        offset, rest = divmod(addr - self.ptr, self.itemsize)
        coords, left = [0] * len(self.shape), offset
        for d in sorted(range(len(self.shape)), key=lambda d: -self.strides[d]):
            if self.strides[d] > 0 and self.shape[d] > 1:
                coords[d], left = divmod(left, self.strides[d])
        inside = not rest and not left and all(i < n for i, n in zip(coords, self.shape))
        return offset, tuple(coords) if inside else None


def of_launch(host: dict) -> list[TensorArgument]:
    """The tensor arguments of a launch (tuples and host TensorDescriptors looked into), by parameter name;
    empty tensors and those with negative strides left out."""
    from triton.runtime.jit import TensorWrapper

    found = []

    def add(name, value):
        if isinstance(value, tuple):
            for i, v in enumerate(value):
                add(f"{name}[{i}]", v)
        elif hasattr(value, "block_shape") and hasattr(value, "base"):  # a host TensorDescriptor
            add(name, value.base)
        elif hasattr(value, "data_ptr"):
            tensor = value.base if isinstance(value, TensorWrapper) else value  # triton.reinterpret(...)
            itemsize = value.dtype.primitive_bitwidth // 8 if isinstance(value, TensorWrapper) else value.element_size()
            shape, strides = tuple(tensor.shape), tuple(tensor.stride())
            if tensor.numel() and min(strides, default=0) >= 0:
                found.append(TensorArgument(name, value.data_ptr(), max(1, itemsize), shape, strides))

    for name, value in host.items():
        add(name, value)
    return found
