"""What a kernel computes, beyond `C = A @ B`: the operation its contract (or its registration) declares.

    y = alpha * (A @ B) + beta * C_in + bias      (beta_scales="c_in": cuBLASLt's order)
    y = alpha * (A @ B) + beta * bias             (beta_scales="bias": Inductor's addmm, acc * alpha + bias * beta)
    C = act(y) + residual

each part present only where declared (alpha absent: 1; beta absent: no C_in; ...). Gated (a fused
SwiGLU): B has 2N columns, gate and up halves side by side ("concat": gate first) or alternating
("interleaved": gate at even columns), and C = act(A @ B_gate) * (A @ B_up), N columns; its second
output is the whole product A @ B. Otherwise the second output (`pre_activation`) is y. Batched: A is
(Bt, M, K), B (Bt, K, N), C and every matrix extra (Bt, M, N), as torch.bmm and torch.baddbmm take
them, any batch stride including 0 for an input (one operand for every problem); a bias is one vector
for every problem.

BLAS semantics, where declared: beta == 0 means C_in is not read, so NaN there must not reach C
(`beta_zero_skips_c_in`, on by default as in cuBLAS and torch.addmm); alpha == 0 means A and B are not
read (`alpha_zero_skips_ab`, off by default: most kernels compute 0 * (A @ B), and Inf there gives NaN).

FUNC receives each extra by keyword: bias, c_in, alpha, beta, residual, pre (the second output), or
the names `names` maps them to. Scalars arrive as Python floats. The epilogue's arithmetic is fp32
(`epilogue_dtype="fp32"`) or C's own dtype ("out": each step rounded there); a bias has its own dtype
(`bias_dtype`, default C's).

Scaled operands (fp8 or int8 codes with fp32 scales): the product is of the dequantized operands,
A[m, k] * a_scale(m, k) and B[k, n] * b_scale(k, n), computed as real kernels do, a partial dot of codes
scaled afterwards (DeepSeek/vLLM block fp8, FBGEMM row-wise fp8, int8 w8a8); the epilogue follows.
FUNC receives `a_scale` and `b_scale` (fp32 tensors, any strides) shaped by their granularity:

  a_scale "tensor" (1,)   "row" (M,): per token      "group" (M, ceil(K / group_k)): 1 x group_k along K
  b_scale "tensor" (1,)   "col" (N,): per channel    "group" (ceil(K / group_k), N): group_k x 1
          "block" (ceil(K / group_k), ceil(N / group_n)): group_k x group_n blocks (DeepSeek's 128 x 128)

B's scales are oriented as B is, (K, N); a kernel that takes them as (N, K) passes `b_scale.T`.
`k_multiple_of_group`: the kernel needs K % group_k == 0 (it asserts it); otherwise K's last group is
partial and masked.

Scales are fp32 unless `scale_dtype` says otherwise: "fp16" or "bf16" (GPTQ and AWQ store fp16), "e8m0"
(microscaling: torch.uint8 bytes, e meaning 2**(e - 127), 0x00 2**-127 and 0xFF NaN, as the OCP MX
specification decodes them) or "e4m3" (NVFP4's torch.float8_e4m3fn scales).

Weight-only (`weight="int4"`, `"int8"` or `"e2m1"`: w4a16, w8a16, MXFP4 weights): A stays fp16 or bf16,
B holds codes with `b_scale` "col" or "group" and no a_scale, and the kernel dequantizes each weight
into A's dtype before the dot, w = (q - z) * s (rounded there), or (`scale_after_dot`, int codes and
channel scales) multiplies the dot of A with q - z by s. int8 codes are signed, z = 0. int4 codes are
0..15 with z = 8 (`zero=None`, the symmetric default) or read from `b_zero`: int4 zero points packed
eight an int32 along N (`zero="packed"`: (ceil(K / group_k), ceil(N / 8))), one int32 each, shaped as
the scales (`zero="int"`), or floats in the scales' dtype and shape with w = q * s + z (`zero="float"`).
int4 codes are packed (`packing`):
  "k2"  two a uint8 along K, B (ceil(K / 2), N), even k in the low nibble
  "k8"  eight an int32 along K, B (ceil(K / 8), N) (GPTQ's qweight)
  "n8"  eight an int32 along N, B (K, ceil(N / 8)) (AWQ's qweight)
an int32 word holding element i (of its eight) in bits 4 * pack_order[i] (identity by default; AWQ's
order is (0, 4, 1, 5, 2, 6, 3, 7)); packed zero points use the same order. An unused code past K or N
holds whatever the buffer holds. e2m1 codes (fp4: sign, two exponent and one mantissa bit, values 0,
0.5, 1, 1.5, 2, 3, 4, 6) are packed two a uint8 along K as "k2" is, z = 0. With `a_scale` as well,
`weight="e2m1"` means B holds e2m1 codes while A holds codes of its own dtype: fp8 (MXFP8 x MXFP4) or,
A's dtype torch.uint8, e2m1 packed two a byte along K too (A (M, ceil(K / 2)): MXFP4, NVFP4).

Grouped (`grouped`): G problems that share K and N, B holding one K x N matrix a group, (G, K, N) with
any strides (vLLM's (E, N, K) weights are its transpose's view, B.transpose(1, 2)).
  "ragged"  the rows of A (M x K) split into G consecutive groups, group g multiplied by B[g], into C
            (M x N); FUNC receives `group_index` (int32, `ragged_index`): "sizes" (G rows a group,
            FBGEMM's m_sizes), "ends" (G cumulative ends, torch._grouped_mm's offs) or "starts" (G + 1
            offsets from 0, cu_seqlens style). Groups may be empty.
  "routed"  mixture of experts: T tokens (A, T x K), each routed to top_k experts (B[e], E experts); C
            has one row a (token, k) slot, T * top_k x N, C[t * top_k + k] = A[t] @ B[topk_ids[t, k]],
            times topk_weights[t, k] where `routed_weight`. FUNC receives vLLM's moe_align_block_size
            metadata (reference/routing.py), int32: `sorted_token_ids`, `expert_ids`,
            `num_tokens_post_padded` (one element), and `top_k` (an int), `topk_weights` (fp32, T x top_k)
            where `routed_weight`. Its block size is `block_m`: an int, or the configuration key that
            holds it (the caller aligns for the configuration it launches). `expert_parallel`: some
            experts are not local (expert id -1) and their slots' rows must be written as zeros.
A grouped product may carry its activation, or a gated one (B's groups K x 2N, a fused SwiGLU), applied
row by row as for a 2-D product.
  "problems"  G independent problems of their own M, N and K (Triton tutorial 08's grouped GEMM): FUNC
            receives a, b, c as lists of G matrices, A[g] (M_g x K_g), B[g] (K_g x N_g), C[g] (M_g x N_g),
            each with unit column stride and its own leading dimension (stride(0) >= its columns), and
            builds the device arrays of pointers, sizes and leading dimensions its kernel reads. Any of
            M_g, N_g, K_g may be 0 (such a matrix's data pointer addresses nothing). No activation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

import torch

from gemm_fuzz.kernels.declaration import keywords_checked

ACTIVATIONS = ("relu", "leaky_relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh")
# what FUNC may receive besides a, b, c
EXTRAS = ("bias", "c_in", "alpha", "beta", "residual", "pre", "a_scale", "b_scale", "b_zero",
          "group_index", "sorted_token_ids", "expert_ids", "num_tokens_post_padded", "topk_weights", "top_k")
GROUPINGS = {"ragged": "the rows of A in G consecutive groups, group g times B[g]",
             "routed": "mixture of experts: each token's top_k experts, vLLM's moe_align_block_size metadata",
             "problems": "G problems of their own M, N, K as lists of matrices (tutorial 08's pointer arrays)"}
RAGGED_INDEXES = {"sizes": "G rows a group (FBGEMM's m_sizes)", "ends": "G cumulative ends (torch._grouped_mm's offs)",
                  "starts": "G + 1 offsets from 0"}
WEIGHTS = ("int4", "int8", "e2m1")  # codes of B other than A's dtype
PACKINGS = {"k2": "two a uint8 along K", "k8": "eight an int32 along K (GPTQ)", "n8": "eight an int32 along N (AWQ)"}
ZEROS = {"packed": "eight an int32 along N", "int": "one int32 each, shaped as the scales",
         "float": "in the scales' dtype, w = q * s + z"}
SCALE_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "e8m0": torch.uint8,
                "e4m3": torch.float8_e4m3fn}
A_SCALES = {"tensor": "one for A", "row": "one per row of A (per token)", "group": "1 x group_k along K"}
B_SCALES = {"tensor": "one for B", "col": "one per column of B (per channel)", "group": "group_k x 1 along K",
            "block": "group_k x group_n blocks"}
_BIAS_AXES = {"n": "one per column (length N)", "m": "one per row (length M)"}
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_POSITIONAL = ("a", "b", "c", "config")  # what FUNC takes besides the extras


@keywords_checked("operation")
@dataclass(frozen=True)
class Operation:
    alpha: bool = False  # y scales A @ B by a scalar alpha
    beta: bool = False  # y adds beta * C_in (or, beta_scales="bias", scales the bias by beta)
    beta_scales: str = "c_in"  # "c_in" (cuBLASLt) or "bias" (Inductor's addmm)
    bias: str | None = None  # "n": one per column of C; "m": one per row
    bias_dtype: torch.dtype | None = None  # None: C's dtype
    activation: str | None = None  # one of ACTIVATIONS; gelu is erf's, gelu_tanh the tanh approximation
    slope: float = 0.01  # leaky_relu's slope below 0
    gated: str | None = None  # "concat" or "interleaved": C = act(A @ B_gate) * (A @ B_up)
    pre_activation: bool = False  # a second output: y (gated: A @ B)
    residual: bool = False  # C = act(y) + residual
    batched: bool = False
    beta_zero_skips_c_in: bool = True
    alpha_zero_skips_ab: bool = False
    epilogue_dtype: str = "fp32"  # "fp32", or "out": every epilogue step rounded in C's dtype
    # extra -> the keyword FUNC takes it as (held as sorted pairs, so an Operation hashes)
    names: Mapping[str, str] | tuple = ()
    a_scale: str | None = None  # one of A_SCALES: the operands are codes, dequantized by their scales
    b_scale: str | None = None  # one of B_SCALES
    group_k: int = 128  # K elements a group (or block) scale covers
    group_n: int = 128  # N elements a block scale covers
    k_multiple_of_group: bool = False  # the kernel needs K % group_k == 0
    weight: str | None = None  # one of WEIGHTS: weight-only codes in B (A stays fp16 or bf16)
    zero: str | None = None  # int4: None (z = 8), "packed" (eight an int32 along N), "int" or "float" (q * s + z)
    packing: str = "k2"  # int4 codes: one of PACKINGS
    pack_order: tuple = (0, 1, 2, 3, 4, 5, 6, 7)  # int32 packings: element i in bits 4 * pack_order[i]
    scale_dtype: str = "fp32"  # one of SCALE_DTYPES
    scale_after_dot: bool = False  # weight-only: C = (A @ (q - z)) * s, not A @ ((q - z) * s) rounded
    grouped: str | None = None  # one of GROUPINGS: B is (G, K, N), one matrix a group
    ragged_index: str = "sizes"  # ragged: how group_index says where the groups are (RAGGED_INDEXES)
    block_m: int | str | None = None  # routed: the metadata's block size, or the configuration key holding it
    routed_weight: bool = False  # routed: each slot's row times its router weight (fp32), as vLLM's MUL_ROUTED_WEIGHT
    expert_parallel: bool = False  # routed: expert id -1 marks a non-local expert's blocks; their rows are zeros

    def __post_init__(self):
        def wrong(what: str, expected: str):
            raise ValueError(f"operation: {what}; expected {expected}")

        if not isinstance(self.pack_order, (tuple, list)):
            wrong(f"pack_order={self.pack_order!r}", "a permutation of 0..7")
        object.__setattr__(self, "pack_order", tuple(self.pack_order))

        if self.beta_scales not in ("c_in", "bias"):
            wrong(f"beta_scales={self.beta_scales!r}", "'c_in' (cuBLASLt) or 'bias' (Inductor's addmm)")
        if self.bias is not None and self.bias not in _BIAS_AXES:
            wrong(f"bias={self.bias!r}", "'n' (" + _BIAS_AXES["n"] + "), 'm' (" + _BIAS_AXES["m"] + ") or None")
        if self.beta and self.beta_scales == "bias" and self.bias is None:
            wrong("beta scales the bias but there is no bias", "bias='n' or 'm' with beta_scales='bias'")
        if self.bias_dtype is not None and self.bias_dtype not in _FLOAT_DTYPES:
            wrong(f"bias_dtype={self.bias_dtype!r}", "torch.float16, torch.bfloat16, torch.float32 or None (C's)")
        if self.activation is not None and self.activation not in ACTIVATIONS:
            wrong(f"activation={self.activation!r}", "one of " + ", ".join(ACTIVATIONS) + " or None")
        if not isinstance(self.slope, (int, float)) or isinstance(self.slope, bool) or not 0 <= self.slope < 1:
            wrong(f"slope={self.slope!r}", "leaky_relu's slope, a float in [0, 1)")
        if self.gated is not None:
            if self.gated not in ("concat", "interleaved"):
                wrong(f"gated={self.gated!r}", "'concat' (gate columns first), 'interleaved' (gate at even "
                      "columns) or None")
            if self.activation is None:
                wrong("gated without an activation", "the gate's activation, e.g. activation='silu'")
            if self.alpha or self.beta or self.bias or self.residual:
                wrong("a gated operation with alpha, beta, bias or residual", "gated kernels with only their "
                      "activation (and pre_activation)")
        if self.weight is not None and self.weight not in WEIGHTS:
            wrong(f"weight={self.weight!r}", "'int4' (w4a16), 'int8' (w8a16), 'e2m1' (fp4 codes) or None")
        if self.weight is not None and self.b_scale is None:
            wrong(f"weight={self.weight!r} without b_scale", "the scales of B's codes, e.g. b_scale='group'")
        if self.weight_only and self.b_scale not in ("col", "group"):
            wrong(f"weight-only codes with b_scale={self.b_scale!r}", "b_scale='col' or 'group'")
        if self.weight in ("int4", "int8") and self.a_scale is not None:
            wrong(f"{self.weight} weights with a_scale={self.a_scale!r}", "a_scale=None: weight-only codes (A is "
                  "not quantized); A and B both int8: leave weight unset")
        if self.weight is None and (self.a_scale is None) != (self.b_scale is None):
            wrong(f"a_scale={self.a_scale!r} with b_scale={self.b_scale!r}", "both operands scaled, or neither "
                  "(weight-only codes: declare weight='int4', 'int8' or 'e2m1')")
        if self.zero is not None and (self.zero not in ZEROS or self.weight != "int4"):
            wrong(f"zero={self.zero!r} with weight={self.weight!r}",
                  "with weight='int4' one of " + "; ".join(f"'{k}' ({v})" for k, v in ZEROS.items()) + ", or None")
        if self.packing not in PACKINGS or (self.packing != "k2" and self.weight != "int4"):
            wrong(f"packing={self.packing!r} with weight={self.weight!r}",
                  "; ".join(f"'{k}' ({v})" for k, v in PACKINGS.items()) + " for int4 codes ('k2' otherwise)")
        if sorted(self.pack_order) != list(range(8)) or (self.pack_order != tuple(range(8))
                                                          and self.packing == "k2" and self.zero != "packed"):
            wrong(f"pack_order={self.pack_order!r} with packing={self.packing!r}", "a permutation of 0..7 (the "
                  "nibble of each of a word's eight codes) for an int32 packing")
        if self.scale_dtype not in SCALE_DTYPES:
            wrong(f"scale_dtype={self.scale_dtype!r}", "one of " + ", ".join(SCALE_DTYPES))
        if self.zero == "float" and self.scale_dtype not in ("fp32", "fp16", "bf16"):
            wrong(f"zero='float' with scale_dtype={self.scale_dtype!r}", "float zero points in fp32, fp16 or bf16")
        if self.scale_dtype != "fp32" and not self.scaled:
            wrong(f"scale_dtype={self.scale_dtype!r} without scales", "scale_dtype with a_scale or b_scale")
        if self.scale_after_dot and not (self.weight_only and self.weight in ("int4", "int8")
                                         and self.b_scale == "col" and self.zero != "float"):
            wrong("scale_after_dot", "weight-only int4 or int8 codes with b_scale='col' and integer zero points "
                  "(a group scale multiplies each group's partial: that is the scaled-codes form, a_scale set)")
        if self.a_scale is not None and self.a_scale not in A_SCALES:
            wrong(f"a_scale={self.a_scale!r}", "; ".join(f"'{k}' ({v})" for k, v in A_SCALES.items()))
        if self.b_scale is not None and self.b_scale not in B_SCALES:
            wrong(f"b_scale={self.b_scale!r}", "; ".join(f"'{k}' ({v})" for k, v in B_SCALES.items()))
        for name in ("group_k", "group_n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                wrong(f"{name}={value!r}", "a positive int (elements a scale covers)")
        if self.scaled and (self.gated or self.batched):
            wrong("scaled operands with a gated or batched operation", "scales on 2-D, ungated products (for now)")
        self._check_grouping(wrong)
        if self.epilogue_dtype not in ("fp32", "out"):
            wrong(f"epilogue_dtype={self.epilogue_dtype!r}", "'fp32' or 'out' (C's dtype)")
        names = dict(self.names)
        object.__setattr__(self, "names", tuple(sorted(names.items())))
        unknown = set(names) - set(EXTRAS)
        if unknown:
            wrong(f"names for {', '.join(sorted(unknown))}", "names for " + ", ".join(EXTRAS))
        bad = [n for n in names.values() if not (isinstance(n, str) and n.isidentifier()) or n in _POSITIONAL]
        if bad or len(set(self.keywords().values())) != len(self.keywords()):
            wrong(f"names={names!r}", "distinct Python identifiers other than " + ", ".join(_POSITIONAL))

    def _check_grouping(self, wrong) -> None:
        if self.grouped is not None and self.grouped not in GROUPINGS:
            wrong(f"grouped={self.grouped!r}", "; ".join(f"'{k}' ({v})" for k, v in GROUPINGS.items()) + " or None")
        if self.ragged_index not in RAGGED_INDEXES:
            wrong(f"ragged_index={self.ragged_index!r}", "; ".join(f"'{k}' ({v})" for k, v in RAGGED_INDEXES.items()))
        routed = self.grouped == "routed"
        if routed and not (isinstance(self.block_m, str) and self.block_m.isidentifier()
                           or isinstance(self.block_m, int) and not isinstance(self.block_m, bool) and self.block_m > 0):
            wrong(f"grouped='routed' with block_m={self.block_m!r}", "the metadata's block size: a positive int, or "
                  "the name of the configuration key that holds it (e.g. block_m='BLOCK_SIZE_M')")
        if not routed and (self.block_m is not None or self.routed_weight or self.expert_parallel):
            wrong("block_m, routed_weight or expert_parallel without grouped='routed'", "them with grouped='routed'")
        if self.grouped and (self.batched or self.beta or self.bias == "m" or self.residual or self.pre_activation):
            wrong(f"grouped={self.grouped!r} with a batch, beta, a bias along M, a residual or pre", "a grouped "
                  "product, alpha, a bias a group (bias='n': G x N), its scales, its activation or gated activation "
                  "(a fused SwiGLU), and routed_weight")
        if self.routed_weight and (self.alpha or self.bias):
            wrong("routed_weight with alpha or a bias", "the router's weight on the product alone (for now)")
        if self.grouped and self.scaled and (self.weight or self.scale_dtype != "fp32" or self.grouped == "problems"):
            wrong(f"grouped={self.grouped!r} with weight={self.weight!r}, scale_dtype={self.scale_dtype!r}",
                  "ragged or routed groups of fp8 or int8 codes (A's and B's) with fp32 scales, B's a group each")
        if self.grouped == "problems" and self.has_epilogue:
            wrong("grouped='problems' with an epilogue (alpha, a bias, an activation)",
                  "the plain product of each problem (for now)")
        if self.routed_weight and self.activation:
            wrong("routed_weight with an activation", "the router's weight on the down projection's product "
                  "(no activation), as fused_moe applies it")

    @property
    def plain(self) -> bool:
        """C = A @ B, 2-D, unscaled: the product alone."""
        return self == PLAIN

    @property
    def scaled(self) -> bool:
        """Codes with scales (fp8 or int8 A and B, or weight-only B): the product is of the dequantized
        operands."""
        return self.b_scale is not None

    @property
    def weight_only(self) -> bool:
        """Codes in B alone: A stays fp16 or bf16 and the kernel dequantizes B into A's dtype."""
        return self.weight is not None and self.a_scale is None

    def packs_a(self, dtype: torch.dtype | str) -> bool:
        """A of this dtype (or format name) holds e2m1 codes two a byte along K: torch.uint8 under
        weight="e2m1" with a_scale."""
        return self.weight == "e2m1" and self.a_scale is not None and dtype in (torch.uint8, "fp4e2m1")

    @property
    def has_epilogue(self) -> bool:
        return bool(self.alpha or self.beta or self.bias or self.activation or self.residual or self.gated
                    or self.pre_activation)

    @property
    def has_c_in(self) -> bool:
        return self.beta and self.beta_scales == "c_in"

    def extras(self) -> tuple[str, ...]:
        """The extras FUNC receives, in EXTRAS's order."""
        present = {"bias": self.bias is not None, "c_in": self.has_c_in, "alpha": self.alpha, "beta": self.beta,
                   "residual": self.residual, "pre": self.pre_activation, "a_scale": self.a_scale is not None,
                   "b_scale": self.scaled, "b_zero": self.zero is not None,
                   "group_index": self.grouped == "ragged", "sorted_token_ids": self.grouped == "routed",
                   "expert_ids": self.grouped == "routed", "num_tokens_post_padded": self.grouped == "routed",
                   "topk_weights": self.routed_weight, "top_k": self.grouped == "routed"}
        return tuple(e for e in EXTRAS if present[e])

    def keywords(self) -> dict[str, str]:
        """extra -> the keyword FUNC takes it as."""
        names = dict(self.names)
        return {e: names.get(e, e) for e in self.extras()}

    def n_columns(self, n: int) -> int:
        """B's columns for N columns of C (gated: gate and up, 2N)."""
        return 2 * n if self.gated else n

    def b_shape(self, K: int, N: int) -> tuple[int, int]:
        """The shape of B as FUNC receives it: (K, N), or its codes packed (`packing`)."""
        if self.weight not in ("int4", "e2m1"):
            return (K, N)
        return {"k2": (-(-K // 2), N), "k8": (-(-K // 8), N), "n8": (K, -(-N // 8))}[self.packing]

    @property
    def b_dtype(self) -> torch.dtype | None:
        """How B stores its codes (None: B has A's dtype)."""
        if self.weight == "int4":
            return torch.uint8 if self.packing == "k2" else torch.int32
        return {"int8": torch.int8, "e2m1": torch.uint8}.get(self.weight)

    def k_multiple(self, dtype: torch.dtype | str) -> int:
        """What K must be a multiple of for A of this dtype: the group (`k_multiple_of_group`), 2 (A's
        e2m1 codes two a byte: an odd K's shape is an even one's), both, or 1."""
        group = self.group_k if self.scaled and self.k_multiple_of_group else 1
        return math.lcm(group, 2) if self.packs_a(dtype) else group

    def a_shape(self, M: int, K: int, dtype: torch.dtype | str) -> tuple[int, int]:
        """The shape of A as FUNC receives it: (M, K), or e2m1 codes two a byte along K."""
        return (M, -(-K // 2)) if self.packs_a(dtype) else (M, K)

    def zero_shape(self, N: int, K: int) -> tuple[int, int]:
        """b_zero's shape: packed, one int32 of eight zero points along N a K group (or one, "col");
        float, b_scale's (as (1, N) for "col")."""
        rows = -(-K // self.group_k) if self.b_scale == "group" else 1
        return (rows, -(-N // 8)) if self.zero == "packed" else (rows, N)

    def scale_shape(self, operand: str, M: int, N: int, K: int, groups: int = 0) -> tuple[int, ...]:
        """The shape of a_scale ("a") or b_scale ("b") for an M x N x K problem; grouped (`groups` G), B's
        scales are G of those, (G,) for one a group."""
        groups_k, groups_n = -(-K // self.group_k), -(-N // self.group_n)
        if operand == "a":
            return {"tensor": (1,), "row": (M,), "group": (M, groups_k)}[self.a_scale]
        shape = {"tensor": (1,), "col": (N,), "group": (groups_k, N), "block": (groups_k, groups_n)}[self.b_scale]
        if groups:
            return (groups,) if self.b_scale == "tensor" else (groups, *shape)
        return shape

    def check_dtypes(self, dtypes: Mapping[torch.dtype, tuple]) -> None:
        """An epilogue is float arithmetic: integer inputs take it only as scaled codes (their product is a
        float; which codes and outputs are tested is kernels.dtypes.SCALED_DTYPES)."""
        if self.has_epilogue and not self.scaled:
            wrong = [d for d in dtypes if not d.is_floating_point]
            if wrong:
                raise ValueError(f"operation: an epilogue on {', '.join(str(d) for d in wrong)} inputs; the epilogue "
                                 "applies to float inputs (fp16, bf16, fp32, fp8)")

    def describe(self) -> str:
        """The formula, as the reports print it."""
        if self.plain:
            return "C = A @ B"
        product = "A @ B" if not self.alpha else "alpha * (A @ B)"
        if self.gated:
            y = f"{self.activation}(A @ B_gate) * (A @ B_up) [{self.gated}]"
        else:
            terms = [product]
            if self.has_c_in:
                terms.append("beta * C_in")
            if self.bias:
                terms.append(("beta * " if self.beta and self.beta_scales == "bias" else "") + f"bias[{self.bias}]")
            y = " + ".join(terms)
            if self.activation:
                y = f"{self.activation}({y})"
        if self.residual:
            y += " + residual"
        text = f"C = {y}"
        if self.activation == "leaky_relu":
            text += f", slope {self.slope}"
        if self.pre_activation:
            text += "; pre = " + ("A @ B" if self.gated else "the activation's argument")
        scales = "" if self.scale_dtype == "fp32" else f" ({self.scale_dtype})"
        if self.weight_only:
            packing = f", packed {self.packing}" + ("" if self.pack_order == tuple(range(8)) else
                                                     " order " + "".join(map(str, self.pack_order)))
            text += (f"; B {self.weight} codes" + (packing if self.weight == "int4" else "")
                     + f", b_scale {self.b_scale}{scales}" + (f", group_k {self.group_k}" if self.b_scale == "group" else "")
                     + {"packed": ", packed zero points", "int": ", zero points", "float": ", w = q * s + z"}.get(
                         self.zero, ", zero point 8" if self.weight == "int4" else "")
                     + (", scaled after the dot" if self.scale_after_dot else ""))
        elif self.scaled:
            text += ("; A, B scaled" + (" (B e2m1 codes)" if self.weight else "")
                     + f": a_scale {self.a_scale}, b_scale {self.b_scale}{scales}"
                     + (f", group_k {self.group_k}" if "group" in (self.a_scale, self.b_scale) or self.b_scale == "block"
                        else "") + (f", group_n {self.group_n}" if self.b_scale == "block" else ""))
        if self.grouped:
            scaling = ""
            if self.scaled:
                cut = text.index("; A, B scaled")
                text, scaling = text[:cut], text[cut:] + " (B's a group each)"
            per_group = text.removeprefix("C = ") if self.has_epilogue else "A @ B"
            if self.grouped == "problems":
                text = "G problems: C[g] = A[g] @ B[g], each of its own M, N and K"
            elif self.grouped == "ragged":
                text = (f"ragged groups: C[rows of g] = {per_group.replace('A @ B', 'A[rows of g] @ B[g]')}, "
                        f"group_index as {self.ragged_index}")
            else:
                text = (f"routed MoE: C[t * top_k + k] = {per_group.replace('A @ B', 'A[t] @ B[e]')}"
                        + (" * topk_weights[t, k]" if self.routed_weight else "")
                        + f" for the (t, k) slot's expert e, block_m {self.block_m}"
                        + (", non-local experts zero" if self.expert_parallel else ""))
            text += scaling
        return ("batched: " if self.batched else "") + text


PLAIN = Operation()
FIELDS = tuple(f.name for f in fields(Operation))
