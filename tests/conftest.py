"""Shared test helpers. Nothing here imports the kernels at module level: the plugin chooses the
backend first (see properties/plugin.py)."""

pytest_plugins = ["pytester"]
