"""The interpreter fast path (properties/interpreter/fast.py) changes no verdict: the same examples
give the same C, bit for bit, and the same failures, with the same messages, with it on and off; its
start-up probe fails on a fast path that computes something else; the header names it, and
GEMM_INTERPRETER_FAST=0 turns it off. The long version: `python -m gemm_fuzz.properties.evaluation.verdict_identity`."""

import os
import subprocess
import sys

import pytest

from gemm_fuzz.properties.evaluation import verdict_identity
from gemm_fuzz.properties.interpreter import fast
from gemm_fuzz.properties.model.cases import Layout

pytestmark = pytest.mark.interpreter


PER_TARGET = 3  # derandomized draws per variant and dtype: the first is always the simplest case


def test_every_target_and_mutant_case_gives_the_same_verdict_either_way(backend):
    """Three drawn cases for every variant and dtype (the first is the simplest, 1x1x1 ones; the others
    vary shapes, layouts, value profiles, specials, program orders and configurations) and every
    mutant's cases, each judged with the fast path on and off."""
    from gemm_fuzz import kernels
    from gemm_fuzz.properties.launch import targets

    chosen = verdict_identity.examples(PER_TARGET, backend)  # every variant and dtype, and every mutant's cases
    assert len(chosen) > 100
    names = {v.name for v in kernels.variants()}
    drawn = [example for _, example in chosen if example.variant in names]
    wanted = {(t.variant.name, t.dtype) for t in targets.targets(kernels.variants()) if t.variant.runs_on(backend.name)}
    # every target gets cases beyond the simplest, and the drawn cases do vary what the fast path could get wrong
    assert {(e.variant, e.case.dtype) for e in drawn if e.case.M * e.case.N * e.case.K > 1} == wanted
    assert any(e.case.a != Layout() or e.case.b != Layout() or e.case.c != Layout() for e in drawn)
    assert {e.case.profile for e in drawn} - {"ones"} and any(e.case.order for e in drawn)
    assert any(e.case.specials for e in drawn) and any(e.case.config for e in drawn)
    assert verdict_identity.differences(chosen, backend) == []


def test_mutation_hunts_find_and_shrink_the_same_either_way(backend):
    # split-K's atomics run as cooperative programs in drawn orders; the K-mask bug is a sanitizer verdict
    assert verdict_identity.hunt_differences(("split_k_into_c", "tiled_k_mask_off_by_one"), backend) == []


def test_probe_fails_on_a_fast_path_that_ignores_a_constant(backend, monkeypatch):
    """A recipe key that does not tell integer constants apart replays `k + offs_k` with the first k."""
    real_key = fast._key

    def careless_key(value, inputs):
        return ("int",) if type(value) is int else real_key(value, inputs)

    with fast.switched(False):
        with monkeypatch.context() as patched:
            patched.setattr(fast, "_key", careless_key)
            with pytest.raises(fast.FastInterpreterError, match="differs from the plain interpreter's"):
                fast._install()
        assert not fast.installed()


def test_header_names_the_fast_path(backend):
    line = next(line for line in backend.header(verbose=True) if line.startswith("gemm interpreter fast path:"))
    assert ("on (" in line) == fast.enabled_by_environment()


def test_environment_turns_it_off():
    code = ("from gemm_fuzz.properties.launch import backends\nfrom gemm_fuzz.properties.interpreter import fast\n"
            "b = backends.activate('interpreter')\n"
            "print(fast.installed(), [l for l in b.header(verbose=True) if 'fast' in l])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "GEMM_INTERPRETER_FAST": "0", "GEMM_BACKEND": "interpreter"})
    assert run.returncode == 0, run.stderr
    assert "False ['gemm interpreter fast path: off (GEMM_INTERPRETER_FAST=0)']" in run.stdout
