"""The race detector accepts exactly the synchronisation patterns its docstring lists and names both
accesses of every race; every planted race in tests/race_kernels.py is caught (by the detector, by the
CI profile's search with its case shrunk to the fewest programs that can race, and where an
interleaving shows it, by order fuzzing alone); every right kernel and the built-in split-K, stream-K
and persistent variants are silent and order-independent."""

import dataclasses
import functools
import types
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from gemm_fuzz import kernels
from gemm_fuzz.properties.checks.example import Example
from gemm_fuzz.properties.evaluation import mutation
from gemm_fuzz.properties.interpreter import races, sanitizer, schedule
from gemm_fuzz.properties.judge import oracles
from gemm_fuzz.properties.judge.failures import GemmFailure
from gemm_fuzz.properties.launch import user_kernel
from gemm_fuzz.properties.model.cases import COL, GemmCase, Layout, materialize
from gemm_fuzz.properties.run import runner

pytestmark = pytest.mark.interpreter

RACE_KERNELS = Path(__file__).parent / "race_kernels.py"
ORDERS = range(30)


def _checked(launch, orders=range(6)):
    """Run `launch` under race detection in each order; return the first DataRace (None: silent)."""
    for order in orders:
        try:
            with schedule.ordered(order), races.checked():
                launch()
        except races.DataRace as e:
            return e
    return None


def _source(line: str) -> str:
    """The text at a reported 'file:line'."""
    name, number = line.rsplit(":", 1)
    path = {RACE_KERNELS.name: RACE_KERNELS, Path(__file__).name: Path(__file__)}[name]
    return path.read_text().splitlines()[int(number) - 1]


# --- message passing: program 0 writes data and raises a flag, program 1 waits for it and copies --------


@triton.jit
def message(data_ptr, flag_ptr, out_ptr, SIGNAL: tl.constexpr, WAIT: tl.constexpr, SCOPE: tl.constexpr):
    offs = tl.arange(0, 16)
    if tl.program_id(0) == 0:
        tl.store(data_ptr + offs, offs + 1.0)
        if SIGNAL == "plain":
            tl.store(flag_ptr, 1)
        else:
            tl.atomic_xchg(flag_ptr, 1, sem=SIGNAL, scope=SCOPE)
    else:
        if WAIT == "volatile":
            while tl.load(flag_ptr, volatile=True) == 0:
                pass
        else:
            while tl.atomic_add(flag_ptr, 0, sem=WAIT, scope=SCOPE) == 0:
                pass
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def _message(signal, wait, scope="gpu"):
    data, flag, out = torch.zeros(16), torch.zeros(1, dtype=torch.int32), torch.zeros(16)
    message[(2,)](data, flag, out, SIGNAL=signal, WAIT=wait, SCOPE=scope)
    assert torch.equal(out, torch.arange(1.0, 17.0))


@pytest.mark.parametrize("signal, wait, scope", [("release", "acquire", "gpu"), ("acq_rel", "acq_rel", "gpu"),
                                                 (None, None, "gpu"), ("release", "acquire", "sys")],
                         ids=["release-acquire", "acq_rel", "tl defaults", "sys scope"])
def test_release_then_acquire_orders_the_data(signal, wait, scope, backend):
    assert _checked(lambda: _message(signal, wait, scope), ORDERS) is None


@pytest.mark.parametrize("signal, wait, scope", [("relaxed", "acquire", "gpu"), ("release", "relaxed", "gpu"),
                                                 ("release", "acquire", "cta"), ("release", "volatile", "gpu")],
                         ids=["relaxed flag", "relaxed wait", "cta scope", "volatile spin"])
def test_a_flag_without_release_and_acquire_leaves_the_data_racy(signal, wait, scope, backend):
    error = _checked(lambda: _message(signal, wait, scope))
    assert error is not None
    assert (error.operand, error.offset, error.coordinates) == ("data_ptr", 0, (0,))
    assert (error.program_id, error.op, error.other_program_id, error.other_op) == ((1, 0, 0), "load", (0, 0, 0),
                                                                                   "store")
    assert "tl.load(data_ptr + offs)" in _source(error.line)
    assert "tl.store(data_ptr + offs" in _source(error.other_line)


@pytest.mark.parametrize("wait, op", [("acquire", "atomic add (acquire)"), ("volatile", "volatile load")])
def test_a_flag_set_with_a_plain_store_races_with_its_reader(wait, op, backend):
    second = set()
    for order in range(8):
        error = _checked(lambda: _message("plain", wait), [order])
        assert error.operand == "flag_ptr"
        assert {(error.program_id, error.op), (error.other_program_id, error.other_op)} == {
            ((0, 0, 0), "store"), ((1, 0, 0), op)}
        second.add(error.program_id)
    assert second == {(0, 0, 0), (1, 0, 0)}  # some orders read the flag before the store, some after


def test_the_report_names_kernel_element_programs_and_both_accesses(backend):
    error = _checked(lambda: _message("relaxed", "acquire"))
    line, other = error.line, error.other_line
    assert str(error) == (
        f"data race in kernel 'message' on data_ptr, element offset 0 [0]: load by program (1, 0, 0) at {line} and "
        f"store by program (0, 0, 0) at {other} (which ran first here); no release -> acquire chain orders program "
        "(0, 0, 0)'s access before program (1, 0, 0)'s, so on a GPU they may happen in either order or at once")
    assert line.startswith("test_races.py:") and error.kernel == "message"


# --- release sequences, counters, chains ------------------------------------------------------------------


@triton.jit
def bumped_flag(data_ptr, flag_ptr, out_ptr):
    """Program 0 releases the flag (1); program 1 bumps it to 2 with a relaxed RMW, which continues the
    release sequence; program 2 acquires 2, so it synchronizes with program 0."""
    offs = tl.arange(0, 16)
    pid = tl.program_id(0)
    if pid == 0:
        tl.store(data_ptr + offs, offs + 1.0)
        tl.atomic_xchg(flag_ptr, 1, sem="release")
    elif pid == 1:
        while tl.atomic_add(flag_ptr, 0, sem="relaxed") == 0:
            pass
        tl.atomic_add(flag_ptr, 1, sem="relaxed")
    else:
        while tl.atomic_add(flag_ptr, 0, sem="acquire") != 2:
            pass
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def test_a_relaxed_rmw_continues_the_release_sequence(backend):
    def launch():
        data, flag, out = torch.zeros(16), torch.zeros(1, dtype=torch.int32), torch.zeros(16)
        bumped_flag[(3,)](data, flag, out)
        assert torch.equal(out, torch.arange(1.0, 17.0))

    assert _checked(launch, ORDERS) is None


@triton.jit
def overwritten_flag(data_ptr, flag_ptr, out_ptr, RMW: tl.constexpr):
    """Program 0 releases the flag (1); program 1 replaces the 1 by a 2 with a relaxed xchg (an RMW: it
    continues program 0's release sequence) or a relaxed atomic store (not an RMW: it ends it); program 2
    acquires the 2."""
    offs = tl.arange(0, 16)
    pid = tl.program_id(0)
    if pid == 0:
        tl.store(data_ptr + offs, offs + 1.0)
        tl.atomic_xchg(flag_ptr, 1, sem="release")
    elif pid == 1:
        while tl.atomic_load(flag_ptr, sem="relaxed") == 0:
            pass
        if RMW:
            tl.atomic_xchg(flag_ptr, 2, sem="relaxed")
        else:
            tl.atomic_store(flag_ptr, 2, sem="relaxed")
    else:
        while tl.atomic_load(flag_ptr, sem="acquire") != 2:
            pass
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


@pytest.mark.skipif(not hasattr(tl, "atomic_store"), reason="tl.atomic_load and tl.atomic_store came with Triton 3.9")
@pytest.mark.parametrize("rmw", [True, False], ids=["relaxed xchg", "relaxed atomic store"])
def test_only_a_read_modify_write_continues_a_release_sequence(rmw, backend):
    def launch():
        data, flag, out = torch.zeros(16), torch.zeros(1, dtype=torch.int32), torch.zeros(16)
        overwritten_flag[(3,)](data, flag, out, RMW=rmw)
        assert torch.equal(out, torch.arange(1.0, 17.0))

    error = _checked(launch, ORDERS)
    assert (error is None) == rmw
    if not rmw:
        assert (error.operand, error.program_id, error.other_program_id) == ("data_ptr", (2, 0, 0), (0, 0, 0))


@triton.jit
def last_one_sums(parts_ptr, counter_ptr, out_ptr, SEM: tl.constexpr):
    """Each program stores its part, then counts itself in; the one that arrives last sums every part."""
    pid = tl.program_id(0)
    offs = tl.arange(0, 16)
    tl.store(parts_ptr + pid * 16 + offs, tl.zeros((16,), tl.float32) + pid + 1)
    if tl.atomic_add(counter_ptr, 1, sem=SEM) == tl.num_programs(0) - 1:
        total = tl.zeros((16,), tl.float32)
        for i in range(tl.num_programs(0)):
            total += tl.load(parts_ptr + i * 16 + offs)
        tl.store(out_ptr + offs, total)


def _last_one(sem):
    parts, counter, out = torch.zeros(4 * 16), torch.zeros(1, dtype=torch.int32), torch.zeros(16)
    last_one_sums[(4,)](parts, counter, out, SEM=sem)
    assert torch.equal(out, torch.full((16,), 10.0))


@triton.jit
def arrivals(parts_ptr, counter_ptr, out_ptr):
    """Every program but the last stores its part and counts itself in with a release RMW (each heads a
    release sequence and continues the earlier ones); the last waits for them all with an acquire."""
    pid = tl.program_id(0)
    offs = tl.arange(0, 16)
    last = tl.num_programs(0) - 1
    if pid < last:
        tl.store(parts_ptr + pid * 16 + offs, tl.zeros((16,), tl.float32) + pid + 1)
        tl.atomic_add(counter_ptr, 1, sem="release")
    else:
        while tl.atomic_add(counter_ptr, 0, sem="acquire") != last:
            pass
        total = tl.zeros((16,), tl.float32)
        for i in range(last):
            total += tl.load(parts_ptr + i * 16 + offs)
        tl.store(out_ptr + offs, total)


def test_an_acquire_synchronizes_with_every_release_rmw_before_the_value_it_reads(backend):
    def launch():
        parts, counter, out = torch.zeros(4 * 16), torch.zeros(1, dtype=torch.int32), torch.zeros(16)
        arrivals[(5,)](parts, counter, out)
        assert torch.equal(out, torch.full((16,), 10.0))

    assert _checked(launch, ORDERS) is None


def test_a_counter_of_arrivals_with_acq_rel_orders_every_part_before_the_last(backend):
    assert _checked(lambda: _last_one("acq_rel"), ORDERS) is None


@pytest.mark.parametrize("sem", ["relaxed", "release", "acquire"])
def test_a_counter_of_arrivals_needs_acquire_and_release(sem, backend):
    error = _checked(lambda: _last_one(sem))
    assert error is not None and error.operand == "parts_ptr" and {error.op, error.other_op} == {"load", "store"}


@triton.jit
def chain(data_ptr, flags_ptr, out_ptr, MIDDLE_SEM: tl.constexpr):
    """0 -> 1 -> 2: program 1 never touches the data but passes program 0's release on."""
    offs = tl.arange(0, 16)
    pid = tl.program_id(0)
    if pid == 0:
        tl.store(data_ptr + offs, offs + 1.0)
        tl.atomic_xchg(flags_ptr, 1, sem="release")
    elif pid == 1:
        while tl.atomic_add(flags_ptr, 0, sem=MIDDLE_SEM) == 0:
            pass
        tl.atomic_xchg(flags_ptr + 1, 1, sem="release")
    else:
        while tl.atomic_add(flags_ptr + 1, 0, sem="acquire") == 0:
            pass
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


@pytest.mark.parametrize("middle, racy", [("acquire", False), ("relaxed", True)])
def test_happens_before_is_transitive_through_a_program_that_acquires(middle, racy, backend):
    def launch():
        data, flags, out = torch.zeros(16), torch.zeros(2, dtype=torch.int32), torch.zeros(16)
        chain[(3,)](data, flags, out, MIDDLE_SEM=middle)
        assert torch.equal(out, torch.arange(1.0, 17.0))

    error = _checked(launch, ORDERS)
    assert (error is not None) == racy
    if racy:
        assert (error.operand, error.program_id, error.other_program_id) == ("data_ptr", (2, 0, 0), (0, 0, 0))


# --- what is not a race, and what is ----------------------------------------------------------------------


@triton.jit
def halves(x_ptr, MASKED: tl.constexpr):
    """Program 0 writes the first half, program 1 the second; without the mask both write all 16."""
    offs = tl.arange(0, 16)
    pid = tl.program_id(0)
    mine = (offs < 8) == (pid == 0)
    if MASKED:
        tl.store(x_ptr + offs, offs + 0.0, mask=mine)
    else:
        tl.store(x_ptr + offs, offs + 0.0)


@pytest.mark.parametrize("masked", [True, False])
def test_masked_off_lanes_access_nothing(masked, backend):
    error = _checked(lambda: halves[(2,)](torch.zeros(16), MASKED=masked))
    assert (error is None) == masked
    if not masked:
        assert (error.op, error.other_op, error.offset) == ("store", "store", 0)


@triton.jit
def everyone_adds(x_ptr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    tl.atomic_add(x_ptr + tl.arange(0, 16), 1.0, sem=SEM, scope=SCOPE)


@pytest.mark.parametrize("sem, scope", [("relaxed", "gpu"), ("acq_rel", "gpu"), ("relaxed", "cta")])
def test_atomics_never_race_with_each_other(sem, scope, backend):
    def launch():
        x = torch.zeros(16)
        everyone_adds[(5,)](x, SEM=sem, SCOPE=scope)
        assert torch.equal(x, torch.full((16,), 5.0))

    assert _checked(launch, ORDERS) is None


@triton.jit
def peek_while_others_add(x_ptr, out_ptr):
    offs = tl.arange(0, 16)
    if tl.program_id(0) == 0:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs))
    else:
        tl.atomic_add(x_ptr + offs, 1.0)


def test_a_plain_load_races_with_another_programs_atomic(backend):
    error = _checked(lambda: peek_while_others_add[(2,)](torch.zeros(16), torch.zeros(16)))
    assert (error.op, error.program_id, error.other_op, error.other_program_id) == (
        "atomic add (acq_rel)", (1, 0, 0), "load", (0, 0, 0))


@triton.jit
def fill(x_ptr):
    offs = tl.program_id(0) * 16 + tl.arange(0, 16)
    tl.store(x_ptr + offs, offs + 0.0)


@triton.jit
def read_the_next_block(x_ptr, y_ptr, FILL_FIRST: tl.constexpr):
    """Program p reads block p + 1 of x (which the next program fills, if FILL_FIRST) into block p of y."""
    pid = tl.program_id(0)
    if FILL_FIRST:
        fill(x_ptr)
    offs = ((pid + 1) % tl.num_programs(0)) * 16 + tl.arange(0, 16)
    tl.store(y_ptr + pid * 16 + tl.arange(0, 16), tl.load(x_ptr + offs))


@pytest.mark.parametrize("one_launch", [False, True])
def test_separate_launches_are_ordered(one_launch, backend):
    def launch():
        x, y = torch.zeros(48), torch.zeros(48)
        if not one_launch:
            fill[(3,)](x)
        read_the_next_block[(3,)](x, y, FILL_FIRST=one_launch)
        assert torch.equal(y, torch.arange(48.0).roll(-16))

    error = _checked(launch, [0])
    assert (error is not None) == one_launch
    if one_launch:  # program 0 read block 1 before program 1 filled it
        assert (error.op, error.program_id, error.other_op, error.other_program_id) == (
            "store", (1, 0, 0), "load", (0, 0, 0))


# --- the planted races of tests/race_kernels.py ----------------------------------------------------------


@functools.cache
def _user(name: str):
    return user_kernel.load(f"{RACE_KERNELS}:{name}")


RIGHT = ["split_k", "stream_k", "persistent", "zeroed_by_program_0"]
# 2 x 2 tiles of 5 K-iterations: stream-K's 3 programs share tiles 1 and 2; persistent's chunk is 2 tiles
CASE = GemmCase(20, 17, 70, "fp16", "fp16", profile="small_ints", seed=3)


@pytest.mark.parametrize("name", RIGHT)
def test_right_kernels_are_silent_and_right_under_every_drawn_order(name, backend):
    for order in ORDERS:  # the runner checks races on every example, in the case's order
        assert runner.check(_user(name), dataclasses.replace(CASE, order=order)).exact


# name -> (operand, (op, text on its line), (other op, text on its line)), as program-id order reports it
CAUGHT = {
    "split_k_plain_partials": ("ws_ptr", ("load", "BUG: plain read-modify-write"),
                               ("store", "BUG: plain read-modify-write")),
    "stream_k_partial_before_flag": ("partials_ptr", ("load", "BUG: read before the flag"),
                                     ("store", "tl.store(slot, acc)")),
    "stream_k_flag_before_partial": ("partials_ptr", ("load", "partial = tl.load(slot)"),
                                     ("store", "BUG: written after the flag")),
    "stream_k_relaxed_flag": ("partials_ptr", ("load", "partial = tl.load(slot)"), ("store", "tl.store(slot, acc)")),
    "stream_k_volatile_spin": ("partials_ptr", ("load", "partial = tl.load(slot)"), ("store", "tl.store(slot, acc)")),
    "persistent_shared_tile": ("c_ptr", ("store", "tl.store(c_ptr"), ("store", "tl.store(c_ptr")),
    "relies_on_program_0": ("ws_ptr", ("atomic add (relaxed)", "BUG without WAIT"), ("store", "tl.store(ws, tl.zeros")),
}


@pytest.mark.parametrize("name", CAUGHT)
def test_every_planted_race_is_caught_and_named(name, backend):
    with schedule.ordered(0):  # program-id order, no race detector: every one of them gives the right C
        assert _plain_result(_user(name), CASE)
    with pytest.raises(races.DataRace) as info:
        runner.check(_user(name), CASE)
    error, (operand, (op, text), (other_op, other_text)) = info.value, CAUGHT[name]
    assert (error.operand, error.op, error.other_op) == (operand, op, other_op), str(error)
    assert text in _source(error.line) and other_text in _source(error.other_line), str(error)
    assert error.program_id != error.other_program_id


# name -> the cases the CI profile's search may shrink it to: the fewest programs that can race
# (race_kernels' 16 x 16 x 16 tiles: stream-K needs a second K strip to share a tile, persistent a
# second tile along either axis; the draws depend on the kernel's identity, its path included)
SHRUNK = {
    "split_k_plain_partials": [dict(M=1, N=1, K=1)],
    "stream_k_partial_before_flag": [dict(M=1, N=1, K=17)],
    "stream_k_flag_before_partial": [dict(M=1, N=1, K=17)],
    "stream_k_relaxed_flag": [dict(M=1, N=1, K=17)],
    "stream_k_volatile_spin": [dict(M=1, N=1, K=17)],
    "persistent_shared_tile": [dict(M=1, N=17, K=1), dict(M=17, N=1, K=1)],
    "relies_on_program_0": [dict(M=1, N=1, K=1)],
}


@pytest.mark.parametrize("name", SHRUNK)
def test_the_ci_search_catches_every_planted_race_and_shrinks_it(name, backend):
    """The search the property tests run (CI profile: 25 derandomized examples, the suite's strategies)
    finds each race and shrinks it to a smallest case; one element less along the grown axis is silent."""
    variant = _user(name)
    found = mutation.hunt(types.SimpleNamespace(name=variant.name, variant=variant, dtype="fp16"), backend)
    assert found.caught and found.error == "DataRace", found.summary()
    smallest = [GemmCase(**dims, dtype="fp16", out_dtype="fp16") for dims in SHRUNK[name]]
    assert found.shrunk in smallest, found.summary()
    for case in smallest:
        grown = [axis for axis in "MNK" if getattr(case, axis) > 1]
        if grown:
            runner.check(variant, dataclasses.replace(case, **{grown[0]: getattr(case, grown[0]) - 1}))


@pytest.mark.parametrize("name", ["stream_k_partial_before_flag", "stream_k_flag_before_partial",
                                  "relies_on_program_0"])
def test_order_fuzzing_alone_shows_the_races_an_interleaving_can_show(name, backend):
    wrong = []
    for order in ORDERS:
        with schedule.ordered(order):
            if not _plain_result(_user(name), CASE):
                wrong.append(order)
    assert wrong and 0 not in wrong


def _plain_result(variant, case) -> bool:
    """Is the variant's C right on the case, launched outside the runner (no race detector, in whatever
    order the enclosing block sets)?"""
    ops = materialize(case)
    with sanitizer.bounds_checked():
        variant.launch(ops.a.view, ops.b.view, ops.c.view)
    try:
        oracles.against_reference(ops, variant.precision)
    except GemmFailure:
        return False
    return True


# --- the built-in variants -------------------------------------------------------------------------------

BUILT_IN_CASES = [
    CASE,
    GemmCase(33, 40, 50, "fp16", "fp16", a=COL, c=Layout(pad=3), profile="small_ints", seed=5),
    GemmCase(17, 33, 37, "fp32", "fp32", b=Layout(step=2), profile="normal", seed=7),
]


@pytest.mark.parametrize("name, deterministic", [("split_k", False), ("stream_k", True), ("persistent", True)])
def test_built_in_variants_are_race_free_and_order_independent(name, deterministic, backend):
    """Every order of every case runs under the race detector and is judged against the reference (a
    race or a wrong C raises). The deterministic variants (stream-K, persistent) must also give the same
    bits in every order, on every case, exact or not. Split-K is not order-independent: its partial
    sums are added to C with atomics in whatever order the programs come, so an inexact case gives
    different bits in different orders; for it the test claims only that every order is race-free and
    within the reference's bound (on an exact case the bound is equality, so there every order agrees)."""
    variant = kernels.get(name)
    assert variant.deterministic == deterministic, f"{name} declares deterministic={variant.deterministic}"
    for case in BUILT_IN_CASES:
        results = set()
        for order in ORDERS:  # under the race detector, as every example runs
            with runner.Runner(runner.RunSettings(), backend) as run:
                observed = run.run_once(Example("output", name, dataclasses.replace(case, order=order)))
            results.add(observed.values.tobytes())
        if deterministic:
            assert len(results) == 1, f"{name} gives {len(results)} different results on {case.describe()}"
