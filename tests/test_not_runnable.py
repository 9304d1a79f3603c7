"""A configuration this device cannot run for lack of resources is what Triton's autotuner prunes, so it
is no failure of the kernel (properties/model/runnable.py): the example meeting it is left out, the
configuration is drawn no more, and the coverage report says why. Any other error of a configuration
stays a failure, and a kernel none of whose configurations runs here fails.

The interpreter never runs out of shared memory, so these kernels raise Triton's own OutOfResources for
one configuration, as a compiled launch does on a GPU (tests/test_gpu_tutorial.py shows it there)."""

import dataclasses

import pytest
from templates import TILED
from triton.runtime.errors import OutOfResources

from gemm_fuzz import kernels
from gemm_fuzz.kernels.mutants import Edit, edited
from gemm_fuzz.properties.checks.example import Example
from gemm_fuzz.properties.judge.failures import LauncherRefused
from gemm_fuzz.properties.model import runnable, strategies
from gemm_fuzz.properties.run.runner import Runner, RunSettings

SHARED = OutOfResources(327680, 232448, "shared memory")  # what the H100 says of tutorial 03's 256 x 64 x 128


@pytest.fixture(autouse=True)
def _fresh_records():
    runnable.forget()
    yield
    runnable.forget()


def _double(raises: dict, name: str = "tiled_double"):
    """`tiled` under another name, whose launcher raises raises[i] on its i-th configuration, noting every
    configuration it is asked to launch."""
    tiled = kernels.get("tiled")
    launched = []

    def launch(a, b, c, config=None):
        index = next(i for i, c in enumerate(variant.configs_for(a.device.type, a.dtype))
                     if dict(c) == variant.config(a.device.type, a.dtype, config))
        launched.append(index)
        if index in raises:
            raise raises[index]
        tiled.launch(a, b, c, config=config)

    variant = dataclasses.replace(tiled, name=name, launch=launch)
    return variant, launched


def _search(variant, backend, examples: int = 20):
    sized = dict(device_type=backend.device.type, max_dim=backend.max_dim)
    with Runner(RunSettings(backend=backend.name), backend) as runner:
        prop = runner.property(f"{variant.name}-fp16")
        cases = strategies.gemm_cases(variant, "fp16", **sized)
        prop.search(cases.map(lambda c: Example("reference", variant.name, c)), [], variant, max_examples=examples)
        return runner.stats.targets[f"{variant.name}-fp16"]


def test_a_configuration_out_of_resources_is_left_out_and_drawn_no_more(backend):
    variant, launched = _double({1: SHARED})
    stats = _search(variant, backend)
    assert launched.count(1) == 1 and len(launched) > 10  # met once, never drawn again
    assert stats.failures == 0
    assert runnable.blocked(variant, "fp16") == {1}
    label = ",".join(f"{k}={v}" for k, v in variant.configs_for(backend.device.type)[1].items())
    assert stats.not_runnable == {"config 1": f"config 1 ({label}) not runnable on "
                                              f"{backend.device_name}: shared memory, required 327680, hardware "
                                              "limit 232448"}


def test_any_other_error_of_a_configuration_stays_a_failure(backend):
    variant, _ = _double({1: ValueError("BLOCK_K must divide K")})
    with pytest.raises(LauncherRefused, match="BLOCK_K must divide K"):
        _search(variant, backend)
    assert runnable.blocked(variant, "fp16") == set()


def test_a_kernel_none_of_whose_configurations_runs_here_fails(backend):
    count = len(kernels.get("tiled").configs_for(backend.device.type))
    variant, _ = _double({i: SHARED for i in range(count)})
    with pytest.raises(LauncherRefused, match=f"none of the {count} configurations of tiled_double runs on"):
        _search(variant, backend)


# the template under @triton.autotune, its second configuration too big for the device, as a launch of it on a
# GPU with 227 KB of shared memory finds (the interpreter never runs out: a pre_hook raises Triton's error)
AUTOTUNED = edited(TILED, (
    Edit("from gemm_fuzz.kernels import contract\n", """from triton.runtime.errors import OutOfResources

from gemm_fuzz.kernels import contract


def too_big(nargs):
    raise OutOfResources(327680, 232448, "shared memory")
"""),
    Edit("@triton.jit\ndef _kernel(", """@triton.autotune(configs=[
    triton.Config({"BM": 16, "BN": 32, "BK": 16}, num_warps=1),
    triton.Config({"BM": 32, "BN": 16, "BK": 32}, num_warps=1, pre_hook=too_big),
    triton.Config({"BM": 16, "BN": 16, "BK": 16}, num_warps=2),
], key=["M", "N", "K"])
@triton.jit
def _kernel("""),
    Edit("_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](a, b, c, M, N, K, *a.stride(), *b.stride(),\n"
         "                                                      *c.stride(), BM=16, BN=16, BK=16)",
         "grid = lambda META: (triton.cdiv(M, META[\"BM\"]), triton.cdiv(N, META[\"BN\"]))  # noqa: E731\n"
         "    _kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride())"),
), "autotuned_too_big")


def test_an_autotuned_kernel_with_a_configuration_too_big_for_the_device_passes(pytester, monkeypatch):
    monkeypatch.setenv("CI", "1")
    pytester.makepyfile(my_kernel=AUTOTUNED)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "--gemm-backend", "interpreter",
                                           "-p", "no:cacheprovider", "-k", "float64 or metamorphic", timeout=900)
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    result.stdout.fnmatch_lines(["*GEMM coverage*", "user:my_kernel.matmul#*-fp16: config 1 (BM=32,BN=16,BK=32,"
                                 "num_warps=1,*) not runnable on CPU *: shared memory, required 327680, hardware "
                                 "limit 232448"])


def test_a_kernel_the_interpreter_cannot_run_is_skipped_saying_why_never_failed(pytester, backend):
    """tl.inline_asm_elementwise (fast dequantization kernels use it) has no interpreter implementation: every
    example is not runnable in the interpreter, so each test is skipped with that reason, never failed and
    never blamed on the launcher. On a GPU the same kernel compiles, runs and passes."""
    asm = edited(TILED, (Edit("acc.to(c.dtype.element_ty)",
                               'tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [acc], dtype=tl.float32, '
                               "is_pure=True, pack=1).to(c.dtype.element_ty)"),), "inline_asm")
    pytester.makepyfile(my_kernel=asm)
    result = pytester.runpytest_subprocess("--gemm-kernel", "my_kernel.py:matmul", "--gemm-backend", backend.name,
                                           "-k", "reference and fp16", "-p", "no:cacheprovider", "--gemm-repros", "",
                                           "-rs", timeout=900)
    out = " ".join(result.stdout.str().split())
    if backend.interpreted:
        result.assert_outcomes(skipped=1)
        assert "not runnable in the interpreter: NotImplementedError: inline_asm not supported" in out, out[-3000:]
        assert "launcher refused" not in out
    else:
        result.assert_outcomes(passed=1)
