"""The body of every repro script (properties/report/repros.py): run the recorded example, as it was
found, through the runner, and say what became of it.

    python repros/tiled-fp16-1a2b3c4d5e.py               # where it failed
    python repros/tiled-fp16-1a2b3c4d5e.py --backend interpreter
    python repros/tiled-fp16-1a2b3c4d5e.py --save DIR    # also its case, as launched, into DIR

Exit status 1 while the bug exists, 0 once it is fixed, 2 when it cannot run here (or cannot save).
`--save DIR` writes the example's case into DIR after the replay (properties/checks/saved_case.py: the
operands as launched, C as the kernel wrote it, the float64 reference and allowance, case.json), for
`gemm_fuzz.properties.load_case` and `run_case`; nothing is written outside DIR.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(data: dict, argv: list[str]) -> int:
    """Replay the example a script recorded (`data`, its RECORD) and report."""
    parser = argparse.ArgumentParser(description="Replay a failing GEMM example.")
    parser.add_argument("--backend", default=data["backend"], choices=("auto", "interpreter", "cuda"),
                        help=f"where to run it (default: {data['backend']}, where it failed)")
    parser.add_argument("--save", metavar="DIR", type=Path, default=None,
                        help="also save the case as it was launched into DIR (its operands, C as the kernel wrote "
                             "it, the float64 reference and allowance, case.json), for "
                             "gemm_fuzz.properties.load_case and run_case")
    args = parser.parse_args(argv)
    if args.save is not None and args.save.exists() and not args.save.is_dir():
        print(f"cannot save the case into {args.save}: it is a file; expected a folder (new, or one a save wrote "
              "before)", file=sys.stderr)
        return 2

    from gemm_fuzz.properties.launch import backends

    try:
        active = backends.activate(args.backend)
    except Exception as e:  # no GPU here, or triton imported too early
        print(f"cannot use backend {args.backend!r}: {e}", file=sys.stderr)
        return 2
    from gemm_fuzz.properties.checks import NothingJudged, replay
    from gemm_fuzz.properties.judge.failures import GemmFailure
    from gemm_fuzz.properties.launch import user_kernel
    from gemm_fuzz.properties.run.runner import Runner, RunSettings

    kernel = data.get("kernel")
    try:
        example, left_out = replay.admitted(data, active)
    except user_kernel.KernelSpecError as e:
        print(f"cannot load the kernel {e}", file=sys.stderr)
        return 2
    except NothingJudged as e:
        print(f"cannot run it here: {e}", file=sys.stderr)
        return 2
    if kernel:
        ref = user_kernel.loaded(example.variant)[1]
        if ref.digest != kernel["digest"]:
            print(f"note: {kernel['path']} changed since the failure was recorded (its content's hash was "
                  f"{kernel['digest']}, now {ref.digest})")
    if left_out:
        print(f"note: {left_out}")
    mode, timeout = replay.recorded_mode(data, active.name)
    script = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0].endswith(".py") else None
    settings = RunSettings(backend=active.name, mode=mode, timeout=timeout, kernel=kernel)
    print(f"{example.variant or 'agreement'} on {example.case.describe()}: {example.describe()} "
          f"({active.name} on {active.device_name}, {settings.describe()})")
    with Runner(settings, active) as runner:
        try:
            observed = runner.run_once(example)
        except GemmFailure as e:
            print(f"FAIL: {e.kind}\n{e}")
            return _saved(runner, example, data, args.save, script) or 1
        kind = "bit-exact" if observed.exact else f"within the bound (error/bound {observed.error_ratio:.3g})"
        print(f"PASS: {kind}; the bug no longer reproduces")
        return _saved(runner, example, data, args.save, script) or 0


def _saved(runner, example, data: dict, directory: Path | None, script: Path | None) -> int:
    """The case saved into `directory` (where --save asks), with the failure the script recorded: 0, or 2
    (saying why) when it cannot be saved there."""
    if directory is None:
        return 0
    from gemm_fuzz.properties.checks.saved_case import SavedCaseError

    try:
        path = runner.save_case(example, directory, data.get("failure"), repro=script)
    except SavedCaseError as e:
        print(f"cannot save the case: {e}", file=sys.stderr)
        return 2
    print(f"saved: {path} (gemm_fuzz.properties.load_case / run_case)")
    return 0
