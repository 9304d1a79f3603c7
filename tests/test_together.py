"""A launch's programs run together (properties/interpreter/together.py) only where that leaves the
memory the programs would leave one by one: user-style kernels give the same bits either way, and did
run together; kernels whose programs branch apart, share memory or use atomics run one by one, with
the memory of the attempt put back, so every failure (a race, an out-of-bounds lane) is reported as
before, with the same message; the scheduler's drawn orders stay what they were; the start-up probe
fails on a lockstep run that computes something else."""

import pytest
import torch
import triton
import triton.language as tl
from tile_order import grouped_tile

from gemm_fuzz.properties.interpreter import fast, races, sanitizer, schedule, together
from gemm_fuzz.properties.judge.failures import OutOfBoundsAccess

pytestmark = [pytest.mark.interpreter,
              pytest.mark.skipif(not fast.enabled_by_environment(),
                                 reason="GEMM_INTERPRETER_FAST=0: programs run one by one, as in Triton's interpreter")]


def _both_ways(launch):
    """Run `launch()` (it returns the tensors to compare) one by one, then together; return both results and
    how many launches ran together and apart in the second run."""
    with together.switched(False):
        apart = [t.clone() for t in launch()]
    before = together.launches()
    with together.switched(True):
        joined = [t.clone() for t in launch()]
    ran = tuple(n - m for n, m in zip(together.launches(), before))
    return apart, joined, ran


def _same_bits(xs, ys) -> bool:
    return len(xs) == len(ys) and all(x.dtype == y.dtype and x.numpy().tobytes() == y.numpy().tobytes()
                                      for x, y in zip(xs, ys))


# --- kernels in the styles people publish ------------------------------------------------------------


# one configuration: the interpreter has no benchmarker to choose between several
@triton.autotune(configs=[triton.Config({"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 2})],
                 key=["M", "N", "K"])
@triton.jit
def grouped_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Triton's tutorial 03: grouped ordering of the tiles, pointers advanced along K, a leaky-relu epilogue.
    (The tutorial's Python `min` picks per program, so there the programs run one by one: tl.minimum here.)"""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M, PYTHON_MIN=False)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * sam + offs_k[None, :] * sak)
    b_ptrs = b_ptr + (offs_k[:, None] * sbk + offs_bn[None, :] * sbn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    acc = tl.where(acc >= 0, acc, 0.01 * acc)
    c = acc.to(tl.float16)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + scm * offs_cm[:, None] + scn * offs_cn[None, :], c,
             mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def test_a_tutorial_style_autotuned_matmul_runs_together_and_leaves_the_same_bits():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(70, 45, generator=g).half()
    b = torch.randn(45, 90, generator=g).half().T.contiguous().T  # column-major B

    def launch():
        c = torch.full((70, 90), float("nan"), dtype=torch.float16)
        grid = lambda meta: (triton.cdiv(70, meta["BLOCK_M"]) * triton.cdiv(90, meta["BLOCK_N"]),)  # noqa: E731
        grouped_matmul[grid](a, b, c, 70, 90, 45, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                             c.stride(0), c.stride(1))
        return [c]

    apart, joined, ran = _both_ways(launch)
    assert ran[0] >= 1 and ran[1] == 0, together.last_reason()
    assert _same_bits(apart, joined)
    assert not torch.isnan(joined[0]).any()


@triton.jit
def softmax_epilogue(x_ptr, y_ptr, stats_ptr, M, N, sxm, sym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A row softmax over a 3-D grid (batch on axis 1): reductions, exp, a transpose, joins and splits."""
    pid = tl.program_id(0)
    batch = tl.program_id(1)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    base = batch * M * sxm
    x = tl.load(x_ptr + base + rows[:, None] * sxm + cols[None, :], mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(x)
    y = e / tl.sum(e, axis=1)[:, None]
    t = tl.trans(y)
    both = tl.join(t, t * 2)
    first, second = tl.split(both)
    tl.store(y_ptr + batch * M * sym + rows[:, None] * sym + cols[None, :], tl.trans(first + second), mask=mask)
    stat = tl.reshape(tl.sum(y, axis=0), (1, BLOCK_N))
    tl.store(stats_ptr + (batch * tl.num_programs(0) + pid) * BLOCK_N + tl.arange(0, BLOCK_N)[None, :], stat)


@triton.jit
def tutorial_grouping(out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Tutorial 03's tile order as the tutorial writes it (Python's min on a tensor and a constexpr), and Python's
    max of two tensors: each program writes the tile it chose and the bound it computed."""
    pid = tl.program_id(axis=0)
    pid_m, pid_n = grouped_tile(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M, PYTHON_MIN=True)
    last = max(pid_m * BLOCK_M, pid_n * BLOCK_N)
    lane = tl.arange(0, 4)
    tl.store(out_ptr + pid * 3 + lane, tl.where(lane == 0, pid_m, pid_n), mask=lane < 2)
    tl.store(out_ptr + pid * 3 + 2, last)


@pytest.mark.parametrize("M, together_expected", [(40, True), (200, False)])
def test_python_min_and_max_on_program_ids_run_together_where_every_program_picks_alike(M, together_expected):
    """With M = 40 every program's group holds all 3 rows of tiles, so min picks num_pid_m - first_pid_m
    everywhere (and max of two tensors is a tl.where); with M = 200 the last group is short, so programs
    pick differently between a tensor and a constexpr, and run one by one."""
    programs = triton.cdiv(M, 16) * 3

    def launch():
        out = torch.full((programs * 3,), -1, dtype=torch.int32)
        tutorial_grouping[(programs,)](out, M, 40, BLOCK_M=16, BLOCK_N=16, GROUP_M=4)
        return [out]

    apart, joined, ran = _both_ways(launch)
    assert ran == ((1, 0) if together_expected else (0, 1)), together.last_reason()
    assert _same_bits(apart, joined)
    assert sorted(zip(joined[0][0::3].tolist(), joined[0][1::3].tolist())) == [
        (m, n) for m in range(programs // 3) for n in range(3)]


def test_reductions_transcendentals_and_shape_ops_leave_the_same_bits():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 21, 13, generator=g)

    def launch():
        y = torch.full_like(x, float("nan"))
        stats = torch.zeros(3 * 3, 16)
        softmax_epilogue[(3, 3)](x, y, stats, 21, 13, x.stride(1), y.stride(1), BLOCK_M=8, BLOCK_N=16)
        return [y, stats]

    apart, joined, ran = _both_ways(launch)
    assert ran == (1, 0), together.last_reason()
    assert _same_bits(apart, joined)


# --- kernels whose programs cannot run together -----------------------------------------------------


@triton.jit
def persistent_copy(x_ptr, y_ptr, n_tiles, NUM_SMS: tl.constexpr, BLOCK: tl.constexpr):
    """Persistent: each program loops over the tiles it owns, so programs run different trip counts."""
    for tile in range(tl.program_id(0), n_tiles, NUM_SMS):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 3)


def test_programs_that_branch_apart_run_one_by_one_and_leave_the_same_bits():
    x = torch.arange(7 * 8, dtype=torch.float32)

    def launch():
        y = torch.zeros_like(x)
        persistent_copy[(3,)](x, y, 7, NUM_SMS=3, BLOCK=8)
        return [y]

    apart, joined, ran = _both_ways(launch)
    assert ran == (0, 1) and together.last_reason() == "programs take different branches"
    assert _same_bits(apart, joined)


@triton.jit
def bump_then_branch(c_ptr, out_ptr):
    """Each program adds one to its element, then only program 0 goes on: the lockstep run has bumped
    every element when it finds out, so the memory must be put back before the programs run one by one."""
    pid = tl.program_id(0)
    tl.store(c_ptr + pid, tl.load(c_ptr + pid) + 1)
    if pid == 0:
        tl.store(out_ptr, 7.0)


def test_what_the_attempt_wrote_is_put_back_before_running_one_by_one():
    def launch():
        c, out = torch.zeros(4), torch.zeros(1)
        bump_then_branch[(4,)](c, out)
        return [c, out]

    apart, joined, ran = _both_ways(launch)
    assert ran == (0, 1)
    assert joined[0].tolist() == [1.0, 1.0, 1.0, 1.0] and joined[1].item() == 7.0
    assert _same_bits(apart, joined)


@triton.jit
def shift_left(x_ptr, BLOCK: tl.constexpr):
    """Program p reads the block program p + 1 writes: a race, and a result that depends on the order."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    nxt = tl.load(x_ptr + offs + BLOCK, mask=offs + BLOCK < 4 * BLOCK, other=0.0)
    tl.store(x_ptr + offs, nxt + 1)


@triton.jit
def shared_total(x_ptr, total_ptr, BLOCK: tl.constexpr):
    """Every program adds its block's sum into one element with a plain load and store."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(total_ptr, tl.load(total_ptr) + tl.sum(tl.load(x_ptr + offs)))


@pytest.mark.parametrize("kernel", ["shift_left", "shared_total"])
def test_programs_that_share_memory_run_one_by_one_and_the_race_is_reported_as_before(kernel):
    def launch():
        x, total = torch.arange(16, dtype=torch.float32), torch.zeros(1)
        with schedule.ordered(3), races.checked():
            if kernel == "shift_left":
                shift_left[(4,)](x, BLOCK=4)
            else:
                shared_total[(4,)](x, total, BLOCK=4)

    found = {}
    for on in (False, True):
        with together.switched(on), pytest.raises(races.DataRace) as raised:
            launch()
        found[on] = str(raised.value)
    assert found[True] == found[False]
    # without the race detector the lockstep run finds the sharing itself, and the programs run one by one
    x = torch.arange(16, dtype=torch.float32)
    with together.switched(True):
        before = together.launches()
        shift_left[(4,)](x, BLOCK=4)
    assert tuple(n - m for n, m in zip(together.launches(), before)) == (0, 1)
    assert together.last_reason() == "programs share memory"
    assert x.tolist() == [float(v + 1) for v in range(4, 16)] + [1.0] * 4  # program-id order, as one by one


@triton.jit
def unmasked_tail(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < N, other=0.0))  # the store forgets the mask


def test_an_out_of_bounds_store_is_reported_once_with_the_program_that_made_it():
    messages = {}
    for on in (False, True):
        x, y = torch.ones(10), torch.zeros(10)
        with together.switched(on), sanitizer.bounds_checked() as checked, pytest.raises(OutOfBoundsAccess) as raised:
            unmasked_tail[(3,)](x, y, 10, BLOCK=4)
        messages[on] = (str(raised.value), [str(v) for v in checked.violations])
    assert messages[True] == messages[False]
    assert "program id (2, 0, 0)" in messages[True][0] and len(messages[True][1]) == 1


@triton.jit
def atomic_rows(x_ptr, total_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(total_ptr, tl.sum(tl.load(x_ptr + offs)))


def test_atomics_run_one_by_one_and_the_kernel_is_not_tried_again():
    for kernel in [k for k in together._state.kernels if k.__name__ == "atomic_rows"]:
        del together._state.kernels[kernel]  # earlier runs of this test in the process
    x = torch.arange(16, dtype=torch.float32)
    totals = []
    for _ in range(3):
        total = torch.zeros(1)
        before = together.launches()
        with together.switched(True):
            atomic_rows[(4,)](x, total, BLOCK=4)
        totals.append((total.item(), tuple(n - m for n, m in zip(together.launches(), before))))
    assert totals == [(120.0, (0, 1)), (120.0, (0, 0)), (120.0, (0, 0))]


@triton.jit
def double(x_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)


@triton.jit
def tickets(counter_ptr, seen_ptr):
    tl.store(seen_ptr + tl.atomic_add(counter_ptr, 1), tl.program_id(0))


def test_the_scheduler_draws_the_same_orders_after_launches_that_ran_together():
    """A drawn order starts the programs of every launch in the block from one random stream: a launch run
    together must draw from it what it would have one by one, or the next launch's order changes."""
    def launch():
        x = torch.arange(32, dtype=torch.float32)
        counter, seen = torch.zeros(1, dtype=torch.int32), torch.full((6,), -1, dtype=torch.int32)
        with schedule.ordered(7) as order:
            double[(4,)](x, BLOCK=8)  # together
            tickets[(6,)](counter, seen)  # one by one (an atomic), in an order drawn after double's
        return [seen], order.runs

    with together.switched(False):
        (apart,), runs_apart = launch()
    before = together.launches()
    with together.switched(True):
        (joined,), runs_joined = launch()
    assert together.launches()[0] - before[0] == 1
    assert runs_joined == runs_apart and runs_joined[0].starts != tuple((p, 0, 0) for p in range(4))
    assert torch.equal(apart, joined)


def test_the_probe_fails_on_a_lockstep_run_that_computes_something_else(monkeypatch):
    """Per-program results (tl.dot's, a reduction's) stacked in the wrong program order: no memory is
    shared, every branch agrees, and only the probe's outputs tell."""
    real = together._stacked
    together.uninstall()
    try:
        with monkeypatch.context() as patched:
            patched.setattr(together, "_stacked", lambda outs: real(outs[::-1]))
            with pytest.raises(together.TogetherUnavailable, match="changes the probe kernels' results"):
                together.install()
        assert not together._state.installed
    finally:
        together.install()
    assert together._state.installed and together._state.enabled


@triton.jit
def two_outputs(x_ptr, lo_ptr, hi_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(lo_ptr + offs, x - 1)
    tl.store(hi_ptr + offs, x + 1)


def test_outputs_far_apart_in_memory_still_run_together():
    """The stored bytes are tracked per group of nearby stores, not over one span from the lowest to the
    highest address (which two allocations far apart would make too wide to track)."""
    buffer = torch.zeros(24_000_000)  # 96 MB: the two outputs lie 96 MB apart
    x = torch.arange(16, dtype=torch.float32)

    def launch():
        buffer.zero_()
        lo, hi = buffer[:16], buffer[-16:]
        two_outputs[(4,)](x, lo, hi, BLOCK=4)
        return [lo, hi]

    apart, joined, ran = _both_ways(launch)
    assert ran == (1, 0), together.last_reason()
    assert _same_bits(apart, joined) and joined[1].tolist() == [v + 1.0 for v in range(16)]
