"""The child side of `properties.run.isolation`: runs examples sent by a parent process, one JSON
line per request on stdin, one tagged JSON line per answer on stdout.

    python -m gemm_fuzz.properties.run.worker --backend cuda [--kernel JSON]   # {"spec": "/abs/my.py:f", ...}

A request: {"example": Example.to_dict(), "output": PATH or null}. The answer is "pass" with the
observation (and, when `output` is given, C's values saved there as a float64 .npy) or "fail" with
the typed failure, whole. A request {"ahead": [[VARIANT, GemmCase dict], ...]} starts compiling what
each launches (properties/launch/ahead.py) and is answered at once. A request {"refresh": true} (a
parked worker adopted by a new run: isolation.keep_workers) reloads the kernel if its files changed
and answers "ready" again. Anything else the kernel prints goes to stdout too; answers are the lines
that start with ANSWER.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ANSWER = "@@gemm-worker@@ "


def answer(payload: dict) -> None:
    sys.stdout.write(ANSWER + json.dumps(payload) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    from gemm_fuzz.properties.run import children

    children.die_with_parent()  # before anything slow: a parent killed meanwhile takes this process along
    parser = argparse.ArgumentParser(prog="python -m gemm_fuzz.properties.run.worker")
    parser.add_argument("--backend", default="auto", choices=("auto", "interpreter", "cuda"))
    parser.add_argument("--kernel", default=None, help="a user kernel to load, as JSON {spec, signature}")
    args = parser.parse_args(argv)

    from gemm_fuzz.properties.launch import backends

    backend = backends.activate(args.backend)
    import numpy as np

    from gemm_fuzz.properties import checks
    from gemm_fuzz.properties.checks.example import Example
    from gemm_fuzz.properties.judge.failures import GemmFailure, SuiteError
    from gemm_fuzz.properties.launch import ahead, targets, user_kernel
    from gemm_fuzz.properties.model.cases import GemmCase

    kernel = json.loads(args.kernel) if args.kernel else None

    def ready(load: bool) -> bool:
        """Load the kernel (where `load`) and answer 'ready'; False, the reason answered, if it cannot load."""
        if kernel and load:
            try:
                user_kernel.load(kernel["spec"], kernel.get("signature"))
            except user_kernel.KernelSpecError as e:
                answer({"status": "error", "message": f"cannot load the kernel {e}"})
                return False
        answer({"status": "ready", "backend": backend.name})
        return True

    if not ready(load=True):
        return 2
    if not backend.interpreted:  # while the parent readies its first example
        ahead.hash_triton_in_background()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if "refresh" in request:  # a new run of a long-lived parent (watch mode): the kernel as its files are now
            if not ready(load=user_kernel.refresh()):
                return 2
            continue
        if "ahead" in request:  # compile ahead (in threads) what these examples will launch
            count = sum(ahead.compile_ahead(targets.resolve(name), [GemmCase.from_dict(case)], backend)
                        for name, case in request["ahead"])
            answer({"status": "queued", "count": count})
            continue
        example = Example.from_dict(request["example"])
        try:
            observed = checks.execute(checks.get(example.check), example, targets.resolve, backend)
            if request.get("output"):
                np.save(request["output"], observed.values)
            answer({"status": "pass", "observation": observed.to_dict()})
        except GemmFailure as e:
            alive = context_alive(backend)
            answer({"status": "fail", "failure": e.to_dict(), "context_lost": not alive})
            if not alive:
                return 3  # a CUDA fault poisons this process's context: the parent starts a fresh worker
        except Exception as e:  # noqa: BLE001  the suite's own code (checks.execute classifies the kernel's)
            answer({"status": "fail", "failure": SuiteError.of(e).to_dict(), "context_lost": False})
    sys.stdout.flush()
    os._exit(0)  # the parent is done with it: no waiting for compilations ahead that no example needs


def context_alive(backend) -> bool:
    """After a failure on the GPU: can this process still use CUDA? (Faults like an illegal address
    are sticky: every later call fails.)"""
    if backend.name != "cuda":
        return True
    import torch

    try:
        torch.cuda.synchronize()
        torch.zeros(1, device=backend.device).add_(1).item()
    except Exception:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
