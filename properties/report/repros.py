"""Standalone reproduction scripts, and the corpus they form.

Every failing property leaves `repros/<variant>-<dtype>-<hash>.py`, a plain Python script (no
Hypothesis) that records everything that found the failure: the example (check, variant, case and
the check's drawn parameters), the backend, the mode (in a worker, under compute-sanitizer), the
per-example timeout and, for a user's kernel, its absolute path, function and a hash of its file.
It replays through the same runner as the suite, from any directory, and exits 1 while the bug
exists, 0 once it is fixed, 2 when it cannot run here.

    python repros/tiled-fp16-1a2b3c4d5e.py               # where it failed
    python repros/tiled-fp16-1a2b3c4d5e.py --backend interpreter

The next pytest run replays the scripts of the kernels it tests first (properties/checks/replay.py);
a script's own body is properties/run/repro_script.py.
"""

from __future__ import annotations

import ast
import hashlib
import pprint
import re
from dataclasses import dataclass
from pathlib import Path

from gemm_fuzz.properties import checks

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
    from gemm_fuzz.properties.run.repro_script import main

    sys.exit(main(RECORD, sys.argv[1:]))
'''


@dataclass(frozen=True)
class Repro:
    path: Path
    record: dict

    @property
    def example(self):
        from gemm_fuzz.properties.checks.example import Example

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
    check = "" if example["check"] == checks.REFERENCE.name else f"{example['check']}-"
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
