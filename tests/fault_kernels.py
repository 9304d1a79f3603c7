"""Kernels that crash or hang, loaded as user kernels (--gemm-kernel style, FUNC(a, b, c)) by
tests/test_faults.py. Each is a correct kernel except on fp16 inputs, where it faults: a launcher
that loops forever, a process that aborts (as glibc does on a corrupted heap), a null pointer
dereferenced (in the process on the CPU, in the kernel on a GPU). Elsewhere they are the tests' template
kernel (tests/tiled_kernel.py)."""

import ctypes
import os

import torch
import triton
import triton.language as tl
from tiled_kernel import matmul as _right  # the tests' right kernel (this file's folder is on the path)

from gemm_fuzz.kernels import contract

fp16_and_bf16 = contract(dtypes={torch.float16: (torch.float16,), torch.bfloat16: (torch.bfloat16,)})


@triton.jit
def _wait_for_flag(flag_ptr, c_ptr):
    # waits for a flag no program ever raises (a fix-up step waiting on the wrong program, say);
    # the atomic read is a side effect the compiler cannot remove, so the loop really spins
    while tl.atomic_add(flag_ptr, 0) == 0:
        pass
    tl.store(c_ptr, 0.0)


def hang(a, b, c):
    """A kernel that never terminates (on fp16)."""
    if a.dtype != torch.float16:
        return _right(a, b, c)
    flag = torch.zeros(1, dtype=torch.int32, device=c.device)
    _wait_for_flag[(1,)](flag, c)


def loop_forever(a, b, c):
    """A launcher that never returns (on fp16)."""
    if a.dtype != torch.float16:
        return _right(a, b, c)
    while True:
        pass


def abort(a, b, c):
    """Dies the way a corrupted heap does: glibc aborts the process (on fp16)."""
    if a.dtype != torch.float16:
        return _right(a, b, c)
    os.abort()


@triton.jit
def _load_from(address, out_ptr):
    ptr = address.to(tl.int64).to(tl.pointer_type(tl.float32))  # a 64-bit integer becomes a pointer
    tl.store(out_ptr, tl.load(ptr))


def null_pointer(a, b, c):
    """Dereferences a null pointer (on fp16): in the launcher on the CPU, in the kernel on a GPU."""
    if a.dtype != torch.float16:
        return _right(a, b, c)
    if c.device.type == "cpu":
        ctypes.string_at(0)
    out = torch.empty(1, device=c.device)
    _load_from[(1,)](0, out)
    torch.cuda.synchronize()


@triton.jit
def _store_far_away(c_ptr, offset):
    tl.store(c_ptr + offset, 1.0)


def far_out_of_bounds_write(a, b, c):
    """Writes 2**33 elements past C: an illegal address on a GPU (the interpreter refuses it)."""
    _store_far_away[(1,)](c, 2**33)


for _fn in (hang, loop_forever, abort, null_pointer, far_out_of_bounds_write):
    fp16_and_bf16(_fn)
