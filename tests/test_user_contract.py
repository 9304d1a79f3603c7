"""A user's kernel declares its contract (`kernels.contract`) and is tested as a built-in variant is:
the contract is checked where it is written, read into the registry's Variant, and every user-style
kernel of tests/contract_kernels.py passes the battery while its wrong twin is caught, shrunk to the
kind of case that shows its bug. Split-K into C is judged by a bound that covers its extra roundings."""

import re
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from user_runs import battery

from gemm_fuzz.kernels import Contract, Operation, Requirements, contract
from gemm_fuzz.properties.judge.failures import LauncherRefused, NotBitExact
from gemm_fuzz.properties.launch import preconditions, user_kernel
from gemm_fuzz.properties.model.cases import GemmCase, Layout
from gemm_fuzz.properties.run import runner
from gemm_fuzz.reference import bounds, numpy_ref
from gemm_fuzz.reference.formats import by_name

KERNELS = Path(__file__).parent / "contract_kernels.py"


def _user(name: str):
    return user_kernel.load(f"{KERNELS}:{name}")


@pytest.mark.parametrize("declared, message", [
    (dict(dtypes=(torch.float16,)), "dtypes=(torch.float16,); expected a dict of input dtype -> output dtypes"),
    (dict(dtypes={torch.float64: (torch.float64,)}), "input dtype torch.float64 is not one the suite tests"),
    (dict(dtypes={torch.float32: (torch.float16,)}), "float32 inputs into float16 is not a pair the suite tests; "
                                                     "float32 inputs go into float32"),
    (dict(precision="fp64"), "precision='fp64'; expected 'ieee' or 'tf32'"),
    (dict(blocks=(64, 64)), "blocks=(64, 64); expected (BM, BN, BK)"),
    (dict(requires=Requirements(contiguous=("x",))), "names x; the operands are 'a', 'b', 'c'"),
    (dict(partial_sums_in_output=4, deterministic=True), "deterministic=True with partial_sums_in_output"),
    (dict(duplicate_stores="yes"), "duplicate_stores='yes'; expected True or False"),
])
def test_a_wrong_contract_fails_where_it_is_declared_saying_what_is_expected(declared, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        contract(**declared)


@pytest.mark.parametrize("declare, message", [
    (lambda: contract(block_shape=(16, 16, 16)),
     "contract: no field block_shape (did you mean 'blocks'?); the fields are dtypes, precision, blocks"),
    (lambda: Operation(activaton="gelu"),
     "operation: no field activaton (did you mean 'activation'?); the fields are alpha, beta"),
    (lambda: Requirements(contigous=("a",)),
     "requirements: no field contigous (did you mean 'contiguous'?); the fields are cuda, min_capability"),
])
def test_a_misspelt_field_is_named_with_the_nearest_one_and_the_list(declare, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        declare()


def test_the_contract_becomes_the_registrys_variant():
    tutorial, int8, split = _user("tutorial_matmul"), _user("int8_matmul"), _user("split_k_matmul")
    assert dict(tutorial.dtypes) == {torch.float16: (torch.float16, torch.float32),
                                     torch.float8_e4m3fn: (torch.float32, torch.bfloat16)}
    assert tutorial.requirements == Requirements(contiguous=("a",)) and tutorial.block_shapes("cpu") == ((32, 32, 32),)
    assert dict(int8.dtypes) == {torch.int8: (torch.int32,)}
    assert not split.deterministic and split.configs_for("cpu")[1]["SPLIT_K"] == 4
    assert split.output_partials(split.config("cpu", torch.float16, {"SPLIT_K": 4})) == 4
    assert _user("tutorial_undeclared").requirements == Requirements() and Contract().is_deterministic


def test_a_kernel_declaring_configs_must_take_them(tmp_path):
    path = tmp_path / "no_config.py"
    path.write_text("from gemm_fuzz.kernels import contract\n\n@contract(configs=[dict(BM=16, BN=16, BK=16)])\n"
                    "def matmul(a, b, c):\n    pass\n")
    with pytest.raises(user_kernel.KernelSpecError, match=r"cannot be called as FUNC\(a, b, c, config\)"):
        user_kernel.load(f"{path}:matmul")


def _split_k_into(c_dtype: torch.dtype, a: np.ndarray, b: np.ndarray, splits: int) -> np.ndarray:
    """What a split-K kernel adding fp32 partials into a zeroed C of `c_dtype` computes, in program order."""
    k = a.shape[1]
    c = torch.zeros((a.shape[0], b.shape[1]), dtype=c_dtype)
    for s in range(splits):
        strip = slice(s * k // splits, (s + 1) * k // splits)
        partial = torch.from_numpy(a[:, strip] @ b[strip]).to(torch.float32)
        c += partial.to(c_dtype)  # the atomic add: one rounding to C's dtype, one in the sum
    return c.to(torch.float64).numpy()


@pytest.mark.parametrize("c_dtype", [torch.float16, torch.float32])
def test_the_partial_sums_bound_holds_where_the_ordinary_bound_does_not(c_dtype):
    """S partials rounded and added in C's dtype stay within the bound that counts them; in fp16 the bound
    of a kernel writing C once is exceeded (the partials are larger than their cancelling sum; in fp32
    the accumulation term already covers them)."""
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.normal(size=(64, 256))).to(torch.float16).double().numpy()
    b = torch.from_numpy(rng.normal(size=(256, 64))).to(torch.float16).double().numpy()
    product, out, splits = numpy_ref.product(torch.from_numpy(a), torch.from_numpy(b)), by_name(
        str(c_dtype).removeprefix("torch.").replace("float", "fp")), 4
    error = np.abs(_split_k_into(c_dtype, a, b, splits) - product.value)
    counted = bounds.elementwise(product, 256, bounds.arithmetic("fp16", "ieee", splits), out)
    ordinary = bounds.elementwise(product, 256, bounds.arithmetic("fp16", "ieee"), out)
    assert (error <= counted).all()
    assert (error > ordinary).any() == (c_dtype == torch.float16)


def test_an_autotuned_kernel_runs_each_configuration_of_its_list_pinned_and_untimed(monkeypatch):
    """The configuration space is the autotuner's list; the drawn one runs (the wrong twin is wrong exactly
    where BLOCK_SIZE_K is 64), the tuner's timing never runs, and its list is restored after each launch."""
    right, wrong = _user("autotuned_matmul"), _user("autotuned_fixed_k_step")
    tuner = user_kernel._import(f"{KERNELS}:autotuned_matmul")[0].__globals__["autotuned_kernel"]
    listed = list(tuner.configs)
    monkeypatch.setattr(tuner, "_bench", lambda *a, **k: pytest.fail("the autotuner timed its configurations"))
    space = right.configs_for("cpu")
    assert [(c["BM"], c["BN"], c["BK"]) for c in space] == [(32, 32, 32), (64, 32, 32), (32, 64, 32), (32, 32, 64)]
    for config in space:
        case = GemmCase(3, 5, 33, "fp16", "fp16", config=tuple(config.items()))
        assert runner.check(right, case).exact
        if config["BLOCK_SIZE_K"] == 64:
            with pytest.raises(NotBitExact):
                runner.check(wrong, case)
        else:
            assert runner.check(wrong, case).exact
        assert tuner.configs == listed


def test_an_autotuned_kernel_cannot_also_declare_configs(tmp_path):
    source = (KERNELS.read_text().replace("@contract(**AUTOTUNED)\ndef autotuned_matmul",
                                          "@contract(configs=[dict(BM=16, BN=16, BK=16)])\ndef autotuned_matmul"))
    (tmp_path / "both.py").write_text(source)
    with pytest.raises(user_kernel.KernelSpecError, match="declares configs and launches an autotuned kernel"):
        user_kernel.load(f"{tmp_path / 'both.py'}:autotuned_matmul")


# --- a kernel raising on a case inside its contract: the hint names the case and the declaration ---------


def test_a_kernel_raising_on_a_case_it_declared_names_the_case_and_the_declaration_that_excludes_it():
    case = GemmCase(3, 3, 3, "fp16", "fp16", a=Layout(step=2))
    with pytest.raises(LauncherRefused) as info:
        runner.check(_user("tutorial_undeclared"), case)
    assert ("the launcher raised AssertionError: Matrix A must be contiguous at contract_kernels.py:" in str(info.value)
            and " on A with inner stride 2 (strides (6, 2)); if that is a precondition, declare "
                "requires=Requirements(contiguous=('a',))" in str(info.value))


@pytest.mark.parametrize("operands, declared, words", [
    (lambda: (torch.ones(4, 4).t(), torch.ones(4, 4), torch.ones(4, 4)), {},
     "on A column-major (strides (1, 4)); if that is a precondition, declare requires=Requirements(contiguous=('a',))"),
    (lambda: (torch.ones(4, 4), torch.ones(1, 4).expand(4, 4), torch.ones(8, 4)[::2]),
     dict(requires=Requirements(contiguous=("a",))),
     "on B broadcast (strides (0, 1): a zero stride) and C with a padded leading dimension (strides (8, 1) for 4 "
     "columns); if that is a precondition, declare requires=Requirements(contiguous=('a', 'b', 'c'))"),
    (lambda: (torch.ones(17)[1:].view(4, 4), torch.ones(4, 4), torch.ones(4, 4)), {},
     "on A at a data pointer not 16-byte aligned (storage offset 1); if that is a precondition, declare "
     "requires=Requirements(stride_alignment=16)"),
    (lambda: (torch.ones(4, 4, dtype=torch.float16), torch.ones(4, 4, dtype=torch.float16), torch.ones(4, 4)),
     dict(dtypes={torch.float16: (torch.float16, torch.float32)}),
     "on C of torch.float32 for torch.float16 inputs; if the kernel writes only torch.float16, declare "
     "dtypes={torch.float16: (torch.float16,)}"),
])
def test_the_hint_names_each_feature_and_its_declaration(operands, declared, words):
    variant = Contract(**declared).variant("v", lambda a, b, c, config=None: None, (), "a test")
    assert preconditions.hint(variant, *operands()) == " " + words


# --- the battery on user-style kernels ---------------------------------------------------------------------

@pytest.mark.parametrize("func", ["tutorial_matmul", "int8_matmul", "autotuned_matmul", "split_k_matmul"])
def test_a_right_user_kernel_passes_the_battery(pytester, func):
    result = battery(pytester, f"{KERNELS}:{func}")
    # per dtype: property, relations, agreement; skipped: no past repros, compiled-vs-interpreted (GPU only)
    dtypes = len(_user(func).dtypes)
    result.assert_outcomes(passed=3 * dtypes, skipped=1 + dtypes)


# the wrong twin -> its shrunk failure, showing the kind of case its bug needs
SHRUNK = {
    "tutorial_one_group_size": "element never written: user:* on 1x33x1 fp16->fp16 A:row B:row C:row ones seed=0",
    "int8_clamped": "not bit-exact: user:* on 1x1x1 int8->int32 A:row B:row C:row small_ints seed=0",
    "autotuned_fixed_k_step": "not bit-exact: user:* on 1x1x33 fp16->fp16 A:row B:row C:row ones seed=0 "
                              "config=*,BLOCK_SIZE_K=64,*",
    "split_k_two_way_strips": "*: user:* on 1x1x65 fp16->fp32 A:row B:row C:row * seed=0 "
                              "config=BM=32,BN=32,BK=32,SPLIT_K=4",
    # two rows of A, which a column-major A needs two columns to store non-contiguously (a stratified case
    # finds it before Hypothesis draws the broadcast 2x1x1 it used to shrink to)
    "tutorial_undeclared": "launcher refused the case: user:* on 2x1x2 fp16->fp16 A:col B:row C:row ones seed=0",
}


@pytest.mark.parametrize("func", SHRUNK)
def test_a_wrong_user_kernel_is_caught_and_shrunk_to_the_case_that_shows_its_bug(pytester, func):
    result = battery(pytester, f"{KERNELS}:{func}", "-k", "test_matches", "--gemm-dtype", "fp16,int8")
    assert result.ret == 1
    result.stdout.fnmatch_lines([SHRUNK[func]])
    if func == "tutorial_undeclared":
        assert "if that is a precondition, declare requires=Requirements(contiguous=('a',))" in " ".join(
            result.stdout.str().split())


# --- fp16 and bf16 atomics in the interpreter, as on the GPU --------------------------------------------------


@triton.jit
def _add_at(x_ptr, index_ptr, v_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.atomic_add(x_ptr + tl.load(index_ptr + offs), tl.load(v_ptr + offs), mask=offs < N - 1)


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_atomic_adds_round_each_addition_in_lane_order_and_overflow_to_inf(dtype, backend):
    big = torch.finfo(dtype).max
    ulp = torch.finfo(dtype).eps  # of 1.0
    index = torch.tensor([0, 1, 0, 2, 2, 3, 3, 3], dtype=torch.int32)
    values = torch.tensor([big, 1.0, big, 1.0, ulp / 2, -big, -big, 5.0], dtype=dtype)  # the last lane masked off
    x = torch.zeros(4, dtype=dtype)
    _add_at[(1,)](x, index, values, N=8)
    assert x.double().tolist() == [np.inf, 1.0, 1.0, -np.inf]
    assert any("fp16 and bf16 atomic_add" in line for line in backend.emulations)


def test_partial_sums_in_c_are_exact_only_where_c_itself_holds_every_partial_sum():
    """Integers summed in partials of fp16 C are exact up to 2**11, not up to fp32's 2**24: past it the
    order of the atomic additions decides the rounding, so bit-exactness is not demanded there."""
    a = torch.full((1, 64), 8.0, dtype=torch.float16)
    b = torch.full((64, 2), 4.0, dtype=torch.float16)
    b[:, 1] = 2.0
    product = numpy_ref.product(a, b)  # 2048 and 1024
    fp16 = by_name("fp16")
    assert bounds.exact_expected(product, bounds.arithmetic("fp16"), fp16).all()
    assert bounds.exact_expected(product, bounds.arithmetic("fp16", "ieee", 4), fp16).tolist() == [[True, True]]
    b[:, 0] = 5.0  # 2560: past fp16's exact integers
    product = numpy_ref.product(a, b)
    assert bounds.exact_expected(product, bounds.arithmetic("fp16"), fp16).all()
    assert bounds.exact_expected(product, bounds.arithmetic("fp16", "ieee", 4), fp16).tolist() == [[False, True]]
