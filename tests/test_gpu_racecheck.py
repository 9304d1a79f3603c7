"""compute-sanitizer racecheck on compiled kernels (GPU only), and what it cannot see.

racecheck watches shared memory between the threads of one block: a kernel whose threads write and
read one shared word with no barrier between them is reported. It never watches global memory, so
the races between programs planted in tests/race_kernels.py (the ones GEMM kernels have: split-K
partials, stream-K flags, persistent tile ownership) go unreported under it; the interpreter's race
detector, on every CPU example, is what catches those (tests/test_races.py)."""

from pathlib import Path

import pytest

from gemm_fuzz.properties.checks.example import Example
from gemm_fuzz.properties.judge.failures import RacecheckError
from gemm_fuzz.properties.launch import user_kernel
from gemm_fuzz.properties.model.cases import GemmCase
from gemm_fuzz.properties.run import isolation, runner

pytestmark = pytest.mark.gpu

RACE_KERNELS = Path(__file__).parent / "race_kernels.py"
RAGGED = (130, 257, 65)
CASE = GemmCase(20, 17, 70, "fp16", "fp16", profile="small_ints", seed=3)


def _user_settings(name: str) -> tuple[str, runner.RunSettings]:
    kernel = user_kernel.load(f"{RACE_KERNELS}:{name}")
    ref = user_kernel.loaded(kernel.name)[1]
    return kernel.name, runner.RunSettings(backend="cuda", mode="racecheck", kernel=ref.to_dict())


def test_racecheck_reports_a_shared_memory_race(backend):
    name, settings = _user_settings("shared_memory_race")
    with runner.Runner(settings, backend) as run, pytest.raises(RacecheckError) as found:
        run.run_once(Example("reference", name, CASE))
    # a hazard report on shared memory ("Error: Potential RAW hazard detected at __shared__ 0x0 in block
    # (0,0,0)"), not only the heading the verdict puts above whatever compute-sanitizer printed
    hazards = [line for line in found.value.reports if "hazard" in line.lower() or "race" in line.lower()]
    assert any("shared" in line.lower() for line in hazards), str(found.value)


@pytest.mark.parametrize("name", ["split_k_plain_partials", "stream_k_flag_before_partial", "persistent_shared_tile"])
def test_racecheck_cannot_see_races_between_programs_in_global_memory(name, backend):
    """Each kernel has a global-memory race the interpreter's race detector catches; racecheck reports
    nothing (C itself may come out right or wrong, as the programs happen to overlap: the example must
    run and be judged, passing or failing on C's values, not be refused or crash)."""
    name, settings = _user_settings(name)
    worker = isolation.Worker("cuda", sanitizer="racecheck", kernel=settings.kernel)
    try:
        answer = worker.run(Example("reference", name, CASE).to_dict(), timeout=900)
        assert isolation.sanitizer_errors(answer.log) == [], answer.log[-20:]
        payload = answer.payload
        assert payload["status"] == "pass" or (
            payload["status"] == "fail" and payload["failure"]["type"] in ("NotBitExact", "ValueOutOfBound")), payload
    finally:
        worker.close()
