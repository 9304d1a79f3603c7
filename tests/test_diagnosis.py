"""A failing case in your hands: a value failure against the float64 reference lists its worst elements,
a small case the row of A and column of B of the worst, and one `step:` line names the deviation from the
declared computation that explains the kernel's value there (properties/judge/diagnosis.py), on mutants
whose bug is known; a correct kernel's passing examples never reach the diagnosis."""

import dataclasses
import inspect
import re
import sys

import pytest
import torch
from doubles import fake

from gemm_fuzz import kernels
from gemm_fuzz.kernels import mutants
from gemm_fuzz.kernels.mutants import Edit, plant
from gemm_fuzz.kernels.mutants.catalog import ROWWISE_APPLY
from gemm_fuzz.kernels.operation import Operation
from gemm_fuzz.properties.judge import compare, diagnosis, failures, oracles
from gemm_fuzz.properties.model.cases import Epilogue, GemmCase, materialize
from gemm_fuzz.properties.report import display
from gemm_fuzz.properties.run import runner
from gemm_fuzz.reference.numpy_ref import to_float64


def _failure(variant, case: GemmCase) -> failures.WrongValue:
    variant = mutants.variant(variant) if isinstance(variant, str) else variant
    with pytest.raises(failures.WrongValue) as caught:
        runner.check(variant, case)
    return caught.value


def _step(failure) -> str:
    found = [line for line in failure.message.splitlines() if line.startswith("step: ")]
    assert len(found) == 1, failure.message
    return found[0]


def _fp16_scales():
    """rowwise_fp8 with its scales rounded to fp16 before they multiply the accumulator (planted here: no
    mutant of the catalog rounds a scale)."""
    parent = kernels.get("rowwise_fp8")
    module = sys.modules[inspect.getmodule(parent.launch).__name__]
    rounded = "a_s.to(tl.float16).to(tl.float32)[:, None] * b_s.to(tl.float16).to(tl.float32)[None, :]"
    planted = {v.name: v for v in plant(module, (Edit(ROWWISE_APPLY, f"    acc = acc * {rounded}\n"),),
                                        "rowwise_fp16_scales")}
    return dataclasses.replace(planted["rowwise_fp8"], name="rowwise_fp16_scales")


# --- the worst elements ---------------------------------------------------------------------------------


def test_a_value_failure_lists_its_worst_elements_a_line_each_worst_first(backend):
    failure = _failure("epilogue_tanh_gelu", GemmCase(3, 5, 7, "fp32", "fp32", profile="normal",
                                                      epilogue=Epilogue(alpha=0.5, beta=2.0)))
    lines = failure.message.splitlines()
    first = lines[0]
    assert re.fullmatch(r"C\[1, 3\] = \S+ where the float64 reference is \S+; allowed: .*; 12 of 15 elements are "
                        r"outside what is allowed", first)  # the first line as it always was
    assert failure.headline() == "value out of bound: " + first.split("; ")[0]
    assert lines[1].split() == ["worst", "got", "expected", "allowed", "error", "/", "bound"]
    rows = [line.split() for line in lines[2:6]]
    assert len(failure.worst) == compare.WORST_SHOWN == 4 and all(line.startswith("  C[") for line in lines[2:6])
    assert not lines[6].startswith("  C[")  # no more than four
    ratios = [float(row[-1]) for row in rows]
    assert ratios == sorted(ratios, reverse=True) and ratios[0] == pytest.approx(failure.ratio, rel=1e-2)
    for row, shown in zip(rows, failure.worst):  # each line is its element: index, got, expected, allowed, ratio
        assert " ".join(row[:2]) == "C[{},".format(shown["index"][0]) + " {}]".format(shown["index"][1])
        assert float(row[2]) == pytest.approx(shown["got"], rel=1e-8)
        assert float(row[3]) == pytest.approx(shown["expected"], rel=1e-8)
        assert row[4] == "+-" and float(row[5]) == pytest.approx(shown["bound"], rel=1e-2)
    assert tuple(failure.worst[0]["index"]) == tuple(failure.index)


def test_a_bit_exact_failure_lists_its_elements_as_exactly_due(backend):
    failure = _failure("tiled_output_toward_zero", GemmCase(1, 1, 12, "fp16", "fp16", profile="small_ints"))
    assert failure.message.splitlines()[2].split() == ["C[0,", "0]", "-9760", "-9768", "exactly", "-"]
    assert failure.worst == [dict(index=(0, 0), got=-9760.0, expected=-9768.0, exact=True,
                                  bound=failure.worst[0]["bound"], ratio=None)]


# --- the inputs of a small case -------------------------------------------------------------------------


def test_a_small_case_shows_the_row_of_a_and_the_column_of_b_of_its_worst_element(backend):
    case = GemmCase(1, 1, 12, "fp16", "fp16", profile="small_ints")
    failure = _failure("tiled_output_toward_zero", case)
    ops = materialize(case, "cpu")
    a, b = to_float64(ops.a.view)[0], to_float64(ops.b.view)[:, 0]
    lines = failure.message.splitlines()
    assert f"A[0, :] = [{', '.join(f'{x:g}' for x in a)}]" in lines
    assert f"B[:, 0] = [{', '.join(f'{x:g}' for x in b)}]" in lines
    assert a @ b == -9766  # the K products the lines show sum to the reference (to nearest: -9768 in fp16)


def test_a_scaled_case_shows_the_codes_and_their_scales(backend):
    failure = _failure("mxfp4_e8m0_byte0_as_zero", GemmCase(1, 2, 2, "fp8e4m3", "bf16", profile="small_ints",
                                                            epilogue=Epilogue(scales="specials")))
    lines = failure.message.splitlines()
    assert "A[0, :] = [12, 5] (codes) x a_scale 6.64614e+35 (every k)" in lines  # 2**119
    assert "B[:, 1] = [-6, 1.5] (codes) x b_scale 5.87747e-39 (every k)" in lines  # E8M0 byte 0: 2**-127


def test_past_a_small_k_the_inputs_are_left_to_the_repro(backend):
    failure = _failure("grouped_k_loop_floor", GemmCase(1, 1, diagnosis.SMALL_K + 1, "fp16", "fp16", profile="uniform"))
    assert not any(line.startswith(("A[", "B[")) for line in failure.message.splitlines()), failure.message


# --- where the error arises -----------------------------------------------------------------------------


STEPS = [  # the bug, a case that shows it, what the step line must say
    ("epilogue_tanh_gelu", GemmCase(1, 1, 1, "fp32", "fp32"),
     r"step: the activation: C\[0, 0\] = 2.99636269 fits gelu's tanh approximation \(erf's gelu is declared\): "
     r"2.9963626\d \+- \S+, against 2.99595031 \+- \S+ as declared"),
    ("epilogue_activation_before_alpha", GemmCase(1, 1, 1, "fp16", "fp16", epilogue=Epilogue(alpha=0.0)),
     r"step: alpha: C\[0, 0\] = 0 fits alpha applied after the activation .*"),
    ("epilogue_beta_zero_reads_c_in", GemmCase(1, 1, 1, "fp16", "fp16", epilogue=Epilogue(beta=0.0)),
     r"step: C_in: C\[0, 0\] = nan fits C_in read although beta = 0 .*"),
    (_fp16_scales, GemmCase(1, 1, 1, "fp8e4m3", "fp32", epilogue=Epilogue(scales="normal")),
     r"step: scales: C\[0, 0\] = \S+ fits the product with a_scale and b_scale rounded to fp16 first: .*"),
    ("mxfp4_e8m0_byte0_as_zero", GemmCase(1, 2, 2, "fp8e4m3", "bf16", profile="small_ints",
                                          epilogue=Epilogue(scales="specials")),
     r"step: scales: C\[0, 1\] = 0 fits the product with E8M0 byte 0 \(2\*\*-127\) read as 0: exactly 0\b.*"),
    ("w4a16_zero_shift_by_index", GemmCase(1, 2, 1, "fp16", "fp16"),
     r"step: the weights: C\[0, 1\] = 5 fits the weights dequantized with the zero point 4 for every k, not 8: "
     r"exactly 5, against exactly 1 as declared"),
    ("tiled_bf16_accumulator", GemmCase(1, 1, 1, "fp16", "fp16", profile="wide_ints"),
     r"step: the accumulation: C\[0, 0\] = 22912 fits partial sums kept in 9 significant bits or fewer \(fp16 keeps "
     r"11, bf16 8, .*\): 22879 \+- \S+, against exactly 22880 as declared"),
    ("tiled_fp16_accumulator", GemmCase(1, 1, 1, "fp16", "fp32", profile="small_ints", seed=13),
     r"step: the accumulation: C\[0, 0\] = 3112 fits partial sums kept in 11 significant bits or fewer .*"),
    ("tiled_13_bit_accumulator", GemmCase(1, 1, 1, "fp32", "fp32", profile="wide_ints"),
     r"step: the accumulation: C\[0, 0\] = 11814912 fits partial sums kept in 12 significant bits or fewer .*"),
    ("tiled_int8_accumulator", GemmCase(1, 1, 1, "int8", "int32", profile="small_ints"),
     r"step: the accumulation: C\[0, 0\] = -121 fits an int8 accumulator \(partial sums wrap past 127\): exactly -121, "
     r"against exactly 135 as declared"),
    ("tiled_fp16_accumulator_fp8", GemmCase(1, 1, 1, "fp8e4m3", "fp32", profile="near_overflow"),
     r"step: the accumulation: C\[0, 0\] = inf fits an fp16 accumulator: 73728 \+- \S+, against 73728 \+- \S+ as "
     r"declared: a partial result past fp16's largest value \(65504\)\?"),
    ("persistent_default_precision", GemmCase(1, 1, 1, "fp32", "fp32", profile="wide_ints"),
     r"step: the product: C\[0, 0\] = 11809640 fits A and B truncated to tf32 \(tl.dot's default input_precision "
     r"for fp32: pass input_precision='ieee', or declare precision 'tf32'\): exactly 11809640, .*"),
    ("tiled_output_toward_zero", GemmCase(1, 1, 12, "fp16", "fp16", profile="small_ints"),
     r"step: the output rounding: C\[0, 0\] = -9760 fits C rounded toward zero \(truncated\), not to nearest: "
     r"exactly -9760, against exactly -9768 as declared"),
    ("grouped_k_loop_floor", GemmCase(1, 1, 17, "fp16", "fp16", profile="uniform"),
     r"step: the K loop: C\[0, 0\] = -2.3125 fits the sum of only the first 16 of its 17 products \(the last 1 "
     r"dropped: .*"),
    ("stream_k_late_first_owner", GemmCase(17, 1, 33, "fp16", "fp16"),
     r"step: the K loop: C\[16, 0\] = 17 fits the sum of only the first 17 of its 33 products .*"),
]


# the cases whose expected step counts the K products of the interpreter's configuration's K tile
K_TILE_OF_THE_INTERPRETER = {"grouped_k_loop_floor", "stream_k_late_first_owner"}


@pytest.mark.parametrize("variant, case, said", STEPS, ids=[s[0] if isinstance(s[0], str) else s[0].__name__
                                                           for s in STEPS])
def test_the_step_where_a_known_bug_arises_is_named(backend, variant, case, said):
    if variant in K_TILE_OF_THE_INTERPRETER and not backend.interpreted:
        pytest.skip("the K products this case drops depend on the K tile of the configuration, the interpreter's "
                    "here (a GPU's larger one drops them all: 'the K loop never runs?')")
    failure = _failure(variant() if callable(variant) else variant, case)
    assert re.fullmatch(said, _step(failure)), _step(failure)


EPILOGUE = Operation(alpha=True, beta=True, bias="n", activation="gelu", residual=True)
GELU = {"gelu": torch.nn.functional.gelu, "none": lambda y: y,
        "tanh": lambda y: torch.nn.functional.gelu(y, approximate="tanh"), "silu": torch.nn.functional.silu}


def _epilogue_double(wrong: str):
    """C = gelu(alpha * A @ B + beta * C_in + bias) + residual in fp32, as a fused epilogue computes it, with
    one step done `wrong`."""
    def compute(a, b, c, x):
        alpha, beta = float(x["alpha"]), float(x["beta"])
        y = torch.matmul(a.double(), b.double()).float()
        if wrong != "alpha after":
            y = y * (1.0 if wrong == "no alpha" else alpha)
        if wrong != "no C_in":
            y = y + (1.0 if wrong == "no beta" else beta) * x["c_in"].float()
        y = y + x["bias"].float()[None, :] * {"no bias": 0, "bias twice": 2}.get(wrong, 1)
        y = GELU[{"tanh gelu": "tanh", "no gelu": "none", "silu": "silu"}.get(wrong, "gelu")](y)
        y = y * alpha if wrong == "alpha after" else y
        return y + (0.0 if wrong == "no residual" else x["residual"].float())
    return fake(compute, {torch.float32: (torch.float32,)}, EPILOGUE, name=f"epilogue_{wrong.replace(' ', '_')}")


@pytest.mark.parametrize("wrong, step, text", [
    ("no alpha", "alpha", "alpha not applied"),
    ("alpha after", "alpha", "alpha applied after the activation (alpha * gelu(...)), not before it"),
    ("no beta", "beta", "beta not applied"),
    ("no C_in", "C_in", "C_in not added"),
    ("no bias", "the bias", "the bias not added"),
    ("bias twice", "the bias", "the bias added twice"),
    ("tanh gelu", "the activation", "gelu's tanh approximation (erf's gelu is declared)"),
    ("no gelu", "the activation", "no gelu applied"),
    ("silu", "the activation", "silu, not the declared gelu"),
    ("no residual", "the residual", "the residual not added"),
])
def test_each_epilogue_step_done_wrong_is_named(backend, wrong, step, text):
    """alpha = 0.5, beta = 3 and ones elsewhere: y = 0.5 + 3 + 1, C = gelu(4.5) + 1, and each step left out,
    doubled or moved gives a value of its own."""
    failure = _failure(_epilogue_double(wrong), GemmCase(1, 1, 1, "fp32", "fp32",
                                                         epilogue=Epilogue(alpha=0.5, beta=3.0)))
    said = _step(failure)
    assert said.startswith(f"step: {step}: C[0, 0] = {failure.got:.9g} fits {text}: "), said
    assert " other deviation" not in said  # the one deviation that fits


def test_a_wrong_value_no_deviation_explains_lists_the_references_steps(backend, monkeypatch):
    """An error no deviation tried explains (a constant added to C after the epilogue): the reference's
    intermediates at the element, for the kernel's own to be compared with."""
    wrong = dataclasses.replace(kernels.get("tiled_epilogue"), name="tiled_epilogue_plus_a_quarter")
    launch = wrong.launch

    def off(a, b, c, config=None, **extras):
        launch(a, b, c, config=config, **extras)
        c.add_(0.25)

    failure = _failure(dataclasses.replace(wrong, launch=off), GemmCase(1, 1, 1, "fp32", "fp32"))
    assert re.fullmatch(r"step: no single deviation tried explains C\[0, 0\] = 3.24595\d+; the reference there, step "
                        r"by step: product exactly 1, x alpha exactly 1, \+ beta C_in exactly 2, \+ bias exactly 3, "
                        r"gelu 2.99595031 \+- \S+", _step(failure)), _step(failure)


def test_a_failure_stays_short_with_its_table_inputs_and_step(backend):
    failure = _failure("tiled_output_toward_zero", GemmCase(1, 1, 12, "fp16", "fp16", profile="small_ints"))
    lines = display.lines(failure)
    assert len(lines) <= 20 and not any(line.startswith("  ...") for line in lines), lines
    assert any(line.startswith("  step: the output rounding") for line in lines)


# --- what it costs, and when it says nothing ------------------------------------------------------------


def test_a_passing_example_never_reaches_the_diagnosis(backend, monkeypatch):
    called = []
    monkeypatch.setattr(oracles.diagnosis, "explain", lambda *args, **kw: called.append(args))
    for variant, case in (("tiled_epilogue", GemmCase(3, 5, 7, "fp32", "fp32", profile="normal",
                                                      epilogue=Epilogue(alpha=0.5, beta=2.0))),
                          ("tiled", GemmCase(1, 1, 12, "fp16", "fp16", profile="small_ints"))):
        observed = runner.check(kernels.get(variant), case)
        assert observed.error_ratio is not None
    assert called == []
    _failure("tiled_output_toward_zero", GemmCase(1, 1, 12, "fp16", "fp16", profile="small_ints"))
    assert len(called) == 1  # a failure does reach it


def test_a_diagnosis_that_fails_says_nothing_and_the_failure_stands(backend, monkeypatch):
    def broken(*args, **kw):
        raise RuntimeError("a bug of the diagnosis")

    monkeypatch.setattr(diagnosis, "_lines", broken)
    failure = _failure("epilogue_tanh_gelu", GemmCase(1, 1, 1, "fp32", "fp32"))
    assert isinstance(failure, failures.ValueOutOfBound) and "step:" not in failure.message
    assert failure.message.splitlines()[1].startswith("worst")  # the table is the comparison's, not the diagnosis's


def test_a_recomputation_that_differs_from_the_checks_reference_says_nothing(backend, monkeypatch):
    """The step line is claimed only where the declared computation, recomputed for the element, is the
    check's own reference there."""
    case = GemmCase(1, 1, 1, "fp32", "fp32")
    ops = materialize(case, "cpu", kernels.get("tiled_epilogue").operation)
    el = diagnosis.element(ops, (0, 0))
    got = 2.99636269
    assert diagnosis.step_line(ops, el, "ieee", 0, got, expected=2.99595031).startswith("step: the activation")
    assert diagnosis.step_line(ops, el, "ieee", 0, got, expected=3.5) is None
