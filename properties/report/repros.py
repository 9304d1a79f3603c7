"""Standalone reproduction scripts, and the corpus they form.

Every failing property leaves `repros/<variant>-<dtype>-<hash>.py`, a plain Python script (no
Hypothesis) that records everything that found the failure: the example (check, variant, case and
the check's drawn parameters), the backend, the mode (in a worker, under compute-sanitizer), the
per-example timeout and, for a user's kernel, its absolute path, function and a hash of its file.
It replays through the same runner as the suite, from any directory, and exits 1 while the bug
exists, 0 once it is fixed, 2 when it cannot run here.

    python repros/tiled-fp16-1a2b3c4d5e.py               # where it failed
    python repros/tiled-fp16-1a2b3c4d5e.py --backend interpreter

The next pytest run replays the scripts of the kernels and dtypes it tests first
(properties/battery/test_corpus.py).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import pprint
import re
import sys
from dataclasses import dataclass
from pathlib import Path

_TEMPLATE = '''#!/usr/bin/env python3
"""Reproduces a failure found by the GEMM suite:
{summary}

Run it with plain python, from anywhere: it rebuilds the inputs from the record below, runs the
kernel under the same checks and in the same way as the suite did, and prints what is wrong.
Exit status 1 while the bug exists, 0 once it is fixed, 2 if it cannot run here.
"""
import sys

RECORD = {record}

if __name__ == "__main__":
    from gemm_fuzz.properties.report.repros import replay_main

    sys.exit(replay_main(RECORD, sys.argv[1:]))
'''


@dataclass(frozen=True)
class Repro:
    path: Path
    record: dict

    @property
    def example(self):
        from gemm_fuzz.properties.run.examples import Example

        return Example.from_dict(self.record["example"])


def record(example, settings, failure) -> dict:
    """Everything a failure's replay needs (see the module docstring)."""
    return {
        "example": example.to_dict(),
        "backend": settings.backend,
        "mode": settings.mode,
        "timeout": settings.timeout,
        "kernel": settings.kernel,  # None, or {spec, signature, path, digest}
        "failure": {"type": type(failure).__name__, "kind": failure.kind, "headline": failure.headline()},
    }


def name_for(data: dict) -> str:
    example = data["example"]
    digest = hashlib.sha256(repr(sorted(example.items())).encode()).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9_]+", "_", example["variant"] or "agreement").strip("_")
    check = "" if example["check"] == "reference" else f"{example['check']}-"
    return f"{slug}-{check}{example['case']['dtype']}-{digest}.py"


def write(directory: Path, example, settings, failure) -> Path:
    """Write (or overwrite) the script for this failure; returns its absolute path."""
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    data = record(example, settings, failure)
    path = directory / name_for(data)
    summary = "\n".join(str(failure).splitlines()[:6]).replace('"""', "'''").replace("\\", "\\\\")
    path.write_text(_TEMPLATE.format(summary=summary, record=pprint.pformat(data, width=110, sort_dicts=False)))
    path.chmod(0o755)
    return path


def read(path: Path) -> Repro:
    """The record of a repro script (parsed, not executed)."""
    tree = ast.parse(Path(path).read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "RECORD" for t in node.targets):
            data = ast.literal_eval(node.value)
            if isinstance(data, dict) and {"example", "backend", "mode"} <= set(data):
                return Repro(Path(path), data)
    raise ValueError(f"{path} is not a repro script of this suite: it has no RECORD with an example")


def corpus(directory: Path) -> tuple[list[Repro], list[Path]]:
    """The scripts in a directory, and the files there that are not readable repro scripts."""
    directory = Path(directory)
    if not directory.is_dir():
        return [], []
    found, unreadable = [], []
    for p in sorted(directory.glob("*.py")):
        try:
            found.append(read(p))
        except (ValueError, SyntaxError):
            unreadable.append(p)
    return found, unreadable


def replay_main(data: dict, argv: list[str]) -> int:
    """Body of a repro script: run the recorded example and report."""
    parser = argparse.ArgumentParser(description="Replay a failing GEMM example.")
    parser.add_argument("--backend", default=data["backend"], choices=("auto", "interpreter", "cuda"),
                        help=f"where to run it (default: {data['backend']}, where it failed)")
    args = parser.parse_args(argv)

    from gemm_fuzz.properties.run import backends

    try:
        active = backends.activate(args.backend)
    except Exception as e:  # no GPU here, or triton imported too early
        print(f"cannot use backend {args.backend!r}: {e}", file=sys.stderr)
        return 2
    from gemm_fuzz.properties.judge.failures import GemmFailure
    from gemm_fuzz.properties.run import runner as runner_module
    from gemm_fuzz.properties.run import user_kernel
    from gemm_fuzz.properties.run.examples import Example

    kernel = data.get("kernel")
    if kernel:
        try:
            variant = user_kernel.load(kernel["spec"], kernel.get("signature"))
        except user_kernel.KernelSpecError as e:
            print(f"cannot load the kernel: {e}", file=sys.stderr)
            return 2
        ref = user_kernel.loaded(variant.name)[1]
        if ref.digest != kernel["digest"]:
            print(f"note: {kernel['path']} changed since the failure was recorded (#{kernel['digest']}, now "
                  f"#{ref.digest}, as the kernel's name shows it)")
    example = Example.from_dict(data["example"])
    if kernel:
        example = runner_module.with_variant(example, data["example"]["variant"], variant.name)
    settings = runner_module.RunSettings.for_replay(data, active.name)
    print(f"{example.variant or 'agreement'} on {example.case.describe()}: {example.describe()} "
          f"({active.name} on {active.device_name}, {settings.describe()})")
    with runner_module.Runner(settings, active) as runner:
        try:
            observed = runner.run_once(example)
        except GemmFailure as e:
            print(f"FAIL: {e.kind}\n{e}")
            return 1
    kind = "bit-exact" if observed.exact else f"within the bound (error/bound {observed.error_ratio:.3g})"
    print(f"PASS: {kind}; the bug no longer reproduces")
    return 0
