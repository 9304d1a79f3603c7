"""Every mutant: a real variant of `kernels/` with one realistic bug planted by declared edits (see
kernels/mutants/__init__.py), the smallest case that shows it, and the check that catches it there."""

from gemm_fuzz.kernels.mutants import Edit, Mutant, register

# --- tiled (seed 002): the canonical kernel -----------------------------------------------------------

TILED_A_MASK = "            mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K),\n"
TILED_B_MASK = "            mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N),\n"
TILED_DOT = "        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)\n"
TILED_STORE_VALUE = "        acc.to(c_ptr.dtype.element_ty),\n"
TILED_STORE_MASK = "        mask=(offs_m[:, None] < M) & (offs_n[None, :] < N),\n    )\n"
TILED_ACC = "    acc = tl.zeros((BM, BN), dtype=ACC)\n"
TILED_STRIDES = "            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),\n"
TILED_GRID = '        grid = (triton.cdiv(M, cfg["BM"]), triton.cdiv(N, cfg["BN"]))\n'
BEFORE_TILED_KERNEL = "@triton.jit\ndef tiled_kernel("
FP16_ACCUMULATOR = (Edit(TILED_ACC, "    acc = tl.zeros((BM, BN), dtype=tl.float16)\n"),
                    Edit(TILED_DOT, "        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=tl.float16)\n"))

register(Mutant(
    name="tiled_no_k_mask", parent="tiled",
    edits=(Edit(TILED_A_MASK, "            mask=offs_m[:, None] < M,\n"),
           Edit(TILED_B_MASK, "            mask=offs_n[None, :] < N,\n")),
    bug="missing K mask: the last K strip reads past the end of A's rows and B's columns",
    dtype="fp16", smallest=dict(M=1, N=1, K=1),
    why="any K that is not a multiple of BK=16 reads outside A; K=1 is the first",
    caught_as="OutOfBoundsAccess", unaffected=dict(K=16),
))
register(Mutant(
    name="tiled_k_mask_off_by_one", parent="tiled",
    edits=(Edit(TILED_A_MASK, "            mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] <= K),\n"),
           Edit(TILED_B_MASK, "            mask=((k + offs_k)[:, None] <= K) & (offs_n[None, :] < N),\n")),
    bug="`<=` for `<` in the K mask: one column of A and one row of B past K are loaded",
    dtype="fp16", smallest=dict(M=1, N=1, K=1),
    why="K=1 loads A[0, 1], one element past A",
    caught_as="OutOfBoundsAccess", unaffected=dict(K=16),
))
register(Mutant(
    name="tiled_unmasked_store", parent="tiled",
    edits=(Edit(TILED_STORE_MASK, "    )\n"),),
    bug="missing store mask: a ragged tile writes past the last row and column of C",
    dtype="fp16", smallest=dict(M=1, N=1, K=1),
    why="M < BM=16 or N < BN=32 stores outside C; 1x1 is the first",
    caught_as="OutOfBoundsAccess", unaffected=dict(M=16, N=32),
))
register(Mutant(
    name="tiled_no_other", parent="tiled",
    edits=(Edit(TILED_A_MASK + "            other=0.0,\n", TILED_A_MASK),
           Edit(TILED_B_MASK + "            other=0.0,\n", TILED_B_MASK)),
    bug="masked load without `other`: the undefined masked-off lanes of a partial K strip are summed",
    dtype="fp16", smallest=dict(M=1, N=1, K=1),
    why="K=1 < BK=16 leaves 15 masked-off lanes in the only K strip; their NaN reaches C[0, 0]",
    caught_as="NotBitExact", unaffected=dict(K=16),
))
register(Mutant(
    name="tiled_swapped_a_strides", parent="tiled",
    edits=(Edit(TILED_STRIDES,
                "            a.stride(1), a.stride(0), b.stride(0), b.stride(1), c.stride(0), c.stride(1),\n"),),
    bug="swapped strides: A's row and column strides passed in each other's place",
    dtype="fp16", smallest=dict(M=1, N=1, K=2),
    why="A needs two elements along a dimension whose stride differs from the other: 1 x 2 reads A[0, 1] "
        "at offset 2, past A (a 2 x 1 A has strides (1, 1), which swapping leaves alone)",
    caught_as="OutOfBoundsAccess",
))
register(Mutant(
    name="tiled_floor_grid", parent="tiled",
    edits=(Edit(TILED_GRID, '        grid = (M // cfg["BM"], N // cfg["BN"])\n'),),
    bug="some tiles never written: the grid is computed with floor division",
    dtype="fp16", smallest=dict(M=1, N=1, K=1),
    why="M < BM=16 gives a grid of 0 programs, so C[0, 0] is never written",
    caught_as="NotWritten", unaffected=dict(M=16, N=32),
))
register(Mutant(
    name="tiled_fp16_accumulator", parent="tiled", edits=FP16_ACCUMULATOR,
    bug="fp16 accumulator: partial sums rounded to fp16 after every K strip",
    dtype="fp16", smallest=dict(M=1, N=1, K=1, out_dtype="fp32", profile="small_ints", seed=13),
    why="one product of small_ints (up to 64 x 64) can pass 2048, where fp16 stops holding every integer: "
        "seeds 0 to 12 draw 1x1x1 products that fit, seed 13 the first that does not; an fp32 C shows the lost bits",
    caught_as="NotBitExact", unaffected=dict(profile="ones"),
))
register(Mutant(
    name="tiled_fp16_accumulator_fp8", parent="tiled", edits=FP16_ACCUMULATOR,
    bug="fp16 accumulator on fp8 inputs: partial sums past 2048 lose their last bits",
    dtype="fp8e4m3", dtypes=("fp8e4m3->fp32", "fp8e5m2->fp32"),
    smallest=dict(M=1, N=1, K=1, out_dtype="fp32", profile="near_overflow"),
    why="near_overflow draws fp8 values whose one product passes 65504: the fp16 accumulator overflows where "
        "an fp32 C holds it (from K=2, wide_ints' odd partial sums past 2048 show the lost bits too)",
    caught_as="ValueOutOfBound", unaffected=dict(profile="ones"),
))
register(Mutant(
    name="tiled_int8_accumulator", parent="tiled",
    edits=(Edit(TILED_ACC, "    acc = tl.zeros((BM, BN), dtype=tl.int8)\n"),
           Edit(TILED_DOT, "        acc += tl.dot(a, b, out_dtype=ACC).to(tl.int8)\n")),
    bug="int8 accumulator: partial sums narrowed to int8, so they wrap past 127",
    dtype="int8", smallest=dict(M=1, N=1, K=1, profile="small_ints"),
    why="one product past 127 (small_ints draws int8 values up to 64 in magnitude) wraps in the int8 accumulator",
    caught_as="NotBitExact", unaffected=dict(profile="ones"),
))
register(Mutant(
    name="tiled_nan_to_zero", parent="tiled",
    edits=(Edit(TILED_DOT, "        acc = tl.dot(tl.where(a == a, a, 0.0), tl.where(b == b, b, 0.0), acc, "
                           "input_precision=PRECISION, out_dtype=ACC)\n"),),
    bug="NaN dropped by a where: NaN inputs replaced with zero, so C is finite where it must be NaN",
    dtype="fp16", dtypes=("fp16", "bf16", "fp32"), smallest=dict(M=1, N=1, K=1, specials=True),
    why="specials put a NaN into A's first row in half the draws; at 1x1x1 seed 0 is one of them",
    caught_as="ValueOutOfBound", unaffected=dict(specials=False),
))
register(Mutant(
    name="tiled_bf16_through_fp16", parent="tiled",
    edits=(Edit(TILED_DOT, "        acc = tl.dot(a.to(tl.float16), b.to(tl.float16), acc, input_precision=PRECISION, "
                           "out_dtype=ACC)\n"),),
    bug="bf16 operands routed through fp16: values outside fp16's range become Inf or 0",
    dtype="bf16", smallest=dict(M=1, N=1, K=1, profile="mixed_magnitudes"),
    why="values outside fp16's range: mixed_magnitudes spreads bf16 values over half bf16's exponent range, "
        "and at 1x1x1 seed 0 one product lies beyond fp16's",
    caught_as="ValueOutOfBound", unaffected=dict(profile="normal"),
))
register(Mutant(
    name="tiled_output_toward_zero", parent="tiled",
    edits=(Edit(BEFORE_TILED_KERNEL, '''@triton.jit
def _toward_zero(acc, out_ty: tl.constexpr):
    """acc rounded to C's dtype toward zero, where the promise is to nearest."""
    if out_ty.primitive_bitwidth >= 32:
        return acc.to(out_ty)
    return acc.to(out_ty, fp_downcast_rounding="rtz")


''' + BEFORE_TILED_KERNEL), Edit(TILED_STORE_VALUE, "        _toward_zero(acc, c_ptr.dtype.element_ty),\n")),
    bug="output rounded toward zero instead of to nearest: C off by up to one ulp",
    dtype="fp16", dtypes=("fp16->fp16", "bf16->bf16", "fp8e4m3->fp16"),
    smallest=dict(M=1, N=1, K=12, profile="small_ints"),
    why="12 products of small_ints (up to 64 x 64) sum past 2048, where C's fp16 needs rounding: at seed 0 the "
        "sum lies above a midpoint, so to nearest rounds up where toward zero rounds down",
    caught_as="NotBitExact", unaffected=dict(profile="ones"),
))
register(Mutant(
    name="tiled_inf_clamped", parent="tiled",
    edits=(Edit("    PRECISION: tl.constexpr, ACC: tl.constexpr,\n",
                "    PRECISION: tl.constexpr, ACC: tl.constexpr, BIG: tl.constexpr,\n"),
           Edit(TILED_DOT, "        acc = tl.dot(tl.clamp(a, -BIG, BIG), tl.clamp(b, -BIG, BIG), acc, "
                           "input_precision=PRECISION, out_dtype=ACC)\n"),
           Edit("ACC=dtypes.accumulator(a.dtype),\n",
                "ACC=dtypes.accumulator(a.dtype),\n            BIG=torch.finfo(a.dtype).max,\n")),
    bug="Inf inputs clamped to the largest finite value: C finite where it must be Inf",
    dtype="fp16", dtypes=("fp16", "bf16", "fp32"), smallest=dict(M=1, N=1, K=1, specials=True),
    why="specials put a +-Inf into B's first column and its partner +-1 into A: C[0, 0] must be that Inf",
    caught_as="ValueOutOfBound", unaffected=dict(specials=False),
))
register(Mutant(
    name="tiled_overflow_to_nan", parent="tiled",
    edits=(Edit(TILED_STORE_VALUE,
                "        tl.where(tl.abs(acc.to(c_ptr.dtype.element_ty)) == float('inf'), float('nan'), "
                "acc.to(c_ptr.dtype.element_ty)),\n"),),
    bug="results that overflow stored as NaN instead of Inf",
    dtype="fp16", dtypes=("fp16->fp16", "bf16", "fp32"), smallest=dict(M=1, N=1, K=1, specials=True, seed=2),
    why="an Inf result stored as NaN: specials put a +-Inf times +-1 into C[0, 0] unless their NaN takes "
        "that one element, as at seeds 0 and 1",
    caught_as="ValueOutOfBound", unaffected=dict(specials=False),
    shrinks_to=dict(M=1, N=2, K=1, specials=True),
    shrinks_to_why="at seed 0 a second column gives the Inf a place beside the NaN; shrinking N to 1 keeps seed 0, "
                   "where the NaN alone is drawn, and shrinking never raises the seed to 2",
))
register(Mutant(
    name="tiled_13_bit_accumulator", parent="tiled",
    edits=(Edit(TILED_DOT, TILED_DOT + "        acc = (acc.to(tl.uint32, bitcast=True) & 0xFFFFF800).to(tl.float32, "
                                       "bitcast=True)  # 12 fraction bits kept\n"),),
    bug="13-bit accumulation where 23 bits are promised (fp8-class arithmetic for fp16, bf16, fp32 inputs)",
    dtype="fp32", dtypes=("fp32", "fp16->fp32", "bf16->fp32"), smallest=dict(M=1, N=1, K=1, profile="wide_ints"),
    why="wide_ints' fp32 product of a 12-bit and an 11-bit integer needs 23 bits; an accumulator of 13 loses them",
    caught_as="NotBitExact", unaffected=dict(profile="ones"),
))
register(Mutant(
    name="tiled_bf16_accumulator", parent="tiled",
    edits=(Edit(TILED_DOT, TILED_DOT + "        acc = acc.to(tl.bfloat16).to(ACC)  # partial sums kept in bf16\n"),),
    bug="bf16 accumulator: partial sums rounded to bf16 (8 bits) after every K strip",
    dtype="fp16", dtypes=("fp16", "bf16", "fp32"), smallest=dict(M=1, N=1, K=1, profile="wide_ints"),
    why="one product of wide_ints (11-bit integers in fp16) needs more bits than bf16's 8",
    caught_as="NotBitExact", unaffected=dict(profile="ones"),
))
register(Mutant(
    name="tiled_aligned_fast_path", parent="tiled",
    edits=(Edit("def make_launch(", '''def _aligned(*tensors) -> bool:
    """A fast path's condition: every leading stride a multiple of 16 elements."""
    return all(max(t.stride()) % 16 == 0 for t in tensors)


def make_launch('''), Edit(TILED_STRIDES, "            a.stride(0), a.stride(1), b.stride(0), b.stride(1) if _aligned(a, b, c) else "
                                        "b.stride(0), c.stride(0), c.stride(1),\n")),
    bug="only strides not divisible by 16: the generic path passes B's row stride as its column stride",
    dtype="fp16", smallest=dict(M=1, N=2, K=1),
    why="B needs two columns for its column stride to matter: a 1 x 2 B (strides (2, 1)) reads B[0, 1] at "
        "offset 2, past B; its leading stride 2 is not a multiple of 16, so the generic path runs",
    caught_as="OutOfBoundsAccess", unaffected=dict(N=16, K=16),
))
register(Mutant(
    name="tiled_gemv_fast_path", parent="tiled",
    edits=(Edit(BEFORE_TILED_KERNEL, '''@triton.jit
def gemv_kernel(a_ptr, b_ptr, c_ptr, N, K, stride_a, stride_bk, stride_bn, stride_cn, BN: tl.constexpr,
                BK: tl.constexpr):
    """c[0, n] = sum_k a[k] * b[k, n]: a vector times a matrix, on CUDA cores."""
    offs_n = tl.program_id(0) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + (k + offs_k) * stride_a, mask=(k + offs_k) < K, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0).to(tl.float32)
        acc += tl.sum(a[:, None] * b, axis=0)
    tl.store(c_ptr + offs_n * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=offs_n < N)


''' + BEFORE_TILED_KERNEL), Edit(TILED_GRID, TILED_GRID + '''        if M == 1:  # GEMV: A is a single row
            gemv_kernel[(triton.cdiv(N, 32),)](a, b, c, N, K, a.stride(0), b.stride(0), b.stride(1), c.stride(1),
                                               BN=32, BK=16)
            return
''')),
    bug="only M == 1: a GEMV fast path reads A's row with the wrong stride (stride(0) for stride(1))",
    dtype="fp16", smallest=dict(M=1, N=1, K=2),
    why="the path runs only for M == 1, and a 1 x 2 row-major A (strides (2, 1)) reads A[0, 1] at offset 2, "
        "past A; at K=1 the stride is never used",
    caught_as="OutOfBoundsAccess", unaffected=dict(M=2),
))

# --- grouped (seeds 000, 004) -------------------------------------------------------------------------

GROUP_SIZE = "    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)  # the last group may be smaller\n"
register(Mutant(
    name="grouped_k_loop_floor", parent="grouped",
    edits=(Edit("    for k in range(0, tl.cdiv(K, BK)):\n", "    for k in range(0, K // BK):\n"),),
    bug="K loop floors instead of rounding up: the partial last K strip is dropped",
    dtype="fp16", smallest=dict(M=1, N=1, K=1),
    why="K=1 < BK=16 runs the loop zero times, so C[0, 0] = 0 where A @ B = 1",
    caught_as="NotBitExact", unaffected=dict(K=16),
))
register(Mutant(
    name="grouped_k_mask_only", parent="grouped",
    edits=(Edit("mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left)", "mask=offs_k[None, :] < k_left"),
           Edit("mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N)", "mask=offs_k[:, None] < k_left")),
    bug="missing M and N masks on the loads only: C is right, but a ragged tile reads outside A and B",
    dtype="fp16", smallest=dict(M=1, N=1, K=1),
    why="M < BM=16 already loads A's rows 1..15, past the end of A; C[0, 0] is right",
    caught_as="OutOfBoundsAccess", unaffected=dict(M=16, N=16),
))
register(Mutant(
    name="grouped_unclamped_group", parent="grouped",
    edits=(Edit(GROUP_SIZE, "    group_size_m = GROUP_M\n"),),
    bug="grouped ordering: the last group's size is not clamped, so some tiles are never written",
    dtype="fp16", smallest=dict(M=1, N=17, K=1),
    why="one tile row (a group of 1, not GROUP_M=3) and two tile columns: program 1 computes tile (1, 0), "
        "past M, instead of (0, 1), which stays unwritten",
    caught_as="NotWritten", unaffected=dict(M=48),
))
register(Mutant(
    name="grouped_group_min", parent="grouped",
    edits=(Edit(GROUP_SIZE, "    group_size_m = tl.minimum(num_pid_m, GROUP_M)\n"),),
    bug="grouped ordering: the wrong min for the last group's size (first_pid_m not subtracted)",
    dtype="fp16", smallest=dict(M=49, N=17, K=1),
    why="the smallest M with a smaller last group is 4 tile rows (3 + 1, GROUP_M=3, BM=16); two tile columns "
        "are needed for a program to land on the wrong tile",
    caught_as="NotWritten", unaffected=dict(M=48),
))

# --- the others -----------------------------------------------------------------------------------------

register(Mutant(
    name="modulo_wrap_unmasked_store", parent="modulo_wrap",
    edits=(Edit("    tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=c_mask)\n",
                "    tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty))\n"),),
    bug="modulo wrap without a store mask: the wrapped rows and columns are stored past C",
    dtype="fp16", smallest=dict(M=1, N=1, K=1),
    why="M < BM=16 or N < BN=32 wraps; the 1x1 tile's 16 x 32 store writes past C",
    caught_as="OutOfBoundsAccess", unaffected=dict(M=16, N=32),
))
register(Mutant(
    name="naive_broadcast_sum", parent="naive",
    edits=(Edit('''    for _ in range(0, K):
        a = tl.load(a_ptrs, mask=offs_m < M, other=0.0).to(ACC)
        b = tl.load(b_ptrs, mask=offs_n < N, other=0.0).to(ACC)
        acc += a[:, None] * b[None, :]
        a_ptrs += stride_ak
        b_ptrs += stride_bk
''', '''    offs_k = tl.arange(0, 16)
    for k in range(0, K, 16):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0).to(ACC)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0).to(ACC)
        acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
'''),),
    bug="the naive kernel as tl.sum(a[:, :, None] * b[None, :, :], axis=1): the compiler makes it a tf32 dot",
    dtype="fp32", smallest=dict(M=1, N=1, K=1, profile="wide_ints"),
    why="wide_ints gives A 12 significant bits, one more than tf32 keeps: the compiled product is off at 1x1x1",
    caught_as="NotBitExact", gpu_only=True,
    gpu_only_why="the rewrite into tt.dot is a compiler pass; the interpreter runs the sum of products as written",
))
register(Mutant(
    name="persistent_default_precision", parent="persistent",
    edits=(Edit("acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)", "acc = tl.dot(a, b, acc, out_dtype=ACC)"),),
    bug="tf32 where ieee is promised: tl.dot left at its default input precision",
    dtype="fp32", smallest=dict(M=1, N=1, K=1, profile="wide_ints"),
    why="wide_ints gives A 12 significant bits, one more than tf32 keeps: one product is off at 1x1x1",
    caught_as="NotBitExact",
))
register(Mutant(
    name="persistent_tile_chunks", parent="persistent",
    edits=(Edit("    tile_id_c = tl.program_id(0) - NUM_PROGRAMS\n",
                "    chunk = num_tiles // NUM_PROGRAMS  # a contiguous chunk of tiles each\n"
                "    tile_id_c = tl.program_id(0) * chunk - 1\n"),
           Edit("    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=FLATTEN,",
                "    for tile_id in tl.range(tl.program_id(0) * chunk, (tl.program_id(0) + 1) * chunk, 1, flatten=FLATTEN,"),
           Edit("        tile_id_c += NUM_PROGRAMS\n", "        tile_id_c += 1\n")),
    bug="persistent loop skips tiles: chunks of total // programs tiles, the remainder belongs to no program",
    dtype="fp16", smallest=dict(M=1, N=1, K=1),
    why="one tile and 3 programs: chunks of 1 // 3 = 0 tiles, so no program writes C",
    caught_as="NotWritten",
))
register(Mutant(
    name="split_k_into_c", parent="split_k",
    edits=(Edit("    tl.atomic_add(ws_ptr + offs_m[:, None] * N + offs_n[None, :], acc,\n",
                "    tl.atomic_add(ws_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(ws_ptr.dtype.element_ty),\n"),
           Edit("        workspace = torch.zeros((M, N), dtype=dtypes.accumulator_torch(a.dtype), device=a.device)\n",
                "        workspace = c  # the partial sums go straight into C, which nobody zeroed\n"),
           Edit('''        round_into_c_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
            workspace, c, M, N, c.stride(0), c.stride(1), BM=bm, BN=bn,
        )
''', "")),
    bug="split-K relies on C being zero: partial sums are added into C without zeroing it first",
    dtype="fp16", smallest=dict(M=1, N=1, K=1),
    why="any C that does not hold zeros shows it; the suite pre-fills C with NaN, so 1x1x1 gives NaN",
    caught_as="NotWritten",
))
register(Mutant(
    name="stream_k_late_first_owner", parent="stream_k",
    edits=(Edit("            first_owner = tile_first // iters_per_program\n",
                "            first_owner = tl.cdiv(tile_first, iters_per_program)\n"),),
    bug="stream-K fix-up skips the first contributor: its first owner is rounded up, not down",
    dtype="fp16", smallest=dict(M=17, N=1, K=33),
    why="a tile must start inside a program's share: 2 tiles x 3 K-iterations over 3 programs (2 each) put "
        "tile 1's first iteration in program 1's share, whose partial is dropped",
    caught_as="NotBitExact", unaffected=dict(K=32),
))
register(Mutant(
    name="descriptor_unaligned_tma_store", parent="descriptor",
    edits=(Edit("        c_tma = (inner * c.element_size()) % 16 == 0\n", "        c_tma = True  # TMA stores everywhere\n"),),
    bug="TMA store on a C whose rows are not a multiple of 16 bytes overwrites past each row (#11583)",
    dtype="fp16", smallest=dict(M=1, N=1, K=1, a=dict(pad=7), b=dict(pad=7), c=dict(pad=7)),
    why="a 1-element fp16 row is 2 bytes: the store also writes the 14 bytes after it, C's padding "
        "(the suite's canaries caught exactly this on an H100)",
    caught_as="WriteOutsideC", gpu_only=True,
    gpu_only_why="the interpreter runs a descriptor store element by element and clips it exactly at C's shape",
    unaffected=dict(N=8, b={}, c={}),  # rows of 8 fp16: 16 bytes, no padding needed
))

# --- the family: epilogues (tiled_epilogue), batches (bmm), gated products (swiglu) --------------------

EPILOGUE_BIAS = "    bias = tl.load(bias_ptr + offs_n * stride_bias, mask=offs_n < N, other=0.0)\n"
EPILOGUE_BIAS_ADD = "    y += bias.to(tl.float32)[None, :]\n"
EPILOGUE_ALPHA = "    y = acc * alpha\n"
EPILOGUE_GELU = "    return 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476))\n"
EPILOGUE_BETA_GUARD = ("    if beta != 0:  # BLAS: beta == 0 means C_in is not read\n"
                       "        c_in = tl.load(cin_ptr + offs_m[:, None] * stride_im + offs_n[None, :] * stride_in, "
                       "mask=inside, other=0.0)\n"
                       "        y += beta * c_in.to(tl.float32)\n")

register(Mutant(
    name="epilogue_bias_along_m", parent="tiled_epilogue",
    edits=(Edit(EPILOGUE_BIAS, "    bias = tl.load(bias_ptr + offs_m * stride_bias, mask=offs_m < M, other=0.0)\n"),
           Edit(EPILOGUE_BIAS_ADD, "    y += bias.to(tl.float32)[:, None]\n")),
    bug="bias indexed along the wrong axis: one per row where the contract says one per column",
    dtype="fp16", smallest=dict(M=2, N=1, K=1),
    why="row 1 reads bias[1], past a bias of N=1 element; with M=1 only bias[0] is read, the right one",
    caught_as="OutOfBoundsAccess", unaffected=dict(M=1),
))
register(Mutant(
    name="epilogue_unmasked_bias", parent="tiled_epilogue",
    edits=(Edit(EPILOGUE_BIAS, "    bias = tl.load(bias_ptr + offs_n * stride_bias)\n"),),
    bug="bias load without a mask: a ragged column tile reads past the end of the bias",
    dtype="fp16", smallest=dict(M=1, N=1, K=1),
    why="N=1 < BN=32 loads bias[1..31], past a bias of one element",
    caught_as="OutOfBoundsAccess", unaffected=dict(N=32),
))
register(Mutant(
    name="epilogue_activation_before_alpha", parent="tiled_epilogue",
    edits=(Edit(EPILOGUE_ALPHA, "    y = acc\n"),
           Edit(EPILOGUE_GELU, "    return alpha * (0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476)))\n")),
    bug="alpha applied after the activation (alpha * gelu(AB + beta C_in + bias)), not inside it",
    dtype="fp16", smallest=dict(M=1, N=1, K=1, epilogue=dict(alpha=0.0)),
    why="alpha = 0 is the first scalar drawn: the mutant stores 0 where gelu(0 + 1 + 1) = 1.95 belongs; "
        "alpha = 1 is the one scalar under which both orders agree",
    caught_as="ValueOutOfBound", unaffected=dict(epilogue=dict(alpha=1.0)),
))
register(Mutant(
    name="epilogue_beta_zero_reads_c_in", parent="tiled_epilogue",
    edits=(Edit(EPILOGUE_BETA_GUARD,
                "    c_in = tl.load(cin_ptr + offs_m[:, None] * stride_im + offs_n[None, :] * stride_in, "
                "mask=inside, other=0.0)\n"
                "    y += beta * c_in.to(tl.float32)\n"),),
    bug="beta == 0 still reads C_in: 0 * NaN in an unread C_in makes C NaN (BLAS does not read it)",
    dtype="fp16", smallest=dict(M=1, N=1, K=1, epilogue=dict(beta=0.0)),
    why="with beta = 0 the suite fills C_in with NaN, which the mutant multiplies by 0; any other beta reads "
        "C_in rightly",
    caught_as="ValueOutOfBound", unaffected=dict(epilogue=dict(beta=1.0)),
))
register(Mutant(
    name="epilogue_tanh_gelu", parent="tiled_epilogue",
    edits=(Edit(EPILOGUE_GELU,
                "    inner = 0.7978845608028654 * (y + 0.044715 * y * y * y)\n"
                "    return 0.5 * y * (1.0 + (2.0 * tl.sigmoid(2.0 * inner) - 1.0))\n"),),
    bug="gelu's tanh approximation where the contract declares erf's gelu",
    dtype="fp32", smallest=dict(M=1, N=1, K=1),
    why="the two differ by up to 4.7e-4 (near |y| = 2.2); at y = 1 + 1 + 1 by 4.1e-4, 210 times an fp32 C's "
        "bound (an fp16 C rounds it away)",
    caught_as="ValueOutOfBound",
))

BMM_OFFSETS = "    a_ptr += z * stride_az\n    b_ptr += z * stride_bz\n    c_ptr += z * stride_cz\n"
BMM_PROGRAM_IDS = ("    z = tl.program_id(0).to(tl.int64)\n    tiles_n = tl.cdiv(N, BN)\n"
                   "    pid_m = tl.program_id(1) // tiles_n\n    pid_n = tl.program_id(1) % tiles_n\n")
register(Mutant(
    name="bmm_batch_stride_ignored", parent="bmm",
    edits=(Edit(BMM_OFFSETS, ""),),
    bug="the batch strides ignored: every program computes and stores problem 0",
    dtype="fp16", smallest=dict(M=1, N=1, K=1, batch=2),
    why="with a second problem two programs store into C[0] (the interpreter sees the race before C[1] is "
        "found unwritten)",
    caught_as="DataRace", unaffected=dict(batch=1),
))
register(Mutant(
    name="bmm_batch_on_grid_axis_1", parent="bmm",
    edits=(Edit(BMM_PROGRAM_IDS, "    z = tl.program_id(1).to(tl.int64)\n    tiles_n = tl.cdiv(N, BN)\n"
                                 "    pid_m = tl.program_id(0) // tiles_n\n    pid_n = tl.program_id(0) % tiles_n\n"),
           Edit('    grid = (a.shape[0], triton.cdiv(M, cfg["BM"]) * triton.cdiv(N, cfg["BN"]))\n',
                '    grid = (triton.cdiv(M, cfg["BM"]) * triton.cdiv(N, cfg["BN"]), a.shape[0])\n')),
    bug="the batch on grid axis 1, which CUDA stops at 65535 programs",
    dtype="fp16", smallest=dict(M=1, N=1, K=1, batch=65536),
    why="65536 problems is the first batch past the limit; the interpreter checks the grid CUDA would refuse",
    caught_as="GridTooLarge", unaffected=dict(batch=17),
))

SWIGLU_LOADS = ("        b_gate = tl.load(b_rows + offs_n[None, :] * stride_bn, mask=b_mask, other=0.0)\n"
                "        b_up = tl.load(b_rows + (N + offs_n)[None, :] * stride_bn, mask=b_mask, other=0.0)\n")
register(Mutant(
    name="swiglu_gate_up_swapped", parent="swiglu",
    edits=(Edit(SWIGLU_LOADS,
                "        b_up = tl.load(b_rows + offs_n[None, :] * stride_bn, mask=b_mask, other=0.0)\n"
                "        b_gate = tl.load(b_rows + (N + offs_n)[None, :] * stride_bn, mask=b_mask, other=0.0)\n"),),
    bug="gate and up halves swapped: the up columns go through silu, the gate columns do not",
    dtype="fp16", smallest=dict(M=1, N=1, K=1, specials=True),
    why="with every value 1 the halves are equal; seed 0's specials make one column of B differ from the other, "
        "and the stored product pre shows them swapped",
    caught_as="ValueOutOfBound", unaffected=dict(specials=False),
))
register(Mutant(
    name="swiglu_pre_after_activation", parent="swiglu",
    edits=(Edit("    tl.store(pre_rows + offs_n[None, :] * stride_pn, gate.to(pre_ptr.dtype.element_ty), mask=inside)\n",
                "    tl.store(pre_rows + offs_n[None, :] * stride_pn, (gate * tl.sigmoid(gate)).to(pre_ptr.dtype.element_ty),"
                " mask=inside)\n"),),
    bug="the pre-activation output stored after the activation: the backward pass gets silu(gate), not gate",
    dtype="fp16", smallest=dict(M=1, N=1, K=1),
    why="gate = 1 stores silu(1) = 0.73 where the exact product 1 belongs",
    caught_as="NotBitExact",
))

register(Mutant(
    name="swiglu_b_rows_backwards", parent="swiglu",
    edits=(Edit("        b_rows = b_ptr + (k + offs_k)[:, None] * stride_bk\n",
                "        b_rows = b_ptr - (k + offs_k)[:, None] * stride_bk\n"),),
    bug="B's rows stepped backwards from its data pointer: every K row past the first read before B",
    dtype="fp16", smallest=dict(M=1, N=1, K=2),
    why="K = 1 reads row 0 only, which is in place; K = 2 reads row -1, one row before B",
    caught_as="OutOfBoundsAccess", unaffected=dict(K=1),
))

# --- the family: scaled operands (block_fp8, rowwise_fp8, int8_scaled) ----------------------------------

BLOCK_FP8_GROUP = "        group = (k * BK) // GROUP_K\n"
BLOCK_FP8_A_SCALE = ("        a_s = tl.load(as_ptr + offs_m * stride_as_m + group * stride_as_k, mask=offs_m < M, "
                     "other=0.0)\n")
ROWWISE_A_SCALE = "    a_s = tl.load(as_ptr + offs_m * stride_as, mask=offs_m < M, other=0.0)\n"
ROWWISE_APPLY = "    acc = acc * a_s[:, None] * b_s[None, :]\n"

register(Mutant(
    name="block_fp8_scale_per_tile", parent="block_fp8",
    edits=(Edit(BLOCK_FP8_GROUP, "        group = k\n"),),
    bug="one scale per K tile: the scale's group index is the tile's, wrong once a group spans several tiles",
    dtype="fp8e4m3", smallest=dict(M=1, N=1, K=17),
    why="K = 17 is a second K tile (BK = 16) still in group 0: the mutant reads a_scale[0, 1], past a_scale's "
        "one group column; K <= 16 is one tile, the group's own",
    caught_as="OutOfBoundsAccess", unaffected=dict(K=16),
))
register(Mutant(
    name="block_fp8_unmasked_scale_rows", parent="block_fp8",
    edits=(Edit(BLOCK_FP8_A_SCALE, "        a_s = tl.load(as_ptr + offs_m * stride_as_m + group * stride_as_k)\n"),),
    bug="a_scale load without a mask: a ragged M tile reads scales of rows past M (C may still be right)",
    dtype="fp8e4m3", smallest=dict(M=1, N=1, K=1),
    why="M = 1 < BM = 16 loads a_scale[1..15, 0], past a_scale's one row; the stored rows are masked, so only "
        "the sanitizer sees it",
    caught_as="OutOfBoundsAccess", unaffected=dict(M=16),
))
register(Mutant(
    name="rowwise_fp8_row_scale_per_column", parent="rowwise_fp8",
    edits=(Edit(ROWWISE_A_SCALE, "    a_s = tl.load(as_ptr + offs_n * stride_as, mask=offs_n < N, other=0.0)\n"),
           Edit(ROWWISE_APPLY, "    acc = acc * a_s[None, :] * b_s[None, :]\n")),
    bug="the per-row scale of A applied per column",
    dtype="fp8e4m3", smallest=dict(M=1, N=2, K=1),
    why="column 1 reads a_scale[1], past the one row's scale; with N = 1 only a_scale[0] is read, the right one",
    caught_as="OutOfBoundsAccess", unaffected=dict(N=1),
))
register(Mutant(
    name="int8_scaled_even_k_by_parity", parent="int8_scaled",
    edits=(Edit('EVEN_K=K % cfg["BK"] == 0', "EVEN_K=K % 2 == 0"),),
    bug="the K-tail predicate taken as K % 2 == 0 instead of K % BK == 0: an even K past a tile loads unmasked",
    dtype="int8", smallest=dict(M=1, N=1, K=2),
    why="K = 2 is even but not a multiple of BK = 16: A's row is read past its 2 elements; K = 1 is odd and "
        "masked",
    caught_as="OutOfBoundsAccess", unaffected=dict(K=1),
))

W4A16_ZERO = "        z = (words >> ((offs_n % 8) * 4)) & 0xF\n"
W4A16_B = ("        packed = tl.load(b_ptr + (offs_k // 2)[:, None] * stride_bk + offs_n[None, :] * stride_bn,\n"
           "                         mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0)\n")

register(Mutant(
    name="w4a16_zero_shift_by_index", parent="w4a16",
    edits=(Edit(W4A16_ZERO, "        z = (words >> (offs_n % 8)) & 0xF\n"),),
    bug="a zero point unpacked with the wrong shift: by the column's index in its int32, not four bits each",
    dtype="fp16", smallest=dict(M=1, N=2, K=1),
    why="column 1's zero point is read from bits 1..4 of 0x88888888 (4), not bits 4..7 (8); column 0's shift is 0 "
        "either way",
    caught_as="NotBitExact", unaffected=dict(N=1),
))
register(Mutant(
    name="w4a16_packed_rows_bounded_by_k", parent="w4a16",
    edits=(Edit(W4A16_B, "        packed = tl.load(b_ptr + (offs_k // 2)[:, None] * stride_bk + offs_n[None, :] * "
                         "stride_bn,\n                         mask=((offs_k // 2)[:, None] < K) & (offs_n[None, :] < N), "
                         "other=0)\n"),),
    bug="the packed K bound taken as the logical K: packed rows up to K are read, past B's ceil(K / 2)",
    dtype="fp16", smallest=dict(M=1, N=1, K=2),
    why="K = 2 packs into one byte row; the mutant reads rows 1..7 of a tile of 16 codes (row 1 is past B); K = 1 "
        "reads row 0 only",
    caught_as="OutOfBoundsAccess", unaffected=dict(K=1),
))

MXFP4_BYTE0 = "    bits = tl.where(s == 0, 0x00400000, bits)\n"
MXFP4_A_SCALE = ("            a_s = tl.load(as_ptr + offs_m[:, None] * stride_as_m + (offs_k // GROUP)[None, :] * "
                 "stride_as_k,\n")

register(Mutant(
    name="mxfp4_e8m0_byte0_as_zero", parent="mxfp4",
    edits=(Edit(MXFP4_BYTE0, ""),),
    bug="E8M0 byte 0 decoded as 0 (its bits shifted into an fp32 exponent of 0), not 2**-127 as OCP MX says",
    dtype="fp8e4m3", smallest=dict(M=1, N=2, K=2, profile="small_ints", epilogue=dict(scales="specials")),
    why="special scales put B's byte 0 against A's 2**119 (A's codes 12, 5): B's weights -6 and 4 times 2**-127, "
        "normal bf16s a correct kernel keeps, are lost (-0.28 and 0.08 in C); with K = 1 seed 0's B is a group of "
        "zero weights, and 1.5 * 2**-127 is subnormal, which a correct kernel may flush too",
    caught_as="ValueOutOfBound", unaffected=dict(epilogue=dict(scales="normal")),
))
register(Mutant(
    name="mxfp4_scale_group_by_cdiv", parent="mxfp4",
    edits=(Edit(MXFP4_A_SCALE, "            a_s = tl.load(as_ptr + offs_m[:, None] * stride_as_m + tl.cdiv(offs_k, GROUP)"
                               "[None, :] * stride_as_k,\n"),),
    bug="the scale group of element k taken as cdiv(k, 32), not k // 32: off by one but at each group's start",
    dtype="fp8e4m3", smallest=dict(M=1, N=1, K=2),
    why="element 1 of K = 2 reads group 1's scale, past a_scale's one column; K = 1 reads group 0 only",
    caught_as="OutOfBoundsAccess", unaffected=dict(K=1),
))

MOE_C_MASK = "    c_mask = token_mask[:, None] & (offs_cn[None, :] < N)\n"
MOE_ZEROS = "        tl.store(c_ptrs, tl.zeros((BM, BN), dtype=c_ptr.dtype.element_ty), mask=c_mask)\n"
MOE_TILE = ("    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)\n"
            "    pid_n = (pid % num_pid_in_group) // group_size_m\n")

register(Mutant(
    name="moe_n_tail_unmasked", parent="fused_moe",
    edits=(Edit(MOE_C_MASK, "    c_mask = token_mask[:, None]\n"),),
    bug="C's store masked by slot only, not by column: a tile's columns past N write into the next row",
    dtype="fp16", smallest=dict(M=1, N=1, K=1, groups=dict(count=1, top_k=1)),
    why="one token, one expert, N = 1: the tile's 15 columns past N land past C's one element",
    caught_as="OutOfBoundsAccess", unaffected=dict(N=16),
))
register(Mutant(
    name="moe_padding_slot_stored", parent="fused_moe",
    edits=(Edit(MOE_C_MASK, "    c_mask = (offs_token_id[:, None] < num_tokens_post_padded) & (offs_cn[None, :] < N)\n"),),
    bug="C's store masked by the entries in use, not by valid slots: padding entries (the slot count) are stored",
    dtype="fp16", smallest=dict(M=1, N=1, K=1, groups=dict(count=1, top_k=1)),
    why="one slot padded to a block of 16: the 15 padding entries name row 1, one past C's last",
    caught_as="OutOfBoundsAccess",
))
register(Mutant(
    name="moe_non_local_block_skipped", parent="fused_moe",
    edits=(Edit(MOE_ZEROS, ""),),
    bug="a non-local expert's block (expert id -1) returns without writing its slots' zeros",
    dtype="fp16", smallest=dict(M=2, N=1, K=1, groups=dict(count=2, top_k=1, local=(0, 1))),
    why="seed 0 routes token 0 to expert 0, local, and token 1 to expert 1, not local: row 1 is never written",
    caught_as="NotWritten", unaffected=dict(groups=dict(count=2, top_k=1)),
))
register(Mutant(
    name="moe_grid_m_n_swapped", parent="fused_moe",
    edits=(Edit(MOE_TILE, "    pid_m = first_pid_m + ((pid % num_pid_in_group) // group_size_m)\n"
                          "    pid_n = (pid % num_pid_in_group) % group_size_m\n"),),
    bug="the tile's block row and column taken from each other's formula in the grouped tile order",
    dtype="fp16", smallest=dict(M=1, N=1, K=1, groups=dict(count=2, top_k=2)),
    why="one token to both experts: two blocks of one column tile, and both programs take block 0 (column tile 1, "
        "past N, masked): expert 1's slot is never written",
    caught_as="NotWritten", unaffected=dict(groups=dict(count=2, top_k=1)),
))

RAGGED_STORE_MASK = "mask=(offs_m[:, None] < m_size) & (offs_n[None, :] < N))\n"

register(Mutant(
    name="ragged_tail_into_next_group", parent="ragged",
    edits=(Edit(RAGGED_STORE_MASK, "mask=offs_n[None, :] < N)\n"),),
    bug="C's store masked by column only: a group's last tile writes its rows past the group into the next group's",
    dtype="fp16", smallest=dict(M=1, N=1, K=1, groups=dict(count=1, sizes=(1,))),
    why="one group of one row: the tile's other 15 rows land past C's one row",
    caught_as="OutOfBoundsAccess", unaffected=dict(M=16, groups=dict(count=1, sizes=(16,))),
))

# --- pointer_array (tutorial 08): problems of their own shapes, through device arrays of pointers -----------

POINTER_ARRAY_M_TILES = "        num_m_tiles = tl.cdiv(gm, BM)\n"
POINTER_ARRAY_LDS = "    lds = [s for x, y, z in zip(a, b, c) for s in (x.stride(0), y.stride(0), z.stride(0))]\n"

register(Mutant(
    name="pointer_array_empty_problem_tile", parent="pointer_array",
    edits=(Edit(POINTER_ARRAY_M_TILES, "        num_m_tiles = (gm + BM) // BM\n"),),
    bug="a problem's row tiles counted as (M + BM) // BM, not cdiv: an empty problem gets a tile, whose rows "
        "wrap modulo M = 0 and read A at a problem that has no element",
    dtype="fp16", smallest=dict(M=1, N=1, K=1, groups=dict(count=2, sizes=(1, 0), dims=((1, 0), (1, 1)))),
    why="an empty problem beside one with an element of C (a launch with no element of C returns before the "
        "kernel): its one tile loads A[1] (no element) at row 0; any M > 0 has the right tiles or an extra one "
        "wrapping onto its own rows, stored nowhere",
    caught_as="OutOfBoundsAccess", unaffected=dict(M=17, groups=dict(count=2, sizes=(1, 16), dims=((1, 0), (1, 1)))),
))
register(Mutant(
    name="pointer_array_lda_as_k", parent="pointer_array",
    edits=(Edit(POINTER_ARRAY_LDS,
                "    lds = [s for x, y, z in zip(a, b, c) for s in (x.shape[1], y.stride(0), z.stride(0))]\n"),),
    bug="A assumed contiguous: the host passes each problem's K as its leading dimension, not A's row stride",
    dtype="fp16", smallest=dict(M=2, N=1, K=2, groups=dict(count=2, sizes=(0, 2), dims=((0, 2), (1, 1)))),
    why="a problem of K = 1 beside one of K = 2: its rows lie 2 apart in A, and row 1 is read at element 1, "
        "between its elements",
    caught_as="OutOfBoundsAccess", unaffected=dict(K=1, groups=dict(count=2, sizes=(0, 2), dims=((0, 1), (1, 1)))),
))
