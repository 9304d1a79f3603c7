"""How inputs are generated and results judged: cases, strategies, oracles, backends, the pytest
plugin, the campaign and the test battery (properties/battery) the plugin runs on any kernel.

`load_case` and `run_case` (properties/checks/saved_case.py) load a saved failing case and run a kernel
on it in this process; they are imported on first use, so importing this package stays light."""

_LAZY = {"load_case": "gemm_fuzz.properties.checks.saved_case", "run_case": "gemm_fuzz.properties.checks.saved_case",
         "SavedCase": "gemm_fuzz.properties.checks.saved_case",
         "SavedCaseError": "gemm_fuzz.properties.checks.saved_case"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
