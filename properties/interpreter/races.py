"""An exact global-memory race detector for Triton's CPU interpreter.

    with races.checked():
        kernel[grid](...)          # or any launcher that runs Triton kernels

Each program of a launch is one thread of the PTX memory model (a CTA: its own accesses are ordered
by program order). Two accesses by different programs to the same element *conflict* when at least
one writes; a conflicting pair is a *data race*, raised as `DataRace` at the second access, unless

  * both are strong (atomics of any kind, volatile loads): atomics to one location never race with
    each other, whatever their `sem` and `scope`; or
  * one happens before the other: a chain of program order and synchronizes-with edges leads from it
    to the other.

A synchronizes-with edge goes from a release (an atomic with sem "release" or "acq_rel", and gpu or
sys scope) on a location to an acquire ("acquire" or "acq_rel", gpu or sys scope) on it that reads
the value written by the release or by any read-modify-write after it on that location (the release
sequence). Relaxed atomics order nothing but continue release sequences when they are
read-modify-writes; a plain store or a non-RMW atomic store to the location ends them. "cta" scope
orders nothing between programs (each program is a CTA). Happens-before is what the executed
interleaving establishes, tracked with vector clocks; the schedule (schedule.ordered) chooses the
interleaving. Separate launches are ordered (each launch starts with no history). Masked-off lanes
access nothing. Triton's defaults: scope "gpu"; sem "acq_rel" for read-modify-writes and cas,
"acquire" for tl.atomic_load, "release" for tl.atomic_store.

Accepted, so:
  * programs that write disjoint elements and read shared inputs (tiled, persistent, one owner per tile);
  * atomic accumulation into shared elements (split-K with tl.atomic_add, any sem);
  * message passing: plain stores of the data, then a release (or acq_rel) atomic on a flag; the
    consumer waits on the flag with an acquire atomic (e.g. tl.atomic_add(flag, 0, sem="acquire")
    until it reads the value), then plain-loads the data (stream-K's fix-up);
  * a counter of arrivals: each program stores its data and then does an acq_rel atomic_add on the
    counter; the one that sees the last count may read everyone's data (the RMWs form a release
    sequence); so may a program that waits with an acquire until release RMWs brought the count up;
  * chains: program 0 releases to 1, 1 releases to 2: 0's stores happen before 2's loads.

Races, so:
  * a plain load or store of an element that another program plain-stores (or a plain store of one
    that another program plain-loads), with no chain between them:
    partials combined by plain read-modify-write, a flag set with a plain store or a relaxed atomic,
    a flag read with a relaxed atomic, data stored after the release or loaded before the acquire,
    two owners of one tile, a cta-scope release/acquire between programs;
  * a plain access against another program's conflicting strong one (an atomic, or a volatile load
    against a plain store) with no chain between them (PTX: a data race unless both are strong), e.g.
    program 0 zeroing a workspace with plain stores while the others atomically add into it;
  * a volatile-load spin without an acquire. A volatile load is a strong relaxed read (PTX: ld.volatile
    has the semantics of ld.relaxed.sys): it never races with the flag's atomics, and it sees the flag
    set, but it orders nothing. The plain loads of the data after it are not ordered after the
    producer's stores: the GPU may serve them from a stale cache line or issue them before the flag
    load. Read the flag with an acquire atomic instead.

Not modelled: fences (Triton exposes none; tl.debug_barrier orders a CTA's threads, not programs);
PTX's rule that two cta-scope atomics of different CTAs are not morally strong (here atomics never
race); memory outside the launch's tensor arguments. Arguments that share memory share their shadow,
at the granularity of the greatest common divisor of their element sizes and offsets.
"""

from __future__ import annotations

import math

import numpy as np

from gemm_fuzz.properties.interpreter import schedule
from gemm_fuzz.properties.interpreter.schedule import Access, Launch
from gemm_fuzz.properties.judge.failures import DataRace


class _Log:
    """The latest access of one kind by each program to each shadow slot: its clock and site."""

    def __init__(self):
        self.slot = np.empty(0, dtype=np.int64)
        self.prog = np.empty(0, dtype=np.int32)
        self.clock = np.empty(0, dtype=np.int32)
        self.site = np.empty(0, dtype=np.int32)
        self.pending: list[tuple[np.ndarray, int, int, int]] = []
        self.pending_size = 0

    def add(self, slots: np.ndarray, prog: int, clock: int, site: int) -> None:
        self.pending.append((slots, prog, clock, site))
        self.pending_size += len(slots)
        if self.pending_size > max(1 << 16, 2 * len(self.slot)):
            self._merge()

    def _merge(self) -> None:
        if not self.pending:
            return
        sizes = [len(s) for s, _, _, _ in self.pending]
        slot = np.concatenate([self.slot] + [s for s, _, _, _ in self.pending])
        prog = np.concatenate([self.prog, np.repeat([p for _, p, _, _ in self.pending], sizes).astype(np.int32)])
        clock = np.concatenate([self.clock, np.repeat([c for _, _, c, _ in self.pending], sizes).astype(np.int32)])
        site = np.concatenate([self.site, np.repeat([s for _, _, _, s in self.pending], sizes).astype(np.int32)])
        order = np.lexsort((np.arange(len(slot)), prog, slot))  # by slot, then program, then age
        slot, prog, clock, site = slot[order], prog[order], clock[order], site[order]
        latest = np.ones(len(slot), dtype=bool)
        latest[:-1] = (slot[1:] != slot[:-1]) | (prog[1:] != prog[:-1])
        self.slot, self.prog, self.clock, self.site = slot[latest], prog[latest], clock[latest], site[latest]
        self.pending, self.pending_size = [], 0

    def unordered(self, slots: np.ndarray, clocks: np.ndarray) -> tuple[int, int] | None:
        """The first of `slots` with an entry that does not happen before a program with vector clock
        `clocks`: (position in slots, entry), or None."""
        self._merge()
        if not len(self.slot):
            return None
        lo = np.searchsorted(self.slot, slots, "left")
        counts = np.searchsorted(self.slot, slots, "right") - lo
        total = int(counts.sum())
        if not total:
            return None
        position = np.repeat(np.arange(len(slots)), counts)
        entry = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(total)
        late = self.clock[entry] > clocks[self.prog[entry]]
        if not late.any():
            return None
        j = int(np.argmax(late))
        return int(position[j]), int(entry[j])


class _Region:
    """Memory shared by one or more tensor arguments, in slots of `unit` bytes."""

    def __init__(self, start: int, end: int, unit: int):
        self.start, self.end, self.unit = start, end, unit
        self.size = -(-(end - start) // unit)
        self.plain_writer: np.ndarray | None = None  # last plain store per slot: program (-1: none), clock, site
        self.plain_clock: np.ndarray | None = None
        self.plain_site: np.ndarray | None = None
        self.atomic_writes = _Log()
        self.plain_reads = _Log()
        self.strong_reads = _Log()
        self.released: dict[int, np.ndarray] = {}  # slot -> vector clock of the release sequences on it

    def plain_store(self, slots: np.ndarray, prog: int, clock: int, site: int) -> None:
        if self.plain_writer is None:
            self.plain_writer = np.full(self.size, -1, dtype=np.int32)
            self.plain_clock = np.zeros(self.size, dtype=np.int32)
            self.plain_site = np.zeros(self.size, dtype=np.int32)
        self.plain_writer[slots], self.plain_clock[slots], self.plain_site[slots] = prog, clock, site

    def unordered_plain_store(self, slots: np.ndarray, clocks: np.ndarray) -> int | None:
        if self.plain_writer is None:
            return None
        writer = self.plain_writer[slots]
        late = (writer >= 0) & (self.plain_clock[slots] > clocks[np.maximum(writer, 0)])
        return int(np.argmax(late)) if late.any() else None


def _regions(launch: Launch) -> list[_Region]:
    spans = sorted((o.ptr, o.end, o.itemsize) for o in launch.arguments)
    regions: list[list[int]] = []  # [start, end, unit]
    for start, end, itemsize in spans:
        if regions and start < regions[-1][1]:
            region = regions[-1]
            region[1] = max(region[1], end)
            region[2] = math.gcd(region[2], itemsize, start - region[0])
        else:
            regions.append([start, end, itemsize])
    return [_Region(*r) for r in regions]


def _acquires(access: Access) -> bool:
    return access.strong and access.sem in ("acquire", "acq_rel") and access.scope != "cta"


def _releases(access: Access) -> bool:
    return access.strong and access.sem in ("release", "acq_rel") and access.scope != "cta"


class _Detector:
    """The shadow state of one launch."""

    def __init__(self, launch: Launch):
        self.launch = launch
        self.regions = _regions(launch)
        self.clocks: dict[int, np.ndarray] = {}  # program index -> its vector clock, while it runs

    def finished(self, prog: int) -> None:
        self.clocks.pop(prog, None)

    def _clock(self, prog: int) -> np.ndarray:
        clocks = self.clocks.get(prog)
        if clocks is None:
            clocks = self.clocks[prog] = np.zeros(len(self.launch.programs), dtype=np.int32)
            clocks[prog] = 1
        return clocks

    def _slots(self, access: Access):
        addrs = access.addrs.astype(np.int64)  # user-space addresses are below 2**63
        for region in self.regions:
            lanes = np.flatnonzero((addrs >= region.start) & (addrs < region.end))
            if not lanes.size:
                continue
            slots = (addrs[lanes] - region.start) // region.unit
            width = max(1, access.itemsize // region.unit)
            if width > 1:  # an access wider than a slot covers several
                slots = np.minimum((slots[:, None] + np.arange(width)).reshape(-1), region.size - 1)
                lanes = np.repeat(lanes, width)
            yield region, slots, lanes

    def access(self, prog: int, access: Access, site: int) -> None:
        clocks = self._clock(prog)
        for region, slots, lanes in self._slots(access):
            written = slots if access.wrote is None else slots[access.wrote[lanes]]
            self._check(prog, access, site, region, slots if access.reads else slots[:0],
                        written if access.writes else written[:0], clocks)
            if _acquires(access):
                for slot in np.unique(slots).tolist():
                    released = region.released.get(slot)
                    if released is not None:
                        np.maximum(clocks, released, out=clocks)
            self._record(prog, access, site, region, slots, written, clocks)
        if access.writes and _releases(access):
            clocks[prog] += 1  # what this program does next is not covered by the release

    def _check(self, prog, access, site, region, reads, writes, clocks) -> None:
        """Raise DataRace if an earlier conflicting access of another program is not ordered before this one:
        a read conflicts with writes, a write with everything, and no two strong accesses conflict."""
        weak = not access.strong
        read_logs = [region.atomic_writes] if weak else []
        write_logs = [region.plain_reads] + ([region.atomic_writes, region.strong_reads] if weak else [])
        for slots, logs in ((reads, read_logs), (writes, write_logs)):
            if not slots.size:
                continue
            j = region.unordered_plain_store(slots, clocks)
            if j is not None:
                s = slots[j]
                self._race(prog, site, region, s, int(region.plain_writer[s]), int(region.plain_site[s]))
            for log in logs:
                found = log.unordered(slots, clocks)
                if found is not None:
                    j, entry = found
                    self._race(prog, site, region, slots[j], int(log.prog[entry]), int(log.site[entry]))

    def _record(self, prog, access, site, region, slots, written, clocks) -> None:
        now = int(clocks[prog])
        if access.reads:
            (region.strong_reads if access.strong else region.plain_reads).add(slots, prog, now, site)
        if not access.writes or not written.size:
            return
        if access.strong:
            region.atomic_writes.add(written, prog, now, site)
        else:
            region.plain_store(written, prog, now, site)
        if _releases(access):  # heads a release sequence; an RMW also continues the ones already there
            for slot in np.unique(written).tolist():
                before = region.released.get(slot)
                joined = access.rmw and before is not None
                region.released[slot] = np.maximum(before, clocks) if joined else clocks.copy()
        elif region.released and not access.rmw:  # a plain or relaxed non-RMW store ends release sequences
            for slot in np.intersect1d(written, np.fromiter(region.released, dtype=np.int64)).tolist():
                del region.released[slot]

    def _race(self, prog, site, region, slot, other, other_site) -> None:
        launch = self.launch
        address = region.start + int(slot) * region.unit
        operand, offset, coords = launch.locate(address)
        op, line = launch.sites[site]
        other_op, other_line = launch.sites[other_site]
        pid, other_pid = launch.programs[prog], launch.programs[other]
        where = (f"{operand}, element offset {offset}" + (f" {list(coords)}" if coords is not None else "")
                 if operand else f"address {address:#x}")
        text = (f"data race in kernel '{launch.kernel}' on {where}: {op} by program {pid}"
                + (f" at {line}" if line else "") + f" and {other_op} by program {other_pid}"
                + (f" at {other_line}" if other_line else "")
                + f" (which ran first here); no release -> acquire chain orders program {other_pid}'s access "
                  f"before program {pid}'s, so on a GPU they may happen in either order or at once")
        raise DataRace(text, kernel=launch.kernel, operand=operand, offset=offset, coordinates=coords,
                       address=address, program_id=pid, op=op, line=line, other_program_id=other_pid,
                       other_op=other_op, other_line=other_line)


class RacesChecked:
    """Context manager: launches inside run with every global-memory access race-checked; the
    programs run in program-id order unless a schedule.ordered() block says otherwise."""

    # programs that share no memory have nothing to report: such a launch may run without the detector
    # (together.py checks that they share none)
    accepts_programs_apart = True

    def __enter__(self) -> RacesChecked:
        schedule.observe(self)
        return self

    def __exit__(self, *exc) -> bool:
        schedule.forget(self)
        return False

    def launch(self, launch: Launch) -> _Detector:
        return _Detector(launch)


def checked() -> RacesChecked:
    """`with checked(): ...` raises DataRace from the first launch in the block whose programs race."""
    return RacesChecked()
