"""Benchmark every compiled variant against torch.matmul (cuBLAS) on a CUDA GPU.

    python -m gemm_fuzz.kernels.bench [--dtype fp16 --dtype bf16] [--variant persistent] [--configs] [--out bench-out]

For each shape and dtype: TFLOP/s of each variant and of torch.matmul, the median of repeated runs
with warm-up excluded (triton.testing.do_bench), and each variant's ratio to torch.matmul measured
in the same run. Each variant's result is also compared with torch's before it is timed, and the
wall time of that first call is reported (it compiles the kernel: cold unless Triton's cache holds
it). With --configs, each variant is timed in each of its registered GPU configurations, as NAME#i. Writes a Markdown table
(bench.md) and a bar chart (bench.png) to --out.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import platform
import time
from pathlib import Path

import torch

SHAPES = {  # name: (M, N, K)
    "seed 004 (8192x6144x4096)": (8192, 6144, 4096),
    "square 4096^3": (4096, 4096, 4096),
    "decode M=16": (16, 8192, 8192),
    "large K": (2048, 2048, 32768),
    # rows of no 16-byte multiple: what tensor descriptors cannot address takes the pointer paths
    "ragged 8191x6143x4097": (8191, 6143, 4097),
}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def tflops(m: int, n: int, k: int, ms: float) -> float:
    return 2.0 * m * n * k / (ms * 1e-3) / 1e12


def warm_up(device) -> None:
    """Bring the clocks up before the first measurement: a second of large products."""
    import triton.testing

    x = torch.randn(8192, 8192, device=device, dtype=torch.float16)
    triton.testing.do_bench(lambda: torch.matmul(x, x), warmup=500, rep=500)


def timed(variant, dtype, sweep: bool) -> list[tuple[str, object]]:
    """(label, launch) for the variant as registered and, with `sweep`, in each of its GPU configurations."""
    runs = [(variant.name, variant.launch)]
    if sweep:
        runs += [(f"{variant.name}#{i}", functools.partial(variant.launch, config=config))
                 for i, config in enumerate(variant.configs_for("cuda", dtype))]
    return runs


def measure(shape: str, dname: str, chosen, device, sweep: bool = False) -> list[tuple]:
    """Time torch.matmul and every chosen variant (with `sweep`, each configuration) on one shape and dtype."""
    import triton.testing

    m, n, k = SHAPES[shape]
    dtype = DTYPES[dname]
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(m, k, device=device, dtype=dtype, generator=g)
    b = torch.randn(k, n, device=device, dtype=dtype, generator=g)
    reference = torch.matmul(a, b)
    scale = reference.float().abs().max().clamp_min(1e-30)
    torch_ms = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=25, rep=200, return_mode="median")
    torch_tf = tflops(m, n, k, torch_ms)
    rows = [(shape, dname, "torch.matmul", torch_tf, 1.0, 0.0, None)]
    print(f"{shape:28} {dname} {'torch.matmul':14} {torch_tf:7.1f} TFLOP/s", flush=True)
    for label, launch in (run for v in chosen if dtype in v.dtypes for run in timed(v, dtype, sweep)):
        c = torch.full((m, n), float("nan"), device=device, dtype=dtype)
        start = time.perf_counter()
        try:
            launch(a, b, c)  # compiles (and autotunes) outside the timing
            torch.cuda.synchronize()
        except Exception as e:  # a configuration that does not compile here is reported, not fatal
            print(f"{shape:28} {dname} {label:14} failed: {type(e).__name__}: {e}", flush=True)
            continue
        first = time.perf_counter() - start
        err = float((c.float() - reference.float()).abs().max() / scale)  # NaN if any element was left unwritten
        ms = triton.testing.do_bench(lambda f=launch, c=c: f(a, b, c), warmup=25, rep=200, return_mode="median")
        tf = tflops(m, n, k, ms)
        rows.append((shape, dname, label, tf, tf / torch_tf, err, first))
        print(f"{shape:28} {dname} {label:14} {tf:7.1f} TFLOP/s  {tf / torch_tf:5.2f}x torch  max rel err {err:.1e}"
              f"  first call {first:.1f} s", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemm_fuzz.kernels.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", action="append", choices=sorted(DTYPES), help="default: fp16 and bf16")
    parser.add_argument("--variant", action="append", help="variant names (default: every compiled variant)")
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES), help="default: all")
    parser.add_argument("--configs", action="store_true",
                        help="also time each GPU configuration of the variants that list them")
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("the benchmark needs a CUDA GPU (torch sees none)")

    import triton

    from gemm_fuzz import kernels

    dtypes = args.dtype or ["fp16", "bf16"]
    shapes = args.shape or list(SHAPES)
    chosen = [v for v in kernels.variants() if v.precision == "ieee" and (not args.variant or v.name in args.variant)]
    if args.variant and len(chosen) != len(set(args.variant)):
        known = ", ".join(v.name for v in kernels.variants() if v.precision == "ieee")
        parser.error(f"--variant: unknown among {sorted(set(args.variant))}; the ieee variants are {known}")
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda")
    warm_up(device)
    rows = []  # (shape, dtype, name, tflops, ratio, max relative error, first call seconds)
    for shape in shapes:
        for dname in dtypes:
            rows += measure(shape, dname, chosen, device, args.configs)
            torch.cuda.empty_cache()

    header = (f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
              f"python {platform.python_version()}, {datetime.date.today().isoformat()}")
    lines = [f"Measured on {header}. TFLOP/s = 2MNK / median time (triton.testing.do_bench, warm-up excluded); "
             "ratio = variant / torch.matmul in the same run; first call = wall time of the first launch, compile "
             "included.", "",
             "| shape | dtype | kernel | TFLOP/s | x torch.matmul | max rel. error vs torch | first call (s) |",
             "|---|---|---|---|---|---|---|"]
    for shape, dname, name, tf, ratio, err, first in rows:
        lines.append(f"| {shape} | {dname} | {name} | {tf:.1f} | {ratio:.2f} | {err:.1e} | "
                     f"{'-' if first is None else f'{first:.1f}'} |")
    if args.configs:
        lines += ["", "Configurations (NAME#i):", ""]
        for v in chosen:
            for dname in dtypes:
                lines += [f"- {v.name}#{i} ({dname}): {dict(c)}" for i, c in enumerate(v.configs_for("cuda", DTYPES[dname]))]
    (args.out / "bench.md").write_text("\n".join(lines) + "\n")
    _plot(rows, shapes, dtypes, args.out / "bench.png", header)
    print("\n".join(lines))
    return 0


def _plot(rows, shapes, dtypes, path: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart")
        return
    names = list(dict.fromkeys(r[2] for r in rows))
    groups = [(s, d) for s in shapes for d in dtypes]
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(groups)), 5))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [next((r[3] for r in rows if r[0] == s and r[1] == d and r[2] == name), 0.0) for s, d in groups]
        ax.bar([g + i * width for g in range(len(groups))], values, width, label=name)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    ax.set_xticklabels([f"{s}\n{d}" for s, d in groups], fontsize=7)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
