"""A campaign over several workers, and failures shared through one example database: the targets
are dealt among child campaigns whose reports merge into one, and a failure one campaign found is
the first example another campaign runs when they share a database (a directory, or a Redis server
on loopback)."""

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from templates import TILED as ROOT_KERNEL  # a right kernel, as a user's file

from gemm_fuzz.kernels.mutants import Edit, edited
from gemm_fuzz.properties.run import fleet

# Right while M fits one row of tiles; with M > 16 the grid floors M / 16 and the last ragged row of
# tiles is never written. The first example Hypothesis runs (1x1x1) passes, random ones soon fail.
FLOORED_GRID = edited(ROOT_KERNEL, (Edit("_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))]",
                                         "_kernel[(max(1, M // 16), triton.cdiv(N, 16))]"),), "floored_grid")


def test_children_share_the_cores_and_each_sees_its_gpu(monkeypatch):
    """Each of N children gets the cores / N threads for numpy and torch (a thread count the user set
    stands), and only its own GPU."""
    monkeypatch.setattr(fleet.os, "cpu_count", lambda: 16)
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    env = fleet.child_env(4, "1")
    assert (env["OPENBLAS_NUM_THREADS"], env["OMP_NUM_THREADS"], env["CUDA_VISIBLE_DEVICES"]) == ("4", "3", "1")
    assert "CUDA_VISIBLE_DEVICES" not in fleet.child_env(32, None) and fleet.child_env(32, None)["MKL_NUM_THREADS"] \
        == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5")
    assert fleet.gpus("cuda") == ["2", "5"] and fleet.gpus("interpreter") == []


def test_targets_are_dealt_round_robin_and_gpus_assigned_in_turn(monkeypatch):
    ids = ["tiled-fp16", "tiled-bf16", "grouped-fp16", "grouped-bf16", "naive-fp16"]
    plan = fleet.shares(ids, 2, "interpreter")
    assert [s.target_ids for s in plan] == [("tiled-fp16", "grouped-fp16", "naive-fp16"),
                                            ("tiled-bf16", "grouped-bf16")]
    assert [s.device for s in plan] == [None, None]
    # more workers than targets: each worker one target, a target searched by several
    assert [s.target_ids for s in fleet.shares(ids[:2], 5, "interpreter")] == [
        ("tiled-fp16",), ("tiled-bf16",), ("tiled-fp16",), ("tiled-bf16",), ("tiled-fp16",)]
    monkeypatch.setattr(fleet, "gpu_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert [s.device for s in fleet.shares(ids, 3, "cuda")] == ["0", "1", "0"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")  # the GPUs this process was given, not the first two
    assert [s.device for s in fleet.shares(ids, 3, "cuda")] == ["2", "3", "2"]


def _fuzz(cwd, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", "gemm_fuzz.properties.campaign", "--backend", "interpreter", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout)


def _results(report) -> dict:
    return {r["target_id"]: r for r in json.loads((report / "results.json").read_text())["results"]}


def test_two_workers_split_the_targets_and_merge_one_report(tmp_path):
    (tmp_path / "floored.py").write_text(FLOORED_GRID)
    report = tmp_path / "report"
    run = _fuzz(tmp_path, "--kernel", "floored.py:matmul", "--dtype", "fp16", "--dtype", "bf16", "--budget", "40s",
                "--workers", "2", "--report", str(report))
    assert run.returncode == 1, run.stdout + run.stderr  # the bug is found
    assert "over 2 workers" in run.stdout
    results = _results(report)
    assert len(results) == 2 and all(r["failure"] for r in results.values()), results
    merged = json.loads((report / "results.json").read_text())
    assert sorted(w["worker"] for w in merged["workers"]) == ["worker-0", "worker-1"]
    assert {tuple(r["target_id"] for r in w["results"]) for w in merged["workers"]} == {
        (t,) for t in results}  # each worker ran one target
    summary = (report / "summary.md").read_text()
    assert "## Workers" in summary and summary.count("| worker-") == 2
    assert all(Path(r["repro"]).exists() for r in results.values())  # the workers' repro scripts


def _shared_database_replays_first(tmp_path, database: str, fresh: str) -> None:
    (tmp_path / "floored.py").write_text(FLOORED_GRID)
    common = ["--kernel", "floored.py:matmul", "--dtype", "fp16", "--budget", "25s"]
    first = _fuzz(tmp_path, *common, "--database", database, "--report", str(tmp_path / "first"))
    assert first.returncode == 1, first.stdout + first.stderr
    found = next(iter(_results(tmp_path / "first").values()))
    second = _fuzz(tmp_path, *common, "--database", database, "--report", str(tmp_path / "second"))
    assert second.returncode == 1, second.stdout + second.stderr
    replayed = next(iter(_results(tmp_path / "second").values()))
    assert replayed["first_failure_at"] == 1, replayed  # its first example was the saved failure
    assert replayed["example"]["case"] == found["example"]["case"]
    control = _fuzz(tmp_path, *common, "--database", fresh, "--report", str(tmp_path / "control"))
    assert control.returncode == 1, control.stdout + control.stderr
    assert next(iter(_results(tmp_path / "control").values()))["first_failure_at"] > 1  # 1x1x1 passes


def test_campaigns_sharing_a_database_directory_replay_each_others_failures_first(tmp_path):
    _shared_database_replays_first(tmp_path, str(tmp_path / "shared-db"), str(tmp_path / "fresh-db"))


@pytest.fixture
def redis_url():
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("needs redis-server (Debian: apt-get install redis-server); .ci/run installs it where it can")
    pytest.importorskip("redis", reason="needs the redis package: pip install -e '.[redis]'")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_campaigns_sharing_a_redis_database_replay_each_others_failures_first(tmp_path, redis_url):
    _shared_database_replays_first(tmp_path, redis_url + "/0", redis_url + "/1")


def test_an_unreachable_redis_database_is_a_usage_error(tmp_path):
    pytest.importorskip("redis", reason="needs the redis package: pip install -e '.[redis]'")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    run = _fuzz(tmp_path, "--variant", "tiled", "--dtype", "fp16", "--budget", "5s",
                "--database", f"redis://127.0.0.1:{port}")
    assert run.returncode == 2 and "no Redis server answers there" in run.stderr, run.stderr


def test_a_target_searched_by_several_workers_is_reported_once():
    from gemm_fuzz.properties.campaign import TargetResult, merged
    from gemm_fuzz.properties.judge.failures import NotWritten

    first = TargetResult(
        target_id="tiled-fp16", variant="tiled", dtype="fp16", examples=10, exact=4, seconds=30.0, worst_ratio=0.5,
        worst_case="2x2x2", ratios=[0.5], phases={"launch": 1.0, "compiles": 2})
    found = NotWritten("C[0, 0] still holds its pre-fill")
    second = TargetResult(
        target_id="tiled-fp16", variant="tiled", dtype="fp16", examples=7, exact=1, seconds=31.0, worst_ratio=0.7,
        worst_case="3x3x3", ratios=[0.7], failures=2, kinds={"element never written": 2},
        failure=found, failing_case="1x17x1", phases={"launch": 0.5, "compiles": 1})
    other = TargetResult(
        target_id="naive-fp16", variant="naive", dtype="fp16", examples=3, seconds=29.0)
    tiled, naive = merged([first, second, other])
    assert naive is other
    assert (tiled.target_id, tiled.examples, tiled.exact, tiled.failures) == ("tiled-fp16", 17, 5, 2)
    assert tiled.seconds == 31.0  # the searches ran side by side
    assert (tiled.worst_ratio, tiled.worst_case, tiled.ratios) == (0.7, "3x3x3", [0.5, 0.7])
    assert tiled.failure is found and tiled.failing_case == "1x17x1"
    assert tiled.phases == {"launch": 1.5, "compiles": 3}
