"""A fixed-grid baseline in the style of Triton's own `test_dot` (python/test/unit/language/
test_core.py), to measure the suite against: what a conventional GEMM test catches.

  shapes     the distinct (M, N, K) of test_dot's base cases (16, 32 and 64 cubed), its mixed-size
             cases (128x256x32 ... 32x32x128) and its small-M/N cases (2x2x16, 1x64x64, 64x2x64,
             64x64x4), which run in the interpreter (on NVIDIA GPUs test_dot skips them)
  inputs     plain contiguous row-major tensors, standard normal x 0.1 from RandomState(17), in the
             input dtype (int8: integers over its whole range, into int32); no guard bands, no NaN
             poison, no out-of-bounds detection
  output     C allocated with torch.zeros (test_dot itself pre-fills it with 1 + 0.1 x normal, for its
             add-matrix epilogue)
  reference  np.matmul in the input dtype (bf16: in fp32; int8: in int64)
  verdict    np.testing.assert_allclose with rtol 0.01 and atol 1e-2 for fp16 outputs, 1e-3 for fp32
  family     an epilogue's extras as its own tests pass them (normal x 0.1, alpha = beta = 1, contiguous),
             the formula in float64; batched: two problems, packed; scaled codes: scales uniform in
             [0.5, 1.5], the dequantized product in float64

test_dot runs one program whose block is the whole matrix; here each variant's own launcher runs
(its grid and blocks), so the shapes, all multiples of 16 but three, rarely leave a partial tile.

Without the sanitizer an out-of-bounds store in the interpreter writes into the host heap and can
abort the process, so a mutant's baseline runs in a subprocess:

    python -m gemm_fuzz.properties.evaluation.baseline --mutant NAME      # exit 0 passed, 10 a wrong result, 11 raised
    python -m gemm_fuzz.properties.evaluation.baseline --variant NAME     # a registered (correct) variant

and `run_isolated(name)` turns its exit into a Verdict: anything else (a signal, an abort) is a crash.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from gemm_fuzz.kernels import mutants
from gemm_fuzz.kernels import operands as launcher_checks
from gemm_fuzz.kernels.operation import SCALE_DTYPES
from gemm_fuzz.properties.model.cases import packed
from gemm_fuzz.reference import epilogue, routing, scaled

# The distinct (M, N, K) of test_dot's lists, in its order
TEST_DOT_SHAPES = (
    (64, 64, 64), (32, 32, 32), (16, 16, 16),  # get_test_dot_base_cases
    (128, 256, 32), (128, 16, 32), (32, 128, 64), (128, 128, 64), (64, 128, 128), (64, 64, 32),
    (32, 32, 128),  # get_test_dot_mixed_sizes_cases
    (2, 2, 16), (1, 64, 64), (64, 2, 64), (64, 64, 4),  # get_test_dot_small_mn_fma_cases
)
# What the baseline runs, smallest first (a failing kernel stops early): all but the three of 2**20
# multiply-adds, which take 70% of the interpreter's time and change no verdict
# (python -m gemm_fuzz.properties.evaluation.baseline --all-shapes runs them too)
LARGE = 2**20
SHAPES = tuple(sorted((s for s in TEST_DOT_SHAPES if s[0] * s[1] * s[2] < LARGE), key=lambda s: s[0] * s[1] * s[2]))
RTOL = 0.01
ATOL = {"fp16": 1e-2, "bf16": 1e-2, "fp32": 1e-3, "int8": 1e-2, "fp8e4m3": 1e-2, "fp8e5m2": 1e-2}
# numpy has no bf16 or fp8: their values are drawn in fp32, rounded to the dtype, and multiplied in fp32
NUMPY = {"fp16": np.float16, "bf16": np.float32, "fp32": np.float32, "int8": np.int8, "fp8e4m3": np.float32,
         "fp8e5m2": np.float32}
TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int8": torch.int8,
         "fp8e4m3": torch.float8_e4m3fn, "fp8e5m2": torch.float8_e5m2}
# test_dot's int8 -> int32 and fp8 -> fp32; the others keep their dtype
OUT = {"int8": torch.int32, "fp8e4m3": torch.float32, "fp8e5m2": torch.float32}

PASSED, FAILED, RAISED = 0, 10, 11  # exit codes of `python -m gemm_fuzz.properties.evaluation.baseline`


def operands(M: int, N: int, K: int, dtype: str, batch: tuple = ()) -> tuple[np.ndarray, np.ndarray]:
    """test_dot's inputs from RandomState(17): normal values scaled by 0.1 in the input dtype, or
    integers over int8's whole range (batched: `batch` problems of them)."""
    rs = np.random.RandomState(17)
    if dtype == "int8":
        return (rs.randint(-128, 128, (*batch, M, K)).astype(np.int8),
                rs.randint(-128, 128, (*batch, K, N)).astype(np.int8))
    x = rs.normal(0, 1, (*batch, M, K)).astype(NUMPY[dtype])
    y = rs.normal(0, 1, (*batch, K, N)).astype(NUMPY[dtype])
    x *= 0.1
    y *= 0.1
    if NUMPY[dtype] is np.float32 and dtype != "fp32":  # bf16, fp8: rounded to the dtype
        x, y = (torch.from_numpy(v).to(TORCH[dtype]).float().numpy() for v in (x, y))
    return x, y


def check_shape(variant, M: int, N: int, K: int, dtype: str) -> bool:
    """One fixed-grid test: raises AssertionError on a wrong result (or whatever the launch raises).
    Returns False, without launching, for operands the variant's launcher refuses (as test_dot skips
    what a backend does not support: tensor descriptors need 16-byte strides, N=2 fp16 has 4)."""
    op = variant.operation
    if op.grouped:
        return _check_grouped(variant, M, N, K, dtype)
    batch = (BATCH,) if op.batched else ()
    x, y = operands(M, op.n_columns(N), K, dtype, batch)
    a, b = torch.from_numpy(x).to(TORCH[dtype]), torch.from_numpy(y).to(TORCH[dtype])
    if op.weight:  # codes over their range, stored as the kernel takes them
        b = weight_codes(op, K, N)
    if op.packs_a(dtype):  # e2m1 codes two a byte along K
        a = torch.from_numpy(np.random.RandomState(20).randint(0, 256, op.a_shape(M, K, dtype))).to(torch.uint8)
    out = variant.dtypes[TORCH[dtype]][0] if op.scaled else OUT.get(dtype, TORCH[dtype])
    c = torch.zeros((*batch, M, N), dtype=out)
    extras = epilogue_operands(op, batch, M, N, out, K)
    try:
        launcher_checks.check(variant, a, b, c, extras)
    except (TypeError, ValueError):
        return False
    variant.launch(a, b, c, **{op.keywords()[name]: value for name, value in extras.items()})
    expected = np.matmul(x.astype(np.int64), y.astype(np.int64)) if dtype == "int8" else np.matmul(x, y)
    if op.scaled:  # the dequantized product, as a scaled kernel's own test computes it
        x2, y2, _ = scaled.dequantized(op, a, b, extras)
        expected = np.matmul(x2, y2)
    if op.has_epilogue:
        expected = _epilogue(op, expected.astype(np.float64), extras)
        if "pre" in extras:
            np.testing.assert_allclose(expected["pre"], extras["pre"].float().numpy(), rtol=RTOL, atol=ATOL[dtype])
        expected = expected["C"]
    np.testing.assert_allclose(expected, c.float().numpy(), rtol=RTOL, atol=ATOL[dtype])
    return True


BATCH = 2  # a batched kernel's problems: two, packed
GROUPS, TOP_K = 4, 2  # a grouped kernel's groups (experts) and a MoE kernel's top_k, as MoE tests take them


def _check_grouped(variant, M: int, N: int, K: int, dtype: str) -> bool:
    """A grouped kernel as its own tests run it: GROUPS contiguous problems of M x N x K, M rows split
    evenly into GROUPS groups, or M tokens
    routed by a softmax's top TOP_K of GROUPS experts (RandomState(21)), metadata aligned for the
    kernel's default block size; the reference a loop of np.matmul over the groups."""
    op = variant.operation
    x, _ = operands(M, N, K, dtype)
    y = np.stack([operands(K, N, K, dtype)[1] + 0.01 * g for g in range(GROUPS)]).astype(x.dtype)
    a, b = torch.from_numpy(x).to(TORCH[dtype]), torch.from_numpy(y).to(TORCH[dtype])
    if op.grouped == "problems":  # tutorial 08's test: GROUPS contiguous problems, here each M x N x K
        cs = [torch.zeros((M, N), dtype=OUT.get(dtype, TORCH[dtype])) for _ in range(GROUPS)]
        try:
            launcher_checks.check(variant, [a] * GROUPS, list(b), cs)
        except (TypeError, ValueError):
            return False
        variant.launch([a] * GROUPS, list(b), cs)
        for g in range(GROUPS):
            np.testing.assert_allclose(x @ y[g], cs[g].float().numpy(), rtol=RTOL, atol=ATOL[dtype])
        return True
    if op.grouped == "ragged":
        sizes = [M // GROUPS] * (GROUPS - 1) + [M - (M // GROUPS) * (GROUPS - 1)]
        index = {"sizes": sizes, "ends": np.cumsum(sizes), "starts": np.concatenate([[0], np.cumsum(sizes)])}
        extras = {"group_index": torch.tensor(np.asarray(index[op.ragged_index]), dtype=torch.int32)}
        rows = np.repeat(np.arange(GROUPS), sizes)
        expected = np.stack([x[i] @ y[rows[i]] for i in range(M)]) if M else np.zeros((0, N))
    else:
        logits = torch.from_numpy(np.random.RandomState(21).normal(size=(M, GROUPS)))
        weights, ids = torch.topk(torch.softmax(logits, dim=-1), TOP_K)
        block = variant.operation_in(a.device.type, a.dtype).block_m
        r = routing.align(ids.numpy(), GROUPS, block, weights.float().double().numpy())
        extras = {"sorted_token_ids": torch.tensor(r.sorted_token_ids, dtype=torch.int32),
                  "expert_ids": torch.tensor(r.expert_ids, dtype=torch.int32),
                  "num_tokens_post_padded": torch.tensor([r.num_tokens_post_padded], dtype=torch.int32),
                  "top_k": TOP_K}
        if op.routed_weight:
            extras["topk_weights"] = weights.float()
        expected = routing.product(x, y, r, op.routed_weight)
    c = torch.zeros((expected.shape[0], N), dtype=OUT.get(dtype, TORCH[dtype]))
    try:
        launcher_checks.check(variant, a, b, c, extras)
    except (TypeError, ValueError):
        return False
    variant.launch(a, b, c, **{op.keywords()[name]: value for name, value in extras.items()})
    np.testing.assert_allclose(expected, c.float().numpy(), rtol=RTOL, atol=ATOL[dtype])
    return True


def weight_codes(op, K: int, N: int) -> torch.Tensor:
    """B's codes from RandomState(19): int8 codes, or int4 and e2m1 codes packed as declared."""
    rs = np.random.RandomState(19)
    if op.weight == "int8":
        return torch.from_numpy(rs.randint(-128, 128, (K, N))).to(torch.int8)
    codes = rs.randint(0, 16, (K, N))
    axis, order = {"k2": (0, (0, 1)), "k8": (0, op.pack_order), "n8": (1, op.pack_order)}[op.packing]
    return torch.from_numpy(packed(codes, axis, order).astype(np.int64)).to(op.b_dtype)


def _scales(op, shape: tuple, rs) -> torch.Tensor:
    """Scales around 1 in the operation's scale dtype (E8M0: 0.5, 1 or 2)."""
    if op.scale_dtype == "e8m0":
        return torch.from_numpy(rs.randint(126, 129, shape)).to(torch.uint8)
    return torch.from_numpy(rs.uniform(0.5, 1.5, shape)).to(SCALE_DTYPES[op.scale_dtype])


def epilogue_operands(op, batch: tuple, M: int, N: int, out: torch.dtype, K: int = 1) -> dict:
    """The extras as a conventional test passes them: bias, C_in and residual normal x 0.1 from
    RandomState(18), contiguous; alpha and beta 1 (torch.addmm's defaults); `pre` zeroed; scales
    uniform in [0.5, 1.5]."""
    rs = np.random.RandomState(18)
    normal = (lambda *shape: torch.from_numpy(rs.normal(0, 0.1, shape)).to(op.bias_dtype or out))
    made = {"bias": lambda: normal(N if op.bias == "n" else M), "c_in": lambda: normal(*batch, M, N).to(out),
            "residual": lambda: normal(*batch, M, N).to(out), "alpha": lambda: 1.0, "beta": lambda: 1.0,
            "pre": lambda: torch.zeros((*batch, M, op.n_columns(N)), dtype=out),
            # scales as calibration gives them (amax / the format's largest), positive and around 1
            "a_scale": lambda: _scales(op, op.scale_shape("a", M, N, K), rs),
            "b_scale": lambda: _scales(op, op.scale_shape("b", M, N, K), rs),
            "b_zero": lambda: {"float": torch.zeros(op.zero_shape(N, K), dtype=SCALE_DTYPES[op.scale_dtype]),
                               "int": torch.full(op.zero_shape(N, K), 8, dtype=torch.int32),
                               "packed": torch.full(op.zero_shape(N, K), 0x88888888 - 2**32, dtype=torch.int32),
                               }[op.zero]}  # zero points 8
    return {name: made[name]() for name in op.extras()}


def _epilogue(op, product: np.ndarray, extras: dict) -> dict:
    """The operation on the float64 product, as a conventional test writes it with torch's functions."""
    values = {k: v.double().numpy() if isinstance(v, torch.Tensor) else v for k, v in extras.items()
              if k not in ("a_scale", "b_scale", "b_zero")}
    if op.gated:
        n = product.shape[-1] // 2
        gate, up = ((product[..., :n], product[..., n:]) if op.gated == "concat"
                    else (product[..., 0::2], product[..., 1::2]))
        return {"C": epilogue.apply(op.activation, gate, op.slope) * up, "pre": product}
    y = product * values.get("alpha", 1.0)
    if op.has_c_in:
        y = y + values["beta"] * values["c_in"]
    if op.bias:
        bias = values["bias"] * (values["beta"] if op.beta and op.beta_scales == "bias" else 1.0)
        y = y + (bias[None, :] if op.bias == "n" else bias[:, None])
    c = epilogue.apply(op.activation, y, op.slope)
    return {"C": c + values["residual"] if op.residual else c, "pre": y}


def dtypes_of(variant) -> list[str]:
    """The baseline's dtypes the variant takes: fp16 -> fp16 and fp32 -> fp32, as in test_dot."""
    return [d for d in ("fp16", "fp32") if TORCH[d] in variant.dtypes and TORCH[d] in variant.dtypes[TORCH[d]]]


def run(variant, dtypes: list[str], keep_going: bool = False, shapes=SHAPES) -> int:
    """Every shape in every dtype up to the first failure (all of them with `keep_going`); prints
    one line each and returns the exit code."""
    code = PASSED
    for dtype in dtypes:
        for M, N, K in shapes:
            where = f"{variant.name} {M}x{N}x{K} {dtype}"
            try:
                ran = check_shape(variant, M, N, K, dtype)
            except AssertionError as e:
                print(f"FAIL {where}: {' '.join(str(e).split())[:300]}", flush=True)
                code = max(code, FAILED)
            except Exception as e:
                print(f"RAISED {where}: {type(e).__name__}: {' '.join(str(e).split())[:300]}", flush=True)
                code = RAISED
            else:
                print(f"{'ok' if ran else 'skipped (refused by the launcher)'} {where}", flush=True)
            if code != PASSED and not keep_going:
                return code
    return code


@dataclass(frozen=True)
class Verdict:
    name: str
    outcome: str  # "passed", "failed assertion", "raised", "crashed" or "timed out"
    returncode: int
    output: str  # the subprocess's output (the last lines say what failed)

    @property
    def caught(self) -> bool:
        return self.outcome != "passed"


_OUTCOMES = {PASSED: "passed", FAILED: "failed assertion", RAISED: "raised"}


def run_isolated(name: str, kind: str = "mutant", dtypes: list[str] | None = None, timeout: float = 300) -> Verdict:
    """Run the baseline on one mutant (or variant) in a fresh interpreter process."""
    command = [sys.executable, "-m", "gemm_fuzz.properties.evaluation.baseline", f"--{kind}", name]
    for dtype in dtypes or []:
        command += ["--dtype", dtype]
    env = dict(os.environ, GEMM_BACKEND="interpreter", PYTHONWARNINGS="ignore")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return Verdict(name, "timed out", -1, output)
    output = done.stdout + done.stderr
    return Verdict(name, _OUTCOMES.get(done.returncode, "crashed"), done.returncode, output)


def run_all_isolated(names: list[str], kind: str = "mutant", workers: int = 2) -> dict[str, Verdict]:
    """`run_isolated` for each name, `workers` subprocesses at a time."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(names, pool.map(lambda name: run_isolated(name, kind), names)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--mutant", help="a mutant of kernels.mutants")
    group.add_argument("--variant", help="a registered variant")
    parser.add_argument("--dtype", action="append", choices=tuple(TORCH), help="default: the mutant's dtype, "
                        "or every baseline dtype the variant takes")
    parser.add_argument("--keep-going", action="store_true", help="run every shape, not only up to the first failure")
    parser.add_argument("--all-shapes", action="store_true", help="also the three largest of test_dot's shapes")
    args = parser.parse_args(argv)

    from gemm_fuzz.properties.launch import backends

    backends.activate(os.environ.get("GEMM_BACKEND", "auto"))
    if args.mutant:
        from gemm_fuzz import kernels

        mutant = mutants.get(args.mutant)
        variant, dtypes = mutant.variant, args.dtype or [mutant.dtype]
    else:
        from gemm_fuzz import kernels

        variant = kernels.get(args.variant)
        dtypes = args.dtype or dtypes_of(variant)
    return run(variant, dtypes, args.keep_going, TEST_DOT_SHAPES if args.all_shapes else SHAPES)


if __name__ == "__main__":
    sys.exit(main())
