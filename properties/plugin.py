"""The pytest plugin (registered through the `pytest11` entry point as `gemm`).

It stays inert in other projects: it acts only where `gemm_suite = true` is set in the pytest
configuration or a `--gemm-*` option is given. Then, before anything imports the kernels, it gives
each xdist worker its own GPU and chooses the backend; it turns the options into one `RunSettings`
(kept in `config.stash`), loads a Hypothesis profile, parametrizes the tests that ask for `target`,
`agreement_group` or `corpus_case`, gives each test a `gemm` fixture through which every example runs
(properties.run.runner), shortens a failing example's report to what was wrong and how to replay it,
and ends with each distinct bug once (properties/report/bugs.py) and a table of what every target's
examples measured.

A bad invocation is a one-line usage error (exit status 4), never an internal error.
"""

from __future__ import annotations

import fnmatch
import os
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

SETTINGS = pytest.StashKey["object"]()  # RunSettings
SELECTION = pytest.StashKey["object"]()  # _Selection
WORKER_STATS = pytest.StashKey[dict]()


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
                         "contiguous (default: its contract's signature, else plain)")
    group.addoption("--gemm-isolate", default="auto", choices=("auto", "on", "off"),
                    help="run each example in a worker process, so a crash or a hang costs one example "
                         "(auto: on, except for the built-in variants in the interpreter)")
    group.addoption("--gemm-sanitize", action="store_true",
                    help="cuda: run the worker under compute-sanitizer memcheck with PyTorch's caching "
                         "allocator off; any invalid access fails its example")
    group.addoption("--gemm-racecheck", action="store_true",
                    help="cuda: run the worker under compute-sanitizer racecheck; a shared-memory hazard between "
                         "threads of a block fails its example (global-memory races between programs are the "
                         "interpreter's race detector's: it runs on every CPU example)")
    group.addoption("--gemm-timeout", type=float, default=120.0, metavar="SECONDS",
                    help="examples in a worker: fail one that takes longer (a hanging kernel); default 120")
    group.addoption("--gemm-repros", default="repros", metavar="DIR",
                    help="where repro scripts of failures are written and replayed from (default repros; "
                         "'' to write none)")
    group.addoption("--gemm-save-cases", default=None, metavar="DIR",
                    help="save each reported failure's case (its operands as launched, C as written, the float64 "
                         "reference and allowance) in DIR/<its repro script's name>/, for "
                         "gemm_fuzz.properties.load_case and run_case (a relative DIR: under the rootdir, as "
                         "--gemm-repros)")
    group.addoption("--gemm-order-seed", type=int, default=None, metavar="N",
                    help="run the tests in a random order (seed N), to show no test depends on another")
    parser.addini("gemm_suite", type="bool", default=False,
                  help="activate the GEMM suite's backend selection and parametrization")


def _enabled(config: pytest.Config) -> bool:
    ns = config.known_args_namespace if hasattr(config, "known_args_namespace") else config.option
    given = any(getattr(ns, name, None) for name in ("gemm_backend", "gemm_dtype", "gemm_variant", "gemm_kernel"))
    return given or bool(config.getini("gemm_suite"))


def visible_gpus(environ=os.environ) -> list[str]:
    """The GPUs this process may use (CUDA_VISIBLE_DEVICES, else nvidia-smi's list), without CUDA."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    try:
        listing = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in listing.splitlines() if line.strip()]


def assign_gpu_for_xdist_worker(environ=os.environ) -> str | None:
    """Under xdist, worker gwN sees only GPU N mod count (CUDA_VISIBLE_DEVICES), set before CUDA
    initialises. Returns the device chosen, or None when not a worker or no GPU is listed."""
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return None
    devices = visible_gpus(environ)
    if not devices:
        return None
    chosen = devices[int(worker[2:]) % len(devices)]
    environ["CUDA_VISIBLE_DEVICES"] = chosen
    return chosen


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # xdist's hook: unknown where xdist is not installed
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` for a user's kernel on GPUs: one xdist worker per GPU, and none (this process) with one.
    A kernel's battery on one GPU is bound by compiling and by starting processes; more xdist workers
    each start their own example worker, compiling process and CUDA context, which only adds to both
    (measured on an H100: README's kernel took 13.7 s in one process, 31.3 s with -n 8). Elsewhere
    (the interpreter, the built-in variants) xdist's own choice, one worker per core, stands."""
    return _auto_workers(config.option) if _enabled(config) else None


def _auto_workers(ns) -> int | None:
    """What `-n auto` becomes (see pytest_xdist_auto_num_workers); None: xdist's own choice."""
    if not ns.gemm_kernel or os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    backend = ns.gemm_backend or "auto"
    if backend == "interpreter" or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return None
    gpus = visible_gpus()
    if not gpus:
        return None
    return len(gpus) if len(gpus) > 1 else 0


# --- the battery is collected by its module names ----------------------------------------------------
# pytest imports a test file by putting the first folder above it that is not a package on sys.path.
# For the battery, inside gemm_fuzz (a namespace package), that folder is the one holding kernels/,
# properties/ and reference/ (site-packages/gemm_fuzz, or this repository in an editable install), which
# would make those names importable at the top level and hide a user's own `kernels` package. So the
# battery's folders are plain directories to pytest and its modules are imported as
# gemm_fuzz.properties.battery.<name>: nothing is added to sys.path.
PROPERTIES = Path(__file__).parent
BATTERY = PROPERTIES / "battery"


class _BatteryModule(pytest.Module):
    def _getobj(self):
        import importlib

        return importlib.import_module(f"{__package__}.battery.{self.path.stem}")


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent):
    if path in (PROPERTIES, BATTERY):  # not a pytest Package, whose __init__ pytest would import by path
        return pytest.Dir.from_parent(parent, path=path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent):
    if module_path.parent == BATTERY:
        return _BatteryModule.from_parent(parent, path=module_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser, args) -> None:
    # before any conftest or test module can import triton, torch.cuda or the kernels
    if not _enabled(early_config):
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker of a controller killed by SIGKILL ends too
        from gemm_fuzz.properties.run import children

        children.die_with_parent(always=True)
    ns = early_config.known_args_namespace
    if ns.gemm_kernel and str(BATTERY) not in args:
        args.append(str(BATTERY))  # the user's kernel gets the battery (besides any tests they name)
    requested = ns.gemm_backend or "auto"
    if requested != "interpreter":
        assign_gpu_for_xdist_worker()
    _prestart_workers(ns, requested)
    from gemm_fuzz.properties.launch import backends

    try:
        backends.activate(requested)
    except RuntimeError as e:  # kernels.mode.BackendError (importing it first would choose the backend)
        raise pytest.UsageError(f"--gemm-backend {requested}: {e}") from None


def _prestart_workers(ns, requested: str) -> None:
    """Start the worker processes this process will use now, before it imports torch and Triton, so that
    their start-up (seconds each) overlaps its own: the worker of a user's kernel or of a GPU run, and on
    a GPU the one that compiles ahead and the interpreter worker the compiled-against-interpreted test
    uses. Not in an xdist controller (it runs no test) nor under compute-sanitizer (its worker is another
    process)."""
    from gemm_fuzz.properties.launch import kernel_spec
    from gemm_fuzz.properties.run import isolation

    workers = getattr(ns, "numprocesses", None)
    if workers in ("auto", "logical"):  # xdist resolves it later, through pytest_xdist_auto_num_workers
        found = _auto_workers(ns)
        workers = workers if found is None else found
    controller = workers and not os.environ.get("PYTEST_XDIST_WORKER")
    if controller or ns.gemm_sanitize or ns.gemm_racecheck or ns.gemm_isolate == "off" or requested == "interpreter" \
            and not ns.gemm_kernel:
        return
    if not ns.gemm_kernel and requested != "cuda" and ns.gemm_isolate != "on":
        return  # built-in variants with the backend still unknown: perhaps the interpreter, in this process
    try:
        kernel = {"spec": kernel_spec.canonical(ns.gemm_kernel), "signature": ns.gemm_kernel_signature} \
            if ns.gemm_kernel else None
    except ValueError:
        return  # a malformed --gemm-kernel: pytest_configure reports it
    isolation.prestart(requested, kernel)
    if requested == "cuda":
        isolation.prestart(requested, kernel)  # compiles ahead (properties/launch/ahead.py)
        isolation.prestart("interpreter", kernel)


MARKERS = (
    "gpu: needs a CUDA GPU (compiled kernels); skipped with a reason on the interpreter",
    "interpreter: needs Triton's CPU interpreter; skipped with a reason on a GPU",
    "slow: long-running; deselect with -m 'not slow'",
    "large: operands past 2**31 elements (GPU only)",
)


@dataclass
class _Selection:
    backend: object
    selectors: tuple[str, ...]
    globs: list[str] | None
    user: object  # the user's Variant, or None
    corpus: list  # the repro scripts this run replays
    corpus_left_out: int


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    if not _enabled(config):
        return
    # NaN, Inf and overflowing inputs (specials, near_overflow) make numpy say so inside the
    # interpreter: expected, in a user's project as in this one
    for message in ("overflow encountered", "invalid value encountered"):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:RuntimeWarning")
    from gemm_fuzz.properties.launch import backends, targets, user_kernel
    from gemm_fuzz.properties.run import hypothesis_profiles, runner

    backend = backends.activate(config.getoption("gemm_backend") or "auto")
    profile = config.getoption("hypothesis_profile", None)
    if profile is not None:
        from hypothesis import settings as hypothesis_settings
        from hypothesis.errors import InvalidArgument

        try:
            hypothesis_settings.get_profile(profile)
        except InvalidArgument:
            raise pytest.UsageError(f"--hypothesis-profile {profile}: no such profile; the suite's are "
                                    f"{', '.join(hypothesis_profiles.PROFILES)}") from None
    try:
        selectors = targets.parse_selectors(config.getoption("gemm_dtype"))
    except ValueError as e:
        raise pytest.UsageError(f"--gemm-dtype: {e}") from None
    globs = config.getoption("gemm_variant")
    if globs:
        from gemm_fuzz import kernels

        names = [v.name for v in kernels.variants()]
        unmatched = [g for g in globs if not any(fnmatch.fnmatchcase(n, g) for n in names)]
        if unmatched:
            raise pytest.UsageError(
                f"--gemm-variant {', '.join(unmatched)} matches no variant; registered: {', '.join(names)}")
    spec = config.getoption("gemm_kernel")
    user, kernel = None, None
    if spec:
        try:
            user = user_kernel.load(spec, config.getoption("gemm_kernel_signature"))
        except user_kernel.KernelSpecError as e:
            raise pytest.UsageError(f"--gemm-kernel {e}") from None
        ref = user_kernel.loaded(user.name)[1]
        kernel = ref.to_dict()
    sanitize, racecheck = config.getoption("gemm_sanitize"), config.getoption("gemm_racecheck")
    if sanitize and racecheck:
        raise pytest.UsageError("--gemm-sanitize and --gemm-racecheck run compute-sanitizer's memcheck and racecheck "
                                "tools: choose one per run")
    if (sanitize or racecheck) and backend.name != "cuda":
        option = "--gemm-sanitize" if sanitize else "--gemm-racecheck"
        raise pytest.UsageError(f"{option} runs compute-sanitizer on compiled kernels: it needs the cuda backend "
                                "(the interpreter has its own exact memory checker and race detector, always on)")
    if config.getoption("gemm_timeout") <= 0:
        raise pytest.UsageError(f"--gemm-timeout must be positive, got {config.getoption('gemm_timeout')}")
    mode = ("sanitize" if sanitize else "racecheck" if racecheck
            else runner.default_mode(backend.name, user is not None, config.getoption("gemm_isolate")))
    repros = config.getoption("gemm_repros")
    directory = (Path(repros) if Path(repros).is_absolute() else config.rootpath / repros) if repros else None
    save = config.getoption("gemm_save_cases")
    saved = (Path(save) if Path(save).is_absolute() else config.rootpath / save) if save else None
    if saved is not None and saved.exists() and not saved.is_dir():
        raise pytest.UsageError(f"--gemm-save-cases {save}: {saved} is a file; expected a folder (new, or one "
                                "that holds saved cases)")
    config.stash[SETTINGS] = runner.RunSettings(backend=backend.name, mode=mode,
                                                timeout=config.getoption("gemm_timeout"),
                                                repros=str(directory) if directory else None, kernel=kernel,
                                                save_cases=str(saved) if saved else None)
    chosen, left_out = _corpus(directory, user, selectors, globs)
    config.stash[SELECTION] = _Selection(backend, selectors, globs, user, chosen, left_out)
    config.stash[WORKER_STATS] = {}
    # NaN, Inf and overflowing inputs are drawn on purpose: numpy saying so inside the interpreter is noise
    for message in ("invalid value encountered", "overflow encountered"):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:RuntimeWarning")
    if profile is None:
        hypothesis_profiles.load_default()


def _corpus(directory, user, selectors, globs) -> tuple[list, int]:
    """The repro scripts of the kernels under test in this run, each with the reason it is skipped (its
    dtype is not selected) or None, and how many scripts are of other kernels or unreadable."""
    from gemm_fuzz.properties.launch.targets import selector_of
    from gemm_fuzz.properties.report import repros

    if directory is None:
        return [], 0
    found, unreadable = repros.corpus(directory)
    chosen = []
    for r in found:
        example, kernel = r.record["example"], r.record.get("kernel")
        if user is not None:
            from gemm_fuzz.properties.launch import user_kernel

            ours = user_kernel.loaded(user.name)[1]
            under_test = kernel is not None and (kernel["spec"], kernel.get("signature")) == (ours.spec, ours.signature)
        else:
            names = [example["variant"]] if example["variant"] else []
            under_test = kernel is None and (not globs or all(any(fnmatch.fnmatchcase(n, g) for g in globs)
                                                              for n in names))
        if under_test:
            selector = selector_of(example)
            chosen.append((r, None if selector in selectors else
                           f"{r.path.name}: its inputs are {selector}, not among this run's dtypes "
                           f"({', '.join(selectors)})"))
    return chosen, len(found) - len(chosen) + len(unreadable)


def pytest_report_header(config: pytest.Config) -> list[str]:
    if SELECTION not in config.stash:
        return []
    from hypothesis import settings as hs

    selection, settings = config.stash[SELECTION], config.stash[SETTINGS]
    lines = selection.backend.header(verbose=config.get_verbosity() > 0) + [
        f"gemm hypothesis profile: {hs.get_current_profile_name()}",
        f"gemm examples: {settings.describe()}" + (" (caching allocator off)" if settings.mode == "sanitize" else ""),
    ]
    if selection.user is not None:
        lines.append(f"gemm kernel under test: {selection.user.name} ({selection.user.origin})")
    if settings.repros:
        lines.append(f"gemm corpus: {len(selection.corpus)} repro script(s) in {settings.repros} replayed first; "
                     f"{selection.corpus_left_out} left out (other kernels); delete the folder to start afresh")
    return lines


def _targets(config: pytest.Config):
    from gemm_fuzz import kernels
    from gemm_fuzz.properties.launch import targets

    s = config.stash[SELECTION]
    chosen = [s.user] if s.user is not None else kernels.variants()
    return targets.targets(chosen, s.selectors, None if s.user else s.globs)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    if SELECTION not in config.stash:
        return
    selection = config.stash[SELECTION]
    backend = selection.backend
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
        from gemm_fuzz.kernels.operation import PLAIN
        from gemm_fuzz.properties.checks.agreement import AgreementGroup, peers_of

        if selection.user is not None:
            groups = [AgreementGroup(t.dtype, selection.user, selection.user.operation) for t in _targets(config)]
        else:  # the plain product's groups, and one for each other operation two variants compute
            operations = list(dict.fromkeys(t.variant.operation for t in _targets(config)
                                            if not t.variant.operation.plain))
            groups = [AgreementGroup(s, operation=op) for s in selection.selectors if s != "tf32"  # fp32 has tf32
                      for op in [PLAIN, *operations] if len(peers_of(s, backend, op)) >= 2]  # fp4: no peers
        params = []
        for g in groups:
            alone = g.focus is not None and not [v for v in peers_of(g.dtype, backend, g.operation)
                                                 if v.name != g.focus.name]
            reason = (f"no built-in kernel computes {g.operation.describe()} on {g.dtype}: agreement needs a peer"
                      if alone else None)
            params.append(pytest.param(g, id=g.id, marks=[pytest.mark.skip(reason=reason)] if reason else []))
        metafunc.parametrize("agreement_group", params)
    if "corpus_case" in metafunc.fixturenames:
        params = [pytest.param(r, id=r.path.stem, marks=[pytest.mark.skip(reason=why)] if why else [])
                  for r, why in selection.corpus]
        if not params:
            where = config.stash[SETTINGS].repros
            reason = (f"no repro script of the kernels under test in {where} to replay" if where else
                      "repro scripts are neither written nor replayed (--gemm-repros '')")
            params = [pytest.param(None, id="empty", marks=pytest.mark.skip(reason=reason))]
        metafunc.parametrize("corpus_case", params)


_BATTERY = ("target", "agreement_group", "corpus_case")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SELECTION not in config.stash:
        return
    selection = config.stash[SELECTION]
    backend = selection.backend
    for item in items:
        if item.get_closest_marker("gpu") and backend.name != "cuda":
            reason = f"needs a CUDA GPU (compiled kernels); the backend is {backend.name}"
            item.add_marker(pytest.mark.skip(reason=reason))
        if item.get_closest_marker("interpreter") and backend.name != "interpreter":
            item.add_marker(pytest.mark.skip(reason=f"needs Triton's interpreter; the backend is {backend.name}"))
    seed = config.getoption("gemm_order_seed")
    if seed is not None:
        random.Random(seed).shuffle(items)

    # past failures first, then the main property, then the rest
    def rank(item) -> int:
        if "corpus_case" in getattr(item, "fixturenames", ()):
            return 0
        return 1 if item.path.name == "test_properties.py" else 2

    items.sort(key=rank)


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest):
    """The active backend (device, name, strategy limits)."""
    selection = request.config.stash.get(SELECTION, None)
    if selection is None:
        pytest.skip("the GEMM suite is not active (set gemm_suite = true or pass --gemm-backend)")
    return selection.backend


@pytest.fixture(scope="session")
def gemm_runner(request: pytest.FixtureRequest, backend):
    """The runner of this process: every example runs through it."""
    from gemm_fuzz.properties.run.runner import Runner

    with Runner(request.config.stash[SETTINGS], backend) as runner:
        request.config.stash[_RUNNERS].append(runner)
        if not hasattr(request.config, "workerinput"):  # one process runs every test: compile all ahead at once
            collected = {item.callspec.params["target"].id for item in request.session.items
                         if "target" in getattr(getattr(item, "callspec", None), "params", {})}
            runner.compile_ahead(plan for t in _targets(request.config) if t.id in collected
                                 and t.variant.runs_on(backend.name) for plan in _compile_plans(request.config, t))
        yield runner


def _compile_plans(config: pytest.Config, target) -> list:
    """What the battery's tests of `target` launch on a GPU, one case per specialization class."""
    from gemm_fuzz.properties import checks

    return checks.compile_plans(target, config.stash[SELECTION].backend, config.stash[SELECTION].user is not None)


_RUNNERS = pytest.StashKey[list]()


@pytest.fixture
def gemm(request: pytest.FixtureRequest, gemm_runner):
    """The examples of this test: `gemm.run(example, variant)` (see properties.run.runner.PropertyRun)."""
    params = getattr(request.node, "callspec", None)
    params = params.params if params else {}
    label = next((str(getattr(params[name], "id", "")) or request.node.name for name in _BATTERY if name in params),
                 request.node.name)
    if "corpus_case" in params and params["corpus_case"] is not None:
        label = params["corpus_case"].path.stem
    if "target" in params:  # this test's kernels start compiling now, in parallel (already queued: nothing)
        gemm_runner.compile_ahead(_compile_plans(request.config, params["target"]))
    prop = gemm_runner.property(label, record="corpus_case" not in params)  # a replay is no target
    prop.database_key = request.node.nodeid
    return prop


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    if SELECTION not in pyfuncitem.config.stash:  # inert in other projects
        return (yield)
    from gemm_fuzz.properties.run.runner import NothingJudged

    try:
        return (yield)
    except NothingJudged as e:  # not the kernel's failure, nor a pass: nothing could be judged here
        pytest.skip(str(e))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.when == "call" and report.failed and call.excinfo is not None and SELECTION in item.config.stash:
        from gemm_fuzz.properties.report import bugs, display

        failures = display.failures(call.excinfo.value) or []
        # plain data, so it travels with the report from an xdist worker to the summary
        report.gemm_failures = [bugs.record(f, item.originalname) for f in failures]
        if failures and item.config.getoption("tbstyle") in ("auto", "short"):
            report.longrepr = display.longrepr(failures, str(item.path))
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    """A failing test's word carries its failure kinds ("FAILED (data race)"), so the short summary names them
    however narrow the terminal is (pytest cuts the reason after the test's id, never the word)."""
    kinds = list(dict.fromkeys(r["kind"] for r in getattr(report, "gemm_failures", None) or []))
    if report.when == "call" and report.failed and kinds:
        return "failed", "F", f"FAILED ({'; '.join(kinds)})"
    return None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    config = _CONFIG[0] if _CONFIG else None
    if config is not None and _FAILURES in config.stash and not hasattr(config, "workerinput"):
        config.stash[_FAILURES] += getattr(report, "gemm_failures", [])
        if report.when == "call" and report.passed:
            from gemm_fuzz.properties.battery.test_corpus import PASSED

            config.stash[_REPLAYS_PASSED] += [path for key, path in report.user_properties if key == PASSED]


_CONFIG: list = []
_FAILURES = pytest.StashKey[list]()  # every failing test's failures (bugs.record), in the controller
_REPLAYS_PASSED = pytest.StashKey[list]()  # the repro scripts that replayed and passed, in the controller


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG[:] = [session.config]
    session.config.stash[_RUNNERS] = []
    session.config.stash[_FAILURES] = []
    session.config.stash[_REPLAYS_PASSED] = []


def _stats(config: pytest.Config) -> dict:
    merged: dict = {}
    for runner in config.stash.get(_RUNNERS, []):
        for target_id, values in runner.stats.snapshot().items():
            merged.setdefault(target_id, []).append(values)
    for target_id, values in config.stash.get(WORKER_STATS, {}).items():
        merged.setdefault(target_id, []).extend(values)
    return merged


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workeroutput"):  # an xdist worker: hand the numbers to the controller
        session.config.workeroutput["gemm_stats"] = _stats(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    data = getattr(node, "workeroutput", {}).get("gemm_stats")
    if data:
        into = node.config.stash[WORKER_STATS]
        for target_id, values in data.items():
            into.setdefault(target_id, []).extend(values)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if SELECTION not in config.stash:
        return
    from gemm_fuzz.properties import phases
    from gemm_fuzz.properties.report import bugs
    from gemm_fuzz.properties.report.stats import TargetStats, never_reached, table

    passed = config.stash.get(_REPLAYS_PASSED, [])
    if passed:  # fixed, or no longer reached: either way the script has served
        terminalreporter.section("GEMM replays: past failures that pass now")
        for path in sorted(passed):
            terminalreporter.write_line(f"{path} passes now: the failure it recorded no longer reproduces "
                                        "(delete it once you no longer need it)")
    found = bugs.summary(config.stash.get(_FAILURES, []))
    if found:
        count = len(bugs.group(config.stash[_FAILURES]))
        terminalreporter.section(f"GEMM failures: {count} distinct bug{'s' * (count > 1)}")
        for line in found:
            terminalreporter.write_line(line)

    merged = {}
    for target_id, values in _stats(config).items():
        total = TargetStats()
        for v in values:
            total.merge(TargetStats(**v))
        merged[target_id] = total
    if not merged:
        return
    terminalreporter.section("GEMM targets: examples, failures, worst error / bound")
    for line in table(merged):
        terminalreporter.write_line(line)
    spent: dict[str, float] = {}
    for s in merged.values():
        phases.add(spent, s.phases)
    line = phases.summary(sum(s.seconds for s in merged.values()), spent)
    if line:  # where the examples' time went: the next bottleneck
        terminalreporter.write_line("GEMM time: " + line)
    unreached = never_reached(merged)
    if unreached:
        terminalreporter.section("GEMM coverage: what no example reached")
        for line in unreached:
            terminalreporter.write_line(line)
