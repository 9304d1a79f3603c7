"""What a kernel author reads: one failure in a few lines (what was wrong, how many elements, the
worst one and what was allowed there, the case, the repro), each distinct bug once at the end of a
run, the campaign's summary.md as valid Markdown, and its plots."""

import json
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from templates import TILED

from gemm_fuzz.kernels.mutants import Edit, edited
from gemm_fuzz.properties.campaign import TargetResult
from gemm_fuzz.properties.judge import failures
from gemm_fuzz.properties.model.cases import ROW, GemmCase, Layout
from gemm_fuzz.properties.report import bugs, display, stats, summary
from gemm_fuzz.properties.run import runner


def _failure_of(mutant: str, **case) -> failures.GemmFailure:
    from gemm_fuzz.kernels import mutants

    with pytest.raises(failures.GemmFailure) as caught:
        runner.check(mutants.variant(mutant), GemmCase(**case))
    return caught.value


def test_a_value_failure_reads_like_assert_close(backend):
    failure = _failure_of("tiled_bf16_through_fp16", M=1, N=1, K=1, dtype="bf16", out_dtype="bf16",
                          profile="mixed_magnitudes")
    failure.repro = Path("repros/tiled_bf16_through_fp16-bf16-0.py")
    lines = display.lines(failure)
    assert len(lines) <= 15 and all(len(line) <= display.WIDTH + 4 for line in lines), lines
    assert lines[0] == ("value out of bound: tiled_bf16_through_fp16 on 1x1x1 bf16->bf16 A:row B:row C:row "
                        "mixed_magnitudes seed=0")
    assert lines[1] == "  check: against the float64 reference"
    assert re.fullmatch(r"  C\[0, 0\] = \S+ where the float64 reference is \S+", lines[2])  # the worst element
    assert re.fullmatch(r"  allowed: \S+ \+- \S+ .*", lines[3])  # and what was allowed there
    count = lines.index("  1 of 1 elements are outside what is allowed")  # how many
    assert lines[count + 1].split() == ["worst", "got", "expected", "allowed", "error", "/", "bound"]  # the worst
    assert any(line.startswith("  step: ") for line in lines[count:])  # where it arises (judge/diagnosis.py)
    assert lines[-1] == "  repro: python repros/tiled_bf16_through_fp16-bf16-0.py"
    assert failure.headline() == "value out of bound: " + lines[2].strip()


@pytest.mark.interpreter  # the interpreter's sanitizer names the access; on a GPU the poison shows in C instead
def test_an_out_of_bounds_failure_names_the_access_in_its_headline(backend):
    failure = _failure_of("tiled_no_k_mask", M=1, N=1, K=1, dtype="fp16", out_dtype="fp16")
    assert re.fullmatch(r"out-of-bounds load of a_ptr in kernel 'tiled_kernel' at tiled_no_k_mask\.py:\d+",
                        failure.headline())
    lines = display.lines(failure)
    assert len(lines) <= 15 and lines[0].startswith("out-of-bounds access: tiled_no_k_mask on 1x1x1 fp16->fp16")
    assert any(line.strip().endswith("active lanes are out of bounds") for line in lines)


def _record(test: str, dtype: str, failure: failures.GemmFailure, case: GemmCase | None = None) -> dict:
    failure.with_context(variant="user:k.matmul#1", case="...")
    failure.case = case
    return bugs.record(failure, test)


def _oob(line: str) -> failures.GemmFailure:
    return failures.OutOfBoundsAccess("out-of-bounds load ...", kernel="_k", op="load", operand="a", line=line)


TESTS = ("test_matches_float64_reference", "test_variants_agree", "test_metamorphic_relations")


def test_one_bug_in_many_tests_and_dtypes_is_summarised_once():
    records = [_record(test, dtype, _oob("k.py:11"), GemmCase(1, 1, 1, dtype, dtype))
               for dtype in ("fp16", "bf16", "fp32") for test in TESTS]
    found = bugs.group(records)
    assert len(found) == 1
    assert found[0].tests == list(TESTS) and found[0].dtypes == ["bf16", "fp16", "fp32"]
    lines = bugs.summary(records)
    assert lines[0] == "1. out-of-bounds access: user:k.matmul#1 at the load of a at k.py:11"
    assert lines[1] == f"    in {', '.join(TESTS)}; dtypes bf16, fp16, fp32"


def test_distinct_bugs_stay_apart_and_one_bug_is_one_entry_with_its_cases():
    def wrong(dtype, profile, kind=failures.NotBitExact, c=ROW):
        return _record("test_matches_float64_reference", dtype, kind("C[0, 0] = 16 where ..."),
                       GemmCase(1, 1, 17, dtype, dtype, profile=profile, c=c))

    def refused(layout: str):  # one failing assert, its hint naming each case's layout
        return _record("t", "fp16", failures.LauncherRefused(
            f"the launcher raised AssertionError: A must be contiguous at k.py:9 on A {layout}; if that is ...",
            error="AssertionError", detail="A must be contiguous", line="k.py:9"))

    records = [_record("t", "fp16", _oob("k.py:11")), _record("t", "fp16", _oob("k.py:12")),
               wrong("fp16", "ones"), wrong("bf16", "ones", failures.ValueOutOfBound), wrong("fp16", "uniform"),
               wrong("fp16", "ones", c=Layout(step=2)), refused("column-major"), refused("with inner stride 2"),
               refused("broadcast"), _record("t", "fp16", failures.NotWritten("C[0, 1] still holds ..."))]
    found = bugs.group(records)
    assert [b.site for b in found] == ["the load of a at k.py:11", "the load of a at k.py:12", "a wrong value",
                                       "the launcher raising AssertionError: A must be contiguous at k.py:9",
                                       "an element never written"]
    assert found[2].kinds == ["not bit-exact", "value out of bound"] and found[2].dtypes == ["bf16", "fp16"]
    assert len(found[2].cases) == 4 and "case: 1x1x17 fp16->fp16 A:row B:row C:row/step2 ones seed=0" in \
        "\n".join(found[2].lines())


# no K mask on the loads (only M and N): the last K strip reads past A's rows and B's columns
WRONG_KERNEL = edited(TILED, (Edit("mask=(m[:, None] < M) & (kk[None, :] < K)", "mask=m[:, None] < M"),
                              Edit("mask=(kk[:, None] < K) & (n[None, :] < N)", "mask=n[None, :] < N")), "no_k_mask")


def test_a_failing_run_shows_each_failure_short_and_each_bug_once(pytester, monkeypatch):
    monkeypatch.setenv("CI", "1")  # the ci profile; and pytest prints short summary lines whole
    pytester.makepyfile(my_kernel=WRONG_KERNEL)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "--gemm-backend", "interpreter",
                                           "--gemm-dtype", "fp16,bf16", "-p", "no:cacheprovider", "-rf",
                                           "--report-log", "log.jsonl", timeout=900)
    out = result.stdout.str()
    assert result.ret == 1
    for noise in ("Explanation", "Highest target score", "Traceback", 'File "', "properties/", "Falsifying example"):
        assert noise not in out, noise
    section = out[out.index("GEMM failures: "):out.index("GEMM targets")]
    written = (pytester.path / "my_kernel.py").read_text().splitlines()
    line = next(i for i, text in enumerate(written, 1) if "x = tl.load(a + " in text)  # the load of A
    oob = re.search(rf"\d+\. out-of-bounds access: user:my_kernel\.matmul#\w+ at the load of a at "
                    rf"my_kernel\.py:{line}\n    in (.*); dtypes bf16, fp16\n", section)
    assert oob and set(oob.group(1).split(", ")) == set(TESTS), section
    assert section.count(f"at the load of a at my_kernel.py:{line}") == 1
    failed = [line for line in result.stdout.lines if line.startswith("FAILED")]
    # pytest-reportlog's log holds each failure as it happened: the short report and the bug's record
    logged = [json.loads(line) for line in (pytester.path / "log.jsonl").read_text().splitlines()]
    logged = [r for r in logged if r.get("outcome") == "failed"]
    assert len(logged) == len(failed) and all(r["gemm_failures"] for r in logged)
    assert any(f"out-of-bounds load in kernel '_kernel' at my_kernel.py:{line}" in json.dumps(r["longrepr"])
               for r in logged)
    assert len(failed) >= 6 and all(re.search(r"\] - (out-of-bounds load of a in kernel|value out of bound: C|"
                                              r"not bit-exact: C)", line) for line in failed), failed


class _Backend:
    def header(self):
        return ["gemm backend: interpreter on CPU (cpu)"]


def _results():
    broadcast = "2x3x4 fp16->fp16 A:row|bcast-rows B:col C:row ones seed=0"
    ok = TargetResult(
        target_id="tiled-fp16", variant="tiled", dtype="fp16", examples=10, exact=4, seconds=2.0, worst_ratio=0.5,
        worst_case=broadcast, ratios=[0.5])
    tf32 = TargetResult(
        target_id="tiled_tf32-tf32", variant="tiled_tf32", dtype="tf32", examples=5, seconds=1.0, worst_ratio=0.9,
        worst_case="1x1x1 fp32->fp32 A:row B:row C:row uniform seed=0")
    failure = failures.ValueOutOfBound("C[0, 0] = 3 where the float64 reference is 1 | odd ``` text", ratio=107.0)
    failure.with_context(variant="grouped", case=broadcast, check="against the float64 reference")
    bad = TargetResult(
        target_id="grouped-fp16", variant="grouped", dtype="fp16", examples=9, seconds=1.0, worst_ratio=0.0,
        worst_case="1x1x1 fp16->fp16 A:row B:row C:row ones seed=0", failures=3, failure=failure,
        failing_ratio=107.0, failing_case=broadcast)
    exact_fail = TargetResult(
        target_id="naive-int8", variant="naive", dtype="int8", examples=3, exact=1, seconds=1.0, worst_ratio=0.0,
        failures=2, failure=failures.NotBitExact("C[0, 0] = 16 where ... is exactly 17"),
        failing_case="1x1x17 int8->int32 A:row B:row C:row ones seed=0")
    return [ok, tf32, bad, exact_fail]


def _tables(markdown: str) -> list[list[str]]:
    """The source lines of each table markdown-it finds."""
    lines = markdown.splitlines()
    return [lines[t.map[0]:t.map[1]] for t in MarkdownIt().enable("table").parse(markdown) if t.type == "table_open"]


def _raw_cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def test_the_summary_is_valid_markdown_with_every_row_as_wide_as_its_header():
    text = summary.summary_markdown(_results(), _Backend(), budget=60, elapsed=5)
    tables = _tables(text)
    assert len(tables) == 3  # the variant x dtype grid, the targets and where their time went
    for table in tables:
        width = len(_raw_cells(table[0]))
        assert all(len(_raw_cells(row)) == width for row in table), table
    # the cells parse back to what they say, pipes included
    tokens = MarkdownIt().enable("table").parse(text)
    cells = [t.content for t in tokens if t.type == "inline"]
    assert "2x3x4 fp16->fp16 A:row|bcast-rows B:col C:row ones seed=0" in cells
    # a failure's text stays inside its code block, whatever backticks it holds
    fences = [t for t in tokens if t.type == "fence"]
    assert any("odd ``` text" in t.content for t in fences)


def test_a_failing_target_never_shows_a_passing_worst_ratio():
    text = summary.summary_markdown(_results(), _Backend(), budget=60).split("## Where the time went")[0]
    rows = {_raw_cells(line)[0]: _raw_cells(line) for line in text.splitlines() if line.startswith("| ")}
    assert rows["grouped-fp16"][5:7] == ["107 (failed)", r"2x3x4 fp16->fp16 A:row\|bcast-rows B:col C:row ones seed=0"]
    assert rows["naive-int8"][5] == "failed"
    assert rows["tiled-fp16"][5] == "0.5"
    # the grid: tf32 variants share their ieee twin's row
    assert rows["tiled"] == ["tiled", "0.5", "0.9", ""] and rows["grouped"] == ["grouped", "FAIL (value out of bound)",
                                                                                "", ""]


def test_stats_keep_a_failing_examples_ratio_apart_from_the_passing_ones():
    s = stats.Stats()
    s.passed("t", runner.Observation(False, 0.0, 0.1), "passing case")
    failure = failures.ValueOutOfBound("...", ratio=107.0).with_context(variant="v", case="failing case")
    s.failed("t", failure)
    assert stats.worst(s.targets["t"]) == ("107 (failed)", "failing case")
    merged = stats.TargetStats()
    merged.merge(s.targets["t"])
    assert stats.worst(merged) == ("107 (failed)", "failing case")


def test_the_plots_are_a_variant_by_dtype_grid(tmp_path):
    written = summary.plots(_results(), tmp_path)
    assert [p.name for p in written] == ["error_bound.png", "throughput.png"]
    variants, dtypes, cells = summary.grid(_results())
    assert variants == ["tiled", "grouped", "naive"] and dtypes == ["fp16", "tf32", "int8"]
    assert cells["tiled", "tf32"].target_id == "tiled_tf32-tf32"


def test_an_unwritten_element_reads_as_whole_sentences_in_the_failure_and_the_bug_list():
    import numpy as np
    import torch

    from gemm_fuzz.properties.judge import oracles

    c = torch.full((1, 1), float("nan"), dtype=torch.float16)
    bits = int(c.view(torch.int16).item()) & 0xFFFF
    with pytest.raises(failures.NotWritten) as caught:
        oracles.all_written(c, np.ones((1, 1)), bits)
    failure = caught.value.with_context(variant="k", case="1x1x1")
    body = display.lines(failure)[1:]
    assert " ".join(line.strip() for line in body[:-1]).endswith("from C's own unwritten contents"), body
    assert body[-1] == "  1 of 1 elements are unwritten, and the reference there is 1", body
    assert failure.headline().endswith("the kernel never wrote it, or computed it from C's own unwritten "
                                              "contents")


def test_statements_split_only_outside_parentheses():
    assert failures.statements("a (b; c); d") == ["a (b; c)", "d"]
    assert failures.statements("no statement break") == ["no statement break"]


def test_a_func_that_returns_its_result_instead_of_writing_c_is_told_so(pytester):
    returns = edited(TILED, (Edit("    _kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](a, b, c,",
                                  "    out = torch.empty_like(c)\n"
                                  "    _kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](a, b, out,"),
                             Edit("*c.stride(), BM=16, BN=16, BK=16)\n\n\ndef solve",
                                  "*out.stride(), BM=16, BN=16, BK=16)\n    return out\n\n\ndef solve"),
                             Edit("import triton\n", "import torch\nimport triton\n")), "returns_its_result")
    pytester.makepyfile(my_kernel=returns)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "--gemm-backend", "interpreter",
                                           "-k", "reference and fp16", "-p", "no:cacheprovider", "--gemm-repros", "",
                                           timeout=900)
    out = " ".join(result.stdout.str().split())
    assert result.ret == 1, out[-3000:]
    assert ("element never written: matmul returned a float16 tensor of shape (1, 1) and wrote nothing into the c "
            "it was given: the suite reads that c") in out, out[-3000:]
