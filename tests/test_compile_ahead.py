"""Compiling ahead (properties/launch/ahead.py): on a GPU the kernels a run will launch compile in
parallel threads before the examples need them, and an example then runs the kernel compiled ahead;
a launcher that raises while compiling ahead costs nothing; on the interpreter nothing happens."""

import time

import pytest
import torch
import triton
from tiled_kernel import _kernel  # the tests' template kernel, right on every dtype

from gemm_fuzz import kernels
from gemm_fuzz.kernels.dtypes import ALL_DTYPES
from gemm_fuzz.kernels.registry import Variant
from gemm_fuzz.properties.judge import oracles
from gemm_fuzz.properties.launch import ahead, launching
from gemm_fuzz.properties.model.cases import GemmCase, materialize
from gemm_fuzz.properties.run.runner import Runner, RunSettings

CASES = [GemmCase(m, 24, 40, "fp16", "fp16", profile="small_ints", seed=m) for m in (1, 17, 32)]  # M: 1, other, 16


def _variant(raises: bool = False) -> Variant:
    def launch(a, b, c, config=None):
        if raises:
            raise ValueError("this launcher refuses every case")
        M, K = a.shape
        N = b.shape[1]
        _kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                                          BM=16, BN=16, BK=16)

    return Variant("ahead_test" + "_raises" * raises, launch, ALL_DTYPES, "ieee",
                   {"cpu": (dict(BM=16, BN=16, BK=16),), "cuda": (dict(BM=16, BN=16, BK=16),)}, "a test double")


@pytest.mark.interpreter
def test_the_interpreter_compiles_nothing_ahead(backend):
    assert ahead.compile_ahead(kernels.get("tiled"), CASES, backend) == 0
    with Runner(RunSettings(backend=backend.name, mode="worker"), backend) as runner:
        runner.compile_ahead((kernels.get("tiled"), case) for case in CASES)
        assert runner._compiler is None and not runner._workers  # no process was started for it


@pytest.mark.gpu
def test_a_kernel_compiled_ahead_is_the_one_the_example_runs(backend):
    """Each specialization is handed to Triton's async mode and enters the kernel's cache compiled, before
    any launch; the real launches then run those kernels, compiling nothing, and compute the product."""
    variant = _variant()
    cache = _kernel.device_caches[torch.cuda.current_device()][0]
    cache.clear()
    assert ahead.compile_ahead(variant, CASES, backend) == len(CASES)
    assert ahead.compile_ahead(variant, CASES, backend) == 0  # each case is handed over once
    deadline = time.monotonic() + 120
    while len([k for k in cache.values() if getattr(k, "future", None) is None]) < len(CASES):
        assert time.monotonic() < deadline, "the kernels compiled ahead never reached the kernel's cache"
        time.sleep(0.05)
    compiled = dict(cache)
    for case in CASES:
        ops = materialize(case, backend.device)
        launching.launch(variant, ops, backend)
        assert oracles.against_reference(ops, "ieee").exact
    assert cache == compiled  # one kernel per specialization, each the one compiled ahead


@pytest.mark.gpu
def test_a_launcher_that_raises_while_compiling_ahead_costs_nothing(backend):
    assert ahead.compile_ahead(_variant(raises=True), CASES[:1], backend) == 1  # its error is the example's to report


def test_the_hash_of_triton_itself_is_computed_before_the_first_lookup_needs_it():
    """A worker starts hashing Triton's compiler and library (triton_key, about 0.35 s) in a thread while
    its parent readies the first example: the first kernel lookup then finds it computed."""
    import threading

    from triton.runtime.cache import triton_key

    triton_key.cache_clear()
    ahead.hash_triton_in_background()
    for thread in threading.enumerate():
        if thread.name == "gemm-triton-key":
            thread.join(timeout=60)
    assert triton_key.cache_info().currsize == 1
