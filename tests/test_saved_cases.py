"""A failing case in your hands (properties/checks/saved_case.py): a failure the suite reports is saved
with its operands as launched, loaded back in a fresh Python process and run there on the planted kernel,
which fails the same way, and on the right one, which passes; a repro script saves its case with --save;
pytest's --gemm-save-cases and the campaign's --save-cases name the folder; bad input is told what was
wrong and what is expected."""

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from hypothesis import strategies as st
from templates import TILED
from user_runs import battery

from gemm_fuzz import kernels
from gemm_fuzz.kernels import mutants
from gemm_fuzz.kernels.mutants import Edit, edited
from gemm_fuzz.properties import checks, load_case, run_case
from gemm_fuzz.properties.checks.example import Example
from gemm_fuzz.properties.checks.saved_case import SavedCaseError
from gemm_fuzz.properties.evaluation import mutation
from gemm_fuzz.properties.judge.failures import GemmFailure
from gemm_fuzz.properties.model.cases import COL, Epilogue, GemmCase, Layout, Vector, materialize, raw
from gemm_fuzz.properties.report import display, repros
from gemm_fuzz.properties.run.runner import Runner, RunSettings

HERE = Path(__file__).parent
FAMILY = HERE / "family_kernels.py"

# a fresh process: load the saved case, run it on each kernel named, print what became of each as JSON
FRESH = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[2])
    from gemm_fuzz.properties import load_case, run_case
    from gemm_fuzz.properties.judge.failures import GemmFailure

    def kernel(name):
        from gemm_fuzz import kernels
        from gemm_fuzz.kernels import mutants
        if name.startswith("mutant:"):
            return mutants.variant(name.removeprefix("mutant:"))
        if name.startswith("builtin:"):
            return kernels.get(name.removeprefix("builtin:"))
        module, func = name.split(":")  # a user's function, imported as the user would
        return getattr(__import__(module), func)

    saved = load_case(sys.argv[1])
    found = {"saved": saved.failure["kind"], "tensors": sorted(saved.tensors), "kwargs": sorted(saved.kwargs)}
    for name in sys.argv[3:]:
        try:
            observed = run_case(sys.argv[1], kernel(name))
            found[name] = "passed"
        except GemmFailure as e:
            found[name] = e.kind
    print(json.dumps(found))
""")


def _fresh(directory: Path, *kernels: str) -> dict:
    """What a fresh Python process (the interpreter chosen as a user debugging does: TRITON_INTERPRET=1)
    finds running the saved case in `directory` on each kernel."""
    run = subprocess.run([sys.executable, "-c", FRESH, str(directory), str(HERE), *kernels], capture_output=True,
                         text=True, timeout=600, cwd=directory, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def _reported(tmp_path: Path, backend, example: Example, variant) -> GemmFailure:
    """The failure the suite reports on `example` (run first, as a test's stratified case is), with its repro
    script written and its case saved under tmp_path/saved."""
    settings = RunSettings(backend=backend.name, repros=str(tmp_path / "repros"), save_cases=str(tmp_path / "saved"))
    with Runner(settings, backend) as runner, pytest.raises(GemmFailure) as found:
        runner.property(example.variant).search(st.just(example), [example], variant, max_examples=1)
    return found.value


# planted bug -> the right kernel, the extras its operation takes
PLANTED = {
    "epilogue_tanh_gelu": ("tiled_epilogue", ["alpha", "beta", "bias", "c_in"]),  # a wrong value
    "block_fp8_scale_per_tile": ("block_fp8", ["a_scale", "b_scale"]),  # a read past A's scales
    "moe_non_local_block_skipped": ("fused_moe", ["expert_ids", "num_tokens_post_padded", "sorted_token_ids",
                                                  "top_k", "topk_weights"]),  # rows never written
}


@pytest.mark.interpreter
@pytest.mark.parametrize("planted", PLANTED)
def test_a_saved_failure_reproduces_in_a_fresh_process_and_a_right_kernel_passes_it(planted, backend, tmp_path):
    right, extras = PLANTED[planted]
    mutant = mutants.get(planted)
    failure = _reported(tmp_path, backend, checks.REFERENCE.example(planted, mutation.expected_case(mutant)),
                        mutant.variant)
    assert type(failure).__name__ == mutant.caught_as
    saved = tmp_path / "saved" / Path(failure.repro).stem
    assert failure.saved == saved and (saved / "case.json").is_file()
    assert f"  saved: {saved}" in display.lines(failure)  # the short failure text names it
    found = _fresh(saved, f"mutant:{planted}", f"builtin:{right}")
    assert found["saved"] == failure.kind and found[f"mutant:{planted}"] == failure.kind, found
    assert found[f"builtin:{right}"] == "passed", found
    assert found["kwargs"] == extras
    assert {"a", "b", "c", "c_got", "reference", "expected", "bound", "exact"} <= set(found["tensors"]), found
    assert set(extras) - {"alpha", "beta", "top_k"} <= set(found["tensors"])


def _strided_example(name: str) -> Example:
    """The tanh-gelu mutant on operands that are neither packed nor at their buffer's start."""
    case = GemmCase(3, 2, 5, "fp32", "fp32", a=Layout("col", pad=2), b=Layout(step=2, offset=1), c=Layout(pad=3),
                    epilogue=Epilogue(alpha=0.1, bias=Vector(stride=2, offset=1), c_in=COL))
    return checks.REFERENCE.example(name, case)


@pytest.mark.interpreter
def test_a_repro_script_saves_its_case_as_launched(backend, tmp_path):
    name = "epilogue_tanh_gelu"
    example = _strided_example(name)
    settings = RunSettings(backend=backend.name)
    with Runner(settings, backend) as runner, pytest.raises(GemmFailure) as found:
        runner.run_once(example, mutants.variant(name))
    script = repros.write(tmp_path / "repros", example, settings, found.value)
    directory = tmp_path / "case"
    run = subprocess.run([sys.executable, str(script), "--save", str(directory)], capture_output=True, text=True,
                         timeout=600, cwd="/")
    assert run.returncode == 1 and f"saved: {directory}" in run.stdout, run.stdout + run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case", "repros"]  # nothing written outside DIR

    info = json.loads((directory / "case.json").read_text())
    assert GemmCase.from_dict(info["case"]) == example.case and info["check"]["name"] == "reference"
    assert info["variant"] == name and info["failure"]["kind"] == found.value.kind == info["saving"]["kind"]
    assert info["failure"]["headline"] == found.value.headline() and info["repro"] == str(script)
    assert info["seeds"] == {"seed": 0, "order": 0} and info["config"]["launched"]["BM"] == 16
    assert info["formula"] == "C = gelu(alpha * (A @ B) + beta * C_in + bias[n])"
    assert info["contract"]["precision"] == "ieee" and info["keywords"]["c_in"] == "c_in"
    # each operand is its whole buffer as launched: the view's strides and offset, its surroundings poisoned
    saved = load_case(directory)
    built = materialize(example.case, "cpu", mutants.variant(name).operation)
    for got, want in ((saved.a, built.a), (saved.b, built.b), (saved.c, built.c), (saved.bias, built.extras["bias"]),
                      (saved.c_in, built.extras["c_in"])):
        assert got.stride() == want.view.stride() and got.storage_offset() == want.view.storage_offset()
        assert torch.equal(raw(torch.as_strided(got, want.buffer.shape, (1,), 0)), raw(want.buffer))
    assert saved.a.stride() == (1, 5) and saved.bias.stride() == (2,) and saved.bias.storage_offset() == 65
    assert saved.kwargs["bias"] is saved.bias and saved.kwargs["c_in"] is saved.c_in
    assert (saved.kwargs["alpha"], saved.kwargs["beta"]) == (0.1, 1.0)
    assert saved.c_got.shape == saved.reference.shape == (3, 2) and saved.reference.dtype == torch.float64
    assert saved.c.isnan().all() and not saved.c_got.isnan().any() and saved.allowance.bound.shape == (3, 2)
    with pytest.raises(GemmFailure) as again:
        run_case(directory, mutants.variant(name))
    assert again.value.kind == found.value.kind
    assert run_case(saved, kernels.get("tiled_epilogue")).error_ratio <= 1


def test_pytest_saves_a_user_kernels_failure_and_names_it(pytester):
    saved = pytester.path / "saved"
    result = battery(pytester, f"{FAMILY}:inductor_addmm_contiguous_bias", "-k", "test_matches", "--gemm-dtype",
                     "fp16", "--gemm-repros", str(pytester.path / "repros"), "--gemm-save-cases", str(saved))
    assert result.ret == 1
    [script] = (pytester.path / "repros").glob("*.py")
    result.stdout.fnmatch_lines(["out-of-bounds access: user:* bias:stride0@1", f"  repro: python {script}",
                                 f"  saved: {saved / script.stem}"])
    # its own function (keyword `input` for the bias, `config=`), imported in a fresh process as a user does
    found = _fresh(saved / script.stem, "family_kernels:inductor_addmm_contiguous_bias",
                   "family_kernels:inductor_addmm")
    assert found["saved"] == "out-of-bounds access", found
    assert found["family_kernels:inductor_addmm_contiguous_bias"] == "out-of-bounds access", found
    assert found["family_kernels:inductor_addmm"] == "passed" and found["kwargs"] == ["alpha", "beta", "input"]


# no K mask on A's loads: the last K strip reads past A's columns
NO_K_MASK = edited(TILED, (Edit("(m[:, None] < M) & (kk[None, :] < K)", "m[:, None] < M"),), "no_k_mask_on_a")


def test_a_campaign_saves_each_failure_and_its_summary_names_it(tmp_path):
    (tmp_path / "mine.py").write_text(NO_K_MASK)
    run = subprocess.run([sys.executable, "-m", "gemm_fuzz.properties.campaign", "--backend", "interpreter",
                          "--report", str(tmp_path / "report"), "--budget", "8s", "--kernel", "mine.py:matmul",
                          "--dtype", "fp16", "--save-cases", "saved"], capture_output=True, text=True, cwd=tmp_path,
                         timeout=900)
    assert run.returncode == 1, run.stdout + run.stderr
    # the target's reported failure (Hypothesis may have reported others while shrinking: each has its script)
    named = re.search(r"^saved: `(.*)`$", (tmp_path / "report" / "summary.md").read_text(), re.MULTILINE)
    saved = Path(named.group(1))
    assert saved.parent == tmp_path / "saved" and f"    saved: {saved}" in run.stdout
    assert (tmp_path / "report" / "repros" / f"{saved.name}.py").is_file()
    assert f"FAIL ({load_case(saved).failure['kind']})" in (tmp_path / "report" / "summary.md").read_text()


CRASHES = textwrap.dedent("""
    import os

    def matmul(a, b, c):
        os.abort()

    def right(a, b, c):
        c.copy_((a.double() @ b.double()).to(c.dtype))
""")


def test_a_crash_is_saved_without_running_it_again(backend, tmp_path):
    from gemm_fuzz.properties.launch import user_kernel

    (tmp_path / "mine.py").write_text(CRASHES)
    variant = user_kernel.load(f"{tmp_path / 'mine.py'}:matmul")
    example = checks.REFERENCE.example(variant.name, GemmCase(2, 3, 4, "fp16", "fp16"))
    settings = RunSettings(backend=backend.name, mode="worker", timeout=60,
                           kernel=user_kernel.loaded(variant.name)[1].to_dict())
    with Runner(settings, backend) as runner:
        with pytest.raises(GemmFailure) as found:
            runner.run_once(example)
        assert found.value.kind == "crashed"
        directory = runner.save_case(example, tmp_path / "case", found.value)
    info = json.loads((directory / "case.json").read_text())
    assert info["launched"] is False and info["saving"] == {"kind": "not launched"}
    assert "hung or crashed" in info["note"]
    assert info["failure"]["kind"] == "crashed" and not (directory / "c_got.pt").exists()
    spec = importlib.util.spec_from_file_location("saved_cases_crashes", tmp_path / "mine.py")
    mine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mine)
    assert run_case(directory, mine.right).exact  # fp16 ones: bit-exact


# --- bad input: what was wrong, what is expected, no traceback of the suite's own -------------------------------


def _refused(call, *expected: str) -> SavedCaseError:
    with pytest.raises(SavedCaseError) as refused:
        call()
    message = str(refused.value)
    assert all(text in message for text in expected), message
    assert refused.value.__cause__ is None and (refused.value.__context__ is None or refused.value.__suppress_context__)
    return refused.value


def test_a_folder_that_is_not_a_saved_case_is_refused_saying_what_is_expected(tmp_path):
    expected = "expected a folder a save wrote: case.json"
    _refused(lambda: load_case(tmp_path / "none"), "is not a saved case: no such folder", expected)
    (tmp_path / "file").write_text("x")
    _refused(lambda: load_case(tmp_path / "file"), "is not a saved case: a file", expected)
    _refused(lambda: load_case(tmp_path), "is not a saved case: it has no case.json", expected)
    (tmp_path / "case.json").write_text("{not json")
    _refused(lambda: load_case(tmp_path), "is not a saved case's record", expected)
    (tmp_path / "case.json").write_text(json.dumps({"M": 1}))
    _refused(lambda: load_case(tmp_path), "no \"format\"", expected)
    _refused(lambda: load_case(3), "takes a folder's path, got a int", expected)


@pytest.mark.interpreter
def test_a_kernel_that_cannot_run_the_saved_case_is_refused_saying_how_it_is_called(backend, tmp_path):
    name = "epilogue_tanh_gelu"
    example = checks.REFERENCE.example(name, mutation.expected_case(mutants.get(name)))
    with Runner(RunSettings(backend=backend.name), backend) as runner:
        directory = runner.save_case(example, tmp_path / "case", None, mutants.variant(name))
    call = "FUNC(a, b, c, *, bias, c_in, alpha, beta)"
    _refused(lambda: run_case(directory, lambda a, b, c: None), "<lambda>(a, b, c) cannot be called as " + call,
             "computing C = gelu(alpha * (A @ B) + beta * C_in + bias[n])")
    _refused(lambda: run_case(directory, 3), "FUNC is a int, not a kernel; expected a function called as " + call)
    _refused(lambda: run_case(directory, mutants.variant("tiled_no_k_mask")),
             "tiled_no_k_mask computes C = A @ B, but the saved case is of C = gelu(")
    _refused(lambda: run_case(directory, f"{tmp_path}/nowhere.py:matmul"), "cannot load the kernel", "no file")
    script = repros.write(tmp_path / "repros", example, RunSettings(backend=backend.name),
                          GemmFailure("recorded"))
    run = subprocess.run([sys.executable, str(script), "--save", str(directory / "case.json")], capture_output=True,
                         text=True, timeout=600, cwd="/")
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip() == (f"cannot save the case into {directory / 'case.json'}: it is a file; expected a "
                                  "folder (new, or one a save wrote before)")
