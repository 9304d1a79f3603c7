"""What every declaration a user writes (`contract`, `Operation`, `Requirements`) does with a keyword it does
not have: refuse it, naming the nearest field and listing them all, instead of Python's bare TypeError."""

from __future__ import annotations

import dataclasses
import difflib


def refuse_unknown(what: str, cls: type, given) -> None:
    """Raise TypeError if a name in `given` is no field of the dataclass `cls`."""
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(given) - set(names))
    if not unknown:
        return
    near = [m for name in unknown for m in difflib.get_close_matches(name, names, n=1)]
    guess = f" (did you mean {', '.join(map(repr, near))}?)" if near else ""
    raise TypeError(f"{what}: no field {', '.join(unknown)}{guess}; the fields are {', '.join(names)}")


def keywords_checked(what: str):
    """Class decorator for a dataclass: its constructor refuses unknown keywords as `refuse_unknown` says."""

    def wrap(cls: type) -> type:
        init = cls.__init__

        def __init__(self, *args, **kwargs):
            refuse_unknown(what, cls, kwargs)
            init(self, *args, **kwargs)

        __init__.__doc__ = init.__doc__
        cls.__init__ = __init__
        return cls

    return wrap
