"""Standalone reproduction scripts, and the corpus they form.

When an example fails, its shrunk case is written to `repros/<variant>-<dtype>-<hash>.py`, a plain
Python script (no Hypothesis) that rebuilds the inputs, runs that kernel and prints the mismatch; it
exits 1 while the bug exists and 0 once it is fixed. The case also sits in the script as JSON, and the
scripts in the directory are replayed first on the next run (tests/test_corpus.py).

    python repros/tiled-fp16-1a2b3c4d.py            # the default backend for this machine
    python repros/tiled-fp16-1a2b3c4d.py --backend interpreter
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DIR = Path("repros")

_TEMPLATE = '''#!/usr/bin/env python3
"""Reproduces a failure found by the GEMM suite: {summary}

Run it with plain python: it rebuilds the inputs from the case below, runs the kernel under the same
checks as the suite and prints what is wrong. Exit status 1 while the bug exists, 0 once fixed.
"""
import sys

CASE = {case}
VARIANT = {variant!r}
KERNEL = {kernel!r}  # the user's kernel, PATH.py:FUNC, when VARIANT is user:FUNC
SIGNATURE = {signature!r}
BACKEND = {backend!r}  # where it failed; --backend overrides

if __name__ == "__main__":
    from properties.report.repros import replay_main

    sys.exit(replay_main(CASE, VARIANT, KERNEL, SIGNATURE, BACKEND, sys.argv[1:]))
'''

_FIELD = re.compile(r"^(CASE|VARIANT|KERNEL|SIGNATURE|BACKEND) = (.*?)(\s+#.*)?$", re.MULTILINE)


@dataclass(frozen=True)
class Repro:
    path: Path
    case: dict
    variant: str
    kernel: str | None
    signature: str | None
    backend: str


def name_for(variant: str, case_json: str) -> str:
    digest = hashlib.sha256(f"{variant}\n{case_json}".encode()).hexdigest()[:10]
    dtype = json.loads(case_json)["dtype"]
    return f"{re.sub(r'[^A-Za-z0-9_]+', '_', variant)}-{dtype}-{digest}.py"


def write(directory: Path, variant: str, case, backend: str, summary: str, kernel: str | None = None,
          signature: str | None = None) -> Path:
    """Write (or overwrite) the script for this failure; returns its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    case_json = case.to_json()
    path = directory / name_for(variant, case_json)
    first_line = summary.strip().splitlines()[0] if summary.strip() else "a failing case"
    path.write_text(_TEMPLATE.format(summary=first_line.replace('"""', "'''"), case=json.loads(case_json),
                                     variant=variant, kernel=kernel, signature=signature, backend=backend))
    path.chmod(0o755)
    return path


def read(path: Path) -> Repro:
    """The case and target of a repro script (parsed, not executed)."""
    fields = {m.group(1): m.group(2) for m in _FIELD.finditer(Path(path).read_text())}
    missing = {"CASE", "VARIANT", "BACKEND"} - set(fields)
    if missing:
        raise ValueError(f"{path} is not a repro script of this suite: it lacks {', '.join(sorted(missing))}")
    value = lambda name: ast.literal_eval(fields.get(name, "None"))  # noqa: E731
    return Repro(Path(path), value("CASE"), value("VARIANT"), value("KERNEL"), value("SIGNATURE"), value("BACKEND"))


def corpus(directory: Path = DEFAULT_DIR) -> list[Repro]:
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return [read(p) for p in sorted(directory.glob("*.py"))]


def replay_main(case: dict, variant: str, kernel: str | None, signature: str | None, backend: str,
                argv: list[str]) -> int:
    """Body of a repro script: run the case and report. 1 while failing, 0 when it passes, 2 on bad use."""
    parser = argparse.ArgumentParser(description="Replay a failing GEMM case.")
    parser.add_argument("--backend", default=backend, choices=("auto", "interpreter", "cuda"),
                        help=f"where to run it (default: {backend}, where it failed)")
    args = parser.parse_args(argv)

    from properties.run import backends

    try:
        active = backends.activate(args.backend)
    except Exception as e:  # no GPU here, or triton imported too early
        print(f"cannot use backend {args.backend!r}: {e}", file=sys.stderr)
        return 2
    from properties.judge import check
    from properties.model.cases import GemmCase
    from properties.run import targets

    try:
        target = targets.resolve(variant, kernel_spec=kernel, signature=signature)
        gemm_case = GemmCase.from_dict(case)
    except (KeyError, ValueError) as e:
        print(f"cannot rebuild the case: {e}", file=sys.stderr)
        return 2
    print(f"{variant} on {gemm_case.describe()} ({active.name} on {active.device_name})")
    try:
        observed = check.check(target, gemm_case, active)
    except AssertionError as e:
        print(f"FAIL: {e}")
        return 1
    except Exception as e:  # the kernel itself raised
        print(f"FAIL: {type(e).__name__}: {e}")
        return 1
    kind = "bit-exact" if observed.exact else f"within the bound (error/bound {observed.error_ratio:.3g})"
    print(f"PASS: {kind}; the bug no longer reproduces")
    return 0
