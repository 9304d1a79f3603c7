"""The campaign's report directory: summary.md, two plots, and the failures' repro scripts.

  summary.md        backend, versions, emulations; a variant x dtype grid of verdicts; per target:
                    examples, exact, examples/s, worst error/bound and where; each failure with its
                    message and shrunk case
  error_bound.png   the variant x dtype grid: failures in red, else the worst error / bound (how close
                    the kernels come to the bound)
  throughput.png    the suite's examples per second per variant and dtype (what a campaign budget buys;
                    not the kernels' speed)
  repros/           one standalone script per failure (see properties/report/repros.py)
  (--save-cases DIR) each failure's case saved in DIR/<its repro script's name>/, named in its section
"""

from __future__ import annotations

import re
from pathlib import Path

from gemm_fuzz.properties import phases
from gemm_fuzz.properties.report import stats

FAILED_COLOUR = "#d62728"
def _cell(text) -> str:
    """A Markdown table cell: pipes escaped, on one line."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _row(cells) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _fenced(text: str, info: str = "") -> list[str]:
    """A fenced code block that no run of backticks in `text` can close early."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return [fence + info, text, fence]


def grid(results) -> tuple[list[str], list[str], dict]:
    """Variants (rows) x dtype selectors (columns), and each cell's result; a tf32 variant `X_tf32`
    shares the row of `X`."""
    variants, dtypes, cells = [], [], {}
    for r in results:
        row = r.variant.removesuffix("_tf32") if r.dtype == "tf32" else r.variant
        variants += [row] if row not in variants else []
        dtypes += [r.dtype] if r.dtype not in dtypes else []
        cells[row, r.dtype] = r
    return variants, dtypes, cells


def _state(r) -> str:
    return getattr(r, "state", "done")


def _verdict(r) -> str:
    """A grid cell: FAIL and the kind, else the worst error / bound ("exact" when every example was); a
    target the campaign stopped in or before says so."""
    if r.failure is not None or r.failures:
        return f"FAIL ({r.failure.kind})" if r.failure is not None else "FAIL"
    if _state(r) == "not run":
        return "not run"
    if r.worst_ratio is None:
        judged = "exact" if r.exact else "-"
    else:
        judged = f"{r.worst_ratio:.3g}"
    return judged + (" (interrupted)" if _state(r) == "interrupted" else "")


def _targets(results) -> str:
    """'N targets', with how many of them the campaign stopped in or before."""
    counts = {state: sum(_state(r) == state for r in results) for state in ("done", "interrupted", "not run")}
    if counts["done"] == len(results):
        return f"{len(results)} targets"
    return f"{len(results)} targets ({', '.join(f'{n} {state}' for state, n in counts.items() if n)})"


def summary_markdown(results, backend, budget: float, elapsed: float | None = None, interrupted: bool = False) -> str:
    ran = sum(r.examples for r in results)
    failed = [r for r in results if r.failure is not None]
    lines = [
        "# GEMM fuzzing campaign",
        "",
        *[f"- {line}" for line in backend.header()],
        f"- budget: {budget:.0f} s over {_targets(results)}"
        + (f"; ran {elapsed:.0f} s" if elapsed is not None else "") + f"; {ran} examples"
        + ("; **interrupted**: a target's verdict covers only the examples it ran" if interrupted else ""),
        f"- verdict: {len(failed)} failing target(s)" if failed else "- verdict: no failure",
        "",
        "## Variants and dtypes",
        "",
        "Worst error / bound of each variant on each input dtype (1 is the sound bound; exact: every example "
        "was bit-exact), or FAIL and how.",
        "",
    ]
    variants, dtypes, cells = grid(results)
    lines += [_row(["variant", *dtypes]), _row(["---"] * (len(dtypes) + 1))]
    for v in variants:
        lines.append(_row([v, *(_verdict(cells[v, d]) if (v, d) in cells else "" for d in dtypes)]))
    lines += [
        "",
        "## Targets",
        "",
        _row(["target", "examples", "exact", "examples/s", "error / torch.matmul's (median, max)",
              "worst error/bound", "at", "verdict"]),
        _row(["---"] * 8),
    ]
    for r in results:
        rate = r.examples / r.seconds if r.seconds else 0.0
        verdict = f"FAIL ({r.failure.kind})" if r.failure is not None else (
            "ok" if _state(r) == "done" else _state(r))
        worst, at = stats.worst(r)
        lines.append(_row([r.target_id, r.examples, r.exact, f"{rate:.1f}", stats.versus_torch(r.torch_ratios), worst,
                           at, verdict]))
    lines += ["", "## Where the time went", "",
              "Seconds of each target's passing examples by phase (properties/phases.py): building the "
              "tensors, compiling (and kernels compiled), launching, the float64 and torch references, judging, "
              "and the rest (drawing the case, a worker's round trip).", "",
              _row(["target", "seconds", *(f"{p} (kernels)" if p == "compile" else p for p in phases.PHASES),
                    "the rest"]), _row(["---"] * (len(phases.PHASES) + 3))]
    for r in results:
        spent = r.phases or {}
        rest = max(0.0, r.seconds - sum(spent.get(p, 0.0) for p in phases.PHASES))
        cells = [f"{spent.get(p, 0.0):.2f}" for p in phases.PHASES]
        cells[phases.PHASES.index("compile")] += f" ({int(spent.get('compiles', 0))})"
        lines.append(_row([r.target_id, f"{r.seconds:.1f}", *cells, f"{rest:.1f}"]))
    for r in failed:
        lines += ["", f"## {r.target_id}: {r.failure.kind}", "", *_fenced(str(r.failure).strip())]
        if r.example is not None:
            lines += ["", "Case:", "", *_fenced(r.example.case.to_json(), "json")]
        if r.repro is not None:
            lines += ["", f"Reproduce: `python {r.repro}`"]
        if getattr(r, "saved", None) is not None:  # --save-cases: load_case / run_case (gemm_fuzz.properties)
            lines += ["", f"saved: `{r.saved}`"]
    return "\n".join(lines) + "\n"


def plots(results, directory: Path) -> list[Path]:
    """error_bound.png and throughput.png; none without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    import numpy as np

    variants, dtypes, cells = grid(results)
    if not cells:
        return []
    label = max(len(v) for v in variants)
    size = (max(6.0, 3.2 + 0.07 * label + 0.95 * len(dtypes)), max(3.0, 1.6 + 0.45 * len(variants)))
    written = []

    def draw(values, labels, cmap, vmin, vmax, title, colourbar, failed, name, white_text):
        fig, ax = plt.subplots(figsize=size)
        shown = np.ma.masked_invalid(values)
        image = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        ax.set_facecolor("#eeeeee")  # no such target: grey
        for (i, j), text in np.ndenumerate(labels):
            if failed[i, j]:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color=FAILED_COLOUR))
            white = failed[i, j] or (np.isfinite(values[i, j]) and white_text(values[i, j]))
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if white else "black")
        ax.set_xticks(range(len(dtypes)), dtypes)
        ax.set_yticks(range(len(variants)), variants)
        ax.set_xlabel("input dtype")
        ax.set_ylabel("variant")
        ax.xaxis.set_ticks_position("top")
        ax.xaxis.set_label_position("top")
        ax.set_title(title, fontsize=9, pad=10)
        fig.colorbar(image, ax=ax, label=colourbar, shrink=0.8)
        fig.tight_layout()
        written.append(directory / name)
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)

    shape = (len(variants), len(dtypes))
    ratio, rate = np.full(shape, np.nan), np.full(shape, np.nan)
    ratio_text, rate_text = np.full(shape, "", dtype=object), np.full(shape, "", dtype=object)
    failed = np.zeros(shape, dtype=bool)
    for (i, v), (j, d) in ((iv, jd) for iv in enumerate(variants) for jd in enumerate(dtypes)):
        r = cells.get((v, d))
        if r is None:
            continue
        failed[i, j] = r.failure is not None or bool(r.failures)
        kind = "" if r.failure is None else r.failure.short()
        ratio_text[i, j] = f"FAIL\n{kind}" if failed[i, j] else _verdict(r).replace(" (", "\n(")
        if not failed[i, j] and _state(r) != "not run":
            ratio[i, j] = 0.0 if r.worst_ratio is None else r.worst_ratio
        if _state(r) == "not run":
            continue
        rate[i, j] = r.examples / r.seconds if r.seconds else 0.0
        rate_text[i, j] = f"{rate[i, j]:.0f}/s" if rate[i, j] >= 10 else f"{rate[i, j]:.1f}/s"
    draw(ratio, ratio_text, "viridis", 0.0, 1.0,
         "Worst |C - A@B| / bound per variant and input dtype\n(1 = the sound rounding-error bound; red = failed)",
         "worst error / bound", failed, "error_bound.png", lambda v: v < 0.45)
    top = max(float(np.nanmax(rate)), 1e-9)
    draw(rate, rate_text, "Blues", 0.0, top,
         "Suite throughput: examples checked per second\n(draw, run, judge; not the kernel's speed)",
         "examples per second", np.zeros(shape, dtype=bool), "throughput.png", lambda v: v > 0.6 * top)
    return written
