"""Kernels whose programs share memory, one right and some wrong per class, loaded by tests/test_races.py
and tests/test_schedule.py as user kernels (FUNC(a, b, c): a @ b into c, any strides).

In program-id order every one of them computes the right C: each wrong one is right only in that order,
or only where programs never overlap in time, which is what a GPU does not promise.

  class                          right                      wrong
  split-K partials               split_k                    split_k_plain_partials
  stream-K fix-up                stream_k                   stream_k_partial_before_flag,
                                                            stream_k_flag_before_partial,
                                                            stream_k_relaxed_flag,
                                                            stream_k_volatile_spin
  persistent tile ownership      persistent                 persistent_shared_tile
  initialisation by program 0    zeroed_by_program_0        relies_on_program_0
  shared memory (GPU only)                                  shared_memory_race
"""

import torch
import triton
import triton.language as tl

BM, BN, BK = 16, 16, 16
SPLIT_K = 3
PROGRAMS = 3


@triton.jit
def _k_strips(a_ptr, b_ptr, M, N, K, sam, sak, sbk, sbn, offs_m, offs_n, k_first, k_last, k_step,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """fp32 sum over the K strips k_first, k_first + k_step, ... below k_last of one tile."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for ki in range(k_first, k_last, k_step):
        rk = ki * BK + tl.arange(0, BK)
        a = tl.load(a_ptr + offs_m[:, None] * sam + rk[None, :] * sak, mask=(offs_m[:, None] < M) & (rk[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sbk + offs_n[None, :] * sbn, mask=(rk[:, None] < K) & (offs_n[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    return acc


@triton.jit
def _round_into_c(ws_ptr, c_ptr, M, N, scm, scn, BM: tl.constexpr, BN: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    acc = tl.load(ws_ptr + offs_m[:, None] * N + offs_n[None, :], mask=mask)
    tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _shape(a, b):
    return a.shape[0], b.shape[1], a.shape[1]


# --- split-K: SPLIT_K programs per tile add their partial sums into an fp32 workspace -------------------


@triton.jit
def _split_k(a_ptr, b_ptr, ws_ptr, M, N, K, sam, sak, sbk, sbn, BM: tl.constexpr, BN: tl.constexpr,
             BK: tl.constexpr, SPLIT_K: tl.constexpr, ATOMIC: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = _k_strips(a_ptr, b_ptr, M, N, K, sam, sak, sbk, sbn, offs_m, offs_n, tl.program_id(2), tl.cdiv(K, BK),
                    SPLIT_K, BM, BN, BK)
    ws = ws_ptr + offs_m[:, None] * N + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if ATOMIC:
        tl.atomic_add(ws, acc, mask=mask, sem="relaxed")
    else:
        tl.store(ws, tl.load(ws, mask=mask) + acc, mask=mask)  # BUG: plain read-modify-write of shared partials


def _launch_split_k(a, b, c, atomic: bool):
    M, N, K = _shape(a, b)
    ws = torch.zeros((M, N), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN), SPLIT_K)
    _split_k[grid](a, b, ws, M, N, K, *a.stride(), *b.stride(), BM=BM, BN=BN, BK=BK, SPLIT_K=SPLIT_K, ATOMIC=atomic)
    _round_into_c[grid[:2]](ws, c, M, N, *c.stride(), BM=BM, BN=BN)


def split_k(a, b, c):
    _launch_split_k(a, b, c, atomic=True)


def split_k_plain_partials(a, b, c):
    _launch_split_k(a, b, c, atomic=False)


# --- stream-K: PROGRAMS programs split all K iterations evenly; a tile split between programs is -------
# --- finished by the owner of its last iteration, which adds the partials the others published ---------


@triton.jit
def _stream_k(a_ptr, b_ptr, c_ptr, partials_ptr, flags_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
              iters_per_tile, iters_per_program, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              BUG: tl.constexpr):
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    start = pid * iters_per_program
    it = tl.minimum(start + iters_per_program, tl.cdiv(M, BM) * tiles_n * iters_per_tile)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    while it > start:  # backwards over my share, one tile segment at a time
        tile = (it - 1) // iters_per_tile
        tile_first = tile * iters_per_tile
        k_first = tl.maximum(start, tile_first) - tile_first
        k_last = it - tile_first
        offs_m = (tile // tiles_n) * BM + rm
        offs_n = (tile % tiles_n) * BN + rn
        acc = _k_strips(a_ptr, b_ptr, M, N, K, sam, sak, sbk, sbn, offs_m, offs_n, k_first, k_last, 1, BM, BN, BK)
        if k_last < iters_per_tile:  # my share ends inside this tile: publish my partial for its finisher
            slot = partials_ptr + pid * BM * BN + rm[:, None] * BN + rn[None, :]
            if BUG == "flag before partial":
                tl.atomic_xchg(flags_ptr + pid, 1, sem="release")
                tl.store(slot, acc)  # BUG: written after the flag went up
            elif BUG == "relaxed flag":
                tl.store(slot, acc)
                tl.atomic_xchg(flags_ptr + pid, 1, sem="relaxed")  # BUG: a relaxed atomic releases nothing
            else:
                tl.store(slot, acc)
                tl.atomic_xchg(flags_ptr + pid, 1, sem="release")
        else:  # I own the tile's last iteration: add the partials of the programs before me
            for owner in range(tile_first // iters_per_program, pid):
                slot = partials_ptr + owner * BM * BN + rm[:, None] * BN + rn[None, :]
                if BUG == "partial before flag":
                    partial = tl.load(slot)  # BUG: read before the flag says it is there
                    while tl.atomic_add(flags_ptr + owner, 0, sem="acquire") == 0:
                        pass
                elif BUG == "volatile spin":
                    while tl.load(flags_ptr + owner, volatile=True) == 0:  # BUG: sees the flag, acquires nothing
                        pass
                    partial = tl.load(slot)
                else:
                    while tl.atomic_add(flags_ptr + owner, 0, sem="acquire") == 0:
                        pass
                    partial = tl.load(slot)
                acc += partial
            mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
            tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, acc.to(c_ptr.dtype.element_ty), mask=mask)
        it = tile_first + k_first


def _launch_stream_k(a, b, c, bug: str):
    M, N, K = _shape(a, b)
    iters_per_tile = max(1, triton.cdiv(K, BK))
    total = triton.cdiv(M, BM) * triton.cdiv(N, BN) * iters_per_tile
    grid = min(PROGRAMS, total)
    # NaN until written, so a partial read too early shows in C (torch.empty could hold an earlier run's)
    partials = torch.full((grid, BM, BN), float("nan"), dtype=torch.float32, device=a.device)
    flags = torch.zeros((grid,), dtype=torch.int32, device=a.device)
    _stream_k[(grid,)](a, b, c, partials, flags, M, N, K, *a.stride(), *b.stride(), *c.stride(), iters_per_tile,
                       triton.cdiv(total, grid), BM=BM, BN=BN, BK=BK, BUG=bug)


def stream_k(a, b, c):
    _launch_stream_k(a, b, c, "")


def stream_k_partial_before_flag(a, b, c):
    """BUG: the finisher loads a partial before it waits for the partial's flag."""
    _launch_stream_k(a, b, c, "partial before flag")


def stream_k_flag_before_partial(a, b, c):
    """BUG: the flag is released before the partial is written."""
    _launch_stream_k(a, b, c, "flag before partial")


def stream_k_relaxed_flag(a, b, c):
    """BUG: the flag is raised after the partial, but by a relaxed atomic, which orders nothing."""
    _launch_stream_k(a, b, c, "relaxed flag")


def stream_k_volatile_spin(a, b, c):
    """BUG: the finisher waits with volatile loads of the flag, which order nothing (no acquire)."""
    _launch_stream_k(a, b, c, "volatile spin")


# --- persistent: PROGRAMS programs each own a contiguous chunk of tiles ----------------------------------


@triton.jit
def _persistent(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, PROGRAMS: tl.constexpr,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, OVERLAP: tl.constexpr):
    tiles_n = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * tiles_n
    chunk = tl.cdiv(tiles, PROGRAMS)
    first = tl.program_id(0) * chunk
    last = tl.minimum(first + chunk, tiles)
    if OVERLAP:
        last = tl.minimum(first + chunk + 1, tiles)  # BUG: also takes the next program's first tile
    for tile in range(first, last):
        offs_m = (tile // tiles_n) * BM + tl.arange(0, BM)
        offs_n = (tile % tiles_n) * BN + tl.arange(0, BN)
        acc = _k_strips(a_ptr, b_ptr, M, N, K, sam, sak, sbk, sbn, offs_m, offs_n, 0, tl.cdiv(K, BK), 1, BM, BN, BK)
        mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _launch_persistent(a, b, c, overlap: bool):
    M, N, K = _shape(a, b)
    _persistent[(PROGRAMS,)](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), PROGRAMS=PROGRAMS,
                             BM=BM, BN=BN, BK=BK, OVERLAP=overlap)


def persistent(a, b, c):
    _launch_persistent(a, b, c, overlap=False)


def persistent_shared_tile(a, b, c):
    _launch_persistent(a, b, c, overlap=True)


# --- initialisation by program 0: split-K whose workspace program 0 of each tile zeroes ----------------


@triton.jit
def _zeroed_in_kernel(a_ptr, b_ptr, ws_ptr, ready_ptr, M, N, K, sam, sak, sbk, sbn, BM: tl.constexpr,
                      BN: tl.constexpr, BK: tl.constexpr, SPLIT_K: tl.constexpr, WAIT: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    ready = ready_ptr + tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    acc = _k_strips(a_ptr, b_ptr, M, N, K, sam, sak, sbk, sbn, offs_m, offs_n, tl.program_id(2), tl.cdiv(K, BK),
                    SPLIT_K, BM, BN, BK)
    ws = ws_ptr + offs_m[:, None] * N + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if tl.program_id(2) == 0:
        tl.store(ws, tl.zeros((BM, BN), dtype=tl.float32), mask=mask)
        if WAIT:
            tl.atomic_xchg(ready, 1, sem="release")
    elif WAIT:
        while tl.atomic_add(ready, 0, sem="acquire") == 0:
            pass
    tl.atomic_add(ws, acc, mask=mask, sem="relaxed")  # BUG without WAIT: program 0 may not have zeroed it yet


def _launch_zeroed_in_kernel(a, b, c, wait: bool):
    M, N, K = _shape(a, b)
    ws = torch.empty((M, N), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN), SPLIT_K)
    ready = torch.zeros(grid[:2], dtype=torch.int32, device=a.device)
    _zeroed_in_kernel[grid](a, b, ws, ready, M, N, K, *a.stride(), *b.stride(), BM=BM, BN=BN, BK=BK,
                            SPLIT_K=SPLIT_K, WAIT=wait)
    _round_into_c[grid[:2]](ws, c, M, N, *c.stride(), BM=BM, BN=BN)


def zeroed_by_program_0(a, b, c):
    _launch_zeroed_in_kernel(a, b, c, wait=True)


def relies_on_program_0(a, b, c):
    """BUG: program 0 of each tile zeroes the workspace the others add into, without their waiting for it."""
    _launch_zeroed_in_kernel(a, b, c, wait=False)


RIGHT = ("split_k", "stream_k", "persistent", "zeroed_by_program_0")
WRONG = ("split_k_plain_partials", "stream_k_partial_before_flag", "stream_k_flag_before_partial",
         "stream_k_relaxed_flag", "stream_k_volatile_spin", "persistent_shared_tile", "relies_on_program_0")



# --- shared memory (GPU only: compute-sanitizer racecheck; tests/test_gpu_racecheck.py) ----------------


@triton.jit
def _shared_word_race(x_ptr, y_ptr, BLOCK: tl.constexpr):
    # every thread stores its value into one shared word and reads it back with no barrier between: a
    # hazard between warps, written in inline PTX (Triton itself never leaves shared memory unsynchronised)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise(
        """{
        .shared .align 4 .b32 racy_word;
        st.shared.b32 [racy_word], $1;
        ld.shared.b32 $0, [racy_word];
        }""",
        "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(y_ptr + offs, y)


def shared_memory_race(a, b, c):
    """BUG (GPU only): C is right (torch computes it), but a kernel launched first races in shared memory."""
    x = torch.arange(256, dtype=torch.int32, device=a.device)
    _shared_word_race[(1,)](x, torch.empty_like(x), BLOCK=256, num_warps=4)
    torch.matmul(a, b, out=c)
