"""The campaign's report directory: summary.md, two plots, and the failures' repro scripts.

  summary.md        backend, versions, emulations; per target: examples, exact, examples/s, worst
                    error/bound and where; each failure with its message and shrunk case
  error_bound.png   the distribution of error / bound per target (how tight the bound is, how close
                    the kernels come to it)
  throughput.png    examples per second per target
  repros/           one standalone script per failure (see properties/report/repros.py)
"""

from __future__ import annotations

from pathlib import Path

from properties.report import stats


def _cell(text) -> str:
    """A Markdown table cell: pipes escaped, on one line."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def summary_markdown(results, backend, budget: float, elapsed: float | None = None, interrupted: bool = False) -> str:
    ran = sum(r.examples for r in results)
    lines = [
        "# GEMM fuzzing campaign",
        "",
        *[f"- {line}" for line in backend.header()],
        f"- budget: {budget:.0f} s over {len(results)} targets"
        + (f"; ran {elapsed:.0f} s" if elapsed is not None else "") + f"; {ran} examples"
        + ("; **interrupted**: the targets below are those done (the last one partly)" if interrupted else ""),
        "",
        "| target | examples | exact | examples/s | error / torch.matmul's (median, max) | worst error/bound | at "
        "| verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rate = r.examples / r.seconds if r.seconds else 0.0
        verdict = f"FAIL ({r.failure.kind})" if r.failure is not None else "ok"
        worst = "-" if r.worst_ratio is None else f"{r.worst_ratio:.3g}"
        cells = (r.target_id, r.examples, r.exact, f"{rate:.1f}", stats.versus_torch(r.torch_ratios), worst,
                 r.worst_case, verdict)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    for r in (r for r in results if r.failure is not None):
        lines += ["", f"## {r.target_id}: {r.failure.kind}", "", "```", str(r.failure).strip(), "```"]
        if r.example is not None:
            lines += ["", "Case:", "", "```json", r.example.case.to_json(), "```"]
        if r.repro is not None:
            lines += ["", f"Reproduce: `python {r.repro}`"]
    return "\n".join(lines) + "\n"


def plots(results, directory: Path) -> list[Path]:
    """error_bound.png and throughput.png; none without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    names = [r.target_id for r in results]
    written = []
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(names)), 4.5))
    ax.boxplot([r.ratios or [0.0] for r in results], showfliers=True)
    ax.set_xticks(range(1, len(names) + 1), names, rotation=75, fontsize=7)
    ax.axhline(1.0, color="red", linewidth=0.8)
    ax.set_ylabel("|C - A@B| / bound (max per example)")
    ax.set_title("error / bound per target (1 = the bound; exact examples are 0)", fontsize=9)
    fig.tight_layout()
    written.append(directory / "error_bound.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(names)), 4))
    ax.bar(range(len(names)), [r.examples / r.seconds if r.seconds else 0.0 for r in results])
    ax.set_xticks(range(len(names)), names, rotation=75, fontsize=7)
    ax.set_ylabel("examples per second")
    fig.tight_layout()
    written.append(directory / "throughput.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    return written
