"""A persistent GEMM (Triton tutorial 09's `matmul_kernel_descriptor_persistent`): a grid of
`num_programs` programs (the SM count on the GPU, 3 in the interpreter), each looping over the output
tiles tile_id = pid, pid + num_programs, ... in grouped order (GROUP_M rows of tiles at a time, as in
`grouped`). Tiles are loaded through tensor descriptors (TMA on Hopper) and the flattened tile and K
loops are software-pipelined as one; the epilogue optionally stores C in two halves
(EPILOGUE_SUBTILE), which halves the shared memory its TMA store stages.

A production kernel takes any operand, so each of A, B and C goes through a descriptor only where
TMA can address it: one dimension of stride 1 (column-major operands are described transposed), the
other stride a positive multiple of 16 bytes, a 16-byte aligned base. Any other operand (a strided
or broadcast view, a storage offset) takes masked pointer loads or stores in the same kernel. C is
also stored with pointers where its inner extent is not a multiple of 16 bytes, since a TMA store
there overwrites the memory after each row up to the next 16-byte boundary (triton-lang/triton#11583).

Scheduling is configurable: `launch(a, b, c, config=...)` takes one dict of the form of CPU_CONFIGS
and GPU_CONFIGS (None = the first of the list for the device and input size); the suite draws them
from the registry (CONFIGS).

WARP_SPECIALIZE asks Triton for automatic warp specialization of the tile loop (a producer warp
group issuing the TMA loads, a consumer one the MMAs). Triton 3.6 documents it for Blackwell only,
but also runs a Hopper pass, which on the H100 specializes only an unflattened loop with num_warps=4
and no split epilogue (so the launcher refuses other combinations), and compiles only when both
operands come through descriptors, 8-bit ones K-major (A row-major, B column-major); elsewhere its
pass fails ("PassManager::run failed"), so the launcher runs those cases unspecialized.
"""

import torch
import triton
import triton.language as tl

from gemm_fuzz.kernels import dtypes, machine, registry
from gemm_fuzz.kernels.registry import INT32_OFFSETS, register_precisions


@triton.jit
def _grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of the tile_id-th tile in grouped order."""
    in_group = GROUP_M * num_pid_n
    first_m = (tile_id // in_group) * GROUP_M
    rows = tl.minimum(num_pid_m - first_m, GROUP_M)  # the last group may have fewer rows
    return first_m + (tile_id % in_group) % rows, (tile_id % in_group) // rows


@triton.jit
def _describe(ptr, rows, cols, stride_r, stride_c, COL_MAJOR: tl.constexpr, B_ROWS: tl.constexpr,
              B_COLS: tl.constexpr):
    """A descriptor over a rows x cols operand; a column-major one is described as its transpose."""
    if COL_MAJOR:
        return tl.make_tensor_descriptor(ptr, shape=[cols, rows], strides=[stride_c, 1], block_shape=[B_COLS, B_ROWS])
    else:
        return tl.make_tensor_descriptor(ptr, shape=[rows, cols], strides=[stride_r, 1], block_shape=[B_ROWS, B_COLS])


@triton.jit
def _load(desc, ptr, off_r, off_c, rows, cols, stride_r, stride_c, TMA: tl.constexpr, COL_MAJOR: tl.constexpr,
          B_ROWS: tl.constexpr, B_COLS: tl.constexpr):
    """The B_ROWS x B_COLS block at (off_r, off_c) of a rows x cols operand, zeros past its edges."""
    if TMA:
        if COL_MAJOR:
            return desc.load([off_c, off_r]).T
        else:
            return desc.load([off_r, off_c])
    else:
        r = off_r + tl.arange(0, B_ROWS)
        c = off_c + tl.arange(0, B_COLS)
        return tl.load(ptr + r[:, None] * stride_r + c[None, :] * stride_c,
                       mask=(r[:, None] < rows) & (c[None, :] < cols), other=0.0)


@triton.jit
def _store(desc, ptr, block, off_m, off_n, M, N, stride_cm, stride_cn, TMA: tl.constexpr, COL_MAJOR: tl.constexpr,
           B_ROWS: tl.constexpr, B_COLS: tl.constexpr):
    """Store a B_ROWS x B_COLS block of C at (off_m, off_n); what falls outside C is dropped."""
    if TMA:
        if COL_MAJOR:
            desc.store([off_n, off_m], block.T)
        else:
            desc.store([off_m, off_n], block)
    else:
        r = off_m + tl.arange(0, B_ROWS)
        c = off_n + tl.arange(0, B_COLS)
        tl.store(ptr + r[:, None] * stride_cm + c[None, :] * stride_cn, block, mask=(r[:, None] < M) & (c[None, :] < N))


@triton.jit
def persistent_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    A_TMA: tl.constexpr, A_COL: tl.constexpr, B_TMA: tl.constexpr, B_COL: tl.constexpr,
    C_TMA: tl.constexpr, C_COL: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr, FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
    PRECISION: tl.constexpr, ACC: tl.constexpr,
):
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    num_tiles = num_pid_m * num_pid_n
    BN_STORE: tl.constexpr = BN // 2 if EPILOGUE_SUBTILE else BN

    a_desc = _describe(a_ptr, M, K, stride_am, stride_ak, A_COL, BM, BK) if A_TMA else None
    b_desc = _describe(b_ptr, K, N, stride_bk, stride_bn, B_COL, BK, BN) if B_TMA else None
    c_desc = _describe(c_ptr, M, N, stride_cm, stride_cn, C_COL, BM, BN_STORE) if C_TMA else None

    # the epilogue finds its tile from a counter of its own, as tutorial 09 does: the pipeliner of the
    # flattened loop must not carry the main loop's tile coordinates over to the epilogue
    tile_id_c = tl.program_id(0) - NUM_PROGRAMS
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=FLATTEN,
                            warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=ACC)
        for ki in range(k_tiles):
            off_k = ki * BK
            a = _load(a_desc, a_ptr, off_m, off_k, M, K, stride_am, stride_ak, A_TMA, A_COL, BM, BK)
            b = _load(b_desc, b_ptr, off_k, off_n, K, N, stride_bk, stride_bn, B_TMA, B_COL, BK, BN)
            acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)

        tile_id_c += NUM_PROGRAMS
        pid_m, pid_n = _grouped_tile(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        if EPILOGUE_SUBTILE:
            left, right = tl.split(tl.permute(tl.reshape(acc, (BM, 2, BN_STORE)), (0, 2, 1)))
            _store(c_desc, c_ptr, left.to(c_ptr.dtype.element_ty), off_m, off_n, M, N, stride_cm, stride_cn,
                   C_TMA, C_COL, BM, BN_STORE)
            _store(c_desc, c_ptr, right.to(c_ptr.dtype.element_ty), off_m, off_n + BN_STORE, M, N, stride_cm,
                   stride_cn, C_TMA, C_COL, BM, BN_STORE)
        else:
            _store(c_desc, c_ptr, acc.to(c_ptr.dtype.element_ty), off_m, off_n, M, N, stride_cm, stride_cn,
                   C_TMA, C_COL, BM, BN)


def _config(bm, bn, bk, group_m, subtile, warps, stages, programs=None, warp_specialize=False, flatten=True):
    return dict(BM=bm, BN=bn, BK=bk, GROUP_M=group_m, num_programs=programs, EPILOGUE_SUBTILE=subtile,
                FLATTEN=flatten, WARP_SPECIALIZE=warp_specialize, num_warps=warps, num_stages=stages)


# The interpreter needs small tiles and few programs, so that each program runs its tile loop several
# times on the suite's shapes (up to 72); the others vary the tile order, the program count, the
# epilogue and the loop's flags (which the interpreter ignores).
CPU_CONFIGS = [
    _config(16, 32, 16, 2, True, 1, 1, programs=3),
    _config(16, 16, 16, 1, False, 1, 1, programs=3),
    _config(32, 16, 16, 4, False, 1, 1, programs=2),
    _config(16, 32, 32, 8, True, 1, 1, programs=5),
    _config(16, 32, 16, 2, False, 4, 1, programs=3, warp_specialize=True, flatten=False),
]
# 1- and 2-byte inputs on the GPU, the default first; each fits the H100's 227 KB of shared memory
# for every output dtype and layout, and computed correctly on an H100 (tests/test_persistent.py).
# At 8192 x 6144 x 4096 (python -m gemm_fuzz.kernels.bench --configs) the default ran at 1.00-1.09x
# torch.matmul in fp16 and 1.02-1.03x in bf16 over four runs; the warp-specialized one at 0.93x.
# Warp specialization with 3 stages ran at 1.07-1.11x in fp16 but 0.99-1.03x in bf16, and its
# unsplit epilogue needs 279 KB for 4-byte outputs, so it is not listed.
GPU_CONFIGS = [
    _config(128, 256, 64, 8, True, 8, 3),
    _config(128, 256, 64, 16, True, 8, 3),
    _config(128, 256, 64, 1, True, 8, 3),
    _config(128, 256, 64, 8, True, 8, 3, programs=100),
    _config(128, 256, 64, 8, True, 8, 3, flatten=False),
    _config(256, 128, 64, 8, True, 8, 3),
    _config(128, 128, 64, 8, False, 4, 4),
    _config(128, 128, 64, 8, True, 8, 4),
    _config(128, 128, 128, 8, True, 8, 3),
    _config(128, 256, 64, 8, False, 4, 2, warp_specialize=True, flatten=False),
]
# 4-byte (fp32) inputs: smaller tiles, as fp32 ones take twice the shared memory.
GPU_FP32_CONFIGS = [
    _config(128, 128, 32, 8, True, 8, 3),
    _config(128, 128, 32, 8, False, 8, 3),
    _config(128, 64, 32, 8, False, 4, 4),
]
KEYS = tuple(CPU_CONFIGS[0])
CONFIGS = {"cpu": tuple(CPU_CONFIGS), "cuda": tuple(GPU_CONFIGS), "cuda/fp32": tuple(GPU_FP32_CONFIGS)}


def _checked(config: dict) -> dict:
    if not isinstance(config, dict) or set(config) != set(KEYS):
        raise ValueError(f"config must be a dict with exactly the keys {', '.join(KEYS)}; got {config!r}")
    for key in ("BM", "BN", "BK"):
        if not (isinstance(config[key], int) and config[key] >= 16 and config[key] & (config[key] - 1) == 0):
            raise ValueError(f"config[{key!r}] must be a power of two >= 16 (a tl.dot dimension); got {config[key]!r}")
    programs = config["num_programs"]
    if programs is not None and not (isinstance(programs, int) and programs >= 1):
        raise ValueError(f"config['num_programs'] must be None (the SM count) or a positive int; got {programs!r}")
    if not (isinstance(config["GROUP_M"], int) and config["GROUP_M"] >= 1):
        raise ValueError(f"config['GROUP_M'] must be a positive int; got {config['GROUP_M']!r}")
    if config["WARP_SPECIALIZE"] and (config["FLATTEN"] or config["EPILOGUE_SUBTILE"] or config["num_warps"] != 4):
        raise ValueError("config['WARP_SPECIALIZE'] needs FLATTEN=False, EPILOGUE_SUBTILE=False and num_warps=4 "
                         f"(all Triton 3.6 can warp-specialize on Hopper); got {config!r}")
    return config


def _num_programs(config: dict, device: torch.device) -> int:
    if config["num_programs"] is not None:
        return config["num_programs"]
    return machine.multiprocessors(device)


def _tma_layout(t: torch.Tensor) -> tuple[bool, bool]:
    """(TMA can address t, t is column-major): a non-empty operand with a unit stride, the other a
    positive multiple of 16 bytes, and a 16-byte aligned base."""
    if t.numel() == 0 or t.data_ptr() % 16:
        return False, False
    for col_major, (unit, leading) in ((False, (1, 0)), (True, (0, 1))):
        if t.stride(unit) == 1 and t.stride(leading) > 0 and (t.stride(leading) * t.element_size()) % 16 == 0:
            return True, col_major
    return False, False


def can_warp_specialize(element_size: int, a_tma: bool, a_col: bool, b_tma: bool, b_col: bool) -> bool:
    """Whether Triton 3.6's Hopper warp specialization compiles this case (see the module's docstring)."""
    return a_tma and b_tma and (element_size == 2 or (element_size == 1 and not a_col and b_col))


def _allocate_scratch(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def make_launch(name: str, precision: str):
    @registry.launcher(name, validate=_checked)
    def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict) -> None:
        a_tma, a_col = _tma_layout(a)
        b_tma, b_col = _tma_layout(b)
        c_tma, c_col = _tma_layout(c)
        c_tma = c_tma and ((M if c_col else N) * c.element_size()) % 16 == 0  # triton-lang/triton#11583
        specialize = cfg["WARP_SPECIALIZE"] and can_warp_specialize(a.element_size(), a_tma, a_col, b_tma, b_col)
        if a.device.type == "cuda":
            triton.set_allocator(_allocate_scratch)  # in-kernel descriptors need global scratch memory
        programs = _num_programs(cfg, a.device)
        tiles = triton.cdiv(M, cfg["BM"]) * triton.cdiv(N, cfg["BN"])
        persistent_kernel[(min(programs, tiles),)](
            a, b, c, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            A_TMA=a_tma, A_COL=a_col, B_TMA=b_tma, B_COL=b_col, C_TMA=c_tma, C_COL=c_col,
            BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], GROUP_M=cfg["GROUP_M"], NUM_PROGRAMS=programs,
            EPILOGUE_SUBTILE=cfg["EPILOGUE_SUBTILE"], FLATTEN=cfg["FLATTEN"], WARP_SPECIALIZE=specialize,
            PRECISION=precision, ACC=dtypes.accumulator(a.dtype),
            **registry.options(cfg),
        )

    return launch


register_precisions("persistent", make_launch, CONFIGS, INT32_OFFSETS,
                    origin="seed 000 and Triton tutorial 09: a persistent matmul over the SMs through tensor descriptors",
                    description="num_programs programs loop over tiles in grouped order; TMA where the operand "
                                "allows, pointers elsewhere; C stored in halves")
