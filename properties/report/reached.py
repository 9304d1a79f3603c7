"""What the cases of a target reached: the features a kernel's bugs hide behind (three or more tiles
and a ragged edge along each axis of its blocks, tile counts that are and are not multiples of a
persistent grid's program count, Triton's specialization classes of M, N and K, each layout feature,
value profile and configuration; for the family, batches past the grid's limit and how their problems
sit, alpha and beta at 0 and -1, a bias of stride 0 or 2, the activations' landmarks, the scales' values and
K across and within their groups), counted per
target, so a run can say what it never
reached. Line coverage of a kernel's body is coverage.py's job (`coverage run -m pytest
--gemm-kernel ... --gemm-isolate off` in the interpreter, where the body runs as Python)."""

from __future__ import annotations

from gemm_fuzz.properties.model import profiles, strategies, stratified
from gemm_fuzz.properties.model.cases import SCALE_PROFILES, Epilogue, GemmCase
from gemm_fuzz.reference.formats import by_name

AXES = ("M", "N", "K")
OPERANDS = ("A", "B", "C")
PROGRAM_KEYS = ("num_programs", "programs")  # a persistent grid's program count, in a configuration


def _full(variant, device_type: str, dtype: str, config: dict) -> dict:
    return {**variant.configs_for(device_type, by_name(dtype).dtype)[0], **config}


def _blocks(full: dict) -> dict[str, int]:
    return {"M": full.get("BM", 16), "N": full.get("BN", 16), "K": full.get("BK", 16)}


def _programs(full: dict) -> int | None:
    return next((full[k] for k in PROGRAM_KEYS if isinstance(full.get(k), int)), None)


PROGRAM_FEATURES = ("tiles a multiple of the program count", "tiles not a multiple of the program count",
                    "fewer tiles than programs")


def features(case: GemmCase, variant, device_type: str) -> set[str]:
    """The features this case reaches for this variant."""
    found = set()
    full = _full(variant, device_type, case.dtype, dict(case.config))
    blocks = _blocks(full)
    for axis in AXES:
        size, block = getattr(case, axis), blocks[axis]
        if size >= 2 * block + 1:
            found.add(f"{axis}: 3+ tiles")
        if size > block and size % block:
            found.add(f"{axis}: ragged edge past a full tile")
        if size == 1:
            found.add(f"{axis} == 1")
        elif size % 16 == 0:
            found.add(f"{axis} % 16 == 0")
        else:
            found.add(f"{axis} neither 1 nor a multiple of 16")
    for name, layout in zip(OPERANDS, (case.a, case.b, case.c)):
        for feature, present in (("col-major", layout.order == "col"), ("padded", layout.pad > 0),
                                 ("strided", layout.step > 1), ("offset", layout.offset > 0),
                                 ("broadcast", bool(layout.broadcast))):
            if present:
                found.add(f"{name} {feature}")
    programs = _programs(full)
    if programs:
        tiles = -(-case.M // blocks["M"]) * -(-case.N // blocks["N"])
        found.add(PROGRAM_FEATURES[0] if tiles % programs == 0 else PROGRAM_FEATURES[1])
        if tiles < programs:
            found.add(PROGRAM_FEATURES[2])
    found.add(f"profile {case.profile}")
    if case.specials:
        found.add("specials")
    space = variant.configs_for(device_type, by_name(case.dtype).dtype)
    found.add(f"config {next((i for i, c in enumerate(space) if dict(c) == full), 0)}")
    return found | _family(case) | _scaled(case, variant.operation)


BIG_BATCH = f"a batch past {strategies.GRID_LIMIT} problems"


def _family(case: GemmCase) -> set[str]:
    """What a case reaches of its operation's parts: the batch and the epilogue's values."""
    found = set()
    if case.batch >= 2:
        found.add("a batch of 2+ problems")
    if case.batch > strategies.GRID_LIMIT:
        found.add(BIG_BATCH)
    if case.batch:
        for name, layout in zip(OPERANDS, (case.a, case.b, case.c)):
            for feature, present in (("shared over the batch", layout.broadcast == "batch"),
                                     ("problems apart", layout.batch_gap > 0),
                                     ("problems overlapping", layout.batch_gap < 0)):
                if present:
                    found.add(f"{name} {feature}")
    epilogue = case.epilogue or Epilogue()
    found |= {f"{name} == {value:g}" for name in ("alpha", "beta") for value in (0.0, -1.0)
              if getattr(epilogue, name) == value}
    found |= {f"bias stride {epilogue.bias.stride}"} if epilogue.bias.stride != 1 else set()
    return found | ({"landmarks"} if epilogue.landmarks else set())


def _grouped(op) -> bool:
    return op.scaled and ("group" in (op.a_scale, op.b_scale) or op.b_scale == "block")


def _scaled(case: GemmCase, op) -> set[str]:
    """What a case reaches of scaled operands: its scale values, K across and within the groups, an odd
    K's half-used byte of int4 codes."""
    if not op.scaled:
        return set()
    found = {f"scales {(case.epilogue or Epilogue()).scales}"}
    if _grouped(op) and case.K > op.group_k:
        found.add("K spans 2+ groups")
    if _grouped(op) and case.K % op.group_k:
        found.add("K ends in a partial group")
    if _half_bytes(op) and case.K % 2:
        found.add("odd K: half a byte unused")
    return found


def _half_bytes(op) -> bool:
    """B's codes two a byte along K (int4 "k2", e2m1): an odd K leaves half of B's last row of bytes unused."""
    return op.weight == "e2m1" or (op.weight == "int4" and op.packing == "k2")


def _family_expected(variant, dtype: str) -> set[str]:
    op, req = variant.operation, variant.requirements
    wanted = set()
    if op.batched:
        wanted |= {"a batch of 2+ problems", BIG_BATCH}
        for name in OPERANDS:
            if name.lower() in req.contiguous:
                continue
            wanted.add(f"{name} problems apart")
            if name != "C" and not req.positive_strides:
                wanted |= {f"{name} shared over the batch", f"{name} problems overlapping"}
    wanted |= {f"{name} == {value:g}" for name in ("alpha", "beta") if getattr(op, name) for value in (0.0, -1.0)}
    if op.bias:
        wanted |= {"bias stride 0", "bias stride 2"}
    if op.activation and (op.bias or op.has_c_in):
        wanted.add("landmarks")
    if op.scaled:
        wanted |= {f"scales {p}" for p in SCALE_PROFILES}
        if _grouped(op):
            wanted.add("K spans 2+ groups")
            wanted |= set() if op.k_multiple_of_group else {"K ends in a partial group"}
        if _half_bytes(op) and op.k_multiple(dtype) % 2:  # A's e2m1 codes two a byte: K is even
            wanted.add("odd K: half a byte unused")
    return wanted


def expected(variant, device_type: str, dtype: str) -> set[str]:
    """What the strategies can reach for this target (what is never drawn is not expected: layouts a
    variant refuses, profiles the dtype has no use for); the stratified cases reach all of it."""
    fmt = by_name(dtype)
    full = _full(variant, device_type, dtype, {})
    blocks = _blocks(full)
    wanted = {f"{axis} {cls}" for axis in AXES for cls in ("== 1", "% 16 == 0", "neither 1 nor a multiple of 16")}
    if variant.operation.k_multiple(dtype) > 1:  # K is a multiple of 2 or of the group: never 1
        wanted.discard("K == 1")
    wanted |= {f"{axis}: 3+ tiles" for axis in AXES}  # flagged, as a warning, where the blocks are too large
    wanted |= {f"{axis}: ragged edge past a full tile" for axis in AXES if blocks[axis] > 1}
    row_only = variant.operation.grouped == "problems"  # problems: row-major, padded or offset
    wanted |= {f"{name} {feature}" for name in OPERANDS
               for feature in stratified.layout_features(variant, name.lower())[1:]  # "row" is no feature
               if not row_only or feature in ("padded", "offset")}
    if _programs(full):
        wanted |= set(PROGRAM_FEATURES)
    wanted |= {f"profile {p}" for p in profiles.available(fmt)}
    if fmt.is_float:
        wanted.add("specials")
    wanted |= {f"config {i}" for i in range(len(variant.configs_for(device_type, fmt.dtype)))}
    return wanted | _family_expected(variant, dtype)
