"""The pytest plugin (registered through the `pytest11` entry point as `gemm`).

It stays inert in other projects: it acts only where `gemm_suite = true` is set in the pytest
configuration or a `--gemm-*` option is given. Then, before anything imports the kernels, it gives
each xdist worker its own GPU and chooses the backend; it loads a Hypothesis profile, parametrizes
the tests that ask for `target`, `agreement_group` or `corpus_case`, writes a repro script for each
shrunk failure, and ends with a table of what every target's examples measured.
"""

from __future__ import annotations

import fnmatch
import os
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from properties.run import hypothesis_profiles


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gemm", "Triton GEMM differential testing")
    group.addoption("--gemm-backend", default=None, choices=("auto", "interpreter", "cuda"),
                    help="run kernels through Triton's CPU interpreter or compiled on a CUDA GPU "
                         "(default auto: cuda when a GPU is present, else the interpreter)")
    group.addoption("--gemm-dtype", action="append", default=None, metavar="DTYPE",
                    help="test only these input dtypes (repeatable or comma-separated): "
                         "fp16, bf16, fp32, tf32, fp8 (fp8e4m3, fp8e5m2), int8")
    group.addoption("--gemm-variant", action="append", default=None, metavar="GLOB",
                    help="test only variants whose name matches (repeatable, shell glob)")
    group.addoption("--gemm-kernel", default=None, metavar="PATH.py:FUNC",
                    help="test your own kernel FUNC(a, b, c) (or module:FUNC) with the whole battery; "
                         "the built-in variants serve as agreement peers")
    group.addoption("--gemm-kernel-signature", default=None, choices=("plain", "leetgpu"),
                    help="plain: FUNC(a, b, c); leetgpu: solve(a, b, c, M, N, K) with A M x N, B N x K, "
                         "contiguous (default: the function's `signature` attribute, else plain)")
    group.addoption("--gemm-isolate", default="auto", choices=("auto", "on", "off"),
                    help="run each example in a worker process, so a crash or hang costs one test "
                         "(auto: on for cuda, off for the interpreter, whose sanitizer refuses bad stores)")
    group.addoption("--gemm-sanitize", action="store_true",
                    help="cuda: run the worker under compute-sanitizer memcheck with PyTorch's caching "
                         "allocator off; any invalid access fails its example")
    group.addoption("--gemm-timeout", type=float, default=300.0, metavar="SECONDS",
                    help="isolated examples: fail one that takes longer (a hanging kernel); default 300")
    group.addoption("--gemm-repros", default="repros", metavar="DIR",
                    help="where repro scripts of shrunk failures are written and replayed from "
                         "(default repros; '' to write none)")
    group.addoption("--gemm-failure-log", default=None, metavar="FILE",
                    help="append each failing test's report to FILE as soon as it fails (for runs that may "
                         "be cut short)")
    group.addoption("--gemm-order-seed", type=int, default=None, metavar="N",
                    help="run the tests in a random order (seed N), to show no test depends on another")
    parser.addini("gemm_suite", type="bool", default=False,
                  help="activate the GEMM suite's backend selection and parametrization")


def _enabled(config: pytest.Config) -> bool:
    ns = config.known_args_namespace if hasattr(config, "known_args_namespace") else config.option
    given = any(getattr(ns, name, None) for name in ("gemm_backend", "gemm_dtype", "gemm_variant", "gemm_kernel"))
    return given or bool(config.getini("gemm_suite"))


def assign_gpu_for_xdist_worker(environ=os.environ) -> str | None:
    """Under xdist, worker gwN sees only GPU N mod count (CUDA_VISIBLE_DEVICES), set before CUDA
    initialises. Returns the device chosen, or None when not a worker or no GPU is listed."""
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return None
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        devices = [d.strip() for d in visible.split(",") if d.strip()]
    else:
        try:
            listing = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                                     capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        devices = [line.strip() for line in listing.splitlines() if line.strip()]
    if not devices:
        return None
    chosen = devices[int(worker[2:]) % len(devices)]
    environ["CUDA_VISIBLE_DEVICES"] = chosen
    return chosen


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser, args) -> None:
    # before any conftest or test module can import triton, torch.cuda or the kernels
    if not _enabled(early_config):
        return
    ns = early_config.known_args_namespace
    if ns.gemm_kernel and not ns.file_or_dir:
        args.append(str(Path(__file__).parent / "battery"))  # test the user's kernel with the battery
    requested = ns.gemm_backend or "auto"
    if requested != "interpreter":
        assign_gpu_for_xdist_worker()
    from properties.run import backends

    backends.activate(requested)


MARKERS = (
    "gpu: needs a CUDA GPU (compiled kernels); skipped with a reason on the interpreter",
    "interpreter: needs Triton's CPU interpreter; skipped with a reason on a GPU",
    "slow: long-running; deselect with -m 'not slow'",
    "large: operands past 2**31 elements (GPU only)",
)


_CONFIG: pytest.Config | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _CONFIG
    _CONFIG = config
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    if not _enabled(config):
        return
    from properties.run import backends, isolation, targets

    backend = backends.activate(config.getoption("gemm_backend") or "auto")
    config._gemm_backend = backend
    try:
        config._gemm_selectors = targets.parse_selectors(config.getoption("gemm_dtype"))
    except ValueError as e:
        raise pytest.UsageError(f"--gemm-dtype: {e}") from None
    globs = config.getoption("gemm_variant")
    if globs:
        import kernels

        names = [v.name for v in kernels.variants()]
        unmatched = [g for g in globs if not any(fnmatch.fnmatchcase(n, g) for n in names)]
        if unmatched:
            raise pytest.UsageError(
                f"--gemm-variant {', '.join(unmatched)} matches no variant; registered: {', '.join(names)}"
            )
    config._gemm_globs = globs
    spec = config.getoption("gemm_kernel")
    config._gemm_user = None
    if spec:
        from properties.run import user_kernel

        try:
            config._gemm_user = user_kernel.load(spec, config.getoption("gemm_kernel_signature"))
        except user_kernel.KernelSpecError as e:
            raise pytest.UsageError(str(e)) from None
    if config.getoption("gemm_sanitize") and backend.name != "cuda":
        raise pytest.UsageError("--gemm-sanitize runs compute-sanitizer on compiled kernels: it needs the cuda "
                                "backend (the interpreter has its own exact checker, always on)")
    if config.getoption("gemm_timeout") <= 0:
        raise pytest.UsageError(f"--gemm-timeout must be positive, got {config.getoption('gemm_timeout')}")
    isolate = {"on": True, "off": False, "auto": backend.name == "cuda"}[config.getoption("gemm_isolate")]
    isolation.configure(isolate=isolate, sanitize=config.getoption("gemm_sanitize"),
                        timeout=config.getoption("gemm_timeout"), kernel_spec=spec)
    repros = config.getoption("gemm_repros")
    config._gemm_repros = (Path(repros) if Path(repros).is_absolute() else config.rootpath / repros) if repros else None
    config._gemm_worker_stats = {}
    # NaN, Inf and overflowing inputs are drawn on purpose: numpy saying so inside the interpreter is noise
    for message in ("invalid value encountered", "overflow encountered"):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:RuntimeWarning")
    if config.getoption("hypothesis_profile", None) is None:
        hypothesis_profiles.load_default()


def pytest_report_header(config: pytest.Config) -> list[str]:
    backend = getattr(config, "_gemm_backend", None)
    if backend is None:
        return []
    from hypothesis import settings as hs

    from properties.run import isolation

    mode = isolation.settings()
    lines = backend.header() + [
        f"gemm hypothesis profile: {hs.get_current_profile_name()}",
        "gemm examples: " + ("in worker processes" if mode["isolate"] else "in this process")
        + (", under compute-sanitizer memcheck (caching allocator off)" if mode["sanitize"] else ""),
    ]
    if config._gemm_user is not None:
        lines.append(f"gemm kernel under test: {config._gemm_user.origin} ({config._gemm_user.name})")
    return lines


@dataclass(frozen=True)
class AgreementGroup:
    dtype: str
    focus: object = None  # a user's Variant: only its disagreement fails the test

    @property
    def id(self) -> str:
        return self.dtype if self.focus is None else f"{self.focus.name}-{self.dtype}"

    def __repr__(self) -> str:
        return f"AgreementGroup({self.id})"

    def _repr_pretty_(self, printer, cycle) -> None:  # how Hypothesis prints a falsifying example
        printer.text(repr(self))


def _targets(config: pytest.Config):
    import kernels
    from properties.run import targets

    chosen = [config._gemm_user] if config._gemm_user is not None else kernels.variants()
    return targets.targets(chosen, config._gemm_selectors, None if config._gemm_user else config._gemm_globs)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    if not hasattr(config, "_gemm_backend"):
        return
    backend = config._gemm_backend
    if "target" in metafunc.fixturenames:
        params = []
        for t in _targets(config):
            marks = []
            if not t.variant.runs_on(backend.name):
                marks.append(pytest.mark.skip(reason=f"{t.variant.name} needs a CUDA GPU (compiled kernels); "
                                                     f"the backend is {backend.name}"))
            params.append(pytest.param(t, id=t.id, marks=marks))
        metafunc.parametrize("target", params)
    if "agreement_group" in metafunc.fixturenames:
        if config._gemm_user is not None:
            groups = [AgreementGroup(t.dtype, config._gemm_user) for t in _targets(config)]
        else:
            groups = [AgreementGroup(s) for s in config._gemm_selectors if s != "tf32"]  # fp32 includes tf32
        metafunc.parametrize("agreement_group", [pytest.param(g, id=g.id) for g in groups])
    if "corpus_case" in metafunc.fixturenames:
        from properties.report import repros

        found = repros.corpus(config._gemm_repros) if config._gemm_repros else []
        params = [pytest.param(r, id=r.path.stem) for r in found]
        if not params:
            params = [pytest.param(None, id="empty", marks=pytest.mark.skip(
                reason=f"no repro scripts in {config._gemm_repros} to replay"))]
        metafunc.parametrize("corpus_case", params)


_BATTERY = ("target", "agreement_group", "corpus_case")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    backend = getattr(config, "_gemm_backend", None)
    if backend is None:
        return
    if config._gemm_user is not None:
        # a user's kernel: run the battery on it alone; the suite's own tests are not its business
        kept = [i for i in items if any(f in getattr(i, "fixturenames", ()) for f in _BATTERY)]
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept
    for item in items:
        if item.get_closest_marker("gpu") and backend.name != "cuda":
            reason = f"needs a CUDA GPU (compiled kernels); the backend is {backend.name}"
            item.add_marker(pytest.mark.skip(reason=reason))
        if item.get_closest_marker("interpreter") and backend.name != "interpreter":
            item.add_marker(pytest.mark.skip(reason=f"needs Triton's interpreter; the backend is {backend.name}"))
    seed = config.getoption("gemm_order_seed")
    if seed is not None:
        random.Random(seed).shuffle(items)
    # past failures first, then the main property (it writes the repro scripts), then the rest
    def rank(item) -> int:
        if "corpus_case" in getattr(item, "fixturenames", ()):
            return 0
        return 1 if item.path.name == "test_properties.py" else 2

    items.sort(key=rank)


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest):
    """The active backend (device, name, strategy limits)."""
    b = getattr(request.config, "_gemm_backend", None)
    if b is None:
        pytest.skip("the GEMM suite is not active (set gemm_suite = true or pass --gemm-backend)")
    return b


@pytest.fixture(scope="session")
def examine(request: pytest.FixtureRequest, backend):
    """examine(target, case) -> Observation: run one example (in a worker when isolating), record it
    for the summary, and on the final, shrunk failure write its repro script."""
    from hypothesis import note
    from hypothesis.control import current_build_context

    from properties.report import repros, stats
    from properties.run import isolation

    config = request.config

    def run(target, case):
        try:
            observed = isolation.run_example(target.variant, case, backend)
        except Exception as error:
            stats.record_failure(target.id, error)
            if config._gemm_repros is not None and getattr(current_build_context(), "is_final", True):
                path = repros.write(config._gemm_repros, target.variant.name, case, backend.name, str(error),
                                   config.getoption("gemm_kernel"), config.getoption("gemm_kernel_signature"))
                note(f"repro script: python {path}")
            raise
        stats.record_pass(target.id, observed)
        return observed

    return run


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = getattr(_CONFIG, "option", None) and _CONFIG.option.gemm_failure_log
    if path and report.failed and not hasattr(_CONFIG, "workerinput"):  # the controller (or a plain run) writes
        with open(path, "a") as log:
            errors = [line for line in report.longreprtext.splitlines() if line.startswith("E ")]
            log.write(f"=== {report.nodeid} ({report.when})\n" + "\n".join(errors[:80]) + "\n\n")


def pytest_sessionfinish(session: pytest.Session) -> None:
    from properties.report import stats

    if hasattr(session.config, "workeroutput"):  # an xdist worker: hand the numbers to the controller
        session.config.workeroutput["gemm_stats"] = stats.snapshot()


def pytest_testnodedown(node, error) -> None:
    from properties.report import stats

    data = getattr(node, "workeroutput", {}).get("gemm_stats")
    if data:
        stats.merge(node.config._gemm_worker_stats, data)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if not hasattr(config, "_gemm_backend"):
        return
    from properties.report import stats

    merged: dict = {}
    stats.merge(merged, stats.snapshot())
    stats.merge(merged, {k: vars(v) for k, v in config._gemm_worker_stats.items()})
    if not merged:
        return
    terminalreporter.section("GEMM targets: examples, failures, worst error / bound")
    for line in stats.table(merged):
        terminalreporter.write_line(line)
