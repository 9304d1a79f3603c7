"""The child side of `properties.run.isolation`: runs examples sent by a parent process, one JSON line
per request on stdin, one tagged JSON line per answer on stdout.

    python -m properties.worker --backend cuda [--kernel PATH.py:FUNC]

A request: {"variant": NAME, "case": {...GemmCase...}, "output": PATH or null}. The answer is the
verdict of `properties.judge.check.check` ("pass" with the observation, or "fail" with the error type and
message) and, when `output` is given, C's values saved there as a float64 .npy. Anything else the
kernel prints goes to stdout too; answers are the lines that start with ANSWER.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

ANSWER = "@@gemm-worker@@ "


def answer(payload: dict) -> None:
    sys.stdout.write(ANSWER + json.dumps(payload) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m properties.worker")
    parser.add_argument("--backend", default="auto", choices=("auto", "interpreter", "cuda"))
    parser.add_argument("--kernel", default=None, help="a user kernel, PATH.py:FUNC or module:FUNC")
    args = parser.parse_args(argv)

    from properties.run import backends

    backend = backends.activate(args.backend)
    from properties.judge import check
    from properties.model.cases import GemmCase
    from properties.run import targets
    from reference.numpy_ref import to_float64

    answer({"status": "ready", "backend": backend.name})
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            variant = targets.resolve(request["variant"], kernel_spec=args.kernel)
            case = GemmCase.from_dict(request["case"])
            observed, ops = check.run(variant, case, backend)
            if request.get("output"):
                np.save(request["output"], to_float64(ops.c.view))
            answer({"status": "pass", "exact": observed.exact, "error_ratio": observed.error_ratio,
                    "torch_ratio": observed.torch_ratio})
        except AssertionError as e:  # an oracle's verdict (GemmMismatch, OutOfBoundsAccess)
            answer({"status": "fail", "error": type(e).__name__, "message": str(e)})
        except Exception as e:  # the kernel raised: still this example's failure, not the worker's
            alive = context_alive(backend)
            answer({"status": "fail", "error": type(e).__name__, "message": f"{type(e).__name__}: {e}",
                    "context_lost": not alive})
            if not alive:
                return 3  # a CUDA fault poisons this process's context: the parent starts a fresh worker
    return 0


def context_alive(backend) -> bool:
    """After a failure on the GPU: can this process still use CUDA? (Faults like an illegal address
    are sticky: every later CUDA call fails.)"""
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
