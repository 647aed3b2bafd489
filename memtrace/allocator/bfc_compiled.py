"""The BFC replay's loop over events, compiled by numba where it is installed (``pip install memtrace[fast]``).

``bfc._Run`` keeps everything around the loop (where a replay starts, its snapshots, the states it keeps where it
makes a region, TF's retry once a request fails, the periods it skips): this module is the loop alone, the same
rules event by event, with the allocator's state in arrays instead of Python lists and dicts. It is a
transcription of ``_Run._replay``'s loop, which stays the reference: ``tests/test_bfc_compiled.py`` replays both
on the same sequences and compares every event's statistics, the failure, the peaks, the proven limits and every
state kept.

The state: free chunks as three sorted columns (size, address, chunk), the bins' order; chunks as a table of
handles (address, size, neighbours in address order, free or in use, the row that allocated it), so a free merges
with its neighbours without looking them up by address; the chunk of each allocation row in use. A handle of a
chunk merged away is reused. The loop stops where ``_Run`` must act (a state to keep before an extension, a
request that fails, a table too small) and goes on from the same row when asked.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import numpy.typing as npt

try:
    import numba
except ImportError:  # pragma: no cover - the pure-Python replay serves
    numba = None  # type: ignore[assignment]

IntArray = npt.NDArray[np.int64]

# What a run of the loop ended with.
DONE, FAILED, CHECKPOINT, FULL, TOO_MANY_REGIONS = 0, 1, 2, 3, 4

# The scalars of the state, by index into one int64 array.
(POOL, IN_USE, PEAK, MAX_POOL, GROWTH, REGIONS, FREE_COUNT, HANDLES, SPARE, KEPT_WHOLE, SPLIT_AT, PEAK_MOVING,
 POOL_MOVING, DLO, DHI, POOL_SLOPE, GROWTH_SLOPE, TFREE, TSIZE, TEND, TRACK, FTRACK, GIVEN, ROW, RECORDED,
 SKIP_CHECKPOINT) = range(26)
_SCALARS = 26
# The options, by index into another.
LIMIT, MAX_FRAG, GC, RECORD, CHECKPOINTS, KEEP_FROM, DESCENDING, REGION_SHIFT, REGION_SLOTS = range(9)

_IN_USE_CHUNK, _FREE_CHUNK, _NO_CHUNK = 2, 1, 0
# Room for this many chunks when a state is loaded (or twice as many as it has): each doubling copies ten columns,
# and a replay of a training step holds thousands of chunks.
_FIRST_CHUNK_ROOM = 4096


def available() -> bool:
    """Whether the compiled loop can run: numba installed, and the loop compiled (or read from numba's cache) by it.

    A numba that cannot compile it (a release this module was not tested with) leaves the replay to Python, with a
    warning once, rather than failing the command."""
    if not _usable:
        if numba is None:
            _usable.append(False)
        else:
            try:
                machine = Machine(np.array([256, -1], dtype=np.int64), 1 << 20, 128 << 20, 0.0, False, True, False, 0,
                                  (), False, 44, (1 << 18) - 1, 0)
                nothing = np.zeros(0, dtype=np.int64)
                machine.load(nothing, nothing, nothing, nothing, nothing, {}, [], {},
                             {"GROWTH": 1 << 20, "KEPT_WHOLE": -1, "TFREE": -1, "TEND": -1})
                machine.run(0, 2)
                _usable.append(bool(machine.recorded[2].tolist() == [256, 0]))
            except Exception as error:  # noqa: BLE001 - numba's errors have no common public base
                warnings.warn(f"memtrace: numba could not compile the allocator replay ({type(error).__name__}: "
                              f"{error}); replaying in Python", RuntimeWarning, stacklevel=2)
                _usable.append(False)
    return _usable[0]


_usable: list[bool] = []  # available()'s answer, once found


def _jit(function: Any) -> Any:
    return numba.njit(cache=True, nogil=True)(function) if numba is not None else function


@_jit
def _find(sizes: IntArray, addresses: IntArray, count: int, size: int, address: int) -> int:
    """Where (size, address) goes among the first ``count`` free chunks: bisect_left on the keys."""
    low, high = 0, count
    while low < high:
        middle = (low + high) >> 1
        if sizes[middle] < size or (sizes[middle] == size and addresses[middle] < address):
            low = middle + 1
        else:
            high = middle
    return low


@_jit
def _keep(value: int, slope: int, low: int, high: int) -> tuple[int, int]:
    """``bfc._keep``: narrow [low, high] to where ``value + slope * d >= 0`` is what it is at d = 0."""
    if slope > 0:
        edge = -(value // slope)
        if value >= 0:
            return max(low, edge), high
        return low, min(high, edge - 1)
    if slope < 0:
        edge = value // -slope
        if value >= 0:
            return low, min(high, edge)
        return max(low, edge + 1), high
    return low, high


@_jit
def _fraction_edge(fraction: float, remainder: int) -> int:
    """``bfc._fraction_edge``: the largest limit L with int(fraction * L) <= remainder."""
    limit = int((remainder + 1) / fraction)
    while limit > 0 and int(fraction * limit) > remainder:
        limit -= 1
    while int(fraction * (limit + 1)) <= remainder:
        limit += 1
    return limit


@_jit
def _splits_tail(d: int, x: int, tsize: int, limit: int, fraction: float) -> bool:
    size = tsize + d
    return size >= 2 * x or size - x >= int(fraction * (limit + d))


@_jit
def _tail_split_bound(x: int, tsize: int, dlo: int, dhi: int, limit: int, fraction: float) -> tuple[int, int]:
    """``_Run._tail_split_bound``: where the chunk that moves with the limit is split as it is here."""
    here = _splits_tail(0, x, tsize, limit, fraction)
    step = 1
    while True:
        d = -step if here else step
        if here:
            if d < dlo or _splits_tail(d, x, tsize, limit, fraction) != here:
                break
        elif d > dhi or _splits_tail(d, x, tsize, limit, fraction) != here:
            break
        step *= 2
    if here:
        good, bad = -(step // 2), -step
    else:
        good, bad = step // 2, step
    while abs(bad - good) > 1:
        middle = (good + bad) // 2
        if _splits_tail(middle, x, tsize, limit, fraction) == here:
            good = middle
        else:
            bad = middle
    if here:
        return max(dlo, good), dhi
    return dlo, min(dhi, good)


@_jit
def _slot(region: int, order: IntArray, descending: int, slots: int) -> int:
    """``BFCOptions.address_slot``."""
    known = order.shape[0]
    if region < known:
        return order[region] + (slots - known + 1 if descending else 0)
    return slots - region if descending else region


@_jit
def _remove_key(sizes: IntArray, addresses: IntArray, handles: IntArray, count: int, at: int) -> None:
    sizes[at:count - 1] = sizes[at + 1:count]
    addresses[at:count - 1] = addresses[at + 1:count]
    handles[at:count - 1] = handles[at + 1:count]


@_jit
def _insert_key(sizes: IntArray, addresses: IntArray, handles: IntArray, count: int, size: int, address: int,
                handle: int) -> None:
    at = _find(sizes, addresses, count, size, address)
    sizes[at + 1:count + 1] = sizes[at:count]
    addresses[at + 1:count + 1] = addresses[at:count]
    handles[at + 1:count + 1] = handles[at:count]
    sizes[at] = size
    addresses[at] = address
    handles[at] = handle


@_jit
def _new_handle(s: IntArray, spare: IntArray) -> int:
    if s[SPARE] > 0:
        s[SPARE] -= 1
        return spare[s[SPARE]]
    s[HANDLES] += 1
    return s[HANDLES] - 1


@_jit
def _replay_rows(events: IntArray, begin: int, end: int, s: IntArray, o: IntArray, fraction: float, order: IntArray,
        key_size: IntArray, key_address: IntArray, key_handle: IntArray,
        chunk_address: IntArray, chunk_size: IntArray, chunk_prev: IntArray, chunk_next: IntArray,
        chunk_state: IntArray, chunk_row: IntArray, spare: IntArray, chunk_of: npt.NDArray[np.int32],
        region_size: IntArray, region_made: IntArray, region_row: IntArray, region_live: IntArray,
        region_slope: IntArray, region_chunk: IntArray, given: IntArray, recorded: IntArray) -> int:
    """Replay rows ``begin``..``end`` (``s[ROW]`` is where it stopped, the row to go on from; see the statuses)."""
    limit, max_frag, gc, record = o[LIMIT], o[MAX_FRAG], o[GC], o[RECORD]
    checkpoints, keep_from, descending, shift, slots = o[CHECKPOINTS], o[KEEP_FROM], o[DESCENDING], o[REGION_SHIFT], \
        o[REGION_SLOTS]
    pool, in_use, peak, max_pool, growth = s[POOL], s[IN_USE], s[PEAK], s[MAX_POOL], s[GROWTH]
    count = s[FREE_COUNT]
    kept_whole, split_at, peak_moving, pool_moving = s[KEPT_WHOLE], s[SPLIT_AT], s[PEAK_MOVING], s[POOL_MOVING]
    dlo, dhi, pool_slope, growth_slope = s[DLO], s[DHI], s[POOL_SLOPE], s[GROWTH_SLOPE]
    tfree, tsize, tend, track, ftrack = s[TFREE], s[TSIZE], s[TEND], s[TRACK], s[FTRACK]
    written = s[RECORDED]
    key_room, chunk_room = key_size.shape[0], chunk_address.shape[0]
    status = DONE
    row = begin
    while row < end:
        x = events[row]
        # Room for what one event may add: two keys, two handles, a region.
        # (Regions given back are fewer than regions made: ``given`` holds two numbers for each region's room.)
        if count + 2 > key_room or s[HANDLES] + 2 > chunk_room or s[REGIONS] + 1 >= region_size.shape[0]:
            status = FULL
            break
        if x > 0:
            i = _find(key_size, key_address, count, x, 0)
            if i == count:
                if tfree >= 0 and x - 1 - tsize < dhi:
                    dhi = x - 1 - tsize
                if checkpoints and s[SKIP_CHECKPOINT] != row:
                    grown = growth
                    while x > grown:
                        grown *= 2
                    if pool + grown > keep_from:
                        status = CHECKPOINT
                        break
                made = False
                for attempt in range(2):
                    room = (limit - pool) & ~255
                    if track:
                        dlo, dhi = _keep(room - x, 1 - pool_slope, dlo, dhi)
                    if x <= room:
                        grew = False
                        while True:
                            if track:
                                dlo, dhi = _keep(growth - x, growth_slope, dlo, dhi)
                            if x <= growth:
                                break
                            growth *= 2
                            growth_slope *= 2
                            grew = True
                        slope = 0
                        if track:
                            dlo, dhi = _keep(growth - room, growth_slope - 1 + pool_slope, dlo, dhi)
                            slope = 1 - pool_slope if room <= growth else growth_slope
                        size = min(room, growth)
                        if not grew:
                            growth *= 2
                            growth_slope *= 2
                        r = s[REGIONS]
                        if r >= slots:
                            status = TOO_MANY_REGIONS
                            break
                        s[REGIONS] = r + 1
                        region_row[r] = row
                        region_size[r] = size
                        region_made[r] = size
                        region_live[r] = 1
                        base = _slot(r, order, descending, slots) << shift
                        pool += size
                        if pool_slope or slope:
                            pool_moving = max(pool_moving, pool)
                        else:
                            max_pool = max(max_pool, pool)
                        h = _new_handle(s, spare)
                        chunk_address[h] = base
                        chunk_size[h] = size
                        chunk_prev[h] = -1
                        chunk_next[h] = -1
                        chunk_state[h] = _FREE_CHUNK
                        chunk_row[h] = -1
                        region_chunk[r] = h
                        _insert_key(key_size, key_address, key_handle, count, size, base, h)
                        count += 1
                        if slope:
                            if slope != 1 or tend >= 0:
                                track = 0
                                ftrack = 0
                                dlo = 0
                                dhi = 0
                                tfree = -1
                                tend = -1
                            else:
                                region_slope[r] = slope
                                pool_slope += slope
                                tfree, tsize, tend = base, size, base + size
                        made = True
                        break
                    if attempt or not gc:
                        break
                    # Garbage collection: free every wholly free region, if that could make room.
                    freed_total = 0
                    freed_slope = 0
                    for r in range(s[REGIONS]):
                        h = region_chunk[r]
                        if region_live[r] and chunk_state[h] == _FREE_CHUNK and chunk_size[h] == region_size[r]:
                            freed_total += region_size[r]
                            freed_slope += region_slope[r]
                    if track:
                        dlo, dhi = _keep(limit - pool + freed_total - x, 1 - pool_slope + freed_slope, dlo, dhi)
                    if not freed_total or x > limit - pool + freed_total:
                        break
                    for r in range(s[REGIONS]):
                        h = region_chunk[r]
                        if region_live[r] and chunk_state[h] == _FREE_CHUNK and chunk_size[h] == region_size[r]:
                            at = _find(key_size, key_address, count, chunk_size[h], chunk_address[h])
                            _remove_key(key_size, key_address, key_handle, count, at)
                            count -= 1
                            chunk_state[h] = _NO_CHUNK
                            spare[s[SPARE]] = h
                            s[SPARE] += 1
                            region_live[r] = 0
                            pool -= region_size[r]
                            if record:
                                given[2 * s[GIVEN]] = r
                                given[2 * s[GIVEN] + 1] = row
                                s[GIVEN] += 1
                            if region_slope[r]:
                                pool_slope -= region_slope[r]
                                region_slope[r] = 0
                                tfree = -1
                                tend = -1
                if status == TOO_MANY_REGIONS:
                    break
                if not made:
                    status = FAILED
                    break
                i = _find(key_size, key_address, count, x, 0)
            size = key_size[i]
            addr = key_address[i]
            h = key_handle[i]
            if tfree >= 0:  # the moving chunk is free: it must fit, or not, and sort, as it does here
                if addr == tfree:
                    dlo = max(dlo, x - tsize)
                    if i + 1 < count:
                        bound = key_size[i + 1] - tsize - (0 if tfree < key_address[i + 1] else 1)
                        dhi = min(dhi, bound)
                    if ftrack:
                        if size >= 2 * x:
                            dlo = max(dlo, 2 * x - tsize)
                        else:
                            dlo, dhi = _tail_split_bound(x, tsize, dlo, dhi, limit, fraction)
                    else:
                        cut = min(2 * x, x + max_frag)
                        if size >= cut:
                            dlo = max(dlo, cut - tsize)
                        elif cut - 1 - tsize < dhi:
                            dhi = cut - 1 - tsize
                elif tsize < x:
                    dhi = min(dhi, x - 1 - tsize)
                else:
                    bound = size - tsize + (0 if tfree > addr else 1)
                    dlo = max(dlo, bound)
            if ftrack and size < 2 * x and addr != tfree:
                if size - x >= max_frag:
                    if int(fraction * (limit + dhi)) > size - x:
                        dhi = _fraction_edge(fraction, size - x) - limit
                elif int(fraction * (limit + dlo)) <= size - x:
                    dlo = _fraction_edge(fraction, size - x) + 1 - limit
            if size >= 2 * x or size - x >= max_frag:
                if size < 2 * x and size - x < split_at:
                    split_at = size - x
                rest = addr + x
                after = _new_handle(s, spare)
                chunk_address[after] = rest
                chunk_size[after] = size - x
                chunk_state[after] = _FREE_CHUNK
                chunk_row[after] = -1
                chunk_prev[after] = h
                chunk_next[after] = chunk_next[h]
                if chunk_next[h] >= 0:
                    chunk_prev[chunk_next[h]] = after
                chunk_next[h] = after
                chunk_size[h] = x
                # the rest sorts at or before the chunk it is cut from: keys[j:i] move up one, the rest at j
                j = _find(key_size, key_address, i, size - x, rest)
                key_size[j + 1:i + 1] = key_size[j:i]
                key_address[j + 1:i + 1] = key_address[j:i]
                key_handle[j + 1:i + 1] = key_handle[j:i]
                key_size[j] = size - x
                key_address[j] = rest
                key_handle[j] = after
                if addr == tfree:
                    tfree, tsize = rest, size - x
                size = x
            else:
                kept_whole = max(kept_whole, size - x)
                _remove_key(key_size, key_address, key_handle, count, i)
                count -= 1
                if addr == tfree:
                    tfree = -1
            chunk_state[h] = _IN_USE_CHUNK
            chunk_row[h] = row
            chunk_of[row] = h
            in_use += size
            if tend < 0 or tfree >= 0:
                peak = max(peak, in_use)
            elif in_use > peak_moving:
                peak_moving = in_use
            if record:
                recorded[0, written] = addr
                recorded[1, written] = size
        elif x < 0:
            h = np.int64(chunk_of[~x])
            if h < 0:  # a 0-byte allocation's, or one freed already
                if record:
                    recorded[0, written] = -1
                    recorded[1, written] = 0
            else:
                chunk_of[~x] = -1
                addr = chunk_address[h]
                size = chunk_size[h]
                in_use -= size
                following = chunk_next[h]
                if following >= 0 and chunk_state[following] == _FREE_CHUNK:
                    at = _find(key_size, key_address, count, chunk_size[following], chunk_address[following])
                    _remove_key(key_size, key_address, key_handle, count, at)
                    count -= 1
                    chunk_size[h] += chunk_size[following]
                    chunk_next[h] = chunk_next[following]
                    if chunk_next[following] >= 0:
                        chunk_prev[chunk_next[following]] = h
                    chunk_state[following] = _NO_CHUNK
                    spare[s[SPARE]] = following
                    s[SPARE] += 1
                before = chunk_prev[h]
                if before >= 0 and chunk_state[before] == _FREE_CHUNK:
                    at = _find(key_size, key_address, count, chunk_size[before], chunk_address[before])
                    _remove_key(key_size, key_address, key_handle, count, at)
                    count -= 1
                    chunk_size[before] += chunk_size[h]
                    chunk_next[before] = chunk_next[h]
                    if chunk_next[h] >= 0:
                        chunk_prev[chunk_next[h]] = before
                    chunk_state[h] = _NO_CHUNK
                    spare[s[SPARE]] = h
                    s[SPARE] += 1
                    h = before
                chunk_state[h] = _FREE_CHUNK
                chunk_row[h] = -1
                _insert_key(key_size, key_address, key_handle, count, chunk_size[h], chunk_address[h], h)
                count += 1
                if chunk_address[h] + chunk_size[h] == tend:  # the chunk that moves with the limit is free again
                    tfree, tsize = chunk_address[h], chunk_size[h]
                if record:
                    recorded[0, written] = addr
                    recorded[1, written] = size
        elif record:
            recorded[0, written] = -1
            recorded[1, written] = 0
        if record:
            recorded[2, written] = in_use
            recorded[3, written] = pool
            recorded[4, written] = key_size[count - 1] if count else 0
            written += 1
        row += 1
    s[ROW] = row
    s[POOL], s[IN_USE], s[PEAK], s[MAX_POOL], s[GROWTH] = pool, in_use, peak, max_pool, growth
    s[FREE_COUNT] = count
    s[KEPT_WHOLE], s[SPLIT_AT], s[PEAK_MOVING], s[POOL_MOVING] = kept_whole, split_at, peak_moving, pool_moving
    s[DLO], s[DHI], s[POOL_SLOPE], s[GROWTH_SLOPE] = dlo, dhi, pool_slope, growth_slope
    s[TFREE], s[TSIZE], s[TEND], s[TRACK], s[FTRACK] = tfree, tsize, tend, track, ftrack
    s[RECORDED] = written
    return status


def _grown(column: IntArray, room: int, kept: int) -> IntArray:
    """``column`` with room for ``room`` values, its first ``kept`` kept."""
    grown = np.zeros(room, dtype=np.int64)
    grown[:kept] = column[:kept]
    return grown


class Machine:
    """The compiled loop's state between runs: what ``bfc._Run`` loads into it, runs, and reads back.

    Loaded from the plain form ``bfc._Run`` keeps a state in (free chunks in key order, chunks in use by row,
    live regions), and read back in it, for the states a replay keeps and for its answer.
    """

    def __init__(self, events: IntArray, limit: int, max_frag: int, fraction: float, gc: bool, record: bool,
                 checkpoints: bool, keep_from: int, region_order: tuple[int, ...], descending: bool,
                 region_shift: int, region_slots: int, first_row: int) -> None:
        self.events = events
        self.options = np.array([limit, max_frag, gc, record, checkpoints, keep_from, descending, region_shift,
                                 region_slots], dtype=np.int64)
        self.fraction = float(fraction)
        self.order = np.array(region_order, dtype=np.int64)
        self.s = np.zeros(_SCALARS, dtype=np.int64)
        self.chunk_of = np.full(len(events), -1, dtype=np.int32)  # (fewer chunks than 2**31: fewer events)
        self.recorded = np.zeros((5, len(events) - first_row if record else 0), dtype=np.int64)
        empty = np.zeros(0, dtype=np.int64)  # (the columns get their room when a state is loaded)
        self.key_size = self.key_address = self.key_handle = empty
        self.chunk_address = self.chunk_size = self.chunk_prev = self.chunk_next = empty
        self.chunk_state = self.chunk_row = self.spare = empty
        self.region_size = self.region_made = self.region_row = self.region_live = empty
        self.region_slope = self.region_chunk = self.given = empty

    # -- room

    def _keys(self, room: int) -> None:
        """Room for ``room`` free chunks (those there kept)."""
        count = int(self.s[FREE_COUNT])
        self.key_size = _grown(self.key_size, room, count)
        self.key_address = _grown(self.key_address, room, count)
        self.key_handle = _grown(self.key_handle, room, count)

    def _chunks(self, room: int) -> None:
        """Room for ``room`` chunks' handles (those made kept)."""
        handles = int(self.s[HANDLES])
        self.chunk_address = _grown(self.chunk_address, room, handles)
        self.chunk_size = _grown(self.chunk_size, room, handles)
        self.chunk_prev = _grown(self.chunk_prev, room, handles)
        self.chunk_next = _grown(self.chunk_next, room, handles)
        self.chunk_state = _grown(self.chunk_state, room, handles)
        self.chunk_row = _grown(self.chunk_row, room, handles)
        self.spare = _grown(self.spare, room, handles)

    def _regions(self, room: int) -> None:
        """Room for ``room`` regions (those made kept), and for as many given back."""
        made = int(self.s[REGIONS])
        self.region_size = _grown(self.region_size, room, made)
        self.region_made = _grown(self.region_made, room, made)
        self.region_row = _grown(self.region_row, room, made)
        self.region_live = _grown(self.region_live, room, made)
        self.region_slope = _grown(self.region_slope, room, made)
        self.region_chunk = _grown(self.region_chunk, room, made)
        self.given = _grown(self.given, 2 * room, 2 * made)

    def _grow(self) -> None:
        s = self.s
        if s[FREE_COUNT] + 2 > len(self.key_size):
            self._keys(2 * len(self.key_size))
        if s[HANDLES] + 2 > len(self.chunk_address):
            self._chunks(2 * len(self.chunk_address))
        if s[REGIONS] + 1 >= len(self.region_size):
            self._regions(2 * len(self.region_size))

    # -- loading and reading back

    def _base(self, region: int) -> int:
        o = self.options
        return int(_slot(region, self.order, o[DESCENDING], o[REGION_SLOTS])) << int(o[REGION_SHIFT])

    def load(self, free_sizes: IntArray, free_addresses: IntArray, used_rows: IntArray, used_addresses: IntArray,
             used_sizes: IntArray, regions: dict[int, int], region_rows: list[int], region_slope: dict[int, int],
             scalars: dict[str, int]) -> None:
        """Take a state in its plain form: free chunks in key order, chunks in use (row, address, size), the live
        regions (region -> size), the row that made each region, the regions that move with the limit, and the
        scalars by name (``POOL``, ...). Once, into a machine just made (its tables empty, its counts 0)."""
        s = self.s
        for name, value in scalars.items():
            s[globals()[name]] = int(value)
        addresses = np.concatenate([free_addresses, used_addresses]).astype(np.int64)
        by_address = np.argsort(addresses, kind="stable")
        addresses = addresses[by_address]
        sizes = np.concatenate([free_sizes, used_sizes]).astype(np.int64)[by_address]
        rows = np.concatenate([np.full(len(free_sizes), -1, dtype=np.int64), used_rows])[by_address]
        chunks = len(addresses)
        room = _FIRST_CHUNK_ROOM
        while room < chunks + 2:
            room *= 2
        self._chunks(room)
        handles = np.arange(chunks, dtype=np.int64)
        self.chunk_address[:chunks], self.chunk_size[:chunks], self.chunk_row[:chunks] = addresses, sizes, rows
        self.chunk_state[:chunks] = np.where(rows < 0, _FREE_CHUNK, _IN_USE_CHUNK)
        joined = addresses[1:] == addresses[:-1] + sizes[:-1]  # neighbours within a region (regions never touch)
        self.chunk_prev[:chunks] = -1
        self.chunk_next[:chunks] = -1
        self.chunk_prev[1:chunks][joined] = handles[:-1][joined]
        self.chunk_next[:chunks - 1][joined] = handles[1:][joined]
        in_use = rows >= 0
        self.chunk_of[rows[in_use]] = handles[in_use]
        s[HANDLES] = chunks
        count = len(free_sizes)
        self._keys(room)
        self.key_size[:count] = free_sizes
        self.key_address[:count] = free_addresses
        self.key_handle[:count] = np.searchsorted(addresses, free_addresses)
        s[FREE_COUNT] = count
        made = len(region_rows)
        room = 64
        while room < made + 2:
            room *= 2
        self._regions(room)
        s[REGIONS] = made
        self.region_row[:made] = region_rows
        for r, size in regions.items():
            self.region_size[r] = self.region_made[r] = size
            self.region_live[r] = 1
            self.region_chunk[r] = int(np.searchsorted(addresses, self._base(r)))
        for r, slope in region_slope.items():
            self.region_slope[r] = slope
        s[SKIP_CHECKPOINT] = -1

    def run(self, begin: int, end: int) -> int:
        """Replay rows ``begin``..``end``; stops early with a status (see :attr:`row`)."""
        while True:
            status = _replay_rows(self.events, begin, end, self.s, self.options, self.fraction, self.order,
                         self.key_size, self.key_address, self.key_handle,
                         self.chunk_address, self.chunk_size, self.chunk_prev, self.chunk_next, self.chunk_state,
                         self.chunk_row, self.spare, self.chunk_of,
                         self.region_size, self.region_made, self.region_row, self.region_live, self.region_slope,
                         self.region_chunk, self.given, self.recorded)
            if status != FULL:
                return int(status)
            self._grow()
            begin = self.row

    @property
    def row(self) -> int:
        """Where the last run stopped: the next row to replay (the one that stopped it)."""
        return int(self.s[ROW])

    def keep_no_checkpoints(self) -> None:
        """From here, stop for no state to keep before an extension."""
        self.options[CHECKPOINTS] = 0

    def skip_checkpoint(self, row: int) -> None:
        """The state before ``row`` is kept: go on past it."""
        self.s[SKIP_CHECKPOINT] = row

    def scalar(self, name: str) -> int:
        return int(self.s[globals()[name]])

    @property
    def chunks(self) -> int:
        """Chunks free and in use."""
        return int(self.s[HANDLES] - self.s[SPARE])

    def free_chunks(self) -> tuple[IntArray, IntArray]:
        """Free chunks in key order: sizes, addresses."""
        count = int(self.s[FREE_COUNT])
        return self.key_size[:count].copy(), self.key_address[:count].copy()

    def used_chunks(self, by_row: bool = True) -> tuple[IntArray, IntArray, IntArray]:
        """Chunks in use, by the row that allocated them (``by_row``; else in no order): rows, addresses, sizes."""
        handles = int(self.s[HANDLES])
        in_use = np.flatnonzero(self.chunk_state[:handles] == _IN_USE_CHUNK)
        if by_row:
            in_use = in_use[np.argsort(self.chunk_row[in_use], kind="stable")]
        return self.chunk_row[in_use], self.chunk_address[in_use], self.chunk_size[in_use]

    def regions(self) -> dict[int, int]:
        """The live regions, region -> size, in the order they were made."""
        made = int(self.s[REGIONS])
        return {r: int(self.region_size[r]) for r in np.flatnonzero(self.region_live[:made]).tolist()}

    def region_rows(self) -> list[int]:
        return self.region_row[:int(self.s[REGIONS])].tolist()

    def region_slopes(self) -> dict[int, int]:
        made = int(self.s[REGIONS])
        return {r: int(self.region_slope[r]) for r in np.flatnonzero(self.region_slope[:made]).tolist()}

    def made_since(self, first: int) -> list[tuple[int, int]]:
        """(region, size as made) of the regions made from region ``first`` on."""
        made = int(self.s[REGIONS])
        return [(r, int(self.region_made[r])) for r in range(first, made)]

    def given_back(self) -> list[tuple[int, int]]:
        """(region, row) of each region given back (a recording run's)."""
        given = self.given[:2 * int(self.s[GIVEN])]
        return list(zip(given[0::2].tolist(), given[1::2].tolist()))

    def recorded_table(self) -> IntArray:
        """The statistics of each event replayed (a recording run's): 5 rows (see ``_Run``'s tables)."""
        written = int(self.s[RECORDED])
        return self.recorded if written == self.recorded.shape[1] else self.recorded[:, :written].copy()

    def period_state(self) -> tuple[Any, ...]:
        """What must be equal for the replay to repeat from here as it did from an earlier row (``bfc._Run``'s
        comparison of states a period apart): every chunk where it was, the regions, what moves with the limit."""
        count, handles = int(self.s[FREE_COUNT]), int(self.s[HANDLES])
        in_use = np.flatnonzero(self.chunk_state[:handles] == _IN_USE_CHUNK)
        by_address = in_use[np.argsort(self.chunk_address[in_use])]
        s = self.s
        return (self.key_size[:count].tobytes(), self.key_address[:count].tobytes(),
                self.chunk_address[by_address].tobytes(), self.chunk_size[by_address].tobytes(), self.regions(),
                self.region_slopes(), tuple(s[[POOL, IN_USE, GROWTH, REGIONS, TFREE, TSIZE, TEND, POOL_SLOPE,
                                               GROWTH_SLOPE, TRACK, FTRACK]].tolist()))

    def live(self) -> dict[int, int]:
        """The allocations in use: row -> address, by row."""
        rows, addresses, _ = self.used_chunks()
        return dict(zip(rows.tolist(), addresses.tolist()))

    def relabel(self, live: dict[int, int]) -> None:
        """The same chunks in use, allocated by other rows (``live``: row -> address): where a replay moves on by
        whole periods, the chunks are where they were and the rows a period or more later."""
        handles = int(self.s[HANDLES])
        in_use = np.flatnonzero(self.chunk_state[:handles] == _IN_USE_CHUNK)
        self.chunk_of[self.chunk_row[in_use]] = -1
        handle_at = dict(zip(self.chunk_address[in_use].tolist(), in_use.tolist()))
        for row, address in live.items():
            h = handle_at[address]
            self.chunk_row[h] = row
            self.chunk_of[row] = h
