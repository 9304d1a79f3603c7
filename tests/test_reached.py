"""What the cases reached (properties/report/reached.py): the features a case reaches for a variant's
blocks, what a target's strategies can reach, and the summary line of what no example reached."""

import torch

from gemm_fuzz import kernels
from gemm_fuzz.properties.checks.example import Example
from gemm_fuzz.properties.model.cases import COL, GemmCase, Layout
from gemm_fuzz.properties.report import reached
from gemm_fuzz.properties.report.stats import TargetStats, never_reached
from gemm_fuzz.properties.run.runner import Runner, RunSettings


def test_a_case_reaches_tiles_edges_classes_layouts_and_its_config(backend):
    tiled = kernels.get("tiled")  # 16 x 16 x 16 blocks in the interpreter's default configuration
    case = GemmCase(33, 1, 32, "fp16", "fp16", a=COL, b=Layout(pad=3, offset=1), profile="small_ints", specials=True)
    found = reached.features(case, tiled, "cpu")
    assert {"M: 3+ tiles", "M: ragged edge past a full tile", "M neither 1 nor a multiple of 16", "N == 1",
            "K % 16 == 0", "A col-major", "B padded", "B offset", "profile small_ints", "specials",
            "config 0"} <= found
    assert not {"N: 3+ tiles", "K: 3+ tiles", "K: ragged edge past a full tile", "C padded"} & found
    assert "M: 3+ tiles" not in reached.features(GemmCase(32, 1, 1, "fp16", "fp16"), tiled, "cpu")


def test_a_persistent_grid_counts_tiles_against_its_program_count():
    persistent = kernels.get("persistent")  # 16 x 32 tiles, 3 programs in its default configuration
    assert "tiles not a multiple of the program count" in reached.features(
        GemmCase(17, 1, 1, "fp16", "fp16"), persistent, "cpu")  # 2 tiles
    found = reached.features(GemmCase(48, 1, 1, "fp16", "fp16"), persistent, "cpu")  # 3 tiles
    assert "tiles a multiple of the program count" in found and "fewer tiles than programs" not in found
    assert set(reached.PROGRAM_FEATURES) <= reached.expected(persistent, "cpu", "fp16")
    assert not set(reached.PROGRAM_FEATURES) & reached.expected(kernels.get("tiled"), "cpu", "fp16")


def test_what_a_target_can_reach_follows_its_dtype_and_configs():
    tiled = kernels.get("tiled")
    wanted = reached.expected(tiled, "cpu", "int8")
    assert "specials" not in wanted and "profile small_ints" in wanted and "profile subnormal" not in wanted
    assert "K: ragged edge past a full tile" not in reached.expected(kernels.get("naive"), "cpu", "fp16")  # BK=1
    configs = len(tiled.configs_for("cpu"))
    assert {f"config {i}" for i in range(configs)} <= reached.expected(tiled, "cpu", "fp16")


def test_the_runner_counts_what_each_example_reached_and_the_summary_names_what_none_did(backend):
    with Runner(RunSettings(backend=backend.name), backend) as runner:
        prop = runner.property("tiled-fp16")
        block = kernels.get("tiled").configs_for(backend.device.type, torch.float16)[0]["BM"]
        for m in (1, 2 * block + 8):  # 40 in the interpreter's 16-row tiles: three of them
            prop.run(Example("reference", "tiled", GemmCase(m, 4, 4, "fp16", "fp16")))
        stats = runner.stats.targets["tiled-fp16"]
    assert stats.reached["M == 1"] == 1 and stats.reached["M: 3+ tiles"] == 1 and stats.reached["profile ones"] == 2
    line = never_reached({"tiled-fp16": stats})[0]
    assert line.startswith("tiled-fp16: never reached ") and "N: 3+ tiles" in line and "M == 1" not in line
    stats.failures = 1
    assert never_reached({"tiled-fp16": stats}) == []  # a failing target has its verdict; its shrinking stays small
    stats.failures = 0
    merged = TargetStats()
    merged.merge(stats)  # as xdist workers' statistics merge
    merged.merge(stats)
    assert merged.reached["profile ones"] == 4 and merged.wanted == stats.wanted
