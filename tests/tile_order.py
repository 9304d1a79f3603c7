"""Triton's tutorial 03 tile order, one @triton.jit function the tests' kernels call: program `pid` of a 1-D grid
takes the tile (pid_m, pid_n), programs walking GROUP_M rows of tiles column by column, for L2 reuse."""

import triton
import triton.language as tl


@triton.jit
def grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr,
                 PYTHON_MIN: tl.constexpr):
    """(pid_m, pid_n). The last group's height with Python's `min` of a tensor and a constexpr, as the tutorial
    writes it (PYTHON_MIN: in the interpreter each program picks one or the other), or with tl.minimum."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    if PYTHON_MIN:
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    else:
        group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n
