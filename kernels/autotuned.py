"""The tiled kernel under @triton.autotune, keyed on (M, N, K): on the GPU over the five
configurations of seed 002 and the eight of seed 001; in the interpreter over three small ones
(timed on the CPU, since the interpreter has no GPU timer). Each new shape re-tunes, so every
configuration is exercised and the one chosen must be right. Arbitrary strides."""

import time

import torch
import triton
import triton.language as tl
import triton.testing

from gemm_fuzz.kernels import autotuning, dtypes, mode, registry
from gemm_fuzz.kernels.registry import INT32_OFFSETS, register_precisions

SEED_002 = [  # (BM, BN, BK, warps, stages)
    (128, 64, 64, 4, 4), (128, 128, 32, 4, 3), (128, 128, 64, 8, 3), (64, 256, 32, 8, 4), (256, 128, 32, 8, 3),
]
SEED_001 = [
    (128, 256, 64, 8, 3), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 2, 5), (32, 64, 32, 2, 5),
]
CPU_CONFIGS = [(16, 16, 16, 1, 1), (16, 32, 16, 1, 1), (32, 16, 32, 1, 1)]


def _cpu_bench(kernel_call, quantiles):
    """Wall-clock time of one run: the interpreter's stand-in for triton.testing.do_bench."""
    start = time.perf_counter()
    kernel_call()
    elapsed = (time.perf_counter() - start) * 1e3
    return [elapsed] * len(quantiles) if quantiles else elapsed


def _fits(cfg, dtype_size=4) -> bool:
    """Shared memory of a configuration (with fp32 operands, the largest) within the H100's 227 KB."""
    bm, bn, bk, _, stages = cfg
    return (bm * bk + bk * bn) * dtype_size * stages <= 227 * 1024


def _gpu_bench(kernel_call, quantiles):
    """A short triton.testing.do_bench: every new (M, N, K) re-tunes thirteen configurations."""
    return triton.testing.do_bench(kernel_call, warmup=5, rep=20, quantiles=quantiles)


if mode.interpreted():
    CONFIGS, BENCH = CPU_CONFIGS, _cpu_bench
else:
    # configurations whose fp32 tiles would overflow shared memory are pruned per dtype (_prune)
    CONFIGS, BENCH = list(dict.fromkeys(SEED_002 + SEED_001)), _gpu_bench


def _prune(configs, named_args, **kwargs):
    size = named_args["a_ptr"].element_size()
    kept = [c for c in configs if _fits((c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"], c.num_warps, c.num_stages),
                                        size)]
    return kept or configs[:1]


def _estimate(M, N, K, BM, BN, BK, num_stages=3, num_warps=4, **_):
    """A rough cost model to rank configurations before timing them (as triton.ops.matmul did): waves
    of tiles over the H100's 132 SMs, times one tile's time, BM * BN * K flops at a rate that grows
    with the tile's arithmetic intensity BM * BN / (BM + BN)."""
    waves = triton.cdiv(triton.cdiv(M, BM) * triton.cdiv(N, BN), 132)
    return waves * triton.cdiv(K, BK) * BK * (BM + BN)


@triton.autotune(
    configs=[triton.Config({"BM": bm, "BN": bn, "BK": bk}, num_warps=w, num_stages=s) for bm, bn, bk, w, s in CONFIGS],
    key=["M", "N", "K"],
    # on the GPU only the 4 best-ranked configurations are compiled and timed for each new (M, N, K)
    prune_configs_by={"early_config_prune": _prune, "perf_model": None if BENCH is _cpu_bench else _estimate,
                      "top_k": 4},
    do_bench=BENCH,
)
@triton.jit
def autotuned_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    PRECISION: tl.constexpr, ACC: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _space(configs, dtype_size: int) -> tuple[dict, ...]:
    return tuple(dict(BM=bm, BN=bn, BK=bk, num_warps=w, num_stages=s) for bm, bn, bk, w, s in configs
                 if _fits((bm, bn, bk, w, s), dtype_size))


# The suite draws each configuration of the autotuner's list and pins it (no timing): a bug in a
# configuration this GPU's tuner never picks is picked on another GPU, or another shape.
SPACE = {"cpu": _space(CPU_CONFIGS, 4), "cuda": _space(CONFIGS, 2), "cuda/fp32": _space(CONFIGS, 4)}


def make_launch(name: str, precision: str):
    @registry.launcher(name)
    def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, M: int, N: int, K: int, cfg: dict) -> None:
        grid = lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))
        with autotuning.pinned(autotuned_kernel, cfg):
            autotuned_kernel[grid](
                a, b, c, M, N, K,
                a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                PRECISION=precision, ACC=dtypes.accumulator(a.dtype),
            )

    return launch


register_precisions("autotuned", make_launch, SPACE, INT32_OFFSETS,
                    origin="seeds 002 and 001: @triton.autotune over their configurations, keyed on M, N, K",
                    description="tiled kernel under @triton.autotune; each configuration pinned in turn")
