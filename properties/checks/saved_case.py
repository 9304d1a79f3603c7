"""A failing case in your hands: an example's operands saved as they were launched, loaded back, and run
in this process on any kernel, judged by the suite's own comparison.

    python repros/<script>.py --save DIR                        # the script's case, saved into DIR
    pytest --gemm-kernel my.py:matmul --gemm-save-cases DIR     # each reported failure's, in DIR/<script>/
    gemm-fuzz --kernel my.py:matmul --save-cases DIR            # the same, for a campaign

    from gemm_fuzz.properties import load_case, run_case
    saved = load_case(DIR)       # saved.a, saved.b, saved.c, saved.c_in, ..., saved.c_got, saved.reference,
                                 # saved.allowance, saved.case, saved.kwargs
    run_case(DIR, matmul)        # matmul(a, b, c, **saved.kwargs) on fresh copies, here; C judged as the suite does

(`gemm_fuzz.properties`, not `gemm_fuzz`: the top-level name is a namespace package with no module of its own.)

A save is the reference check run once more with a recorder (`Save`, the check named "save"): where
`reference.judged` materializes the case, the recorder copies every operand just before the launch and
the outputs just after it, and computes the float64 reference and the allowance (`oracles.product_of`,
`oracles.allowances`) from the operands as launched. It runs where the example ran (here, or in the
worker of a user's kernel); a case that hung or crashed is not launched again (its inputs, reference
and allowance are saved, not C). Nothing is recorded in any other run: `judged` only tests that no
save is under way.

What DIR holds (nothing is written outside it):

  case.json        the case (GemmCase.to_dict), the failing example's check and its parameters, the
                   variant (a user's kernel: its spec, path and digest) and its contract as declared
                   (dtypes, blocks, configurations, requirements, the operation's formula), the drawn and
                   launched configuration, the seeds, the backend and mode, the failure's kind and
                   headline (and what the saving run saw), the repro script, and each tensor's file with
                   its view's shape, strides and storage offset
  a.pt, b.pt, c.pt, <extra>.pt
                   each operand's whole buffer as the suite built it, before the launch: a 1-D tensor
                   holding the view and its surroundings (poison around inputs, C's sentinel around C and
                   its unwritten pre-fill); the view is `torch.as_strided(buffer, shape, stride, offset)`
                   with case.json's numbers, so strides, padding and offsets are the launch's own and a
                   read outside an operand reads what the kernel read then
  c_got.pt         C's buffer after the launch (pre_got.pt: the second output's)
  reference.pt     the float64 reference of C (float64, C's shape; reference_pre.pt for pre)
  allowance.pt     what a correct kernel may store in C (reference/bounds.py's Allowance): a dict of
                   tensors expected, bound, exact, pos_inf, neg_inf, nan and, where present, free and
                   reference (the unrounded product); allowance_pre.pt for pre
  <name>_members.pt  which elements of an output are its own (grouped problems' C)

`load_case(DIR)` gives them back by name (`SavedCase`); `run_case(DIR, FUNC)` launches FUNC on fresh
copies in this process (in the interpreter under the suite's sanitizer, program order and race detector,
as the suite ran it) and judges it with the suite's oracles and `judge/compare.values` against the
saved reference and allowance: it raises the failure (the same kinds as the suite's) or returns the
Observation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from gemm_fuzz.properties.checks.check import Check
from gemm_fuzz.properties.checks.example import Example, Observation

FORMAT = "gemm-fuzz saved case"
VERSION = 1
CASE_FILE = "case.json"
ALLOWANCE_PARTS = ("expected", "bound", "exact", "pos_inf", "neg_inf", "nan", "free", "reference")
# failures not run again to save their case: the kernel would hang or crash once more
NOT_RELAUNCHED = ("TimedOut", "Crashed")
LAYOUT = ("buffers: each operand's whole 1-D buffer as built for the launch (guard bands, padding and "
          "surroundings included); its view is torch.as_strided(buffer, shape, stride, offset)")


class SavedCaseError(ValueError):
    """A folder that is not a saved case, or a kernel that cannot run one: what was wrong and what is expected."""


# --- saving ---------------------------------------------------------------------------------------------


def target(example: Example) -> str:
    """The variant a save launches: the example's, or (agreement among peers with no focus) its first peer."""
    return example.variant or next(iter(example.parameters.get("peers", ())), "")


def example_of(example: Example, directory: Path, launch: bool = True) -> Example:
    """The `save` example of a failing example: its variant on its case, saved into `directory`
    (`launch` False: the inputs, reference and allowance alone, for a case that hung or crashed)."""
    return CHECK.example(target(example), example.case, (("directory", str(Path(directory).resolve())),
                                                         ("launch", bool(launch))))


def relaunched(failure) -> bool:
    """Is a failure's case launched again to save it (not a hang or a crash)? `failure`: a GemmFailure,
    the dict a repro script records ({"type": ...}), or None."""
    kind = failure.get("type") if isinstance(failure, dict) else type(failure).__name__ if failure else ""
    return kind not in NOT_RELAUNCHED


def prepare(directory: Path) -> Path:
    """`directory` made ready for a save: created, a previous save's files (case.json, *.pt) removed;
    SavedCaseError when it is not a folder that can hold one."""
    directory = Path(directory).resolve()
    if directory.exists() and not directory.is_dir():
        raise SavedCaseError(f"cannot save a case into {directory}: it is a file; expected a folder (new, or one a "
                             "save wrote before)")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for old in [directory / CASE_FILE, *directory.glob("*.pt")]:
            old.unlink(missing_ok=True)
    except OSError as e:
        raise SavedCaseError(f"cannot save a case into {directory}: {e.strerror or e}") from None
    return directory


def _jsonable(value):
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value


def _operation_fields(operation) -> dict:
    fields = {f.name: getattr(operation, f.name) for f in dataclasses.fields(operation)}
    fields["names"] = dict(operation.names)
    return _jsonable(fields)


def _operation(fields: dict):
    from gemm_fuzz.kernels.operation import Operation

    data = dict(fields)
    if data.get("bias_dtype"):
        data["bias_dtype"] = getattr(torch, data["bias_dtype"])
    return Operation(**data)


def _contract(variant, backend, case) -> dict:
    """The contract of the variant launched, as declared (a user's kernel) or registered (a built-in)."""
    from gemm_fuzz.properties.launch import user_kernel
    from gemm_fuzz.reference.formats import by_name

    device = backend.device.type
    declared = user_kernel.declared(variant.name)
    configs = list(declared.configs) if declared is not None else list(
        variant.configs_for(device, by_name(case.dtype).dtype))
    blocks = declared.blocks if declared is not None else variant.block_shapes(device)[0]
    return _jsonable({
        "dtypes": {k: list(v) for k, v in variant.dtypes.items()}, "precision": variant.precision,
        "blocks": blocks, "configs": configs, "requires": variant.requirements,
        "partial_sums_in_output": variant.partial_sums_in_output, "deterministic": variant.deterministic,
        "duplicate_stores": variant.duplicate_stores,
        "signature": declared.signature if declared is not None else "plain",
        "operation": variant.operation.describe(), "operation_fields": _operation_fields(variant.operation),
    })


class Recorder:
    """What one save records while `reference.judged` runs (see the module docstring)."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.ops = None
        self.variant = None
        self.backend = None
        self.before: dict[str, torch.Tensor] = {}
        self.after: dict[str, torch.Tensor] = {}
        self.allowances: dict = {}
        self.reference_error = ""

    def launching(self, variant, ops, backend) -> None:
        """The operands just before the launch, and what a correct kernel may store (their reference)."""
        from gemm_fuzz.properties.judge import oracles

        self.variant, self.ops, self.backend = variant, ops, backend
        self.before = {name: g.buffer.detach().to("cpu", copy=True) for name, g in _guarded(ops).items()}
        case = ops.case
        try:
            partials = oracles.output_partials(variant, case.dtype, case.config, backend.device.type)
            self.allowances = oracles.allowances(ops, variant.precision, oracles.product_of(ops), partials)
        except Exception as e:  # noqa: BLE001  the suite's own error: the save says so, the launch goes on
            self.reference_error = f"{type(e).__name__}: {e}"

    def launched(self, ops) -> None:
        """The outputs as the kernel left them."""
        outputs = {id(g) for g in ops.outputs()}
        self.after = {name: g.buffer.detach().to("cpu", copy=True) for name, g in _guarded(ops).items()
                      if id(g) in outputs}

    def write(self, note: str = "") -> None:
        """The tensors (.pt) and case.json's part that the launch knows."""
        record = {"format": FORMAT, "version": VERSION, "layout": LAYOUT, "launched": bool(self.after)}
        if note:
            record["note"] = note
        if self.ops is None:
            record["note"] = note or "nothing was launched: no operand to save"
            _write_json(self.directory, record)
            return
        ops, variant, backend, case = self.ops, self.variant, self.backend, self.ops.case
        from gemm_fuzz.properties.launch import user_kernel
        from gemm_fuzz.reference.formats import by_name

        config = variant.config(backend.device.type, by_name(case.dtype).dtype, dict(case.config) or None)
        loaded = user_kernel.loaded(variant.name)
        record.update({
            "variant": variant.name, "origin": variant.origin,
            "kernel": loaded[1].to_dict() if loaded else None,
            "case": dataclasses.asdict(case), "case_text": case.describe(),
            "seeds": {"seed": case.seed, "order": case.order},
            "config": {"drawn": _jsonable(dict(case.config)), "launched": _jsonable(config)},
            "backend": backend.name, "device": str(backend.device), "device_name": backend.device_name,
            "contract": _contract(variant, backend, case),
            "operation": _operation_fields(ops.operation), "formula": ops.operation.describe(),
            "keywords": ops.operation.keywords(), "scalars": _jsonable(dict(ops.scalars)),
            "tensors": {},
        })
        outputs = {id(g) for g in ops.outputs()}
        for name, g in _guarded(ops).items():
            entry = {"file": f"{name}.pt", "name": g.name, "role": "output" if id(g) in outputs else "input",
                     "dtype": _jsonable(g.view.dtype), "shape": list(g.view.shape), "stride": list(g.view.stride()),
                     "offset": g.view.storage_offset(), "members": None}
            torch.save(self.before[name], self.directory / entry["file"])
            if g.members is not None:
                entry["members"] = f"{name}_members.pt"
                torch.save(torch.from_numpy(np.array(g.members)), self.directory / entry["members"])
            record["tensors"][name] = entry
            if name in self.after:
                got = dict(entry, file=f"{name}_got.pt", role="after", of=name, members=None)
                torch.save(self.after[name], self.directory / got["file"])
                record["tensors"][f"{name}_got"] = got
        if case.groups is not None and case.groups.problems:
            from gemm_fuzz.properties.model import grouped

            record["problems"] = {name: [{"shape": list(v.shape), "stride": list(v.stride()),
                                          "offset": v.storage_offset()} for v in views]
                                  for name, views in zip("abc", grouped.views(ops))}
        record["allowances"] = {}
        for output, allow in self.allowances.items():
            suffix = "" if output == "C" else f"_{output}"
            parts = {part: torch.from_numpy(np.array(getattr(allow, part)))
                     for part in ALLOWANCE_PARTS if getattr(allow, part) is not None}
            torch.save(parts, self.directory / f"allowance{suffix}.pt")
            torch.save(parts["expected"], self.directory / f"reference{suffix}.pt")
            record["allowances"][output] = {"allowance": f"allowance{suffix}.pt", "reference": f"reference{suffix}.pt"}
        if self.reference_error:
            record["reference_error"] = self.reference_error
        _write_json(self.directory, record)


def _guarded(ops) -> dict:
    """Every operand of a launch by the name FUNC's extras have (a, b, c, then the extras in order)."""
    return {"a": ops.a, "b": ops.b, "c": ops.c, **ops.extras}


def _write_json(directory: Path, record: dict) -> None:
    (Path(directory) / CASE_FILE).write_text(json.dumps(record, indent=1) + "\n")


class Save(Check):
    """The reference check on an example's case with its operands saved (parameters: directory, launch)."""

    name = "save"
    searched = False

    def execute(self, example, resolve, backend) -> Observation:
        from gemm_fuzz.properties.checks import reference

        params = example.parameters
        recorder = Recorder(Path(params["directory"]))
        variant = resolve(example.variant)
        if not params.get("launch", True):  # it hung or crashed: not again
            from gemm_fuzz.properties.model.cases import materialize
            from gemm_fuzz.reference.formats import by_name

            case = example.case
            ops = materialize(case, backend.device, variant.operation_in(backend.device.type,
                                                                         by_name(case.dtype).dtype, case.config))
            recorder.launching(variant, ops, backend)
            recorder.write("not launched again: the kernel hung or crashed on this case, so C as it wrote it "
                           "is not saved (c_got.pt); its inputs, reference and allowance are")
            return Observation(False, None, 0.0)
        reference.CAPTURES.append(recorder)
        note = ""
        try:
            observed, _, verdict = reference.judged(variant, example.case, backend)
            if verdict is None:
                note = ("not launched: in the interpreter only this case's grid is checked (a batch past what "
                        "CUDA's grid takes), no program runs")
            return observed
        finally:
            reference.CAPTURES.remove(recorder)
            recorder.write(note)

    def describe(self, example) -> str:
        return "against the float64 reference, its operands saved"


CHECK = Save()


def finish(directory: Path, example: Example, failure, seen, settings, repro: Path | None = None) -> Path:
    """case.json completed with what the saving process knows: the failing example and its check, the
    failure (a GemmFailure, or a repro script's record of one) and what the saving run saw (`seen`: its
    failure, or None when it passed), the run's settings and the repro script."""
    from gemm_fuzz.properties import checks

    directory = Path(directory)
    path = directory / CASE_FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        record = {"format": FORMAT, "version": VERSION, "layout": LAYOUT, "launched": False,
                  "note": "the saving run left no record: its process died or hung (see saving below)"}
    if isinstance(failure, dict):
        reported = {k: failure.get(k) for k in ("type", "kind", "headline", "message") if k in failure}
    elif failure is not None:
        reported = {"type": type(failure).__name__, "kind": failure.kind, "headline": failure.headline(),
                    "message": failure.message}
    else:
        reported = None
    record.update({
        "example": example.to_dict(), "check": {"name": example.check,
                                                 "describe": checks.get(example.check).describe(example),
                                                 "params": _jsonable(example.parameters)},
        "failure": reported,
        # what the saving run saw: the failure again, a pass (a flaky failure, or one of another check), or
        # nothing (a hang or a crash is not launched again)
        "saving": ({"type": type(seen).__name__, "kind": seen.kind, "headline": seen.headline()}
                   if seen is not None else {"kind": "passed" if record.get("launched") else "not launched"}),
        "settings": {"backend": settings.backend, "mode": settings.mode, "timeout": settings.timeout,
                     "kernel": settings.kernel},
        "repro": str(repro) if repro else None,
    })
    if "case" not in record:
        record["case"] = dataclasses.asdict(example.case)
        record["case_text"] = example.case.describe()
    record.setdefault("seeds", {"seed": example.case.seed, "order": example.case.order})
    _write_json(directory, record)
    return directory.resolve()


# --- loading --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class SavedCase:
    """A saved case loaded (see the module docstring): its tensors by name, as attributes too (`saved.a`,
    `saved.c_in`, `saved.c_got`, `saved.reference`, `saved.bound`, ...), the case, the keywords FUNC takes
    the extras as (`kwargs`: the extras and scalars by those names), the allowance of each output and
    case.json whole (`info`)."""

    directory: Path
    info: dict
    case: object  # GemmCase
    operation: object  # kernels.Operation, as launched
    tensors: dict
    kwargs: dict
    allowances: dict  # "C" (and "pre") -> reference.bounds.Allowance
    device: torch.device

    def __getattr__(self, name: str):
        tensors = self.__dict__.get("tensors", {})
        if name in tensors:
            return tensors[name]
        raise AttributeError(f"a saved case has no {name!r}; its tensors are {', '.join(tensors)}")

    def __getitem__(self, name: str):
        return self.tensors[name]

    @property
    def allowance(self):
        """What a correct kernel may store in C (reference.bounds.Allowance); None where none was saved."""
        return self.allowances.get("C")

    @property
    def reference(self):
        """C's float64 reference (torch.float64, C's shape)."""
        return self.tensors.get("reference")

    @property
    def config(self) -> dict:
        """The configuration launched (every key), as a contract's FUNC receives it as `config`."""
        return dict(self.info.get("config", {}).get("launched", {}))

    @property
    def failure(self) -> dict | None:
        """The failure saved with the case: its type, kind, headline and message."""
        return self.info.get("failure")

    @property
    def check(self) -> dict:
        """The check that failed: its name, in words and its parameters."""
        return self.info.get("check", {})

    def describe(self) -> str:
        failure = self.failure or {}
        return (f"{self.info.get('variant', '?')} on {self.case.describe()}: {failure.get('headline', 'no failure')}"
                f" ({self.check.get('describe', '?')})")

    def operands(self):
        """Fresh guarded operands (properties/model/cases.Operands): copies of the saved buffers, each with
        its snapshot, as the suite builds them for a launch."""
        return _operands(self.directory, self.info, self.case, self.operation, self.device)[0]


_EXPECTED = (f"a folder a save wrote: {CASE_FILE} (format {FORMAT!r}) and its .pt files, from "
             "`python REPRO.py --save DIR`, `pytest --gemm-save-cases DIR` or `gemm-fuzz --save-cases DIR`")


def _read(directory) -> tuple[Path, dict]:
    if not isinstance(directory, (str, Path)):
        raise SavedCaseError(f"load_case takes a folder's path, got a {type(directory).__name__}; expected {_EXPECTED}")
    directory = Path(directory)
    if not directory.is_dir():
        what = "a file" if directory.exists() else "no such folder"
        raise SavedCaseError(f"{directory} is not a saved case: {what}; expected {_EXPECTED}")
    path = directory / CASE_FILE
    if not path.is_file():
        raise SavedCaseError(f"{directory} is not a saved case: it has no {CASE_FILE}; expected {_EXPECTED}")
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SavedCaseError(f"{path} is not a saved case's record: {e}; expected {_EXPECTED}") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise SavedCaseError(f"{path} is not a saved case's record (no \"format\": {FORMAT!r}); expected {_EXPECTED}")
    if info.get("version") != VERSION:
        raise SavedCaseError(f"{path} is a saved case of version {info.get('version')!r}; this suite reads version "
                             f"{VERSION}: save it again with this suite")
    if not info.get("tensors"):
        why = info.get("note") or "no operand was recorded"
        raise SavedCaseError(f"{directory} holds no tensors to run: {why}")
    missing = [e["file"] for e in info["tensors"].values() if not (directory / e["file"]).is_file()]
    if missing:
        raise SavedCaseError(f"{directory} is an incomplete saved case: {', '.join(missing)} missing; expected every "
                             f"file {CASE_FILE} names")
    return directory, info


def _load(path: Path, device) -> torch.Tensor | dict:
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # noqa: BLE001  a truncated or foreign file
        raise SavedCaseError(f"{path} cannot be read as a saved tensor: {e}; save the case again") from None


def _operands(directory: Path, info: dict, case, operation, device):
    """Fresh Guarded operands (copies of the saved buffers) and C's and pre's buffers after the launch."""
    from gemm_fuzz.properties.model.cases import Guarded, Operands

    guarded, after = {}, {}
    for name, entry in info["tensors"].items():
        buffer = _load(directory / entry["file"], device)
        view = torch.as_strided(buffer, entry["shape"], entry["stride"], entry["offset"])
        if entry["role"] == "after":
            after[entry["of"]] = view
            continue
        members = _load(directory / entry["members"], "cpu").numpy() if entry.get("members") else None
        guarded[name] = Guarded(entry["name"], view, buffer, buffer.clone(), members)
    extras = {name: g for name, g in guarded.items() if name not in ("a", "b", "c")}
    scalars = dict(info.get("scalars", {}))
    return Operands(case, guarded["a"], guarded["b"], guarded["c"], extras, scalars, operation), after


def _device(device, info) -> torch.device:
    if device is not None:
        return torch.device(device)
    from gemm_fuzz.kernels import mode

    if mode.configure() == "cuda" and str(info.get("device", "cpu")).startswith("cuda"):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def load_case(directory, device=None) -> SavedCase:
    """A saved case (see the module docstring), its tensors on `device` (default: the GPU where the case
    was saved on one and this process runs compiled kernels, else the CPU)."""
    from gemm_fuzz.properties.launch import launching
    from gemm_fuzz.properties.model.cases import GemmCase
    from gemm_fuzz.reference.bounds import Allowance

    directory, info = _read(directory)
    try:
        case = GemmCase.from_dict(info["case"])
        operation = _operation(info["operation"])
    except (KeyError, TypeError, ValueError) as e:
        raise SavedCaseError(f"{directory / CASE_FILE} does not describe a case this suite reads ({e}); save it "
                             "again with this suite") from None
    device = _device(device, info)
    ops, after = _operands(directory, info, case, operation, device)
    a, b, c = launching.arguments(ops)
    tensors = {"a": a, "b": b, "c": c, **{name: g.view for name, g in ops.extras.items()}}
    tensors.update({f"{name}_got": view for name, view in after.items()})
    allowances = {}
    for output, files in info.get("allowances", {}).items():
        parts = _load(directory / files["allowance"], "cpu")
        allowances[output] = Allowance(**{k: v.numpy() for k, v in parts.items()})
        suffix = "" if output == "C" else f"_{output}"
        tensors[f"reference{suffix}"] = parts["expected"]
        if output == "C":
            tensors.update({part: parts[part] for part in ALLOWANCE_PARTS if part in parts and part != "reference"})
    keywords = operation.keywords()
    kwargs = {keywords[e]: (ops.extras[e].view if e in ops.extras else ops.scalars[e]) for e in operation.extras()}
    return SavedCase(directory.resolve(), info, case, operation, tensors, kwargs, allowances, device)


# --- running --------------------------------------------------------------------------------------------


def _variant_of(func, saved: SavedCase):
    """FUNC as a Variant whose launch calls it as its contract does: a Variant as it is, a 'PATH.py:FUNC'
    or 'module:FUNC' loaded as the suite loads a user's kernel, a function wrapped."""
    from gemm_fuzz.kernels import autotuning, contracts
    from gemm_fuzz.kernels.registry import Variant
    from gemm_fuzz.properties.launch import user_kernel

    formula = saved.operation.describe()
    if isinstance(func, str):
        try:
            func = user_kernel.load(func)
        except user_kernel.KernelSpecError as e:
            raise SavedCaseError(f"cannot load the kernel {e}") from None
    if isinstance(func, Variant):
        if func.operation.extras() != saved.operation.extras():
            raise SavedCaseError(f"{func.name} computes {func.operation.describe()}, but the saved case is of "
                                 f"{formula}: run it with a kernel that computes that")
        return func
    if not callable(func):
        raise SavedCaseError(f"FUNC is a {type(func).__name__}, not a kernel; expected a function called as "
                             f"{user_kernel.expected_call(False, saved.operation.keywords(), False)} (computing "
                             f"{formula}), a registered Variant, or 'PATH.py:FUNC'")
    name = getattr(func, "__qualname__", getattr(func, "__name__", repr(func)))
    declared = getattr(func, contracts.ATTRIBUTE, None)
    contract = declared if isinstance(declared, contracts.Contract) else None
    signature = contract.signature if contract else saved.info.get("contract", {}).get("signature", "plain")
    operation = contract.operation if contract else saved.operation
    if operation.extras() != saved.operation.extras():
        raise SavedCaseError(f"{name}'s contract declares {operation.describe()}, but the saved case is of {formula}: "
                             "run it with a kernel whose contract declares that")
    names = operation.keywords()
    try:  # an @triton.autotune'd kernel it launches: pinned to the saved configuration, as the suite ran it
        tuner = user_kernel._autotuner(func, name)
    except user_kernel.KernelSpecError as e:
        raise SavedCaseError(str(e)) from None
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        parameters = {}
    # the configuration drawn, where the contract declares configurations (else where FUNC takes one)
    takes_config = bool(contract.configs) if contract else "config" in parameters
    leetgpu = signature == "leetgpu"
    if not user_kernel.binds(func, leetgpu, names, takes_config):
        try:
            shown = f"{name}{inspect.signature(func)}"
        except (TypeError, ValueError):
            shown = name
        raise SavedCaseError(f"{shown} cannot be called as {user_kernel.expected_call(leetgpu, names, takes_config)} "
                             f"(the {signature} signature, computing {formula}): the way the saved case's kernel is "
                             "called")
    launched = saved.config
    keys = {k for config in tuner.configs for k in autotuning.as_dict(config)} if tuner is not None else set()
    call = user_kernel.caller(func, name, leetgpu, names, takes_config, tuner, keys)

    def launch(a, b, c, config=None, **extras):
        call(a, b, c, (a.shape[0], b.shape[1], a.shape[1]), launched, extras)

    from gemm_fuzz.reference.formats import by_name

    contract_info = saved.info.get("contract", {})
    return Variant(name=name, launch=launch, precision=contract_info.get("precision", "ieee"),
                   dtypes={by_name(saved.case.dtype).dtype: (by_name(saved.case.out_dtype).dtype,)},
                   configs={"cpu": (launched,), "cuda": (launched,)}, origin=f"run_case({saved.directory})",
                   duplicate_stores=bool(contract.duplicate_stores if contract else
                                         contract_info.get("duplicate_stores", False)),
                   operation=saved.operation)


def _checks(case, backend, checked: bool):
    """In the interpreter (`checked`), the programs in the case's order and under the race detector, as
    the suite ran them."""
    if not (checked and backend.interpreted):
        return contextlib.nullcontext()
    from gemm_fuzz.properties.interpreter import races, schedule

    stack = contextlib.ExitStack()
    stack.enter_context(schedule.ordered(case.order))
    stack.enter_context(races.checked())
    return stack


def run_case(saved, func, *, checked: bool = True) -> Observation:
    """Run FUNC on fresh copies of a saved case's inputs in this process and judge it as the suite does:
    nothing written outside the outputs nor into an input, every element written, then C (and pre)
    against the saved float64 reference and allowance through `judge/compare.values`. Raises the
    failure (a GemmFailure of the suite's kinds) or returns the Observation (its `values`: C in float64).

    `saved`: a folder a save wrote, or a SavedCase. `func`: a function called as its contract calls it,
    FUNC(a, b, c, **kwargs) (the LeetGPU signature: solve(a, b, c, M, N, K); `config=` where the contract
    declares configurations; an autotuned kernel pinned to the saved configuration), a registered
    Variant (a built-in, `gemm_fuzz.kernels.mutants.variant(name)`), or 'PATH.py:FUNC' / 'module:FUNC'.
    In the interpreter (`checked`) every access is bounds-checked and the programs run in the case's order
    under the race detector, as the suite ran them; `checked=False` calls FUNC plainly (a debugger's
    view without the suite's hooks), judging the same way."""
    from gemm_fuzz.properties.judge import compare, oracles
    from gemm_fuzz.properties.judge.failures import GemmFailure
    from gemm_fuzz.properties.launch import backends, launching
    from gemm_fuzz.properties.model.cases import unwritten_bits
    from gemm_fuzz.reference.formats import by_name, name_of
    from gemm_fuzz.reference.numpy_ref import to_float64

    if not isinstance(saved, SavedCase):
        saved = load_case(saved)
    if "C" not in saved.allowances:
        why = saved.info.get("reference_error", "no reference was saved")
        raise SavedCaseError(f"{saved.directory} cannot judge a run: {why}")
    try:
        backend = backends.current()
    except RuntimeError as e:  # kernels.mode.BackendError: triton imported before the interpreter was chosen
        raise SavedCaseError(f"cannot run kernels in this process: {e}") from None
    variant = _variant_of(func, saved)
    case = saved.case
    ops = _operands(saved.directory, saved.info, case, saved.operation, backend.device)[0]
    context = dict(variant=variant.name, case=case.describe(), check="against the saved float64 reference")
    start = time.perf_counter()
    try:
        with _checks(case, backend, checked):
            if checked:
                launching.launch(variant, ops, backend, case.config)
            else:
                variant.launch(*launching.arguments(ops), config=dict(case.config) or None, **ops.keywords())
                if not backend.interpreted:
                    torch.cuda.synchronize()
        oracles.memory(ops)
        unwritten = unwritten_bits(by_name(name_of(ops.c.view.dtype)))
        outputs = {"C": ops.c, **({"pre": ops.extras["pre"]} if "pre" in ops.extras else {})}
        got = {}
        for output, g in outputs.items():
            host = g.view.cpu()
            oracles.all_written(host, saved.allowances[output].reference if saved.allowances[output].reference
                                is not None else saved.allowances[output].expected, unwritten, output)
            got[output] = to_float64(host)
        if "pre" in got and "pre" in saved.allowances:
            compare.values(got["pre"], saved.allowances["pre"], name="pre")
        ratio = compare.values(got["C"], saved.allowances["C"])
    except GemmFailure as failure:
        failure.with_context(**context)
        raise
    observed = Observation(bool(saved.allowances["C"].exact.all()), ratio, time.perf_counter() - start)
    observed.values = got["C"]
    return observed
