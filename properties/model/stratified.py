"""Stratified cases: the explicit examples a property runs before Hypothesis draws any.

Derandomized draws (the `ci` profile, 25 per test) go where the generator's seed sends them, and with
the simplest choices drawn first many of them are plain: measured on a one-configuration kernel, the
CI run never reached four value profiles. A handful of explicit cases fixes that for every test:
together they reach every value profile of the input dtype, every layout feature of each operand that
the variant accepts (column-major, padded, strided, offset, broadcast), both sides of every block
boundary along each axis (one element short of a tile, a whole tile, one past it, three tiles with a
ragged edge, M, N or K of 1 and multiples of 16), specials, every output dtype and every configuration.

The list is the same in every run (it depends on the target only), the plainest case first, and each
case is an ordinary GemmCase: a failing one is simplified by the runner (plain layouts, `ones`, each
dimension bisected), and the draws that follow are Hypothesis's as before. On a GPU each case is fitted
into the target's pool of specialization classes (properties/model/specialization.py), as drawn ones are.
"""

from __future__ import annotations

from dataclasses import replace

from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.properties.model import profiles, runnable, specialization, strategies
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


def layout_features(variant: Variant, operand: str) -> tuple[str, ...]:
    """The layout features the strategies draw for this operand ("a", "b" or "c") of this variant, as
    properties/report/reached.py names them, after "row" (none: the plain layout)."""
    req = variant.requirements
    if operand in req.contiguous:
        return ("row",)
    if req.stride_alignment:
        return ("row", "col-major", "padded", "offset")
    found = ["row", "col-major", "padded", "offset"]
    if not req.contiguous_dim:
        found.insert(3, "strided")
        if operand not in strategies.OUTPUTS and not req.positive_strides:
            found.append("broadcast")
    return tuple(found)


def layout(variant: Variant, operand: str, feature: str, rows: int, cols: int, dtype: str) -> Layout:
    """A layout with one feature, as the strategies would draw it for this variant."""
    align = variant.requirements.stride_alignment
    order = "col" if feature == "col-major" else "row"
    if align:  # tensor descriptors: leading stride and base kept aligned
        unit = max(1, align // by_name(dtype).dtype.itemsize)
        base = (-max(cols if order == "row" else rows, 1)) % unit
        return Layout(order, pad=base + unit * (feature == "padded"), offset=unit * (feature == "offset"))
    return {"row": Layout(), "col-major": Layout("col"), "padded": Layout(pad=3), "strided": Layout(step=2),
            "offset": Layout(offset=1), "broadcast": Layout(broadcast="rows" if operand == "a" else "cols")}[feature]


def sizes(blocks: set[int], top: int) -> list[int]:
    """Sizes on both sides of an axis's block boundaries, within `top`: 1; for the largest block b,
    b - 1, b, b + 1 and three tiles with a ragged edge (2b + 1); for each other block, b and b + 1; and a
    multiple of 16 where none of these is one."""
    largest = max(blocks)
    found = [1, largest - 1, largest, largest + 1, 2 * largest + 1]
    for b in sorted(blocks - {largest}, reverse=True):
        found += [b, b + 1]
    kept = []
    for s in found:
        s = min(max(s, 1), top)
        if s not in kept:
            kept.append(s)
    if not any(s % 16 == 0 for s in kept):  # Triton's own class of sizes (past a block of 1, say)
        kept.append(min(largest + 16 - largest % 16, top))
    return kept


BATCH_KINDS = ("packed", "gap", "shared", "overlap")


def operation_fields(variant: Variant, case: GemmCase, i: int) -> GemmCase:
    """The i-th case with what its variant's operation adds, each choice cycling on its own: batch sizes
    and how each operand's problems sit; alpha and beta through 1, 0, -1 and the rest; a bias of stride
    1, 0 and 2; the extras' layout features; the landmarks every other case; the scales' values."""
    op = variant.operation
    if op.batched:
        lay = {}
        for o, shift in (("a", 0), ("b", 1), ("c", 2)):
            kinds = BATCH_KINDS if o != "c" and o not in variant.requirements.contiguous else BATCH_KINDS[:2]
            kind = kinds[(i + shift) % len(kinds)]
            current = getattr(case, o)
            if kind in ("shared", "overlap") and (current.broadcast or variant.requirements.positive_strides):
                kind = "gap"
            lay[o] = replace(current, batch_gap={"gap": 3, "overlap": -5}.get(kind, 0),
                             broadcast="batch" if kind == "shared" else current.broadcast)
        case = replace(case, batch=strategies.BATCHES[i % 5], **lay)
    if op.grouped:
        case = grouped_fields(variant, case, i)
    if op.has_epilogue or op.scaled:
        present = {"c_in": op.has_c_in, "residual": op.residual, "pre": op.pre_activation}
        extras = {}
        for name, shift, cols in (("c_in", 1, case.N), ("residual", 2, case.N), ("pre", 3, op.n_columns(case.N))):
            if present[name]:
                features = layout_features(variant, name)
                extras[name] = layout(variant, name, features[(i + shift) % len(features)], case.M, cols,
                                      case.out_dtype)
        alpha = SCALARS[i % len(SCALARS)] if op.alpha else 1.0
        beta = SCALARS[(i + 1) % len(SCALARS)] if op.beta else 1.0
        bias = Vector((1, 0, 2)[i % 3], i % 2) if op.bias else Vector()
        landmarks = bool(op.activation) and bool(op.bias or op.has_c_in) and i % 2 == 1
        if op.scaled:  # the scale values in turn, the scales column-major every other case
            extras["scales"] = SCALE_PROFILES[i % len(SCALE_PROFILES)]
            extras["b_scale"] = Layout("col" if i % 2 else "row")
        case = replace(case, epilogue=Epilogue(alpha, beta, bias, landmarks=landmarks, **extras))
    return case


def _ragged_sizes(m: int, i: int) -> tuple[int, ...]:
    """Group sizes covering m rows, in turn: one group, an empty group first, last and between, a group
    of one row, m split in halves."""
    half = m // 2
    patterns = ((m,), (0, m), (m, 0), (half, 0, m - half), (1, m - 1) if m else (0,), (0, 0, m, 0, 0),
                (half, m - half))
    return patterns[i % len(patterns)]


def grouped_fields(variant: Variant, case: GemmCase, i: int) -> GemmCase:
    """The i-th case's groups: ragged sizes in turn (empty groups, a group of one row); routed, each
    router distribution, top_k, expert count and, under expert parallelism, a share of local experts;
    B's groups packed, with a gap, shared and overlapping in turn."""
    op = variant.operation
    kind = BATCH_KINDS[i % len(BATCH_KINDS)]
    if kind in ("shared", "overlap") and (case.b.broadcast or variant.requirements.positive_strides
                                          or "b" in variant.requirements.contiguous):
        kind = "gap"
    b = replace(case.b, batch_gap={"gap": 3, "overlap": -5}.get(kind, 0),
                broadcast="batch" if kind == "shared" else case.b.broadcast)
    if op.grouped == "ragged":
        sizes = _ragged_sizes(case.M, i)
        return replace(case, b=b, groups=Groups(len(sizes), sizes=sizes))
    if op.grouped == "problems":  # the ragged sizes as M; one problem of the case's N, another of its K
        sizes = _ragged_sizes(case.M, i)
        count = len(sizes)
        dims = tuple((case.N if g == i % count else case.N * (g + 1) // (count + 1),
                      case.K if g == (i + 1) % count else case.K * (count - g) // (count + 1)) for g in range(count))
        return strategies.problems_case(case, Groups(count, sizes=sizes, dims=dims), b=b)
    count = strategies.GROUP_COUNTS[i % len(strategies.GROUP_COUNTS)]
    route = ROUTES[i % len(ROUTES)]
    top_k = count if route == "all" else 1 + i % min(count, 4)
    local = (count // 2, count) if op.expert_parallel and i % 2 and count > 1 else (0, 0)
    return replace(strategies.resized(case, variant, M=min(case.M, strategies.ROUTED_TOKENS)), b=b,
                   groups=Groups(count, top_k=top_k, route=route, local=local, shortcut=i % 3 == 2))


def cases(variant: Variant, dtype: str, *, device_type: str, max_dim: int, tiles: int = strategies.TILES,
          compile_budget: int | None = None, big_batches: bool = False) -> list[GemmCase]:
    """The target's stratified cases (see the module docstring); on a GPU fitted into the first
    `compile_budget` classes of its pool (default: one round), as `strategies.gemm_cases` fits its own."""
    fmt = by_name(dtype)
    blocks = strategies.blocks(variant, device_type)
    tops = [strategies.reach(b, max_dim, tiles) for b in blocks]
    dims = [sizes(b, top) for b, top in zip(blocks, tops)]
    kinds = profiles.available(fmt)
    features = {o: layout_features(variant, o) for o in "abc"}
    outs = [name_of(d) for d in variant.dtypes[fmt.dtype]]
    space = variant.configs_for(device_type, fmt.dtype)
    skip = runnable.blocked(variant, dtype)
    configs = [() if i == 0 else tuple(c.items()) for i, c in enumerate(space) if i not in skip] or [()]
    count = max(len(kinds), *(len(d) for d in dims), *(len(f) for f in features.values()), len(outs), len(configs))
    # the plainest first (K even where A holds e2m1 codes two a byte, whole groups where the kernel needs them)
    found = [strategies.simplest_case(variant, 1, 1, variant.operation.k_multiple(dtype), dtype)]
    for i in range(1, count + 1):
        # each axis and operand cycles through its own list, shifted so that no two move in step
        m, n, k = (d[(i + shift) % len(d)] for d, shift in zip(dims, (0, 1, 2)))
        out = outs[i % len(outs)]
        shapes = {"a": (m, k, dtype), "b": (k, n, dtype), "c": (m, n, out)}
        lay = {o: layout(variant, o, features[o][(i + shift) % len(features[o])], *shapes[o])
               for o, shift in (("a", 0), ("b", 2), ("c", 4))}
        case = GemmCase(m, n, k, dtype, out, a=lay["a"], b=lay["b"], c=lay["c"], profile=kinds[i % len(kinds)],
                        seed=i, specials=fmt.is_float and i % 2 == 1, order=i % 3 if device_type == "cpu" else 0,
                        config=configs[i % len(configs)])
        found.append(strategies.whole_groups(operation_fields(variant, case, i), variant))
    if variant.operation.batched and big_batches:  # past grid axes 1 and 2 (the interpreter checks the grid only)
        found.append(replace(found[0], batch=strategies.BIG_BATCHES[0]))
    if device_type != "cuda":
        return found
    entries = specialization.pool(variant, dtype, compile_budget or specialization.pool_size(variant, dtype))
    return [specialization.fit(case, entries[i % len(entries)], variant, device_type, tuple(tops))
            for i, case in enumerate(found)]
