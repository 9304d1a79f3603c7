"""Program-order fuzzing: order 0 is program-id order, an order replays the same interleaving, drawn
orders reach other interleavings, waits never block the interpreter, a true deadlock is reported with
what every program waits on, and the bounds sanitizer keeps working (right program ids) inside."""

import itertools
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from gemm_fuzz.properties.interpreter import sanitizer, schedule
from gemm_fuzz.properties.judge import oracles
from gemm_fuzz.properties.launch import user_kernel
from gemm_fuzz.properties.model.cases import GemmCase, materialize
from gemm_fuzz.reference import numpy_ref

pytestmark = pytest.mark.interpreter

def _judged(variant, case):
    """Launch a variant on a case as the runner does (bounds-checked), in whatever order the enclosing
    block sets, and judge it: (verdict, operands)."""
    ops = materialize(case)
    with sanitizer.bounds_checked():
        variant.launch(ops.a.view, ops.b.view, ops.c.view)
    return oracles.against_reference(ops, variant.precision), ops


TESTS = Path(__file__).parent
RACE_KERNELS = TESTS / "race_kernels.py"
ORDERS = range(30)


@triton.jit
def tickets(counter_ptr, seen_ptr, ROUNDS: tl.constexpr):
    """Each program takes ROUNDS tickets and writes its linear program id into the ticket's slot."""
    pid = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    for _ in tl.static_range(ROUNDS):
        tl.store(seen_ptr + tl.atomic_add(counter_ptr, 1), pid)


def _tickets(grid, rounds=1, order=0):
    programs = grid[0] * grid[1]
    counter, seen = torch.zeros(1, dtype=torch.int32), torch.full((programs * rounds,), -1, dtype=torch.int32)
    with schedule.ordered(order) as o:
        tickets[grid](counter, seen, ROUNDS=rounds)
    return seen.tolist(), o.runs[-1]


def test_order_0_is_program_id_order(backend):
    seen, run = _tickets((2, 3))
    assert seen == list(range(6))
    ids = [(x, y, 0) for x in range(2) for y in range(3)]
    assert run.starts == run.steps == tuple(ids)  # each program ran once, to its end, in id order
    assert run.waits == 0


def test_the_same_order_replays_the_same_interleaving(backend):
    for order in (1, 7, -3, 2**40):
        first, again = _tickets((4, 1), rounds=2, order=order), _tickets((4, 1), rounds=2, order=order)
        assert first == again


def test_drawn_orders_reach_every_start_order_and_interleave_programs(backend):
    starts = {tuple(_tickets((3, 1), order=order)[0]) for order in range(1, 60)}
    assert starts == set(itertools.permutations(range(3)))
    # with two atomics each, some schedule runs another program between a program's two tickets
    interleaved = [order for order in range(1, 30) if _tickets((2, 1), rounds=2, order=order)[0] in ([0, 1, 0, 1],
                                                                                                    [1, 0, 1, 0])]
    assert interleaved


def test_order_must_be_an_int(backend):
    with pytest.raises(TypeError, match="order must be an int"):
        schedule.ordered("7")


@triton.jit
def relay(flags_ptr, out_ptr, LAST: tl.constexpr):
    """Program i waits for program i + 1's flag, then raises its own and records how many programs had
    passed before it: the waits point at higher ids, which program-id order runs last."""
    pid = tl.program_id(0)
    if pid < LAST:
        while tl.atomic_add(flags_ptr + pid + 1, 0, sem="acquire") == 0:
            pass
    tl.store(out_ptr + pid, tl.atomic_add(flags_ptr + LAST + 1, 1))
    tl.atomic_xchg(flags_ptr + pid, 1, sem="release")


@pytest.mark.parametrize("order", range(12))
def test_a_wait_on_a_later_program_never_blocks_the_interpreter(order, backend):
    flags, out = torch.zeros(6, dtype=torch.int32), torch.full((5,), -1, dtype=torch.int32)
    with schedule.ordered(order) as o:
        relay[(5,)](flags, out, LAST=4)
    assert out.tolist() == [4, 3, 2, 1, 0]
    if order == 0:  # programs 0 to 3 start, each finds its successor's flag down and waits
        assert o.runs[0].waits == 4


def _user(name, path=RACE_KERNELS):
    return user_kernel.load(f"{path}:{name}")


# 2 x 2 tiles of 5 K-iterations over 3 programs: shares end inside tiles 1 and 2, so two fix-ups wait
SPLIT_TILES = GemmCase(20, 17, 70, "fp16", "fp16", profile="small_ints", seed=3)


@pytest.mark.parametrize("name", ["stream_k", "zeroed_by_program_0"])
def test_a_right_spin_wait_kernel_gives_the_right_result_under_every_drawn_order(name, backend):
    variant = _user(name)
    waited = 0
    for order in ORDERS:
        with schedule.ordered(order) as o:
            assert _judged(variant, SPLIT_TILES)[0].exact
        waited += sum(run.waits for run in o.runs)
    assert waited, "no schedule ever made a program wait: the test shows nothing"


def _line(path: Path, text: str) -> str:
    """file:line of the one line of `path` that holds `text`."""
    numbers = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(numbers) == 1, f"{text!r} is on lines {numbers} of {path.name}"
    return f"{path.name}:{numbers[0]}"


def test_a_wait_no_program_will_end_is_a_deadlock_not_a_hang(backend):
    hang = _user("hang", TESTS / "fault_kernels.py")
    with pytest.raises(schedule.Deadlock) as info:
        with schedule.ordered(5):
            _judged(hang, GemmCase(1, 1, 1, "fp16", "fp16"))
    error = info.value
    assert error.kernel == "_wait_for_flag" and error.finished == 0
    (waiter,) = error.waiting
    line = _line(TESTS / "fault_kernels.py", "while tl.atomic_add(flag_ptr, 0) == 0")
    assert waiter == schedule.Waiter((0, 0, 0), "atomic add", "flag_ptr", 0, (0,), line, 0)
    assert f"program (0, 0, 0) at {line} spins on atomic add of flag_ptr, element offset 0 [0], which stays 0" in str(
        error)


@triton.jit
def wait_for_each_other(flags_ptr, out_ptr, VOLATILE: tl.constexpr):
    """Programs 0 and 1 each wait for the other's flag before raising their own; program 2 just ends."""
    pid = tl.program_id(0)
    if pid < 2:
        if VOLATILE:
            while tl.load(flags_ptr + 1 - pid, volatile=True) == 0:  # spins on the other's flag: volatile load
                pass
        else:
            while tl.atomic_cas(flags_ptr + 1 - pid, 1, 1) == 0:  # spins on the other's flag: atomic cas
                pass
        tl.atomic_xchg(flags_ptr + pid, 1)
    tl.store(out_ptr + pid, 1)


@pytest.mark.parametrize("volatile", [False, True], ids=["cas", "volatile load"])
@pytest.mark.parametrize("order", [0, 1, 2, 3])
def test_programs_that_wait_for_each_other_are_a_deadlock(volatile, order, backend):
    flags, out = torch.zeros(2, dtype=torch.int32), torch.zeros(3, dtype=torch.int32)
    with pytest.raises(schedule.Deadlock) as info:
        with schedule.ordered(order):
            wait_for_each_other[(3,)](flags, out, VOLATILE=volatile)
    error = info.value
    op = "volatile load" if volatile else "atomic cas"
    line = _line(Path(__file__), "# spins on the other's flag: " + op)
    assert sorted(error.waiting, key=lambda w: w.program_id) == [
        schedule.Waiter((0, 0, 0), op, "flags_ptr", 1, (1,), line, 0),
        schedule.Waiter((1, 0, 0), op, "flags_ptr", 0, (0,), line, 0)]
    # program 2 never waits: the deadlock is declared only once no program can run, so it has finished
    assert error.finished == 1
    assert "deadlock in kernel 'wait_for_each_other'" in str(error)


@triton.jit
def count_then_copy(counter_ptr, src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    """Copies BLOCK elements per program; `<=` for `<` in the mask reads one past the end, in the
    program that holds element n. The atomic first lets every program be suspended mid-kernel."""
    tl.atomic_add(counter_ptr, 1)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs <= n), mask=offs < n)


@pytest.mark.parametrize("order", range(8))
def test_the_sanitizer_names_the_right_program_inside_an_ordered_block(order, backend):
    src, dst, counter = torch.arange(40, dtype=torch.float32), torch.zeros(40), torch.zeros(1, dtype=torch.int32)
    with schedule.ordered(order) as o:
        with pytest.raises(sanitizer.OutOfBoundsAccess) as info:
            with sanitizer.bounds_checked():
                count_then_copy[(4,)](counter, src, dst, 40, BLOCK=16)
    assert info.value.program_id == (2, 0, 0) and info.value.operand == "src_ptr" and info.value.offset == 40
    assert len(o.runs) == 1


def test_the_sanitizer_and_the_judge_run_under_drawn_orders(backend):
    case = GemmCase(17, 33, 20, "fp16", "fp16", profile="small_ints", seed=1)
    for order in range(5):
        with schedule.ordered(order) as o:
            observation, ops = _judged(_user("stream_k"), case)
        assert observation.exact and o.runs
        assert torch.equal(ops.c.view, torch.from_numpy(numpy_ref.product(ops.a.view, ops.b.view).value).half())


def test_the_interpreter_fixes_still_hold_inside_an_ordered_block(backend):
    from gemm_fuzz.properties.interpreter import fixes

    with schedule.ordered(3):
        assert fixes.masked_off_lanes_are_poisoned() and fixes.bf16_dot_is_exact()
        assert fixes.tf32_dot_rounds() == fixes.TF32_ROUNDING


def test_install_is_idempotent_and_says_what_it_installed(backend):
    header = schedule.install()
    assert schedule.install() is header and f"Triton {triton.__version__}" in header


def test_a_triton_release_that_renames_a_hook_fails_loudly(backend, monkeypatch):
    from triton.runtime import interpreter

    monkeypatch.delattr(interpreter.InterpreterBuilder, "create_atomic_cas")
    monkeypatch.delattr(interpreter, "_patch_lang")
    with pytest.raises(schedule.SchedulerUnavailable, match=r"cannot install on Triton 9\.9: its interpreter has no "
                                                            r"InterpreterBuilder\.create_atomic_cas, _patch_lang"):
        schedule._require(interpreter, "9.9")


def test_install_refuses_to_replace_a_grid_loop_someone_else_patched(backend):
    from triton.runtime import interpreter

    with pytest.raises(schedule.SchedulerUnavailable,
                       match=r"already replaced by gemm_fuzz\.properties\.interpreter\.schedule\._grid_call; "
                             r"schedule\.install\(\) must run first"):
        schedule._require(interpreter, triton.__version__)
