"""Deliberately wrong kernels: each is a real variant of `kernels/` with one realistic bug planted,
kept to measure the suite's power (tests/test_mutants.py, `python -m gemm_fuzz.properties.evaluation.power`)
against a fixed-grid baseline (tests/test_baseline.py).

A mutant is its parent's source plus declared edits (`Edit`: a text that must occur exactly once in
the parent, and what replaces it), so it is always the current parent with one bug, and a change to
the parent that breaks a mutant fails loudly when the mutant is built. The edited source is written
to a generated file, each planted line marked `# planted: <mutant>`, and imported there, so
tracebacks and the sanitizer's file:line point at real source. The parent module's registration is
captured, not registered: mutants are not variants, the property tests never see them. `plant` and
`edited` are the one mechanism for planting bugs, used by the catalog (kernels/mutants/catalog.py)
and by tests that plant bugs of their own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gemm_fuzz.kernels.registry import Variant, capture

CaseFields = Mapping[str, object]  # GemmCase fields other than the dtypes (layouts as Layout fields)
MARK = "# planted: "


@dataclass(frozen=True)
class Edit:
    old: str  # occurs exactly once in the parent's source
    new: str


class PlantingError(ValueError):
    """An edit that does not apply: its text is missing from the parent, or occurs more than once."""


def edited(source: str, edits: tuple[Edit, ...] | list[Edit], name: str, where: str = "the source") -> str:
    """`source` with each edit applied (each `old` must occur exactly once) and every line an edit
    touched marked at its end."""
    for edit in edits:
        count = source.count(edit.old)
        if count != 1:
            raise PlantingError(f"mutant {name!r}: its edit expects {edit.old!r} exactly once in {where}, "
                                f"found {count} time(s): the parent changed, update the mutant")
        start = source.index(edit.old)
        source = source[:start] + edit.new + source[start + len(edit.old):]
        first = source.rfind("\n", 0, start) + 1  # the lines the new text lies on, whole
        last = source.find("\n", start + max(len(edit.new), 1) - 1)
        last = len(source) if last == -1 else last
        source = source[:first] + _marked(source[first:last], name) + source[last:]
    return source


def _marked(text: str, name: str) -> str:
    return "\n".join(line + f"  {MARK}{name}" if line.strip() and not line.rstrip().endswith("\\") else line
                     for line in text.split("\n"))


def _generated_dir() -> Path:
    directory = Path(tempfile.gettempdir()) / f"gemm-mutants-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def plant(module, edits, name: str) -> list[Variant]:
    """Import `module`'s source with `edits` applied, from a generated file named after `name`, and
    return the variants it registers (captured, not registered)."""
    source = edited(inspect.getsource(module), edits, name, f"{module.__name__}'s source")
    with capture() as found:
        load(source, name)
    return found


def load(source: str, name: str):
    """Import `source` (a bug already planted, see `edited`) from a generated file named after `name`, so
    tracebacks and the sanitizer's file:line point at real lines; returns the module."""
    path = _generated_dir() / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        partial = path.with_suffix(f".{os.getpid()}.tmp")  # an atomic write: workers may plant at once
        partial.write_text(source)
        os.replace(partial, path)
    module_name = f"gemm_mutant_{name}_{hashlib.sha256(source.encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    generated = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = generated
    spec.loader.exec_module(generated)
    return generated


@dataclass(frozen=True)
class Mutant:
    name: str
    parent: str  # the variant it mutates, e.g. "tiled"
    edits: tuple[Edit, ...]
    bug: str  # the bug class, one line
    dtype: str  # the input dtype it is hunted with ("fp32" for tf32-vs-ieee bugs)
    # The smallest case that exposes it, as GemmCase fields (M, N, K and whatever else matters;
    # the rest default: row-major, no padding, profile "ones", seed 0, the default output dtype).
    # Shrinking must land exactly here, unless `shrinks_to` says where and why it stops earlier.
    smallest: CaseFields
    why: str  # one line: why that case is the smallest
    caught_as: str  # the failure it raises there, e.g. "OutOfBoundsAccess" (the sanitizer), "NotBitExact"
    gpu_only: bool = False  # a bug the interpreter cannot show (tested with -m gpu)
    gpu_only_why: str = ""  # one line: why the interpreter cannot show it
    # Changes to `smallest` under which the kernel is right: the bug shows only where claimed.
    unaffected: CaseFields | None = None
    # Where the suite's shrinking lands instead of `smallest`, when it stops in a local minimum
    # (failures that depend on the values, not monotonically on the sizes), and why.
    shrinks_to: CaseFields | None = None
    shrinks_to_why: str = ""
    # every input dtype the bug applies to, "in->out" where only some outputs can show it (the power
    # table draws only those); default (dtype,)
    dtypes: tuple[str, ...] = ()

    @property
    def variant(self) -> Variant:
        """The parent's variant with the bug planted, named after the mutant."""
        return _variant(self)

    @property
    def all_dtypes(self) -> tuple[str, ...]:
        return self.dtypes or (self.dtype,)

    def __post_init__(self):
        if self.dtype not in {d.split("->")[0] for d in self.all_dtypes}:
            raise ValueError(f"mutant {self.name!r}: its dtype {self.dtype!r} is not among its dtypes {self.dtypes}")


_VARIANTS: dict[str, Variant] = {}


def _variant(mutant: Mutant) -> Variant:
    if mutant.name not in _VARIANTS:
        from gemm_fuzz import kernels

        parent = kernels.get(mutant.parent)
        module = sys.modules[inspect.getmodule(parent.launch).__name__]
        planted = {v.name: v for v in plant(module, mutant.edits, mutant.name)}
        _VARIANTS[mutant.name] = dataclasses.replace(planted[mutant.parent], name=mutant.name,
                                                     origin=f"mutant of {mutant.parent}: {mutant.bug}")
    return _VARIANTS[mutant.name]


_MUTANTS: dict[str, Mutant] = {}


def register(mutant: Mutant) -> Mutant:
    if mutant.gpu_only != bool(mutant.gpu_only_why):
        raise ValueError(f"mutant {mutant.name!r}: a GPU-only mutant says why (gpu_only_why), and only it")
    if mutant.name in _MUTANTS:
        raise ValueError(f"mutant {mutant.name!r} is registered twice")
    _MUTANTS[mutant.name] = mutant
    return mutant


def mutants() -> list[Mutant]:
    """Every mutant, in name order."""
    return [_MUTANTS[name] for name in sorted(_MUTANTS)]


def get(name: str) -> Mutant:
    try:
        return _MUTANTS[name]
    except KeyError:
        raise KeyError(f"no mutant named {name!r}; registered mutants: {', '.join(sorted(_MUTANTS))}") from None


def variant(name: str) -> Variant:
    """The Variant of a mutant: its parent with the bug planted."""
    return get(name).variant


from gemm_fuzz.kernels.mutants import catalog  # noqa: E402,F401  (registers every mutant)
