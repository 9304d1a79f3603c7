"""Kernels that crash or hang, loaded by tests/test_faults.py as user kernels (--gemm-kernel style,
FUNC(a, b, c)), so a worker process can run them."""

import os

import triton
import triton.language as tl


@triton.jit
def _wait_for_flag(flag_ptr, c_ptr):
    # waits for a flag no program ever raises (a fix-up step waiting on the wrong program, say);
    # the atomic read is a side effect the compiler cannot remove, so the loop really spins
    while tl.atomic_add(flag_ptr, 0) == 0:
        pass
    tl.store(c_ptr, 0.0)


def hang(a, b, c):
    """Never terminates."""
    import torch

    flag = torch.zeros(1, dtype=torch.int32, device=c.device)
    _wait_for_flag[(1,)](flag, c)


@triton.jit
def _store_far_away(c_ptr, offset):
    tl.store(c_ptr + offset, 1.0)


def far_out_of_bounds_write(a, b, c):
    """Writes 2**33 elements past C: an illegal address on a GPU (the interpreter refuses it)."""
    _store_far_away[(1,)](c, 2**33)


def abort(a, b, c):
    """Dies the way a corrupted heap does (glibc aborts the process)."""
    os.abort()
