"""The pytest plugin (registered through the `pytest11` entry point as `gemm`).

It stays inert in other projects: it acts only where `gemm_suite = true` is set in the pytest
configuration or a `--gemm-*` option is given. Then it chooses the backend before anything imports
the kernels, loads a Hypothesis profile, parametrizes every test that asks for `target` over the
selected (variant, dtype) pairs, and reports the backend in the header.
"""

from __future__ import annotations

import fnmatch

import pytest

from properties import settings


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
    parser.addini("gemm_suite", type="bool", default=False,
                  help="activate the GEMM suite's backend selection and parametrization")


def _enabled(config: pytest.Config) -> bool:
    ns = config.known_args_namespace if hasattr(config, "known_args_namespace") else config.option
    given = any(getattr(ns, name, None) for name in ("gemm_backend", "gemm_dtype", "gemm_variant"))
    return given or bool(config.getini("gemm_suite"))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser, args) -> None:
    # before any conftest or test module can import triton or the kernels
    if _enabled(early_config):
        from properties import backends

        backends.activate(early_config.known_args_namespace.gemm_backend or "auto")


def pytest_configure(config: pytest.Config) -> None:
    if not _enabled(config):
        return
    from properties import backends, targets

    config._gemm_backend = backends.activate(config.getoption("gemm_backend") or "auto")
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
    if config.getoption("hypothesis_profile", None) is None:
        settings.load_default()


def pytest_report_header(config: pytest.Config) -> list[str]:
    backend = getattr(config, "_gemm_backend", None)
    if backend is None:
        return []
    from hypothesis import settings as hs

    return backend.header() + [f"gemm hypothesis profile: {hs.get_current_profile_name()}"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "target" not in metafunc.fixturenames or not hasattr(metafunc.config, "_gemm_backend"):
        return
    import kernels
    from properties import targets

    backend = metafunc.config._gemm_backend
    chosen = targets.targets(kernels.variants(), metafunc.config._gemm_selectors, metafunc.config._gemm_globs)
    params = []
    for t in chosen:
        marks = []
        if not t.variant.runs_on(backend.name):
            marks.append(pytest.mark.skip(reason=f"{t.variant.name} needs a CUDA GPU (compiled kernels); "
                                                 f"the backend is {backend.name}"))
        params.append(pytest.param(t, id=t.id, marks=marks))
    metafunc.parametrize("target", params)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    backend = getattr(config, "_gemm_backend", None)
    if backend is None:
        return
    for item in items:
        if item.get_closest_marker("gpu") and backend.name != "cuda":
            reason = f"needs a CUDA GPU (compiled kernels); the backend is {backend.name}"
            item.add_marker(pytest.mark.skip(reason=reason))
        if item.get_closest_marker("interpreter") and backend.name != "interpreter":
            item.add_marker(pytest.mark.skip(reason=f"needs Triton's interpreter; the backend is {backend.name}"))


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest):
    """The active backend (device, name, strategy limits)."""
    b = getattr(request.config, "_gemm_backend", None)
    if b is None:
        pytest.skip("the GEMM suite is not active (set gemm_suite = true or pass --gemm-backend)")
    return b
