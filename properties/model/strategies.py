"""Hypothesis strategies for GemmCases, aimed at each variant's own block boundaries.

Every choice is ordered simplest first, because Hypothesis shrinks integers toward their lower
bound, `sampled_from` toward its first element and `one_of` toward its first branch: a failure
shrinks to the plainest case that still fails.

  dims     any size up to the axis's reach (the backend's limit, or four tiles of the variant's
           largest block and a ragged edge), or a size where masks live: 1, t*b-1, t*b, t*b+1 for
           every block size b and t = 1..4 tiles, half a block, primes, and multiples of 16 (Triton
           compiles integer arguments separately when they are 1, divisible by 16, or neither)
  layouts  each operand independently: row- or column-major, then optionally a padded leading
           dimension (sometimes to a multiple of 16), an inner stride of 2, a storage offset that
           misaligns the data pointer, or (A and B only) a zero stride; every combination is
           reachable and each feature shrinks away on its own
  values   profiles in shrink order, then a seed
"""

from __future__ import annotations

import functools
from dataclasses import replace

from hypothesis import strategies as st

from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.properties.model import profiles, runnable, specialization
from gemm_fuzz.properties.model.cases import (
    ROUTES,
    SCALARS,
    SCALE_PROFILES,
    Epilogue,
    GemmCase,
    Groups,
    Layout,
    Vector,
)
from gemm_fuzz.reference.formats import by_name, name_of

PRIMES = (2, 3, 5, 7, 11, 13, 31, 37, 61, 67, 127, 131, 251, 257, 509, 521)


TILES = 4  # every axis reaches this many tiles of its largest block, and a ragged edge past them
REACH_LIMIT = 4097  # no axis is drawn longer than this (a block beyond a quarter of it is not fully reached)


def reach(blocks: set[int], max_dim: int, tiles: int = TILES) -> int:
    """The longest size drawn along an axis: `max_dim`, or far enough for `tiles` tiles of the largest
    block and a ragged edge, whichever is longer (up to REACH_LIMIT)."""
    return min(max(max_dim, tiles * max(blocks) + 1), REACH_LIMIT)


def boundary_values(blocks: set[int], max_dim: int, tiles: int = TILES) -> list[int]:
    """Sizes where masks live: 1, b/2, and t*b - 1, t*b, t*b + 1 for every block size b and tile count
    t up to `tiles` (so that multi-tile grids, ragged last tiles and tile counts that do and do not
    divide a persistent grid's program count are all drawn)."""
    values = {1}
    for b in blocks:
        values.add(b // 2)
        for t in range(1, tiles + 1):
            values.update({t * b - 1, t * b, t * b + 1})
    return sorted(v for v in values if 1 <= v <= max_dim)


def dims(blocks: set[int], max_dim: int, tiles: int = TILES) -> st.SearchStrategy[int]:
    """Any size up to the axis's reach, or one aimed at the block boundaries, a prime or a multiple of 16."""
    return _dims(frozenset(blocks), max_dim, tiles)


# Strategies are built once for each set of arguments: Hypothesis validates every new strategy object
# the first time it is drawn from, which costs more than the draw itself.
@functools.cache
def _dims(blocks: frozenset[int], max_dim: int, tiles: int) -> st.SearchStrategy[int]:
    top = reach(blocks, max_dim, tiles)
    aimed = sorted(set(boundary_values(blocks, top, tiles)) | {p for p in PRIMES if p <= top}
                   | set(range(16, min(top, 4 * max_dim) + 1, 16)))
    return st.one_of(st.integers(1, top), st.sampled_from(aimed))


@functools.cache
def _sampled(values: tuple) -> st.SearchStrategy:
    return st.sampled_from(values)


@functools.cache
def _optional(strategy: st.SearchStrategy[int], none=0) -> st.SearchStrategy[int]:
    """`none` first (the feature absent), else a drawn value: shrinks to the feature's absence."""
    return st.one_of(st.just(none), strategy)


@functools.cache
def _padding(to_16: int) -> st.SearchStrategy[int]:
    return _optional(st.one_of(st.just(to_16), st.integers(1, 17)))


_STEP = _optional(st.just(2), none=1)
_BROADCAST = _optional(st.sampled_from(["rows", "cols"]), none="")


@st.composite
def layouts(draw, variant: Variant, operand: str, rows: int, cols: int, dtype: str) -> Layout:
    """A layout for one operand (rows x cols) that `variant` accepts."""
    req = variant.requirements
    itemsize = by_name(dtype).dtype.itemsize
    if operand in req.contiguous:
        return Layout()
    order = draw(_sampled(("row", "col")))
    lead_base = max(cols, 1) if order == "row" else max(rows, 1)
    if req.stride_alignment:
        # tensor descriptors: unit inner stride, leading stride and base padded to the alignment
        unit = max(1, req.stride_alignment // itemsize)
        pad = (-lead_base) % unit + unit * draw(_optional(st.integers(1, 2)))
        return Layout(order, pad=pad, offset=unit * draw(_optional(st.integers(1, 2))))
    to_16 = (-lead_base) % 16 or 16  # padding that makes the leading stride a multiple of 16
    pad = draw(_padding(to_16))
    step = 1 if req.contiguous_dim else draw(_STEP)
    offset = draw(_optional(st.integers(1, 9)))
    broadcast = ""
    if operand not in OUTPUTS and not req.positive_strides and not req.contiguous_dim:
        broadcast = draw(_BROADCAST)
    return Layout(order, pad=pad, step=step, offset=offset, broadcast=broadcast)


OUTPUTS = ("c", "pre")  # operands a kernel writes: never broadcast, never overlapping
# batch sizes, simplest first, then past the 65535 programs grid axes 1 and 2 take
BATCHES = (1, 2, 3, 4, 5, 7, 8, 16, 17)
GRID_LIMIT = 65535
BIG_BATCHES = (GRID_LIMIT + 1, GRID_LIMIT + 2, 70001)
BIG_BATCH_DIM = 16  # a big batch's problems are at most this long on each axis (65536 x 16 x 16: 16M elements)
_SCALAR = st.one_of(st.sampled_from(SCALARS), st.floats(-4, 4, allow_nan=False, width=32))
_BIAS_STRIDE = st.sampled_from((1, 0, 2))


@functools.cache
def _batches(device_type: str, big: bool) -> st.SearchStrategy[int]:
    """A batch size: one draw in four past the grid's limit where `big` (the interpreter checks such a
    launch's grid without running its programs: one size is enough there); shrinks to 1 problem."""
    small = _sampled(BATCHES)
    if not big:
        return small
    return st.one_of(small, small, small, _sampled(BIG_BATCHES if device_type == "cuda" else BIG_BATCHES[:1]))


def batch_sizes(batch: int) -> list[int]:
    """The batch sizes drawn below `batch`, then `batch`: what shrinking a batch tries."""
    return sorted({b for b in BATCHES + BIG_BATCHES if b < batch} | {batch})


@st.composite
def batch_layout(draw, variant: Variant, operand: str, layout: Layout) -> Layout:
    """`layout` with how its problems follow each other: packed, with a gap, and for an input shared by
    every problem (batch stride 0) or overlapping the next one in memory."""
    req = variant.requirements
    if operand in req.contiguous:
        return layout
    choices = ("packed", "gap")
    if operand not in OUTPUTS and not req.positive_strides and not layout.broadcast:
        choices += ("shared", "overlap")
    kind = draw(_sampled(choices))
    if kind == "gap":
        return replace(layout, batch_gap=draw(st.integers(1, 17)))
    if kind == "shared":
        return replace(layout, broadcast="batch")
    if kind == "overlap":
        return replace(layout, batch_gap=-draw(st.integers(1, 64)))
    return layout


@st.composite
def epilogues(draw, variant: Variant, m: int, n: int, out: str, k: int = 1) -> Epilogue:
    """The values of an epilogue `variant`'s operation takes: alpha and beta (0, 1, -1 and others),
    a bias of stride 1, 0 or 2, the layouts of C_in, the residual and the second output, and bias (or
    C_in) values at the activation's landmarks; scaled operands, their scales' layouts and values
    (powers of two, then calibration-like, then with 0, a subnormal, the largest fp32 and NaN)."""
    op = variant.operation
    alpha = draw(_SCALAR) if op.alpha else 1.0
    beta = draw(_SCALAR) if op.beta else 1.0
    bias = Vector(draw(_BIAS_STRIDE), draw(_optional(st.integers(1, 9)))) if op.bias else Vector()
    found = {}
    for name, present, cols in (("c_in", op.has_c_in, n), ("residual", op.residual, n),
                                ("pre", op.pre_activation, op.n_columns(n))):
        if present:
            found[name] = draw(layouts(variant, name, m, cols, out))
    landmarks = draw(_sampled((False, True))) if op.activation and (op.bias or op.has_c_in) else False
    if op.scaled:  # the scale tensors' layouts (a vector's stride is its layout's column stride)
        for name in (n for n in ("a_scale", "b_scale") if n in op.extras()):
            shape = op.scale_shape(name[0], m, n, k)
            found[name] = draw(layouts(variant, name, *(shape if len(shape) == 2 else (1, shape[0])), "fp32"))
        found["scales"] = draw(_sampled(SCALE_PROFILES))
    return Epilogue(float(alpha), float(beta), bias, landmarks=landmarks, **found)


def plain_layout(variant: Variant, operand: str, rows: int, cols: int, dtype: str) -> Layout:
    """What `layouts` shrinks to: row-major, padded only as far as the variant's alignment needs."""
    align = variant.requirements.stride_alignment
    if not align or operand in variant.requirements.contiguous:
        return Layout()
    unit = max(1, align // by_name(dtype).dtype.itemsize)
    return Layout(pad=(-max(cols, 1)) % unit)


def simplest_case(variant: Variant, m: int, n: int, k: int, dtype: str, out_dtype: str | None = None,
                  **fields) -> GemmCase:
    """The plainest case of these sizes the variant accepts."""
    out_dtype = out_dtype or default_output(variant, dtype)
    fields.setdefault("batch", 1 if variant.operation.batched else 0)
    if variant.operation.grouped:
        routed = variant.operation.grouped == "routed"
        fields.setdefault("groups", Groups(1, top_k=1) if routed else Groups(
            1, sizes=(m,), dims=((n, k),) if variant.operation.grouped == "problems" else ()))
    return GemmCase(m, n, k, dtype, out_dtype, a=plain_layout(variant, "a", m, k, dtype),
                    b=plain_layout(variant, "b", k, variant.operation.n_columns(n), dtype),
                    c=plain_layout(variant, "c", m, n, out_dtype), **fields)


def default_output(variant: Variant, dtype: str) -> str:
    return name_of(variant.dtypes[by_name(dtype).dtype][0])


def _plain_layouts(case: GemmCase, variant: Variant, which: str = "abc") -> GemmCase:
    return replace(case, **{o: plain_layout(variant, o, *_shape(case, o, variant)) for o in which})


def plainer(variant: Variant) -> list:
    """Simplifications of a failing case, most sweeping first, each a function case -> plainer case;
    a failure is re-run on each and keeps those under which it still fails (properties.run.runner)."""
    default = lambda case: replace(case, out_dtype=default_output(variant, case.dtype))  # noqa: E731
    ones = lambda case: replace(case, profile="ones", seed=0, specials=False)  # noqa: E731
    extra = plainer_groups(variant)
    if variant.operation.batched:  # problems packed one after the other
        extra.append(lambda case: replace(case, **{o: replace(getattr(case, o), batch_gap=0, broadcast=(
            "" if getattr(case, o).broadcast == "batch" else getattr(case, o).broadcast)) for o in "abc"}))
    if variant.operation.has_epilogue or variant.operation.scaled:  # alpha = beta = 1, plain extras, no landmarks
        extra += [lambda case: replace(case, epilogue=_plain_epilogue(case.epilogue, variant, case)),
                  lambda case: replace(case, epilogue=replace(case.epilogue or Epilogue(), landmarks=False)),
                  lambda case: replace(case, epilogue=replace(case.epilogue or Epilogue(), alpha=1.0, beta=1.0))]
    return [
        *extra,
        lambda case: replace(default(ones(_plain_layouts(case, variant))), order=0, config=()),
        lambda case: replace(case, order=0),
        lambda case: replace(case, specials=False),
        lambda case: replace(case, config=()),
        lambda case: _plain_layouts(case, variant),
        ones,
        lambda case: replace(case, profile="ones", seed=0),
        *[lambda case, s=s: replace(case, seed=s) if s < case.seed else case for s in range(8)],  # the smallest seed
        default,
        *[lambda case, o=o: _plain_layouts(case, variant, o) for o in "abc"],
    ]


def _plain_epilogue(epilogue: Epilogue | None, variant: Variant, case: GemmCase) -> Epilogue:
    """The epilogue's extras laid out plainly, its values kept."""
    epilogue = epilogue or Epilogue()
    return replace(epilogue, bias=Vector(), a_scale=Layout(), b_scale=Layout(), scales="pow2",
                   **{name: plain_layout(variant, name, case.M, case.N, case.out_dtype)
                      for name in ("c_in", "residual", "pre")})


def resized(case: GemmCase, variant: Variant, **dims: int) -> GemmCase:
    """`case` with other dimensions; layouts that were plain stay plain (their alignment padding redone);
    ragged groups gain or lose the rows from the end (the last groups)."""
    groups = case.groups
    if groups is not None:  # ragged groups and problems cover the new M; problems span the new N and K
        groups = groups.covering(dims.get("M", case.M)).spanning(dims.get("N", case.N), dims.get("K", case.K))
    new = replace(case, **dims, groups=groups)
    plain = [o for o, lay in (("a", case.a), ("b", case.b), ("c", case.c))
             if lay == plain_layout(variant, o, *_shape(case, o, variant))]
    return _plain_layouts(new, variant, "".join(plain)) if plain else new


def _shape(case: GemmCase, operand: str, variant: Variant | None = None) -> tuple[int, int, str]:
    n = variant.operation.n_columns(case.N) if variant is not None else case.N
    return {"a": (case.M, case.K, case.dtype), "b": (case.K, n, case.dtype),
            "c": (case.M, case.N, case.out_dtype)}[operand]


def _weighted(names: tuple[str, ...]) -> list[str]:
    """The profiles in shrink order, then the heavier ones again (profiles.WEIGHTS): Hypothesis draws
    uniformly from the list and shrinks toward its first entries, so weights change how often a
    profile is drawn, not where a failure shrinks to."""
    return list(names) + [n for n in names for _ in range(profiles.WEIGHTS.get(n, 1) - 1)]


def configs(variant: Variant, device_type: str, dtype: str) -> st.SearchStrategy[tuple]:
    """One of the variant's configurations for this device and dtype: the default first (recorded as
    (), so a case shrinks to it), then each other as its (key, value) pairs. One this device was found
    unable to run (properties/model/runnable.py) is replaced by the next runnable one."""
    space = variant.configs_for(device_type, by_name(dtype).dtype)
    choices = ((),) + tuple(tuple(c.items()) for c in space[1:])

    def runnable_one(chosen: tuple) -> tuple:  # the same draws either way: Hypothesis replays them
        index = choices.index(chosen)
        return choices[runnable.usable(index, len(choices), runnable.blocked(variant, dtype))]

    return _sampled(choices).map(runnable_one)


def output_dtypes(variant: Variant, dtype: str) -> st.SearchStrategy[str]:
    """C's dtype: the variant's default for this input first, then any other it accepts."""
    return _sampled(tuple(name_of(d) for d in variant.dtypes[by_name(dtype).dtype]))


@st.composite
def gemm_cases(draw, variant: Variant, dtype: str, *, device_type: str, max_dim: int,
               value_profiles: tuple[str, ...] | None = None, tiles: int = TILES,
               compile_budget: int | None = None, big_batches: bool = False) -> GemmCase:
    """GemmCases `variant` accepts, for input dtype `dtype` on a backend with tensors on `device_type`
    (a batched variant's batches past the grid's limits only with `big_batches`).
    On a GPU each case is fitted into one of `compile_budget` specialization classes (default: the
    fewest that reach every class; properties/model/specialization.py), drawn first, so that a few
    compilations serve every example."""
    entry = None
    if device_type == "cuda":
        entries = specialization.pool(variant, dtype, compile_budget or specialization.pool_size(variant, dtype))
        entry = entries[draw(_indices(len(entries)))]
    axes = blocks(variant, device_type)
    m, n, k = (draw(dims(b, max_dim, tiles)) for b in axes)
    out = draw(output_dtypes(variant, dtype))
    case = GemmCase(
        M=m,
        N=n,
        K=k,
        dtype=dtype,
        out_dtype=out,
        a=draw(layouts(variant, "a", m, k, dtype)),
        b=draw(layouts(variant, "b", k, variant.operation.n_columns(n), dtype)),
        c=draw(layouts(variant, "c", m, n, out)),
        profile=draw(_sampled(tuple(_weighted(value_profiles or profiles.available(by_name(dtype)))))),
        # specials in two draws of three: most of C stays finite beside them (profiles.with_specials)
        specials=draw(_sampled((False, True, True))) if by_name(dtype).is_float else False,
        seed=draw(st.integers(0, 2**16)),
        # in the interpreter, programs run in a drawn order too (program-id order first: failures shrink to it)
        order=draw(_optional(st.integers(1, 2**16))) if device_type == "cpu" else 0,
        config=draw(configs(variant, device_type, dtype)),
    )
    case = draw(operation_fields(variant, case, device_type, big_batches))
    if entry is None:
        return case
    case = specialization.fit(case, entry, variant, device_type, tuple(reach(b, max_dim, tiles) for b in axes))
    return whole_groups(case, variant)


def whole_groups(case: GemmCase, variant: Variant) -> GemmCase:
    """K a multiple of the scales' group where the kernel needs one, and even where A holds e2m1 codes
    two a byte (fitting a class may have moved K)."""
    step = variant.operation.k_multiple(case.dtype)
    if case.K % step == 0:
        return case
    return resized(case, variant, K=max(1, -(-case.K // step)) * step)


@st.composite
def operation_fields(draw, variant: Variant, case: GemmCase, device_type: str, big_batches: bool) -> GemmCase:
    """`case` with what the variant's operation adds (nothing for C = A @ B, so its draws are as they
    were): a batch and how each operand's problems sit, an epilogue's values."""
    op = variant.operation
    if op.batched:
        batch = draw(_batches(device_type, big_batches))
        if batch > GRID_LIMIT:
            case = resized(case, variant, **{d: min(getattr(case, d), BIG_BATCH_DIM) for d in "MNK"})
        case = replace(case, batch=batch, **{o: draw(batch_layout(variant, o, getattr(case, o))) for o in "abc"})
    if op.grouped:
        case = draw(grouped_fields(variant, case, device_type))
    case = whole_groups(case, variant)  # the kernel asserts K % group_k == 0
    if op.has_epilogue or op.scaled:
        case = replace(case, epilogue=draw(epilogues(variant, case.M, case.N, case.out_dtype, case.K)))
    return case


GROUP_COUNTS = (1, 2, 3, 4, 5, 8)
ROUTED_TOKENS = 48  # on the CPU: at most this many tokens (each is top_k rows of C)


@st.composite
def grouped_fields(draw, variant: Variant, case: GemmCase, device_type: str) -> GemmCase:
    """`case` with its groups (kernels/operation.py: `grouped`) and B's groups laid out one after another
    (packed, with a gap, shared or overlapping). Ragged: each group's rows aimed at M's block boundaries
    (0 and 1 among them), M their sum. Routed: experts, top_k, how the router sends the tokens
    (properties/model/routing.py), under expert parallelism a share of local experts, and metadata of
    the worst-case length or only as long as in use."""
    op = variant.operation
    count = draw(_sampled(GROUP_COUNTS))
    b = draw(batch_layout(variant, "b", case.b))
    if op.grouped == "problems":
        return draw(problem_fields(variant, case, device_type, count, b))
    if op.grouped == "ragged":
        size = st.one_of(st.sampled_from((0, 1)), dims(blocks(variant, device_type)[0], max(8, case.M // 2), 1))
        sizes = tuple(draw(size) for _ in range(count))
        case = resized(replace(case, groups=None), variant, M=sum(sizes))
        return replace(case, b=b, groups=Groups(count, sizes=sizes))
    route = draw(_sampled(ROUTES))
    top_k = count if route == "all" else draw(st.integers(1, min(count, 4) if route != "repeated" else 4))
    local = (0, 0)
    if op.expert_parallel and draw(st.booleans()):
        lo = draw(st.integers(0, count - 1))
        local = (lo, draw(st.integers(lo + 1, count)))
    groups = Groups(count, top_k=top_k, route=route, local=local, shortcut=draw(st.booleans()))
    tokens = case.M if device_type == "cuda" else min(case.M, ROUTED_TOKENS)
    return replace(resized(case, variant, M=tokens), b=b, groups=groups)


@st.composite
def problem_fields(draw, variant: Variant, case: GemmCase, device_type: str, count: int, b: Layout) -> GemmCase:
    """Problems (tutorial 08's form): each problem's M, N and K aimed at the block boundaries (0 and 1
    among them), up to the case's drawn ones; A, B and C row-major, each with the padding (its leading
    dimension) and offset drawn for it, B's problems packed or with a gap."""
    axes = blocks(variant, device_type)
    sizes = [st.one_of(st.sampled_from((0, 1)), dims(block, max(8, top), 1))
             for block, top in zip(axes, (case.M // 2, case.N, case.K))]
    shapes = [tuple(draw(size) for size in sizes) for _ in range(count)]

    groups = Groups(count, sizes=tuple(m for m, _, _ in shapes), dims=tuple((n, k) for _, n, k in shapes))
    return problems_case(case, groups, b=b)


def problems_case(case: GemmCase, groups: Groups, **layouts) -> GemmCase:
    """`case` holding `groups`' problems: M, N and K theirs (the rows summed, the largest N and K), its
    operands (`layouts` where given) row-major with the padding (their leading dimension) and offset
    drawn for them, B's problems packed or with a gap."""
    def row(lay: Layout, gap: int = 0) -> Layout:
        return Layout(pad=lay.pad, offset=lay.offset, batch_gap=gap)
    a, b, c = (layouts.get(o, getattr(case, o)) for o in "abc")
    return replace(case, M=sum(groups.sizes), N=max(n for n, _ in groups.dims), K=max(k for _, k in groups.dims),
                   a=row(a), b=row(b, max(b.batch_gap, 0)), c=row(c), groups=groups)


def plainer_groups(variant: Variant) -> list:
    """A grouped case's simplifications: B's groups packed; ragged, each group emptied or of one row,
    the last group dropped; routed, all experts local, the worst-case metadata, the uniform router,
    top_k 1, fewer experts."""
    if not variant.operation.grouped:
        return []

    def packed(case):
        return replace(case, b=replace(case.b, batch_gap=0, broadcast=""))

    def sized(case, sizes):
        return replace(resized(replace(case, groups=None), variant, M=sum(sizes)),
                       groups=replace(case.groups, count=len(sizes), sizes=tuple(sizes)))

    if variant.operation.grouped == "problems":
        def shaped(case, shapes):
            return problems_case(case, replace(case.groups, count=len(shapes), sizes=tuple(m for m, _, _ in shapes),
                                               dims=tuple((n, k) for _, n, k in shapes)))

        def shapes(case):
            return [(m, n, k) for m, (n, k) in zip(case.groups.sizes, case.groups.dims)]

        def each(g, axis, size):  # problem g's M emptied or cut to one row, its N or K cut to one, never grown
            def simpler(case):
                found = shapes(case)
                if g >= len(found) or found[g][axis] <= size:
                    return case
                found[g] = tuple(size if i == axis else v for i, v in enumerate(found[g]))
                return shaped(case, found)
            return simpler
        return [packed, lambda case: shaped(case, shapes(case)[:-1]) if case.groups.count > 1 else case,
                lambda case: shaped(case, shapes(case)[1:]) if case.groups.count > 1 else case,
                *[each(g, axis, size) for g in range(max(GROUP_COUNTS))
                  for axis, size in ((0, 0), (0, 1), (1, 1), (2, 1))]]
    if variant.operation.grouped == "ragged":
        def each(g, rows):  # group g emptied or cut to one row, never grown
            return lambda case: (sized(case, case.groups.sizes[:g] + (rows,) + case.groups.sizes[g + 1:])
                                 if g < case.groups.count and rows < case.groups.sizes[g] else case)
        return [packed, lambda case: sized(case, case.groups.sizes[:-1]) if case.groups.count > 1 else case,
                *[each(g, rows) for g in range(max(GROUP_COUNTS)) for rows in (0, 1)]]

    def routed(change):
        def simpler(case):
            try:
                return replace(case, groups=replace(case.groups, **change(case)))
            except ValueError:  # not a valid routing (route "all" takes top_k = experts)
                return case
        return simpler

    def fewer(case):
        g = case.groups
        count = max(1, g.count - 1)
        return {"count": count, "top_k": min(g.top_k, count), "local": (0, 0) if g.local[1] > count else g.local}
    return [packed, routed(lambda case: {"local": (0, 0)}), routed(lambda case: {"shortcut": False}),
            routed(lambda case: {"route": "uniform", "top_k": min(case.groups.top_k, case.groups.count)}),
            routed(lambda case: {"top_k": 1}), routed(fewer)]


def pool_cases(variant: Variant, dtype: str, *, device_type: str, max_dim: int, tiles: int = TILES,
               compile_budget: int | None = None) -> list[GemmCase]:
    """A case of each class `gemm_cases` fits its cases into on a GPU (none elsewhere): what a run
    compiles ahead, all at once, before its examples need them."""
    if device_type != "cuda":
        return []
    tops = tuple(reach(b, max_dim, tiles) for b in blocks(variant, device_type))
    base = simplest_case(variant, 33, 33, 33, dtype)
    entries = specialization.pool(variant, dtype, compile_budget or specialization.pool_size(variant, dtype))
    return [specialization.fit(base, entry, variant, device_type, tops) for entry in entries]


def blocks(variant: Variant, device_type: str) -> list[set[int]]:
    """The variant's block sizes along M, N and K on this device."""
    shapes = variant.block_shapes(device_type)
    found = [{s[i] for s in shapes} for i in range(3)]
    op = variant.operation
    if op.scaled:  # the scales' groups have boundaries too
        if "group" in (op.a_scale, op.b_scale) or op.b_scale == "block":
            found[2].add(op.group_k)
        if op.b_scale == "block":
            found[1].add(op.group_n)
    return found


@functools.cache
def _indices(count: int) -> st.SearchStrategy[int]:
    return st.integers(0, count - 1)


def some_peers(variants: list, keep: list, count: int) -> st.SearchStrategy[list]:
    """`keep` and `count` others of `variants` (all of them if fewer), in the order of `variants`;
    shrinks toward the first others."""
    names = {v.name for v in keep}
    others = [v for v in variants if v.name not in names]
    if len(others) <= count:
        return st.just(list(variants))
    return st.lists(st.sampled_from(others), min_size=count, max_size=count, unique_by=lambda v: v.name).map(
        lambda drawn: [v for v in variants if v.name in names or any(d.name == v.name for d in drawn)])
