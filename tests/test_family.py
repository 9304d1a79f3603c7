"""The GEMM family's operation (kernels/operation.py): declared where it is written, its extras checked
at the launch, its float64 reference and bound sound on right implementations and failing on wrong
ones, its metamorphic relations holding on a right kernel and breaking on kernels wrong in their way,
and the interpreter refusing a grid CUDA refuses."""

import re
from dataclasses import replace

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from doubles import failures, fake, first_run, launcher, worst

from gemm_fuzz.kernels import Operation, contract, operands
from gemm_fuzz.properties.interpreter import schedule
from gemm_fuzz.properties.judge import family_relations, oracles, relations
from gemm_fuzz.properties.judge.failures import GridTooLarge, NotBitExact, ValueOutOfBound
from gemm_fuzz.properties.launch import launching
from gemm_fuzz.properties.model.cases import Epilogue, GemmCase, Layout, Vector, materialize
from gemm_fuzz.properties.run import runner
from gemm_fuzz.reference import epilogue

FLOATS = {torch.float16: (torch.float16, torch.float32), torch.bfloat16: (torch.bfloat16, torch.float32),
          torch.float32: (torch.float32,)}
TORCH_ACTIVATIONS = {
    None: lambda y, slope: y, "relu": lambda y, slope: torch.relu(y),
    "leaky_relu": lambda y, slope: torch.nn.functional.leaky_relu(y, slope),
    # gelu as Triton kernels write it (torch's CPU gelu gives NaN at +Inf)
    "gelu": lambda y, slope: 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476)),
    "gelu_tanh": lambda y, slope: 0.5 * y * (1.0 + torch.tanh(0.7978845608028654 * (y + 0.044715 * y * y * y))),
    "silu": lambda y, slope: torch.nn.functional.silu(y),
    "sigmoid": lambda y, slope: torch.sigmoid(y), "tanh": lambda y, slope: torch.tanh(y),
}


def _fp32_epilogue(op: Operation, activation: str | None = "declared", wrong=None):
    """What a test double of `op` computes with torch in fp32, as a fused epilogue does: the product rounded
    once to fp32, each epilogue step in fp32 (C's one rounding is the double's). `activation` overrides the
    one it applies; `wrong(y, extras, c)` may change the fp32 result before it is stored."""
    act = TORCH_ACTIVATIONS[op.activation if activation == "declared" else activation]

    def compute(a, b, c, extras):
        names = {v: k for k, v in op.keywords().items()}
        x = {names[k]: v for k, v in extras.items()}
        product = torch.matmul(a.double(), b.double()).float()
        if op.gated:
            n = c.shape[-1]
            gate, up = ((product[..., :n], product[..., n:]) if op.gated == "concat"
                        else (product[..., 0::2], product[..., 1::2]))
            y = act(gate, op.slope) * up
            pre = product
        else:
            y = product * float(x.get("alpha", 1.0))
            if op.has_c_in:
                y = y + float(x["beta"]) * x["c_in"].float() if x["beta"] != 0 else y
            if op.bias:
                bias = x["bias"].float() * (float(x["beta"]) if op.beta and op.beta_scales == "bias" else 1.0)
                y = y + (bias[None, :] if op.bias == "n" else bias[:, None])
            pre = y
            y = act(y, op.slope)
            if op.residual:
                y = y + x["residual"].float()
        if wrong is not None:
            y = wrong(y, x, c)
        if op.pre_activation:
            x["pre"].copy_(pre.to(c.dtype))
        return y

    return compute


# --- the declaration ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("declared, message", [
    (dict(activation="swish"), "activation='swish'; expected one of relu, leaky_relu, gelu, gelu_tanh, silu"),
    (dict(bias="k"), "bias='k'; expected 'n' (one per column (length N)), 'm' (one per row (length M)) or None"),
    (dict(beta=True, beta_scales="bias"), "beta scales the bias but there is no bias"),
    (dict(gated="concat"), "gated without an activation; expected the gate's activation"),
    (dict(gated="concat", activation="silu", bias="n"), "a gated operation with alpha, beta, bias or residual"),
    (dict(activation="leaky_relu", slope=1.5), "slope=1.5; expected leaky_relu's slope, a float in [0, 1)"),
    (dict(epilogue_dtype="fp64"), "epilogue_dtype='fp64'; expected 'fp32' or 'out'"),
    (dict(bias="n", names={"biass": "b2"}), "names for biass; expected names for bias, c_in, alpha"),
    (dict(bias="n", names={"bias": "a"}), "expected distinct Python identifiers"),
    (dict(bias_dtype=torch.int8), "bias_dtype=torch.int8; expected torch.float16, torch.bfloat16, torch.float32"),
])
def test_a_wrong_operation_fails_where_it_is_declared_saying_what_is_expected(declared, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Operation(**declared)


def test_a_contract_refuses_an_epilogue_it_cannot_judge():
    with pytest.raises(ValueError, match=re.escape("an epilogue on torch.int8 inputs; the epilogue applies to float")):
        contract(dtypes={torch.int8: (torch.int32,)}, operation=Operation(activation="relu"))
    with pytest.raises(ValueError, match="signature='leetgpu' takes solve"):
        contract(signature="leetgpu", operation=Operation(bias="n"))
    with pytest.raises(ValueError, match=re.escape("names x; the operands are 'a', 'b', 'c', 'bias'")):
        from gemm_fuzz.kernels import Requirements
        contract(requires=Requirements(contiguous=("x",)), operation=Operation(bias="n"))


def test_the_operation_describes_itself_in_the_order_it_declares():
    assert Operation(alpha=True, beta=True, bias="n", activation="gelu").describe() == (
        "C = gelu(alpha * (A @ B) + beta * C_in + bias[n])")
    assert Operation(alpha=True, beta=True, beta_scales="bias", bias="m").describe() == (
        "C = alpha * (A @ B) + beta * bias[m]")
    assert Operation(activation="silu", gated="interleaved", pre_activation=True, batched=True).describe() == (
        "batched: C = silu(A @ B_gate) * (A @ B_up) [interleaved]; pre = A @ B")
    assert Operation(bias="n", names={"bias": "input"}).keywords() == {"bias": "input"}


# --- the launch's extras ---------------------------------------------------------------------------------------

ADDMM_OP = Operation(alpha=True, beta=True, bias="n", activation="relu", pre_activation=True)
ADDMM = fake(_fp32_epilogue(ADDMM_OP), FLOATS, ADDMM_OP)


def _addmm_operands(**changes):
    x = dict(a=torch.ones(3, 4), b=torch.ones(4, 5), c=torch.full((3, 5), float("nan")), bias=torch.ones(5),
             c_in=torch.ones(3, 5), alpha=1.0, beta=0.5, pre=torch.full((3, 5), float("nan")))
    x.update(changes)
    return {k: v for k, v in x.items() if v is not None}


@pytest.mark.parametrize("changes, error, message", [
    (dict(bias=torch.ones(3)), ValueError, "bias has shape (3,); expected (5,)"),
    (dict(bias=torch.ones(5, dtype=torch.float16)), TypeError, "bias has dtype float16; variant 'fake' takes float32"),
    (dict(c_in=None), TypeError, "missing extra(s) c_in: variant 'fake' computes C = relu(alpha * (A @ B)"),
    (dict(residual=torch.ones(3, 5)), TypeError, "unexpected extra(s) residual; variant 'fake' takes bias, c_in"),
    (dict(alpha=torch.tensor(1.0)), TypeError, "alpha must be a Python float, got Tensor"),
    (dict(c_in=torch.ones(5, 3).t()[:2]), ValueError, "c_in has shape (2, 5); expected (3, 5)"),
])
def test_a_launch_with_wrong_extras_names_the_extra_and_writes_nothing(changes, error, message):
    x = _addmm_operands(**changes)
    c, pre = x["c"], x["pre"]
    with pytest.raises(error, match=re.escape(message)):
        ADDMM.launch(**x)
    assert c.isnan().all() and pre.isnan().all()


def test_an_output_aliasing_an_input_is_refused():
    x = _addmm_operands()
    x["pre"] = x["c_in"]
    with pytest.raises(ValueError, match="pre overlaps C_in in memory|pre overlaps c_in in memory"):
        ADDMM.launch(**x)


def test_batched_and_gated_shapes_are_checked():
    batched = Operation(batched=True)
    bmm = fake(_fp32_epilogue(batched), FLOATS, batched)
    with pytest.raises(ValueError, match=re.escape("B must be 3-D (Bt x K x N), got 2-D with shape (4, 5)")):
        bmm.launch(torch.ones(2, 3, 4), torch.ones(4, 5), torch.ones(2, 3, 5))
    with pytest.raises(ValueError, match=re.escape("C has shape (3, 3, 5); expected (Bt, M, N) = (2, 3, 5)")):
        bmm.launch(torch.ones(2, 3, 4), torch.ones(2, 4, 5), torch.ones(3, 3, 5))
    gated = Operation(activation="silu", gated="concat")
    swiglu = fake(_fp32_epilogue(gated), FLOATS, gated)
    with pytest.raises(ValueError, match=re.escape("C has shape (3, 5); expected (M, N) = (3, 2)")):
        swiglu.launch(torch.ones(3, 4), torch.ones(4, 4), torch.ones(3, 5))
    with pytest.raises(ValueError, match=re.escape("B has 5 columns; a gated kernel's B holds gate and up halves")):
        swiglu.launch(torch.ones(3, 4), torch.ones(4, 5), torch.ones(3, 2))


# --- the reference and its bound --------------------------------------------------------------------------------

ACTIVATIONS = (None, "relu", "leaky_relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh")


def _cases(dtype: str, out: str, batched=False, m=9, n=13, k=21):
    """Cases across the value profiles, scalars and the activations' landmarks."""
    found = []
    for i, (profile, alpha, beta, landmarks) in enumerate([
            ("normal", 1.0, 1.0, False), ("uniform", -1.0, 0.0, True), ("mixed_magnitudes", 0.5, -2.0, True),
            ("near_overflow", 3.0, 1.0, True), ("small_ints", 2.0, 0.5, False), ("normal", 0.0, 1.0, True)]):
        ep = Epilogue(alpha, beta, Vector(stride=(0, 1, 2)[i % 3], offset=i % 2), landmarks=landmarks)
        found.append(GemmCase(m, n, k, dtype, out, profile=profile, seed=i, specials=i == 3, epilogue=ep,
                              batch=3 if batched else 0))
    return found


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("dtype, out", [("fp16", "fp16"), ("bf16", "fp32"), ("fp32", "fp32")])
def test_a_right_fp32_epilogue_stays_within_the_bound(activation, dtype, out):
    op = Operation(alpha=True, beta=True, bias="n", activation=activation, residual=True)
    worst_ratio = worst(fake(_fp32_epilogue(op), FLOATS, op), _cases(dtype, out))
    assert worst_ratio <= 1.0
    if activation not in (None, "relu") and out == "fp32":
        assert worst_ratio > 1e-3, "the bound is loose beyond use"  # a bound that cannot fail is not a check


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_gelus_tanh_approximation_is_caught_where_erf_is_declared(dtype):
    erf = Operation(bias="n", activation="gelu")
    wrong = fake(_fp32_epilogue(erf, activation="gelu_tanh"), FLOATS, erf)
    caught = failures(wrong, _cases(dtype, "fp32"), ValueOutOfBound)
    assert caught, "the tanh approximation passed every case for erf's gelu"


def test_relu_with_integer_values_is_judged_bit_for_bit():
    op = Operation(bias="n", activation="relu")
    case = GemmCase(5, 7, 9, "fp16", "fp16", profile="small_ints", seed=3)
    assert runner.check(fake(_fp32_epilogue(op), FLOATS, op), case).exact
    one_ulp = fake(_fp32_epilogue(op, wrong=lambda y, x, c: torch.where(y > 0, y + 1, y)), FLOATS, op)
    with pytest.raises(NotBitExact):
        runner.check(one_ulp, case)


def test_beta_zero_keeps_c_in_unread_and_nan_there_must_not_reach_c():
    op = Operation(alpha=True, beta=True, bias="n")
    case = GemmCase(3, 5, 4, "fp16", "fp16", epilogue=Epilogue(beta=0.0))
    ops = materialize(case, "cpu", op)
    assert ops.extras["c_in"].view.isnan().all()
    assert runner.check(fake(_fp32_epilogue(op), FLOATS, op), case).exact
    reads = fake(_fp32_epilogue(op, wrong=lambda y, x, c: y + x["beta"] * x["c_in"].float()), FLOATS, op)  # 0 * NaN
    with pytest.raises(NotBitExact, match=r"C\[0, 0\] = nan where the float64 reference is exactly 5"):
        runner.check(reads, case)


def test_the_largest_slope_is_computed_over_the_interval_not_taken_as_a_constant():
    lo, hi = np.array([-1.0, 5.0, -30.0]), np.array([1.0, 6.0, -20.0])
    silu = epilogue.largest_slope("silu", lo, hi)
    at = epilogue.derivative("silu", np.array([1.0, 5.0, -20.0]))  # silu's slope rises over each interval
    assert silu[0] == pytest.approx(at[0], rel=1e-6) and silu[1] >= at[1] and 0 < silu[2] < 1e-6
    assert epilogue.largest_slope("gelu", np.array([1.0]), np.array([2.0]))[0] == pytest.approx(
        float(epilogue.derivative("gelu", np.array([1.5]))[0]), rel=0.2)  # gelu's slope peaks at 1.5 on [1, 2]
    assert (epilogue.largest_slope("tanh", lo, hi) <= 1.0 + 1e-6).all()


# --- the family's metamorphic relations --------------------------------------------------------------------------


LINEAR = Operation(alpha=True, beta=True, bias="n", residual=True)
BATCHED = Operation(batched=True, alpha=True, bias="n", activation="relu")


def test_a_right_kernel_keeps_every_family_relation(backend):
    for op, case in ((LINEAR, GemmCase(5, 7, 9, "fp16", "fp16", profile="normal", seed=1,
                                       epilogue=Epilogue(alpha=1.5, beta=-1.0))),
                     (BATCHED, GemmCase(3, 4, 5, "fp32", "fp32", profile="normal", seed=2, batch=3,
                                        a=Layout(batch_gap=-2), b=Layout(broadcast="batch")))):
        right = fake(_fp32_epilogue(op), FLOATS, op)
        ops, first = first_run(right, case, backend)
        family_relations.pad_k(right, launcher(backend), ops, first, extra=3)
        assert family_relations.double(right, launcher(backend), ops, first)
        if op.batched:
            family_relations.one_problem(right, launcher(backend), ops, first, 1)
            family_relations.reversed_batch(right, launcher(backend), ops, first)
        else:
            assert family_relations.shift_bias(right, launcher(backend), ops, first, -0.5)


def test_pad_k_catches_a_kernel_wrong_for_some_k(backend):
    # right unless K % 4 == 1: the epilogue of a remainder path with a bug
    def remainder(y, x, c):
        return y + 1 if k_of[0] % 4 == 1 else y

    k_of = [0]
    right_but_k = fake(_fp32_epilogue(LINEAR, wrong=remainder), FLOATS, LINEAR)

    def launch(a, b, c, config=None, **extras):
        k_of[0] = a.shape[-1]
        right_but_k.launch(a, b, c, config, **extras)

    k_bug = replace(right_but_k, launch=launch)
    ops, first = first_run(k_bug, GemmCase(2, 3, 8, "fp16", "fp16", profile="small_ints"), backend)
    with pytest.raises((NotBitExact, ValueOutOfBound), match="the relation 'append 1 zero columns to A and rows to B'"):
        family_relations.pad_k(k_bug, launcher(backend), ops, first, extra=1)


def test_one_problem_catches_a_kernel_wrong_for_a_batch_of_one(backend):
    single = fake(_fp32_epilogue(BATCHED, wrong=lambda y, x, c: y * 2 if c.shape[0] == 1 else y), FLOATS,
                  BATCHED)  # a fast path for Bt = 1
    ops, first = first_run(single, GemmCase(2, 3, 4, "fp16", "fp16", batch=2), backend)
    with pytest.raises((NotBitExact, ValueOutOfBound), match="the relation 'problem 1 launched alone'"):
        family_relations.one_problem(single, launcher(backend), ops, first, 1)


def test_reversed_batch_catches_a_kernel_that_mixes_problems(backend):
    # the last problem's tile accumulates problem 0's when problem 0 is the larger (state kept across problems)
    def mixes(y, x, c):
        if y.shape[0] > 1 and y[0].sum() > y[-1].sum():
            y = y.clone()
            y[-1] += y[0]
        return y

    wrong = fake(_fp32_epilogue(BATCHED, wrong=mixes), FLOATS, BATCHED)
    case = GemmCase(2, 3, 4, "fp16", "fp16", batch=2, profile="small_ints", seed=1)
    ops = materialize(case, backend.device, BATCHED)
    for p, value in enumerate((1.0, 2.0)):  # problem 0 smaller: the first run is right
        ops.a.view[p].fill_(value)
    ops.a.snapshot()
    launching.launch(wrong, ops, backend)
    first = relations.observed(oracles.against_reference(ops, wrong.precision))
    with pytest.raises((NotBitExact, ValueOutOfBound), match="the relation 'the problems in reverse order'"):
        family_relations.reversed_batch(wrong, launcher(backend), ops, first)


def test_shift_bias_catches_a_kernel_that_clamps_the_bias(backend):
    clamps = Operation(bias="n")

    def clamp(y, x, c):  # the bias added as if it could not be negative
        bias = x["bias"].float()
        return y - bias[None, :] + bias.clamp(min=0)[None, :]

    wrong = fake(_fp32_epilogue(clamps, wrong=clamp), FLOATS, clamps)
    ops, first = first_run(wrong, GemmCase(2, 3, 4, "fp16", "fp16", profile="small_ints", seed=0), backend)
    assert (ops.extras["bias"].view >= 0).all()
    with pytest.raises(ValueOutOfBound, match="the relation 'add -2 to the bias'"):
        family_relations.shift_bias(wrong, launcher(backend), ops, first, -2.0)


def test_doubling_catches_a_kernel_that_clamps_alpha(backend):
    def clamp(y, x, c):  # alpha read as if it were at most 2
        return y / x["alpha"] * min(x["alpha"], 2.0)

    wrong = fake(_fp32_epilogue(LINEAR, wrong=clamp), FLOATS, LINEAR)
    case = GemmCase(2, 3, 4, "fp16", "fp16", profile="small_ints", seed=0, epilogue=Epilogue(alpha=1.5))
    ops, first = first_run(wrong, case, backend)
    with pytest.raises((NotBitExact, ValueOutOfBound), match="the relation 'double alpha, beta, the bias"):
        family_relations.double(wrong, launcher(backend), ops, first)


def test_the_relations_decline_where_they_do_not_hold(backend):
    gelu_op = Operation(alpha=True, bias="n", activation="gelu")
    gelu = fake(_fp32_epilogue(gelu_op), FLOATS, gelu_op)
    ops, first = first_run(gelu, GemmCase(2, 3, 4, "fp32", "fp32", profile="normal"), backend)
    assert not family_relations.shift_bias(gelu, launcher(backend), ops, first, 1.0)  # gelu(y + d) != gelu(y) + d
    assert not family_relations.double(gelu, launcher(backend), ops, first)  # gelu(2y) != 2 gelu(y)


# --- the grid CUDA refuses ------------------------------------------------------------------------------------


@triton.jit
def _count(x_ptr):
    tl.atomic_add(x_ptr, 1)


@pytest.mark.interpreter
def test_the_interpreter_refuses_a_grid_cuda_refuses_and_grid_only_runs_no_program(backend):
    x = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(GridTooLarge, match=r"has 65536 programs along axis 1; CUDA allows at most 65535 there"):
        _count[(1, 65536)](x)
    _count[(70000, 1, 1)](x)  # axis 0 takes 2**31 - 1
    assert int(x) == 70000
    with schedule.grid_only():
        _count[(5, 2)](x)
        with pytest.raises(GridTooLarge, match="axis 2"):
            _count[(1, 1, 65536)](x)
    assert int(x) == 70000, "grid_only ran a program"


# --- compiled against interpreted, judged by the operation's bound ------------------------------------------


def test_compiled_against_interpreted_judges_an_epilogue_by_its_bound(backend, monkeypatch):
    """Both sides interpreted here (the check itself runs on a GPU), one side moved as a GPU's libdevice
    moves it: by one ulp it is within the epilogue's bound (the plain product's, exact on these
    integers, demanded bit-equality of gelu's outputs), by one part in 10**3 it is not; a batch past
    the grid's limits is never among its cases (the interpreter would run it program by program)."""
    from gemm_fuzz import kernels
    from gemm_fuzz.properties.checks import cross_backend
    from gemm_fuzz.properties.checks.example import Example
    from gemm_fuzz.properties.model import stratified
    from gemm_fuzz.properties.run.runner import Runner, RunSettings

    variant = kernels.get("tiled_epilogue")
    case = GemmCase(5, 7, 9, "fp32", "fp32", profile="small_ints", seed=4)
    example = Example("cross_backend", variant.name, case)
    with Runner(RunSettings(backend=backend.name), backend) as run:
        output = run.output

        def moved(factor):
            def side(*args, **kwargs):
                observed = output(*args, **kwargs)
                if args[0] == run.backend.name and not side.moved:  # the "compiled" side
                    observed.values = (observed.values.astype(np.float32) * np.float32(factor)).astype(np.float64)
                    side.moved = True
                return observed

            side.moved = False
            return side

        monkeypatch.setattr(run, "output", moved(1 + 2**-23))
        cross_backend.CHECK.run(example, run, variant, 60, None)
        monkeypatch.setattr(run, "output", moved(1 + 1e-3))
        with pytest.raises(ValueOutOfBound, match="the interpreted kernel"):
            cross_backend.CHECK.run(example, run, variant, 60, None)
    bmm = kernels.get("bmm")
    assert all(c.batch <= 65535 for c in stratified.cases(bmm, "fp16", **cross_backend.SIZED))
    assert any(c.batch > 65535 for c in stratified.cases(bmm, "fp16", **cross_backend.SIZED, big_batches=True))


def test_an_output_of_many_padded_problems_is_seen_not_to_overlap_itself_without_listing_its_offsets(monkeypatch):
    """65536 problems of 16 x 16 with padded rows: each dimension steps past what the smaller ones reach
    (the shortcut), so no offset is listed (that took 18 s); strides that fold onto each other are found."""
    c = torch.empty(65536 * 301, dtype=torch.float16).as_strided((65536, 16, 16), (301, 19, 1))
    with monkeypatch.context() as m:
        m.setattr(operands, "_element_offsets", lambda t: pytest.fail("every offset listed"))
        assert not operands.has_internal_overlap(c)
    assert operands.has_internal_overlap(torch.empty(100).as_strided((4, 5), (3, 1)))
    assert operands.has_internal_overlap(torch.empty(100).as_strided((2, 4, 5), (20, 3, 1)))
    assert not operands.has_internal_overlap(torch.empty(100).as_strided((2, 4, 5), (21, 5, 1)))
