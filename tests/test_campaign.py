"""The campaign (README's main job): runs on a time budget, writes a report with plots, and leaves a
repro script for each failure."""

import re
import signal
import subprocess
import sys
import time

import pytest
from templates import TILED

from gemm_fuzz.kernels.mutants import Edit, edited
from gemm_fuzz.properties import campaign

ROOT_KERNEL = TILED  # a right kernel, as a user's file


def test_budgets_parse():
    assert campaign.parse_budget("90s") == 90 and campaign.parse_budget("10m") == 600
    assert campaign.parse_budget("1h30m") == 5400 and campaign.parse_budget("45") == 45
    for bad in ("", "ten", "5x"):
        with pytest.raises(Exception, match="invalid budget"):
            campaign.parse_budget(bad)


def _fuzz(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "gemm_fuzz.properties.campaign", "--backend", "interpreter",
                           "--report", str(tmp_path / "report"), *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=900)


def test_a_short_campaign_writes_its_report(tmp_path):
    run = _fuzz(tmp_path, "--budget", "16s", "--variant", "tiled", "--dtype", "fp16", "--dtype", "int8")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[1/2] tiled-fp16" in run.stdout and "[2/2] tiled-int8" in run.stdout and "ok" in run.stdout
    report = tmp_path / "report"
    summary = (report / "summary.md").read_text()
    assert "| tiled-fp16 |" in summary and "| tiled-int8 |" in summary and "gemm backend: interpreter" in summary
    assert (report / "error_bound.png").stat().st_size > 0 and (report / "throughput.png").stat().st_size > 0


def _elapsed(run) -> float:
    """The seconds the campaign reports it ran (its targets, shrinking and report included)."""
    return float(re.search(r"examples in (\d+) s", run.stdout).group(1))


def test_a_failing_kernel_leaves_a_repro_and_a_nonzero_status_within_its_budget(tmp_path):
    (tmp_path / "mine.py").write_text(edited(ROOT_KERNEL, (Edit("(m[:, None] < M) & (kk[None, :] < K)",
                                                                  "m[:, None] < M"),), "no_k_mask_on_a"))
    start = time.monotonic()
    run = _fuzz(tmp_path, "--budget", "20s", "--kernel", "mine.py:matmul", "--dtype", "fp16", "--dtype", "bf16")
    wall = time.monotonic() - start
    assert run.returncode == 1, run.stdout + run.stderr
    assert _elapsed(run) <= 22, run.stdout  # the budget, shrinking included, within 10%
    assert wall <= 22 + 20, f"{wall:.0f} s in all"  # and start-up (torch, triton, the worker) on top
    assert "FAIL" in run.stdout and "repro: python " in run.stdout
    # each target's lines end where their sentences do: the reason is the headline, whole
    reasons = [line.strip() for line in run.stdout.splitlines() if line.startswith("    out-of-bounds load of")]
    assert reasons and all(re.fullmatch(r"out-of-bounds load of \w+ in kernel '\w+' at mine\.py:\d+", r)
                           for r in reasons), reasons
    scripts = list((tmp_path / "report" / "repros").glob("user_mine_matmul_*-fp16-*.py"))
    # a script per failure the target reported (a loaded machine has left two: each must replay)
    assert scripts and "-fp16: out-of-bounds access" in (tmp_path / "report" / "summary.md").read_text()
    for script in scripts:
        replay = subprocess.run([sys.executable, str(script), "--backend", "interpreter"], cwd=tmp_path,
                                capture_output=True, text=True, timeout=600)
        assert replay.returncode == 1 and "FAIL: " in replay.stdout


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_interrupted_campaign_reports_what_it_did(tmp_path, sig, status):
    """Ctrl-C or SIGTERM: the report of every finished target is written, then exit 130 or 143."""
    process = subprocess.Popen([sys.executable, "-m", "gemm_fuzz.properties.campaign", "--backend", "interpreter",
                                "--report",
                                str(tmp_path / "report"), "--budget", "36s", "--variant", "tiled", "--dtype", "fp16",
                                "--dtype", "bf16", "--dtype", "int8"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, cwd=tmp_path)
    lines = []
    for line in process.stdout:  # wait until the first target is done
        lines.append(line)
        if line.startswith("[1/3]"):
            break
    process.send_signal(sig)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == status, "".join(lines) + out
    assert "Traceback" not in out and "interrupted" in out
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "**interrupted**" in summary and "| tiled-fp16 |" in summary
    # the report speaks of the three targets the campaign announced: the one done, the one it stopped in
    # (if the signal came inside its examples) and those never started, none of them an "ok" it did not earn
    assert "campaign: 3 targets" in "".join(lines)
    assert re.search(r"over 3 targets \(1 done(, 1 interrupted)?, [12] not run\)", summary), summary
    table = summary.split("## Targets")[1].split("## Where")[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| tiled")]
    targets = {r[0].lstrip("| "): r for r in rows if len(r) == 8}
    assert targets["tiled-int8"][-1].rstrip(" |") == "not run", summary
    for row in targets.values():
        if row[-1].rstrip(" |") == "interrupted" and int(row[1]) > 0:
            assert float(row[3]) > 0, row  # its examples per second, over the seconds it ran


def test_bad_arguments_are_refused(tmp_path):
    for args, message in ((["--dtype", "fp64"], "unknown dtype 'fp64'"), (["--budget", "soon"], "invalid budget"),
                          (["--kernel", "nowhere.py:f"], "no file"), (["--variant", "zzz"], "no variant and dtype")):
        run = _fuzz(tmp_path, *args)
        assert run.returncode == 2 and message in run.stderr, (args, run.stderr)


def test_gemm_fuzz_speaks_of_its_own_options(tmp_path):
    """Its errors name --kernel (not pytest's --gemm-kernel), a kernel it cannot load is refused in one line,
    and --help gives the report folder it writes."""
    (tmp_path / "mine.py").write_text(ROOT_KERNEL)
    jit = "_kernel is a @triton.jit kernel; pass the Python function that launches it, called as FUNC(a, b, c)"
    for spec, message in (("nowhere.py:f", "no file"), ("mine.py:_kernel", jit)):
        run = _fuzz(tmp_path, "--kernel", spec)
        assert run.returncode == 2 and run.stderr.strip().count("\n") == 0, run.stderr
        assert run.stderr.startswith(f"gemm-fuzz: error: --kernel '{spec}': ") and message in run.stderr
        assert "--gemm-kernel" not in run.stderr
    usage = subprocess.run([sys.executable, "-m", "gemm_fuzz.properties.campaign", "--help"], capture_output=True,
                           text=True, timeout=300).stdout
    assert "reports/campaign-<time>" in " ".join(usage.split())


def test_a_spent_share_stops_a_target_after_one_example(backend):
    """A target whose share of the budget is already spent still runs one example, then stops at
    once instead of finishing its Hypothesis round: the campaign keeps to its budget."""
    from gemm_fuzz import kernels
    from gemm_fuzz.properties.launch.targets import Target
    from gemm_fuzz.properties.run.runner import Runner, RunSettings

    with Runner(RunSettings(backend=backend.name), backend) as runner:
        result = campaign.run_target(Target(kernels.get("tiled"), "fp16"), runner, 0.0)
    assert result.examples == 1 and result.failure is None
